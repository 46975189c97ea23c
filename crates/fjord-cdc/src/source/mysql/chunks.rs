//! The chunked, resumable snapshot (the watermark algorithm of Flink CDC's
//! incremental snapshot, written for this source).
//!
//! A table whose primary key is one integer column is read in chunks of
//! `scan.incremental.snapshot.chunk.size` rows by key, each chunk in three
//! short steps on an autocommit connection: the binlog head (the chunk's
//! *low* watermark), `SELECT … WHERE key > lo ORDER BY key LIMIT n` (the
//! chunk covers `(lo, hi]`, `hi` the last key read, or everything above `lo`
//! when fewer than `n` rows came), and the binlog head again (*high*). The
//! binlog events between low and high are read back and those of keys in
//! the chunk's range are applied on top of its rows: a key they touch is
//! delivered as the after image of its last change, or not at all if that
//! change removed it, so the chunk is delivered as inserts of its rows as
//! of its high watermark. No transaction stays open longer than one chunk,
//! and memory holds one chunk (plus the chunk the reader fetches ahead).
//!
//! Every other table (no primary key, a composite or non-integer key) is
//! read whole in one `START TRANSACTION WITH CONSISTENT SNAPSHOT`, its
//! watermark the binlog position of that view (low = high). Tables without
//! a key stay on one consistent read on purpose: the `fluss` sink makes
//! log-table replays exactly-once by matching the rows it finds past its
//! mark against a replay of the same events in the same order; a table re-read
//! whole after a restart replays the same rows (as before this module), while
//! chunks re-read after concurrent writes would not, and a keyless table has
//! no key to apply the binlog events to.
//!
//! After the last table the binlog is read from the floor (below) with the
//! schemas of then, or from the lowest watermark for progress stored without
//! a floor, and a row change is skipped when the snapshot already holds it: for a chunked
//! table, when the change is before the high watermark of its key's chunk
//! (each image of an update judged by its own key); for a table read whole,
//! when it is before the table's watermark. Past the highest watermark
//! nothing is skipped and the filter is dropped.
//!
//! Resume: the snapshot's position records, per table in order, the
//! finished chunks (as runs of consecutive chunks with one high watermark,
//! so a snapshot without concurrent writes records one run per table) or
//! the watermark of a finished whole read. A restarted pipeline skips the
//! finished tables and chunks, re-reads the chunk or whole table it was in
//! (a chunk's rows are upserts; a whole table replays as before), and the
//! binlog phase's filter keeps the recorded watermarks. While the binlog
//! phase is still inside the watermarks, its positions carry the filter too.
//!
//! An earlier attempt may have delivered rows it never committed, of any
//! table or chunk past the committed progress, as of its own (older)
//! watermarks. A new read only upserts what is there now, so a row that
//! attempt delivered and MariaDB deleted since would stay if the binlog
//! phase skipped the delete as "before the new read". Hence the *floor*:
//! the binlog head when the snapshot first started, committed (alone, as
//! the first position, before any row reaches the sink) with the progress.
//! A resumed snapshot records every table with a key that it reads, chunked
//! or whole, under the floor instead of its read's watermark: the binlog
//! phase then replays, for those keys, every change since the snapshot
//! began on top of the newer rows, which converges (whole-row upserts and
//! deletes in order). Keyless tables keep their watermark: the sink's
//! replay matching needs the same rows again, and it handles them.
//!
//! The floor's schemas are recorded with it, so the replay decodes events
//! older than a DDL with the schema they were written under and follows the
//! DDL (the sink finds the columns it adds already there).
//!
//! Not handled: a table's rows read in one schema and the changes of its
//! chunk's backfill in another (DDL inside one chunk's read; the row count
//! check refuses rows of another shape). `snapshot` mode (no binlog phase)
//! restarted after a kill keeps rows an earlier attempt delivered whose
//! keys were deleted since.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Row, Value};
use tokio::sync::mpsc;

use crate::schema::TableId;
use crate::source::{MySqlSourceConfig, SourceError, StopFlag};

use super::decode::{rows_event, Keyed, TableMap};
use super::schema_cache::quote_ident;
use super::{connect, event_type, is_transient, snapshot};

/// Chunks the reader fetches ahead of the one being delivered: the next
/// chunk's reads overlap the conversion of the current one, and memory
/// stays at a few chunks.
const CHUNKS_AHEAD: usize = 2;

/// Most bytes of binlog events kept for one chunk's backfill. Writes to the
/// table during one chunk's read beyond this make the reader read the chunk
/// again (a bound on memory, not an error).
const BACKFILL_BYTES_MAX: usize = 64 << 20;

