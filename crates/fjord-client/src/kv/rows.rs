//! Rows read from a primary-key table — a lookup's value, a prefix
//! lookup's values, a LimitScan or ScanKv value batch — decoded from the
//! bytes the server sent, without copying them: every string and byte
//! value of a row borrows the received frame.
//!
//! A stored value is `schemaId i16 LE ‖ row` in the table's
//! `table.kv.format` (`fjord_format::kv::stored_value`). [`ValueDecoder`]
//! is built once per lookuper or scanner; per row it checks the schema id
//! and decodes the row with the table's codec into datums.
//!
//! [`KvRow`] owns one row (its bytes, reference-counted, and its datums),
//! [`KvRows`] a batch of them; both read as [`InternalRow`]s, and a batch
//! converts to an Arrow `RecordBatch` through the append writer's row →
//! Arrow builder.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::kv::stored_value::StoredValue;
use fjord_format::kv::value_batch::ValueBatch;
use fjord_format::row::{RowCodec, RowFormat};

use crate::admin::TableInfo;
use crate::error::{ClientError, Result};
use crate::kv::TABLE_KV_FORMAT;
use crate::row::{Datum, InternalRow, RowBatchBuilder};

/// The row codec of `schema` in `format`; fails for a nested column type.
fn codec_of(
    table: &TableInfo,
    format: RowFormat,
    schema: &fjord_format::schema::Schema,
) -> Result<RowCodec> {
    let types: Vec<_> = schema
        .columns()
        .iter()
        .map(|c| c.data_type.clone())
        .collect();
    RowCodec::new(format, &types).map_err(|e| ClientError::Invalid(format!("{}: {e}", table.path)))
}

/// A schema id as stored values carry it (`i16`).
fn stored_schema_id(table: &TableInfo, schema_id: i32) -> Result<i16> {
    i16::try_from(schema_id).map_err(|_| {
        ClientError::Invalid(format!(
            "schema id {schema_id} of {} does not fit a stored value",
            table.path
        ))
    })
}

/// Decodes the stored values of one table; see the module doc.
///
/// Guarantees: a row is returned only when its schema id is one the table
/// info knows (the current one, or an earlier one whose columns are a
/// prefix of the current ones: the row then reads NULL in the columns added
/// since) and its bytes are exactly one well-formed row of that schema
/// (checked by the row codec); anything else is an error naming the table.
#[derive(Debug)]
pub(crate) struct ValueDecoder {
    codec: RowCodec,
    schema_id: i16,
    /// Codecs of the table's earlier schema ids, whose columns are a
    /// prefix of the current ones (Fluss's ALTER TABLE only adds columns
    /// last); a row of one is padded with NULLs, as Fluss's `PaddingRow`.
    earlier: Vec<(i16, RowCodec)>,
    arrow_schema: SchemaRef,
    table: String,
}

impl ValueDecoder {
    /// The decoder of `table`'s values. Fails for a column of a nested
    /// type, an unknown `table.kv.format`, or a schema id beyond `i16`.
    pub(crate) fn new(table: &TableInfo) -> Result<Self> {
        let format = match table.descriptor.properties().get(TABLE_KV_FORMAT) {
            None => RowFormat::default(),
            Some(name) => name.parse::<RowFormat>().map_err(|e| {
                ClientError::Invalid(format!("{}: {TABLE_KV_FORMAT}: {e}", table.path))
            })?,
        };
        let schema = table.descriptor.schema();
        let codec = codec_of(table, format, schema)?;
        let schema_id = stored_schema_id(table, table.schema_id)?;
        // A schema that does not pad to the current one is left out: its
        // rows are refused when met rather than misread.
        let mut earlier = Vec::with_capacity(table.earlier_schemas.len());
        for (id, old) in table.paddable_earlier_schemas() {
            earlier.push((stored_schema_id(table, id)?, codec_of(table, format, old)?));
        }
        Ok(Self {
            codec,
            schema_id,
            earlier,
            arrow_schema: to_arrow_schema(schema),
            table: table.path.to_string(),
        })
    }

