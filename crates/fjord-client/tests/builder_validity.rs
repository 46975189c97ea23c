//! Checks of [`RowBatchBuilder`]'s lazy validity and recycled
//! buffers: batch after batch, whatever mix of NULLs, refused rows and
//! recycled memory, each finished batch holds exactly the rows that went in,
//! NULL marks on exactly the NULL slots and no byte of an earlier batch.

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use fjord_client::row::{Datum, RowBatchBuilder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use proptest::prelude::*;

/// Width of the BINARY(n) column.
const WIDTH: usize = 3;
/// Precision of the DECIMAL column: values must stay below 10^5.
const DECIMAL_BOUND: i128 = 100_000;

/// One row of (INT, STRING, BINARY(3), BIGINT NOT NULL, DECIMAL(5, 2), BOOLEAN).
#[derive(Clone, Debug, PartialEq)]
struct Row {
    int: Option<i32>,
    text: Option<String>,
    fixed: Option<[u8; WIDTH]>,
    big: i64,
    decimal: Option<i128>,
    flag: Option<bool>,
}

/// How a generated row is made to be refused, each at a different column,
/// after the columns before it have taken their value (NULLs included).
#[derive(Clone, Copy, Debug)]
enum Spoil {
    /// A BINARY(3) value of another width (third column).
    FixedWidth,
    /// NULL into the NOT NULL column (fourth column).
    NullIntoNotNull,
    /// An unscaled decimal beyond the precision (fifth column).
    DecimalRange,
    /// A datum of the wrong type in the last column.
    LastColumnType,
}

fn builder() -> RowBatchBuilder {
    let schema = Schema::builder()
        .column("int", DataType::int())
        .column("text", DataType::string())
        .column("fixed", DataType::binary(WIDTH as u32).unwrap())
        .column("big", DataType::bigint().not_null())
        .column("decimal", DataType::decimal(5, 2).unwrap())
        .column("flag", DataType::boolean())
        .build()
        .unwrap();
    RowBatchBuilder::new(to_arrow_schema(&schema)).unwrap()
}

fn append(builder: &mut RowBatchBuilder, row: &Row, spoil: Option<Spoil>) -> bool {
    let too_wide = [0u8; WIDTH + 1];
    let mut fields = [
        row.int.into(),
        row.text.as_deref().into(),
        row.fixed.as_ref().map(|f| &f[..]).into(),
        Datum::BigInt(row.big),
        row.decimal.map_or(Datum::Null, Datum::Decimal),
        row.flag.into(),
    ];
    match spoil {
        None => {}
        Some(Spoil::FixedWidth) => fields[2] = Datum::Binary(&too_wide),
        Some(Spoil::NullIntoNotNull) => fields[3] = Datum::Null,
        Some(Spoil::DecimalRange) => fields[4] = Datum::Decimal(DECIMAL_BOUND),
        Some(Spoil::LastColumnType) => fields[5] = Datum::Int(1),
    }
    builder.append(&fields[..]).is_ok()
}

/// Checks `batch` against the rows that went in, slot by slot.
fn check(batch: &RecordBatch, rows: &[Row]) -> Result<(), TestCaseError> {
    prop_assert_eq!(batch.num_rows(), rows.len());
    let ints = batch.column(0).as_primitive::<Int32Type>();
    let texts = batch.column(1).as_string::<i32>();
    let fixed = batch.column(2).as_fixed_size_binary();
    let bigs = batch.column(3).as_primitive::<Int64Type>();
    let decimals = batch.column(4).as_primitive::<Decimal128Type>();
    let flags = batch.column(5).as_boolean();
    for (i, row) in rows.iter().enumerate() {
        prop_assert_eq!(
            ints.is_valid(i).then(|| ints.value(i)),
            row.int,
            "int {}",
            i
        );
        prop_assert_eq!(
            texts.is_valid(i).then(|| texts.value(i)),
            row.text.as_deref(),
            "text {}",
            i
        );
        prop_assert_eq!(
            fixed.is_valid(i).then(|| fixed.value(i)),
            row.fixed.as_ref().map(|f| &f[..]),
            "fixed {}",
            i
        );
        prop_assert_eq!(bigs.value(i), row.big, "big {}", i);
        prop_assert_eq!(
            decimals.is_valid(i).then(|| decimals.value(i)),
            row.decimal,
            "decimal {}",
            i
        );
        prop_assert_eq!(
            flags.is_valid(i).then(|| flags.value(i)),
            row.flag,
            "flag {}",
            i
        );
    }
    let nulls = |f: fn(&Row) -> bool| rows.iter().filter(|r| f(r)).count();
    prop_assert_eq!(ints.null_count(), nulls(|r| r.int.is_none()));
    prop_assert_eq!(texts.null_count(), nulls(|r| r.text.is_none()));
    prop_assert_eq!(fixed.null_count(), nulls(|r| r.fixed.is_none()));
    prop_assert_eq!(decimals.null_count(), nulls(|r| r.decimal.is_none()));
    prop_assert_eq!(flags.null_count(), nulls(|r| r.flag.is_none()));
    prop_assert!(bigs.nulls().is_none(), "a NOT NULL column has no bitmap");
    // Strings end exactly where their last row does: no tail of an
    // earlier, longer batch in a recycled buffer.
    let text_bytes: usize = rows
        .iter()
        .filter_map(|r| r.text.as_ref())
        .map(String::len)
        .sum();
    prop_assert_eq!(texts.values().len(), text_bytes);
    Ok(())
}

fn row_strategy() -> impl Strategy<Value = Row> {
    // NULLs half the time, so runs of NULL and of non-NULL of every length
    // (first row NULL, all NULL, validity starting late) all occur.
    (
        proptest::option::of(any::<i32>()),
        proptest::option::of("[a-z]{0,9}"),
        proptest::option::of(any::<[u8; WIDTH]>()),
        any::<i64>(),
        proptest::option::of(-DECIMAL_BOUND + 1..DECIMAL_BOUND),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(int, text, fixed, big, decimal, flag)| Row {
            int,
            text,
            fixed,
            big,
            decimal,
            flag,
        })
}

fn spoil_strategy() -> impl Strategy<Value = Option<Spoil>> {
    proptest::option::weighted(
        0.2,
        prop_oneof![
            Just(Spoil::FixedWidth),
            Just(Spoil::NullIntoNotNull),
            Just(Spoil::DecimalRange),
            Just(Spoil::LastColumnType),
        ],
    )
}

/// How a batch is finished and the builder readied for the next one.
#[derive(Clone, Copy, Debug)]
enum Cycle {
    /// `finish`: the builder keeps buffers sized for this batch.
    Finish,
    /// `finish_and_release`, then `prepare` with the batch just checked
    /// (its buffers are recycled) and an expected size, as the writer does.
    Recycle { expected_bytes: usize },
    /// `finish_and_release`, then `prepare` with nothing recycled.
    Release,
}

fn cycle_strategy() -> impl Strategy<Value = Cycle> {
    prop_oneof![
        Just(Cycle::Finish),
        (0usize..4_096).prop_map(|expected_bytes| Cycle::Recycle { expected_bytes }),
        Just(Cycle::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Batch after batch, through recycled and fresh buffers, with refused
    /// rows anywhere: every batch holds exactly its accepted rows, NULL
    /// exactly where a row had NULL.
    #[test]
    fn every_batch_holds_exactly_its_rows_through_recycled_buffers(
        batches in proptest::collection::vec(
            (
                proptest::collection::vec((row_strategy(), spoil_strategy()), 0..40),
                cycle_strategy(),
            ),
            1..6,
        )
    ) {
        let mut builder = builder();
        for (rows, cycle) in &batches {
            let mut accepted = Vec::new();
            for (row, spoil) in rows {
                let appended = append(&mut builder, row, *spoil);
                prop_assert_eq!(appended, spoil.is_none(), "row {:?} spoiled {:?}", row, spoil);
                if appended {
                    accepted.push(row.clone());
                }
                prop_assert_eq!(builder.len(), accepted.len());
            }
            match cycle {
                Cycle::Finish => {
                    let batch = builder.finish().unwrap();
                    check(&batch, &accepted)?;
                }
                Cycle::Recycle { expected_bytes } => {
                    let batch = builder.finish_and_release().unwrap();
                    check(&batch, &accepted)?;
                    builder.prepare(Some(batch), *expected_bytes);
                }
                Cycle::Release => {
                    let batch = builder.finish_and_release().unwrap();
                    check(&batch, &accepted)?;
                    builder.prepare(None, 0);
                }
            }
        }
    }
}

/// Appends one nullable INT column's values to a fresh builder (recycling a
/// batch of other values first when `recycle` holds one) and returns the
/// validity that came out, as `Some` per non-NULL slot.
fn ints_through_builder(values: &[Option<i32>], recycle: Option<RecordBatch>) -> Vec<Option<i32>> {
    let schema = Schema::builder()
        .column("n", DataType::int())
        .build()
        .unwrap();
    let mut builder = RowBatchBuilder::new(to_arrow_schema(&schema)).unwrap();
    if let Some(batch) = recycle {
        builder.prepare(Some(batch), 0);
    }
    for v in values {
        builder.append(&[Datum::from(*v)][..]).unwrap();
    }
    let batch = builder.finish_and_release().unwrap();
    batch.column(0).as_primitive::<Int32Type>().iter().collect()
}

#[test]
fn null_marks_land_on_exactly_the_null_rows_at_bitmap_byte_boundaries() {
    // NULL first; all NULL; validity starting after N non-NULL rows for N
    // around a bitmap byte and word; NULL last.
    let mut cases: Vec<Vec<Option<i32>>> = vec![
        vec![None],
        vec![None, Some(1), Some(2)],
        vec![None; 9],
        vec![Some(1), Some(2), None],
    ];
    for n in [1usize, 7, 8, 9, 63, 64, 65] {
        let mut case: Vec<Option<i32>> = (0..n as i32).map(Some).collect();
        case.push(None);
        case.extend((0..n as i32).map(Some));
        cases.push(case);
    }
    for case in &cases {
        assert_eq!(&ints_through_builder(case, None), case);
    }
    // The same into the buffers of a recycled batch full of other values.
    for case in &cases {
        let full: Vec<Option<i32>> = (0..100).map(|i| Some(1_000 + i)).collect();
        let schema = Schema::builder()
            .column("n", DataType::int())
            .build()
            .unwrap();
        let mut other = RowBatchBuilder::new(to_arrow_schema(&schema)).unwrap();
        for v in &full {
            other.append(&[Datum::from(*v)][..]).unwrap();
        }
        let old = other.finish_and_release().unwrap();
        assert_eq!(&ints_through_builder(case, Some(old)), case);
    }
}
