//! Table-driven tests of the merge engines. Each expectation names the
//! Fluss source or test it comes from (paths under `fluss-server/src/test/
//! java/org/apache/fluss/server/kv/rowmerger/` unless said otherwise).

use std::collections::BTreeMap;

use fjord_format::datum::{Datum, Timestamp};
use fjord_format::schema::AggFunction;
use fjord_format::{Column, DataType, Schema};

use super::*;

/// An owned field value, so a sink can keep what it was given.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Val {
    Null,
    Bool(bool),
    I8(i8),
    I16(i16),
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
    Str(String),
    Bytes(Vec<u8>),
    Dec(i128),
    Ts(Timestamp),
    TsLtz(Timestamp),
    Other(String),
}

impl Val {
    pub(super) fn of(d: &Datum<'_>) -> Self {
        match *d {
            Datum::Null => Val::Null,
            Datum::Boolean(v) => Val::Bool(v),
            Datum::TinyInt(v) => Val::I8(v),
            Datum::SmallInt(v) => Val::I16(v),
            Datum::Int(v) => Val::I32(v),
            Datum::BigInt(v) => Val::I64(v),
            Datum::Float(v) => Val::F32(v),
            Datum::Double(v) => Val::F64(v),
            Datum::String(v) => Val::Str(v.to_string()),
            Datum::Binary(v) => Val::Bytes(v.to_vec()),
            Datum::Decimal(v) => Val::Dec(v),
            Datum::Timestamp(v) => Val::Ts(v),
            Datum::TimestampLtz(v) => Val::TsLtz(v),
            other => Val::Other(format!("{other:?}")),
        }
    }

    pub(super) fn datum(&self) -> Datum<'_> {
        match self {
            Val::Null => Datum::Null,
            Val::Bool(v) => Datum::Boolean(*v),
            Val::I8(v) => Datum::TinyInt(*v),
            Val::I16(v) => Datum::SmallInt(*v),
            Val::I32(v) => Datum::Int(*v),
            Val::I64(v) => Datum::BigInt(*v),
            Val::F32(v) => Datum::Float(*v),
            Val::F64(v) => Datum::Double(*v),
            Val::Str(v) => Datum::String(v),
            Val::Bytes(v) => Datum::Binary(v),
            Val::Dec(v) => Datum::Decimal(*v),
            Val::Ts(v) => Datum::Timestamp(*v),
            Val::TsLtz(v) => Datum::TimestampLtz(*v),
            Val::Other(v) => panic!("no datum for {v}"),
        }
    }
}

/// A sink that keeps the row it is given.
#[derive(Default)]
pub(super) struct Collect(pub(super) Vec<Val>);

impl RowSink for Collect {
    fn write(&mut self, value: &Datum<'_>) -> Result<(), MergeError> {
        self.0.push(Val::of(value));
        Ok(())
    }
}

pub(super) fn datums(row: &[Val]) -> Vec<Datum<'_>> {
    row.iter().map(Val::datum).collect()
}

/// A column; `agg` is `(function, parameters)`.
pub(super) fn col(name: &str, data_type: DataType) -> Column {
    Column::new(name, data_type)
}

pub(super) fn agg_col(
    name: &str,
    data_type: DataType,
    function: &str,
    params: &[(&str, &str)],
) -> Column {
    let mut column = Column::new(name, data_type);
    column.agg_function = Some(AggFunction {
        kind: function.to_string(),
        parameters: (!params.is_empty()).then(|| {
            params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        }),
    });
    column
}

pub(super) fn schema(columns: Vec<Column>, key: &[&str]) -> Schema {
    Schema::new(
        columns,
        Some(key.iter().map(|k| k.to_string()).collect()),
        Vec::new(),
        None,
    )
    .unwrap()
}

pub(super) fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn options(schema: &Schema, pairs: &[(&str, &str)]) -> MergeOptions {
    MergeOptions::from_table(schema, &props(pairs)).unwrap()
}

fn options_err(schema: &Schema, pairs: &[(&str, &str)]) -> ErrorCode {
    MergeOptions::from_table(schema, &props(pairs))
        .unwrap_err()
        .code()
}

fn merger(schema: &Schema, pairs: &[(&str, &str)], targets: Option<&[usize]>) -> RowMerger {
    RowMerger::new(schema, &options(schema, pairs), targets, AggMode::Default).unwrap()
}

fn merger_err(schema: &Schema, pairs: &[(&str, &str)], targets: Option<&[usize]>) -> ErrorCode {
    RowMerger::new(schema, &options(schema, pairs), targets, AggMode::Default)
        .unwrap_err()
        .code()
}

/// Upserts `new` over `old`; returns the outcome and the row the sink got.
fn up(m: &mut RowMerger, old: Option<&[Val]>, new: &[Val]) -> (MergeOutcome, Vec<Val>) {
    let old = old.map(datums);
    let new = datums(new);
    let mut sink = Collect::default();
    let outcome = m.upsert(old.as_deref(), &new, &mut sink).unwrap();
    (outcome, sink.0)
}

