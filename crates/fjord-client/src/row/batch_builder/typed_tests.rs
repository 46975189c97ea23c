//! Tests of rows written through [`FieldWriter`]'s typed methods: the same
//! columns as their datums, and the same refusals and rollback.

use super::tests::{all_types, all_values_row, builder};
use super::*;
use crate::row::GenericRow;

/// A row type of its own with a field per column of [`all_types`], written
/// with the typed methods; `datum` reads the same values.
struct EveryType<'a> {
    text: &'a str,
    bytes: &'a [u8],
    ts: Timestamp,
}

impl EveryType<'_> {
    const FIELDS: usize = 23;
}

impl InternalRow for EveryType<'_> {
    fn field_count(&self) -> usize {
        Self::FIELDS
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match pos {
            0 => Datum::Boolean(true),
            1 => Datum::TinyInt(-8),
            2 => Datum::SmallInt(-16),
            3 => Datum::Int(-32),
            4 => Datum::BigInt(-64),
            5 => Datum::Float(1.5),
            6 => Datum::Double(-2.25),
            7 => Datum::String("ab"),
            8 => Datum::String(self.text),
            9 => Datum::Binary(self.bytes),
            10 => Datum::Binary(b"xyz"),
            11 => Datum::Decimal(-12_345),
            12 => Datum::Date(19_000),
            13..=16 => Datum::Time(3_723_456),
            17..=20 => Datum::Timestamp(self.ts),
            _ => Datum::TimestampLtz(self.ts),
        }
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.boolean(true);
        fields.tinyint(-8);
        fields.smallint(-16);
        fields.int(-32);
        fields.bigint(-64);
        fields.float(1.5);
        fields.double(-2.25);
        fields.string("ab");
        fields.string(self.text);
        fields.binary(self.bytes);
        fields.binary(b"xyz");
        fields.decimal(-12_345);
        fields.date(19_000);
        for _ in 0..4 {
            fields.time(3_723_456);
        }
        for _ in 0..4 {
            fields.timestamp(self.ts);
        }
        fields.timestamp_ltz(self.ts);
        fields.timestamp_ltz(self.ts);
    }
}

/// Two INT columns, the second NOT NULL; `write_fields` writes `fields`.
struct Written(Vec<Option<i64>>);

impl InternalRow for Written {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match self.0.get(pos).copied().flatten() {
            Some(v) => Datum::BigInt(v),
            None => Datum::Null,
        }
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        for field in &self.0 {
            match *field {
                Some(v) => fields.bigint(v),
                None => fields.null(),
            }
        }
    }
}

fn two_bigints() -> RowBatchBuilder {
    builder(&[
        ("a", fjord_format::types::DataType::bigint()),
        ("b", fjord_format::types::DataType::bigint().not_null()),
    ])
}

fn column_values(batch: &RecordBatch, column: usize) -> Vec<Option<i64>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    batch
        .column(column)
        .as_primitive::<Int64Type>()
        .iter()
        .collect()
}

#[test]
fn typed_fields_land_in_the_same_columns_as_their_datums() {
    let text = String::from("héllo");
    let bytes = vec![0u8, 255, 7];
    let row = EveryType {
        text: &text,
        bytes: &bytes,
        ts: Timestamp::new(1_700_000_000_123, 456_789).unwrap(),
    };
    assert_eq!(all_types().len(), EveryType::FIELDS);
    let datums: Vec<Datum<'_>> = (0..EveryType::FIELDS).map(|pos| row.datum(pos)).collect();

    let mut typed = builder(&all_types());
    let mut by_datum = builder(&all_types());
    for _ in 0..3 {
        typed.append(&row).unwrap();
        by_datum.append(&datums[..]).unwrap();
    }
    assert_eq!(typed.estimated_bytes(), by_datum.estimated_bytes());
    assert_eq!(typed.finish().unwrap(), by_datum.finish().unwrap());
}

#[test]
fn a_refused_typed_field_rolls_back_the_whole_row_and_names_its_column() {
    let mut builder = two_bigints();
    builder.append(&Written(vec![Some(1), Some(10)])).unwrap();
    // NULL into the NOT NULL second column, after the first was written.
    let message = builder
        .append(&Written(vec![Some(2), None]))
        .unwrap_err()
        .to_string();
    assert!(message.contains("column `b`"), "{message}");
    assert!(message.contains("NOT NULL"), "{message}");
    // A mismatch in the first column: the second is written, then rolled back.
    let mut wrong = two_bigints();
    let refused = wrong.append(&WrongFirst).unwrap_err().to_string();
    assert!(refused.contains("column `a`"), "{refused}");
    assert!(refused.contains("cannot take a INT value"), "{refused}");
    assert!(wrong.is_empty());
    assert_eq!(wrong.estimated_bytes(), 0);
    wrong.append(&Written(vec![Some(5), Some(6)])).unwrap();
    let batch = wrong.finish().unwrap();
    assert_eq!(column_values(&batch, 0), [Some(5)]);
    assert_eq!(column_values(&batch, 1), [Some(6)]);

    builder.append(&Written(vec![None, Some(30)])).unwrap();
    assert_eq!(builder.len(), 2);
    let batch = builder.finish().unwrap();
    assert_eq!(column_values(&batch, 0), [Some(1), None]);
    assert_eq!(column_values(&batch, 1), [Some(10), Some(30)]);
}

/// Writes an INT where the first column is BIGINT, then a good second field.
struct WrongFirst;

impl InternalRow for WrongFirst {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        [Datum::Int(1), Datum::BigInt(2)][pos]
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.int(1);
        fields.bigint(2);
    }
}

