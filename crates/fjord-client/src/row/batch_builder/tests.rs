//! Tests of [`RowBatchBuilder`]: every scalar type, refusals, rollback and reuse.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::Array;
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::schema::Schema;
use fjord_format::types::DataType;

use super::*;
use crate::row::GenericRow;

pub(super) fn builder(columns: &[(&str, DataType)]) -> RowBatchBuilder {
    let mut schema = Schema::builder();
    for (name, data_type) in columns {
        schema = schema.column(*name, data_type.clone());
    }
    RowBatchBuilder::new(to_arrow_schema(&schema.build().unwrap())).unwrap()
}

fn builder_of_one_int() -> RowBatchBuilder {
    builder(&[("n", DataType::int())])
}

fn error_of(builder: &mut RowBatchBuilder, row: &[Datum<'_>]) -> String {
    builder.append(row).unwrap_err().to_string()
}

pub(super) fn all_types() -> Vec<(&'static str, DataType)> {
    vec![
        ("b", DataType::boolean()),
        ("i8", DataType::tinyint()),
        ("i16", DataType::smallint()),
        ("i32", DataType::int()),
        ("i64", DataType::bigint()),
        ("f32", DataType::float()),
        ("f64", DataType::double()),
        ("c", DataType::char(2).unwrap()),
        ("s", DataType::string()),
        ("bytes", DataType::bytes()),
        ("bin", DataType::binary(3).unwrap()),
        ("dec", DataType::decimal(10, 2).unwrap()),
        ("date", DataType::date()),
        ("t0", DataType::time(0).unwrap()),
        ("t3", DataType::time(3).unwrap()),
        ("t6", DataType::time(6).unwrap()),
        ("t9", DataType::time(9).unwrap()),
        ("ts0", DataType::timestamp(0).unwrap()),
        ("ts3", DataType::timestamp(3).unwrap()),
        ("ts6", DataType::timestamp(6).unwrap()),
        ("ts9", DataType::timestamp(9).unwrap()),
        ("ltz3", DataType::timestamp_ltz(3).unwrap()),
        ("ltz9", DataType::timestamp_ltz(9).unwrap()),
    ]
}

pub(super) fn all_values_row<'a>(text: &'a str, bytes: &'a [u8]) -> Vec<Datum<'a>> {
    let ts = Timestamp::new(1_700_000_000_123, 456_789).unwrap();
    vec![
        Datum::Boolean(true),
        Datum::TinyInt(-8),
        Datum::SmallInt(-16),
        Datum::Int(-32),
        Datum::BigInt(-64),
        Datum::Float(1.5),
        Datum::Double(-2.25),
        Datum::String("ab"),
        Datum::String(text),
        Datum::Binary(bytes),
        Datum::Binary(b"xyz"),
        Datum::Decimal(-12_345),
        Datum::Date(19_000),
        Datum::Time(3_723_456),
        Datum::Time(3_723_456),
        Datum::Time(3_723_456),
        Datum::Time(3_723_456),
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::Timestamp(ts),
        Datum::TimestampLtz(ts),
        Datum::TimestampLtz(ts),
    ]
}

#[test]
fn every_scalar_type_lands_in_its_arrow_column() {
    let mut builder = builder(&all_types());
    let text = String::from("héllo");
    let bytes = vec![0u8, 255, 7];
    builder.append(&all_values_row(&text, &bytes)[..]).unwrap();
    let nulls = GenericRow::nulls(all_types().len());
    builder.append(&nulls).unwrap();
    let batch = builder.finish().unwrap();

    assert_eq!(batch.schema(), *builder.schema());
    assert_eq!(batch.num_rows(), 2);
    for column in batch.columns() {
        assert!(column.is_valid(0));
        assert!(column.is_null(1));
    }
    let c = |name: &str| batch.column_by_name(name).unwrap().clone();
    assert!(c("b").as_boolean().value(0));
    assert_eq!(c("i8").as_primitive::<Int8Type>().value(0), -8);
    assert_eq!(c("i16").as_primitive::<Int16Type>().value(0), -16);
    assert_eq!(c("i32").as_primitive::<Int32Type>().value(0), -32);
    assert_eq!(c("i64").as_primitive::<Int64Type>().value(0), -64);
    assert_eq!(c("f32").as_primitive::<Float32Type>().value(0), 1.5);
    assert_eq!(c("f64").as_primitive::<Float64Type>().value(0), -2.25);
    assert_eq!(c("c").as_string::<i32>().value(0), "ab");
    assert_eq!(c("s").as_string::<i32>().value(0), "héllo");
    assert_eq!(c("bytes").as_binary::<i32>().value(0), &[0, 255, 7]);
    assert_eq!(c("bin").as_fixed_size_binary().value(0), b"xyz");
    let dec = c("dec");
    assert_eq!(dec.as_primitive::<Decimal128Type>().value(0), -12_345);
    assert_eq!(dec.data_type(), &ArrowType::Decimal128(10, 2));
    assert_eq!(c("date").as_primitive::<Date32Type>().value(0), 19_000);
    assert_eq!(c("t0").as_primitive::<Time32SecondType>().value(0), 3_723);
    assert_eq!(
        c("t3").as_primitive::<Time32MillisecondType>().value(0),
        3_723_456
    );
    assert_eq!(
        c("t6").as_primitive::<Time64MicrosecondType>().value(0),
        3_723_456_000
    );
    assert_eq!(
        c("t9").as_primitive::<Time64NanosecondType>().value(0),
        3_723_456_000_000
    );
    let millis = 1_700_000_000_123i64;
    assert_eq!(
        c("ts0").as_primitive::<TimestampSecondType>().value(0),
        millis / 1_000
    );
    assert_eq!(
        c("ts3").as_primitive::<TimestampMillisecondType>().value(0),
        millis
    );
    assert_eq!(
        c("ts6").as_primitive::<TimestampMicrosecondType>().value(0),
        millis * 1_000 + 456
    );
    assert_eq!(
        c("ts9").as_primitive::<TimestampNanosecondType>().value(0),
        millis * 1_000_000 + 456_789
    );
    assert_eq!(
        c("ltz3")
            .as_primitive::<TimestampMillisecondType>()
            .value(0),
        millis
    );
    assert_eq!(
        c("ltz9").as_primitive::<TimestampNanosecondType>().value(0),
        millis * 1_000_000 + 456_789
    );
}

#[test]
fn coarser_timestamp_units_truncate_towards_zero_like_fluss_writers() {
    let mut builder = builder(&[
        ("s", DataType::timestamp(0).unwrap()),
        ("us", DataType::timestamp(6).unwrap()),
    ]);
    let t = Timestamp::new(-1_500, 999_999).unwrap();
    builder
        .append(&[Datum::Timestamp(t), Datum::Timestamp(t)][..])
        .unwrap();
    let batch = builder.finish().unwrap();
    assert_eq!(
        batch
            .column(0)
            .as_primitive::<TimestampSecondType>()
            .value(0),
        -1
    );
    assert_eq!(
        batch
            .column(1)
            .as_primitive::<TimestampMicrosecondType>()
            .value(0),
        -1_500_000 + 999
    );
}

#[test]
fn wrong_datum_type_is_refused_naming_column_and_types() {
    let mut builder = builder(&[
        ("id", DataType::bigint()),
        ("ts", DataType::timestamp(3).unwrap()),
    ]);
    let message = error_of(&mut builder, &[Datum::Int(1), Datum::Null]);
    assert!(message.contains("`id`"), "{message}");
    assert!(message.contains("INT value"), "{message}");
    assert!(message.contains("Datum::BigInt"), "{message}");
    let ltz = Datum::TimestampLtz(Timestamp::from_millis(0));
    let message = error_of(&mut builder, &[Datum::BigInt(1), ltz]);
    assert!(message.contains("`ts`"), "{message}");
    assert!(message.contains("TIMESTAMP_LTZ value"), "{message}");
    assert!(message.contains("expects Datum::Timestamp"), "{message}");
    assert!(builder.is_empty());
}

#[test]
fn null_into_not_null_column_is_refused() {
    let mut builder = builder(&[
        ("id", DataType::bigint().not_null()),
        ("name", DataType::string()),
    ]);
    builder
        .append(&[Datum::BigInt(1), Datum::Null][..])
        .unwrap();
    let message = error_of(&mut builder, &[Datum::Null, Datum::String("x")]);
    assert!(message.contains("`id`"), "{message}");
    assert!(message.contains("NOT NULL"), "{message}");
    let batch = builder.finish().unwrap();
    assert_eq!(batch.num_rows(), 1);
    assert_eq!(batch.column(0).null_count(), 0);
}

#[test]
fn field_count_differing_from_the_schema_is_refused() {
    let mut builder = builder(&[("a", DataType::int()), ("b", DataType::int())]);
    let message = error_of(&mut builder, &[Datum::Int(1)]);
    assert!(message.contains("1 fields"), "{message}");
    assert!(message.contains("2 columns"), "{message}");
}

#[test]
fn values_that_do_not_fit_their_column_are_refused() {
    let cases: Vec<(DataType, Datum<'static>, &str)> = vec![
        (
            DataType::decimal(3, 1).unwrap(),
            Datum::Decimal(1_000),
            "precision",
        ),
        (
            DataType::decimal(3, 1).unwrap(),
            Datum::Decimal(-1_000),
            "precision",
        ),
        (
            DataType::binary(4).unwrap(),
            Datum::Binary(b"abc"),
            "BINARY(n)",
        ),
        (
            DataType::time(3).unwrap(),
            Datum::Time(86_400_000),
            "milliseconds of the day",
        ),
        (
            DataType::time(3).unwrap(),
            Datum::Time(-1),
            "milliseconds of the day",
        ),
        (
            DataType::timestamp(9).unwrap(),
            Datum::Timestamp(Timestamp::from_millis(i64::MAX / 1_000)),
            "overflows",
        ),
    ];
    for (data_type, datum, expected) in cases {
        let mut builder = builder(&[("v", data_type.clone())]);
        let message = error_of(&mut builder, &[datum]);
        assert!(message.contains(expected), "{data_type}: {message}");
        assert!(message.contains("`v`"), "{data_type}: {message}");
    }
    // The largest values that do fit.
    let mut builder = builder(&[("v", DataType::decimal(3, 1).unwrap())]);
    builder.append(&[Datum::Decimal(999)][..]).unwrap();
    builder.append(&[Datum::Decimal(-999)][..]).unwrap();
}

#[test]
fn a_refused_row_leaves_no_partial_values_behind() {
    let mut builder = builder(&[
        ("name", DataType::string()),
        ("flag", DataType::boolean()),
        ("blob", DataType::bytes()),
        ("n", DataType::int().not_null()),
    ]);
    builder
        .append(
            &[
                Datum::String("first"),
                Datum::Boolean(true),
                Datum::Binary(b"1"),
                Datum::Int(1),
            ][..],
        )
        .unwrap();
    let bytes_before = builder.estimated_bytes();
    // The last column refuses, after three columns took their values.
    error_of(
        &mut builder,
        &[
            Datum::String("lost"),
            Datum::Null,
            Datum::Binary(b"lost"),
            Datum::Null,
        ],
    );
    assert_eq!(builder.len(), 1);
    assert_eq!(builder.estimated_bytes(), bytes_before);
    builder
        .append(
            &[
                Datum::String("second"),
                Datum::Boolean(false),
                Datum::Null,
                Datum::Int(2),
            ][..],
        )
        .unwrap();
    let batch = builder.finish().unwrap();
    let names = batch.column(0).as_string::<i32>();
    assert_eq!(
        names.iter().collect::<Vec<_>>(),
        [Some("first"), Some("second")]
    );
    let flags = batch.column(1).as_boolean();
    assert_eq!(flags.iter().collect::<Vec<_>>(), [Some(true), Some(false)]);
    let blobs = batch.column(2).as_binary::<i32>();
    assert_eq!(blobs.iter().collect::<Vec<_>>(), [Some(&b"1"[..]), None]);
    let n = batch.column(3).as_primitive::<Int32Type>();
    assert_eq!(n.values(), &[1, 2]);
}

#[test]
fn strings_of_every_short_length_are_copied_exactly() {
    let text = "abcdefghijklmnopqrstu";
    let mut builder = builder(&[("s", DataType::string()), ("b", DataType::bytes())]);
    for n in 0..=text.len() {
        let bytes = &text.as_bytes()[text.len() - n..];
        builder
            .append(&[Datum::String(&text[..n]), Datum::Binary(bytes)][..])
            .unwrap();
    }
    let batch = builder.finish().unwrap();
    let strings = batch.column(0).as_string::<i32>();
    let blobs = batch.column(1).as_binary::<i32>();
    for n in 0..=text.len() {
        assert_eq!(strings.value(n), &text[..n]);
        assert_eq!(blobs.value(n), &text.as_bytes()[text.len() - n..]);
    }
}

#[test]
fn builder_is_reused_across_batches_with_independent_contents() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    for i in 0..100 {
        builder
            .append(&[Datum::BigInt(i), Datum::String("abcd")][..])
            .unwrap();
    }
    let first = builder.finish().unwrap();
    assert!(builder.is_empty());
    assert_eq!(builder.estimated_bytes(), 0);
    builder
        .append(&[Datum::BigInt(-1), Datum::Null][..])
        .unwrap();
    let second = builder.finish().unwrap();
    assert_eq!(first.num_rows(), 100);
    assert_eq!(first.column(0).as_primitive::<Int64Type>().value(99), 99);
    assert_eq!(first.column(1).as_string::<i32>().value(99), "abcd");
    assert_eq!(second.num_rows(), 1);
    assert_eq!(second.column(0).as_primitive::<Int64Type>().value(0), -1);
    assert!(second.column(1).is_null(0));
    let empty = builder.finish().unwrap();
    assert_eq!(empty.num_rows(), 0);
    assert_eq!(empty.schema(), first.schema());
}

