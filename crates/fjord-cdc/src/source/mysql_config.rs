//! The typed options of the `mysql` (and `mariadb`) source, parsed from the
//! pipeline YAML by [`crate::config`] with Flink CDC's option names.

use std::time::Duration;

use crate::filter::TableFilter;

/// `scan.startup.specific-offset.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecificOffset {
    /// `scan.startup.specific-offset.file` + `.pos`.
    File {
        /// Binlog file name.
        file: String,
        /// Byte position.
        pos: u64,
    },
    /// `scan.startup.specific-offset.gtid-set` (MySQL GTID set or MariaDB GTID list).
    GtidSet(String),
}

/// `scan.startup.mode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartupMode {
    /// `initial` (default): snapshot, then the binlog from the snapshot's position.
    Initial,
    /// `snapshot`: snapshot only, then stop.
    Snapshot,
    /// `earliest-offset`: the oldest binlog still on the server.
    EarliestOffset,
    /// `latest-offset`: only changes after start.
    LatestOffset,
    /// `specific-offset`.
    SpecificOffset {
        /// Where to start.
        offset: SpecificOffset,
        /// `scan.startup.specific-offset.skip-events`.
        skip_events: u64,
        /// `scan.startup.specific-offset.skip-rows`.
        skip_rows: u64,
    },
    /// `timestamp`: the first binlog event at or after `scan.startup.timestamp-millis`.
    Timestamp {
        /// Milliseconds since 1970-01-01T00:00Z.
        millis: i64,
    },
}

/// `server-id`: one id, or a range `5400-5404` (one per parallel reader).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerIdRange {
    /// First id.
    pub start: u32,
    /// Last id (inclusive).
    pub end: u32,
}

/// Options of the MySQL/MariaDB source.
#[derive(Clone, Debug)]
pub struct MySqlSourceConfig {
    /// `type`: `mysql` or `mariadb` (the binlog dialect hint; servers are also probed).
    pub source_type: String,
    /// `hostname`.
    pub hostname: String,
    /// `port` (default 3306).
    pub port: u16,
    /// `username`.
    pub username: String,
    /// `password`.
    pub password: String,
    /// `tables` and `tables.exclude`, compiled.
    pub tables: TableFilter,
    /// `server-id` (default: a random id in 5400..=6400 chosen by the source).
    pub server_id: Option<ServerIdRange>,
    /// `server-time-zone` (e.g. `UTC`, `Asia/Shanghai`, `+08:00`); default: the server's.
    pub server_time_zone: Option<String>,
    /// `scan.startup.mode` and its offset/timestamp options.
    pub startup: StartupMode,
    /// `scan.snapshot.fetch.size` (default 1024): rows handed over at a time
    /// by the whole-table read of a table that is not chunked.
    pub snapshot_fetch_size: u32,
    /// `scan.incremental.snapshot.chunk.size` (default 8096, Flink CDC's):
    /// rows per snapshot chunk of a table whose primary key is one integer
    /// column, each chunk read in its own short statement between two
    /// binlog watermarks; other tables are read whole in one consistent view.
    pub snapshot_chunk_size: u32,
    /// `connect.timeout` (default 30 s): longest one connection attempt
    /// (and one wait for a binlog event while reading a chunk's backfill).
    pub connect_timeout: Duration,
    /// `connect.max-retries` (default 3): attempts after a failed one to
    /// connect or to resume a lost connection, with doubling waits.
    pub connect_max_retries: u32,
    /// `heartbeat.interval` (default 30 s).
    pub heartbeat_interval: Duration,
}
