//! The KV stores of primary-key tables: one sorted key-value store per table
//! bucket, holding the bucket's current rows (encoded key → stored value),
//! and the changelog offset it has applied up to.
//!
//! All stores of a node live in one embedded LSM engine ([fjall]) under
//! `<data dir>/kv/`, one keyspace per bucket, so many buckets share one
//! block cache and one set of background threads.
//!
//! The bucket's changelog (its log tablet) is the write-ahead log: the
//! server appends a change to the changelog, makes it durable, keeps it in
//! memory, and writes the changes here in large sorted runs
//! ([`KvStore::ingest`]: straight into the engine's tables, past its
//! memtable and journal, which cost more per record than the rest of an
//! upsert). Each run carries the bucket's [`AppliedState`] (the changelog
//! offset the store holds up to, and its row count) as one more key of the
//! same ingestion, so the state and the rows it stands for become visible
//! and durable together: after any crash the store is exactly as of some
//! run, and the server replays the changelog from that run's offset. The
//! engine's journal is never synced; nothing in a store depends on it.
//!
//! ```text
//! <data dir>/kv/                      the engine (journal, tables)
//!   keyspace "t<table>_b<bucket>"              non-partitioned bucket
//!   keyspace "t<table>_p<partition>_b<bucket>" partitioned bucket
//!     0x00                 → offset i64 LE ‖ row count i64 LE (the state)
//!     0x01 ‖ encoded key   → stored value                     (the rows)
//! ```
//!
//! Stores written by Fjord before the state moved into the rows' keyspace
//! (an `applied` keyspace beside them) are dropped at open: each bucket then
//! rebuilds its store from its changelog, which keeps every live row.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};

use crate::error::{Result, StorageError};
use crate::manager::TableBucket;

/// Name of the directory under the data dir holding the KV engine.
pub const KV_DIR: &str = "kv";

/// The keyspace in which earlier Fjord versions recorded each store's
/// applied state (unsynced, apart from the rows: see the module doc).
const LEGACY_APPLIED_KEYSPACE: &str = "applied";

/// The key of a store's [`AppliedState`]: sorts before every row key.
const STATE_KEY: &[u8] = &[0x00];

/// The first byte of every row's key in a store, before the encoded key.
const ROW_TAG: u8 = 0x01;

/// Row keys up to this length are tagged on the stack, not the heap.
const INLINE_KEY_BYTES: usize = 64;

/// Bytes of an encoded [`AppliedState`]: offset and row count, both i64 LE.
const APPLIED_STATE_BYTES: usize = 16;

/// Default block cache of the engine, shared by every store (Fjord's
/// `kv.cache-size`): enough for the index and filter blocks of a few
/// million keys and the hot data blocks.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// Default largest journal the engine keeps before it flushes memtables
/// (`kv.journal-size`); bounds the engine's own replay at start-up (the
/// changelog replay is bounded by [`AppliedState::offset`]).
pub const DEFAULT_JOURNAL_BYTES: u64 = 256 << 20;

/// Options of the KV engine, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEngineOptions {
    /// Block cache shared by every store (`kv.cache-size`).
    pub cache_bytes: u64,
    /// Largest journal before memtables are flushed (`kv.journal-size`).
    pub journal_bytes: u64,
}

impl Default for KvEngineOptions {
    fn default() -> Self {
        Self {
            cache_bytes: DEFAULT_CACHE_BYTES,
            journal_bytes: DEFAULT_JOURNAL_BYTES,
        }
    }
}

/// What a store has applied: every changelog record below `offset` is in it
/// (and nothing at or above), and it holds `row_count` live keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppliedState {
    /// The changelog offset to replay from: the next one not applied.
    pub offset: i64,
    /// Live keys in the store.
    pub row_count: i64,
}

impl AppliedState {
    fn encode(self) -> [u8; APPLIED_STATE_BYTES] {
        let mut out = [0u8; APPLIED_STATE_BYTES];
        out[..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..].copy_from_slice(&self.row_count.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; APPLIED_STATE_BYTES] = bytes.try_into().ok()?;
        let (offset, row_count) = bytes.split_at(8);
        Some(Self {
            offset: i64::from_le_bytes(offset.try_into().ok()?),
            row_count: i64::from_le_bytes(row_count.try_into().ok()?),
        })
    }
}