#[test]
fn estimated_bytes_counts_values_offsets_data_and_bitmaps() {
    let mut builder = builder(&[
        ("id", DataType::bigint().not_null()),
        ("s", DataType::string()),
    ]);
    builder
        .append(&[Datum::BigInt(1), Datum::String("abc")][..])
        .unwrap();
    // 8 (BIGINT) + 4 (offset) + 3 (text) + one bit of validity for `s`.
    assert_eq!(builder.estimated_bytes(), 8 + 4 + 3 + 1);
    for _ in 0..15 {
        builder
            .append(&[Datum::BigInt(1), Datum::String("abc")][..])
            .unwrap();
    }
    assert_eq!(builder.estimated_bytes(), 16 * 15 + 2);
}

#[test]
fn nested_columns_are_refused_when_the_builder_is_made() {
    let schema = fjord_format::fixtures::nested_schema();
    let Err(error) = RowBatchBuilder::new(to_arrow_schema(&schema)) else {
        panic!("nested schema accepted")
    };
    assert!(
        error.to_string().contains("append a RecordBatch"),
        "{error}"
    );
}

#[test]
fn user_behavior_rows_match_the_fixture_schema() {
    let schema = to_arrow_schema(&fjord_format::fixtures::user_behavior_schema());
    let mut builder = RowBatchBuilder::new(schema.clone()).unwrap();
    let mut row = GenericRow::with_capacity(5);
    for (i, behavior) in ["pv", "cart", "fav", "buy"].into_iter().enumerate() {
        row.clear();
        row.push(i as i64);
        row.push(10 + i as i64);
        row.push(100 + i as i64);
        row.push(behavior);
        row.push(Datum::Timestamp(Timestamp::from_millis(1_511_544_070_000)));
        builder.append(&row).unwrap();
    }
    let batch = builder.finish().unwrap();
    assert_eq!(batch.schema(), schema);
    assert_eq!(batch.num_rows(), 4);
    assert_eq!(batch.column(3).as_string::<i32>().value(1), "cart");
}

