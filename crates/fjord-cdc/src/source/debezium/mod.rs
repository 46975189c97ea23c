//! The `debezium-json` source: Debezium change events, one JSON envelope per
//! line, from a file or stdin — so events of an existing Debezium deployment
//! (Kafka Connect's JsonConverter output) feed a Fjord pipeline.
//!
//! Accepted envelopes: `{"schema":…,"payload":{…}}` (`schemas.enable=true`)
//! and the bare payload `{"before":…,"after":…,"source":…,"op":…}`. Ops
//! `c` and `r` become inserts, `u` updates, `d` deletes, `t` a truncate;
//! `m` (messages) and tombstones (`null` lines) are skipped. The table is
//! `source.db` (or `source.schema`) `.` `source.table`.
//!
//! Per table, the envelope's schema is compared byte-for-byte with the last
//! one seen; only when it differs is it parsed (with `serde_json`) into a new
//! table schema version and per-column decoders, and the difference is
//! emitted as schema-change events. Rows are then decoded by a pull scanner
//! straight into the batch's row arena: no JSON tree per record.
//!
//! Without a schema, column types are inferred once per table from the first
//! event (integers → BIGINT, other numbers → DOUBLE, strings/null → STRING,
//! objects/arrays → JSON, booleans → BOOLEAN); a field first seen later adds a
//! column. A value that does not fit its column is an error naming the line.
//!
//! Positions are byte offsets after the last consumed line; a resumed source
//! skips that many bytes. `until_current` stops at the input's size at start.

mod decode;
mod scan;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use crate::config::{DebeziumJsonConfig, DecimalHandling};
use crate::event::{ColumnPosition, EventBatch, SchemaChange, SchemaChangeEvent, TableSlot};
use crate::filter::TableFilter;
use crate::position::SourcePosition;
use crate::row::RowHandle;
use crate::schema::{Column, TableId, TableSchema};
use crate::source::{Poll, Source, SourceError, StartOptions, StopFlag};

use decode::{decode_value, field_def, inferred_def, Decoder, FieldDef, Scratch, ValueError};
use scan::{ScanError, Scanner};

pub use decode::{base64_decode, parse_zoned_timestamp};

/// Longest input line accepted (one envelope). Debezium envelopes with schema
/// are a few KiB; this protects memory from a file that is not line-delimited.
pub const LINE_BYTES_MAX: usize = 64 << 20;

/// Most distinct tables tracked; protects memory from input naming endless tables.
pub const TABLES_MAX: usize = 100_000;

/// Opens the source on `config.path` (or stdin).
pub fn open(
    config: DebeziumJsonConfig,
    start: StartOptions,
) -> Result<Box<dyn Source>, SourceError> {
    match &config.path {
        Some(path) => {
            let mut file = File::open(path).map_err(|source| SourceError::Io {
                context: format!("opening Debezium input {}", path.display()),
                source,
            })?;
            let size = file
                .metadata()
                .map_err(|source| SourceError::Io {
                    context: format!("reading the size of {}", path.display()),
                    source,
                })?
                .len();
            let offset = resume_offset(&start)?;
            if offset > 0 {
                file.seek(SeekFrom::Start(offset))
                    .map_err(|source| SourceError::Io {
                        context: format!(
                            "seeking {} to the resume offset {offset}",
                            path.display()
                        ),
                        source,
                    })?;
            }
            let limit = start.until_current.then_some(size);
            Ok(Box::new(DebeziumSource::new(
                BufReader::with_capacity(1 << 20, file),
                offset,
                limit,
                &config,
                start.stop,
            )))
        }
        None => {
            let offset = resume_offset(&start)?;
            let mut stdin = BufReader::with_capacity(1 << 20, io::stdin());
            // Stdin cannot seek: consume what a previous run already delivered.
            let skipped =
                io::copy(&mut (&mut stdin).take(offset), &mut io::sink()).map_err(|source| {
                    SourceError::Io {
                        context: "skipping already delivered stdin input".to_string(),
                        source,
                    }
                })?;
            Ok(Box::new(DebeziumSource::new(
                stdin, skipped, None, &config, start.stop,
            )))
        }
    }
}

