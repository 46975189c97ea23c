//! Statistics blocks: written blocks parse back to the batch's true bounds
//! (property test), a block laid out byte by byte as Fluss's Java writer
//! lays it out parses, and `may_match` skips only what the bounds rule out.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampMicrosecondArray,
};
use proptest::prelude::*;

use super::*;
use crate::arrow_schema::to_arrow_schema;
use crate::schema::Column;

fn schema() -> Schema {
    Schema::new(
        vec![
            Column::new("id", DataType::bigint()),
            Column::new("name", DataType::string()),
            Column::new("score", DataType::double()),
            Column::new("ok", DataType::boolean()),
            Column::new("price", DataType::decimal(10, 2).unwrap()),
            Column::new("big", DataType::decimal(30, 0).unwrap()),
            Column::new("at", DataType::timestamp(6).unwrap()),
            Column::new("n", DataType::int()),
            Column::new("raw", DataType::bytes()),
        ],
        None,
        vec![],
        None,
    )
    .unwrap()
}

fn batch(ids: Vec<Option<i64>>, names: Vec<Option<&str>>) -> RecordBatch {
    let rows = ids.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids)),
        Arc::new(StringArray::from(names)),
        Arc::new(Float64Array::from(vec![Some(1.5); rows])),
        Arc::new(BooleanArray::from(vec![Some(true); rows])),
        Arc::new(
            Decimal128Array::from(vec![Some(-1234); rows])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(vec![Some(-(1i128 << 100)); rows])
                .with_precision_and_scale(30, 0)
                .unwrap(),
        ),
        Arc::new(TimestampMicrosecondArray::from(vec![Some(-1_500); rows])),
        Arc::new(Int32Array::from(vec![None::<i32>; rows])),
        Arc::new(arrow_array::BinaryArray::from(vec![Some(&b"x"[..]); rows])),
    ];
    RecordBatch::try_new(to_arrow_schema(&schema()), columns).unwrap()
}

fn all_columns() -> Vec<usize> {
    resolve_columns(&schema(), Some("*")).unwrap().unwrap()
}

