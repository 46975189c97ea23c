//! The MySQL/MariaDB source: a snapshot of the captured tables (chunked by
//! integer primary key and resumable, see `chunks`), then the row-based
//! binary log over the replication protocol, as change events in the
//! pipeline's compact rows.
//!
//! Connection loss: every connection is made with `connect.timeout` per
//! attempt and up to `connect.max-retries` more attempts, waits doubling
//! from [`RECONNECT_BACKOFF_MIN`] to [`RECONNECT_BACKOFF_MAX`], each failed
//! attempt logged. A binlog connection lost mid-stream resumes at the last
//! position handed out; a snapshot chunk is read again on a new connection;
//! a table read whole in one consistent view cannot continue elsewhere and
//! fails the run (a rerun resumes at that table). The final error names
//! `host:port` and the last cause.
//!
//! Protocol choice: `mysql_async` (with `mysql_common`) does the connection,
//! authentication (native password, caching_sha2, ed25519 via features), text
//! queries and the binlog dump's packet and event framing (header, checksum
//! footer, `FORMAT_DESCRIPTION` tracking). It is maintained and handles both
//! servers' handshakes. It does not know MariaDB's own events (GTID 162,
//! GTID_LIST 163, ANNOTATE_ROWS 160, BINLOG_CHECKPOINT 161) beyond framing
//! them, and its generic row decoding boxes every value into an owned enum in
//! a per-row `Vec`; so this module reads the MariaDB events itself and decodes
//! `ROWS_EVENT` bodies with a decoder prepared once per table map and schema
//! version (`decode.rs`) straight into the batch's rows. MariaDB GTID starts
//! use `@slave_connect_state`, which any client can set before the dump.
//!
//! Positions: while inside a transaction the position is the transaction's
//! first event plus the number of row changes already delivered
//! (`skip-rows`), so a restart re-reads the transaction's table maps and
//! skips what the sink already has; between transactions it is the next
//! event's offset. In the snapshot a batch ends with each finished chunk or
//! table, so the position recording it is never carried by a batch that
//! also holds rows after it. Positions also carry the captured tables'
//! definitions in force at them (`SchemaCache::to_ddl`), so a restart
//! before a DDL decodes with the old schema although the catalog has the
//! new one.
//!
//! Time zones: binlog `TIMESTAMP` values are UTC instants and the snapshot
//! session runs with `time_zone = '+00:00'`, so `TIMESTAMP` columns
//! (`TIMESTAMP_LTZ`) are exact without knowing the server's zone, and
//! `DATETIME` columns are wall-clock values in both phases;
//! `server-time-zone` is therefore not needed for correct values.
//!
//! Integrity: every binlog event's CRC32 footer is verified (the framing
//! layer strips it without checking); rows-event decoding is bounds-checked
//! and refuses metadata that disagrees with the known schema.
//!
//! Not supported (clear errors): MySQL's binary JSON encoding, spatial
//! columns, compressed binlog events, pre-5.6 temporal encodings,
//! `skip-events`. `timestamp` mode reads from the oldest binlog and skips
//! transactions that started before the timestamp.

mod chunks;
mod coltype;
mod ddl;
mod decode;
mod schema_cache;
mod snapshot;
mod temporal;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::binlog::events::QueryEvent;
use mysql_async::binlog::BinlogChecksumAlg;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, OptsBuilder};

use crate::event::EventBatch;
use crate::position::{BinlogPosition, SourcePosition};
use crate::schema::TableId;
use crate::source::{
    MySqlSourceConfig, Poll, Source, SourceError, SourceProgress, SpecificOffset, StartOptions,
    StartupMode, IDLE_RETURN_MAX,
};

use chunks::{ChunkRead, PlanTable, Progress, Read, SnapshotFilter, TableMarks};
use decode::Keyed;
use decode::{rows_event, RowDecoder, Scratch, TableMap};
use schema_cache::SchemaCache;
use snapshot::SnapshotTable;

/// Name under which binlog positions are stored: `file \t pos \t skip-rows \t
/// hex(schemas)`, the schemas being the captured tables' definitions in force
/// at the position (see [`SchemaCache::to_ddl`]).
const BINLOG_POSITION_SOURCE: &str = "mysql-binlog";

/// Name under which snapshot progress positions are stored: the finished
/// tables and chunks with their watermarks (`chunks::Progress`); a restarted
/// snapshot continues after them. Empty data (older versions): start over.
const SNAPSHOT_POSITION_SOURCE: &str = "mysql-snapshot";

/// Smallest server id picked when `server-id` is not configured.
const SERVER_ID_DEFAULT_MIN: u32 = 5400;
/// Width of the range a default server id is picked from (Flink CDC's range).
const SERVER_ID_DEFAULT_SPAN: u32 = 1000;

/// Binlog event type codes this source acts on (besides rows events).
mod event_type {
    pub const QUERY: u8 = 2;
    pub const ROTATE: u8 = 4;
    pub const FORMAT_DESCRIPTION: u8 = 15;
    pub const XID: u8 = 16;
    pub const TABLE_MAP: u8 = 19;
    pub const HEARTBEAT: u8 = 27;
    pub const MYSQL_GTID: u8 = 33;
    pub const MYSQL_ANONYMOUS_GTID: u8 = 34;
    pub const MARIADB_GTID: u8 = 162;
    pub const MARIADB_QUERY_COMPRESSED: u8 = 165;
    pub const MYSQL_TRANSACTION_PAYLOAD: u8 = 40;
}

/// MariaDB GTID event flag: the transaction is one statement with no
/// terminating COMMIT/XID event (DDL).
const MARIADB_GTID_FL_STANDALONE: u8 = 1;

/// Opens the MySQL/MariaDB source: checks the server (binlog on, ROW format,
/// FULL row image), loads the captured tables' schemas and resolves the start
/// position. Connection happens here, so configuration and server problems
/// are reported before the pipeline starts.
pub fn open(
    config: MySqlSourceConfig,
    start: StartOptions,
) -> Result<Box<dyn Source>, SourceError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SourceError::Io {
            context: "starting the MySQL source's I/O runtime".into(),
            source: e,
        })?;
    let source = rt.block_on(MySqlSource::open(config, start))?;
    Ok(Box::new(Runtime { rt, source }))
}

/// The source and the single-threaded I/O runtime it runs on (the runtime
/// calls [`Source::next_batch`] from one thread).
struct Runtime {
    rt: tokio::runtime::Runtime,
    source: MySqlSource,
}

impl Source for Runtime {
    fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        let poll = self.rt.block_on(self.source.next_batch(batch))?;
        self.rt.block_on(self.source.report_progress());
        Ok(poll)
    }

    fn progress(&self) -> Option<SourceProgress> {
        Some(self.source.progress.clone())
    }
}

/// How often the source asks the server for the binlog head (one
/// `SHOW MASTER STATUS` on the query connection), for progress lines.
const HEAD_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// Longest the source waits for the head (progress is not worth a stall).
const HEAD_ASK_MAX: Duration = Duration::from_millis(200);

fn db_err(context: &str) -> impl Fn(mysql_async::Error) -> SourceError + '_ {
    move |e| SourceError::Database(format!("{context}: {e}"))
}