    /// The Arrow schema rows convert to.
    pub(crate) fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// Columns of a row.
    fn arity(&self) -> usize {
        self.codec.fields().len()
    }

    /// Decodes the row `bytes` written with `schema_id` into `out`
    /// (cleared first); the datums borrow `bytes`.
    fn decode<'a>(&self, schema_id: i16, bytes: &'a [u8], out: &mut Vec<Datum<'a>>) -> Result<()> {
        let codec = if schema_id == self.schema_id {
            &self.codec
        } else {
            match self.earlier.iter().find(|(id, _)| *id == schema_id) {
                Some((_, codec)) => codec,
                None => {
                    return Err(ClientError::Invalid(format!(
                        "a row of {} was written with schema id {schema_id}, which this reader does not know (it reads schema {} and earlier); the table was altered since the reader was created: create it again",
                        self.table, self.schema_id
                    )))
                }
            }
        };
        codec
            .decode(bytes, out)
            .map_err(|e| ClientError::Protocol {
                api: "value decoding",
                message: format!("a row of {} (schema id {schema_id}): {e}", self.table),
            })?;
        out.resize(self.arity(), Datum::Null);
        Ok(())
    }

    /// The row of one stored value (`schemaId ‖ row`).
    pub(crate) fn row(&self, value: Bytes) -> Result<KvRow> {
        let stored = StoredValue::split(&value).map_err(|e| self.malformed(e))?;
        let mut datums = Vec::with_capacity(self.arity());
        self.decode(stored.schema_id, stored.row, &mut datums)?;
        // SAFETY: see `extend`; the datums borrow `value`, which the row keeps.
        let datums = unsafe { extend(datums) };
        Ok(KvRow {
            datums,
            _bytes: value,
        })
    }

    /// The rows of several stored values (a prefix lookup's), in order.
    pub(crate) fn rows(&self, values: Vec<Bytes>) -> Result<KvRows> {
        let mut datums: Vec<Datum<'_>> = Vec::with_capacity(values.len() * self.arity());
        let mut row = Vec::with_capacity(self.arity());
        for value in &values {
            let stored = StoredValue::split(value).map_err(|e| self.malformed(e))?;
            self.decode(stored.schema_id, stored.row, &mut row)?;
            datums.extend_from_slice(&row);
        }
        let rows = values.len();
        // SAFETY: see `extend`; the datums borrow `values`, which the rows keep.
        let datums = unsafe { extend(datums) };
        Ok(KvRows {
            datums,
            arity: self.arity(),
            rows,
            arrow_schema: self.arrow_schema.clone(),
            _bytes: values,
        })
    }

    /// The rows of a value batch (LimitScan, ScanKv), in order.
    pub(crate) fn value_batch(&self, records: Bytes) -> Result<KvRows> {
        if records.is_empty() {
            return Ok(KvRows::empty(self.arity(), self.arrow_schema.clone()));
        }
        let batch = ValueBatch::validate(&records).map_err(|e| self.malformed(e))?;
        let rows = batch.record_count() as usize;
        let mut datums: Vec<Datum<'_>> = Vec::with_capacity(rows * self.arity());
        let mut row = Vec::with_capacity(self.arity());
        for record in batch.records() {
            self.decode(record.schema_id, record.row, &mut row)?;
            datums.extend_from_slice(&row);
        }
        // SAFETY: see `extend`; the datums borrow `records`, which the rows keep.
        let datums = unsafe { extend(datums) };
        Ok(KvRows {
            datums,
            arity: self.arity(),
            rows,
            arrow_schema: self.arrow_schema.clone(),
            _bytes: vec![records],
        })
    }

    #[cold]
    fn malformed(&self, e: impl std::fmt::Display) -> ClientError {
        ClientError::Protocol {
            api: "value decoding",
            message: format!("a value of {}: {e}", self.table),
        }
    }
}