/// Times one chunk is read again after its backfill overflowed
/// [`BACKFILL_BYTES_MAX`] before the snapshot gives up.
const BACKFILL_REREADS_MAX: u32 = 8;

/// Most runs of chunks recorded per table. Each run costs ~35 bytes in
/// every committed position, and the offset store reads back at most
/// `offsets::POSITION_FILE_BYTES_MAX`; past this, the two oldest runs merge
/// under the lower of their watermarks. That is safe: the binlog phase then
/// delivers again, for keys of the merged chunk with the later watermark,
/// changes its rows already hold, and a primary-key table converges (each
/// replayed change is a whole-row upsert or delete, applied in order).
const RUNS_PER_TABLE_MAX: usize = 128;

/// Version tag of the snapshot progress encoding in positions (`chunks2`
/// added the floor; `chunks1` progress, without one, is still read).
const PROGRESS_VERSION: &str = "chunks2";
const PROGRESS_VERSION_NO_FLOOR: &str = "chunks1";

/// A binlog position; watermarks compare in binlog order (file names share
/// a prefix and a fixed-width counter).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Watermark {
    pub file: String,
    pub pos: u64,
}

impl Watermark {
    /// Whether `(file, pos)` is before this watermark (already in the snapshot).
    pub(crate) fn after(&self, file: &str, pos: u64) -> bool {
        (file, pos) < (self.file.as_str(), self.pos)
    }
}

/// What the snapshot of one table has finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TableMarks {
    /// Read whole in one consistent view at this position.
    Whole(Watermark),
    /// Chunked by key: finished chunks as ascending runs `(upper key,
    /// inclusive; None: no upper bound)` → high watermark of every chunk
    /// in the run; `done` once the unbounded last chunk is finished.
    Chunks {
        runs: Vec<(Option<i64>, Watermark)>,
        done: bool,
    },
}

impl TableMarks {
    /// Whether the table's snapshot is complete.
    pub(crate) fn done(&self) -> bool {
        match self {
            TableMarks::Whole(_) => true,
            TableMarks::Chunks { done, .. } => *done,
        }
    }

    /// The key after which the next chunk starts (None: from the start).
    pub(crate) fn next_lo(&self) -> Option<i64> {
        match self {
            TableMarks::Chunks { runs, .. } => runs.last().and_then(|r| r.0),
            TableMarks::Whole(_) => None,
        }
    }

    /// Records a finished chunk `(.., hi]` read as of `high`.
    pub(crate) fn push_chunk(&mut self, hi: Option<i64>, high: Watermark) {
        if let TableMarks::Chunks { runs, done } = self {
            match runs.last_mut() {
                Some(last) if last.1 == high => last.0 = hi,
                _ => runs.push((hi, high)),
            }
            if runs.len() > RUNS_PER_TABLE_MAX {
                // The second run's upper bound then covers both.
                let (_, first_high) = runs.remove(0);
                if first_high < runs[0].1 {
                    runs[0].1 = first_high;
                }
            }
            *done = hi.is_none();
        }
    }

    /// The high watermark of the chunk holding `key` (None: not read yet).
    pub(crate) fn mark_of(&self, key: i64) -> Option<&Watermark> {
        match self {
            TableMarks::Whole(at) => Some(at),
            TableMarks::Chunks { runs, .. } => {
                let i = runs.partition_point(|(upper, _)| upper.is_some_and(|u| u < key));
                runs.get(i).map(|r| &r.1)
            }
        }
    }

    fn watermarks(&self) -> impl Iterator<Item = &Watermark> {
        let (whole, runs) = match self {
            TableMarks::Whole(at) => (Some(at), &[][..]),
            TableMarks::Chunks { runs, .. } => (None, runs.as_slice()),
        };
        whole.into_iter().chain(runs.iter().map(|r| &r.1))
    }
}

/// The snapshot's progress: per started table (in snapshot order), its marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    pub tables: Vec<(TableId, TableMarks)>,
    /// The binlog head when the snapshot first started, committed before
    /// any of its rows reached the sink: no read of any attempt is older.
    pub floor: Option<Watermark>,
    /// The captured tables' schemas at the floor (hex of the schema
    /// cache's DDL text): the binlog phase starts there with them.
    pub floor_schemas: Option<String>,
}

fn hex(text: &str, out: &mut String) {
    for b in text.bytes() {
        let _ = write!(out, "{b:02x}");
    }
}

/// Text from its hex form (as positions store names and schemas).
pub(crate) fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

impl Progress {
    /// The marks of `id`, if its snapshot started.
    pub(crate) fn get(&self, id: &TableId) -> Option<&TableMarks> {
        self.tables.iter().find(|(t, _)| t == id).map(|(_, m)| m)
    }

