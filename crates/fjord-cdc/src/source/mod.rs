//! Sources: the [`Source`] trait the runtime drives, and the options every
//! source receives when it starts.
//!
//! Contract for source implementations (the MySQL/MariaDB source in
//! [`mysql`], the Debezium JSON source in [`debezium`]):
//! - The runtime calls [`Source::next_batch`] in a loop on one dedicated
//!   thread, with a cleared [`EventBatch`]. The source appends events until the
//!   batch [is full](EventBatch::is_full), or no event arrives within its idle
//!   wait (at most [`IDLE_RETURN_MAX`]), and sets the batch's position to the
//!   position right after its last event. Empty batches are fine.
//! - Per-table work (type mapping, the row converter, filter matching, routes)
//!   happens once per table schema version; per row the source only decodes
//!   values into a [`crate::row::RowWriter`].
//! - [`Poll::End`] means the source reached its stop point: the end of a
//!   snapshot in `snapshot` mode, the position current at start under
//!   `until_current`, the end of a Debezium input file.
//! - A source started with `StartOptions::resume = Some(p)` continues right
//!   after `p`, ignoring its startup mode; `p` is a position it set itself.
//!
//! The MySQL source's entry point (provided by the cdc-source helper in
//! `source/mysql`) is expected to be
//! `pub fn open(config: MySqlSourceConfig, start: StartOptions) -> Result<Box<dyn Source>, SourceError>`.

pub mod debezium;
pub mod mysql;
mod mysql_config;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use mysql_config::{MySqlSourceConfig, ServerIdRange, SpecificOffset, StartupMode};

use crate::event::EventBatch;
use crate::position::SourcePosition;
use crate::schema::SchemaError;

/// Default `scan.incremental.snapshot.chunk.size` (Flink CDC's default).
pub const SNAPSHOT_CHUNK_SIZE_DEFAULT: u32 = 8096;

/// Longest a source may block in [`Source::next_batch`] without returning, so
/// the runtime can commit offsets and notice a stop request while idle.
pub const IDLE_RETURN_MAX: Duration = Duration::from_millis(500);

/// Whether a source has more to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// More events may follow.
    Ready,
    /// The source reached its stop point; the batch holds its last events.
    End,
}

/// A stop request shared by the runtime and a source (set on SIGINT/SIGTERM).
/// A child flag ([`StopFlag::child`]) is also raised by its parent: the
/// runtime stops one attempt of a run with it without touching the
/// caller's flag.
#[derive(Clone, Debug, Default)]
pub struct StopFlag {
    own: Arc<AtomicBool>,
    parent: Option<Arc<AtomicBool>>,
}

impl StopFlag {
    /// A flag not yet raised.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// A new flag, raised when it or this one is.
    pub fn child(&self) -> StopFlag {
        StopFlag {
            own: Arc::new(AtomicBool::new(false)),
            parent: Some(Arc::clone(&self.own)),
        }
    }

    /// Requests a stop.
    pub fn raise(&self) {
        self.own.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was requested (a source checks this once per batch).
    pub fn is_raised(&self) -> bool {
        self.own.load(Ordering::Relaxed)
            || self
                .parent
                .as_ref()
                .is_some_and(|p| p.load(Ordering::Relaxed))
    }
}

/// What every source receives at start.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Resume right after this position (from the offset store) instead of the startup mode.
    pub resume: Option<SourcePosition>,
    /// Stop with [`Poll::End`] once the position that was current at start is reached.
    pub until_current: bool,
    /// Raised when the pipeline is asked to stop.
    pub stop: StopFlag,
}

/// A producer of change events in batches.
pub trait Source: Send {
    /// Appends the next events to `batch` (cleared by the caller) and sets its
    /// position; see the module docs for the contract.
    fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError>;

    /// Where the source reports its progress (read by the runtime's progress
    /// lines); `None` if it reports none.
    fn progress(&self) -> Option<SourceProgress> {
        None
    }
}

/// What a source reports about its progress, updated once per batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// `snapshot`, `binlog`, ...
    pub phase: &'static str,
    /// Source time of the last event read (ms since 1970), if known.
    pub event_time_ms: Option<i64>,
    /// Bytes between the read position and the source's head, if known.
    pub behind_bytes: Option<u64>,
    /// The source's head (e.g. `binlog.000003:4711`), if known.
    pub head: Option<String>,
}

/// A source's progress, shared with the runtime (one lock per batch).
#[derive(Clone, Debug, Default)]
pub struct SourceProgress(Arc<std::sync::Mutex<ProgressSnapshot>>);

impl SourceProgress {
    /// Replaces the snapshot.
    pub fn update(&self, f: impl FnOnce(&mut ProgressSnapshot)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The current snapshot.
    pub fn get(&self) -> ProgressSnapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a source failed. Messages say what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A configuration value is unusable (found when the source starts).
    #[error("source configuration: {0}")]
    Config(String),
    /// Reading input failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being read.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database refused or failed a request.
    #[error("database: {0}")]
    Database(String),
    /// The requested position is no longer available (binlog purged).
    #[error("source position no longer available: {0}")]
    PositionUnavailable(String),
    /// A read was cut off in a way only a restart from the last committed
    /// position recovers (a snapshot table read in one consistent view
    /// whose connection was lost). The runtime resumes from that position
    /// when it has a state dir.
    #[error("{0}")]
    Interrupted(String),
    /// Input could not be decoded.
    #[error("decode: {0}")]
    Decode(String),
    /// The input uses something this source does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A table schema could not be built.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// Any other failure of a source implementation.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}