#[test]
fn recycled_batches_lend_their_buffers_to_the_next_batches() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let fill = |builder: &mut RowBatchBuilder, base: i64| {
        for i in 0..1_000 {
            builder
                .append(&[Datum::BigInt(base + i), Datum::String("abcdefgh")][..])
                .unwrap();
        }
        builder.finish().unwrap()
    };
    let first = fill(&mut builder, 0);
    let ids = first.column(0).to_data().buffers()[0].as_ptr();
    let text = first.column(1).to_data().buffers()[1].as_ptr();
    // A batch still held elsewhere is not taken.
    let held = first.clone();
    assert_eq!(builder.recycle(first), 0);
    // Once it is the only holder, its value, offset and text buffers are.
    assert_eq!(builder.recycle(held), 3);
    // The batch after the next finish writes into the recycled memory.
    let second = fill(&mut builder, 1_000);
    let third = fill(&mut builder, 2_000);
    let reused = |batch: &RecordBatch| {
        (
            batch.column(0).to_data().buffers()[0].as_ptr(),
            batch.column(1).to_data().buffers()[1].as_ptr(),
        )
    };
    assert!(reused(&second) == (ids, text) || reused(&third) == (ids, text));
    assert_eq!(
        third.column(0).as_primitive::<Int64Type>().value(999),
        2_999
    );
    assert_eq!(third.column(1).as_string::<i32>().value(999), "abcdefgh");
    // A batch of another schema is ignored.
    let mut other = builder_of_one_int();
    assert_eq!(other.recycle(third), 0);
}