/// One change to apply: `Some(value)` puts, `None` deletes.
pub type KvChange<'a> = (&'a [u8], Option<&'a [u8]>);

fn kv_error(what: &'static str, path: &Path, e: fjall::Error) -> StorageError {
    StorageError::Kv {
        what,
        path: path.to_owned(),
        message: e.to_string(),
    }
}

/// The node's KV engine: opens, lists and deletes the per-bucket stores.
/// Share it as `Arc<KvEngine>`.
pub struct KvEngine {
    db: Database,
    dir: PathBuf,
}

impl std::fmt::Debug for KvEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvEngine").field("dir", &self.dir).finish()
    }
}

impl KvEngine {
    /// Opens (recovering) or creates the engine under `<data_dir>/kv`.
    pub fn open(data_dir: &Path, options: &KvEngineOptions) -> Result<Self> {
        let dir = data_dir.join(KV_DIR);
        let db = Database::builder(&dir)
            .cache_size(options.cache_bytes)
            .max_journaling_size(options.journal_bytes)
            // Writes carry their own durability (buffered); the changelog
            // is the write-ahead log.
            .manual_journal_persist(true)
            .open()
            .map_err(|e| kv_error("opening the KV engine", &dir, e))?;
        let engine = Self { db, dir };
        engine.drop_legacy_stores()?;
        Ok(engine)
    }

    /// Deletes every store of the earlier layout (state in a keyspace of its
    /// own, which a crash could roll back apart from the rows): the server
    /// then rebuilds each from its changelog.
    fn drop_legacy_stores(&self) -> Result<()> {
        if !self.db.keyspace_exists(LEGACY_APPLIED_KEYSPACE) {
            return Ok(());
        }
        let stores = self.stores();
        tracing::warn!(
            dir = %self.dir.display(),
            stores = stores.len(),
            "KV stores of an earlier format: deleting them; each bucket rebuilds its store from its changelog"
        );
        for tb in stores {
            self.delete_store(tb)?;
        }
        let legacy = self
            .db
            .keyspace(LEGACY_APPLIED_KEYSPACE, KeyspaceCreateOptions::default)
            .map_err(|e| kv_error("opening the legacy applied-state keyspace", &self.dir, e))?;
        self.db
            .delete_keyspace(legacy)
            .map_err(|e| kv_error("deleting the legacy applied-state keyspace", &self.dir, e))
    }

    /// The engine's directory (`<data dir>/kv`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The keyspace name of a bucket's store.
    pub fn store_name(tb: TableBucket) -> String {
        match tb.partition_id {
            None => format!("t{}_b{}", tb.table_id, tb.bucket),
            Some(p) => format!("t{}_p{p}_b{}", tb.table_id, tb.bucket),
        }
    }

    fn parse_store_name(name: &str) -> Option<TableBucket> {
        let rest = name.strip_prefix('t')?;
        let (table, rest) = rest.split_once('_')?;
        let (partition_id, bucket) = match rest.split_once('_') {
            Some((p, b)) => (Some(p.strip_prefix('p')?.parse().ok()?), b),
            None => (None, rest),
        };
        Some(TableBucket {
            table_id: table.parse().ok()?,
            partition_id,
            bucket: bucket.strip_prefix('b')?.parse().ok()?,
        })
    }

    /// Opens (or creates, empty and at offset 0) the store of `tb`.
    pub fn open_store(&self, tb: TableBucket) -> Result<KvStore> {
        let name = Self::store_name(tb);
        let data = self
            .db
            .keyspace(&name, KeyspaceCreateOptions::default)
            .map_err(|e| kv_error("opening a bucket's KV store", &self.dir, e))?;
        Ok(KvStore {
            inner: Arc::new(StoreInner {
                db: self.db.clone(),
                data,
                name: name.into_boxed_str(),
                dir: self.dir.clone(),
            }),
        })
    }

