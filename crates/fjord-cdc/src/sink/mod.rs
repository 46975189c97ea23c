//! Sinks: the [`Sink`] trait the runtime drives.
//!
//! The runtime calls [`Sink::write_batch`] for each batch in stream order on
//! the sink's own thread, then [`Sink::flush`] before committing a position:
//! once `flush` returns `Ok`, every event written so far counts as delivered
//! and the position after the last written batch may be stored, so a
//! restarted pipeline resumes right after it.

pub mod json;
pub mod print;
pub mod values;

use crate::event::EventBatch;

/// A consumer of change-event batches.
pub trait Sink: Send {
    /// Consumes every event of the batch, in order. Per-event work must not
    /// allocate or format beyond what the sink's output itself needs.
    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError>;

    /// Makes everything written so far delivered (flushed, acknowledged).
    fn flush(&mut self) -> Result<(), SinkError>;
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
}