#[test]
fn memory_stays_sized_for_the_last_batch_until_released() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    for _ in 0..10_000 {
        builder
            .append(&[Datum::BigInt(1), Datum::String("abcdefgh")][..])
            .unwrap();
    }
    let filled = builder.estimated_bytes();
    assert!(builder.allocated_bytes() >= filled);
    builder.finish().unwrap();
    // Room for a batch like the last one is kept...
    assert!(builder.allocated_bytes() >= 10_000 * (8 + 4 + 8));
    // ...until the memory is released; a non-empty builder keeps it.
    builder
        .append(&[Datum::BigInt(1), Datum::Null][..])
        .unwrap();
    assert!(!builder.release_memory());
    builder.finish().unwrap();
    assert!(builder.release_memory());
    assert!(
        builder.allocated_bytes() < 1_024,
        "{}",
        builder.allocated_bytes()
    );
    builder
        .append(&[Datum::BigInt(2), Datum::String("after")][..])
        .unwrap();
    let batch = builder.finish().unwrap();
    assert_eq!(batch.column(1).as_string::<i32>().value(0), "after");
}

/// Appends `n` rows `(base + i, "s<i>")` and finishes them, releasing the
/// builder's memory as the writer does.
fn released_batch(builder: &mut RowBatchBuilder, base: i64, n: i64) -> RecordBatch {
    for i in 0..n {
        let text = format!("s{i}");
        builder
            .append(&[Datum::BigInt(base + i), Datum::String(&text)][..])
            .unwrap();
    }
    builder.finish_and_release().unwrap()
}