#[test]
fn star_takes_supported_columns_and_a_list_is_checked() {
    let s = schema();
    assert_eq!(all_columns(), vec![0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(resolve_columns(&s, None).unwrap(), None);
    assert_eq!(
        resolve_columns(&s, Some(" name , id,name")).unwrap(),
        Some(vec![1, 0])
    );
    assert!(matches!(
        resolve_columns(&s, Some("nope")),
        Err(StatisticsError::UnknownColumn(_))
    ));
    assert!(matches!(
        resolve_columns(&s, Some("raw")),
        Err(StatisticsError::UnsupportedType { .. })
    ));
    assert_eq!(
        resolve_columns(&s, Some(" , ")),
        Err(StatisticsError::Empty)
    );
}

#[test]
fn every_supported_type_round_trips() {
    let b = batch(
        vec![Some(5), None, Some(-3)],
        vec![Some("a much longer string"), Some("abc"), None],
    );
    let columns = all_columns();
    let mut out = Vec::new();
    write_statistics(&b, &schema(), &columns, &mut out).unwrap();
    let stats = parse_statistics(&out, &schema()).unwrap();
    assert_eq!(stats.columns, columns);
    assert_eq!(stats.null_counts, vec![1, 1, 0, 0, 0, 0, 0, 3]);
    assert_eq!(stats.min[0], Some(StatValue::Int(-3)));
    assert_eq!(stats.max[0], Some(StatValue::Int(5)));
    assert_eq!(
        stats.min[1],
        Some(StatValue::Str("a much longer string".into()))
    );
    assert_eq!(stats.max[1], Some(StatValue::Str("abc".into())));
    assert_eq!(stats.max[2], Some(StatValue::Float(1.5)));
    assert_eq!(stats.min[3], Some(StatValue::Bool(true)));
    assert_eq!(stats.min[4], Some(StatValue::Decimal(-1234)));
    assert_eq!(stats.min[5], Some(StatValue::Decimal(-(1i128 << 100))));
    assert_eq!(
        stats.min[6],
        Some(StatValue::Timestamp {
            millis: -2,
            nanos: 500_000
        })
    );
    assert_eq!(stats.min[7], None, "an all-NULL column has no bounds");
    assert_eq!(stats.max[7], None);
}

/// The block for (INT id, STRING name) with id in [7, 42], one NULL name and
/// names in ["apple", "a string of 16 b"], written out field by field as
/// Java's `LogRecordBatchStatisticsWriter` + `AlignedRowWriter` do.
#[test]
fn a_block_laid_out_as_fluss_writes_it_parses() {
    let schema = Schema::new(
        vec![
            Column::new("id", DataType::int()),
            Column::new("name", DataType::string()),
        ],
        None,
        vec![],
        None,
    )
    .unwrap();
    let row = |id: i32, name: &[u8]| -> Vec<u8> {
        // 8 null-bit bytes (arity 2 + 8 header bits fit one word), 2 slots.
        let mut r = vec![0u8; 8 + 16];
        r[8..12].copy_from_slice(&id.to_le_bytes());
        if name.len() <= 7 {
            r[16..16 + name.len()].copy_from_slice(name);
            r[23] = 0x80 | name.len() as u8;
        } else {
            let offset = r.len() as u64;
            r.extend_from_slice(name);
            r.resize(r.len().div_ceil(8) * 8, 0);
            r[16..24].copy_from_slice(&((offset << 32) | name.len() as u64).to_le_bytes());
        }
        r
    };
    let mut block = vec![1u8];
    block.extend_from_slice(&2i16.to_le_bytes());
    block.extend_from_slice(&0i16.to_le_bytes());
    block.extend_from_slice(&1i16.to_le_bytes());
    block.extend_from_slice(&0i32.to_le_bytes());
    block.extend_from_slice(&1i32.to_le_bytes());
    for r in [row(7, b"apple"), row(42, b"a string of 16 b")] {
        block.extend_from_slice(&(r.len() as i32).to_le_bytes());
        block.extend_from_slice(&r);
    }
    let stats = parse_statistics(&block, &schema).unwrap();
    assert_eq!(stats.columns, vec![0, 1]);
    assert_eq!(stats.null_counts, vec![0, 1]);
    assert_eq!(
        stats.min,
        vec![
            Some(StatValue::Int(7)),
            Some(StatValue::Str("apple".into()))
        ]
    );
    assert_eq!(
        stats.max,
        vec![
            Some(StatValue::Int(42)),
            Some(StatValue::Str("a string of 16 b".into()))
        ]
    );
    // Our writer produces the same bytes for the same bounds.
    let b = RecordBatch::try_new(
        to_arrow_schema(&schema),
        vec![
            Arc::new(Int32Array::from(vec![Some(42), Some(7)])),
            Arc::new(StringArray::from(vec![Some("apple"), None])),
        ],
    )
    .unwrap();
    let mut ours = Vec::new();
    write_statistics(&b, &schema, &[0, 1], &mut ours).unwrap();
    let mut theirs_for_ours = block.clone();
    // Ours has max name "apple" (one non-NULL name): rebuild Java's bytes.
    theirs_for_ours.truncate(3 + 4 + 8);
    for r in [row(7, b"apple"), row(42, b"apple")] {
        theirs_for_ours.extend_from_slice(&(r.len() as i32).to_le_bytes());
        theirs_for_ours.extend_from_slice(&r);
    }
    assert_eq!(ours, theirs_for_ours);
}

#[test]
fn malformed_blocks_are_errors_not_panics() {
    let b = batch(vec![Some(1)], vec![Some("abcdefghijk")]);
    let mut out = Vec::new();
    write_statistics(&b, &schema(), &all_columns(), &mut out).unwrap();
    for cut in 0..out.len() {
        assert!(
            parse_statistics(&out[..cut], &schema()).is_err(),
            "cut {cut}"
        );
    }
    let mut bad = out.clone();
    bad[0] = 2;
    assert!(parse_statistics(&bad, &schema()).is_err());
}

fn leaf(column: usize, function: LeafFunction, v: StatValue) -> Predicate {
    Predicate::Leaf {
        column,
        function,
        literals: vec![Some(v)],
    }
}

#[test]
fn may_match_skips_only_what_bounds_rule_out() {
    let b = batch(
        vec![Some(10), Some(20), None],
        vec![Some("m"), Some("p"), None],
    );
    let mut out = Vec::new();
    write_statistics(&b, &schema(), &all_columns(), &mut out).unwrap();
    let s = parse_statistics(&out, &schema()).unwrap();
    use LeafFunction::*;
    let int = StatValue::Int;
    assert!(!s.may_match(&leaf(0, GreaterThan, int(20)), 3));
    assert!(s.may_match(&leaf(0, GreaterOrEqual, int(20)), 3));
    assert!(!s.may_match(&leaf(0, LessThan, int(10)), 3));
    assert!(s.may_match(&leaf(0, LessOrEqual, int(10)), 3));
    assert!(!s.may_match(&leaf(0, Equal, int(21)), 3));
    assert!(s.may_match(&leaf(0, Equal, int(15)), 3));
    assert!(s.may_match(&leaf(0, NotEqual, int(15)), 3));
    assert!(s.may_match(&leaf(0, IsNull, int(0)), 3));
    let in_list = Predicate::Leaf {
        column: 0,
        function: In,
        literals: vec![Some(int(1)), Some(int(30))],
    };
    assert!(!s.may_match(&in_list, 3));
    let strings = leaf(1, GreaterThan, StatValue::Str("p".into()));
    assert!(!s.may_match(&strings, 3));
    assert!(s.may_match(&leaf(1, GreaterThan, StatValue::Str("o".into())), 3));
    // AND / OR.
    let and = Predicate::And(vec![leaf(0, Equal, int(15)), strings.clone()]);
    assert!(!s.may_match(&and, 3));
    let or = Predicate::Or(vec![leaf(0, Equal, int(15)), strings]);
    assert!(s.may_match(&or, 3));
    // Unknown column, mismatched literal type, NaN: never skipped.
    assert!(s.may_match(&leaf(8, Equal, int(0)), 3));
    assert!(s.may_match(&leaf(0, Equal, StatValue::Str("x".into())), 3));
    assert!(s.may_match(&leaf(2, GreaterThan, StatValue::Float(f64::NAN)), 3));
    assert!(!s.may_match(&leaf(2, GreaterThan, StatValue::Float(1.5)), 3));
    // All-NULL column: comparisons are never TRUE, IS NULL is.
    assert!(!s.may_match(&leaf(7, Equal, int(1)), 3));
    assert!(s.may_match(&leaf(7, IsNull, int(0)), 3));
    assert!(!s.may_match(&leaf(7, IsNotNull, int(0)), 3));
}

#[test]
fn a_nan_bound_never_rules_a_batch_out() {
    let s = Schema::new(
        vec![Column::new("x", DataType::double())],
        None,
        vec![],
        None,
    )
    .unwrap();
    let b = RecordBatch::try_new(
        to_arrow_schema(&s),
        vec![Arc::new(Float64Array::from(vec![1.0, f64::NAN, -f64::NAN]))],
    )
    .unwrap();
    let mut out = Vec::new();
    write_statistics(&b, &s, &[0], &mut out).unwrap();
    let stats = parse_statistics(&out, &s).unwrap();
    for v in [-1e300, 0.5, 1.0, 2.0, 1e300] {
        for f in [
            LeafFunction::Equal,
            LeafFunction::LessThan,
            LeafFunction::GreaterThan,
        ] {
            assert!(stats.may_match(&leaf(0, f, StatValue::Float(v)), 3));
        }
    }
}

proptest! {
    #[test]
    fn bounds_are_the_true_min_and_max(
        ids in proptest::collection::vec(proptest::option::of(any::<i64>()), 1..50),
        names in proptest::collection::vec(proptest::option::of("\\PC{0,20}"), 1..50),
    ) {
        let rows = ids.len().min(names.len());
        let ids = ids[..rows].to_vec();
        let names: Vec<Option<&str>> = names[..rows].iter().map(|n| n.as_deref()).collect();
        let b = batch(ids.clone(), names.clone());
        let mut out = Vec::new();
        write_statistics(&b, &schema(), &all_columns(), &mut out).unwrap();
        let s = parse_statistics(&out, &schema()).unwrap();
        let present: Vec<i64> = ids.iter().flatten().copied().collect();
        prop_assert_eq!(s.min[0].clone(), present.iter().min().map(|&v| StatValue::Int(v)));
        prop_assert_eq!(s.max[0].clone(), present.iter().max().map(|&v| StatValue::Int(v)));
        let texts: Vec<&str> = names.iter().flatten().copied().collect();
        prop_assert_eq!(s.min[1].clone(), texts.iter().min().map(|v| StatValue::Str(v.to_string())));
        prop_assert_eq!(s.max[1].clone(), texts.iter().max().map(|v| StatValue::Str(v.to_string())));
        // A row exists for every value it holds: never skipped by an equality on it.
        for &v in &present {
            prop_assert!(s.may_match(&leaf(0, LeafFunction::Equal, StatValue::Int(v)), rows as i32));
        }
    }
}
