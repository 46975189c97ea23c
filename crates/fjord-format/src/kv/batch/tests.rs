//! Tests of the KV batch: known bytes, one refusal per defect, re-stamping,
//! and round trips of random batches.

use proptest::prelude::*;

use super::*;

/// Data-driven check: validating `bytes` gives `expected`.
fn check(bytes: &[u8], expected: Result<(), KvBatchError>) {
    assert_eq!(KvBatch::validate(bytes).map(|_| ()), expected);
}

/// Rewrites the CRC so a defect behind it is what validation finds.
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[SCHEMA_ID_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
}

fn two_records() -> Vec<u8> {
    let mut builder = KvBatchBuilder::start(Vec::new(), 3, NO_WRITER_ID, NO_BATCH_SEQUENCE);
    builder.append_upsert(&[0x01], &[0x00, 0x02]).expect("fits");
    builder.append_delete(&[0x02]).expect("fits");
    builder.finish().to_vec()
}

#[test]
fn known_bytes_match_the_fluss_layout() {
    // KvRecordBatchBuilder.writeBatchHeader and DefaultKvRecord.writeTo,
    // field by field: an upsert of key 01 to row 00 02, a delete of key 02.
    #[rustfmt::skip]
    let mut expected = vec![
        38, 0, 0, 0,                                      // Length = 42 - 4
        0,                                                // Magic
        0, 0, 0, 0,                                       // CRC, below
        3, 0,                                             // SchemaId
        0,                                                // Attributes
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,   // WriterId -1
        0xff, 0xff, 0xff, 0xff,                           // BatchSequence -1
        2, 0, 0, 0,                                       // RecordCount
        4, 0, 0, 0, 1, 0x01, 0x00, 0x02,                  // Length 4, KeyLength 1, key, row
        2, 0, 0, 0, 1, 0x02,                              // Length 2, KeyLength 1, key: delete
    ];
    fix_crc(&mut expected);
    assert_eq!(two_records(), expected);
    let batch = KvBatch::validate(&expected).expect("valid");
    assert_eq!(batch.magic(), KV_MAGIC_V0);
    assert_eq!(batch.schema_id(), 3);
    assert_eq!(batch.attributes(), 0);
    assert_eq!(batch.writer_id(), NO_WRITER_ID);
    assert_eq!(batch.batch_sequence(), NO_BATCH_SEQUENCE);
    assert_eq!(batch.record_count(), 2);
    assert_eq!(batch.size_in_bytes(), 42);
    assert_eq!(batch.crc(), crc32c::crc32c(&expected[9..]));
    let records: Vec<_> = batch.records().collect();
    assert_eq!(
        records,
        [
            KvRecord {
                key: &[0x01],
                row: Some(&[0x00, 0x02])
            },
            KvRecord {
                key: &[0x02],
                row: None
            }
        ]
    );
    assert!(records[1].is_delete());
}

#[test]
fn fluss_rs_writes_the_same_batch() {
    // fluss-rs 1.0.0 `KvRecordBatchBuilder::new(5, 1 << 20, KvFormat::COMPACTED)`,
    // `set_writer_state(42, 7)`, `append_row(&[1, 2], Some(&[0, 9]))`,
    // `append_row(&[3], None)`, `build()`: these bytes, CRC included.
    #[rustfmt::skip]
    let fluss_rs = [
        0x27, 0, 0, 0, 0, 0xb3, 0xc7, 0x37, 0x76, 5, 0, 0,
        42, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0,
        5, 0, 0, 0, 2, 1, 2, 0, 9,
        2, 0, 0, 0, 1, 3,
    ];
    let mut builder = KvBatchBuilder::start(Vec::new(), 5, 42, 7);
    builder.append_upsert(&[1, 2], &[0, 9]).expect("fits");
    builder.append_delete(&[3]).expect("fits");
    assert_eq!(builder.finish(), &fluss_rs);
    let batch = KvBatch::validate(&fluss_rs).expect("valid");
    assert_eq!(batch.crc(), 0x7637_c7b3);
}