    /// Text form for positions: `chunks2;`, the floor as `F,file,pos` and
    /// its schemas as `S,hex` if any, then one `;`-separated record per table: `W,db,table,file,pos`
    /// or `C,db,table,done,(upper,file,pos)*` (names in hex, `-` for no
    /// upper bound).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::from(PROGRESS_VERSION);
        if let Some(floor) = &self.floor {
            let _ = write!(out, ";F,{},{}", floor.file, floor.pos);
        }
        if let Some(schemas) = &self.floor_schemas {
            let _ = write!(out, ";S,{schemas}");
        }
        for (id, marks) in &self.tables {
            out.push(';');
            out.push(match marks {
                TableMarks::Whole(_) => 'W',
                TableMarks::Chunks { .. } => 'C',
            });
            out.push(',');
            hex(id.database(), &mut out);
            out.push(',');
            hex(id.table(), &mut out);
            match marks {
                TableMarks::Whole(at) => {
                    let _ = write!(out, ",{},{}", at.file, at.pos);
                }
                TableMarks::Chunks { runs, done } => {
                    let _ = write!(out, ",{}", u8::from(*done));
                    for (upper, high) in runs {
                        match upper {
                            Some(u) => {
                                let _ = write!(out, ",{u}");
                            }
                            None => out.push_str(",-"),
                        }
                        let _ = write!(out, ",{},{}", high.file, high.pos);
                    }
                }
            }
        }
        out
    }

    /// Reads [`Progress::encode`]'s form; an empty text is no progress.
    pub(crate) fn decode(text: &str) -> Result<Progress, SourceError> {
        let bad = || {
            SourceError::Config(format!(
                "stored snapshot progress is not readable: {:?}",
                text.chars().take(80).collect::<String>()
            ))
        };
        if text.is_empty() {
            return Ok(Progress::default());
        }
        let mut records = text.split(';');
        let version = records.next();
        if version != Some(PROGRESS_VERSION) && version != Some(PROGRESS_VERSION_NO_FLOOR) {
            return Err(bad());
        }
        let watermark = |file: Option<&str>, pos: Option<&str>| {
            Some(Watermark {
                file: file.filter(|f| !f.is_empty())?.to_string(),
                pos: pos?.parse().ok()?,
            })
        };
        let mut tables = Vec::new();
        let mut floor = None;
        let mut floor_schemas = None;
        for record in records {
            let mut f = record.split(',');
            let kind = f.next().ok_or_else(bad)?;
            if kind == "F" && floor.is_none() && tables.is_empty() {
                floor = Some(watermark(f.next(), f.next()).ok_or_else(bad)?);
                continue;
            }
            if kind == "S" && floor_schemas.is_none() && tables.is_empty() {
                let schemas = f
                    .next()
                    .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                floor_schemas = Some(schemas.ok_or_else(bad)?.to_string());
                continue;
            }
            let db = f.next().and_then(unhex).ok_or_else(bad)?;
            let table = f.next().and_then(unhex).ok_or_else(bad)?;
            let marks = match kind {
                "W" => TableMarks::Whole(watermark(f.next(), f.next()).ok_or_else(bad)?),
                "C" => {
                    let done = f.next().ok_or_else(bad)? == "1";
                    let mut runs = Vec::new();
                    while let Some(upper) = f.next() {
                        let upper = match upper {
                            "-" => None,
                            u => Some(u.parse().map_err(|_| bad())?),
                        };
                        runs.push((upper, watermark(f.next(), f.next()).ok_or_else(bad)?));
                    }
                    TableMarks::Chunks { runs, done }
                }
                _ => return Err(bad()),
            };
            tables.push((TableId::new(&db, &table), marks));
        }
        Ok(Progress {
            tables,
            floor,
            floor_schemas,
        })
    }

    /// The lowest watermark (where the binlog phase starts), if any.
    pub(crate) fn lowest(&self) -> Option<Watermark> {
        self.tables
            .iter()
            .flat_map(|(_, m)| m.watermarks())
            .min()
            .cloned()
    }
}

/// The binlog phase's skip rule while it is inside the snapshot's
/// watermarks (see the module docs).
#[derive(Debug)]
pub(crate) struct SnapshotFilter {
    tables: HashMap<TableId, TableMarks>,
    /// Past this position nothing is skipped.
    pub until: Watermark,
    /// The progress text, as appended to binlog positions (it holds no tab
    /// or line break).
    pub text: String,
}

