//! Input lines — CSV or JSON lines from a file or stdin — parsed into Arrow
//! batches of a fixed shape: a table's rows for `fjord produce`, a table's
//! keys for `fjord lookup --keys-file`.
//!
//! What an input may hold is an [`InputSpec`]: its columns in the order a
//! header-less CSV line has them, each [`Need::Required`], [`Need::Optional`]
//! (a header may leave it out) or [`Need::Named`] (there only where a CSV
//! header or a JSON key names it: the change-type column [`OP_COLUMN`]);
//! and the target, the columns batches come out with (the table's or the
//! key's, in order; a column the input lacks is NULL). A CSV header names
//! the input's columns in any order.
//!
//! Input is parsed straight into Arrow (arrow-csv / arrow-json decoders
//! built once per run, rebuilt only by a header), a chunk of lines at a
//! time, on the caller's thread (a reader thread of its own). Putting a
//! batch in the target shape is a per-batch column reorder (no copy) plus
//! a NULL array per missing column; the change-type column becomes one
//! [`RowOp`] per row. One record per line: blank lines are skipped (and
//! still counted, so line numbers match an editor's); a CSV field may not
//! contain a line break.
//!
//! A line that does not parse, or a change type that is not one, stops
//! the parse with an error naming the line number and, where the decoder
//! says, the column; nothing of the chunk that holds the bad line is
//! handed on.

use std::io::BufRead;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use tokio::sync::mpsc;

/// The change-type column of a primary-key table's input: a column of the
/// input, not of the table (a table with a column of this name has none).
pub const OP_COLUMN: &str = "op";

/// Input formats of `fjord produce` and `fjord lookup --keys-file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Comma-separated values, fields in column order unless a header
    /// names them.
    Csv,
    /// One JSON object per line, keys named after the columns.
    Json,
}

/// What one input row does to a primary-key table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// Insert the row, or replace the row with its key.
    Upsert,
    /// Delete the row with its key.
    Delete,
    /// Nothing: the row before an update (`-U`), which the `+U` after it
    /// replaces (Fluss's sink skips it too).
    Skip,
}

impl RowOp {
    /// The op of a change-type value: Fluss's `+I`, `-U`, `+U`, `-D`, or
    /// Debezium's `c`, `u`, `d` and `r` (a snapshot read: an insert).
    pub fn parse(value: &str) -> Option<RowOp> {
        Some(match value {
            "+I" | "+U" | "c" | "u" | "r" => RowOp::Upsert,
            "-U" => RowOp::Skip,
            "-D" | "d" => RowOp::Delete,
            _ => return None,
        })
    }
}

/// Whether an input must hold a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// In every header-less CSV line; a header must name it.
    Required,
    /// In every header-less CSV line; a header may leave it out (NULL then).
    Optional,
    /// Only where a CSV header or a JSON key names it.
    Named,
}

/// What an input may hold and the shape its batches come out in; see the
/// module doc.
pub struct InputSpec {
    /// The input's columns in header-less order, each with its need.
    fields: Vec<(FieldRef, Need)>,
    /// The columns of the batches handed on, in order; each is one of
    /// `fields` by name.
    target: SchemaRef,
    /// What a row without a change type does; `Some` when the
    /// change-type column is among `fields`.
    default_op: Option<RowOp>,
    /// The end of "the header names columns (..) but ...": what the input
    /// was expected to hold, e.g. `cli.t has`.
    expected: String,
}

impl InputSpec {
    /// An input of exactly the `target` columns (every one required),
    /// described in messages as `expected` (e.g. `cli.t has`).
    pub fn exact(target: SchemaRef, expected: String) -> Self {
        let fields = target
            .fields()
            .iter()
            .map(|f| (f.clone(), Need::Required))
            .collect();
        Self {
            fields,
            target,
            default_op: None,
            expected,
        }
    }