fn resume_offset(start: &StartOptions) -> Result<u64, SourceError> {
    match &start.resume {
        None => Ok(0),
        Some(SourcePosition::InputOffset { bytes }) => Ok(*bytes),
        Some(other) => Err(SourceError::Config(format!(
            "the stored position {other:?} is not a Debezium input offset"
        ))),
    }
}

/// What the source knows of one table.
struct TableState {
    id: TableId,
    selected: bool,
    schema: Option<Arc<TableSchema>>,
    /// Decoder per column, in column order.
    decoders: Vec<Decoder>,
    /// Column names as bytes, for matching JSON keys without UTF-8 checks.
    names: Vec<Box<[u8]>>,
    /// The raw envelope schema the current version was built from (empty: inferred).
    schema_raw: Vec<u8>,
    /// This batch's slot of `schema`, if it has one.
    slot: Option<(usize, TableSlot)>,
}

/// Reads Debezium envelopes from any buffered reader.
pub struct DebeziumSource<R: BufRead + Send> {
    reader: R,
    offset: u64,
    limit: Option<u64>,
    line_no: u64,
    line: Vec<u8>,
    tables: HashMap<String, TableState>,
    key: String,
    filter: TableFilter,
    decimals: DecimalHandling,
    scratch: Scratch,
    key_scratch: Vec<u8>,
    name_scratch: Vec<u8>,
    db_buf: Vec<u8>,
    schema_buf: Vec<u8>,
    table_buf: Vec<u8>,
    /// The last envelope schema seen, for the byte-identical fast path.
    last_schema: Vec<u8>,
    stop: StopFlag,
    ended: bool,
    /// Counts batches so per-batch table slots can be told apart.
    batch_serial: usize,
}

/// A key of the envelope (top level or inside `payload`), copied out of the
/// key buffer so the scanner can be used again while it is handled.
#[derive(Clone, Copy)]
enum EnvelopeField {
    Schema,
    Payload,
    Before,
    After,
    Source,
    Op,
    Other,
}

impl EnvelopeField {
    fn of(key: &[u8], in_payload: bool) -> EnvelopeField {
        match key {
            b"schema" if !in_payload => EnvelopeField::Schema,
            b"payload" if !in_payload => EnvelopeField::Payload,
            b"before" => EnvelopeField::Before,
            b"after" => EnvelopeField::After,
            b"source" => EnvelopeField::Source,
            b"op" => EnvelopeField::Op,
            _ => EnvelopeField::Other,
        }
    }
}

/// The parts of one envelope.
#[derive(Default)]
struct Envelope<'a> {
    schema: Option<&'a [u8]>,
    before: Option<&'a [u8]>,
    after: Option<&'a [u8]>,
    source: Option<&'a [u8]>,
    op: u8,
}

fn scan_err(line: u64, e: ScanError) -> SourceError {
    SourceError::Decode(format!("Debezium input line {line}: {e}"))
}

fn is_null(raw: &[u8]) -> bool {
    raw.trim_ascii() == b"null"
}

impl<R: BufRead + Send> DebeziumSource<R> {
    /// A source over `reader`, which is positioned `offset` bytes into the input;
    /// with `limit`, it ends once `limit` bytes of input are consumed.
    pub fn new(
        reader: R,
        offset: u64,
        limit: Option<u64>,
        config: &DebeziumJsonConfig,
        stop: StopFlag,
    ) -> DebeziumSource<R> {
        DebeziumSource {
            reader,
            offset,
            limit,
            line_no: 0,
            line: Vec::new(),
            tables: HashMap::new(),
            key: String::new(),
            filter: config.tables.clone(),
            decimals: config.decimal_handling,
            scratch: Scratch::default(),
            key_scratch: Vec::new(),
            name_scratch: Vec::new(),
            db_buf: Vec::new(),
            schema_buf: Vec::new(),
            table_buf: Vec::new(),
            last_schema: Vec::new(),
            stop,
            ended: false,
            batch_serial: 0,
        }
    }