    /// The buckets that have a store (for start-up: stores of dropped
    /// tables are deleted).
    pub fn stores(&self) -> Vec<TableBucket> {
        self.db
            .list_keyspace_names()
            .iter()
            .filter_map(|name| Self::parse_store_name(name.as_ref()))
            .collect()
    }

    /// Deletes the store of `tb`, its applied state with it (no-op if
    /// absent).
    pub fn delete_store(&self, tb: TableBucket) -> Result<()> {
        let name = Self::store_name(tb);
        if !self.db.keyspace_exists(&name) {
            return Ok(());
        }
        let data = self
            .db
            .keyspace(&name, KeyspaceCreateOptions::default)
            .map_err(|e| kv_error("opening a KV store to delete it", &self.dir, e))?;
        self.db
            .delete_keyspace(data)
            .map_err(|e| kv_error("deleting a KV store", &self.dir, e))
    }

    /// Makes every write so far durable (clean shutdown, tests).
    pub fn persist(&self) -> Result<()> {
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| kv_error("syncing the KV engine", &self.dir, e))
    }
}

struct StoreInner {
    db: Database,
    data: Keyspace,
    name: Box<str>,
    dir: PathBuf,
}

/// One bucket's KV store. Cloning shares it. Reads see every applied batch
/// (a batch is all or nothing to readers).
#[derive(Clone)]
pub struct KvStore {
    inner: Arc<StoreInner>,
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvStore")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// A stored value as the engine hands it out (reference counted; derefs to
/// the bytes).
pub type KvValue = fjall::Slice;

impl KvStore {
    fn err(&self, what: &'static str, e: fjall::Error) -> StorageError {
        kv_error(what, &self.inner.dir, e)
    }

    /// The store's applied state (offset 0 and no rows for a new store).
    pub fn applied(&self) -> Result<AppliedState> {
        let raw = self
            .inner
            .data
            .get(STATE_KEY)
            .map_err(|e| self.err("reading a KV store's applied state", e))?;
        match raw {
            None => Ok(AppliedState::default()),
            Some(bytes) => AppliedState::decode(&bytes).ok_or_else(|| StorageError::Kv {
                what: "reading a KV store's applied state",
                path: self.inner.dir.clone(),
                message: format!("{} bytes, expected {APPLIED_STATE_BYTES}", bytes.len()),
            }),
        }
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<KvValue>> {
        with_row_key(key, |key| self.inner.data.get(key))
            .map_err(|e| self.err("reading a KV store", e))
    }

    /// Writes `changes` — keys strictly ascending — and `state` into the
    /// store as new tables (puts and tombstones shadow what the store
    /// held). All or nothing, to readers and after a crash; durable once it
    /// returns. Panics if the keys are not strictly ascending.
    pub fn ingest<'a>(
        &self,
        changes: impl IntoIterator<Item = KvChange<'a>>,
        state: AppliedState,
    ) -> Result<()> {
        let mut ingestion = self
            .inner
            .data
            .start_ingestion()
            .map_err(|e| self.err("writing a KV store", e))?;
        ingestion
            .write(STATE_KEY, state.encode().as_slice())
            .map_err(|e| self.err("writing a KV store", e))?;
        // One buffer for every row's tagged key of the run.
        let mut tagged = vec![ROW_TAG];
        for (key, value) in changes {
            tagged.truncate(1);
            tagged.extend_from_slice(key);
            match value {
                Some(value) => ingestion.write(&tagged[..], value),
                None => ingestion.write_tombstone(&tagged[..]),
            }
            .map_err(|e| self.err("writing a KV store", e))?;
        }
        ingestion
            .finish()
            .map_err(|e| self.err("writing a KV store", e))
    }

    /// Removes every key and resets the applied state to `state` (for a
    /// rebuild from the changelog). A crash in between leaves an empty
    /// store at offset 0, which a rebuild also starts from.
    pub fn clear(&self, state: AppliedState) -> Result<()> {
        self.inner
            .data
            .clear()
            .map_err(|e| self.err("clearing a KV store", e))?;
        self.ingest(std::iter::empty(), state)
    }

    /// A consistent, point-in-time view of the store, for scans that span
    /// several requests. Keep it short-lived: it holds back compaction.
    pub fn snapshot(&self) -> KvSnapshot {
        KvSnapshot {
            snapshot: self.inner.db.snapshot(),
            store: self.clone(),
        }
    }