    /// An input of `fields` put in the shape of `target`, described in
    /// messages as `expected`.
    pub fn new(fields: Vec<(FieldRef, Need)>, target: SchemaRef, expected: String) -> Self {
        Self {
            fields,
            target,
            default_op: None,
            expected,
        }
    }

    /// This input with the change-type column [`OP_COLUMN`] (named only);
    /// a row without a value does `default`. With a default of
    /// [`RowOp::Delete`] (`--delete`) a change-type value is refused: the
    /// two would contradict each other.
    pub fn with_ops(mut self, default: RowOp) -> Self {
        let op = Field::new(OP_COLUMN, DataType::Utf8, true);
        self.fields.push((Arc::new(op), Need::Named));
        self.default_op = Some(default);
        self
    }

    /// The decoder's schema before a header: every column but the named
    /// ones for CSV, all of them for JSON (keys are matched by name).
    fn plain_schema(&self, format: InputFormat) -> SchemaRef {
        let fields: Vec<FieldRef> = self
            .fields
            .iter()
            .filter(|(_, need)| format == InputFormat::Json || *need != Need::Named)
            .map(|(f, _)| f.clone())
            .collect();
        Arc::new(Schema::new(fields))
    }

    fn is_delete(&self) -> bool {
        self.default_op == Some(RowOp::Delete)
    }
}

/// One parsed batch: rows in the target shape, and what each does (empty
/// when the input has no change-type column: every row does the default).
pub struct Rows {
    /// The rows, with the target's columns.
    pub batch: RecordBatch,
    /// One op per row, or none.
    pub ops: Vec<RowOp>,
}

/// The parsed batches of a chunk of lines (one, as a rule) and the input
/// bytes they came from.
pub type Parsed = anyhow::Result<(Vec<Rows>, usize)>;

/// Where a decoded batch's columns go: the target's columns picked from the
/// input's by name, NULL where the input has none. Computed once per input
/// schema.
struct Shape {
    /// Per target column, its index in a decoded batch, or `None`: NULLs.
    sources: Vec<Option<usize>>,
    /// The change-type column's index in a decoded batch.
    op: Option<usize>,
    /// The shaped batches' schema: the input's field where it has one, the
    /// target's made nullable where it has not.
    schema: SchemaRef,
    /// Decoded batches are already in the target's shape.
    identity: bool,
}

impl Shape {
    fn new(spec: &InputSpec, input: &Schema) -> Self {
        let sources: Vec<Option<usize>> = spec
            .target
            .fields()
            .iter()
            .map(|f| input.index_of(f.name()).ok())
            .collect();
        let op = match spec.default_op {
            Some(_) => input.index_of(OP_COLUMN).ok(),
            None => None,
        };
        let fields: Vec<FieldRef> = sources
            .iter()
            .zip(spec.target.fields())
            .map(|(source, target)| match source {
                Some(i) => input.fields()[*i].clone(),
                None => Arc::new(target.as_ref().clone().with_nullable(true)),
            })
            .collect();
        let identity = op.is_none()
            && input.fields().len() == sources.len()
            && sources.iter().enumerate().all(|(i, s)| *s == Some(i));
        Self {
            sources,
            op,
            schema: Arc::new(Schema::new(fields)),
            identity,
        }
    }

    /// `batch` in the target's shape.
    fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        if self.identity {
            return Ok(batch.clone());
        }
        let rows = batch.num_rows();
        let columns: Vec<ArrayRef> = self
            .sources
            .iter()
            .zip(self.schema.fields())
            .map(|(source, field)| match source {
                Some(i) => batch.column(*i).clone(),
                None => new_null_array(field.data_type(), rows),
            })
            .collect();
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )
    }
}

/// The Arrow decoder of one input format, built once per run.
/// One per run: the size difference between variants does not matter, but
/// the CSV one is boxed to keep the enum small.
enum Decoder {
    Csv(Box<arrow_csv::reader::Decoder>),
    Json(arrow_json::reader::Decoder),
}