/// `SHOW MASTER STATUS` as `(file, position)`.
pub(crate) async fn master_status(conn: &mut Conn) -> Result<(String, u64), SourceError> {
    let row: Option<mysql_async::Row> =
        conn.query_first("SHOW MASTER STATUS")
            .await
            .map_err(db_err(
                "SHOW MASTER STATUS (needs REPLICATION CLIENT / BINLOG MONITOR)",
            ))?;
    let row = row.ok_or_else(|| {
        SourceError::Database("SHOW MASTER STATUS returned nothing: the binary log is off (start the server with log_bin)".into())
    })?;
    let file: Option<String> = row.get(0);
    let pos: Option<u64> = row.get(1);
    match (file, pos) {
        (Some(file), Some(pos)) => Ok((file, pos)),
        _ => Err(SourceError::Database(
            "SHOW MASTER STATUS returned an unreadable row".into(),
        )),
    }
}

async fn binary_logs(conn: &mut Conn) -> Result<Vec<String>, SourceError> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(db_err("SHOW BINARY LOGS"))?;
    Ok(rows.iter().filter_map(|r| r.get::<String, _>(0)).collect())
}

enum Phase {
    /// Reading the snapshot; then the binlog (initial) or the end (snapshot).
    Snapshot(Box<SnapshotState>),
    Binlog,
    Done,
}

/// The snapshot phase's state (see `chunks`).
struct SnapshotState {
    rx: tokio::sync::mpsc::Receiver<Read>,
    /// The tables still to read, in order, and their converters.
    plan: Vec<PlanTable>,
    tables: Vec<SnapshotTable>,
    /// `initial` mode: the binlog follows the snapshot.
    initial: bool,
    /// Finished tables and chunks (what positions record).
    progress: Progress,
    /// A fresh snapshot's floor is not committed yet: the first batch
    /// carries it alone, as a position the runtime commits before any row.
    announce_floor: bool,
    /// A resumed snapshot: the floor every table with a key is recorded
    /// under instead of its read's watermark (see `chunks`, "Resume").
    lower_to: Option<chunks::Watermark>,
    /// The chunk being delivered.
    draining: Option<Draining>,
    /// Where backfill events are decoded to find the keys they touch.
    scratch_batch: EventBatch,
}

/// A chunk being delivered as inserts of its rows as of its high
/// watermark: the rows whose keys no backfill event touches, then, for each
/// touched key in its range that exists at the high watermark, the after
/// image of its last change.
struct Draining {
    chunk: Box<ChunkRead>,
    next_row: usize,
    next_event: usize,
    /// Row changes of the backfill events delivered so far (in the order
    /// of `chunk.events`, every row change counted).
    next_change: u64,
    /// Per touched key in range: the index of the row change whose after
    /// image is its state at the high watermark; None: absent then.
    last_change: HashMap<i64, Option<u64>>,
    decoder: Option<RowDecoder>,
}

struct MySqlSource {
    config: MySqlSourceConfig,
    opts: mysql_async::Opts,
    mariadb: bool,
    server_id: u32,
    stop: crate::source::StopFlag,
    cache: SchemaCache,
    phase: Phase,
    stream: Option<BinlogStream>,
    /// Decoders by table id (captured tables only).
    decoders: HashMap<u64, RowDecoder>,
    /// Table ids of tables that are not captured (skip their rows cheaply).
    ignored: HashMap<u64, ()>,
    scratch: Scratch,
    /// Current binlog file and the offset after the last event handled.
    file: String,
    next_pos: u64,
    /// Within a transaction: where it started and the row changes handled so far.
    tx: Option<(String, u64)>,
    tx_rows: u64,
    /// MariaDB standalone (DDL) transaction: ends after its one statement.
    tx_standalone: bool,
    /// The current transaction opened with an explicit `BEGIN` query event.
    tx_explicit: bool,
    /// Row changes to skip at the start of the first transaction after a resume.
    skip_rows: u64,
    /// `--until-current`: stop at this position.
    until: Option<(String, u64)>,
    /// Skip transactions that started before this time (`timestamp` mode), seconds.
    min_timestamp: Option<u32>,
    /// A query connection for lazy schema loads while the binlog connection streams.
    query_conn: Option<Conn>,
    last_packet: Instant,
    /// When the current binlog dump started (a dump that lasted
    /// [`RECONNECT_HEALTHY_AFTER`] resets the reconnect budget).
    dump_started: Instant,
    /// Reconnect attempts since the binlog connection was last healthy.
    reconnects: u32,
    /// The schema cache as stored in positions (hex of `SchemaCache::to_ddl`).
    schemas_hex: String,
    /// Whether the current dump has sent its FORMAT_DESCRIPTION event yet.
    fde_seen: bool,
    /// Checksum bytes per event (`binlog_checksum`: 4 for CRC32, 0 for NONE).
    checksum_len: usize,
    /// What the progress lines show (updated once per batch).
    progress: SourceProgress,
    /// While the binlog phase is inside the snapshot's watermarks: what it
    /// skips (see `chunks`).
    filter: Option<SnapshotFilter>,
    /// Source time of the last event read (seconds since 1970; 0: none yet).
    last_event_time: u32,
    /// The binlog head last asked for, and when.
    head: Option<(String, u64)>,
    head_asked: Option<Instant>,
}

