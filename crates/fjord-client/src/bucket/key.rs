//! Fluss's compacted key encoding of bucket-key columns: the bytes the
//! official clients hash to pick a bucket (`CompactedKeyEncoder` in Java and
//! fluss-rs, used when a table does not tier to Paimon or Iceberg).
//!
//! ```text
//! key := value(col_1) value(col_2) ...     no null bitmap: keys are never NULL
//!   BOOLEAN, TINYINT         1 byte
//!   SMALLINT                 2 bytes little-endian
//!   FLOAT, DOUBLE            4 / 8 bytes little-endian IEEE 754
//!   INT, DATE, TIME (ms)     unsigned varint of the 32-bit two's complement
//!   BIGINT                   unsigned varint of the 64-bit two's complement
//!   STRING, CHAR             varint byte length, UTF-8 bytes
//!   BYTES, BINARY(n)         varint byte length, bytes
//!   DECIMAL(p <= 18, s)      as BIGINT, the unscaled value
//!   DECIMAL(p > 18, s)       varint length, unscaled value as minimal big-endian two's complement
//!   TIMESTAMP[_LTZ](p <= 3)  as BIGINT, epoch milliseconds
//!   TIMESTAMP[_LTZ](p > 3)   as BIGINT millis, then varint nanos of the millisecond
//! ```
//!
//! Little-endian stands for the JVM's native order, which is little-endian on
//! every platform Fluss runs on (and what fluss-rs writes).
//!
//! The per-value bytes are written by `fjord_format::row::compacted::write_value`,
//! the one implementation the server's primary-key codecs use too; this
//! module picks the key columns out of rows and Arrow batches and names
//! them in errors.

use arrow_array::RecordBatch;
use fjord_format::row::compacted::write_value;
use fjord_format::row::{ColumnKind, ValueRefusal};
use fjord_format::schema::Schema;

use crate::error::{ClientError, Result};
use crate::row::arrow_column::ArrowColumn;
use crate::row::{Datum, InternalRow};

struct KeyColumn {
    pos: usize,
    name: String,
    kind: ColumnKind,
}

/// Encodes the bucket-key columns of rows into one reused buffer.
///
/// Guarantees: the bytes equal what the official clients' compacted key
/// encoder produces for the same values; encoding allocates nothing once the
/// buffer has grown to the longest key seen.
pub struct KeyEncoder {
    columns: Vec<KeyColumn>,
    buf: Vec<u8>,
    /// What the key is, for messages: "bucket key" or "primary key".
    role: &'static str,
}

impl KeyEncoder {
    /// The encoder of the `key_names` columns of `schema`, in that order.
    /// Fails when a name is not a column or its type cannot be a bucket key
    /// here (ARRAY, MAP, ROW).
    pub fn new(schema: &Schema, key_names: &[String]) -> Result<Self> {
        Self::with_role(schema, key_names, "bucket key")
    }

    /// The encoder of a primary key: the `key_names` columns of `schema`
    /// (the physical primary key: the primary key without the partition
    /// keys), the bytes a primary-key table stores and looks rows up by.
    /// Fails as [`KeyEncoder::new`] does, naming the primary key.
    pub fn primary_key(schema: &Schema, key_names: &[String]) -> Result<Self> {
        Self::with_role(schema, key_names, "primary key")
    }

    fn with_role(schema: &Schema, key_names: &[String], role: &'static str) -> Result<Self> {
        let mut columns = Vec::with_capacity(key_names.len());
        for name in key_names {
            let pos = schema.column_index(name).ok_or_else(|| {
                ClientError::Invalid(format!("{role} `{name}` is not a column of the table"))
            })?;
            let data_type = &schema.columns()[pos].data_type;
            let kind = ColumnKind::of(data_type.kind()).ok_or_else(|| {
                ClientError::Invalid(format!(
                    "{role} column `{name}` has type {data_type}, which cannot be a key"
                ))
            })?;
            columns.push(KeyColumn {
                pos,
                name: name.clone(),
                kind,
            });
        }
        if columns.is_empty() {
            return Err(ClientError::Invalid(
                "a key encoder needs at least one key column".to_owned(),
            ));
        }
        Ok(Self {
            columns,
            buf: Vec::with_capacity(64),
            role,
        })
    }

    /// The encoded key of `row` (a row of the whole table). Callers check
    /// the row's width first; fails when a key value is NULL or its datum
    /// does not match the column's type.
    #[inline]
    pub fn encode_row<R: InternalRow + ?Sized>(&mut self, row: &R) -> Result<&[u8]> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let encoded = self.encode_row_into(row, &mut buf);
        self.buf = buf;
        encoded?;
        Ok(&self.buf)
    }

    /// [`KeyEncoder::encode_row`] appending to a caller's buffer: for
    /// callers that share the encoder (`&self`) or keep the key. On error
    /// `out` holds part of the key; the caller drops it.
    #[inline]
    pub fn encode_row_into<R: InternalRow + ?Sized>(
        &self,
        row: &R,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        for (i, column) in self.columns.iter().enumerate() {
            // Read again for the message rather than kept alive across the
            // encode, which would pin the datum to the stack.
            if let Err(refusal) = write_value(column.kind, &row.datum(column.pos), out) {
                return Err(self.refusal_error(i, row.datum(column.pos), refusal));
            }
        }
        Ok(())
    }

    /// The key columns' positions in the rows this encoder reads, in key order.
    pub fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().map(|c| c.pos)
    }

    /// Typed views of the key columns of `batch`, made once per batch.
    pub(crate) fn batch_keys<'b>(&self, batch: &'b RecordBatch) -> Result<Vec<KeyArray<'b>>> {
        self.columns
            .iter()
            .map(|column| {
                let array = batch.column(column.pos);
                KeyArray::of(array.as_ref()).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "bucket key column `{}` has Arrow type {}, which is not a key type",
                        column.name,
                        array.data_type()
                    ))
                })
            })
            .collect()
    }

    /// The encoded key of row `row` of the batch whose `keys` were made by
    /// [`KeyEncoder::batch_keys`].
    pub(crate) fn encode_batch_row(&mut self, keys: &[KeyArray<'_>], row: usize) -> Result<&[u8]> {
        self.buf.clear();
        for (i, (column, array)) in self.columns.iter().zip(keys).enumerate() {
            if let Err(refusal) = write_value(column.kind, &array.datum(row), &mut self.buf) {
                return Err(self.refusal_error(i, array.datum(row), refusal));
            }
        }
        Ok(&self.buf)
    }

    #[cold]
    fn refusal_error(&self, i: usize, datum: Datum<'_>, refusal: ValueRefusal) -> ClientError {
        let column = &self.columns[i];
        let role = self.role;
        ClientError::Invalid(match refusal {
            ValueRefusal::Null => format!(
                "{role} column `{}` is NULL; rows of a table with {role}s need key values",
                column.name
            ),
            ValueRefusal::Mismatch => format!(
                "{role} column `{}` ({}) cannot take a {} value",
                column.name,
                column.kind,
                datum.type_name()
            ),
            ValueRefusal::OutOfRange(reason) => format!(
                "{role} column `{}` ({}): value {datum} does not fit: {reason}",
                column.name, column.kind
            ),
        })
    }
}

/// One key column of a RecordBatch, downcast once per batch.
pub(crate) type KeyArray<'b> = ArrowColumn<'b>;
