//! The checks behind the fuzz targets of this crate's decoders, shared by
//! `fuzz/fuzz_targets/*.rs` and the crash-regression test
//! (`tests/fuzz_regressions.rs`, which replays `fuzz/regressions/<target>/*`),
//! so a crash found once is replayed by the ordinary test suite with the
//! very same logic.
//!
//! Each function takes arbitrary bytes, must never panic on them, and
//! panics only when an invariant of an accepted input breaks (which is a
//! bug the fuzzer reports): what `validate` accepts `decode` accepts, and
//! every accepted input re-encodes to exactly its own bytes.
//!
//! Row and key targets read a small row type from the first input bytes:
//!
//! ```text
//! input := arity_byte (column_byte param_byte) x (arity_byte % 9) rest
//! column_byte: low 4 bits pick the type (see `column_type`), bit 4 = NOT NULL;
//!              for `compacted_row_decode` only, bits 5-6 wrap it: 1 = ARRAY<T>,
//!              2 = ROW<T>, 3 = MAP<INT NOT NULL, T> (`nest`)
//! param_byte:  CHAR/BINARY length 1 + p % 8; DECIMAL precision 1 + p % 38;
//!              TIME/TIMESTAMP precision p % 10
//! rest:        the row (or key) bytes to decode
//! ```
//!
//! Not a stable API: hidden from the docs, for fuzzing only.

use crate::datum::Datum;
use crate::kv::batch::{self, KvBatch, KvBatchBuilder};
use crate::kv::value_batch::{ValueBatch, ValueBatchBuilder};
use crate::row::key::{KeyDecoder, KeyEncoder};
use crate::row::{RowCodec, RowFormat};
use crate::types::DataType;

/// One fuzz target's logic: arbitrary bytes in, a panic only on a bug.
pub type Target = fn(&[u8]);

/// The fuzz targets whose logic lives here, by their `fuzz/Cargo.toml`
/// name: what the regression test replays.
pub const TARGETS: &[(&str, Target)] = &[
    ("kv_batch_validate", kv_batch_validate),
    ("compacted_row_decode", compacted_row_decode),
    ("indexed_row_decode", indexed_row_decode),
    ("key_validate", key_validate),
    ("value_batch_decode", value_batch_decode),
];

/// Most columns a derived row type has: enough for a two-byte null bitset.
pub const FUZZ_ARITY_MAX: usize = 8;

/// The flat column type `selector` / `param` stand for.
fn column_type(selector: u8, param: u8) -> DataType {
    let length = 1 + u32::from(param % 8);
    let precision = u32::from(param % 10);
    let t = match selector & 0x0f {
        0 => DataType::boolean(),
        1 => DataType::tinyint(),
        2 => DataType::smallint(),
        3 => DataType::int(),
        4 => DataType::bigint(),
        5 => DataType::float(),
        6 => DataType::double(),
        7 => DataType::char(length).expect("length in 1..=8"),
        8 => DataType::string(),
        9 => DataType::binary(length).expect("length in 1..=8"),
        10 => DataType::bytes(),
        11 => DataType::decimal(1 + u32::from(param % 38), 0).expect("precision in 1..=38"),
        12 => DataType::date(),
        13 => DataType::time(precision).expect("precision in 0..=9"),
        14 => DataType::timestamp(precision).expect("precision in 0..=9"),
        _ => DataType::timestamp_ltz(precision).expect("precision in 0..=9"),
    };
    t.with_nullable(selector & 0x10 == 0)
}