impl MySqlSource {
    async fn open(
        config: MySqlSourceConfig,
        start: StartOptions,
    ) -> Result<MySqlSource, SourceError> {
        let opts: mysql_async::Opts = OptsBuilder::default()
            .ip_or_hostname(config.hostname.clone())
            .tcp_port(config.port)
            .user(Some(config.username.clone()))
            .pass(Some(config.password.clone()))
            .prefer_socket(false)
            .into();
        let mut conn = connect(&opts, &config, &start.stop).await?;
        let (version,): (String,) = conn
            .query_first("SELECT @@version")
            .await
            .map_err(db_err("SELECT @@version"))?
            .ok_or_else(|| SourceError::Database("SELECT @@version returned nothing".into()))?;
        let mariadb = version.to_ascii_lowercase().contains("mariadb");
        let server_id = match config.server_id {
            Some(range) => range.start,
            None => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                SERVER_ID_DEFAULT_MIN + nanos % SERVER_ID_DEFAULT_SPAN
            }
        };
        let needs_binlog =
            !matches!(config.startup, StartupMode::Snapshot) || start.resume.is_some();
        if needs_binlog {
            check_binlog_settings(&mut conn).await?;
        }
        let cache = SchemaCache::load(&mut conn, &config.tables, None).await?;
        let until = if start.until_current && needs_binlog {
            Some(master_status(&mut conn).await?)
        } else {
            None
        };
        let mut source = MySqlSource {
            opts,
            mariadb,
            server_id,
            stop: start.stop.clone(),
            cache,
            phase: Phase::Done,
            stream: None,
            decoders: HashMap::new(),
            ignored: HashMap::new(),
            scratch: Scratch::default(),
            file: String::new(),
            next_pos: 4,
            tx: None,
            tx_rows: 0,
            tx_standalone: false,
            tx_explicit: false,
            skip_rows: 0,
            until,
            min_timestamp: None,
            query_conn: None,
            last_packet: Instant::now(),
            dump_started: Instant::now(),
            reconnects: 0,
            fde_seen: false,
            checksum_len: 4,
            schemas_hex: String::new(),
            progress: SourceProgress::default(),
            filter: None,
            last_event_time: 0,
            head: None,
            head_asked: None,
            config,
        };
        source.schemas_changed();
        let resume = match start.resume {
            Some(SourcePosition::Binlog(b)) => Some(b),
            Some(SourcePosition::Opaque {
                source: ref kind,
                ref data,
            }) if kind == BINLOG_POSITION_SOURCE => {
                let (b, schemas, filter) = decode_position(data)?;
                source.cache = SchemaCache::from_ddl(&schemas, &source.config.tables)?;
                source.schemas_changed();
                source.filter = filter;
                Some(b)
            }
            Some(SourcePosition::Opaque {
                source: ref kind,
                ref data,
            }) if kind == SNAPSHOT_POSITION_SOURCE => {
                let progress = Progress::decode(data)?;
                let initial = !matches!(source.config.startup, StartupMode::Snapshot);
                tracing::info!(
                    "resuming the snapshot: {} tables started before, {} finished",
                    progress.tables.len(),
                    progress.tables.iter().filter(|(_, m)| m.done()).count()
                );
                source.start_snapshot(initial, progress, false)?;
                return Ok(source);
            }
            Some(other) => {
                return Err(SourceError::Config(format!(
                    "the stored position {other:?} is not a MySQL binlog position"
                )))
            }
            None => None,
        };
        if let Some(b) = resume {
            source.file = b.file;
            source.next_pos = b.pos;
            source.skip_rows = b.skip_rows;
            source.start_binlog(conn).await?;
            return Ok(source);
        }
        match source.config.startup.clone() {
            StartupMode::Initial | StartupMode::Snapshot => {
                let initial = matches!(source.config.startup, StartupMode::Initial);
                // The binlog head now is older than anything this snapshot
                // (or any restart of it) reads: the floor a restart
                // replays from for keyed tables (see `chunks`, "Resume").
                let floor = if initial {
                    let (file, pos) = master_status(&mut conn).await?;
                    Some(chunks::Watermark { file, pos })
                } else {
                    None
                };
                let floor_schemas = floor.as_ref().map(|_| source.schemas_hex.clone());
                let progress = Progress {
                    tables: Vec::new(),
                    floor,
                    floor_schemas,
                };
                source.start_snapshot(initial, progress, true)?;
            }
            StartupMode::EarliestOffset => {
                let logs = binary_logs(&mut conn).await?;
                source.file = logs.first().cloned().ok_or_else(|| {
                    SourceError::Database("SHOW BINARY LOGS lists no file: is log_bin on?".into())
                })?;
                source.next_pos = 4;
                source.start_binlog(conn).await?;
            }
            StartupMode::LatestOffset => {
                let (file, pos) = master_status(&mut conn).await?;
                source.file = file;
                source.next_pos = pos;
                source.start_binlog(conn).await?;
            }
            StartupMode::SpecificOffset {
                offset,
                skip_events,
                skip_rows,
            } => {
                if skip_events != 0 {
                    return Err(SourceError::Unsupported(
                        "scan.startup.specific-offset.skip-events (use skip-rows, counted from the transaction start)".into(),
                    ));
                }
                source.skip_rows = skip_rows;
                match offset {
                    SpecificOffset::File { file, pos } => {
                        source.file = file;
                        source.next_pos = pos;
                        source.start_binlog(conn).await?;
                    }
                    SpecificOffset::GtidSet(set) => {
                        if source.mariadb {
                            source.start_binlog_gtid(conn, &set).await?;
                        } else {
                            let sids = parse_mysql_gtid_set(&set)?;
                            source.file.clear();
                            source.next_pos = 4;
                            source.dump_request(conn, None, Some(sids)).await?;
                        }
                    }
                }
            }
            StartupMode::Timestamp { millis } => {
                let logs = binary_logs(&mut conn).await?;
                source.file = logs.first().cloned().ok_or_else(|| {
                    SourceError::Database("SHOW BINARY LOGS lists no file: is log_bin on?".into())
                })?;
                source.next_pos = 4;
                source.min_timestamp =
                    Some(u32::try_from(millis.max(0) / 1000).unwrap_or(u32::MAX));
                source.start_binlog(conn).await?;
            }
        }
        Ok(source)
    }

    /// Plans the snapshot (tables in order, chunked by an integer key or
    /// read whole, minus what `progress` has finished) and starts its reader.
    /// `fresh`: no earlier attempt of this snapshot can have delivered rows.
    fn start_snapshot(
        &mut self,
        initial: bool,
        mut progress: Progress,
        fresh: bool,
    ) -> Result<(), SourceError> {
        let mut ids: Vec<TableId> = self.cache.tables.keys().cloned().collect();
        ids.sort();
        let mut plan = Vec::new();
        let mut tables = Vec::new();
        for id in ids {
            let info = &self.cache.tables[&id];
            let key = int_key(info);
            let resume_after = match progress.get(&id) {
                Some(marks) if marks.done() => continue,
                Some(marks @ TableMarks::Chunks { .. }) if key.is_some() => marks.next_lo(),
                _ => None,
            };
            if resume_after.is_none() {
                // Started over: what an earlier run recorded no longer holds.
                progress.tables.retain(|(t, _)| *t != id);
            }
            tables.push(SnapshotTable::new(info));
            plan.push(PlanTable {
                id,
                key,
                resume_after,
            });
        }
        let (tx, rx) = chunks::channel();
        let reader = chunks::ReaderConfig {
            opts: self.opts.clone(),
            config: self.config.clone(),
            stop: self.stop.clone(),
            mariadb: self.mariadb,
            server_id: self.server_id,
        };
        tokio::spawn(chunks::read(reader, plan.clone(), tx));
        let announce_floor = fresh && progress.floor.is_some();
        let lower_to = if fresh { None } else { progress.floor.clone() };
        self.phase = Phase::Snapshot(Box::new(SnapshotState {
            rx,
            plan,
            tables,
            initial,
            announce_floor,
            lower_to,
            progress,
            draining: None,
            scratch_batch: EventBatch::default(),
        }));
        Ok(())
    }

    /// Starts the binlog dump at `self.file`/`self.next_pos` on a new connection.
    async fn start_binlog(&mut self, mut conn: Conn) -> Result<(), SourceError> {
        let logs = binary_logs(&mut conn).await?;
        if !logs.contains(&self.file) {
            return Err(SourceError::PositionUnavailable(format!(
                "binlog file {} (position {}) is not on the server any more (purged?); the oldest \
                 available is {}; restart with scan.startup.mode: initial or a newer offset",
                self.file,
                self.next_pos,
                logs.first().map_or("none", String::as_str)
            )));
        }
        self.dump(conn, None).await
    }

    async fn start_binlog_gtid(&mut self, conn: Conn, gtid: &str) -> Result<(), SourceError> {
        self.file.clear();
        self.next_pos = 4;
        self.dump(conn, Some(gtid)).await
    }

    async fn dump(&mut self, conn: Conn, gtid: Option<&str>) -> Result<(), SourceError> {
        self.dump_request(conn, gtid, None).await
    }

    /// Starts a dump at the current file/position, or at a MariaDB GTID
    /// position (`mariadb_gtid`), or after a MySQL GTID set (`mysql_gtids`).
    async fn dump_request(
        &mut self,
        mut conn: Conn,
        gtid: Option<&str>,
        mysql_gtids: Option<Vec<mysql_async::Sid<'static>>>,
    ) -> Result<(), SourceError> {
        let heartbeat_ns = self
            .config
            .heartbeat_interval
            .as_nanos()
            .min(u128::from(u32::MAX) * 1_000_000) as u64;
        let mut setup = vec![
            format!("SET @master_heartbeat_period = {heartbeat_ns}"),
            "SET @master_binlog_checksum = @@global.binlog_checksum".to_string(),
        ];
        if self.mariadb {
            // Capability 4: GTID-aware replica (real GTID events, not fake BEGINs).
            setup.push("SET @mariadb_slave_capability = 4".into());
        }
        if let Some(gtid) = gtid {
            setup.push(format!(
                "SET @slave_connect_state = {}",
                schema_cache::quote(gtid)
            ));
            setup.push("SET @slave_gtid_strict_mode = 0".into());
            setup.push("SET @slave_gtid_ignore_duplicates = 0".into());
        }
        for sql in &setup {
            conn.query_drop(sql)
                .await
                .map_err(db_err("preparing the binlog dump"))?;
        }
        let checksum: Option<String> = conn
            .query_first("SELECT @master_binlog_checksum")
            .await
            .map_err(db_err("reading binlog_checksum"))?;
        self.checksum_len = match checksum.as_deref() {
            Some(c) if c.eq_ignore_ascii_case("NONE") => 0,
            _ => 4,
        };
        self.fde_seen = false;
        let file = self.file.clone();
        let mut request = BinlogStreamRequest::new(self.server_id)
            .with_filename(file.as_bytes())
            .with_pos(self.next_pos);
        if let Some(sids) = mysql_gtids {
            request = request.with_gtid().with_gtid_set(sids);
        }
        let stream = conn
            .get_binlog_stream(request)
            .await
            .map_err(|e| self.dump_error(e))?;
        self.stream = Some(stream);
        self.decoders.clear();
        self.ignored.clear();
        // A dump starts between transactions (or at a transaction's first
        // event); `skip_rows` survives: it says what to skip in that one.
        self.tx = None;
        self.tx_rows = 0;
        self.tx_standalone = false;
        self.tx_explicit = false;
        self.last_packet = Instant::now();
        self.dump_started = self.last_packet;
        self.phase = Phase::Binlog;
        Ok(())
    }

    fn dump_error(&self, e: mysql_async::Error) -> SourceError {
        match e {
            // ER_MASTER_FATAL_ERROR_READING_BINLOG: purged or bad position.
            mysql_async::Error::Server(ref s) if s.code == 1236 => SourceError::PositionUnavailable(format!(
                "binlog file {} position {}: {} (purged? restart with scan.startup.mode: initial or a newer offset)",
                self.file, self.next_pos, s.message
            )),
            e => SourceError::Database(format!(
                "binlog dump from {} position {}: {e}",
                self.file, self.next_pos
            )),
        }
    }

    fn position(&self) -> SourcePosition {
        let (file, pos, skip_rows) = match &self.tx {
            Some((file, pos)) => (file.clone(), *pos, self.tx_rows.max(self.skip_rows)),
            None => (self.file.clone(), self.next_pos, 0),
        };
        let filter_text = self.filter.as_ref().map_or("", |f| f.text.as_str());
        let mut data =
            String::with_capacity(file.len() + 48 + self.schemas_hex.len() + filter_text.len());
        data.push_str(&file);
        let _ = write!(data, "\t{pos}\t{skip_rows}\t");
        data.push_str(&self.schemas_hex);
        if !filter_text.is_empty() {
            // The snapshot's skip rule, until the binlog passes its watermarks.
            data.push('\t');
            data.push_str(filter_text);
        }
        SourcePosition::Opaque {
            source: BINLOG_POSITION_SOURCE.into(),
            data,
        }
    }

    /// Re-encodes the schema cache for positions (after it changed: rare).
    fn schemas_changed(&mut self) {
        let text = self.cache.to_ddl();
        let mut hex = String::with_capacity(text.len() * 2);
        for b in text.bytes() {
            let _ = write!(hex, "{b:02x}");
        }
        self.schemas_hex = hex;
    }

    /// Updates the progress the runtime reads: phase, the last event's
    /// time, the binlog head (asked at most every [`HEAD_REFRESH_INTERVAL`];
    /// a failed ask only leaves the head unknown) and the bytes behind it.
    async fn report_progress(&mut self) {
        let phase = match self.phase {
            Phase::Snapshot(_) => "snapshot",
            Phase::Binlog => "binlog",
            Phase::Done => "done",
        };
        if matches!(self.phase, Phase::Binlog)
            && self
                .head_asked
                .is_none_or(|t| t.elapsed() >= HEAD_REFRESH_INTERVAL)
        {
            self.head_asked = Some(Instant::now());
            // Bounded: a database that does not answer must not hold the
            // source up (the binlog connection notices and reconnects).
            let ask = async {
                if self.query_conn.is_none() {
                    self.query_conn = connect_once(&self.opts, &self.config).await.ok();
                }
                match self.query_conn.as_mut() {
                    Some(conn) => master_status(conn).await.ok(),
                    None => None,
                }
            };
            match tokio::time::timeout(HEAD_ASK_MAX, ask).await {
                Ok(Some(head)) => self.head = Some(head),
                _ => self.query_conn = None,
            }
        }
        let behind_bytes = match &self.head {
            Some((file, pos)) if *file == self.file => Some(pos.saturating_sub(self.next_pos)),
            _ => None,
        };
        let event_time_ms =
            (self.last_event_time > 0).then(|| i64::from(self.last_event_time) * 1000);
        let head = self
            .head
            .as_ref()
            .map(|(file, pos)| format!("{file}:{pos}"));
        self.progress.update(|p| {
            p.phase = phase;
            p.event_time_ms = event_time_ms;
            p.behind_bytes = behind_bytes;
            p.head = head;
        });
    }

    fn reached_until(&self) -> bool {
        match &self.until {
            Some((file, pos)) => {
                self.tx.is_none()
                    && !self.file.is_empty()
                    && (self.file.as_str(), self.next_pos) >= (file.as_str(), *pos)
            }
            None => false,
        }
    }

    async fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        if let Phase::Snapshot(_) = self.phase {
            return self.snapshot_batch(batch).await;
        }
        if let Phase::Done = self.phase {
            return Ok(Poll::End);
        }
        let deadline = Instant::now() + IDLE_RETURN_MAX;
        loop {
            if self.reached_until() {
                self.phase = Phase::Done;
                batch.set_position(self.position());
                return Ok(Poll::End);
            }
            if batch.is_full() || self.stop.is_raised() {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let Some(stream) = self.stream.as_mut() else {
                break;
            };
            let next = match tokio::time::timeout(deadline - now, stream.next()).await {
                Err(_) => {
                    // Idle. Without even a heartbeat for two periods the link is dead.
                    if self.last_packet.elapsed()
                        > 2 * self.config.heartbeat_interval + IDLE_RETURN_MAX
                    {
                        let cause = format!(
                            "no binlog event or heartbeat for {:?}",
                            self.last_packet.elapsed()
                        );
                        self.reconnect(cause).await?;
                    }
                    break;
                }
                Ok(next) => next,
            };
            self.last_packet = Instant::now();
            match next {
                Some(Ok(event)) => self.handle(&event, batch).await?,
                Some(Err(e)) => {
                    if !is_transient(&e) {
                        return Err(self.dump_error(e));
                    }
                    self.reconnect(e.to_string()).await?;
                }
                None => {
                    self.reconnect("the server ended the binlog stream".into())
                        .await?
                }
            }
        }
        batch.set_position(self.position());
        Ok(Poll::Ready)
    }

    /// The binlog connection failed with `cause`: reconnects and resumes the
    /// dump at the last position handed out (the current transaction's
    /// start, skipping the rows already delivered), waiting
    /// [`reconnect_backoff`] between attempts. After `1 + connect.max-retries`
    /// failed attempts in a row the error names the server, the position and
    /// the last cause. A position the server no longer has fails at once.
    async fn reconnect(&mut self, cause: String) -> Result<(), SourceError> {
        self.stream = None;
        if self.dump_started.elapsed() >= RECONNECT_HEALTHY_AFTER {
            self.reconnects = 0;
        }
        if let Some((file, pos)) = self.tx.take() {
            // `tx_rows` counts skipped rows too: the larger of the two is
            // what the sink already has from this transaction.
            self.skip_rows = self.skip_rows.max(self.tx_rows);
            self.file = file;
            self.next_pos = pos;
        }
        let attempts = self.config.connect_max_retries.saturating_add(1);
        let mut last = cause;
        loop {
            self.reconnects += 1;
            if self.reconnects > attempts {
                return Err(SourceError::Database(format!(
                    "lost the binlog connection to {}:{} and could not resume at {} {} \
                     after {attempts} attempts (connect.max-retries = {}): {last}",
                    self.config.hostname,
                    self.config.port,
                    self.file,
                    self.next_pos,
                    self.config.connect_max_retries
                )));
            }
            let wait = reconnect_backoff(self.reconnects);
            tracing::warn!(
                "binlog connection to {}:{} lost ({last}); resuming at {} {} \
                 (attempt {} of {attempts}, in {wait:?})",
                self.config.hostname,
                self.config.port,
                self.file,
                self.next_pos,
                self.reconnects
            );
            if !sleep_unless_stopped(wait, &self.stop).await {
                return Err(SourceError::Database(format!(
                    "stopped while reconnecting to {}:{} ({last})",
                    self.config.hostname, self.config.port
                )));
            }
            let conn = match connect_once(&self.opts, &self.config).await {
                Ok(conn) => conn,
                Err(e) if is_transient(&e) => {
                    last = e.to_string();
                    continue;
                }
                Err(e) => {
                    return Err(SourceError::Database(format!(
                        "reconnecting to {}:{} as {}: {e}",
                        self.config.hostname, self.config.port, self.config.username
                    )))
                }
            };
            match self.start_binlog(conn).await {
                Ok(()) => {
                    tracing::info!(
                        "binlog connection to {}:{} restored at {} {}",
                        self.config.hostname,
                        self.config.port,
                        self.file,
                        self.next_pos
                    );
                    return Ok(());
                }
                // A query or the dump request failed: the server may be
                // going away again; anything else (purged position) is final.
                Err(SourceError::Database(e)) => last = e,
                Err(e) => return Err(e),
            }
        }
    }

    /// The snapshot's position: its progress.
    fn snapshot_position(progress: &Progress) -> SourcePosition {
        SourcePosition::Opaque {
            source: SNAPSHOT_POSITION_SOURCE.into(),
            data: progress.encode(),
        }
    }

    async fn snapshot_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        let deadline = Instant::now() + IDLE_RETURN_MAX;
        loop {
            let Phase::Snapshot(state) = &mut self.phase else {
                return Ok(Poll::Ready);
            };
            if state.announce_floor {
                state.announce_floor = false;
                batch.set_position_durable(Self::snapshot_position(&state.progress));
                return Ok(Poll::Ready);
            }
            let now = Instant::now();
            if batch.is_full() || self.stop.is_raised() || now >= deadline {
                break;
            }
            if let Some(draining) = &mut state.draining {
                if drain(draining, &state.tables, batch, &mut self.scratch)? {
                    let chunk = &draining.chunk;
                    let id = &state.plan[chunk.table].id;
                    let marks = match state.progress.tables.iter().position(|(t, _)| t == id) {
                        Some(i) => &mut state.progress.tables[i].1,
                        None => {
                            state.progress.tables.push((
                                id.clone(),
                                TableMarks::Chunks {
                                    runs: Vec::new(),
                                    done: false,
                                },
                            ));
                            &mut state.progress.tables.last_mut().expect("just pushed").1
                        }
                    };
                    // Chunked tables have a key: a resumed run records
                    // them under the floor.
                    let high = state.lower_to.as_ref().unwrap_or(&chunk.high).clone();
                    marks.push_chunk(chunk.hi, high);
                    state.draining = None;
                    // The batch ends with the chunk: its new position must
                    // not be carried first by a batch with rows after it
                    // (see the runtime's commit rule).
                    break;
                }
                continue;
            }
            // Bounded wait, so a slow server never holds the runtime past
            // IDLE_RETURN_MAX (the reader task keeps its place meanwhile).
            let Ok(next) = tokio::time::timeout(deadline - now, state.rx.recv()).await else {
                break;
            };
            match next {
                Some(Read::Rows(table, rows)) => {
                    let table = &state.tables[table];
                    for row in &rows {
                        table.push_row(row, batch)?;
                    }
                }
                Some(Read::WholeDone(table, at)) => {
                    let id = state.plan[table].id.clone();
                    // A keyless table keeps its read's watermark: the
                    // sink's replay matching needs the same rows replayed.
                    let keyed = !self.cache.tables[&id].schema.primary_key().is_empty();
                    let at = match &state.lower_to {
                        Some(floor) if keyed => floor.clone(),
                        _ => at,
                    };
                    state.progress.tables.push((id, TableMarks::Whole(at)));
                    // As for a chunk: the batch ends with the table.
                    break;
                }
                Some(Read::Chunk(chunk)) => {
                    let info = &self.cache.tables[&state.plan[chunk.table].id];
                    state.draining = Some(Draining::new(
                        chunk,
                        info,
                        &mut state.scratch_batch,
                        &mut self.scratch,
                    )?);
                }
                Some(Read::Failed(e)) => return Err(e),
                Some(Read::Done) => return self.finish_snapshot(batch).await,
                None if self.stop.is_raised() => break,
                None => {
                    return Err(SourceError::Database(
                        "the snapshot reader stopped without finishing or reporting why".into(),
                    ))
                }
            }
        }
        if let Phase::Snapshot(state) = &self.phase {
            batch.set_position(Self::snapshot_position(&state.progress));
        }
        Ok(Poll::Ready)
    }

    /// Every table is read: the end (`snapshot` mode), or the binlog from
    /// the lowest watermark with the snapshot's skip rule.
    async fn finish_snapshot(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        let Phase::Snapshot(state) = std::mem::replace(&mut self.phase, Phase::Done) else {
            return Ok(Poll::End);
        };
        if !state.initial {
            batch.set_position(Self::snapshot_position(&state.progress));
            return Ok(Poll::End);
        }
        let mut conn = connect(&self.opts, &self.config, &self.stop).await?;
        // From the floor with the schemas of then, when recorded: events
        // between it and a table's marks decode with the schema they were
        // written under, also across DDL since (the filter skips their rows).
        let start = match (&state.progress.floor, &state.progress.floor_schemas) {
            (Some(floor), Some(schemas)) => {
                let ddl = chunks::unhex(schemas).ok_or_else(|| {
                    SourceError::Config("the snapshot's stored schemas are not readable".into())
                })?;
                self.cache = SchemaCache::from_ddl(&ddl, &self.config.tables)?;
                self.schemas_changed();
                self.decoders.clear();
                self.ignored.clear();
                (floor.file.clone(), floor.pos)
            }
            _ => match state.progress.lowest() {
                Some(w) => (w.file, w.pos),
                None => master_status(&mut conn).await?,
            },
        };
        self.file = start.0;
        self.next_pos = start.1;
        self.filter = SnapshotFilter::new(&state.progress);
        tracing::info!(
            "snapshot complete ({} tables); reading the binlog from {} {}",
            state.progress.tables.len(),
            self.file,
            self.next_pos
        );
        self.start_binlog(conn).await?;
        batch.set_position(self.position());
        Ok(Poll::Ready)
    }

    async fn handle(
        &mut self,
        event: &mysql_async::binlog::events::Event,
        batch: &mut EventBatch,
    ) -> Result<(), SourceError> {
        let header = event.header();
        let kind = header.event_type_raw();
        let log_pos = u64::from(header.log_pos());
        // Fake events (rotate, format description on connect) carry time 0.
        if header.timestamp() != 0 {
            self.last_event_time = header.timestamp();
            // A real event: the connection works, the reconnect budget is whole again.
            self.reconnects = 0;
        }
        let start_pos = log_pos.saturating_sub(u64::from(header.event_size()));
        let data = event.data();
        // CRC32 footer check: the framing layer strips the checksum but does
        // not verify it. Costs one CRC pass per event (~8 KB, ~180 rows).
        if self.fde_seen && kind != event_type::FORMAT_DESCRIPTION && kind != event_type::HEARTBEAT
        {
            if let Some(sum) = event.checksum() {
                if event.calc_checksum(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32)
                    != u32::from_le_bytes(sum)
                {
                    return Err(SourceError::Decode(format!(
                        "binlog event of type {kind} at {} {start_pos} fails its CRC32 checksum \
                         (corrupt binlog or transport)",
                        self.file
                    )));
                }
            }
        }
        match kind {
            rows_event::WRITE_V1
            | rows_event::UPDATE_V1
            | rows_event::DELETE_V1
            | rows_event::WRITE_V2
            | rows_event::UPDATE_V2
            | rows_event::DELETE_V2 => {
                if self.skipping(header.timestamp()) {
                    // before the start timestamp
                } else if let Some(decoder) = self.decoders.get(&table_id(data)) {
                    if self.filter.as_ref().is_some_and(|f| !f.until.after(&self.file, start_pos)) {
                        // Past every watermark: the snapshot's skip rule is done.
                        self.filter = None;
                    }
                    let slot = batch.table_slot(&decoder.schema);
                    let skip = self.skip_rows.saturating_sub(self.tx_rows);
                    let marks = self.filter.as_ref().and_then(|f| f.marks(decoder.schema.id()));
                    let rows = match marks {
                        None => decoder.decode_event(kind, data, batch, slot, skip, &mut self.scratch)?,
                        Some(marks) => {
                            let file = self.file.as_str();
                            decoder.decode_event_keyed(kind, data, batch, slot, skip, &mut self.scratch, &mut |before, after| {
                                chunks::keyed_by_marks(marks, file, start_pos, before, after)
                            })?
                        }
                    };
                    self.tx_rows += rows;
                }
            }
            event_type::TABLE_MAP => self.table_map(data).await?,
            event_type::QUERY => {
                let q: QueryEvent<'_> = event
                    .read_event()
                    .map_err(|e| SourceError::Decode(format!("QUERY event at {} {start_pos}: {e}", self.file)))?;
                let sql = q.query();
                if sql.eq_ignore_ascii_case("BEGIN") {
                    if self.tx.is_none() {
                        self.tx = Some((self.file.clone(), start_pos));
                    }
                    self.tx_explicit = true;
                } else if sql.eq_ignore_ascii_case("COMMIT") || sql.eq_ignore_ascii_case("ROLLBACK") {
                    self.end_tx();
                } else {
                    if !self.skipping(header.timestamp()) {
                        let changes = ddl::apply(&mut self.cache, &self.config.tables, &q.schema(), &sql)?;
                        if !changes.is_empty() {
                            // Table ids are re-issued after DDL; drop prepared decoders.
                            self.decoders.clear();
                            self.ignored.clear();
                            for change in changes {
                                batch.push_schema_change(change);
                            }
                            self.schemas_changed();
                        }
                    }
                    // A DDL is its own transaction: MariaDB flags its GTID
                    // standalone; on MySQL it follows a GTID without BEGIN.
                    let ddl_ends_tx = if self.mariadb {
                        self.tx_standalone
                    } else {
                        !self.tx_explicit
                    };
                    if ddl_ends_tx || self.tx.is_none() {
                        self.end_tx();
                    }
                }
            }
            event_type::XID => self.end_tx(),
            event_type::MARIADB_GTID => {
                // seq_no u64, domain_id u32, flags u8
                let flags = data.get(12).copied().unwrap_or(0);
                self.tx = Some((self.file.clone(), start_pos));
                self.tx_standalone = flags & MARIADB_GTID_FL_STANDALONE != 0;
                self.tx_explicit = false;
            }
            event_type::MYSQL_GTID | event_type::MYSQL_ANONYMOUS_GTID => {
                self.tx = Some((self.file.clone(), start_pos));
                self.tx_explicit = false;
            }
            event_type::ROTATE => {
                // position u64, then the file name. The artificial ROTATE that
                // opens a dump comes before the FORMAT_DESCRIPTION event, so
                // the framing layer cannot know to strip its checksum yet.
                let trailer = if self.fde_seen { 0 } else { self.checksum_len };
                let name_end = data.len().saturating_sub(trailer);
                if data.len() < 8 || name_end < 8 {
                    return Err(SourceError::Decode(format!("malformed ROTATE event after {}", self.file)));
                }
                let mut pos = [0u8; 8];
                pos.copy_from_slice(&data[..8]);
                self.file = String::from_utf8_lossy(&data[8..name_end]).into_owned();
                self.next_pos = u64::from_le_bytes(pos);
                return Ok(());
            }
            event_type::FORMAT_DESCRIPTION => self.fde_seen = true,
            event_type::HEARTBEAT => return Ok(()),
            event_type::MARIADB_QUERY_COMPRESSED | event_type::MYSQL_TRANSACTION_PAYLOAD => {
                return Err(SourceError::Unsupported(format!(
                    "compressed binlog events (type {kind}) at {} {start_pos}: turn off log_bin_compress / binlog_transaction_compression",
                    self.file
                )))
            }
            k if (rows_event::MARIADB_COMPRESSED_FIRST..=rows_event::MARIADB_COMPRESSED_LAST).contains(&k) => {
                return Err(SourceError::Unsupported(format!(
                    "compressed rows events (type {k}) at {} {start_pos}: turn off log_bin_compress",
                    self.file
                )))
            }
            _ => {}
        }
        if log_pos != 0 {
            self.next_pos = log_pos;
        }
        Ok(())
    }

    fn skipping(&self, timestamp: u32) -> bool {
        self.min_timestamp.is_some_and(|min| timestamp < min)
    }

    /// The current transaction is complete: the position moves past it and
    /// nothing is left to skip (a resume only ever skips inside one transaction).
    fn end_tx(&mut self) {
        self.tx = None;
        self.skip_rows = 0;
        self.tx_rows = 0;
        self.tx_standalone = false;
        self.tx_explicit = false;
    }

    async fn table_map(&mut self, data: &[u8]) -> Result<(), SourceError> {
        let id = table_id(data);
        if self.ignored.contains_key(&id) {
            return Ok(());
        }
        if let Some(d) = self.decoders.get(&id) {
            // Same id, same map and schema not replaced by DDL: keep the decoder.
            let current = self.cache.tables.get(d.schema.id());
            if current.is_some_and(|t| Arc::ptr_eq(&t.schema, &d.schema)) {
                return Ok(());
            }
        }
        let map = TableMap::parse(data)?;
        if !self.config.tables.matches(&map.database, &map.table) {
            self.ignored.insert(id, ());
            return Ok(());
        }
        let table = TableId::new(&map.database, &map.table);
        if !self.cache.tables.contains_key(&table) {
            // First seen in the binlog (created before the start position by
            // DDL we did not read): load its current definition.
            tracing::info!("loading the schema of {table}, first seen in the binlog");
            if self.query_conn.is_none() {
                self.query_conn = Some(connect(&self.opts, &self.config, &self.stop).await?);
            }
            let conn = self.query_conn.as_mut().expect("just connected");
            let loaded = SchemaCache::load(conn, &self.config.tables, Some(&table)).await?;
            self.cache.tables.extend(loaded.tables);
            self.schemas_changed();
        }
        let Some(info) = self.cache.tables.get(&table) else {
            return Err(SourceError::Decode(format!(
                "table {table} appears in the binlog but not in information_schema (dropped since?)"
            )));
        };
        let decoder = RowDecoder::new(&map, info)?;
        self.decoders.insert(id, decoder);
        Ok(())
    }
}