impl SnapshotFilter {
    /// The filter of a finished snapshot; None if nothing can be skipped.
    pub(crate) fn new(progress: &Progress) -> Option<SnapshotFilter> {
        let until = progress
            .tables
            .iter()
            .flat_map(|(_, m)| m.watermarks())
            .max()?
            .clone();
        // Binlog positions carry the schemas themselves.
        let marks = Progress {
            floor_schemas: None,
            ..progress.clone()
        };
        Some(SnapshotFilter {
            tables: progress.tables.iter().cloned().collect(),
            until,
            text: marks.encode(),
        })
    }

    /// The filter stored in a binlog position (the progress text).
    pub(crate) fn from_text(text: &str) -> Result<Option<SnapshotFilter>, SourceError> {
        Ok(SnapshotFilter::new(&Progress::decode(text)?))
    }

    /// The marks of `table`, if the snapshot read it.
    pub(crate) fn marks(&self, table: &TableId) -> Option<&TableMarks> {
        self.tables.get(table)
    }
}

/// Whether a row change at `(file, pos)` of a table with `marks` is new to
/// the snapshot, image by image (`before`/`after`: the images' keys).
pub(crate) fn keyed_by_marks(
    marks: &TableMarks,
    file: &str,
    pos: u64,
    before: Option<i64>,
    after: Option<i64>,
) -> Keyed {
    let wanted = |key: Option<i64>| {
        key.map(|k| match marks.mark_of(k) {
            Some(high) => !high.after(file, pos),
            None => true,
        })
    };
    if let TableMarks::Whole(at) = marks {
        return if at.after(file, pos) {
            Keyed::Skip
        } else {
            Keyed::Keep
        };
    }
    keyed(wanted(before), wanted(after))
}

/// Combines the verdicts on an update's images (None: no such image).
pub(crate) fn keyed(before: Option<bool>, after: Option<bool>) -> Keyed {
    match (before, after) {
        (Some(true), Some(false)) => Keyed::DeleteBefore,
        (Some(false), Some(true)) => Keyed::InsertAfter,
        (Some(false), Some(false)) | (Some(false), None) | (None, Some(false)) => Keyed::Skip,
        _ => Keyed::Keep,
    }
}

/// One table of the snapshot plan.
#[derive(Clone, Debug)]
pub(crate) struct PlanTable {
    pub id: TableId,
    /// The integer key column (index, name) of a chunked table; None: read whole.
    pub key: Option<(usize, String)>,
    /// Where to start: the key after which the next chunk starts (chunked
    /// tables resumed mid-table), or None.
    pub resume_after: Option<i64>,
}

/// A chunk as the reader read it.
#[derive(Debug)]
pub(crate) struct ChunkRead {
    pub table: usize,
    /// The chunk covers keys in `(lo, hi]` (None: unbounded on that side).
    pub lo: Option<i64>,
    pub hi: Option<i64>,
    pub high: Watermark,
    pub rows: Vec<Row>,
    /// The key of each row of `rows`.
    pub keys: Vec<i64>,
    /// The table's TABLE_MAP body and its rows events `(type, body)`
    /// between the watermarks (empty when low = high).
    pub table_map: Option<Vec<u8>>,
    pub events: Vec<(u8, Vec<u8>)>,
}

impl ChunkRead {
    /// Whether `key` is in the chunk's range.
    pub(crate) fn covers(&self, key: i64) -> bool {
        self.lo.is_none_or(|lo| key > lo) && self.hi.is_none_or(|hi| key <= hi)
    }
}

/// What the snapshot reader sends.
pub(crate) enum Read {
    /// Rows of a table read whole (a part of it, in order).
    Rows(usize, Vec<Row>),
    /// A whole read finished; its consistent view's position.
    WholeDone(usize, Watermark),
    /// A chunk, read and with its backfill events.
    Chunk(Box<ChunkRead>),
    /// Every table of the plan is read.
    Done,
    /// The reader failed and stopped.
    Failed(SourceError),
}

/// The channel the reader fills.
pub(crate) fn channel() -> (mpsc::Sender<Read>, mpsc::Receiver<Read>) {
    mpsc::channel(CHUNKS_AHEAD)
}

/// What the reader needs to connect and read.
pub(crate) struct ReaderConfig {
    pub opts: mysql_async::Opts,
    pub config: MySqlSourceConfig,
    pub stop: StopFlag,
    pub mariadb: bool,
    pub server_id: u32,
}

fn server(config: &MySqlSourceConfig) -> String {
    format!("{}:{}", config.hostname, config.port)
}