fn del(m: &mut RowMerger, old: Option<&[Val]>) -> (MergeOutcome, Vec<Val>) {
    let old = old.map(datums);
    let mut sink = Collect::default();
    let outcome = m.delete(old.as_deref(), &mut sink).unwrap();
    (outcome, sink.0)
}

use MergeOutcome::{Delete, Insert, NoChange, Update};
use Val::{Null, Str, I32, I64};

fn s(v: &str) -> Val {
    Str(v.to_string())
}

/// id INT (key), a BIGINT, b STRING.
fn abc() -> Schema {
    schema(
        vec![
            col("id", DataType::int()),
            col("a", DataType::bigint()),
            col("b", DataType::string()),
        ],
        &["id"],
    )
}

// ---- options (TableDescriptorValidation.checkMergeEngine / checkDeleteBehavior, RowMergerCreateTest)

#[test]
fn options_parse_engines_case_insensitively_and_default_the_delete_behaviour() {
    let t = abc();
    // RowMergerCreateTest.testCreateAggregateRowMergerCaseInsensitive
    for name in ["aggregation", "AGGREGATION", "Aggregation"] {
        let o = options(&t, &[(TABLE_MERGE_ENGINE, name)]);
        assert_eq!(o.engine(), MergeEngine::Aggregation);
        // ConfigOptions.TABLE_DELETE_BEHAVIOR: `ignore` for the merge engines when unset.
        assert_eq!(o.delete_behavior(), DeleteBehavior::Ignore);
    }
    let o = options(&t, &[]);
    assert_eq!(o.engine(), MergeEngine::Default);
    assert_eq!(o.delete_behavior(), DeleteBehavior::Allow);
    assert_eq!(o.changelog_image(), ChangelogImage::Full);
    let o = options(
        &t,
        &[
            (TABLE_CHANGELOG_IMAGE, "wal"),
            (TABLE_DELETE_BEHAVIOR, "DISABLE"),
        ],
    );
    assert_eq!(o.changelog_image(), ChangelogImage::Wal);
    assert_eq!(o.delete_behavior(), DeleteBehavior::Disable);
    let o = options(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "first_row"),
            (TABLE_DELETE_BEHAVIOR, "disable"),
        ],
    );
    assert_eq!(
        (o.engine(), o.delete_behavior()),
        (MergeEngine::FirstRow, DeleteBehavior::Disable)
    );
    let o = options(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "a"),
        ],
    );
    assert_eq!(o.engine(), MergeEngine::Versioned { column: 1 });
    // RowMergerCreateTest.testCreateAggregateRowMergerWithDeleteBehaviorAllow
    let o = options(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "aggregation"),
            (TABLE_DELETE_BEHAVIOR, "allow"),
        ],
    );
    assert_eq!(o.delete_behavior(), DeleteBehavior::Allow);
}

#[test]
fn options_refuse_what_fluss_refuses_with_invalid_config() {
    let t = abc();
    let bad = ErrorCode::InvalidConfigException;
    let cases: &[&[(&str, &str)]] = &[
        &[(TABLE_MERGE_ENGINE, "last_row")],
        &[(TABLE_DELETE_BEHAVIOR, "sometimes")],
        &[(TABLE_CHANGELOG_IMAGE, "half")],
        // RowMergerCreateTest.testCreateVersionedRowMergerWithoutVersionColumnThrowsException
        &[(TABLE_MERGE_ENGINE, "versioned")],
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "nope"),
        ],
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "b"),
        ],
        &[
            (TABLE_MERGE_ENGINE, "first_row"),
            (TABLE_DELETE_BEHAVIOR, "allow"),
        ],
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "a"),
            (TABLE_DELETE_BEHAVIOR, "ALLOW"),
        ],
        &[
            (TABLE_MERGE_ENGINE, "aggregation"),
            (TABLE_CHANGELOG_IMAGE, "WAL"),
        ],
    ];
    for case in cases {
        assert_eq!(options_err(&t, case), bad, "{case:?}");
    }
    // A log table takes neither a merge engine nor a delete behaviour.
    let log = Schema::new(vec![col("a", DataType::int())], None, Vec::new(), None).unwrap();
    assert_eq!(options_err(&log, &[(TABLE_MERGE_ENGINE, "first_row")]), bad);
    assert_eq!(options_err(&log, &[(TABLE_DELETE_BEHAVIOR, "ignore")]), bad);
    assert_eq!(
        options(&log, &[(TABLE_CHANGELOG_IMAGE, "WAL")]).engine(),
        MergeEngine::Default
    );
}

