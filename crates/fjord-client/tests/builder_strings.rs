//! STRING columns built by [`RowBatchBuilder`] are valid Arrow strings —
//! offsets rising from 0 and within the data, UTF-8 cut only on char
//! boundaries — whatever mix of single rows, runs, NULLs, refused runs
//! (including rows whose value changes between two reads) and recycled
//! memory built them. Release builds finish a STRING column without
//! Arrow's check (the builder's own invariants make it redundant), so this
//! test runs the check itself on every finished batch, in any build.

use std::cell::Cell;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch, StringArray};
use fjord_client::row::{Datum, InternalRow, RowBatchBuilder};
use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::schema::Schema;
use fjord_format::types::DataType;
use proptest::prelude::*;

/// One row: `id BIGINT NOT NULL, s STRING`.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    id: i64,
    s: Option<String>,
}

impl Row {
    fn datums(&self) -> [Datum<'_>; 2] {
        [Datum::BigInt(self.id), self.s.as_deref().into()]
    }
}

/// A row whose string is `first` when read the first time and `first`
/// plus a two-byte char on every later read: a caller's row that does not
/// read the same twice.
struct FickleRow {
    id: i64,
    first: String,
    later: String,
    reads: Cell<u32>,
}

impl InternalRow for FickleRow {
    fn field_count(&self) -> usize {
        2
    }

    fn datum(&self, pos: usize) -> Datum<'_> {
        if pos == 0 {
            return Datum::BigInt(self.id);
        }
        let reads = self.reads.get();
        self.reads.set(reads + 1);
        Datum::String(if reads == 0 { &self.first } else { &self.later })
    }
}

/// What the test does next to the builder.
#[derive(Clone, Debug)]
enum Op {
    /// `append` one row.
    Single(Row),
    /// `append_rows` a run.
    Run(Vec<Row>),
    /// `append_rows` a run whose row `bad` (modulo its length) has a
    /// wrong-type id: refused whole.
    BadRun(Vec<Row>, usize),
    /// `append_rows` a run whose row `fickle` (modulo its length) changes
    /// its string between reads: refused whole.
    FickleRun(Vec<Row>, usize),
    /// Finish the batch; with `Some(bytes)`, hand it back for its memory
    /// and prepare the next batch for `bytes`.
    Finish(Option<usize>),
}

fn builder() -> RowBatchBuilder {
    let schema = Schema::builder()
        .column("id", DataType::bigint().not_null())
        .column("s", DataType::string())
        .build()
        .unwrap();
    RowBatchBuilder::new(to_arrow_schema(&schema)).unwrap()
}

/// Checks `batch` is valid as Arrow's checked constructor sees it and holds
/// exactly `expected`.
fn check(batch: &RecordBatch, expected: &[Row]) -> Result<(), TestCaseError> {
    let strings = batch.column(1).as_string::<i32>();
    let revalidated = StringArray::try_new(
        strings.offsets().clone(),
        strings.values().clone(),
        strings.nulls().cloned(),
    );
    prop_assert!(
        revalidated.is_ok(),
        "invalid STRING column: {:?}",
        revalidated.err()
    );
    prop_assert_eq!(batch.num_rows(), expected.len());
    let ids = batch.column(0).as_primitive::<Int64Type>();
    for (i, row) in expected.iter().enumerate() {
        prop_assert_eq!(ids.value(i), row.id, "id of row {}", i);
        let stored = strings.is_valid(i).then(|| strings.value(i));
        prop_assert_eq!(stored, row.s.as_deref(), "string of row {}", i);
    }
    Ok(())
}

fn row() -> impl Strategy<Value = Row> {
    (any::<i64>(), proptest::option::weighted(0.8, "\\PC{0,6}")).prop_map(|(id, s)| Row { id, s })
}

fn op() -> impl Strategy<Value = Op> {
    let run = || proptest::collection::vec(row(), 1..40);
    prop_oneof![
        4 => row().prop_map(Op::Single),
        4 => run().prop_map(Op::Run),
        1 => (run(), any::<usize>()).prop_map(|(r, i)| Op::BadRun(r, i)),
        1 => (run(), any::<usize>()).prop_map(|(r, i)| Op::FickleRun(r, i)),
        1 => proptest::option::of(0usize..4096).prop_map(Op::Finish),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_finished_string_column_is_valid_arrow_and_holds_exactly_the_rows_appended(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let mut builder = builder();
        let mut expected: Vec<Row> = Vec::new();
        for op in ops {
            match op {
                Op::Single(row) => {
                    builder.append(&row.datums()[..]).unwrap();
                    expected.push(row);
                }
                Op::Run(rows) => {
                    let datums: Vec<[Datum<'_>; 2]> = rows.iter().map(Row::datums).collect();
                    builder.append_rows(&datums).unwrap();
                    expected.extend(rows);
                }
                Op::BadRun(rows, bad) => {
                    let bad = bad % rows.len();
                    let mut datums: Vec<[Datum<'_>; 2]> = rows.iter().map(Row::datums).collect();
                    datums[bad][0] = Datum::Int(1);
                    prop_assert!(builder.append_rows(&datums).is_err());
                }
                Op::FickleRun(rows, fickle) => {
                    let fickle = fickle % rows.len();
                    let run: Vec<FickleRow> = rows
                        .iter()
                        .enumerate()
                        .map(|(i, row)| {
                            let first = row.s.clone().unwrap_or_default();
                            let later = if i == fickle { format!("{first}ü") } else { first.clone() };
                            FickleRow { id: row.id, first, later, reads: Cell::new(0) }
                        })
                        .collect();
                    prop_assert!(builder.append_rows(&run).is_err());
                }
                Op::Finish(recycle) => {
                    let batch = builder.finish_and_release().unwrap();
                    check(&batch, &expected)?;
                    expected.clear();
                    match recycle {
                        Some(bytes) => builder.prepare(Some(batch), bytes),
                        None => builder.prepare(None, 0),
                    }
                }
            }
        }
        let batch = builder.finish_and_release().unwrap();
        check(&batch, &expected)?;
    }
}