/// Reads every table of `plan` in order and sends what it read, then
/// [`Read::Done`]; stops at the first failure (sent as [`Read::Failed`]),
/// a stop request or when the receiver is gone. The channel closing without
/// `Done` is therefore never a complete snapshot.
pub(crate) async fn read(reader: ReaderConfig, plan: Vec<PlanTable>, tx: mpsc::Sender<Read>) {
    match read_all(&reader, &plan, &tx).await {
        Ok(true) => {
            let _ = tx.send(Read::Done).await;
        }
        Ok(false) => {}
        Err(e) => {
            let _ = tx.send(Read::Failed(e)).await;
        }
    }
}

async fn session(reader: &ReaderConfig) -> Result<Conn, SourceError> {
    let mut conn = connect(&reader.opts, &reader.config, &reader.stop).await?;
    conn.query_drop("SET SESSION time_zone = '+00:00'")
        .await
        .map_err(|e| {
            SourceError::Database(format!("setting the snapshot session's time zone: {e}"))
        })?;
    Ok(conn)
}

/// Reads the plan; false if it stopped early (stop request, receiver gone).
async fn read_all(
    reader: &ReaderConfig,
    plan: &[PlanTable],
    tx: &mpsc::Sender<Read>,
) -> Result<bool, SourceError> {
    let fetch = usize::try_from(reader.config.snapshot_fetch_size.max(1)).unwrap_or(1024);
    let chunk_rows = u64::from(reader.config.snapshot_chunk_size.max(1));
    let mut conn = None;
    for (index, table) in plan.iter().enumerate() {
        let Some((key_index, key_name)) = &table.key else {
            // A whole read needs a fresh transaction on its own connection.
            let mut whole = session(reader).await?;
            let at = read_whole(&mut whole, reader, index, &table.id, fetch, tx).await?;
            let _ = whole.disconnect().await;
            let Some(at) = at else { return Ok(false) };
            if tx.send(Read::WholeDone(index, at)).await.is_err() {
                return Ok(false);
            }
            continue;
        };
        let mut lo = table.resume_after;
        loop {
            if reader.stop.is_raised() {
                return Ok(false);
            }
            let chunk = read_chunk_retrying(
                reader, &mut conn, index, table, *key_index, key_name, lo, chunk_rows,
            )
            .await?;
            let hi = chunk.hi;
            if tx.send(Read::Chunk(Box::new(chunk))).await.is_err() {
                return Ok(false);
            }
            match hi {
                Some(hi) => lo = Some(hi),
                None => break,
            }
        }
    }
    if let Some(conn) = conn {
        let _ = conn.disconnect().await;
    }
    Ok(true)
}

/// Reads one table whole in a consistent snapshot; returns its position
/// (None if the receiver is gone).
async fn read_whole(
    conn: &mut Conn,
    reader: &ReaderConfig,
    index: usize,
    id: &TableId,
    fetch: usize,
    tx: &mpsc::Sender<Read>,
) -> Result<Option<Watermark>, SourceError> {
    // A lost connection cannot continue the consistent view on another:
    // the run resumes from its last commit, which reads this table again
    // and keeps the tables and chunks it finished.
    let lost = |e: mysql_async::Error| {
        let message = format!(
            "snapshot of {id} from {}: {e} (a table without an integer primary key is read in \
             one consistent view, which a new connection cannot continue)",
            server(&reader.config)
        );
        if is_transient(&e) {
            SourceError::Interrupted(message)
        } else {
            SourceError::Database(message)
        }
    };
    let (file, pos) = snapshot::begin(conn, reader.mariadb).await?;
    let sql = format!(
        "SELECT * FROM {}.{}",
        quote_ident(id.database()),
        quote_ident(id.table())
    );
    let mut result = conn.exec_iter(sql, ()).await.map_err(lost)?;
    let mut rows = Vec::with_capacity(fetch);
    while let Some(row) = result.next().await.map_err(lost)? {
        rows.push(row);
        if rows.len() >= fetch {
            let full = std::mem::replace(&mut rows, Vec::with_capacity(fetch));
            if tx.send(Read::Rows(index, full)).await.is_err() {
                return Ok(None);
            }
        }
    }
    drop(result);
    if !rows.is_empty() && tx.send(Read::Rows(index, rows)).await.is_err() {
        return Ok(None);
    }
    conn.query_drop("COMMIT").await.map_err(lost)?;
    Ok(Some(Watermark { file, pos }))
}