    /// Reads one line into `self.line`; `false` at end of input.
    fn read_line(&mut self) -> Result<bool, SourceError> {
        self.line.clear();
        let n = (&mut self.reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', &mut self.line)
            .map_err(|source| SourceError::Io {
                context: format!("reading Debezium input after line {}", self.line_no),
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        if self.line.len() > LINE_BYTES_MAX && self.line.last() != Some(&b'\n') {
            return Err(SourceError::Decode(format!(
                "Debezium input line {} is longer than {LINE_BYTES_MAX} bytes",
                self.line_no + 1
            )));
        }
        self.offset += n as u64;
        self.line_no += 1;
        Ok(true)
    }

    /// Splits one line into its envelope parts. `known_schema` is the last
    /// envelope schema seen: when the line repeats it byte for byte (the
    /// usual case: Kafka Connect repeats the schema on every record) it is
    /// skipped by length instead of being scanned.
    fn parse_envelope<'l>(
        line_no: u64,
        line: &'l [u8],
        key: &mut Vec<u8>,
        known_schema: &[u8],
    ) -> Result<Option<Envelope<'l>>, SourceError> {
        let err = |e| scan_err(line_no, e);
        let mut s = Scanner::new(line);
        if s.at_end() || s.null().map_err(err)? {
            return Ok(None); // blank line or tombstone
        }
        let mut env = Envelope::default();
        // Whether row fields were found (in `payload` or at the top level, the
        // bare form), and whether `payload` was null (a tombstone).
        let mut found = false;
        let mut payload_null = false;
        let mut op_scratch = Vec::new();
        s.begin_object().map_err(err)?;
        let mut first = true;
        // One pass over the line: the payload object is walked in place.
        let mut depth_payload = false;
        loop {
            let field = match s.next_key(first, key).map_err(err)? {
                None if depth_payload => {
                    // Back at the top level, right after the payload value.
                    depth_payload = false;
                    first = false;
                    continue;
                }
                None => break,
                Some(k) => EnvelopeField::of(k, depth_payload),
            };
            first = false;
            match field {
                EnvelopeField::Schema => {
                    let rest = s.rest();
                    env.schema = if !known_schema.is_empty() && rest.starts_with(known_schema) {
                        s.advance(known_schema.len());
                        Some(&rest[..known_schema.len()])
                    } else {
                        Some(s.skip_value().map_err(err)?)
                    }
                    .filter(|raw| !is_null(raw));
                }
                EnvelopeField::Payload => {
                    if s.null().map_err(err)? {
                        payload_null = true;
                    } else {
                        s.begin_object().map_err(err)?;
                        depth_payload = true;
                        first = true;
                    }
                }
                EnvelopeField::Before => {
                    found = true;
                    env.before = Some(s.skip_value().map_err(err)?).filter(|r| !is_null(r));
                }
                EnvelopeField::After => {
                    found = true;
                    env.after = Some(s.skip_value().map_err(err)?).filter(|r| !is_null(r));
                }
                EnvelopeField::Source => env.source = Some(s.skip_value().map_err(err)?),
                EnvelopeField::Op => {
                    found = true;
                    let op = s.string(&mut op_scratch).map_err(err)?;
                    env.op = match op {
                        [c] => *c,
                        _ => 0,
                    };
                }
                EnvelopeField::Other => {
                    s.skip_value().map_err(err)?;
                }
            }
        }
        if !s.at_end() {
            return Err(scan_err(
                line_no,
                ScanError {
                    offset: s.offset(),
                    message: "trailing bytes after the envelope",
                },
            ));
        }
        if !found {
            if payload_null {
                return Ok(None);
            }
            return Err(SourceError::Decode(format!(
                "Debezium input line {line_no}: neither a payload nor before/after/op"
            )));
        }
        Ok(Some(env))
    }

    /// Fills `self.key` with `namespace\0table` from the envelope's `source`
    /// block (`schema` if present, else `db`) and returns the split point.
    fn table_key(&mut self, source: &[u8]) -> Result<usize, SourceError> {
        let line_no = self.line_no;
        let mut s = Scanner::new(source);
        s.begin_object().map_err(|e| scan_err(line_no, e))?;
        let mut key = std::mem::take(&mut self.key_scratch);
        let (mut db, mut schema, mut table) = (
            std::mem::take(&mut self.db_buf),
            std::mem::take(&mut self.schema_buf),
            std::mem::take(&mut self.table_buf),
        );
        db.clear();
        schema.clear();
        table.clear();
        let mut first = true;
        let result = (|| -> Result<(), ScanError> {
            while let Some(k) = s.next_key(first, &mut key)? {
                first = false;
                let target = match k {
                    b"db" => &mut db,
                    b"schema" => &mut schema,
                    b"table" => &mut table,
                    _ => {
                        s.skip_value()?;
                        continue;
                    }
                };
                if !s.null()? {
                    let text = s.string(&mut self.name_scratch)?;
                    target.extend_from_slice(text);
                }
            }
            Ok(())
        })();
        let namespace = if schema.is_empty() { &db } else { &schema };
        self.key.clear();
        let utf8 = std::str::from_utf8(namespace)
            .ok()
            .zip(std::str::from_utf8(&table).ok());
        let split = match (&result, utf8) {
            (Ok(()), Some((ns, t))) if !ns.is_empty() && !t.is_empty() => {
                self.key.push_str(ns);
                self.key.push('\0');
                self.key.push_str(t);
                Ok(ns.len())
            }
            (Err(e), _) => Err(scan_err(line_no, e.clone())),
            _ => Err(SourceError::Decode(format!(
                "Debezium input line {line_no}: `source` names no db/schema and table (UTF-8)"
            ))),
        };
        self.key_scratch = key;
        self.db_buf = db;
        self.schema_buf = schema;
        self.table_buf = table;
        split
    }

    fn process_line(&mut self, batch: &mut EventBatch) -> Result<(), SourceError> {
        let line = std::mem::take(&mut self.line);
        let result = self.process(&line, batch);
        self.line = line;
        result
    }

    fn process(&mut self, line: &[u8], batch: &mut EventBatch) -> Result<(), SourceError> {
        let line_no = self.line_no;
        let mut key = std::mem::take(&mut self.key_scratch);
        let envelope = Self::parse_envelope(line_no, line, &mut key, &self.last_schema);
        self.key_scratch = key;
        let Some(env) = envelope? else { return Ok(()) };
        if let Some(raw) = env.schema {
            if raw != self.last_schema.as_slice() {
                self.last_schema.clear();
                self.last_schema.extend_from_slice(raw);
            }
        }
        if env.op == b'm' {
            return Ok(());
        }
        let source = env.source.ok_or_else(|| {
            SourceError::Decode(format!(
                "Debezium input line {line_no}: payload has no `source` block"
            ))
        })?;
        let split = self.table_key(source)?;
        if !self.tables.contains_key(self.key.as_str()) {
            if self.tables.len() >= TABLES_MAX {
                return Err(SourceError::Decode(format!(
                    "Debezium input line {line_no}: more than {TABLES_MAX} distinct tables"
                )));
            }
            let (db, table) = (&self.key[..split], &self.key[split + 1..]);
            let state = TableState {
                id: TableId::new(db, table),
                selected: self.filter.matches(db, table),
                schema: None,
                decoders: Vec::new(),
                names: Vec::new(),
                schema_raw: Vec::new(),
                slot: None,
            };
            self.tables.insert(self.key.clone(), state);
        }
        let state = self
            .tables
            .get_mut(self.key.as_str())
            .expect("inserted above");
        if !state.selected {
            return Ok(());
        }
        let row_sample = env.after.or(env.before);
        match env.schema {
            Some(raw) => update_schema_from_envelope(state, raw, self.decimals, line_no, batch)?,
            None => {
                if let Some(sample) = row_sample {
                    infer_schema(state, sample, line_no, batch)?;
                }
            }
        }
        if env.op == b't' {
            batch.push_schema_change(SchemaChangeEvent {
                table: state.id.clone(),
                change: SchemaChange::TruncateTable,
                schema: state.schema.clone(),
            });
            return Ok(());
        }
        let Some(schema) = &state.schema else {
            return Err(SourceError::Decode(format!(
                "Debezium input line {line_no}: op {:?} without a row image",
                char::from(env.op)
            )));
        };
        let slot = match state.slot {
            Some((serial, slot)) if serial == self.batch_serial => slot,
            _ => {
                let slot = batch.table_slot(schema);
                state.slot = Some((self.batch_serial, slot));
                slot
            }
        };
        let scratch = &mut self.scratch;
        let missing = |what: &str| {
            SourceError::Decode(format!(
                "Debezium input line {line_no}: op {:?} of {} has no {what} image",
                char::from(env.op),
                state.id
            ))
        };
        match env.op {
            b'c' | b'r' => {
                let after = env.after.ok_or_else(|| missing("after"))?;
                let after = decode_row(state, after, batch, slot, scratch, line_no)?;
                batch.push_insert(slot, after);
            }
            b'u' => {
                let before = env.before.ok_or_else(|| missing("before"))?;
                let after = env.after.ok_or_else(|| missing("after"))?;
                let before = decode_row(state, before, batch, slot, scratch, line_no)?;
                let after = decode_row(state, after, batch, slot, scratch, line_no)?;
                batch.push_update(slot, before, after);
            }
            b'd' => {
                let before = env.before.ok_or_else(|| missing("before"))?;
                let before = decode_row(state, before, batch, slot, scratch, line_no)?;
                batch.push_delete(slot, before);
            }
            other => {
                return Err(SourceError::Decode(format!(
                    "Debezium input line {line_no}: unknown op {:?} (expected c, r, u, d, t or m)",
                    char::from(other)
                )))
            }
        }
        Ok(())
    }
}

/// Decodes one row object into the batch.
fn decode_row(
    state: &TableState,
    raw: &[u8],
    batch: &mut EventBatch,
    slot: TableSlot,
    scratch: &mut Scratch,
    line_no: u64,
) -> Result<RowHandle, SourceError> {
    let schema = state
        .schema
        .as_ref()
        .expect("rows are decoded after a schema exists");
    let mut writer = batch.row_writer(slot);
    let mut s = Scanner::new(raw);
    let mut key = std::mem::take(scratch.key());
    let result = (|| -> Result<(), SourceError> {
        s.begin_object().map_err(|e| scan_err(line_no, e))?;
        let mut first = true;
        let mut next = 0usize;
        while let Some(k) = s
            .next_key(first, &mut key)
            .map_err(|e| scan_err(line_no, e))?
        {
            first = false;
            // Fields usually come in column order: try the next column first.
            let index = if state.names.get(next).is_some_and(|n| **n == *k) {
                Some(next)
            } else {
                state.names.iter().position(|n| **n == *k)
            };
            let Some(i) = index else {
                s.skip_value().map_err(|e| scan_err(line_no, e))?;
                continue;
            };
            next = i + 1;
            let data_type = schema.columns()[i].data_type;
            decode_value(
                &mut s,
                state.decoders[i],
                data_type,
                &mut writer,
                i,
                scratch,
            )
            .map_err(|e| {
                let why = match e {
                    ValueError::Scan(e) => e.to_string(),
                    ValueError::Invalid(m) => m.to_string(),
                };
                SourceError::Decode(format!(
                    "Debezium input line {line_no}: {}, column {:?} ({}): {why}",
                    state.id,
                    schema.columns()[i].name,
                    data_type
                ))
            })?;
        }
        Ok(())
    })();
    *scratch.key() = key;
    result?;
    writer
        .finish()
        .map_err(|e| SourceError::Decode(format!("Debezium input line {line_no}: {e}")))
}

fn columns_from(defs: &[FieldDef]) -> Vec<Column> {
    defs.iter()
        .map(|d| Column::new(&d.name, d.data_type, d.nullable))
        .collect()
}

/// Installs a new schema version built from `defs`, emitting schema changes
/// for the difference to the previous version.
fn install_schema(
    state: &mut TableState,
    defs: Vec<FieldDef>,
    line_no: u64,
    batch: &mut EventBatch,
) -> Result<(), SourceError> {
    let version = state.schema.as_ref().map_or(1, |s| s.version() + 1);
    let schema = Arc::new(
        TableSchema::new(state.id.clone(), version, columns_from(&defs), &[])
            .map_err(|e| SourceError::Decode(format!("Debezium input line {line_no}: {e}")))?,
    );
    if let Some(old) = &state.schema {
        let new_columns = schema.columns();
        for column in old.columns() {
            if !new_columns.iter().any(|c| c.name == column.name) {
                batch.push_schema_change(SchemaChangeEvent {
                    table: state.id.clone(),
                    change: SchemaChange::DropColumn {
                        name: Arc::clone(&column.name),
                    },
                    schema: Some(Arc::clone(&schema)),
                });
            }
        }
        for (i, column) in new_columns.iter().enumerate() {
            match old.columns().iter().find(|c| c.name == column.name) {
                None => batch.push_schema_change(SchemaChangeEvent {
                    table: state.id.clone(),
                    change: SchemaChange::AddColumn {
                        column: column.clone(),
                        position: match i {
                            0 => ColumnPosition::First,
                            _ if i == new_columns.len() - 1 => ColumnPosition::Last,
                            _ => ColumnPosition::After(Arc::clone(&new_columns[i - 1].name)),
                        },
                    },
                    schema: Some(Arc::clone(&schema)),
                }),
                Some(previous) if previous.data_type != column.data_type => batch
                    .push_schema_change(SchemaChangeEvent {
                        table: state.id.clone(),
                        change: SchemaChange::AlterColumnType {
                            name: Arc::clone(&column.name),
                            data_type: column.data_type,
                        },
                        schema: Some(Arc::clone(&schema)),
                    }),
                Some(_) => {}
            }
        }
    }
    state.names = defs.iter().map(|d| d.name.as_bytes().into()).collect();
    state.decoders = defs.iter().map(|d| d.decoder).collect();
    state.schema = Some(schema);
    state.slot = None;
    Ok(())
}

fn update_schema_from_envelope(
    state: &mut TableState,
    raw: &[u8],
    decimals: DecimalHandling,
    line_no: u64,
    batch: &mut EventBatch,
) -> Result<(), SourceError> {
    if state.schema.is_some() && state.schema_raw == raw {
        return Ok(()); // the common case: same schema as the last event of this table
    }
    let bad =
        |why: String| SourceError::Decode(format!("Debezium input line {line_no}: schema: {why}"));
    let value: serde_json::Value = serde_json::from_slice(raw).map_err(|e| bad(e.to_string()))?;
    let fields = value
        .get("fields")
        .and_then(|f| f.as_array())
        .ok_or_else(|| bad("no `fields` list".to_string()))?;
    let row = fields
        .iter()
        .find(|f| f.get("field").and_then(|n| n.as_str()) == Some("after"))
        .or_else(|| {
            fields
                .iter()
                .find(|f| f.get("field").and_then(|n| n.as_str()) == Some("before"))
        })
        .ok_or_else(|| bad("no `after` or `before` struct".to_string()))?;
    let columns = row
        .get("fields")
        .and_then(|f| f.as_array())
        .ok_or_else(|| bad("the row struct has no `fields`".to_string()))?;
    let defs = columns
        .iter()
        .map(|f| field_def(f, decimals).map_err(|why| bad(format!("{}: {why}", state.id))))
        .collect::<Result<Vec<_>, _>>()?;
    let unchanged = state.schema.as_ref().is_some_and(|s| {
        s.columns().len() == defs.len()
            && s.columns().iter().zip(&defs).all(|(c, d)| {
                *c.name == *d.name && c.data_type == d.data_type && c.nullable == d.nullable
            })
    }) && state.decoders.iter().eq(defs.iter().map(|d| &d.decoder));
    if !unchanged {
        install_schema(state, defs, line_no, batch)?;
    }
    state.schema_raw.clear();
    state.schema_raw.extend_from_slice(raw);
    Ok(())
}

/// Schemaless envelopes: adds a column for every field not seen before.
fn infer_schema(
    state: &mut TableState,
    sample: &[u8],
    line_no: u64,
    batch: &mut EventBatch,
) -> Result<(), SourceError> {
    let mut s = Scanner::new(sample);
    let mut key = Vec::new();
    let mut added: Vec<FieldDef> = Vec::new();
    s.begin_object().map_err(|e| scan_err(line_no, e))?;
    let mut first = true;
    while let Some(k) = s
        .next_key(first, &mut key)
        .map_err(|e| scan_err(line_no, e))?
    {
        first = false;
        if state.names.iter().any(|n| **n == *k) {
            s.skip_value().map_err(|e| scan_err(line_no, e))?;
            continue;
        }
        let name = std::str::from_utf8(k)
            .map_err(|_| {
                SourceError::Decode(format!(
                    "Debezium input line {line_no}: field name is not UTF-8"
                ))
            })?
            .to_string();
        let kind = s.peek_kind().map_err(|e| scan_err(line_no, e))?;
        let raw = s.skip_value().map_err(|e| scan_err(line_no, e))?;
        added.push(inferred_def(&name, kind, raw));
    }
    if added.is_empty() {
        return Ok(());
    }
    let mut defs: Vec<FieldDef> = match &state.schema {
        Some(schema) => schema
            .columns()
            .iter()
            .zip(&state.decoders)
            .map(|(c, d)| FieldDef {
                name: c.name.to_string(),
                data_type: c.data_type,
                nullable: c.nullable,
                decoder: *d,
            })
            .collect(),
        None => Vec::new(),
    };
    defs.extend(added);
    install_schema(state, defs, line_no, batch)
}

impl<R: BufRead + Send> Source for DebeziumSource<R> {
    fn next_batch(&mut self, batch: &mut EventBatch) -> Result<Poll, SourceError> {
        self.batch_serial = self.batch_serial.wrapping_add(1);
        while !self.ended && !batch.is_full() && !self.stop.is_raised() {
            if self.limit.is_some_and(|limit| self.offset >= limit) || !self.read_line()? {
                self.ended = true;
                break;
            }
            self.process_line(batch)?;
        }
        batch.set_position(SourcePosition::InputOffset { bytes: self.offset });
        Ok(if self.ended { Poll::End } else { Poll::Ready })
    }
}

/// Opens a source over in-memory input (tests, embedding).
pub fn from_reader<R: BufRead + Send + 'static>(
    reader: R,
    config: &DebeziumJsonConfig,
    start: StartOptions,
) -> Result<Box<dyn Source>, SourceError> {
    let mut reader = reader;
    let offset = resume_offset(&start)?;
    let skipped = io::copy(&mut (&mut reader).take(offset), &mut io::sink()).map_err(|source| {
        SourceError::Io {
            context: "skipping already delivered input".to_string(),
            source,
        }
    })?;
    Ok(Box::new(DebeziumSource::new(
        reader, skipped, None, config, start.stop,
    )))
}