fn ids_and_texts(batch: &RecordBatch) -> Vec<(i64, String)> {
    let ids = batch.column(0).as_primitive::<Int64Type>();
    let texts = batch.column(1).as_string::<i32>();
    (0..batch.num_rows())
        .map(|i| (ids.value(i), texts.value(i).to_owned()))
        .collect()
}

#[test]
fn a_released_builder_keeps_no_memory_and_prepare_sizes_it_for_the_last_batch() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let batch = released_batch(&mut builder, 0, 10_000);
    assert_eq!(batch.num_rows(), 10_000);
    assert!(
        builder.allocated_bytes() < 1_024,
        "{}",
        builder.allocated_bytes()
    );
    builder.prepare(None, 0);
    // Ids (8 bytes), offsets (4) and at least 2 bytes of text per row.
    assert!(builder.allocated_bytes() >= 10_000 * (8 + 4 + 2));
    let next = released_batch(&mut builder, 100, 2);
    assert_eq!(
        ids_and_texts(&next),
        vec![(100, "s0".to_owned()), (101, "s1".to_owned())]
    );
}

#[test]
fn prepare_makes_room_for_the_expected_batch_in_the_last_batchs_shape() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let small = released_batch(&mut builder, 0, 100);
    let row_bytes = builder.last_bytes / 100;
    // A batch expected 50 times larger than the last one, in recycled
    // memory too small for it: the buffers grow once, here, not per row.
    builder.prepare(Some(small), 5_000 * row_bytes);
    let room = builder.allocated_bytes();
    assert!(room >= 5_000 * row_bytes, "{room} < {}", 5_000 * row_bytes);
    for i in 0..5_000 {
        builder
            .append(&[Datum::BigInt(i), Datum::String("s00")][..])
            .unwrap();
    }
    assert_eq!(builder.allocated_bytes(), room, "no row reallocated");
    assert_eq!(builder.finish_and_release().unwrap().num_rows(), 5_000);
}