/// Datums that borrow received bytes, with the lifetime of those bytes
/// erased so they can live beside them in one value.
///
/// # Safety
/// The caller keeps every `Bytes` the datums borrow in the same value as
/// the returned vector, never hands out a datum longer than a borrow of
/// that value, and never mutates those bytes. `Bytes` are immutable and
/// their data does not move when the handle moves, so the borrows stay
/// valid as long as the value lives.
unsafe fn extend(datums: Vec<Datum<'_>>) -> Vec<Datum<'static>> {
    // SAFETY: the types differ only in a lifetime (same layout); the
    // caller upholds what the lifetime stood for.
    unsafe { std::mem::transmute::<Vec<Datum<'_>>, Vec<Datum<'static>>>(datums) }
}

/// One row read from a primary-key table: its values borrow the bytes it
/// arrived in, which it keeps. Reads as an [`InternalRow`] (so it can be
/// written back, hashed or converted), or as a slice of datums.
#[derive(Clone, Debug)]
pub struct KvRow {
    /// Borrow `_bytes` (see `extend`); never handed out as `'static`.
    datums: Vec<Datum<'static>>,
    _bytes: Bytes,
}

impl KvRow {
    /// The row's values, one per column, in table order.
    pub fn values(&self) -> &[Datum<'_>] {
        &self.datums
    }

    /// The value at `pos`; panics if `pos` is not below the column count.
    pub fn get(&self, pos: usize) -> Datum<'_> {
        self.datums[pos]
    }
}

impl InternalRow for KvRow {
    fn field_count(&self) -> usize {
        self.datums.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.datums[pos]
    }
}

impl PartialEq for KvRow {
    fn eq(&self, other: &Self) -> bool {
        self.datums == other.datums
    }
}

/// Rows read together — a prefix lookup's, a scan batch's — over the
/// bytes they arrived in. Iterate with [`KvRows::iter`]; each row is a
/// view ([`KvRowRef`]) that allocates nothing.
#[derive(Clone, Debug)]
pub struct KvRows {
    /// `rows` x `arity` datums, row after row; they borrow `_bytes`.
    datums: Vec<Datum<'static>>,
    arity: usize,
    rows: usize,
    arrow_schema: SchemaRef,
    _bytes: Vec<Bytes>,
}

impl KvRows {
    fn empty(arity: usize, arrow_schema: SchemaRef) -> Self {
        Self {
            datums: Vec::new(),
            arity,
            rows: 0,
            arrow_schema,
            _bytes: Vec::new(),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The row at `index`, or `None` past the end.
    pub fn row(&self, index: usize) -> Option<KvRowRef<'_>> {
        (index < self.rows).then(|| KvRowRef {
            datums: &self.datums[index * self.arity..(index + 1) * self.arity],
        })
    }

    /// The rows in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = KvRowRef<'_>> + '_ {
        (0..self.rows).map(|i| KvRowRef {
            datums: &self.datums[i * self.arity..(i + 1) * self.arity],
        })
    }

    /// The rows as one Arrow `RecordBatch` of the table's Arrow schema
    /// (one copy of every value, through the append writer's row builder).
    pub fn to_record_batch(&self) -> Result<RecordBatch> {
        let mut builder = RowBatchBuilder::new(self.arrow_schema.clone())?;
        for row in self.iter() {
            builder.append(&row)?;
        }
        builder.finish()
    }
}

/// One row of a [`KvRows`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvRowRef<'a> {
    datums: &'a [Datum<'a>],
}

impl<'a> KvRowRef<'a> {
    /// The row's values, one per column, in table order.
    pub fn values(&self) -> &'a [Datum<'a>] {
        self.datums
    }

    /// The value at `pos`; panics if `pos` is not below the column count.
    pub fn get(&self, pos: usize) -> Datum<'a> {
        self.datums[pos]
    }
}

impl InternalRow for KvRowRef<'_> {
    fn field_count(&self) -> usize {
        self.datums.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.datums[pos]
    }

    #[inline]
    fn write_fields(&self, fields: &mut crate::row::FieldWriter<'_>) {
        for datum in self.datums {
            fields.datum_ref(datum);
        }
    }
}