/// A row type from the front of `data` (see the module doc) and the rest.
pub fn derive_row_type(data: &[u8]) -> (Vec<DataType>, &[u8]) {
    let Some((&arity, mut rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let arity = usize::from(arity) % (FUZZ_ARITY_MAX + 1);
    let mut row_type = Vec::with_capacity(arity);
    while row_type.len() < arity {
        let Some(([selector, param], tail)) = rest.split_first_chunk::<2>() else {
            break;
        };
        row_type.push(column_type(*selector, *param));
        rest = tail;
    }
    (row_type, rest)
}

/// `t` wrapped as bits 5-6 of its column byte say: COMPACTED rows hold
/// nested values, keys and INDEXED rows do not, so only that target nests.
fn nest(t: DataType, selector: u8) -> DataType {
    use crate::types::DataField;
    match (selector >> 5) & 0b11 {
        1 => DataType::array(t),
        2 => DataType::row(vec![DataField::new("f", t)]),
        3 => DataType::map(DataType::int().not_null(), t),
        _ => t,
    }
}

/// Decodes `rest` of the input as one row of the derived type in `format`.
fn row_decode(data: &[u8], format: RowFormat) {
    let (mut row_type, bytes) = derive_row_type(data);
    if format == RowFormat::Compacted {
        // The column bytes again, for their nesting bits.
        let selectors = data.get(1..).unwrap_or_default().iter().step_by(2);
        for (t, selector) in row_type.iter_mut().zip(selectors) {
            *t = nest(t.clone(), *selector);
        }
    }
    let codec = RowCodec::new(format, &row_type).expect("derived types have a codec");
    let mut datums = Vec::new();
    let decoded = codec.decode(bytes, &mut datums);
    assert_eq!(
        decoded.is_ok(),
        codec.validate(bytes).is_ok(),
        "decode and validate disagree"
    );
    if decoded.is_err() {
        assert!(datums.is_empty(), "a failed decode leaves no datums");
        return;
    }
    assert_eq!(datums.len(), row_type.len());
    let mut again = Vec::new();
    codec
        .encode(&datums, &mut again)
        .expect("a decoded row re-encodes");
    assert_eq!(again, bytes, "decoding accepts only canonical rows");
}

/// Fuzz target `compacted_row_decode`.
pub fn compacted_row_decode(data: &[u8]) {
    row_decode(data, RowFormat::Compacted);
}

/// Fuzz target `indexed_row_decode`.
pub fn indexed_row_decode(data: &[u8]) {
    row_decode(data, RowFormat::Indexed);
}

/// Fuzz target `key_validate`: the rest of the input as one key of the
/// derived types.
pub fn key_validate(data: &[u8]) {
    let (key_types, bytes) = derive_row_type(data);
    let Ok(decoder) = KeyDecoder::new(&key_types) else {
        assert!(key_types.is_empty(), "flat key types build a decoder");
        return;
    };
    let mut datums: Vec<Datum<'_>> = Vec::new();
    let decoded = decoder.decode(bytes, &mut datums);
    assert_eq!(decoded.is_ok(), decoder.validate_key(bytes).is_ok());
    if decoded.is_err() {
        return;
    }
    let positions: Vec<usize> = (0..key_types.len()).collect();
    let encoder = KeyEncoder::new(&key_types, &positions).expect("flat key types");
    let mut again = Vec::new();
    encoder
        .encode_datums(&datums, &mut again)
        .expect("a decoded key re-encodes");
    assert_eq!(again, bytes, "key validation accepts only canonical keys");
}

/// Fuzz target `kv_batch_validate`. The first byte picks the mode: odd =
/// the rest is a batch whose CRC is recomputed first (so the fuzzer gets
/// past the checksum into the records), even = the rest as given.
pub fn kv_batch_validate(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 && bytes.len() >= batch::HEADER_SIZE {
        let crc = crc32c::crc32c(&bytes[batch::SCHEMA_ID_OFFSET..]);
        bytes[batch::CRC_OFFSET..batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
    }
    let Ok(kv) = KvBatch::validate(&bytes) else {
        return;
    };
    assert_eq!(kv.size_in_bytes(), bytes.len());
    let mut rebuilt = KvBatchBuilder::start(
        Vec::new(),
        kv.schema_id(),
        kv.writer_id(),
        kv.batch_sequence(),
    );
    let mut count = 0;
    for record in kv.records() {
        assert!(!record.key.is_empty());
        match record.row {
            Some(row) => rebuilt.append_upsert(record.key, row).expect("fits"),
            None => rebuilt.append_delete(record.key).expect("fits"),
        }
        count += 1;
    }
    assert_eq!(count, kv.record_count() as usize);
    let mut rebuilt = rebuilt.finish().to_vec();
    // The only field the builder does not copy: attributes (no bit defined).
    rebuilt[batch::ATTRIBUTES_OFFSET] = kv.attributes();
    let crc = crc32c::crc32c(&rebuilt[batch::SCHEMA_ID_OFFSET..]);
    rebuilt[batch::CRC_OFFSET..batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        rebuilt, bytes,
        "an accepted batch rebuilds to its own bytes"
    );
    batch::restamp_writer(&mut rebuilt, 7, 8).expect("a valid batch restamps");
    let stamped = KvBatch::validate(&rebuilt).expect("restamping keeps the batch valid");
    assert_eq!((stamped.writer_id(), stamped.batch_sequence()), (7, 8));
}

/// Fuzz target `value_batch_decode`.
pub fn value_batch_decode(data: &[u8]) {
    let Ok(batch) = ValueBatch::validate(data) else {
        return;
    };
    let mut out = Vec::new();
    let mut rebuilt = ValueBatchBuilder::start(&mut out);
    for record in batch.records() {
        rebuilt.append(record.schema_id, record.row).expect("fits");
    }
    assert_eq!(rebuilt.record_count(), batch.record_count() as usize);
    let range = rebuilt.finish();
    assert_eq!(
        &out[range], data,
        "an accepted batch rebuilds to its own bytes"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_types_are_read_from_the_front() {
        let (row_type, rest) = derive_row_type(&[2, 0x13, 0, 0x0b, 20, 0xaa]);
        assert_eq!(
            row_type,
            [
                DataType::int().not_null(),
                DataType::decimal(21, 0).unwrap()
            ]
        );
        assert_eq!(rest, [0xaa]);
        assert_eq!(derive_row_type(&[]).0, []);
        // Fewer column bytes than the arity: the columns present.
        assert_eq!(derive_row_type(&[3, 0, 0]).0.len(), 1);
    }

    #[test]
    fn targets_accept_their_own_output() {
        // INT NOT NULL, STRING: a valid compacted row, an indexed row, a key.
        compacted_row_decode(&[2, 0x13, 0, 0x08, 0, 0x00, 0x01, 0x01, b'a']);
        indexed_row_decode(&[2, 0x13, 0, 0x08, 0, 0x00, 1, 0, 0, 0, 1, 0, 0, 0, b'a']);
        key_validate(&[2, 0x13, 0, 0x08, 0, 0x01, 0x01, b'a']);
        let mut builder = KvBatchBuilder::start(Vec::new(), 1, 2, 3);
        builder.append_upsert(&[1], &[0, 2]).unwrap();
        builder.append_delete(&[1]).unwrap();
        let mut input = vec![0];
        input.extend_from_slice(builder.finish());
        kv_batch_validate(&input);
        let mut out = Vec::new();
        let mut values = ValueBatchBuilder::start(&mut out);
        values.append(1, &[0, 1]).unwrap();
        values.finish();
        value_batch_decode(&out);
    }
}