/// The integer primary-key column (index, name) a table is chunked by, if
/// its key is one column of an integer type that reads as `i64`.
fn int_key(info: &schema_cache::TableInfo) -> Option<(usize, String)> {
    use crate::types::DataType;
    let [k] = info.schema.primary_key() else {
        return None;
    };
    let k = usize::from(*k);
    let column = info.schema.columns().get(k)?;
    let base = info.types.get(k)?.base;
    // The binlog decoder reads the same columns' keys (`RowDecoder`'s key
    // column): integer bases stored as BIGINT-range values, not YEAR/BOOLEAN.
    (matches!(
        column.data_type,
        DataType::TinyInt | DataType::SmallInt | DataType::Int | DataType::BigInt
    ) && matches!(
        base,
        coltype::Base::TinyInt
            | coltype::Base::SmallInt
            | coltype::Base::MediumInt
            | coltype::Base::Int
            | coltype::Base::BigInt
    ))
    .then(|| (k, column.name.to_string()))
}

impl Draining {
    /// Prepares the delivery of `chunk`: replays its backfill events over
    /// the keys in its range, finding each touched key's last change (its
    /// snapshot row gives way to that change's after image, or to nothing).
    fn new(
        chunk: Box<ChunkRead>,
        info: &schema_cache::TableInfo,
        scratch_batch: &mut EventBatch,
        scratch: &mut Scratch,
    ) -> Result<Draining, SourceError> {
        let mut last_change = HashMap::new();
        let mut decoder = None;
        if let Some(map) = &chunk.table_map {
            let d = RowDecoder::new(&TableMap::parse(map)?, info)?;
            let mut n = 0u64;
            for (kind, data) in &chunk.events {
                scratch_batch.clear();
                let slot = scratch_batch.table_slot(&d.schema);
                d.decode_event_keyed(*kind, data, scratch_batch, slot, 0, scratch, &mut |b, a| {
                    if let Some(k) = b.filter(|&k| chunk.covers(k)) {
                        last_change.insert(k, None);
                    }
                    if let Some(k) = a.filter(|&k| chunk.covers(k)) {
                        last_change.insert(k, Some(n));
                    }
                    n += 1;
                    Keyed::Skip
                })?;
            }
            decoder = Some(d);
        }
        Ok(Draining {
            chunk,
            next_row: 0,
            next_event: 0,
            next_change: 0,
            last_change,
            decoder,
        })
    }
}