impl Decoder {
    fn new(format: InputFormat, schema: &SchemaRef, batch_rows: usize) -> anyhow::Result<Self> {
        Ok(match format {
            InputFormat::Csv => Decoder::Csv(Box::new(
                arrow_csv::ReaderBuilder::new(schema.clone())
                    .with_header(false)
                    .with_batch_size(batch_rows)
                    .build_decoder(),
            )),
            InputFormat::Json => Decoder::Json(
                arrow_json::ReaderBuilder::new(schema.clone())
                    .with_batch_size(batch_rows)
                    // A key the table does not have is a mistake to report,
                    // not a value to drop silently.
                    .with_strict_mode(true)
                    .build_decoder()?,
            ),
        })
    }

    /// Decodes `bytes` (whole lines, each ending in `\n`) into batches:
    /// one, unless a line holds several JSON objects and the chunk so more
    /// records than a batch takes.
    fn decode_all(&mut self, mut bytes: &[u8]) -> Result<Vec<RecordBatch>, ArrowError> {
        let mut out = Vec::with_capacity(1);
        while !bytes.is_empty() {
            let read = match self {
                Decoder::Csv(d) => d.decode(bytes)?,
                Decoder::Json(d) => d.decode(bytes)?,
            };
            bytes = &bytes[read..];
            if read == 0 {
                // The decoder holds a full batch: take it to make room.
                match self.flush()? {
                    Some(batch) => out.push(batch),
                    None => {
                        return Err(ArrowError::ParseError(
                            "the decoder accepts no more input".to_owned(),
                        ))
                    }
                }
            }
        }
        out.extend(self.flush()?);
        Ok(out)
    }

    fn flush(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        match self {
            Decoder::Csv(d) => d.flush(),
            Decoder::Json(d) => d.flush(),
        }
    }
}

/// One row of `schema`'s columns from their values as text (as a CSV field
/// holds them; an empty value is NULL), or an error naming the column whose
/// value does not parse.
pub fn parse_values(schema: &SchemaRef, values: &[&str]) -> anyhow::Result<RecordBatch> {
    let mut line = String::new();
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        if value.is_empty() {
            continue;
        }
        line.push('"');
        line.push_str(&value.replace('"', "\"\""));
        line.push('"');
    }
    line.push('\n');
    let mut decoder = Decoder::new(InputFormat::Csv, schema, 1)?;
    let batches = decoder
        .decode_all(line.as_bytes())
        .map_err(|e| anyhow!(describe(schema, &e)))?;
    match <[RecordBatch; 1]>::try_from(batches) {
        Ok([batch]) if batch.num_rows() == 1 => Ok(batch),
        _ => bail!("the values ({}) are not one row", values.join(",")),
    }
}