#[test]
fn aggregation_functions_are_checked_at_table_creation() {
    // AggFunctionType.getSupportedDataTypeRoots / validateParameter, through
    // TableDescriptorValidation.validateAggregationFunctionParameters.
    let agg = [(TABLE_MERGE_ENGINE, "aggregation")];
    let with = |c: Column| schema(vec![col("id", DataType::int()), c], &["id"]);
    let bad = ErrorCode::InvalidConfigException;
    let refused = [
        agg_col("v", DataType::string(), "sum", &[]),
        agg_col("v", DataType::boolean(), "product", &[]),
        agg_col("v", DataType::bytes(), "max", &[]),
        agg_col("v", DataType::boolean(), "min", &[]),
        agg_col("v", DataType::int(), "listagg", &[]),
        agg_col("v", DataType::int(), "bool_and", &[]),
        agg_col("v", DataType::binary(4).unwrap(), "rbm32", &[]),
        agg_col("v", DataType::string(), "rbm64", &[]),
        agg_col("v", DataType::bigint(), "sum", &[("delimiter", ";")]),
        agg_col("v", DataType::string(), "listagg", &[("separator", ";")]),
        agg_col("v", DataType::string(), "string_agg", &[("delimiter", "")]),
    ];
    for c in refused {
        assert_eq!(options_err(&with(c.clone()), &agg), bad, "{c:?}");
    }
    let accepted = [
        agg_col("v", DataType::decimal(20, 2).unwrap(), "SUM", &[]),
        agg_col("v", DataType::char(3).unwrap(), "max", &[]),
        agg_col("v", DataType::timestamp_ltz(3).unwrap(), "min", &[]),
        agg_col("v", DataType::bytes(), "last-value", &[]),
        agg_col("v", DataType::string(), "listagg", &[("delimiter", "|")]),
        agg_col("v", DataType::char(3).unwrap(), "string_agg", &[]),
        agg_col("v", DataType::bytes(), "rbm64", &[]),
        // ColumnJsonSerde drops a function name Fluss does not know.
        agg_col("v", DataType::bytes(), "median", &[]),
    ];
    for c in accepted {
        options(&with(c), &agg);
    }
}

// ---- RowMerger::new

#[test]
fn partial_targets_are_checked() {
    let t = abc();
    // PartialUpdater.sanityCheck: the whole key, every non-key column nullable.
    assert_eq!(
        merger_err(&t, &[], Some(&[1, 2])),
        ErrorCode::InvalidTargetColumn
    );
    assert_eq!(
        merger_err(&t, &[], Some(&[0, 7])),
        ErrorCode::InvalidTargetColumn
    );
    let strict = schema(
        vec![
            col("id", DataType::int()),
            col("a", DataType::bigint().not_null()),
            col("b", DataType::string()),
        ],
        &["id"],
    );
    // Even a NOT NULL column that is a target refuses (0.9.1 also for all columns).
    assert_eq!(
        merger_err(&strict, &[], Some(&[0, 2])),
        ErrorCode::InvalidTargetColumn
    );
    assert_eq!(
        merger_err(&strict, &[], Some(&[0, 1, 2])),
        ErrorCode::InvalidTargetColumn
    );
    merger(&strict, &[], None);
    // AggregationContext.sanityCheckTargetColumns
    let agg = [(TABLE_MERGE_ENGINE, "aggregation")];
    assert_eq!(
        merger_err(&strict, &agg, Some(&[0, 2])),
        ErrorCode::InvalidTargetColumn
    );
    assert_eq!(
        merger_err(&t, &agg, Some(&[1])),
        ErrorCode::InvalidTargetColumn
    );
    // FirstRowRowMerger / VersionedRowMerger.configureTargetColumns throw
    // UnsupportedOperationException: an unknown server error.
    assert_eq!(
        merger_err(&t, &[(TABLE_MERGE_ENGINE, "first_row")], Some(&[0, 1])),
        ErrorCode::UnknownServerError
    );
    assert_eq!(
        merger_err(
            &t,
            &[
                (TABLE_MERGE_ENGINE, "versioned"),
                (TABLE_MERGE_ENGINE_VERSION_COLUMN, "a")
            ],
            Some(&[0, 1])
        ),
        ErrorCode::UnknownServerError
    );
}

#[test]
fn auto_increment_tables_need_targets_without_the_column() {
    // autoinc/PerSchemaAutoIncrementUpdater.validateTargetColumns
    let t = Schema::new(
        vec![
            col("id", DataType::int()),
            col("seq", DataType::bigint()),
            col("b", DataType::string()),
        ],
        Some(vec!["id".into()]),
        vec!["seq".into()],
        None,
    )
    .unwrap();
    assert_eq!(merger_err(&t, &[], None), ErrorCode::InvalidTargetColumn);
    assert_eq!(
        merger_err(&t, &[], Some(&[0, 1])),
        ErrorCode::InvalidTargetColumn
    );
    merger(&t, &[], Some(&[0, 2]));
}

// ---- default engine (DefaultRowMergerTest, KvTablet.processUpsert / processDeletion)

