//! Exactly-once into log tables across restarts.
//!
//! Primary-key tables converge by themselves: a replayed change is an
//! upsert or delete of a whole row, so replaying events the table already
//! has leaves it as it was. A log table holds events, so a replayed event
//! would be held twice. The sink therefore commits, with every source
//! position (in the offset store, see `crate::offsets`), where each log
//! table it writes ended at that position: the table id and the end offset
//! of every bucket, read right after the flush that acknowledged every
//! event up to the position. A table the sink starts writing between two
//! commits gets its mark committed before its first row (at the last
//! committed position).
//!
//! After a restart the source replays from the committed position, and the
//! sink reads back what each marked log table holds past its mark: exactly
//! the rows written after that position before the stop. Their
//! fingerprints (128 bits over the values as stored) form a multiset, and
//! each replayed event whose row is in it is taken out of it and not
//! written again, until it is empty. Why this is exact: the source replays
//! the same events in the same order from a position; the rows past the
//! marks are a subset of those events (a bucket holds a prefix of what was
//! sent to it, in order; idempotent writes never duplicate); and two events
//! with equal rows are indistinguishable in a log table, so which of them
//! is skipped does not matter. Nothing is stored with the rows and nothing
//! is assumed about the writer's bucket choice (sticky by default).
//!
//! Assumption: the pipeline is the only writer of its log tables (another
//! writer's rows past a mark would take the place of replayed events).
//! A restart inside the snapshot of a table without a primary key re-reads
//! that table; rows of the earlier read that the new read also has are
//! matched, others stay.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use fjord_client::row::InternalRow;
use fjord_client::{FlussClient, LogScanner, OffsetSpec, ScannerConfig, TableInfo};

use super::convert::{hash_cdc_row, CdcRow, RowHasher};

/// Most rows read back per log table after a restart. Rows past a mark are
/// those of one commit interval (plus what was in flight); beyond this the
/// restart refuses rather than holding an unbounded set (16 bytes a row).
pub const REPLAY_ROWS_MAX: u64 = 50_000_000;

/// Where one log table ended at a committed position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogMark {
    /// The table's id (a table dropped and created again has another).
    pub table_id: i64,
    /// End offset of each bucket, in bucket order.
    pub ends: Vec<i64>,
}

/// The key of a sink table in the state and in matcher maps.
pub fn state_key(path: &fjord_client::TablePath) -> (String, String) {
    (path.database.clone(), path.table.clone())
}

/// The sink's state: the marks of the log tables it writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkState {
    /// Per sink table: (database, table).
    pub logs: BTreeMap<(String, String), LogMark>,
}

const STATE_VERSION: &str = "fluss1";

fn hex(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len() * 2);
    for b in text.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl SinkState {
    /// The text committed with a position (one line):
    /// `fluss1;<hex db>.<hex table>:<table id>:<end>,<end>...;...`.
    pub fn encode(&self) -> String {
        let mut out = String::from(STATE_VERSION);
        for ((database, table), mark) in &self.logs {
            out.push(';');
            out.push_str(&hex(database));
            out.push('.');
            out.push_str(&hex(table));
            out.push(':');
            out.push_str(&mark.table_id.to_string());
            out.push(':');
            let ends: Vec<String> = mark.ends.iter().map(i64::to_string).collect();
            out.push_str(&ends.join(","));
        }
        out
    }

    /// Reads [`SinkState::encode`]'s text back.
    pub fn decode(text: &str) -> Result<SinkState, String> {
        let mut parts = text.split(';');
        if parts.next() != Some(STATE_VERSION) {
            return Err(format!(
                "the stored fluss sink state does not start with {STATE_VERSION:?}: written by another version?"
            ));
        }
        let mut logs = BTreeMap::new();
        for entry in parts.filter(|p| !p.is_empty()) {
            let bad = || format!("unreadable fluss sink state entry {entry:?}");
            let mut fields = entry.split(':');
            let (path, id, ends) = (
                fields.next().ok_or_else(bad)?,
                fields.next().ok_or_else(bad)?,
                fields.next().ok_or_else(bad)?,
            );
            let (db, table) = path.split_once('.').ok_or_else(bad)?;
            let path = (unhex(db).ok_or_else(bad)?, unhex(table).ok_or_else(bad)?);
            let table_id = id.parse().map_err(|_| bad())?;
            let ends = ends
                .split(',')
                .filter(|e| !e.is_empty())
                .map(|e| e.parse().map_err(|_| bad()))
                .collect::<Result<Vec<i64>, String>>()?;
            logs.insert(path, LogMark { table_id, ends });
        }
        Ok(SinkState { logs })
    }
}

/// Two independent 64-bit hashes of the same input: a 128-bit fingerprint.
struct Fingerprint {
    a: std::collections::hash_map::DefaultHasher,
    b: std::collections::hash_map::DefaultHasher,
}

impl Fingerprint {
    fn new() -> Self {
        let a = std::collections::hash_map::DefaultHasher::new();
        let mut b = std::collections::hash_map::DefaultHasher::new();
        b.write_u64(0x9e37_79b9_7f4a_7c15);
        Fingerprint { a, b }
    }

    fn finish(&self) -> u128 {
        (u128::from(self.a.finish()) << 64) | u128::from(self.b.finish())
    }
}

impl Hasher for Fingerprint {
    fn write(&mut self, bytes: &[u8]) {
        self.a.write(bytes);
        self.b.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.a.finish()
    }
}

/// The fingerprint of a row read back from a log table.
pub fn fingerprint_stored(row: &impl InternalRow) -> u128 {
    let mut h = Fingerprint::new();
    let mut fields = RowHasher::new(&mut h);
    for i in 0..row.field_count() {
        fields.push(&row.datum(i));
    }
    h.finish()
}

