//! The `print` sink: one JSON object per event, one per line, on stdout (or any
//! writer).
//!
//! ```text
//! {"table":"db.tbl","op":"insert"|"update"|"delete","before":{...}|null,"after":{...}|null}
//! {"table":"db.tbl","schema_change":{"type":"add_column",...}}
//! ```
//! Values follow [`super::json::write_value`]. The column names of each
//! table schema version are escaped once and cached as `"name":` prefixes;
//! per event the sink only appends bytes to one reused buffer, written out
//! once per batch.

use std::io::Write;
use std::sync::Arc;

use super::json;
use super::{Sink, SinkError};
use crate::event::{
    ChangeEvent, ColumnPosition, Event, EventBatch, SchemaChange, SchemaChangeEvent,
};
use crate::row::RowRef;
use crate::schema::{Column, TableSchema};

/// Most table schema versions whose rendered column keys are cached; the cache
/// is emptied when full, so a source that rebuilds schemas cannot grow it forever.
pub const PRINT_SCHEMA_CACHE_MAX: usize = 1024;

/// Bytes buffered before a write to the output within a batch; bounds memory
/// for batches of very wide rows.
pub const PRINT_BUFFER_FLUSH_BYTES: usize = 1 << 20;

/// Pre-rendered pieces of one table schema version.
struct Rendered {
    schema: Arc<TableSchema>,
    /// `{"table":"db.tbl","op":"`.
    head: Vec<u8>,
    /// `"name":` per column (first without the leading comma).
    keys: Vec<Vec<u8>>,
}

/// Writes events as JSON lines.
pub struct PrintSink<W: Write + Send> {
    out: W,
    buf: Vec<u8>,
    rendered: Vec<Rendered>,
}

impl<W: Write + Send> PrintSink<W> {
    /// A print sink writing to `out`.
    pub fn new(out: W) -> PrintSink<W> {
        PrintSink {
            out,
            buf: Vec::with_capacity(PRINT_BUFFER_FLUSH_BYTES + 64 * 1024),
            rendered: Vec::new(),
        }
    }

    /// The writer (tests read what was printed).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn rendered_for(&mut self, schema: &Arc<TableSchema>) -> usize {
        // Few schemas are live at once; a scan by pointer is cheaper than hashing.
        // Holding the Arc keeps the address from being reused by another schema.
        if let Some(i) = self
            .rendered
            .iter()
            .position(|r| Arc::ptr_eq(&r.schema, schema))
        {
            return i;
        }
        if self.rendered.len() >= PRINT_SCHEMA_CACHE_MAX {
            self.rendered.clear();
        }
        let mut head = Vec::new();
        head.extend_from_slice(b"{\"table\":");
        json::write_str(&mut head, schema.id().to_string().as_bytes());
        head.extend_from_slice(b",\"op\":\"");
        let keys = schema
            .columns()
            .iter()
            .map(|c| {
                let mut key = Vec::new();
                json::write_str(&mut key, c.name.as_bytes());
                key.push(b':');
                key
            })
            .collect();
        self.rendered.push(Rendered {
            schema: Arc::clone(schema),
            head,
            keys,
        });
        self.rendered.len() - 1
    }

    fn write_row(buf: &mut Vec<u8>, keys: &[Vec<u8>], row: Option<RowRef<'_>>) {
        let Some(row) = row else {
            buf.extend_from_slice(b"null");
            return;
        };
        buf.push(b'{');
        for (i, key) in keys.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(key);
            json::write_value(buf, &row, i);
        }
        buf.push(b'}');
    }

    fn write_change(&mut self, event: &ChangeEvent<'_>, index: usize) {
        let rendered = &self.rendered[index];
        let buf = &mut self.buf;
        buf.extend_from_slice(&rendered.head);
        buf.extend_from_slice(event.op.as_str().as_bytes());
        buf.extend_from_slice(b"\",\"before\":");
        Self::write_row(buf, &rendered.keys, event.before);
        buf.extend_from_slice(b",\"after\":");
        Self::write_row(buf, &rendered.keys, event.after);
        buf.extend_from_slice(b"}\n");
    }

    fn flush_buffer(&mut self) -> Result<(), SinkError> {
        self.out
            .write_all(&self.buf)
            .map_err(|source| SinkError::Io {
                sink: "print",
                source,
            })?;
        self.buf.clear();
        Ok(())
    }
}

