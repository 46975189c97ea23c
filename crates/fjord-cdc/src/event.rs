//! Change events and the batch that carries them from a source to a sink.
//!
//! An [`EventBatch`] owns one byte arena for all its rows, a short list of the
//! table schemas its events refer to, and fixed-size event entries. Sources
//! fill it row by row through [`EventBatch::row_writer`]; the runtime hands the
//! whole batch to the sink thread and gets it back to reuse, so after warm-up a
//! batch allocates nothing and threads exchange one message per batch.

use std::sync::Arc;

use crate::position::SourcePosition;
use crate::row::{RowHandle, RowRef, RowWriter};
use crate::schema::{Column, TableId, TableSchema};
use crate::types::DataType;

/// Default most events per batch: large enough that per-batch costs (a channel
/// hand-off, an offset commit check) vanish per event, small enough that a
/// batch of wide rows stays within a few MiB.
pub const BATCH_EVENTS_MAX: usize = 4096;

/// Default arena size (bytes) after which a batch reports full even with fewer
/// than [`BATCH_EVENTS_MAX`] events; bounds memory per batch for wide rows.
pub const BATCH_BYTES_SOFT_MAX: usize = 8 << 20;

/// The kind of a row change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A new row (also every row read by a snapshot, as in Flink CDC).
    Insert,
    /// A changed row: before and after images.
    Update,
    /// A removed row: before image.
    Delete,
}

impl Op {
    /// `insert` / `update` / `delete`: the print sink's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }
}

/// Where an added column goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnPosition {
    /// After the last column.
    Last,
    /// Before the first column.
    First,
    /// Right after the named column.
    After(Arc<str>),
}

/// One DDL effect on one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaChange {
    /// The table was created (its schema is the event's `schema`).
    CreateTable,
    /// A column was added.
    AddColumn {
        /// The new column.
        column: Column,
        /// Where it was added.
        position: ColumnPosition,
    },
    /// A column was dropped.
    DropColumn {
        /// Its name.
        name: Arc<str>,
    },
    /// A column was renamed.
    RenameColumn {
        /// Old name.
        from: Arc<str>,
        /// New name.
        to: Arc<str>,
    },
    /// A column's type changed.
    AlterColumnType {
        /// Column name.
        name: Arc<str>,
        /// New type.
        data_type: DataType,
    },
    /// All rows were removed.
    TruncateTable,
    /// The table was dropped.
    DropTable,
}

impl SchemaChange {
    /// `create_table`, `add_column`, ...: the print sink's spelling.
    pub fn kind_str(&self) -> &'static str {
        match self {
            SchemaChange::CreateTable => "create_table",
            SchemaChange::AddColumn { .. } => "add_column",
            SchemaChange::DropColumn { .. } => "drop_column",
            SchemaChange::RenameColumn { .. } => "rename_column",
            SchemaChange::AlterColumnType { .. } => "alter_column_type",
            SchemaChange::TruncateTable => "truncate_table",
            SchemaChange::DropTable => "drop_table",
        }
    }
}

/// A schema change of one table, in stream order with the row events.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaChangeEvent {
    /// The table changed.
    pub table: TableId,
    /// What changed.
    pub change: SchemaChange,
    /// The table's schema after the change (`None` after `DropTable`); rows of
    /// this table that follow in the stream use it.
    pub schema: Option<Arc<TableSchema>>,
}

/// Index of a table schema within one batch (see [`EventBatch::table_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSlot(u32);

const NO_ROW: RowHandle = RowHandle {
    start: u32::MAX,
    len: 0,
};

#[derive(Clone, Copy, Debug)]
enum EntryKind {
    Change(Op),
    Schema(u32),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    table: u32,
    kind: EntryKind,
    before: RowHandle,
    after: RowHandle,
}

/// A row change as a sink sees it.
#[derive(Clone, Copy, Debug)]
pub struct ChangeEvent<'a> {
    /// The table's schema at the version the rows follow (the batch's `Arc`,
    /// so sinks may key per-schema caches on it by pointer while holding a clone).
    pub table: &'a Arc<TableSchema>,
    /// Insert, update or delete.
    pub op: Op,
    /// Before image (update, delete).
    pub before: Option<RowRef<'a>>,
    /// After image (insert, update).
    pub after: Option<RowRef<'a>>,
}

