//! The value a primary-key table stores per key: the row with the id of
//! the schema it was written with in front (Fluss's `ValueEncoder`).
//!
//! ```text
//! value := SchemaId i16 little-endian | row (the table.kv.format row, to the end)
//! ```
//!
//! These exact bytes are what Lookup returns in `PbValue.values`, what
//! prefix lookups return, and what each record of a value batch holds after
//! its length (`DefaultValueRecordBatch.Builder.append(byte[])`). fluss-rs
//! 1.0.0 reads the schema id with `LittleEndian::read_i16`
//! (`client/table/lookup.rs`).

use std::ops::Range;

/// Bytes of the schema id in front of the row.
pub const SCHEMA_ID_BYTES: usize = 2;

/// A stored value split into its schema id and row bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredValue<'a> {
    /// The schema the row was written with.
    pub schema_id: i16,
    /// The row bytes, in the table's row format.
    pub row: &'a [u8],
}

/// Bytes too short to be a stored value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a stored value of {size} bytes is shorter than its {SCHEMA_ID_BYTES}-byte schema id")]
pub struct StoredValueError {
    /// Bytes given.
    pub size: usize,
}

impl<'a> StoredValue<'a> {
    /// Splits `value` into schema id and row; fails when it is shorter than
    /// the schema id. The row is not checked (decode it with its schema's
    /// [`crate::row::RowCodec`]).
    pub fn split(value: &'a [u8]) -> Result<Self, StoredValueError> {
        match value.split_first_chunk::<SCHEMA_ID_BYTES>() {
            Some((id, row)) => Ok(Self {
                schema_id: i16::from_le_bytes(*id),
                row,
            }),
            None => Err(StoredValueError { size: value.len() }),
        }
    }
}

/// Appends the stored value of `row` written with `schema_id` to `out` and
/// returns where it lies.
pub fn write_stored_value(out: &mut Vec<u8>, schema_id: i16, row: &[u8]) -> Range<usize> {
    let start = out.len();
    out.reserve(SCHEMA_ID_BYTES + row.len());
    out.extend_from_slice(&schema_id.to_le_bytes());
    out.extend_from_slice(row);
    start..out.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_id_is_two_little_endian_bytes_in_front() {
        let mut out = vec![9];
        let range = write_stored_value(&mut out, 0x0102, &[0xaa, 0xbb]);
        assert_eq!(out, [9, 0x02, 0x01, 0xaa, 0xbb]);
        assert_eq!(
            StoredValue::split(&out[range]),
            Ok(StoredValue {
                schema_id: 0x0102,
                row: &[0xaa, 0xbb]
            })
        );
        assert_eq!(
            StoredValue::split(&[0xff, 0xff]),
            Ok(StoredValue {
                schema_id: -1,
                row: &[]
            })
        );
        assert_eq!(StoredValue::split(&[1]), Err(StoredValueError { size: 1 }));
    }
}