#[test]
fn a_recycled_buffer_too_small_is_replaced_with_room_for_the_next_growing_batches() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let ids_of = |batch: &RecordBatch| batch.column(0).to_data().buffers()[0].as_ptr();
    let first = released_batch(&mut builder, 0, 1_000);
    let row_bytes = builder.last_batch_bytes() / 1_000;
    // The next batch is expected a tenth larger than the recycled one's
    // memory: the buffers are replaced, once, before its rows.
    builder.prepare(Some(first), 1_100 * row_bytes);
    let second = released_batch(&mut builder, 0, 1_100);
    // Another tenth: the replacement's growth allowance holds it, so the
    // batch after writes into the same memory again.
    let second_ids = ids_of(&second);
    builder.prepare(Some(second), 1_210 * row_bytes);
    let room = builder.allocated_bytes();
    let third = released_batch(&mut builder, 5_000, 1_210);
    assert_eq!(
        ids_of(&third),
        second_ids,
        "the third batch took new memory"
    );
    assert!(builder.allocated_bytes() <= room);
    assert_eq!(ids_and_texts(&third)[1_209], (6_209, "s1209".to_owned()));
}

#[test]
fn a_batch_written_into_recycled_buffers_holds_exactly_its_own_rows() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let first = released_batch(&mut builder, 0, 1_000);
    let ids = first.column(0).to_data().buffers()[0].as_ptr();
    let text = first.column(1).to_data().buffers()[1].as_ptr();
    builder.prepare(Some(first), 0);
    let second = released_batch(&mut builder, 5_000, 3);
    // The memory is the first batch's, the rows only the second's.
    assert_eq!(second.column(0).to_data().buffers()[0].as_ptr(), ids);
    assert_eq!(second.column(1).to_data().buffers()[1].as_ptr(), text);
    assert_eq!(
        ids_and_texts(&second),
        vec![
            (5_000, "s0".to_owned()),
            (5_001, "s1".to_owned()),
            (5_002, "s2".to_owned())
        ]
    );
}

#[test]
fn a_recycled_builder_after_a_failed_row_holds_only_the_rows_that_went_in() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let first = released_batch(&mut builder, 0, 1_000);
    builder.prepare(Some(first), 0);
    builder
        .append(&[Datum::BigInt(7), Datum::String("kept")][..])
        .unwrap();
    // Fails at the second column, after the first took its value.
    assert!(builder
        .append(&[Datum::BigInt(8), Datum::Int(1)][..])
        .is_err());
    builder
        .append(&[Datum::BigInt(9), Datum::String("too")][..])
        .unwrap();
    let batch = builder.finish_and_release().unwrap();
    assert_eq!(
        ids_and_texts(&batch),
        vec![(7, "kept".to_owned()), (9, "too".to_owned())]
    );
    // A failed first row leaves the prepared builder empty and usable.
    builder.prepare(Some(batch), 0);
    assert!(builder.append(&[Datum::Null, Datum::Int(1)][..]).is_err());
    assert!(builder.is_empty());
    let after = released_batch(&mut builder, 20, 1);
    assert_eq!(ids_and_texts(&after), vec![(20, "s0".to_owned())]);
}