#[test]
fn default_engine_keeps_the_latest_row() {
    let t = abc();
    let mut m = merger(&t, &[], None);
    assert!(m.passes_new_row_through() && m.needs_old_value_for_upsert());
    let row = [I32(1), I64(2), s("x")];
    // The sink is not written: the caller stores the bytes it received.
    assert_eq!(up(&mut m, None, &row), (Insert, vec![]));
    assert_eq!(up(&mut m, Some(&row), &row), (Update, vec![]));
    assert_eq!(del(&mut m, Some(&row)), (Delete, vec![]));
    assert_eq!(del(&mut m, None), (NoChange, vec![]));
}

#[test]
fn wal_image_skips_the_old_value_for_full_rows_only() {
    let t = abc();
    let wal = [(TABLE_CHANGELOG_IMAGE, "WAL")];
    let mut m = merger(&t, &wal, None);
    assert!(!m.needs_old_value_for_upsert());
    assert_eq!(up(&mut m, None, &[I32(1), I64(2), s("x")]).0, Update);
    // A partial write reads the old value and inserts (KvTablet: the
    // shortcut needs a DefaultRowMerger, not its partial wrapper).
    let mut m = merger(&t, &wal, Some(&[0, 1]));
    assert!(m.needs_old_value_for_upsert());
    assert_eq!(up(&mut m, None, &[I32(1), I64(2), s("x")]).0, Insert);
    let mut m = merger(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "first_row"),
            (TABLE_CHANGELOG_IMAGE, "WAL"),
        ],
        None,
    );
    assert!(m.needs_old_value_for_upsert());
    assert_eq!(up(&mut m, None, &[I32(1), I64(2), s("x")]).0, Insert);
}

#[test]
fn delete_behaviours() {
    let t = abc();
    let row = [I32(1), I64(2), s("x")];
    let mut m = merger(&t, &[(TABLE_DELETE_BEHAVIOR, "ignore")], None);
    assert!(!m.needs_old_value_for_delete());
    assert_eq!(del(&mut m, Some(&row)), (NoChange, vec![]));
    let mut m = merger(&t, &[(TABLE_DELETE_BEHAVIOR, "disable")], None);
    // KvTablet.processDeletion: refused before the key is even looked up.
    for old in [Some(&row[..]), None] {
        let old = old.map(datums);
        let err = m
            .delete(old.as_deref(), &mut Collect::default())
            .unwrap_err();
        assert_eq!(
            ApiError::from(err).code(),
            ErrorCode::DeletionDisabledException
        );
    }
}

#[test]
fn partial_update_and_delete() {
    // PartialUpdater.updateRow / deleteRow; KvTablet inserts merge(null, new).
    let t = abc();
    let mut m = merger(&t, &[], Some(&[0, 1]));
    assert!(!m.passes_new_row_through());
    let new = [I32(1), I64(5), s("ignored")];
    assert_eq!(up(&mut m, None, &new), (Insert, vec![I32(1), I64(5), Null]));
    let old = [I32(1), I64(2), s("keep")];
    assert_eq!(
        up(&mut m, Some(&old), &new),
        (Update, vec![I32(1), I64(5), s("keep")])
    );
    // A non-target column is set: only the targets are nulled.
    assert_eq!(
        del(&mut m, Some(&old)),
        (Update, vec![I32(1), Null, s("keep")])
    );
    // Every non-target column NULL: the row goes.
    assert_eq!(del(&mut m, Some(&[I32(1), I64(2), Null])), (Delete, vec![]));
    // An old row from before column b existed reads b as NULL.
    assert_eq!(del(&mut m, Some(&[I32(1), I64(2)])), (Delete, vec![]));
    assert_eq!(
        up(&mut m, Some(&[I32(1), I64(2)]), &new),
        (Update, vec![I32(1), I64(5), Null])
    );
    // Targets = key: an existing key is unchanged, a new one inserted.
    let mut m = merger(&t, &[], Some(&[0]));
    assert_eq!(up(&mut m, Some(&old), &new), (NoChange, vec![]));
    assert_eq!(up(&mut m, None, &new), (Insert, vec![I32(1), Null, Null]));
    // 0.9.1: targets naming every column still go through the partial
    // updater (main treats them as a full row): same rows, re-encoded.
    let mut m = merger(&t, &[], Some(&[2, 1, 0]));
    assert!(!m.passes_new_row_through());
    assert_eq!(up(&mut m, Some(&old), &new), (Update, new.to_vec()));
}

#[test]
fn overwrite_mode_bypasses_the_engine() {
    // KvTablet: OVERWRITE uses `new DefaultRowMerger(kvFormat, DeleteBehavior.ALLOW)`.
    let t = abc();
    let o = options(&t, &[(TABLE_MERGE_ENGINE, "first_row")]);
    let mut m = RowMerger::new(&t, &o, None, AggMode::from_wire(1)).unwrap();
    let row = [I32(1), I64(2), s("x")];
    assert_eq!(up(&mut m, Some(&row), &row).0, Update);
    assert_eq!(del(&mut m, Some(&row)).0, Delete);
    let mut m = RowMerger::new(&t, &o, Some(&[0, 1]), AggMode::Overwrite).unwrap();
    assert_eq!(up(&mut m, None, &row), (Insert, vec![I32(1), I64(2), Null]));
    assert_eq!(AggMode::from_wire(7), AggMode::Default);
}