/// The decoder's message with the column named: arrow-csv says "for
/// column <index> at line <line within the batch>", which would mislead.
#[cold]
fn describe(schema: &Schema, error: &ArrowError) -> String {
    let message = error.to_string();
    let Some(at) = message.find(" for column ") else {
        return message;
    };
    let digits: String = message[at + " for column ".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    match digits
        .parse::<usize>()
        .ok()
        .and_then(|i| schema.fields().get(i))
    {
        Some(field) => format!("column {}: {}", field.name(), &message[..at]),
        None => message,
    }
}

/// Reads lines in chunks of `batch_rows`, decodes each chunk into batches
/// of the spec's shape, and finds the line at fault when a chunk does not
/// decode.
pub struct LineParser {
    format: InputFormat,
    batch_rows: usize,
    header: bool,
    spec: InputSpec,
    /// The decoder's schema: the input's columns, in input order.
    schema: SchemaRef,
    decoder: Decoder,
    shape: Shape,
}

impl LineParser {
    /// A parser of `format` input holding what `spec` says, `batch_rows`
    /// lines a batch; with `header`, the first line names the columns.
    pub fn new(
        format: InputFormat,
        batch_rows: usize,
        header: bool,
        spec: InputSpec,
    ) -> anyhow::Result<Self> {
        let schema = spec.plain_schema(format);
        let decoder = Decoder::new(format, &schema, batch_rows)?;
        let shape = Shape::new(&spec, &schema);
        Ok(Self {
            format,
            batch_rows,
            header,
            spec,
            schema,
            decoder,
            shape,
        })
    }

    /// Parses `input` to its end (or the first error), sending each chunk's
    /// batches. Stops early when the receiver is gone (its user failed).
    /// Blocks: run it on a thread of its own.
    pub fn run(mut self, mut input: Box<dyn BufRead + Send>, tx: mpsc::Sender<Parsed>) {
        let mut chunk = Chunk::default();
        let mut line_number = 0u64;
        if self.header {
            if let Err(e) = self.check_header(&mut input, &mut line_number) {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
        loop {
            let more = match chunk.fill(&mut input, self.batch_rows, &mut line_number) {
                Ok(more) => more,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e.into()));
                    return;
                }
            };
            if !chunk.is_empty() {
                let parsed = self.decode_chunk(&chunk).map(|b| (b, chunk.input_bytes));
                let failed = parsed.is_err();
                if tx.blocking_send(parsed).is_err() || failed {
                    return;
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Reads the header line: the input's columns, in any order. Another
    /// order or set than a header-less line's makes the decoder read the
    /// input's, and each batch is put in the target's shape.
    fn check_header(
        &mut self,
        input: &mut dyn BufRead,
        line_number: &mut u64,
    ) -> anyhow::Result<()> {
        let mut line = String::new();
        input
            .read_line(&mut line)
            .context("reading the header line")?;
        *line_number += 1;
        let names: Vec<&str> = line
            .trim_end_matches(['\n', '\r'])
            .split(',')
            .map(|n| n.trim().trim_matches('"'))
            .collect();
        if self.schema.fields().iter().map(|f| f.name()).eq(&names) {
            return Ok(());
        }
        let mut positions: Vec<usize> = Vec::with_capacity(names.len());
        for name in &names {
            let Some(p) = self.spec.fields.iter().position(|(f, _)| f.name() == name) else {
                return Err(self.header_error(&names, &format!("`{name}` is not one of them")));
            };
            if positions.contains(&p) {
                return Err(self.header_error(&names, &format!("`{name}` is named twice")));
            }
            positions.push(p);
        }
        let missing = self
            .spec
            .fields
            .iter()
            .enumerate()
            .find(|(i, (_, need))| *need == Need::Required && !positions.contains(i));
        if let Some((_, (field, _))) = missing {
            let reason = format!("`{}` is missing", field.name());
            return Err(self.header_error(&names, &reason));
        }
        if self.spec.is_delete() && names.contains(&OP_COLUMN) {
            bail!(
                "line 1: --delete deletes every row, but the header names the change-type column `{OP_COLUMN}`, which decides per row: give one or the other"
            );
        }
        let fields: Vec<FieldRef> = positions
            .iter()
            .map(|&p| self.spec.fields[p].0.clone())
            .collect();
        self.schema = Arc::new(Schema::new(fields));
        self.decoder = Decoder::new(self.format, &self.schema, self.batch_rows)?;
        self.shape = Shape::new(&self.spec, &self.schema);
        Ok(())
    }

    #[cold]
    fn header_error(&self, names: &[&str], reason: &str) -> anyhow::Error {
        let expected: Vec<&str> = self
            .spec
            .fields
            .iter()
            .filter(|(_, need)| *need != Need::Named)
            .map(|(f, _)| f.name().as_str())
            .collect();
        anyhow!(
            "line 1: the header names columns ({}) but {} ({}): {reason}",
            names.join(","),
            self.spec.expected,
            expected.join(",")
        )
    }

    fn decode_chunk(&mut self, chunk: &Chunk) -> anyhow::Result<Vec<Rows>> {
        let batches = match self.decoder.decode_all(&chunk.bytes) {
            Ok(batches) => batches,
            Err(chunk_error) => {
                // The decoder may hold half a batch now: start afresh, and
                // decode line by line to name the line at fault (error path only).
                self.decoder = Decoder::new(self.format, &self.schema, self.batch_rows)?;
                for (number, range) in chunk.lines() {
                    let mut single = Decoder::new(self.format, &self.schema, self.batch_rows)?;
                    if let Err(e) = single.decode_all(&chunk.bytes[range]) {
                        bail!("line {number}: {}", describe(&self.schema, &e));
                    }
                }
                bail!(
                    "lines {}..={}: {}",
                    chunk.first_line(),
                    chunk.last_line(),
                    describe(&self.schema, &chunk_error)
                )
            }
        };
        let mut first_row = 0;
        let mut out = Vec::with_capacity(batches.len());
        for batch in &batches {
            let ops = match self.shape.op {
                Some(column) => self.ops(batch.column(column), chunk, first_row)?,
                None => Vec::new(),
            };
            first_row += batch.num_rows();
            out.push(Rows {
                batch: self.shape.apply(batch)?,
                ops,
            });
        }
        Ok(out)
    }

    /// One op per row of a batch's change-type column, whose first row is
    /// row `first_row` of `chunk`.
    fn ops(
        &self,
        column: &ArrayRef,
        chunk: &Chunk,
        first_row: usize,
    ) -> anyhow::Result<Vec<RowOp>> {
        let values = column
            .as_any()
            .downcast_ref::<StringArray>()
            .context("the change-type column is not decoded as text")?;
        let default = self.spec.default_op.unwrap_or(RowOp::Upsert);
        let mut ops = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let op = match value {
                None => default,
                Some(value) if self.spec.is_delete() => bail!(
                    "{}: --delete deletes every row, but column `{OP_COLUMN}` says {value:?}: give one or the other",
                    chunk.row_place(first_row + i)
                ),
                Some(value) => match RowOp::parse(value) {
                    Some(op) => op,
                    None => bail!(
                        "{}: column `{OP_COLUMN}`: {value:?} is not a change type (+I, -U, +U, -D, or c, u, d, r)",
                        chunk.row_place(first_row + i)
                    ),
                },
            };
            ops.push(op);
        }
        Ok(ops)
    }
}

/// A batch's worth of input lines, each ending in `\n`, with their line
/// numbers. Its buffers are reused chunk after chunk.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    /// `(line number, end offset in bytes)` of each non-blank line.
    lines: Vec<(u64, usize)>,
    /// Input bytes read for this chunk, blank lines included.
    input_bytes: usize,
}

impl Chunk {
    /// Reads up to `max_lines` non-blank lines; returns whether input remains.
    fn fill(
        &mut self,
        input: &mut dyn BufRead,
        max_lines: usize,
        line_number: &mut u64,
    ) -> std::io::Result<bool> {
        self.bytes.clear();
        self.lines.clear();
        self.input_bytes = 0;
        while self.lines.len() < max_lines {
            let start = self.bytes.len();
            let read = input.read_until(b'\n', &mut self.bytes)?;
            if read == 0 {
                return Ok(false);
            }
            *line_number += 1;
            self.input_bytes += read;
            if self.bytes[start..].iter().all(u8::is_ascii_whitespace) {
                self.bytes.truncate(start);
                continue;
            }
            if self.bytes.last() != Some(&b'\n') {
                self.bytes.push(b'\n');
            }
            self.lines.push((*line_number, self.bytes.len()));
        }
        Ok(true)
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    fn first_line(&self) -> u64 {
        self.lines.first().map_or(0, |l| l.0)
    }

    fn last_line(&self) -> u64 {
        self.lines.last().map_or(0, |l| l.0)
    }

    /// Where row `row` of the chunk came from: its line, when each line
    /// held one record (always for CSV).
    #[cold]
    fn row_place(&self, row: usize) -> String {
        match self.lines.get(row) {
            Some((number, _)) => format!("line {number}"),
            None => format!(
                "record {} of lines {}..={}",
                row + 1,
                self.first_line(),
                self.last_line()
            ),
        }
    }

    /// Each line's number and byte range.
    fn lines(&self) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> + '_ {
        let mut start = 0;
        self.lines.iter().map(move |&(number, end)| {
            let range = start..end;
            start = end;
            (number, range)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_types_of_fluss_and_debezium_map_to_ops() {
        let check = |value: &str, expected: Option<RowOp>| {
            assert_eq!(RowOp::parse(value), expected, "{value}");
        };
        for upsert in ["+I", "+U", "c", "u", "r"] {
            check(upsert, Some(RowOp::Upsert));
        }
        check("-D", Some(RowOp::Delete));
        check("d", Some(RowOp::Delete));
        check("-U", Some(RowOp::Skip));
        for unknown in ["", "I", "+i", "D", "x", "+A", " c"] {
            check(unknown, None);
        }
    }

    /// Parses `text` as CSV with a header into rows of `spec`'s target.
    fn parse_csv(spec: InputSpec, text: &str) -> anyhow::Result<Vec<Rows>> {
        let parser = LineParser::new(InputFormat::Csv, 16, true, spec)?;
        let (tx, mut rx) = mpsc::channel(4);
        let input: Box<dyn BufRead + Send> = Box::new(std::io::Cursor::new(text.to_owned()));
        parser.run(input, tx);
        let mut rows = Vec::new();
        while let Ok(parsed) = rx.try_recv() {
            rows.extend(parsed?.0);
        }
        Ok(rows)
    }

    fn spec(ops: Option<RowOp>) -> InputSpec {
        let target = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let fields = vec![
            (target.fields()[0].clone(), Need::Required),
            (target.fields()[1].clone(), Need::Optional),
        ];
        let spec = InputSpec::new(fields, target, "t has".to_owned());
        match ops {
            Some(default) => spec.with_ops(default),
            None => spec,
        }
    }

    #[test]
    fn a_header_may_reorder_leave_out_optional_columns_and_add_the_op_column() {
        let rows = parse_csv(spec(Some(RowOp::Upsert)), "op,id\n-D,1\n,2\n-U,3\n").unwrap();
        assert_eq!(rows.len(), 1);
        let batch = &rows[0].batch;
        assert_eq!(batch.num_columns(), 2);
        assert_eq!(batch.schema().field(0).name(), "id");
        assert_eq!(batch.column(1).null_count(), 3, "name is NULL");
        assert_eq!(rows[0].ops, [RowOp::Delete, RowOp::Upsert, RowOp::Skip]);

        let plain = parse_csv(spec(Some(RowOp::Upsert)), "id,name\n1,a\n").unwrap();
        assert!(plain[0].ops.is_empty(), "no op column: no ops");
    }

    #[test]
    fn bad_headers_and_change_types_are_named_with_their_line() {
        let check = |spec: InputSpec, text: &str, says: &[&str]| {
            let message = format!("{:#}", parse_csv(spec, text).err().expect("an error"));
            for s in says {
                assert!(message.contains(s), "{s:?} not in {message}");
            }
        };
        check(spec(None), "name\nx\n", &["line 1", "`id` is missing"]);
        check(
            spec(None),
            "id,id\n1,2\n",
            &["line 1", "`id` is named twice"],
        );
        check(
            spec(None),
            "id,op\n1,+I\n",
            &["line 1", "`op` is not one of them"],
        );
        check(
            spec(Some(RowOp::Upsert)),
            "id,op\n1,+I\n\n2,X\n",
            &["line 4", "\"X\"", "change type"],
        );
        check(
            spec(Some(RowOp::Delete)),
            "id,op\n1,+I\n",
            &["line 1", "--delete"],
        );
    }
}