#[test]
fn a_batch_still_held_elsewhere_lends_nothing() {
    let mut builder = builder(&[("id", DataType::bigint()), ("s", DataType::string())]);
    let first = released_batch(&mut builder, 0, 1_000);
    let held = first.clone();
    builder.prepare(Some(first), 0);
    let second = released_batch(&mut builder, 1_000, 1);
    assert_ne!(
        second.column(0).to_data().buffers()[0].as_ptr(),
        held.column(0).to_data().buffers()[0].as_ptr()
    );
    // The holder's rows are untouched, all of them (the second batch's
    // one row would have overwritten row 0 had the buffers been lent).
    let expected: Vec<(i64, String)> = (0..1_000).map(|i| (i, format!("s{i}"))).collect();
    assert_eq!(ids_and_texts(&held), expected);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// One generated row of (BIGINT, STRING, BYTES NOT NULL, BOOLEAN, DOUBLE),
    /// and, if `spoil` is set, the column whose datum is replaced by a wrong one.
    type Row = (
        Option<i64>,
        Option<String>,
        Vec<u8>,
        Option<bool>,
        Option<f64>,
    );

    fn row_strategy() -> impl Strategy<Value = (Row, Option<usize>)> {
        (
            (
                any::<Option<i64>>(),
                proptest::option::of(".{0,12}"),
                proptest::collection::vec(any::<u8>(), 0..10),
                any::<Option<bool>>(),
                any::<Option<f64>>().prop_filter("NaN is not equal to itself", |v| {
                    v.is_none_or(|v| !v.is_nan())
                }),
            ),
            proptest::option::weighted(0.3, 0usize..5),
        )
    }

    fn datums(row: &Row) -> [Datum<'_>; 5] {
        [
            row.0.into(),
            row.1.as_deref().into(),
            Datum::Binary(&row.2),
            row.3.into(),
            row.4.into(),
        ]
    }

    proptest! {
        /// Whatever mix of valid and refused rows is appended, the batch holds
        /// exactly the valid rows, in order, value for value.
        #[test]
        fn batch_holds_exactly_the_accepted_rows(rows in proptest::collection::vec(row_strategy(), 0..60)) {
            let mut builder = builder(&[
                ("id", DataType::bigint()),
                ("s", DataType::string()),
                ("b", DataType::bytes().not_null()),
                ("f", DataType::boolean()),
                ("d", DataType::double()),
            ]);
            let mut accepted = Vec::new();
            for (row, spoil) in &rows {
                let mut fields = datums(row);
                if let Some(column) = spoil {
                    // A Date fits no column of this schema.
                    fields[*column] = Datum::Date(1);
                    prop_assert!(builder.append(&fields[..]).is_err());
                } else {
                    builder.append(&fields[..]).unwrap();
                    accepted.push(row.clone());
                }
            }
            prop_assert_eq!(builder.len(), accepted.len());
            let batch = builder.finish().unwrap();
            prop_assert_eq!(batch.num_rows(), accepted.len());
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let texts = batch.column(1).as_string::<i32>();
            let bytes = batch.column(2).as_binary::<i32>();
            let flags = batch.column(3).as_boolean();
            let doubles = batch.column(4).as_primitive::<Float64Type>();
            for (i, row) in accepted.iter().enumerate() {
                prop_assert_eq!(ids.is_valid(i).then(|| ids.value(i)), row.0);
                prop_assert_eq!(texts.is_valid(i).then(|| texts.value(i)), row.1.as_deref());
                prop_assert_eq!(bytes.value(i), &row.2[..]);
                prop_assert_eq!(flags.is_valid(i).then(|| flags.value(i)), row.3);
                prop_assert_eq!(doubles.is_valid(i).then(|| doubles.value(i)), row.4);
            }
        }
    }
}

#[test]
fn validity_marks_exactly_the_null_rows_around_a_refused_row_and_across_batches() {
    let mut builder = builder(&[("s", DataType::string()), ("n", DataType::int().not_null())]);
    builder
        .append(&[Datum::String("a"), Datum::Int(1)][..])
        .unwrap();
    builder.append(&[Datum::Null, Datum::Int(2)][..]).unwrap();
    // Its NULL goes into the validity before the NOT NULL column refuses:
    // the rollback must take it out again.
    assert!(builder.append(&[Datum::Null, Datum::Null][..]).is_err());
    builder
        .append(&[Datum::String("c"), Datum::Int(3)][..])
        .unwrap();
    builder
        .append(&[Datum::String("d"), Datum::Int(4)][..])
        .unwrap();
    let batch = builder.finish().unwrap();
    let texts = batch.column(0).as_string::<i32>();
    assert_eq!(
        texts.iter().collect::<Vec<_>>(),
        [Some("a"), None, Some("c"), Some("d")]
    );
    assert!(
        batch.column(1).nulls().is_none(),
        "NOT NULL column has no bitmap"
    );
    // The next batch starts its validity over: no NULL, no bitmap.
    builder
        .append(&[Datum::String("e"), Datum::Int(5)][..])
        .unwrap();
    let batch = builder.finish().unwrap();
    assert!(batch.column(0).nulls().is_none());
    assert_eq!(batch.column(0).len(), 1);
}