/// Reads one chunk, reconnecting after a transient failure (a chunk can be
/// read again: nothing of it was sent), up to `1 + connect.max-retries`
/// times.
#[allow(clippy::too_many_arguments)]
async fn read_chunk_retrying(
    reader: &ReaderConfig,
    conn: &mut Option<Conn>,
    index: usize,
    table: &PlanTable,
    key_index: usize,
    key_name: &str,
    lo: Option<i64>,
    chunk_rows: u64,
) -> Result<ChunkRead, SourceError> {
    let attempts = reader.config.connect_max_retries.saturating_add(1);
    let mut failures = 0u32;
    let mut rereads = 0u32;
    loop {
        if conn.is_none() {
            *conn = Some(session(reader).await?);
        }
        let c = conn.as_mut().expect("just connected");
        match read_chunk(reader, c, index, table, key_index, key_name, lo, chunk_rows).await {
            Ok(Some(chunk)) => return Ok(chunk),
            Ok(None) => {
                rereads += 1;
                if rereads > BACKFILL_REREADS_MAX {
                    return Err(SourceError::Database(format!(
                        "snapshot of {}: the binlog events written during the read of the chunk \
                         after key {lo:?} exceeded {BACKFILL_BYTES_MAX} bytes {rereads} times; \
                         lower scan.incremental.snapshot.chunk.size",
                        table.id
                    )));
                }
            }
            Err(ChunkFailure::Fatal(e)) => return Err(e),
            Err(ChunkFailure::Transient(e)) => {
                *conn = None;
                failures += 1;
                if failures >= attempts {
                    return Err(SourceError::Database(format!(
                        "snapshot of {} from {}: {e} ({failures} attempts, connect.max-retries = {})",
                        table.id,
                        server(&reader.config),
                        reader.config.connect_max_retries
                    )));
                }
                tracing::warn!(
                    "snapshot of {} from {}: {e}; reading the chunk after key {lo:?} again \
                     (attempt {} of {attempts})",
                    table.id,
                    server(&reader.config),
                    failures + 1
                );
            }
        }
    }
}

enum ChunkFailure {
    Transient(String),
    Fatal(SourceError),
}

fn chunk_failure(context: &str) -> impl Fn(mysql_async::Error) -> ChunkFailure + '_ {
    move |e| {
        if is_transient(&e) {
            ChunkFailure::Transient(format!("{context}: {e}"))
        } else {
            ChunkFailure::Fatal(SourceError::Database(format!("{context}: {e}")))
        }
    }
}

/// The watermark algorithm for one chunk; None when its backfill overflowed.
#[allow(clippy::too_many_arguments)]
async fn read_chunk(
    reader: &ReaderConfig,
    conn: &mut Conn,
    index: usize,
    table: &PlanTable,
    key_index: usize,
    key_name: &str,
    lo: Option<i64>,
    chunk_rows: u64,
) -> Result<Option<ChunkRead>, ChunkFailure> {
    let low = head(conn).await?;
    let name = format!(
        "{}.{}",
        quote_ident(table.id.database()),
        quote_ident(table.id.table())
    );
    let key = quote_ident(key_name);
    let sql = match lo {
        Some(lo) => {
            format!("SELECT * FROM {name} WHERE {key} > {lo} ORDER BY {key} LIMIT {chunk_rows}")
        }
        None => format!("SELECT * FROM {name} ORDER BY {key} LIMIT {chunk_rows}"),
    };
    let rows: Vec<Row> = conn
        .exec(sql, ())
        .await
        .map_err(chunk_failure("reading a snapshot chunk"))?;
    let high = head(conn).await?;
    let mut keys = Vec::with_capacity(rows.len());
    for row in &rows {
        let key = match row.as_ref(key_index) {
            Some(Value::Int(k)) => Some(*k),
            Some(Value::UInt(k)) => i64::try_from(*k).ok(),
            _ => None,
        };
        keys.push(key.ok_or_else(|| {
            ChunkFailure::Fatal(SourceError::Decode(format!(
                "snapshot of {}: key column {key_name} holds {:?}, not an integer",
                table.id,
                row.as_ref(key_index)
            )))
        })?);
    }
    let hi = if (rows.len() as u64) < chunk_rows {
        None
    } else {
        keys.last().copied()
    };
    let mut chunk = ChunkRead {
        table: index,
        lo,
        hi,
        high: high.clone(),
        rows,
        keys,
        table_map: None,
        events: Vec::new(),
    };
    if low != high && !backfill(reader, &table.id, &low, &high, &mut chunk).await? {
        return Ok(None);
    }
    Ok(Some(chunk))
}

/// The binlog head (`SHOW MASTER STATUS`).
async fn head(conn: &mut Conn) -> Result<Watermark, ChunkFailure> {
    let row: Option<Row> = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(chunk_failure("SHOW MASTER STATUS"))?;
    let (file, pos) = row
        .and_then(|r| Some((r.get::<String, _>(0)?, r.get::<u64, _>(1)?)))
        .ok_or_else(|| {
            ChunkFailure::Fatal(SourceError::Database(
                "SHOW MASTER STATUS returned nothing: the binary log is off".into(),
            ))
        })?;
    Ok(Watermark { file, pos })
}