#[test]
fn validation_names_each_defect() {
    let good = two_records();
    check(&good, Ok(()));
    check(
        &good[..3],
        Err(KvBatchError::Truncated {
            needed: 5,
            available: 3,
        }),
    );
    check(
        &good[..good.len() - 1],
        Err(KvBatchError::Truncated {
            needed: good.len(),
            available: good.len() - 1,
        }),
    );
    let mut longer = good.clone();
    longer.push(0);
    check(
        &longer,
        Err(KvBatchError::TrailingBytes {
            declared: good.len(),
            available: good.len() + 1,
        }),
    );
    let mut negative = good.clone();
    negative[..4].copy_from_slice(&(-3i32).to_le_bytes());
    check(&negative, Err(KvBatchError::NegativeLength { length: -3 }));
    let mut magic = good.clone();
    magic[MAGIC_OFFSET] = 1;
    check(&magic, Err(KvBatchError::UnknownMagic { magic: 1 }));
    let mut short = good.clone();
    short[..4].copy_from_slice(&20i32.to_le_bytes());
    check(&short, Err(KvBatchError::ShorterThanHeader { size: 24 }));
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x10;
    assert!(matches!(
        KvBatch::validate(&flipped),
        Err(KvBatchError::CrcMismatch { .. })
    ));

    // Defects behind a valid CRC: a writer's bug, not line noise.
    let mut count = good.clone();
    count[RECORD_COUNT_OFFSET..HEADER_SIZE].copy_from_slice(&3i32.to_le_bytes());
    fix_crc(&mut count);
    check(
        &count,
        Err(KvBatchError::RecordCountMismatch {
            declared: 3,
            found: 2,
        }),
    );
    count[RECORD_COUNT_OFFSET..HEADER_SIZE].copy_from_slice(&(-1i32).to_le_bytes());
    fix_crc(&mut count);
    check(
        &count,
        Err(KvBatchError::NegativeRecordCount { record_count: -1 }),
    );
    let second = HEADER_SIZE + 8;
    let mut record = good.clone();
    record[second..second + 4].copy_from_slice(&3i32.to_le_bytes());
    fix_crc(&mut record);
    check(
        &record,
        Err(KvBatchError::RecordTruncated {
            index: 1,
            offset: second,
            needed: 7,
            available: 6,
        }),
    );
    record[second..second + 4].copy_from_slice(&(-1i32).to_le_bytes());
    fix_crc(&mut record);
    check(
        &record,
        Err(KvBatchError::NegativeRecordLength {
            index: 1,
            offset: second,
            length: -1,
        }),
    );
    // Key length 2 in a record of 2 bytes: the key runs past the record.
    let mut key = good.clone();
    key[second + 4] = 2;
    fix_crc(&mut key);
    check(
        &key,
        Err(KvBatchError::BadKeyLength {
            index: 1,
            offset: second,
        }),
    );
    // An overlong key length (0x81 0x00 for 1).
    let mut builder = KvBatchBuilder::start(Vec::new(), 0, NO_WRITER_ID, NO_BATCH_SEQUENCE);
    builder.append_upsert(&[7], &[8]).expect("fits");
    let mut overlong = builder.finish().to_vec();
    overlong[HEADER_SIZE + 4] = 0x81;
    overlong[HEADER_SIZE + 5] = 0x00;
    fix_crc(&mut overlong);
    check(
        &overlong,
        Err(KvBatchError::BadKeyLength {
            index: 0,
            offset: HEADER_SIZE,
        }),
    );
    // Key length 0: the rest reads as a row of an empty key.
    let mut empty = good.clone();
    empty[HEADER_SIZE + 4] = 0;
    fix_crc(&mut empty);
    check(
        &empty,
        Err(KvBatchError::EmptyKey {
            index: 0,
            offset: HEADER_SIZE,
        }),
    );
    // Trailing bytes inside the batch that are not a record.
    let mut tail = good.clone();
    tail.extend_from_slice(&[1, 0]);
    let length = (tail.len() - KV_OVERHEAD) as i32;
    tail[..4].copy_from_slice(&length.to_le_bytes());
    fix_crc(&mut tail);
    check(
        &tail,
        Err(KvBatchError::RecordTruncated {
            index: 2,
            offset: good.len(),
            needed: 4,
            available: 2,
        }),
    );
}

#[test]
fn builders_refuse_what_the_wire_cannot_say() {
    let mut builder = KvBatchBuilder::start(vec![1, 2, 3], 0, 5, 6);
    assert_eq!(
        builder.append_upsert(&[], &[1]),
        Err(KvBatchError::EmptyKey {
            index: 0,
            offset: HEADER_SIZE
        })
    );
    assert_eq!(
        builder.append_upsert(&[1], &[]),
        Err(KvBatchError::EmptyRow { index: 0 })
    );
    assert_eq!(builder.size_in_bytes(), HEADER_SIZE);
    let empty = builder.finish().to_vec();
    let batch = KvBatch::validate(&empty).expect("an empty batch is valid");
    assert_eq!(
        (
            batch.record_count(),
            batch.writer_id(),
            batch.batch_sequence()
        ),
        (0, 5, 6)
    );
}