/// Delivers what fits of a chunk into `batch`; true once all of it is.
fn drain(
    d: &mut Draining,
    tables: &[SnapshotTable],
    batch: &mut EventBatch,
    scratch: &mut Scratch,
) -> Result<bool, SourceError> {
    let table = &tables[d.chunk.table];
    while d.next_row < d.chunk.rows.len() {
        if batch.is_full() {
            return Ok(false);
        }
        let i = d.next_row;
        d.next_row += 1;
        if d.last_change.is_empty() || !d.last_change.contains_key(&d.chunk.keys[i]) {
            table.push_row(&d.chunk.rows[i], batch)?;
        }
    }
    if let Some(decoder) = &d.decoder {
        while d.next_event < d.chunk.events.len() {
            if batch.is_full() {
                return Ok(false);
            }
            let (kind, data) = &d.chunk.events[d.next_event];
            d.next_event += 1;
            let slot = batch.table_slot(&decoder.schema);
            let (last_change, n) = (&d.last_change, &mut d.next_change);
            decoder.decode_event_keyed(*kind, data, batch, slot, 0, scratch, &mut |b, a| {
                let is_last = a.is_some_and(|k| last_change.get(&k) == Some(&Some(*n)));
                *n += 1;
                match (is_last, b) {
                    (false, _) => Keyed::Skip,
                    (true, None) => Keyed::Keep,
                    (true, Some(_)) => Keyed::InsertAfter,
                }
            })?;
        }
    }
    Ok(true)
}