/// Reads the binlog from `low` to `high` and keeps the table map and rows
/// events of `id`; false when they exceed [`BACKFILL_BYTES_MAX`].
async fn backfill(
    reader: &ReaderConfig,
    id: &TableId,
    low: &Watermark,
    high: &Watermark,
    chunk: &mut ChunkRead,
) -> Result<bool, ChunkFailure> {
    let mut conn = connect_once_for_backfill(reader).await?;
    let failure = chunk_failure("reading the binlog between a chunk's watermarks");
    let mut setup = vec!["SET @master_binlog_checksum = @@global.binlog_checksum"];
    if reader.mariadb {
        setup.push("SET @mariadb_slave_capability = 4");
    }
    for sql in setup {
        conn.query_drop(sql).await.map_err(&failure)?;
    }
    let checksum: Option<String> = conn
        .query_first("SELECT @master_binlog_checksum")
        .await
        .map_err(&failure)?;
    let checksum_len = match checksum.as_deref() {
        Some(c) if c.eq_ignore_ascii_case("NONE") => 0,
        _ => 4,
    };
    let request = BinlogStreamRequest::new(reader.server_id)
        .with_filename(low.file.as_bytes())
        .with_pos(low.pos);
    let mut stream = conn.get_binlog_stream(request).await.map_err(&failure)?;
    let mut file = low.file.clone();
    let mut fde_seen = false;
    let mut table_id = None;
    let mut bytes = 0usize;
    let wait = reader.config.connect_timeout;
    loop {
        let started = Instant::now();
        let next = tokio::time::timeout(wait, stream.next())
            .await
            .map_err(|_| {
                ChunkFailure::Transient(format!(
                    "no binlog event within {:?} while reading up to {} {}",
                    started.elapsed().max(Duration::ZERO),
                    high.file,
                    high.pos
                ))
            })?;
        let event = match next {
            Some(Ok(event)) => event,
            Some(Err(e)) => return Err(failure(e)),
            None => {
                return Err(ChunkFailure::Transient(
                    "the server ended the binlog stream".into(),
                ))
            }
        };
        let header = event.header();
        let kind = header.event_type_raw();
        let data = event.data();
        match kind {
            event_type::ROTATE => {
                let trailer = if fde_seen { 0 } else { checksum_len };
                let end = data.len().saturating_sub(trailer);
                if end < 8 {
                    return Err(ChunkFailure::Fatal(SourceError::Decode(
                        "malformed ROTATE event".into(),
                    )));
                }
                file = String::from_utf8_lossy(&data[8..end]).into_owned();
                continue;
            }
            event_type::FORMAT_DESCRIPTION => fde_seen = true,
            event_type::TABLE_MAP => {
                let map = TableMap::parse(data).map_err(ChunkFailure::Fatal)?;
                if map.database == id.database() && map.table == id.table() {
                    table_id = Some(map.table_id);
                    if chunk.table_map.as_deref() != Some(data) {
                        chunk.table_map = Some(data.to_vec());
                    }
                }
            }
            rows_event::WRITE_V1
            | rows_event::UPDATE_V1
            | rows_event::DELETE_V1
            | rows_event::WRITE_V2
            | rows_event::UPDATE_V2
            | rows_event::DELETE_V2
                if table_id.is_some() && table_id == Some(super::table_id(data)) =>
            {
                bytes += data.len();
                if bytes > BACKFILL_BYTES_MAX {
                    return Ok(false);
                }
                chunk.events.push((kind, data.to_vec()));
            }
            _ => {}
        }
        let log_pos = u64::from(header.log_pos());
        if log_pos != 0 && (file.as_str(), log_pos) >= (high.file.as_str(), high.pos) {
            return Ok(true);
        }
    }
}