#[test]
fn restamping_sets_the_writer_and_keeps_the_crc_valid() {
    let mut batch = two_records();
    restamp_writer(&mut batch, 77, 9).expect("valid batch");
    let stamped = KvBatch::validate(&batch).expect("still valid");
    assert_eq!((stamped.writer_id(), stamped.batch_sequence()), (77, 9));
    assert_eq!(stamped.records().count(), 2);
    let mut corrupt = two_records();
    corrupt[30] ^= 1;
    let before = corrupt.clone();
    assert!(matches!(
        restamp_writer(&mut corrupt, 1, 1),
        Err(KvBatchError::CrcMismatch { .. })
    ));
    assert_eq!(corrupt, before, "a corrupt batch is left alone");
}

#[test]
fn restart_reuses_the_buffer() {
    let mut builder = KvBatchBuilder::start(Vec::with_capacity(256), 1, 2, 3);
    builder.append_upsert(&[1; 40], &[2; 100]).expect("fits");
    builder.finish();
    let capacity = builder.buf.capacity();
    builder.restart(4, 5, 6);
    builder.append_delete(&[9]).expect("fits");
    let batch = builder.finish().to_vec();
    assert_eq!(builder.buf.capacity(), capacity);
    let batch = KvBatch::validate(&batch).expect("valid");
    assert_eq!(
        (batch.schema_id(), batch.writer_id(), batch.record_count()),
        (4, 5, 1)
    );
    assert_eq!(builder.into_buffer().len(), HEADER_SIZE + MIN_RECORD_SIZE);
}

fn arb_records() -> impl Strategy<Value = Vec<(Vec<u8>, Option<Vec<u8>>)>> {
    proptest::collection::vec(
        (
            proptest::collection::vec(any::<u8>(), 1..200),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 1..40)),
        ),
        0..10,
    )
}

fn build(records: &[(Vec<u8>, Option<Vec<u8>>)], writer_id: i64, sequence: i32) -> Vec<u8> {
    let mut builder = KvBatchBuilder::start(Vec::new(), 7, writer_id, sequence);
    let mut expected_size = HEADER_SIZE;
    for (key, row) in records {
        expected_size += record_size(key, row.as_deref());
        match row {
            Some(row) => builder.append_upsert(key, row).expect("fits"),
            None => builder.append_delete(key).expect("fits"),
        }
        assert_eq!(builder.size_in_bytes(), expected_size);
    }
    assert_eq!(builder.record_count(), records.len());
    builder.finish().to_vec()
}

proptest! {
    #[test]
    fn built_batches_round_trip(records in arb_records(), writer in any::<i64>(), seq in any::<i32>()) {
        let bytes = build(&records, writer, seq);
        let batch = KvBatch::validate(&bytes).expect("valid");
        prop_assert_eq!(batch.writer_id(), writer);
        prop_assert_eq!(batch.batch_sequence(), seq);
        prop_assert_eq!(batch.records().len(), records.len());
        for (record, (key, row)) in batch.records().zip(&records) {
            prop_assert_eq!(record.key, &key[..]);
            prop_assert_eq!(record.row, row.as_deref());
        }
    }

    #[test]
    fn any_flipped_bit_after_the_crc_field_is_caught(
        records in arb_records(),
        pick in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut bytes = build(&records, 1, 2);
        let at = SCHEMA_ID_OFFSET + pick.index(bytes.len() - SCHEMA_ID_OFFSET);
        bytes[at] ^= 1 << bit;
        prop_assert!(
            matches!(KvBatch::validate(&bytes), Err(KvBatchError::CrcMismatch { .. })),
            "flip at {}", at
        );
    }

    #[test]
    fn every_truncation_is_refused(records in arb_records(), cut in any::<prop::sample::Index>()) {
        let bytes = build(&records, 1, 2);
        let cut = cut.index(bytes.len());
        prop_assert!(KvBatch::validate(&bytes[..cut]).is_err());
    }

    #[test]
    fn restamping_round_trips(records in arb_records(), writer in any::<i64>(), seq in any::<i32>()) {
        let mut bytes = build(&records, NO_WRITER_ID, NO_BATCH_SEQUENCE);
        restamp_writer(&mut bytes, writer, seq).expect("valid");
        prop_assert_eq!(bytes, build(&records, writer, seq));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        if let Ok(batch) = KvBatch::validate(&bytes) {
            prop_assert_eq!(batch.records().count(), batch.record_count() as usize);
        }
        let mut copy = bytes.clone();
        let _ = restamp_writer(&mut copy, 1, 2);
    }
}