    /// Every (key, value) whose key starts with `prefix`, in key order,
    /// calling `each` until it returns `false`.
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
        mut each: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        with_row_key(prefix, |prefix| {
            for guard in self.inner.data.prefix(prefix) {
                let (key, value) = guard.into_inner()?;
                if !each(&key[1..], &value) {
                    break;
                }
            }
            Ok(())
        })
        .map_err(|e| self.err("scanning a KV store", e))
    }

    /// Compacts the whole store into its last level (blocking; benchmarks
    /// and tools: the engine compacts in the background on its own).
    pub fn compact(&self) -> Result<()> {
        self.inner
            .data
            .major_compact()
            .map_err(|e| self.err("compacting a KV store", e))
    }

    /// Tables in the store's first LSM level: the engine stalls writes as
    /// this grows, so the server reads it as back-pressure.
    pub fn l0_table_count(&self) -> usize {
        self.inner.data.l0_table_count()
    }
}

/// A point-in-time view of one store (see [`KvStore::snapshot`]).
pub struct KvSnapshot {
    snapshot: fjall::Snapshot,
    store: KvStore,
}

impl KvSnapshot {
    /// Entries with keys strictly after `after` (from the first key when
    /// `None`), in key order, calling `each` until it returns `false`.
    pub fn scan_from(
        &self,
        after: Option<&[u8]>,
        mut each: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        use std::ops::Bound;
        let data = &self.store.inner.data;
        let first_row: &[u8] = &[ROW_TAG];
        with_row_key(after.unwrap_or_default(), |after_key| {
            let range: (Bound<&[u8]>, Bound<&[u8]>) = match after {
                Some(_) => (Bound::Excluded(after_key), Bound::Unbounded),
                None => (Bound::Included(first_row), Bound::Unbounded),
            };
            for guard in self.snapshot.range::<&[u8], _>(data, range) {
                let (key, value) = guard.into_inner()?;
                if !each(&key[1..], &value) {
                    break;
                }
            }
            Ok(())
        })
        .map_err(|e| self.store.err("scanning a KV snapshot", e))
    }
}