async fn connect_once_for_backfill(reader: &ReaderConfig) -> Result<Conn, ChunkFailure> {
    super::connect_once(&reader.opts, &reader.config)
        .await
        .map_err(|e| ChunkFailure::Transient(format!("connecting for a chunk's backfill: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(file: &str, pos: u64) -> Watermark {
        Watermark {
            file: file.into(),
            pos,
        }
    }

    #[test]
    fn progress_round_trips_and_merges_runs_of_one_watermark() {
        let mut chunks = TableMarks::Chunks {
            runs: Vec::new(),
            done: false,
        };
        chunks.push_chunk(Some(10), w("b.000001", 100));
        chunks.push_chunk(Some(20), w("b.000001", 100));
        chunks.push_chunk(Some(30), w("b.000002", 7));
        assert_eq!(chunks.next_lo(), Some(30));
        assert!(!chunks.done());
        chunks.push_chunk(None, w("b.000002", 7));
        assert!(chunks.done());
        let progress = Progress {
            tables: vec![
                (TableId::new("app", "t;,1"), chunks.clone()),
                (
                    TableId::new("app", "log"),
                    TableMarks::Whole(w("b.000002", 9)),
                ),
            ],
            floor: Some(w("b.000001", 50)),
            floor_schemas: Some("435245415445".into()),
        };
        let text = progress.encode();
        assert_eq!(Progress::decode(&text).unwrap(), progress);
        assert_eq!(Progress::decode("").unwrap(), Progress::default());
        assert!(Progress::decode("chunks0;x").is_err());
        // A floor alone (what a fresh snapshot commits first), and progress
        // stored before floors existed.
        let floor_only = Progress {
            tables: Vec::new(),
            floor: Some(w("b.000001", 4)),
            floor_schemas: None,
        };
        // The filter's text (appended to binlog positions, which carry the
        // schemas themselves) leaves the floor's schemas out.
        let filter = SnapshotFilter::new(&progress).unwrap();
        let mut without = progress.clone();
        without.floor_schemas = None;
        assert_eq!(Progress::decode(&filter.text).unwrap(), without);
        assert_eq!(Progress::decode(&floor_only.encode()).unwrap(), floor_only);
        let old = Progress::decode("chunks1;W,617070,6c6f67,b.000002,9").unwrap();
        assert_eq!(old.floor, None);
        assert_eq!(old.tables.len(), 1);
        assert_eq!(progress.lowest(), Some(w("b.000001", 100)));
        let TableMarks::Chunks { runs, .. } = &chunks else {
            unreachable!()
        };
        assert_eq!(runs.len(), 2, "chunks of one watermark merge: {runs:?}");
        assert_eq!(chunks.mark_of(5), Some(&w("b.000001", 100)));
        assert_eq!(chunks.mark_of(20), Some(&w("b.000001", 100)));
        assert_eq!(chunks.mark_of(21), Some(&w("b.000002", 7)));
        assert_eq!(chunks.mark_of(i64::MAX), Some(&w("b.000002", 7)));
    }

    #[test]
    fn runs_are_capped_by_merging_the_oldest_under_the_lower_watermark() {
        let mut marks = TableMarks::Chunks {
            runs: Vec::new(),
            done: false,
        };
        for i in 0..(RUNS_PER_TABLE_MAX as u64 + 10) {
            marks.push_chunk(Some(i as i64 * 10 + 10), w("b.000001", 1000 + i));
        }
        let TableMarks::Chunks { runs, .. } = &marks else {
            unreachable!()
        };
        assert_eq!(runs.len(), RUNS_PER_TABLE_MAX);
        // Keys of the merged chunks keep the earliest watermark among them.
        assert_eq!(marks.mark_of(1), Some(&w("b.000001", 1000)));
        assert_eq!(marks.mark_of(100), Some(&w("b.000001", 1000)));
        assert_eq!(marks.next_lo(), Some((RUNS_PER_TABLE_MAX as i64 + 10) * 10));
    }

    #[test]
    fn binlog_changes_before_their_chunks_high_watermark_are_skipped_image_by_image() {
        let mut marks = TableMarks::Chunks {
            runs: Vec::new(),
            done: false,
        };
        marks.push_chunk(Some(10), w("b.000001", 100));
        marks.push_chunk(None, w("b.000001", 200));
        let at = |pos, before, after| keyed_by_marks(&marks, "b.000001", pos, before, after);
        assert_eq!(at(150, None, Some(5)), Keyed::Keep);
        assert_eq!(at(150, None, Some(50)), Keyed::Skip);
        assert_eq!(at(150, Some(50), Some(5)), Keyed::InsertAfter);
        assert_eq!(at(150, Some(5), Some(50)), Keyed::DeleteBefore);
        assert_eq!(at(50, Some(5), Some(50)), Keyed::Skip);
        assert_eq!(at(200, Some(5), Some(50)), Keyed::Keep);
        let whole = TableMarks::Whole(w("b.000001", 100));
        assert_eq!(
            keyed_by_marks(&whole, "b.000001", 99, None, None),
            Keyed::Skip
        );
        assert_eq!(
            keyed_by_marks(&whole, "b.000001", 100, None, None),
            Keyed::Keep
        );
        assert_eq!(
            keyed_by_marks(&whole, "b.000002", 4, None, None),
            Keyed::Keep
        );
    }
}