/// Reads a [`BINLOG_POSITION_SOURCE`] position: the binlog position and the
/// schema DDL text stored with it.
fn decode_position(
    data: &str,
) -> Result<(BinlogPosition, String, Option<SnapshotFilter>), SourceError> {
    let bad = || {
        SourceError::Config(format!(
            "stored {BINLOG_POSITION_SOURCE} position is not file\\tpos\\tskip\\tschemas: {:?}",
            data.chars().take(80).collect::<String>()
        ))
    };
    let mut parts = data.split('\t');
    let file = parts.next().filter(|f| !f.is_empty()).ok_or_else(bad)?;
    let pos = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let skip_rows = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let hex = parts.next().ok_or_else(bad)?.as_bytes();
    let filter = match parts.next() {
        Some(text) => SnapshotFilter::from_text(text)?,
        None => None,
    };
    if hex.len() % 2 != 0 {
        return Err(bad());
    }
    let mut bytes = Vec::with_capacity(hex.len() / 2);
    for pair in hex.chunks(2) {
        let text = std::str::from_utf8(pair).map_err(|_| bad())?;
        bytes.push(u8::from_str_radix(text, 16).map_err(|_| bad())?);
    }
    let schemas = String::from_utf8(bytes).map_err(|_| bad())?;
    Ok((
        BinlogPosition {
            file: file.to_string(),
            pos,
            gtids: None,
            skip_events: 0,
            skip_rows,
        },
        schemas,
        filter,
    ))
}

