//! The compacted key: the bytes a primary key (or bucket key) is stored,
//! looked up and hashed as (Fluss's `CompactedKeyEncoder`).
//!
//! ```text
//! key := value(key column 1) value(key column 2) ...
//!        each value exactly as in a COMPACTED row (see super::compacted),
//!        with NO null bitset: a key column is never NULL
//! ```
//!
//! Because there is no bitset, the key of a prefix of the key columns is a
//! byte prefix of the whole key: that is how prefix lookups seek. Every
//! value takes at least one byte, so a key is never empty.
//!
//! Facts from Fluss's `row/encode/CompactedKeyEncoder.java` and
//! `row/compacted/CompactedKeyWriter.java` (a `CompactedRowWriter` of zero
//! fields, refusing NULL), and fluss-rs 1.0.0's
//! `row/encode/compacted_key_encoder.rs` / `row/compacted/compacted_key_writer.rs`.
//! Key columns of nested types are refused here as Fluss's table
//! validation refuses them (fluss-rs would encode an ARRAY).

use std::ops::Range;

use crate::datum::Datum;
use crate::types::DataType;

use super::compacted::{read_value, write_value};
use super::{ColumnKind, RowError};

/// One key column: where it is in the row, and how it encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct KeyColumn {
    position: usize,
    kind: ColumnKind,
}

/// Encodes the key columns of whole rows: built once per (row type, key
/// column positions), used per record.
///
/// Guarantees: the bytes equal what Fluss's `CompactedKeyEncoder` writes for
/// the same values; the matching [`KeyDecoder`] (from [`KeyEncoder::decoder`])
/// accepts them; encoding allocates nothing once `out` has room.
#[derive(Clone, Debug)]
pub struct KeyEncoder {
    arity: usize,
    columns: Box<[KeyColumn]>,
}

impl KeyEncoder {
    /// The encoder of the columns at `key_positions` (in that order) of rows
    /// of `row_type`. Fails for no key column, a position outside the row,
    /// or a nested key column.
    pub fn new(row_type: &[DataType], key_positions: &[usize]) -> Result<Self, RowError> {
        if key_positions.is_empty() {
            return Err(RowError::EmptyKey);
        }
        let columns = key_positions
            .iter()
            .map(|&position| {
                let data_type = row_type
                    .get(position)
                    .ok_or(RowError::KeyPositionOutOfRange {
                        position,
                        arity: row_type.len(),
                    })?;
                let kind = ColumnKind::of(data_type.kind()).ok_or(RowError::UnsupportedType {
                    column: position,
                    type_root: data_type.type_root(),
                })?;
                Ok(KeyColumn { position, kind })
            })
            .collect::<Result<_, RowError>>()?;
        Ok(Self {
            arity: row_type.len(),
            columns,
        })
    }

    /// Appends the key of `row` (one datum per column of the row type) to
    /// `out` and returns where it lies. Fails, leaving `out` as it was, for
    /// a row of another width, a NULL key value, or a key value its column
    /// cannot take; errors name the column's position in the row.
    pub fn encode_datums(
        &self,
        row: &[Datum<'_>],
        out: &mut Vec<u8>,
    ) -> Result<Range<usize>, RowError> {
        if row.len() != self.arity {
            return Err(RowError::ArityMismatch {
                expected: self.arity,
                given: row.len(),
            });
        }
        let start = out.len();
        for column in self.columns.iter() {
            let datum = &row[column.position];
            if let Err(refusal) = write_value(column.kind, datum, out) {
                out.truncate(start);
                return Err(refusal.at(column.position, column.kind, datum));
            }
        }
        Ok(start..out.len())
    }

    /// The decoder of the keys this encoder writes.
    pub fn decoder(&self) -> KeyDecoder {
        KeyDecoder {
            kinds: self.columns.iter().map(|c| c.kind).collect(),
        }
    }
}

/// Checks and decodes compacted keys of one list of key column types:
/// built once per table (the server refuses lookups whose keys do not
/// have the table's key shape).
///
/// Guarantees: accepts exactly the bytes [`KeyEncoder`] writes for those
/// types (canonical varints, UTF-8 text, decimals within their precision,
/// nothing after the last value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyDecoder {
    kinds: Box<[ColumnKind]>,
}

impl KeyDecoder {
    /// The decoder of keys of `key_types`, in key order. Fails for no key
    /// column or a nested one.
    pub fn new(key_types: &[DataType]) -> Result<Self, RowError> {
        if key_types.is_empty() {
            return Err(RowError::EmptyKey);
        }
        let kinds = key_types
            .iter()
            .enumerate()
            .map(|(column, data_type)| {
                ColumnKind::of(data_type.kind()).ok_or(RowError::UnsupportedType {
                    column,
                    type_root: data_type.type_root(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { kinds })
    }

    /// The key columns' kinds, in key order.
    pub fn kinds(&self) -> &[ColumnKind] {
        &self.kinds
    }

    /// Checks that `bytes` is exactly one well-formed key.
    pub fn validate_key(&self, bytes: &[u8]) -> Result<(), RowError> {
        self.walk(bytes, |_| {})
    }

    /// Decodes `bytes` (exactly one key) into `out`: cleared first, one
    /// datum per key column on success, cleared again on error. Errors name
    /// the column's position within the key.
    pub fn decode<'a>(&self, bytes: &'a [u8], out: &mut Vec<Datum<'a>>) -> Result<(), RowError> {
        out.clear();
        out.reserve(self.kinds.len());
        let result = self.walk(bytes, |datum| out.push(datum));
        if result.is_err() {
            out.clear();
        }
        result
    }

    fn walk<'a>(&self, bytes: &'a [u8], mut each: impl FnMut(Datum<'a>)) -> Result<(), RowError> {
        let mut pos = 0;
        for (column, kind) in self.kinds.iter().enumerate() {
            let datum =
                read_value(*kind, bytes, &mut pos).map_err(|f| f.at(column, bytes.len()))?;
            each(datum);
        }
        if pos != bytes.len() {
            return Err(RowError::TrailingBytes {
                end: pos,
                size: bytes.len(),
            });
        }
        Ok(())
    }
}