// ---- first_row (FirstRowRowMergerTest)

#[test]
fn first_row_keeps_the_first() {
    let t = abc();
    let mut m = merger(&t, &[(TABLE_MERGE_ENGINE, "first_row")], None);
    let first = [I32(1), I64(1), s("first")];
    assert_eq!(up(&mut m, None, &first), (Insert, first.to_vec()));
    assert_eq!(
        up(&mut m, Some(&first), &[I32(1), I64(2), s("second")]),
        (NoChange, vec![])
    );
    // Deletes are ignored by default.
    assert_eq!(del(&mut m, Some(&first)), (NoChange, vec![]));
}

// ---- versioned (VersionedRowMergerTest)

#[test]
fn versioned_keeps_the_largest_version_and_reads_null_as_the_minimum() {
    let t = abc();
    let mut m = merger(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "a"),
        ],
        None,
    );
    let v = |version: Val, b: &str| vec![I32(1), version, s(b)];
    let cases = [
        (v(I64(5), "old"), v(I64(6), "new"), Update),
        (v(I64(5), "old"), v(I64(5), "new"), Update),
        (v(I64(5), "old"), v(I64(4), "new"), NoChange),
        (v(Null, "old"), v(I64(i64::MIN), "new"), Update),
        (v(I64(i64::MIN), "old"), v(Null, "new"), Update),
        (v(I64(-1), "old"), v(Null, "new"), NoChange),
        (v(Null, "old"), v(Null, "new"), Update),
    ];
    for (old, new, expected) in cases {
        let (outcome, row) = up(&mut m, Some(&old), &new);
        assert_eq!(outcome, expected, "{old:?} then {new:?}");
        assert_eq!(
            row,
            if expected == Update {
                new.clone()
            } else {
                vec![]
            }
        );
    }
    // INT: NULL ties with i32::MIN, not below it.
    let t = schema(
        vec![col("id", DataType::int()), col("v", DataType::int())],
        &["id"],
    );
    let mut m = merger(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "v"),
        ],
        None,
    );
    assert_eq!(
        up(&mut m, Some(&[I32(1), I32(i32::MIN)]), &[I32(1), Null]).0,
        Update
    );
    assert_eq!(
        up(&mut m, Some(&[I32(1), I32(i32::MIN + 1)]), &[I32(1), Null]).0,
        NoChange
    );
    // TIMESTAMP: milliseconds, then nanoseconds.
    let t = schema(
        vec![
            col("id", DataType::int()),
            col("v", DataType::timestamp(9).unwrap()),
        ],
        &["id"],
    );
    let mut m = merger(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "versioned"),
            (TABLE_MERGE_ENGINE_VERSION_COLUMN, "v"),
        ],
        None,
    );
    let ts = |ms, ns| Val::Ts(Timestamp::new(ms, ns).unwrap());
    assert_eq!(
        up(&mut m, Some(&[I32(1), ts(10, 5)]), &[I32(1), ts(10, 4)]).0,
        NoChange
    );
    assert_eq!(
        up(&mut m, Some(&[I32(1), ts(10, 5)]), &[I32(1), ts(10, 6)]).0,
        Update
    );
}

// ---- aggregation (AggregateRowMergerTest, aggregate/FieldAggregatorParameterizedTest)

fn agg_merge(
    data_type: DataType,
    function: &str,
    params: &[(&str, &str)],
    acc: Val,
    input: Val,
) -> Val {
    let t = schema(
        vec![
            col("id", DataType::int()),
            agg_col("v", data_type, function, params),
        ],
        &["id"],
    );
    let mut m = merger(&t, &[(TABLE_MERGE_ENGINE, "aggregation")], None);
    let (outcome, row) = up(&mut m, Some(&[I32(1), acc]), &[I32(1), input]);
    assert_eq!(outcome, Update);
    row[1].clone()
}