/// Parses a MySQL GTID set (`uuid:1-5:7,uuid2:1-3`).
fn parse_mysql_gtid_set(set: &str) -> Result<Vec<mysql_async::Sid<'static>>, SourceError> {
    set.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|sid| {
            sid.parse().map_err(|e| {
                SourceError::Config(format!(
                    "scan.startup.specific-offset.gtid-set: {sid:?} is not a MySQL GTID (uuid:interval[:interval]): {e}"
                ))
            })
        })
        .collect()
}

fn table_id(data: &[u8]) -> u64 {
    data.iter()
        .take(6)
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// First wait before another connection attempt after a failed one; the
/// wait doubles per attempt up to [`RECONNECT_BACKOFF_MAX`]. A second is
/// long enough that the default `connect.max-retries` (3: waits of 1, 2 and
/// 4 s) outlasts a server restart of a few seconds, short enough that a blip
/// costs little.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_secs(1);
/// Longest wait between two connection attempts, so a large
/// `connect.max-retries` keeps trying at a steady pace instead of sleeping
/// for hours.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A binlog connection that stayed up this long (or delivered a real event)
/// counts as healthy: its failure starts a new reconnect budget, so blips
/// days apart never add up to `connect.max-retries`.
const RECONNECT_HEALTHY_AFTER: Duration = Duration::from_secs(10);
/// Granularity at which a backoff wait notices a stop request.
const STOP_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// MariaDB/MySQL error codes that mean the server is going away or cut the
/// session, not that the request was wrong: ER_CON_COUNT_ERROR (1040),
/// ER_SERVER_SHUTDOWN (1053), ER_QUERY_INTERRUPTED (1317) and
/// ER_CONNECTION_KILLED (1927). The source reconnects after them; any other
/// server error (bad password, missing privilege) is reported at once.
const TRANSIENT_SERVER_ERRORS: [u16; 4] = [1040, 1053, 1317, 1927];

/// Whether a failed request should be retried on a new connection.
fn is_transient(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Server(s) => TRANSIENT_SERVER_ERRORS.contains(&s.code),
        _ => true,
    }
}