fn write_column(buf: &mut Vec<u8>, column: &Column) {
    buf.extend_from_slice(b"{\"name\":");
    json::write_str(buf, column.name.as_bytes());
    buf.extend_from_slice(b",\"type\":");
    json::write_str(buf, column.data_type.to_string().as_bytes());
    buf.extend_from_slice(b",\"nullable\":");
    buf.extend_from_slice(if column.nullable { b"true" } else { b"false" });
    buf.push(b'}');
}

/// Appends a schema-change event as one JSON line (rare: formats freely).
pub fn write_schema_change(buf: &mut Vec<u8>, event: &SchemaChangeEvent) {
    buf.extend_from_slice(b"{\"table\":");
    json::write_str(buf, event.table.to_string().as_bytes());
    buf.extend_from_slice(b",\"schema_change\":{\"type\":\"");
    buf.extend_from_slice(event.change.kind_str().as_bytes());
    buf.push(b'"');
    match &event.change {
        SchemaChange::CreateTable => {
            if let Some(schema) = &event.schema {
                buf.extend_from_slice(b",\"columns\":[");
                for (i, column) in schema.columns().iter().enumerate() {
                    if i > 0 {
                        buf.push(b',');
                    }
                    write_column(buf, column);
                }
                buf.extend_from_slice(b"],\"primary_key\":[");
                for (i, name) in schema.primary_key_names().enumerate() {
                    if i > 0 {
                        buf.push(b',');
                    }
                    json::write_str(buf, name.as_bytes());
                }
                buf.push(b']');
            }
        }
        SchemaChange::AddColumn { column, position } => {
            buf.extend_from_slice(b",\"column\":");
            write_column(buf, column);
            buf.extend_from_slice(b",\"position\":");
            match position {
                ColumnPosition::Last => buf.extend_from_slice(b"\"last\""),
                ColumnPosition::First => buf.extend_from_slice(b"\"first\""),
                ColumnPosition::After(name) => {
                    buf.extend_from_slice(b"{\"after\":");
                    json::write_str(buf, name.as_bytes());
                    buf.push(b'}');
                }
            }
        }
        SchemaChange::DropColumn { name } => {
            buf.extend_from_slice(b",\"column\":");
            json::write_str(buf, name.as_bytes());
        }
        SchemaChange::RenameColumn { from, to } => {
            buf.extend_from_slice(b",\"from\":");
            json::write_str(buf, from.as_bytes());
            buf.extend_from_slice(b",\"to\":");
            json::write_str(buf, to.as_bytes());
        }
        SchemaChange::AlterColumnType { name, data_type } => {
            buf.extend_from_slice(b",\"column\":");
            json::write_str(buf, name.as_bytes());
            buf.extend_from_slice(b",\"data_type\":");
            json::write_str(buf, data_type.to_string().as_bytes());
        }
        SchemaChange::TruncateTable | SchemaChange::DropTable => {}
    }
    buf.extend_from_slice(b"}}\n");
}

impl<W: Write + Send> Sink for PrintSink<W> {
    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
        let mut last: Option<(*const TableSchema, usize)> = None;
        // `last` caches the previous event's table; valid within this batch,
        // which keeps its schemas alive.
        for event in batch.events() {
            match event {
                Event::Change(change) => {
                    let ptr = Arc::as_ptr(change.table);
                    let index = match last {
                        Some((p, i)) if p == ptr => i,
                        _ => {
                            let i = self.rendered_for(change.table);
                            last = Some((ptr, i));
                            i
                        }
                    };
                    self.write_change(&change, index);
                }
                Event::Schema(schema_change) => write_schema_change(&mut self.buf, schema_change),
            }
            if self.buf.len() >= PRINT_BUFFER_FLUSH_BYTES {
                self.flush_buffer()?;
            }
        }
        self.flush_buffer()
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.flush_buffer()?;
        self.out.flush().map_err(|source| SinkError::Io {
            sink: "print",
            source,
        })
    }
}