/// Calls `f` with `key` as the store holds it: after [`ROW_TAG`].
fn with_row_key<R>(key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    if key.len() < INLINE_KEY_BYTES {
        let mut tagged = [0u8; INLINE_KEY_BYTES];
        tagged[0] = ROW_TAG;
        tagged[1..=key.len()].copy_from_slice(key);
        f(&tagged[..=key.len()])
    } else {
        let mut tagged = Vec::with_capacity(key.len() + 1);
        tagged.push(ROW_TAG);
        tagged.extend_from_slice(key);
        f(&tagged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(dir: &Path) -> KvEngine {
        KvEngine::open(dir, &KvEngineOptions::default()).unwrap()
    }

    fn bucket(table_id: i64, partition_id: Option<i64>, bucket: i32) -> TableBucket {
        TableBucket {
            table_id,
            partition_id,
            bucket,
        }
    }

    #[test]
    fn store_names_round_trip() {
        for tb in [bucket(7, None, 0), bucket(1, Some(42), 3)] {
            assert_eq!(
                KvEngine::parse_store_name(&KvEngine::store_name(tb)),
                Some(tb)
            );
        }
        assert_eq!(KvEngine::parse_store_name(LEGACY_APPLIED_KEYSPACE), None);
    }

    #[test]
    #[should_panic(expected = "greater than last key")]
    fn ingestion_keys_must_ascend() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let store = engine.open_store(bucket(1, None, 0)).unwrap();
        let _ = store.ingest(
            [(&b"b"[..], Some(&b"1"[..])), (b"a", Some(b"2"))],
            AppliedState::default(),
        );
    }

    #[test]
    fn later_ingestions_shadow_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let store = engine.open_store(bucket(1, None, 0)).unwrap();
        for round in 0..3u8 {
            store
                .ingest(
                    [
                        (&b"k"[..], Some(&[round][..])),
                        (b"z", (round < 2).then_some(&b"z"[..])),
                    ],
                    AppliedState {
                        offset: i64::from(round),
                        row_count: 0,
                    },
                )
                .unwrap();
        }
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&[2u8][..]));
        assert_eq!(store.get(b"z").unwrap(), None);
        assert_eq!(store.applied().unwrap().offset, 2);
    }

    /// Two runs: `a` and `b` put at offset 2, then `a` deleted at 3.
    fn ingest_two_runs(store: &KvStore) {
        store
            .ingest(
                [(&b"a"[..], Some(&b"1"[..])), (b"b", Some(b"2"))],
                AppliedState {
                    offset: 2,
                    row_count: 2,
                },
            )
            .unwrap();
        store
            .ingest(
                [(&b"a"[..], None)],
                AppliedState {
                    offset: 3,
                    row_count: 1,
                },
            )
            .unwrap();
    }

    /// The store holds both runs of [`ingest_two_runs`], rows and state.
    fn assert_two_runs(store: &KvStore) {
        assert_eq!(
            store.applied().unwrap(),
            AppliedState {
                offset: 3,
                row_count: 1
            }
        );
        assert_eq!(store.get(b"a").unwrap(), None);
        assert_eq!(store.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    }

    #[test]
    fn changes_and_applied_state_survive_reopen_together() {
        let dir = tempfile::tempdir().unwrap();
        let tb = bucket(1, None, 0);
        {
            let engine = engine(dir.path());
            let store = engine.open_store(tb).unwrap();
            assert_eq!(store.applied().unwrap(), AppliedState::default());
            ingest_two_runs(&store);
            engine.persist().unwrap();
        }
        let engine = engine(dir.path());
        assert_eq!(engine.stores(), vec![tb]);
        assert_two_runs(&engine.open_store(tb).unwrap());
    }

    #[test]
    fn prefix_scan_and_snapshot_scan_go_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let store = engine.open_store(bucket(1, Some(5), 2)).unwrap();
        let keys: [&[u8]; 4] = [b"aa", b"ab", b"ac", b"b"];
        store
            .ingest(keys.iter().map(|k| (*k, Some(*k))), AppliedState::default())
            .unwrap();
        let mut seen = Vec::new();
        store
            .scan_prefix(b"a", |k, _| {
                seen.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(seen, vec![b"aa".to_vec(), b"ab".to_vec(), b"ac".to_vec()]);

        let snapshot = store.snapshot();
        store
            .ingest([(&b"aa"[..], None)], AppliedState::default())
            .unwrap();
        let mut seen = Vec::new();
        snapshot
            .scan_from(Some(b"aa"), |k, _| {
                seen.push(k.to_vec());
                seen.len() < 2
            })
            .unwrap();
        assert_eq!(seen, vec![b"ab".to_vec(), b"ac".to_vec()]);
        let mut all = 0;
        snapshot
            .scan_from(None, |_, _| {
                all += 1;
                true
            })
            .unwrap();
        assert_eq!(all, 4, "the snapshot still sees the deleted key");
    }

    #[test]
    fn deleted_store_is_gone_and_reopens_empty() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let tb = bucket(3, None, 1);
        let store = engine.open_store(tb).unwrap();
        store
            .ingest(
                [(&b"k"[..], Some(&b"v"[..]))],
                AppliedState {
                    offset: 1,
                    row_count: 1,
                },
            )
            .unwrap();
        drop(store);
        engine.delete_store(tb).unwrap();
        assert!(engine.stores().is_empty());
        engine.delete_store(tb).unwrap();
        let store = engine.open_store(tb).unwrap();
        assert_eq!(store.get(b"k").unwrap(), None);
        assert_eq!(store.applied().unwrap(), AppliedState::default());
    }

    #[test]
    fn clear_resets_data_and_state() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let store = engine.open_store(bucket(1, None, 0)).unwrap();
        store
            .ingest(
                [(&b"k"[..], Some(&b"v"[..]))],
                AppliedState {
                    offset: 9,
                    row_count: 1,
                },
            )
            .unwrap();
        store.clear(AppliedState::default()).unwrap();
        assert_eq!(store.get(b"k").unwrap(), None);
        assert_eq!(store.applied().unwrap(), AppliedState::default());
    }

    /// Every journal file under `dir` with its bytes (the engine
    /// preallocates journals, so lengths say nothing).
    fn journals(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jnl"))
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect();
        out.sort();
        out
    }

    /// A power cut loses every journal write not synced, and the engine's
    /// journal never is: the state must still match the rows, both as of
    /// the last ingestion. (With the state in a journal write of its own,
    /// the rows came back at offset 0 and a replay counted them twice.)
    #[test]
    fn state_and_rows_survive_together_when_the_unsynced_journal_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let kv_dir = dir.path().join(KV_DIR);
        let tb = bucket(1, None, 0);
        let synced;
        {
            let engine = engine(dir.path());
            let store = engine.open_store(tb).unwrap();
            engine.persist().unwrap();
            synced = journals(&kv_dir);
            assert!(!synced.is_empty(), "the engine keeps a journal");
            ingest_two_runs(&store);
        }
        // The cut: each journal back to its synced bytes; later ones gone.
        for (path, _) in journals(&kv_dir) {
            match synced.iter().find(|(p, _)| *p == path) {
                Some((_, bytes)) => std::fs::write(&path, bytes).unwrap(),
                None => std::fs::remove_file(&path).unwrap(),
            }
        }
        let engine = engine(dir.path());
        assert_two_runs(&engine.open_store(tb).unwrap());
    }

    /// The state's key is not a row: scans, prefix scans and gets see only
    /// the rows, whatever bytes their keys start with.
    #[test]
    fn the_state_is_not_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine(dir.path());
        let store = engine.open_store(bucket(1, None, 0)).unwrap();
        let long = [0u8; INLINE_KEY_BYTES + 3];
        let keys: [&[u8]; 4] = [&[0x00], &[0x00, 0x01], &long, &[0x01]];
        let mut sorted = keys;
        sorted.sort();
        store
            .ingest(
                sorted.iter().map(|k| (*k, Some(*k))),
                AppliedState {
                    offset: 9,
                    row_count: 4,
                },
            )
            .unwrap();
        let mut seen = Vec::new();
        store
            .snapshot()
            .scan_from(None, |k, v| {
                assert_eq!(k, v);
                seen.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(seen, sorted.map(<[u8]>::to_vec).to_vec());
        let mut prefixed = Vec::new();
        store
            .scan_prefix(&[0x00], |k, _| {
                prefixed.push(k.to_vec());
                true
            })
            .unwrap();
        assert_eq!(prefixed.len(), 3, "every key starting 0x00, not the state");
        for key in keys {
            assert_eq!(store.get(key).unwrap().as_deref(), Some(key));
        }
        assert_eq!(store.get(&[0x02]).unwrap(), None);
        assert_eq!(store.applied().unwrap().offset, 9);
    }

    /// Stores of the earlier layout (rows untagged, the state in an
    /// `applied` keyspace) are dropped at open, so each bucket rebuilds
    /// from its changelog instead of reading rows it would misparse.
    #[test]
    fn stores_of_the_earlier_layout_are_dropped_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let tb = bucket(4, None, 2);
        {
            let db = Database::builder(dir.path().join(KV_DIR)).open().unwrap();
            let data = db
                .keyspace(&KvEngine::store_name(tb), KeyspaceCreateOptions::default)
                .unwrap();
            data.insert(b"k", b"v").unwrap();
            let applied = db
                .keyspace(LEGACY_APPLIED_KEYSPACE, KeyspaceCreateOptions::default)
                .unwrap();
            applied
                .insert(KvEngine::store_name(tb), [7u8; APPLIED_STATE_BYTES])
                .unwrap();
            db.persist(PersistMode::SyncAll).unwrap();
        }
        let engine = engine(dir.path());
        assert_eq!(engine.stores(), Vec::new());
        let store = engine.open_store(tb).unwrap();
        assert_eq!(store.applied().unwrap(), AppliedState::default());
        assert_eq!(store.get(b"k").unwrap(), None);
        drop(store);
        drop(engine);
        // And the second open finds the new layout: nothing more to drop.
        let engine = self::engine(dir.path());
        assert_eq!(engine.stores(), vec![tb]);
    }
}