/// One event of a batch.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A row change.
    Change(ChangeEvent<'a>),
    /// A schema change.
    Schema(&'a SchemaChangeEvent),
}

/// A batch of events in stream order plus the source position after the last
/// one. Reused: [`EventBatch::clear`] keeps every allocation.
#[derive(Debug)]
pub struct EventBatch {
    tables: Vec<Arc<TableSchema>>,
    entries: Vec<Entry>,
    rows: Vec<u8>,
    schema_changes: Vec<SchemaChangeEvent>,
    position: Option<SourcePosition>,
    /// The position must be durable before any later batch is written.
    durable: bool,
    events_max: usize,
    bytes_soft_max: usize,
}

impl Default for EventBatch {
    fn default() -> Self {
        EventBatch::new(BATCH_EVENTS_MAX, BATCH_BYTES_SOFT_MAX)
    }
}

impl EventBatch {
    /// An empty batch that reports full at `events_max` events or `bytes_soft_max` arena bytes.
    pub fn new(events_max: usize, bytes_soft_max: usize) -> EventBatch {
        let events_max = events_max.max(1);
        EventBatch {
            tables: Vec::new(),
            entries: Vec::with_capacity(events_max),
            rows: Vec::new(),
            schema_changes: Vec::new(),
            position: None,
            durable: false,
            events_max,
            bytes_soft_max,
        }
    }

    /// Empties the batch, keeping its allocations.
    pub fn clear(&mut self) {
        self.tables.clear();
        self.entries.clear();
        self.rows.clear();
        self.schema_changes.clear();
        self.position = None;
        self.durable = false;
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch holds no event.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the source should stop adding events (event count or arena size reached).
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.events_max || self.rows.len() >= self.bytes_soft_max
    }

    /// Bytes of row data in the arena.
    pub fn row_bytes(&self) -> usize {
        self.rows.len()
    }

    /// The slot of `schema` in this batch, adding it if new. Same `Arc` (pointer)
    /// → same slot; sources call it once per table per batch, or per event when
    /// tables interleave (a scan of the few tables in the batch).
    pub fn table_slot(&mut self, schema: &Arc<TableSchema>) -> TableSlot {
        if let Some(i) = self.tables.iter().rposition(|t| Arc::ptr_eq(t, schema)) {
            return TableSlot(i as u32);
        }
        self.tables.push(Arc::clone(schema));
        TableSlot((self.tables.len() - 1) as u32)
    }

    /// The schema of a slot.
    pub fn table(&self, slot: TableSlot) -> &Arc<TableSchema> {
        &self.tables[slot.0 as usize]
    }

    /// Starts a row of the slot's table in the batch's arena.
    pub fn row_writer(&mut self, slot: TableSlot) -> RowWriter<'_> {
        let layout = self.tables[slot.0 as usize].layout();
        RowWriter::new(&mut self.rows, layout)
    }

    /// Appends an insert of `after` (a row written for `slot`).
    pub fn push_insert(&mut self, slot: TableSlot, after: RowHandle) {
        self.push_change(slot, Op::Insert, NO_ROW, after);
    }

    /// Appends an update from `before` to `after`.
    pub fn push_update(&mut self, slot: TableSlot, before: RowHandle, after: RowHandle) {
        self.push_change(slot, Op::Update, before, after);
    }

    /// Appends a delete of `before`.
    pub fn push_delete(&mut self, slot: TableSlot, before: RowHandle) {
        self.push_change(slot, Op::Delete, before, NO_ROW);
    }

    fn push_change(&mut self, slot: TableSlot, op: Op, before: RowHandle, after: RowHandle) {
        debug_assert!((slot.0 as usize) < self.tables.len());
        debug_assert!(before == NO_ROW || (before.start + before.len) as usize <= self.rows.len());
        debug_assert!(after == NO_ROW || (after.start + after.len) as usize <= self.rows.len());
        self.entries.push(Entry {
            table: slot.0,
            kind: EntryKind::Change(op),
            before,
            after,
        });
    }

    /// Appends a schema change (rare: allocates freely).
    pub fn push_schema_change(&mut self, event: SchemaChangeEvent) {
        self.schema_changes.push(event);
        self.entries.push(Entry {
            table: u32::MAX,
            kind: EntryKind::Schema((self.schema_changes.len() - 1) as u32),
            before: NO_ROW,
            after: NO_ROW,
        });
    }

    /// Sets the position after the batch's last event: where a restarted
    /// pipeline resumes once the sink has confirmed this batch.
    pub fn set_position(&mut self, position: SourcePosition) {
        self.position = Some(position);
    }

    /// Sets a position that the runtime commits before it writes any later
    /// batch: for a source that must know, after any restart, that it got
    /// this far before anything after it reached the sink. Only valid on a
    /// batch without events, before the source's first event of the run
    /// (the runtime refuses it otherwise).
    pub fn set_position_durable(&mut self, position: SourcePosition) {
        self.position = Some(position);
        self.durable = true;
    }

    /// Whether the position was set with [`EventBatch::set_position_durable`].
    pub fn position_is_durable(&self) -> bool {
        self.durable
    }

    /// The position after the last event, if the source set one.
    pub fn position(&self) -> Option<&SourcePosition> {
        self.position.as_ref()
    }

    /// Takes the position out (the runtime keeps it for the commit).
    pub fn take_position(&mut self) -> Option<SourcePosition> {
        self.position.take()
    }

    fn row<'a>(&'a self, table: &'a TableSchema, handle: RowHandle) -> Option<RowRef<'a>> {
        if handle == NO_ROW {
            return None;
        }
        let start = handle.start as usize;
        let bytes = self
            .rows
            .get(start..start + handle.len as usize)
            .unwrap_or(&[]);
        Some(RowRef::new(table.layout(), bytes))
    }

    /// The events in stream order.
    pub fn events(&self) -> impl Iterator<Item = Event<'_>> + '_ {
        self.entries.iter().map(move |entry| match entry.kind {
            EntryKind::Schema(i) => Event::Schema(&self.schema_changes[i as usize]),
            EntryKind::Change(op) => {
                let table = &self.tables[entry.table as usize];
                Event::Change(ChangeEvent {
                    table,
                    op,
                    before: self.row(table, entry.before),
                    after: self.row(table, entry.after),
                })
            }
        })
    }

    /// Replaces every table schema of the batch (and of its schema-change events)
    /// by `map(schema)`; used by routes, so its cost is per table per batch. The
    /// mapped schema must have the same columns (only its id may differ).
    pub fn map_tables(&mut self, mut map: impl FnMut(&Arc<TableSchema>) -> Arc<TableSchema>) {
        for table in &mut self.tables {
            let mapped = map(table);
            debug_assert_eq!(mapped.layout(), table.layout());
            *table = mapped;
        }
        for change in &mut self.schema_changes {
            if let Some(schema) = &change.schema {
                let mapped = map(schema);
                change.table = mapped.id().clone();
                change.schema = Some(mapped);
            }
        }
    }

    /// Like [`EventBatch::map_tables`] for schema-change events without a schema
    /// (`DropTable`): maps their table id.
    pub fn map_dropped_table_ids(&mut self, mut map: impl FnMut(&TableId) -> TableId) {
        for change in &mut self.schema_changes {
            if change.schema.is_none() {
                change.table = map(&change.table);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Arc<TableSchema> {
        Arc::new(
            TableSchema::new(
                TableId::new("db", "t"),
                1,
                vec![
                    Column::new("id", DataType::BigInt, false),
                    Column::new("name", DataType::String, true),
                ],
                &["id"],
            )
            .unwrap(),
        )
    }

    #[test]
    fn events_come_back_in_push_order_with_their_rows() {
        let schema = schema();
        let mut batch = EventBatch::default();
        let slot = batch.table_slot(&schema);
        let mut w = batch.row_writer(slot);
        w.set_i64(0, 1);
        w.set_str(1, "a");
        let a = w.finish().unwrap();
        batch.push_insert(slot, a);
        batch.push_schema_change(SchemaChangeEvent {
            table: schema.id().clone(),
            change: SchemaChange::TruncateTable,
            schema: Some(Arc::clone(&schema)),
        });
        let mut w = batch.row_writer(slot);
        w.set_i64(0, 1);
        let b = w.finish().unwrap();
        batch.push_update(slot, a, b);
        batch.push_delete(slot, b);

        let events: Vec<_> = batch.events().collect();
        assert_eq!(events.len(), 4);
        let Event::Change(insert) = events[0] else {
            panic!("not a change")
        };
        assert_eq!(insert.op, Op::Insert);
        assert!(insert.before.is_none());
        assert_eq!(insert.after.unwrap().get_str(1), "a");
        assert!(matches!(events[1], Event::Schema(s) if s.change == SchemaChange::TruncateTable));
        let Event::Change(update) = events[2] else {
            panic!("not a change")
        };
        assert_eq!(update.before.unwrap().get_str(1), "a");
        assert!(update.after.unwrap().is_null(1));
        let Event::Change(delete) = events[3] else {
            panic!("not a change")
        };
        assert_eq!(delete.op, Op::Delete);
        assert!(delete.after.is_none());
    }

    #[test]
    fn same_schema_gets_same_slot_and_clear_forgets_tables() {
        let schema = schema();
        let mut batch = EventBatch::new(2, 1 << 20);
        assert_eq!(batch.table_slot(&schema), batch.table_slot(&schema));
        let slot = batch.table_slot(&schema);
        let h = batch.row_writer(slot).finish().unwrap();
        batch.push_insert(slot, h);
        assert!(!batch.is_full());
        batch.push_delete(slot, h);
        assert!(batch.is_full());
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.row_bytes(), 0);
        assert_eq!(batch.table_slot(&schema), TableSlot(0));
    }
}