#[test]
fn a_typed_row_writing_too_few_or_too_many_fields_is_refused_whole() {
    let mut builder = two_bigints();
    for (fields, wrote) in [
        (vec![Some(1)], "wrote 1 fields"),
        (vec![Some(1), Some(2), Some(3)], "wrote 3 fields"),
    ] {
        let message = builder.append(&Written(fields)).unwrap_err().to_string();
        assert!(message.contains(wrote), "{message}");
        assert!(message.contains("2 columns"), "{message}");
        assert!(builder.is_empty());
    }
    builder.append(&Written(vec![Some(7), Some(8)])).unwrap();
    let batch = builder.finish().unwrap();
    assert_eq!(column_values(&batch, 0), [Some(7)]);
    assert_eq!(column_values(&batch, 1), [Some(8)]);
}

/// Writes its first field, then panics: a row type's bug part way through
/// a row (`datum` panics the same way for the run path).
struct PanicsAfterFirst;

impl InternalRow for PanicsAfterFirst {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        match pos {
            0 => Datum::BigInt(99),
            _ => panic!("a row type's bug"),
        }
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(99);
        panic!("a row type's bug");
    }
}

#[test]
fn a_row_type_that_panics_part_way_leaves_no_torn_row_behind() {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let mut builder = two_bigints();
    builder.append(&Written(vec![Some(1), Some(10)])).unwrap();
    // One row at a time, what the panic leaves is dropped by
    // `drop_partial_row`, which the writer's lock guard calls as the
    // panic unwinds (tests/writer_typed_rows.rs shows it through the writer).
    let panicked = catch_unwind(AssertUnwindSafe(|| builder.append(&PanicsAfterFirst)));
    assert!(panicked.is_err());
    builder.drop_partial_row();
    // A run rolls itself back: its first column is written for every row
    // before the second column's `datum` panics.
    let run = [Written(vec![Some(5), Some(50)])];
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        builder.append_rows(&run).unwrap();
        builder.append_rows(&[PanicsAfterFirst, PanicsAfterFirst])
    }));
    assert!(panicked.is_err());
    builder.append(&Written(vec![Some(2), Some(20)])).unwrap();

    assert_eq!(builder.len(), 3);
    let batch = builder.finish().unwrap();
    assert_eq!(column_values(&batch, 0), [Some(1), Some(5), Some(2)]);
    assert_eq!(column_values(&batch, 1), [Some(10), Some(50), Some(20)]);
}

/// Datums read one by one through `datum(pos)` only: the default
/// `write_fields`, which the rows that hold datums override.
struct ByDatum<'r, 'a>(&'r [Datum<'a>]);

impl InternalRow for ByDatum<'_, '_> {
    fn field_count(&self) -> usize {
        self.0.len()
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        self.0[pos]
    }
}

#[test]
fn rows_holding_datums_write_what_their_datums_read() {
    let text = String::from("héllo");
    let bytes = vec![0u8, 255, 7];
    let values = all_values_row(&text, &bytes);
    let nulls = vec![Datum::Null; values.len()];
    let array: [Datum<'_>; 23] = values.clone().try_into().unwrap();
    let generic = GenericRow::from_values(values.clone());

    let mut expected = builder(&all_types());
    for row in [&values, &nulls] {
        expected.append(&ByDatum(row)).unwrap();
    }
    let expected = expected.finish().unwrap();

    let mut each = [
        builder(&all_types()),
        builder(&all_types()),
        builder(&all_types()),
        builder(&all_types()),
        builder(&all_types()),
    ];
    let nulls_generic = GenericRow::from_values(nulls.clone());
    each[0].append(&array).unwrap();
    each[1].append(&values[..]).unwrap();
    each[2].append(&values).unwrap();
    each[3].append(&generic).unwrap();
    each[4].append(&&generic).unwrap();
    each[0].append(&[Datum::Null; 23]).unwrap();
    each[1].append(&nulls[..]).unwrap();
    each[2].append(&nulls).unwrap();
    each[3].append(&nulls_generic).unwrap();
    each[4].append(&&nulls_generic).unwrap();
    for (i, builder) in each.iter_mut().enumerate() {
        assert_eq!(builder.finish().unwrap(), expected, "holder {i}");
    }
}

#[test]
fn rows_holding_datums_refuse_a_wrong_datum_as_reading_them_one_by_one_does() {
    let text = String::from("x");
    let bytes = vec![1u8];
    let mut values = all_values_row(&text, &bytes);
    values[12] = Datum::Int(5);
    let mut by_datum = builder(&all_types());
    let expected = by_datum.append(&ByDatum(&values)).unwrap_err().to_string();
    let mut held = builder(&all_types());
    let error = held.append(&values[..]).unwrap_err().to_string();
    assert_eq!(error, expected);
    assert!(error.contains("date"), "{error}");
    assert!(held.is_empty());
}

/// A row whose `write_fields` writes other values than its `datum` reads
/// (which the trait forbids), to tell which of the two a writer used.
struct WritesOther;

impl InternalRow for WritesOther {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, _pos: usize) -> Datum<'_> {
        Datum::BigInt(1)
    }

    fn write_fields(&self, fields: &mut FieldWriter<'_>) {
        fields.bigint(2);
        fields.bigint(2);
    }
}

#[test]
fn a_reference_to_a_row_writes_as_the_row_does() {
    let mut builder = two_bigints();
    builder.append(&WritesOther).unwrap();
    builder.append(&&WritesOther).unwrap();
    builder.append(&&&WritesOther).unwrap();
    let batch = builder.finish().unwrap();
    assert_eq!(column_values(&batch, 0), vec![Some(2); 3]);
}
