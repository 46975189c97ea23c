//! The `values` sink: counts events and materialises nothing (Flink CDC's
//! values sink with `materialized.in.memory: false`), optionally printing them
//! (`print.enabled: true`) through the print sink's formatter.

use std::io::Write;

use super::print::PrintSink;
use super::{Sink, SinkError};
use crate::event::{Event, EventBatch, Op};

/// Events a values sink has received, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventCounts {
    /// Inserts (snapshot rows included).
    pub inserts: u64,
    /// Updates.
    pub updates: u64,
    /// Deletes.
    pub deletes: u64,
    /// Schema changes.
    pub schema_changes: u64,
}

impl EventCounts {
    /// All events.
    pub fn total(&self) -> u64 {
        self.inserts + self.updates + self.deletes + self.schema_changes
    }
}

/// Counts events per kind.
pub struct ValuesSink<W: Write + Send> {
    counts: EventCounts,
    print: Option<PrintSink<W>>,
}

impl<W: Write + Send> ValuesSink<W> {
    /// A counting sink; with `print`, events are also printed as JSON lines.
    pub fn new(print: Option<W>) -> ValuesSink<W> {
        ValuesSink {
            counts: EventCounts::default(),
            print: print.map(PrintSink::new),
        }
    }

    /// Counts so far.
    pub fn counts(&self) -> EventCounts {
        self.counts
    }
}

impl<W: Write + Send> Sink for ValuesSink<W> {
    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
        for event in batch.events() {
            match event {
                Event::Change(change) => match change.op {
                    Op::Insert => self.counts.inserts += 1,
                    Op::Update => self.counts.updates += 1,
                    Op::Delete => self.counts.deletes += 1,
                },
                Event::Schema(_) => self.counts.schema_changes += 1,
            }
        }
        match &mut self.print {
            Some(print) => print.write_batch(batch),
            None => Ok(()),
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.print {
            Some(print) => print.flush(),
            None => Ok(()),
        }
    }
}
