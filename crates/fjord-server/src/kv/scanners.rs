//! [`KvScanners`]: the ScanKv sessions of a server. A session reads one
//! bucket's KV store from a snapshot taken when it opened, a batch per
//! request, resuming after the last key it returned; it lives until it is
//! read to the end, closed, or idle past `kv.scanner.ttl`.
//!
//! Limits (`kv.scanner.*`, Fluss's names and defaults): sessions per bucket
//! and per server (TOO_MANY_SCANNERS), the bytes of one answer. Expired
//! ids are remembered for two TTLs so a late client hears SCANNER_EXPIRED
//! rather than UNKNOWN_SCANNER_ID.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fjord_storage::kv::KvSnapshot;

use crate::config::KvScannerOptions;
use crate::error::{ApiError, ErrorCode};
use crate::replica::TableBucket;

/// One open scan.
pub struct ScanSession {
    /// The bucket scanned.
    pub bucket: TableBucket,
    /// The store as it was when the scan opened.
    pub snapshot: KvSnapshot,
    /// The last key returned (`None` before the first batch).
    pub last_key: Option<Vec<u8>>,
    /// Rows still to return (`None`: no limit).
    pub remaining: Option<u64>,
    /// The last call sequence id served (-1 before the first).
    pub call_seq: i32,
    last_used: Instant,
}

impl ScanSession {
    /// A session over `snapshot` of `bucket` returning at most `limit` rows.
    pub fn new(bucket: TableBucket, snapshot: KvSnapshot, limit: Option<u64>) -> Self {
        Self {
            bucket,
            snapshot,
            last_key: None,
            remaining: limit,
            call_seq: -1,
            last_used: Instant::now(),
        }
    }
}

struct State {
    open: HashMap<Bytes, ScanSession>,
    /// Ids of sessions that expired, and when, for SCANNER_EXPIRED.
    expired: HashMap<Bytes, Instant>,
}

/// The server's scan sessions. Shared by every connection.
pub struct KvScanners {
    options: KvScannerOptions,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// Distinguishes ids of this process from a previous one's.
    epoch: u64,
}

fn too_many(why: String) -> ApiError {
    ApiError::new(ErrorCode::TooManyScanners, why)
}

impl KvScanners {
    /// An empty registry with `options`' limits.
    pub fn new(options: KvScannerOptions) -> Self {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self {
            options,
            state: Mutex::new(State {
                open: HashMap::new(),
                expired: HashMap::new(),
            }),
            next_id: AtomicU64::new(0),
            epoch,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ttl(&self) -> Duration {
        Duration::from_millis(self.options.ttl_ms)
    }

    /// The most record bytes one answer may carry.
    pub fn batch_bytes_max(&self) -> usize {
        self.options.batch_bytes_max
    }

    /// Closes sessions idle past the TTL and forgets expired ids older
    /// than two TTLs. Called on every ScanKv and by the server's periodic
    /// maintenance.
    pub fn expire(&self) {
        let now = Instant::now();
        let ttl = self.ttl();
        let mut state = self.lock();
        let idle: Vec<Bytes> = state
            .open
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_used) > ttl)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            state.open.remove(&id);
            state.expired.insert(id, now);
        }
        state
            .expired
            .retain(|_, at| now.duration_since(*at) <= ttl * 2);
    }

    /// Checks the limits for a new session on `bucket`.
    pub fn check_room(&self, bucket: TableBucket) -> Result<(), ApiError> {
        let state = self.lock();
        if state.open.len() >= self.options.per_server_max {
            return Err(too_many(format!(
                "{} scanners are open on this server, the most kv.scanner.max-per-server allows",
                state.open.len()
            )));
        }
        let on_bucket = state.open.values().filter(|s| s.bucket == bucket).count();
        if on_bucket >= self.options.per_bucket_max {
            return Err(too_many(format!(
                "{on_bucket} scanners are open on {bucket}, the most kv.scanner.max-per-bucket allows"
            )));
        }
        Ok(())
    }

    /// A fresh session id (a 32-character hex string, unique for the life
    /// of the process and unlike any id of an earlier process).
    pub fn new_id(&self) -> Bytes {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        Bytes::from(format!("{:016x}{n:016x}", self.epoch))
    }

    /// Keeps `session` open under `id` for the requests that continue it,
    /// if the limits still allow.
    pub fn register(&self, id: Bytes, mut session: ScanSession) -> Result<(), ApiError> {
        self.check_room(session.bucket)?;
        session.last_used = Instant::now();
        self.lock().open.insert(id, session);
        Ok(())
    }

    /// Takes the session `id` out for one request: put it back with
    /// [`KvScanners::put_back`], or drop it to end the session.
    pub fn take(&self, id: &[u8]) -> Result<ScanSession, ApiError> {
        let mut state = self.lock();
        match state.open.remove(id) {
            Some(session) => Ok(session),
            None if state.expired.contains_key(id) => Err(ApiError::new(
                ErrorCode::ScannerExpired,
                "Scanner session has expired due to inactivity. Please start a new scan.",
            )),
            None => Err(ApiError::new(
                ErrorCode::UnknownScannerId,
                "Unknown scanner ID. The session may have expired or never existed.",
            )),
        }
    }

    /// Keeps `session` open under `id` after a request that read from it.
    pub fn put_back(&self, id: Bytes, mut session: ScanSession) {
        session.last_used = Instant::now();
        self.lock().open.insert(id, session);
    }

    /// Closes every session on the buckets `dropped` picks (a dropped
    /// table or partition).
    pub fn close_where(&self, dropped: impl Fn(&TableBucket) -> bool) {
        self.lock().open.retain(|_, s| !dropped(&s.bucket));
    }

    /// Open sessions (tests, metrics).
    pub fn len(&self) -> usize {
        self.lock().open.len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