#[test]
fn aggregation_functions() {
    use Val::{Bool, Dec, F32, F64, I16, I8};
    let dec = || DataType::decimal(10, 2).unwrap();
    let cases: Vec<(DataType, &str, Val, Val, Val)> = vec![
        // FieldAggregatorParameterizedTest.sumAggregationTestData
        (DataType::tinyint(), "sum", I8(5), I8(3), I8(8)),
        (DataType::int(), "sum", I32(1000), I32(2000), I32(3000)),
        (DataType::float(), "sum", F32(1.5), F32(2.5), F32(4.0)),
        (DataType::double(), "sum", F64(10.5), F64(20.5), F64(31.0)),
        (dec(), "sum", Dec(10050), Dec(20075), Dec(30125)),
        // Java arithmetic wraps.
        (DataType::tinyint(), "sum", I8(127), I8(1), I8(-128)),
        (DataType::int(), "sum", I32(i32::MAX), I32(1), I32(i32::MIN)),
        // testSumAggregationWithNull: NULL on either side gives the other.
        (DataType::smallint(), "sum", Null, I16(100), I16(100)),
        (DataType::bigint(), "sum", I64(7), Null, I64(7)),
        // productAggregationTestData
        (DataType::smallint(), "product", I16(10), I16(20), I16(200)),
        (
            DataType::bigint(),
            "product",
            I64(100),
            I64(200),
            I64(20000),
        ),
        (dec(), "product", Dec(250), Dec(400), Dec(1000)),
        // BigDecimal product rounded HALF_UP back to the scale: 0.05 * 0.15 = 0.0075 -> 0.01.
        (dec(), "product", Dec(5), Dec(15), Dec(1)),
        (dec(), "product", Dec(-5), Dec(15), Dec(-1)),
        // ... and NULL when it no longer fits DECIMAL(10, 2).
        (dec(), "product", Dec(9_999_999_999), Dec(200), Null),
        // maxAggregationTestData (max, then min below)
        (DataType::int(), "max", I32(1000), I32(2000), I32(2000)),
        (
            DataType::string(),
            "max",
            s("apple"),
            s("banana"),
            s("banana"),
        ),
        (DataType::string(), "max", s(""), s("test"), s("test")),
        (dec(), "max", Dec(10050), Dec(20075), Dec(20075)),
        (DataType::double(), "max", F64(-0.0), F64(0.0), F64(0.0)),
        (
            DataType::double(),
            "max",
            F64(f64::NAN),
            F64(1.0),
            F64(f64::NAN),
        ),
        (DataType::int(), "min", I32(1000), I32(2000), I32(1000)),
        (
            DataType::string(),
            "min",
            s("apple"),
            s("banana"),
            s("apple"),
        ),
        (DataType::double(), "min", F64(0.0), F64(-0.0), F64(-0.0)),
        (DataType::int(), "max", Null, I32(3), I32(3)),
        // lastValueAggregationTestData / lastNonNullValue / firstValue / firstNonNull
        (DataType::int(), "last_value", I32(1), I32(2), I32(2)),
        (DataType::int(), "last_value", I32(1), Null, Null),
        (
            DataType::int(),
            "last_value_ignore_nulls",
            I32(1),
            Null,
            I32(1),
        ),
        (DataType::int(), "first_value", I32(1), I32(2), I32(1)),
        (
            DataType::int(),
            "first_value_ignore_nulls",
            I32(1),
            I32(2),
            I32(1),
        ),
        // FieldFirstValueAgg keeps the accumulator only when it is not NULL.
        (DataType::int(), "first_value", Null, I32(2), I32(2)),
        (
            DataType::int(),
            "first_value_ignore_nulls",
            Null,
            I32(2),
            I32(2),
        ),
        // testBoolAnd/OrAggregation, ...WithNull
        (
            DataType::boolean(),
            "bool_and",
            Bool(true),
            Bool(false),
            Bool(false),
        ),
        (
            DataType::boolean(),
            "bool_and",
            Bool(true),
            Null,
            Bool(true),
        ),
        (
            DataType::boolean(),
            "bool_or",
            Bool(false),
            Bool(true),
            Bool(true),
        ),
        (
            DataType::boolean(),
            "bool_or",
            Null,
            Bool(false),
            Bool(false),
        ),
        // testListaggAggregation / WithNull
        (
            DataType::string(),
            "listagg",
            s("apple"),
            s("banana"),
            s("apple,banana"),
        ),
        (DataType::string(), "string_agg", s("a"), Null, s("a")),
    ];
    for (data_type, function, acc, input, expected) in cases {
        let got = agg_merge(data_type.clone(), function, &[], acc.clone(), input.clone());
        let same = match (&got, &expected) {
            (F64(a), F64(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            _ => got == expected,
        };
        assert!(
            same,
            "{function}({acc:?}, {input:?}) on {data_type}: {got:?} != {expected:?}"
        );
    }
    // testListaggWithCustomDelimiter
    let got = agg_merge(
        DataType::string(),
        "listagg",
        &[("delimiter", "|")],
        s("a|b"),
        s("c"),
    );
    assert_eq!(got, s("a|b|c"));
}

#[test]
fn decimal_sums_follow_fluss_precision_rules() {
    // DecimalUtils.add: compact precisions add as longs, unchecked...
    let small = || DataType::decimal(5, 2).unwrap();
    let got = agg_merge(small(), "sum", &[], Val::Dec(99_999), Val::Dec(1));
    assert_eq!(got, Val::Dec(100_000));
    // ...but NULL when the long overflows.
    let big = DataType::decimal(18, 0).unwrap();
    let got = agg_merge(big, "sum", &[], Val::Dec(i128::from(i64::MAX)), Val::Dec(1));
    assert_eq!(got, Null);
    // Wide precisions are checked.
    let wide = || DataType::decimal(20, 0).unwrap();
    let max = 10i128.pow(20) - 1;
    assert_eq!(
        agg_merge(wide(), "sum", &[], Val::Dec(max), Val::Dec(1)),
        Null
    );
    assert_eq!(
        agg_merge(wide(), "sum", &[], Val::Dec(max), Val::Dec(-1)),
        Val::Dec(max - 1)
    );
    // 38 digits: a product beyond 128 bits is still exact, then too wide.
    let widest = DataType::decimal(38, 0).unwrap();
    let got = agg_merge(
        widest,
        "product",
        &[],
        Val::Dec(10i128.pow(37)),
        Val::Dec(10i128.pow(20)),
    );
    assert_eq!(got, Null);
    let scaled = DataType::decimal(38, 19).unwrap();
    let one = 10i128.pow(19);
    let got = agg_merge(scaled, "product", &[], Val::Dec(one * 3), Val::Dec(one / 2));
    assert_eq!(got, Val::Dec(one * 3 / 2));
}

#[test]
fn aggregation_rows() {
    // AggregateRowMergerTest.testBasicAggregation
    let t = schema(
        vec![
            col("id", DataType::int()),
            agg_col("sum_count", DataType::bigint(), "sum", &[]),
            agg_col("sum_total", DataType::double(), "sum", &[]),
            agg_col("max_val", DataType::int(), "max", &[]),
            agg_col("min_val", DataType::int(), "min", &[]),
            col("name", DataType::string()),
        ],
        &["id"],
    );
    let mut m = merger(&t, &[(TABLE_MERGE_ENGINE, "aggregation")], None);
    let r1 = [I32(1), I64(5), Val::F64(10.5), I32(10), I32(3), s("Alice")];
    let r2 = [I32(1), I64(3), Val::F64(7.5), I32(15), I32(1), s("Bob")];
    assert_eq!(up(&mut m, None, &r1), (Insert, r1.to_vec()));
    let (outcome, merged) = up(&mut m, Some(&r1), &r2);
    assert_eq!(outcome, Update);
    assert_eq!(
        merged,
        [I32(1), I64(8), Val::F64(18.0), I32(15), I32(1), s("Bob")]
    );
    let r3 = [I32(1), I64(0), Val::F64(0.0), I32(0), I32(0), Null];
    let (_, merged2) = up(&mut m, Some(&merged), &r3);
    assert_eq!(merged2[5], s("Bob"));
    // Every merge on an existing key is an update, even an idempotent one.
    let (outcome, same) = up(
        &mut m,
        Some(&merged),
        &[I32(1), Null, Null, Null, Null, Null],
    );
    assert_eq!((outcome, same), (Update, merged.clone()));
    // testDeleteBehaviorNotAllowed: ignored by default...
    assert_eq!(del(&mut m, Some(&merged)), (NoChange, vec![]));
    // ...testDeleteBehaviorRemoveRecord: with allow, the whole row goes.
    let mut m = merger(
        &t,
        &[
            (TABLE_MERGE_ENGINE, "aggregation"),
            (TABLE_DELETE_BEHAVIOR, "allow"),
        ],
        None,
    );
    assert_eq!(del(&mut m, Some(&merged)), (Delete, vec![]));
}

#[test]
fn partial_aggregation() {
    // AggregateRowMergerTest.testPartialUpdate and
    // testPartialAggregateRowMergerDeleteAllScenarios.
    let t = schema(
        vec![
            col("id", DataType::int()),
            agg_col("target_sum", DataType::bigint(), "sum", &[]),
            agg_col("target_max", DataType::int(), "max", &[]),
            col("non_target", DataType::string()),
            agg_col("non_target_count", DataType::bigint(), "sum", &[]),
        ],
        &["id"],
    );
    let allow = [
        (TABLE_MERGE_ENGINE, "aggregation"),
        (TABLE_DELETE_BEHAVIOR, "allow"),
    ];
    let mut m = merger(&t, &allow, Some(&[0, 1, 2]));
    let old = [I32(1), I64(100), I32(50), s("keep"), I64(200)];
    let new = [I32(1), I64(5), I32(70), s("other"), I64(9)];
    assert_eq!(
        up(&mut m, Some(&old), &new),
        (Update, vec![I32(1), I64(105), I32(70), s("keep"), I64(200)])
    );
    // The first write of a key stores the row as received, non-targets included.
    assert_eq!(up(&mut m, None, &new), (Insert, new.to_vec()));
    assert_eq!(
        del(&mut m, Some(&old)),
        (Update, vec![I32(1), Null, Null, s("keep"), I64(200)])
    );
    let mut m = merger(&t, &allow, Some(&[0, 1]));
    assert_eq!(
        del(&mut m, Some(&[I32(1), I64(100), Null, Null, Null])),
        (Delete, vec![])
    );
    // Targets = key: still an update (the aggregation has no shortcut).
    let mut m = merger(&t, &allow, Some(&[0]));
    assert_eq!(up(&mut m, Some(&old), &new), (Update, old.to_vec()));
}

#[test]
fn listagg_on_char_fails_at_merge_as_in_fluss() {
    // AggFunctionType accepts CHAR for listagg, but FieldListaggAggFactory
    // wants a StringType: the table is created, the first merge fails.
    let t = schema(
        vec![
            col("id", DataType::int()),
            agg_col("v", DataType::char(3).unwrap(), "listagg", &[]),
        ],
        &["id"],
    );
    let agg = [(TABLE_MERGE_ENGINE, "aggregation")];
    let mut m = merger(&t, &agg, None);
    let row = [I32(1), s("abc")];
    assert_eq!(up(&mut m, None, &row).0, Insert);
    let old = datums(&row);
    let err = m
        .upsert(Some(&old), &old, &mut Collect::default())
        .unwrap_err();
    assert_eq!(ApiError::from(err).code(), ErrorCode::UnknownServerError);
    assert_eq!(
        merger_err(&t, &agg, Some(&[0, 1])),
        ErrorCode::UnknownServerError
    );
}

#[test]
fn rbm32_unions_bitmaps() {
    // FieldAggregatorParameterizedTest.testRbm32Aggregation: {1,2} | {2,3}.
    let bitmap = |values: &[u16]| {
        let mut out = vec![0x3A, 0x30, 0, 0, 1, 0, 0, 0, 0, 0];
        out.extend_from_slice(&((values.len() - 1) as u16).to_le_bytes());
        out.extend_from_slice(&16u32.to_le_bytes());
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    };
    let got = agg_merge(
        DataType::bytes(),
        "rbm32",
        &[],
        Val::Bytes(bitmap(&[1, 2])),
        Val::Bytes(bitmap(&[2, 3])),
    );
    assert_eq!(got, Val::Bytes(bitmap(&[1, 2, 3])));
}

#[test]
fn rbm64_unions_bitmaps_as_fluss_stores_them() {
    // FieldAggregatorParameterizedTest.testRbm64Aggregation: {10,20} | {20,30},
    // bytes written by RoaringBitmap 1.3.0's Roaring64Bitmap.serialize(DataOutput)
    // after runOptimize, as RoaringBitmapUtils does.
    let bitmap = |values: &[u16]| {
        let mut out = vec![1, 1, 0, 0, 0, 0, 0, 0, 0];
        // A root leaf: high part 0, container index 0.
        out.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&0i64.to_le_bytes());
        // One slot array of one array container.
        out.extend_from_slice(&[1, 0, 0, 0, 0xFE, 1, 0, 0, 0, 1, 2]);
        out.extend_from_slice(&(values.len() as i32).to_le_bytes());
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&1i64.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out
    };
    let hex: String = bitmap(&[10, 20])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex,
        "01010000000000000004000000000000000000000000000000000001000000fe01000000010202000000\
         0a00140001000000000000000000000000000000"
    );
    let got = agg_merge(
        DataType::bytes(),
        "rbm64",
        &[],
        Val::Bytes(bitmap(&[10, 20])),
        Val::Bytes(bitmap(&[20, 30])),
    );
    assert_eq!(got, Val::Bytes(bitmap(&[10, 20, 30])));
    // The empty bitmap is one byte; a union with it is the other side as stored.
    let got = agg_merge(
        DataType::bytes(),
        "rbm64",
        &[],
        Val::Bytes(vec![0]),
        Val::Bytes(bitmap(&[7])),
    );
    assert_eq!(got, Val::Bytes(bitmap(&[7])));
    let t = schema(
        vec![
            col("id", DataType::int()),
            agg_col("v", DataType::bytes(), "rbm64", &[]),
        ],
        &["id"],
    );
    let mut m = merger(&t, &[(TABLE_MERGE_ENGINE, "aggregation")], None);
    // NULL on one side needs no bitmap code.
    let (outcome, row) = up(
        &mut m,
        Some(&[I32(1), Null]),
        &[I32(1), Val::Bytes(vec![1])],
    );
    assert_eq!((outcome, row), (Update, vec![I32(1), Val::Bytes(vec![1])]));
    // Bytes that are no Roaring64Bitmap fail the merge, as Fluss's do.
    let stored = [I32(1), Val::Bytes(vec![1])];
    let old = datums(&stored);
    let err = m
        .upsert(Some(&old), &old, &mut Collect::default())
        .unwrap_err();
    assert!(matches!(err, MergeError::Bitmap { column: 1, .. }), "{err}");
    assert_eq!(ApiError::from(err).code(), ErrorCode::UnknownServerError);
}
