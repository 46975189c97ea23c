//! Sinks: the [`Sink`] trait the runtime drives.
//!
//! The runtime calls [`Sink::restore`] once, then [`Sink::write_batch`] for
//! each batch in stream order on the sink's own thread, then
//! [`Sink::flush`] and [`Sink::checkpoint`] before committing a position:
//! once `flush` returns `Ok`, every event written so far counts as
//! delivered, and the position after the last written batch is stored
//! together with the state `checkpoint` returns, so a restarted pipeline
//! resumes right after it.

pub mod fluss;
pub mod json;
pub mod print;
pub mod values;

use std::sync::Arc;

use crate::event::EventBatch;
use crate::offsets::OffsetStore;

/// A consumer of change-event batches.
pub trait Sink: Send {
    /// Called once before the first batch with the sink state committed with
    /// the position the run resumes from (`None` on a fresh start or for a
    /// position committed without state), and the offset store, through
    /// which a sink may commit a new state at the last committed position
    /// ([`OffsetStore::commit_sink_state`]); `None` when no state is kept.
    fn restore(
        &mut self,
        state: Option<&str>,
        store: Option<Arc<OffsetStore>>,
    ) -> Result<(), SinkError> {
        let _ = (state, store);
        Ok(())
    }

    /// Consumes every event of the batch, in order. Per-event work must not
    /// allocate or format beyond what the sink's output itself needs.
    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError>;

    /// Makes everything written so far delivered (flushed, acknowledged).
    fn flush(&mut self) -> Result<(), SinkError>;

    /// The state to commit with the position after the last flushed batch,
    /// or [`Checkpoint::Hold`] when no position may be committed now;
    /// called right after a successful [`Sink::flush`].
    fn checkpoint(&mut self) -> Result<Checkpoint, SinkError> {
        Ok(Checkpoint::Commit(None))
    }

    /// Figures of what the sink did so far (progress lines and the run's summary).
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// What [`Sink::checkpoint`] allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// Commit the position, with this sink state.
    Commit(Option<String>),
    /// Commit nothing now (the sink is still matching replayed events
    /// against what it wrote before a restart, see `sink::fluss::recovery`):
    /// a restart must resume from the position committed before.
    Hold,
}

/// Per sink table, what a sink wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// The sink table (`database.table`).
    pub table: String,
    /// Rows upserted (primary-key tables) or appended (log tables).
    pub rows: u64,
    /// Deletes (primary-key tables).
    pub deletes: u64,
}

/// What a sink did so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Per table, in the order tables were first written.
    pub tables: Vec<TableStats>,
    /// Schema changes applied to sink tables (created, altered, dropped, truncated).
    pub schema_changes: u64,
    /// Flushes (each waits for every write to be acknowledged).
    pub flushes: u64,
    /// Time spent waiting in flushes.
    pub flush_wait: std::time::Duration,
    /// Events replayed after a restart that the sink found already written
    /// and skipped (log tables, see `sink::fluss::recovery`).
    pub skipped_replays: u64,
}

/// Why a sink failed.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing the sink's output failed.
    #[error("sink {sink}: {source}")]
    Io {
        /// Sink name (`print`, ...).
        sink: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sink cannot represent an event.
    #[error("sink {sink}: {message}")]
    Unsupported {
        /// Sink name.
        sink: &'static str,
        /// What could not be written.
        message: String,
    },
    /// The sink's service cannot be reached; writes since the last commit
    /// may be lost. The runtime waits and resumes from the last committed
    /// position.
    #[error("sink {sink}: {message}")]
    Unavailable {
        /// Sink name.
        sink: &'static str,
        /// What failed.
        message: String,
    },
    /// The sink failed for another reason (a refused write, a table
    /// definition clash, a schema change it may not apply).
    #[error("sink {sink}: {message}")]
    Failed {
        /// Sink name.
        sink: &'static str,
        /// What failed and what to do.
        message: String,
    },
}

impl SinkError {
    /// Whether the runtime should wait and resume from the last committed
    /// position rather than stop.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SinkError::Unavailable { .. })
    }
}