/// The wait before attempt `attempt` (1-based: no wait before the first).
fn reconnect_backoff(attempt: u32) -> Duration {
    if attempt <= 1 {
        return Duration::ZERO;
    }
    let doublings = (attempt - 2).min(16);
    (RECONNECT_BACKOFF_MIN * (1u32 << doublings)).min(RECONNECT_BACKOFF_MAX)
}

/// Sleeps `wait`, returning early (false) if a stop is requested.
async fn sleep_unless_stopped(wait: Duration, stop: &crate::source::StopFlag) -> bool {
    let until = Instant::now() + wait;
    loop {
        if stop.is_raised() {
            return false;
        }
        let now = Instant::now();
        if now >= until {
            return true;
        }
        tokio::time::sleep((until - now).min(STOP_CHECK_INTERVAL)).await;
    }
}

/// One connection attempt, bounded by `connect.timeout`.
async fn connect_once(
    opts: &mysql_async::Opts,
    config: &MySqlSourceConfig,
) -> Result<Conn, mysql_async::Error> {
    match tokio::time::timeout(config.connect_timeout, Conn::new(opts.clone())).await {
        Ok(result) => result,
        Err(_) => Err(mysql_async::Error::Io(mysql_async::IoError::Io(
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no answer within {:?} (connect.timeout)",
                    config.connect_timeout
                ),
            ),
        ))),
    }
}

/// Connects, trying up to `1 + connect.max-retries` times with a doubling
/// wait ([`reconnect_backoff`]) and logging each failed attempt; the final
/// error names the server and the last cause. A non-transient server error
/// (bad credentials) fails at once; a raised `stop` ends the waiting.
async fn connect(
    opts: &mysql_async::Opts,
    config: &MySqlSourceConfig,
    stop: &crate::source::StopFlag,
) -> Result<Conn, SourceError> {
    let attempts = config.connect_max_retries.saturating_add(1);
    let mut attempt = 1u32;
    loop {
        let e = match connect_once(opts, config).await {
            Ok(conn) => return Ok(conn),
            Err(e) => e,
        };
        if !is_transient(&e) {
            return Err(SourceError::Database(format!(
                "connecting to {}:{} as {}: {e}",
                config.hostname, config.port, config.username
            )));
        }
        if attempt >= attempts {
            return Err(SourceError::Database(format!(
                "cannot connect to {}:{} after {attempts} attempts \
                 (connect.max-retries = {}): {e}",
                config.hostname, config.port, config.connect_max_retries
            )));
        }
        attempt += 1;
        let wait = reconnect_backoff(attempt);
        tracing::warn!(
            "connecting to {}:{} failed ({e}); attempt {attempt} of {attempts} in {wait:?}",
            config.hostname,
            config.port
        );
        if !sleep_unless_stopped(wait, stop).await {
            return Err(SourceError::Database(format!(
                "stopped while connecting to {}:{} ({e})",
                config.hostname, config.port
            )));
        }
    }
}

async fn check_binlog_settings(conn: &mut Conn) -> Result<(), SourceError> {
    let row: Option<(Option<String>, Option<String>, Option<String>)> = conn
        .query_first("SELECT @@global.log_bin, @@global.binlog_format, @@global.binlog_row_image")
        .await
        .map_err(db_err("reading log_bin/binlog_format/binlog_row_image"))?;
    let (log_bin, format, image) = row.unwrap_or_default();
    if !matches!(log_bin.as_deref(), Some("1") | Some("ON")) {
        return Err(SourceError::Config(
            "the server's binary log is off (log_bin); start it with --log-bin --binlog-format=ROW"
                .into(),
        ));
    }
    let format = format.unwrap_or_default();
    if !format.eq_ignore_ascii_case("ROW") {
        return Err(SourceError::Config(format!(
            "the server's binlog_format is {format}, but the MySQL source reads row-based binlogs only: \
             SET GLOBAL binlog_format = 'ROW' (and restart writers) or start the server with --binlog-format=ROW"
        )));
    }
    let image = image.unwrap_or_default();
    if !image.eq_ignore_ascii_case("FULL") {
        return Err(SourceError::Config(format!(
            "the server's binlog_row_image is {image}; the MySQL source needs FULL row images"
        )));
    }
    Ok(())
}