/// The fingerprint of a CDC row as the sink would store it.
pub fn fingerprint_cdc(row: &CdcRow<'_>) -> u128 {
    let mut h = Fingerprint::new();
    hash_cdc_row(row, &mut h);
    h.finish()
}

/// Replayed events of one table in a row that match nothing, after which
/// the matcher gives up: the replay has passed the point the stopped run
/// had reached. Rows the stopped run had sent but not had acknowledged are
/// replayed unmatched among matched ones; their number is bounded by the
/// writer's buffer memory (64 MiB by default, some 2 M small rows), which
/// this exceeds.
pub const REPLAY_UNMATCHED_RUN_MAX: u64 = 4 << 20;

/// The rows a log table holds past its mark, to be matched by replayed events.
#[derive(Debug, Default)]
pub struct ReplayMatcher {
    counts: HashMap<u128, u32>,
    left: u64,
    /// Replayed rows since the last match.
    unmatched_run: u64,
}

impl ReplayMatcher {
    /// Whether every row read back has been matched.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// Rows not matched yet.
    pub fn left(&self) -> u64 {
        self.left
    }

    fn insert(&mut self, fingerprint: u128) {
        *self.counts.entry(fingerprint).or_insert(0) += 1;
        self.left += 1;
    }

    /// Whether so many replayed rows in a row matched nothing that the
    /// replay must have passed the stopped run's point
    /// ([`REPLAY_UNMATCHED_RUN_MAX`]).
    pub fn gave_up(&self) -> bool {
        self.unmatched_run >= REPLAY_UNMATCHED_RUN_MAX
    }

    /// Takes a replayed row: true if the table already holds it (then it
    /// must not be written again).
    pub fn take(&mut self, fingerprint: u128) -> bool {
        match self.counts.get_mut(&fingerprint) {
            Some(n) => {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&fingerprint);
                }
                self.left -= 1;
                self.unmatched_run = 0;
                true
            }
            None => {
                self.unmatched_run += 1;
                false
            }
        }
    }
}

/// Reads back the rows `table` holds past `mark` (all of them if the table
/// has another id than the mark's) up to the buckets' current ends.
pub async fn read_back(
    client: &FlussClient,
    table: &TableInfo,
    mark: Option<&LogMark>,
) -> Result<ReplayMatcher, String> {
    let buckets: Vec<i32> = (0..table.bucket_count()).collect();
    let ends = client
        .admin()
        .list_offsets(table, &buckets, OffsetSpec::Latest)
        .await
        .map_err(|e| format!("reading the end offsets of {}: {e}", table.path))?;
    let starts: Vec<i64> = buckets
        .iter()
        .map(|&b| match mark {
            Some(m) if m.table_id == table.table_id => m.ends.get(b as usize).copied().unwrap_or(0),
            _ => 0,
        })
        .collect();
    let mut matcher = ReplayMatcher::default();
    let total: i64 = ends.iter().zip(&starts).map(|(e, s)| (e - s).max(0)).sum();
    if total == 0 {
        return Ok(matcher);
    }
    if total as u64 > REPLAY_ROWS_MAX {
        return Err(format!(
            "{} holds {total} rows written after the last committed position, more than the {REPLAY_ROWS_MAX} a restart reads back; was the table written by someone else?",
            table.path
        ));
    }
    let route = client
        .table_route(table)
        .await
        .map_err(|e| format!("routing {}: {e}", table.path))?;
    let mut scanner = LogScanner::new(table.clone(), route, ScannerConfig::default())
        .map_err(|e| format!("scanning {}: {e}", table.path))?
        .with_client(client.clone());
    let mut pending = 0;
    for (&b, (&start, &end)) in buckets.iter().zip(starts.iter().zip(&ends)) {
        if end > start {
            scanner
                .subscribe(b, start)
                .map_err(|e| format!("scanning {}: {e}", table.path))?;
            pending += 1;
        }
    }
    while pending > 0 {
        let batches = scanner
            .poll()
            .await
            .map_err(|e| format!("reading back {}: {e}", table.path))?;
        for batch in batches {
            let end = ends[batch.bucket as usize];
            let rows = batch
                .rows()
                .map_err(|e| format!("reading back {}: {e}", table.path))?;
            let first = batch.base_offset;
            for (i, row) in rows.iter().enumerate() {
                if first + (i as i64) < end {
                    matcher.insert(fingerprint_stored(&row));
                }
            }
            if batch.next_offset() >= end {
                let key = fjord_client::ScanBucket {
                    partition_id: None,
                    bucket: batch.bucket,
                };
                if scanner.unsubscribe(key) {
                    pending -= 1;
                }
            }
        }
    }
    Ok(matcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_with_any_table_name() {
        let mut state = SinkState::default();
        state.logs.insert(
            ("a;b".into(), "c:d.e".into()),
            LogMark {
                table_id: 42,
                ends: vec![0, 17, 3],
            },
        );
        state.logs.insert(
            ("x".into(), "y".into()),
            LogMark {
                table_id: 1,
                ends: vec![],
            },
        );
        let text = state.encode();
        assert!(!text.contains('\n'));
        assert_eq!(SinkState::decode(&text).unwrap(), state);
        assert!(SinkState::decode("other;").is_err());
        assert!(SinkState::decode("fluss1;zz.yy:1:2").is_err());
    }

    #[test]
    fn matcher_takes_each_stored_row_once() {
        let mut m = ReplayMatcher::default();
        m.insert(1);
        m.insert(1);
        m.insert(2);
        assert!(m.take(1));
        assert!(!m.take(3));
        assert!(m.take(1));
        assert!(!m.take(1));
        assert!(!m.is_empty());
        assert!(m.take(2));
        assert!(m.is_empty());
    }
}
