//! Tests of bucket assignment: Fluss's hash on known vectors, the key
//! encoding byte for byte, rows and batches agreeing, sticky and round-robin.

use std::collections::BTreeMap;

use fjord_format::arrow_schema::to_arrow_schema;
use fjord_format::schema::{Schema, TableDescriptor, TableDistribution};
use fjord_format::types::DataType;

use super::*;
use crate::admin::TablePath;
use crate::row::{Datum, RowBatchBuilder, Timestamp};

fn table(
    columns: &[(&str, DataType)],
    bucket_keys: &[&str],
    buckets: i32,
    properties: &[(&str, &str)],
) -> TableInfo {
    let mut schema = Schema::builder();
    for (name, data_type) in columns {
        schema = schema.column(*name, data_type.clone());
    }
    let descriptor = TableDescriptor::new(
        schema.build().unwrap(),
        None,
        Vec::new(),
        Some(TableDistribution {
            bucket_count: Some(buckets),
            bucket_keys: bucket_keys.iter().map(|k| k.to_string()).collect(),
        }),
        properties
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::new(),
    )
    .unwrap();
    TableInfo {
        path: TablePath::new("db", "t"),
        table_id: 1,
        schema_id: 0,
        descriptor,
        earlier_schemas: Vec::new(),
    }
}

fn key_of(data_type: DataType, datum: Datum<'_>) -> Vec<u8> {
    let info = table(&[("k", data_type)], &["k"], 1, &[]);
    let mut encoder = KeyEncoder::new(info.descriptor.schema(), &["k".to_owned()]).unwrap();
    encoder.encode_row(&[datum][..]).unwrap().to_vec()
}

#[test]
fn bucket_of_key_matches_fluss_reference_vectors() {
    // Vectors of Fluss's default bucketing function (fluss-rs and Java tests).
    assert_eq!(fluss_bucket_of_key(&[0, 10], 7), 1);
    assert_eq!(fluss_bucket_of_key(&[0, 10, 10, 10], 12), 0);
    assert_eq!(
        fluss_bucket_of_key(b"2bb87d68-baf9-4e64-90f9-f80910419fa6", 16),
        6
    );
    assert_eq!(
        fluss_bucket_of_key(b"The quick brown fox jumps over the lazy dog", 8),
        6
    );
    assert_eq!(fluss_bucket_of_key(b"anything", 0), 0);
}

#[test]
fn key_columns_encode_in_fluss_compacted_key_format() {
    let cases: Vec<(DataType, Datum<'static>, Vec<u8>)> = vec![
        (DataType::boolean(), Datum::Boolean(true), vec![1]),
        (DataType::tinyint(), Datum::TinyInt(-2), vec![0xfe]),
        (
            DataType::smallint(),
            Datum::SmallInt(0x0102),
            vec![0x02, 0x01],
        ),
        (DataType::int(), Datum::Int(1), vec![1]),
        (DataType::int(), Datum::Int(300), vec![0xac, 0x02]),
        (
            DataType::int(),
            Datum::Int(-1),
            vec![0xff, 0xff, 0xff, 0xff, 0x0f],
        ),
        (DataType::bigint(), Datum::BigInt(300), vec![0xac, 0x02]),
        (
            DataType::bigint(),
            Datum::BigInt(-1),
            vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        ),
        (
            DataType::float(),
            Datum::Float(1.0),
            1.0f32.to_le_bytes().to_vec(),
        ),
        (
            DataType::double(),
            Datum::Double(-2.0),
            (-2.0f64).to_le_bytes().to_vec(),
        ),
        (DataType::string(), Datum::String("ab"), vec![2, b'a', b'b']),
        (
            DataType::char(3).unwrap(),
            Datum::String("x"),
            vec![1, b'x'],
        ),
        (DataType::bytes(), Datum::Binary(&[9, 8]), vec![2, 9, 8]),
        (
            DataType::binary(2).unwrap(),
            Datum::Binary(&[9, 8]),
            vec![2, 9, 8],
        ),
        (
            DataType::date(),
            Datum::Date(19_000),
            vec![0xb8, 0x94, 0x01],
        ),
        (DataType::time(3).unwrap(), Datum::Time(1), vec![1]),
        (
            DataType::decimal(10, 2).unwrap(),
            Datum::Decimal(300),
            vec![0xac, 0x02],
        ),
        (
            DataType::decimal(20, 2).unwrap(),
            Datum::Decimal(0),
            vec![1, 0],
        ),
        (
            DataType::decimal(20, 2).unwrap(),
            Datum::Decimal(-1),
            vec![1, 0xff],
        ),
        (
            DataType::decimal(20, 2).unwrap(),
            Datum::Decimal(128),
            vec![2, 0, 0x80],
        ),
        (
            DataType::decimal(20, 2).unwrap(),
            Datum::Decimal(-129),
            vec![2, 0xff, 0x7f],
        ),
        (
            DataType::decimal(20, 2).unwrap(),
            Datum::Decimal(-128),
            vec![1, 0x80],
        ),
        (
            DataType::timestamp(3).unwrap(),
            Datum::Timestamp(Timestamp::new(300, 5).unwrap()),
            vec![0xac, 0x02],
        ),
        (
            DataType::timestamp(6).unwrap(),
            Datum::Timestamp(Timestamp::new(300, 5).unwrap()),
            vec![0xac, 0x02, 5],
        ),
        (
            DataType::timestamp_ltz(9).unwrap(),
            Datum::TimestampLtz(Timestamp::new(1, 300).unwrap()),
            vec![1, 0xac, 0x02],
        ),
    ];
    for (data_type, datum, expected) in cases {
        assert_eq!(
            key_of(data_type.clone(), datum),
            expected,
            "{data_type} {datum}"
        );
    }
}

#[test]
fn multi_column_keys_concatenate_in_bucket_key_order() {
    let info = table(
        &[
            ("a", DataType::int()),
            ("b", DataType::string()),
            ("c", DataType::bigint()),
        ],
        &["c", "a"],
        3,
        &[],
    );
    let mut encoder =
        KeyEncoder::new(info.descriptor.schema(), info.descriptor.bucket_keys()).unwrap();
    let row = [Datum::Int(1), Datum::String("ignored"), Datum::BigInt(2)];
    assert_eq!(encoder.encode_row(&row[..]).unwrap(), &[2, 1]);
}

#[test]
fn null_or_mistyped_key_values_are_refused_naming_the_column() {
    let info = table(
        &[("id", DataType::int()), ("v", DataType::string())],
        &["id"],
        4,
        &[],
    );
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    assert!(assigner.needs_row());
    let error = assigner
        .assign(&[Datum::Null, Datum::String("x")][..])
        .unwrap_err()
        .to_string();
    assert!(error.contains("`id` is NULL"), "{error}");
    let error = assigner
        .assign(&[Datum::BigInt(1), Datum::Null][..])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`id`") && error.contains("BIGINT value"),
        "{error}"
    );
    let error = assigner
        .assign(&[Datum::Int(1)][..])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("1 fields") && error.contains("2 columns"),
        "{error}"
    );
}

#[test]
fn tables_the_assigner_cannot_bucket_are_refused_at_creation() {
    let columns = [
        ("id", DataType::int()),
        ("tags", DataType::array(DataType::int())),
    ];
    let lake = table(
        &columns,
        &["id"],
        4,
        &[(DATALAKE_FORMAT_PROPERTY, "paimon")],
    );
    let error = BucketAssigner::new(&lake, NoKeyAssigner::Sticky)
        .err()
        .unwrap();
    assert!(error.to_string().contains("paimon"), "{error}");
    let nested = table(&columns, &["tags"], 4, &[]);
    let error = BucketAssigner::new(&nested, NoKeyAssigner::Sticky)
        .err()
        .unwrap();
    assert!(error.to_string().contains("`tags`"), "{error}");
    let lance = table(&columns, &["id"], 4, &[(DATALAKE_FORMAT_PROPERTY, "lance")]);
    assert!(BucketAssigner::new(&lance, NoKeyAssigner::Sticky).is_ok());
}

#[test]
fn batches_hash_to_the_same_buckets_as_their_rows() {
    let columns = [
        ("id", DataType::bigint()),
        ("name", DataType::string()),
        ("ts", DataType::timestamp(6).unwrap()),
        ("t", DataType::time(9).unwrap()),
        ("d", DataType::decimal(25, 3).unwrap()),
        ("ltz", DataType::timestamp_ltz(0).unwrap()),
    ];
    let info = table(&columns, &["id", "name", "ts", "t", "d", "ltz"], 7, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    let mut builder = RowBatchBuilder::new(to_arrow_schema(info.descriptor.schema())).unwrap();
    let names = ["a", "bb", "ccc", "", "héllo"];
    let mut expected = Vec::new();
    for i in 0..50i64 {
        let row = [
            Datum::BigInt(i * 7919 - 100),
            Datum::String(names[i as usize % names.len()]),
            Datum::Timestamp(Timestamp::from_micros(i * 1_000_003 - 5_000)),
            Datum::Time((i as i32) * 3_600_001 % 86_400_000),
            Datum::Decimal(i128::from(i) * 10i128.pow(20) - 7),
            Datum::TimestampLtz(Timestamp::from_millis(i * 1_000)),
        ];
        expected.push(assigner.assign(&row[..]).unwrap());
        builder.append(&row[..]).unwrap();
    }
    let batch = builder.finish().unwrap();
    match assigner.assign_batch(&batch).unwrap() {
        BatchBuckets::PerRow(buckets) => assert_eq!(buckets, expected),
        BatchBuckets::Single(b) => panic!("50 keys all hashed to bucket {b}"),
    }
    // A batch of one key is sent whole.
    let one = batch.slice(3, 1);
    assert_eq!(
        assigner.assign_batch(&one).unwrap(),
        BatchBuckets::Single(expected[3])
    );
}

#[test]
fn null_keys_in_a_batch_are_refused() {
    let info = table(&[("id", DataType::int())], &["id"], 3, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    let mut builder = RowBatchBuilder::new(to_arrow_schema(info.descriptor.schema())).unwrap();
    builder.append(&[Datum::Int(1)][..]).unwrap();
    builder.append(&[Datum::Null][..]).unwrap();
    let batch = builder.finish().unwrap();
    let error = assigner.assign_batch(&batch).unwrap_err().to_string();
    assert!(error.contains("`id` is NULL"), "{error}");
}

#[test]
fn sticky_keeps_one_bucket_until_its_batch_is_sealed() {
    let info = table(&[("v", DataType::int())], &[], 5, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    assert!(!assigner.needs_row() && assigner.is_sticky());
    let empty: [Datum<'_>; 0] = [];
    let first = assigner.assign(&empty[..]).unwrap();
    assert!((0..5).contains(&first));
    for _ in 0..100 {
        assert_eq!(assigner.assign(&empty[..]).unwrap(), first);
    }
    // Sealing another bucket's batch does not move it.
    assigner.on_batch_sealed((first + 1) % 5);
    assert_eq!(assigner.assign(&empty[..]).unwrap(), first);
    let mut current = first;
    for _ in 0..100 {
        assigner.on_batch_sealed(current);
        let next = assigner.assign(&empty[..]).unwrap();
        assert_ne!(next, current);
        assert!((0..5).contains(&next));
        current = next;
    }
}

#[test]
fn sticky_moves_on_after_each_whole_batch() {
    let info = table(&[("v", DataType::int())], &[], 3, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    let empty: [Datum<'_>; 0] = [];
    let row_bucket = assigner.assign(&empty[..]).unwrap();
    let batch = RecordBatch::new_empty(to_arrow_schema(info.descriptor.schema()));
    // The batch takes the rows' current bucket, then the assigner moves on.
    assert_eq!(
        assigner.assign_batch(&batch).unwrap(),
        BatchBuckets::Single(row_bucket)
    );
    let mut previous = assigner.assign(&empty[..]).unwrap();
    assert_ne!(previous, row_bucket);
    let mut seen = [false; 3];
    for _ in 0..60 {
        let BatchBuckets::Single(bucket) = assigner.assign_batch(&batch).unwrap() else {
            panic!("a sticky assigner sends a batch whole")
        };
        assert_eq!(bucket, previous, "the batch takes the current bucket");
        let next = assigner.assign(&empty[..]).unwrap();
        assert_ne!(next, bucket, "and the assigner moves on");
        // Sealing the batch's bucket again (as a writer may) changes nothing.
        assigner.on_batch_sealed(bucket);
        assert_eq!(assigner.assign(&empty[..]).unwrap(), next);
        seen[bucket as usize] = true;
        previous = next;
    }
    assert_eq!(seen, [true; 3], "60 batches over 3 buckets visit all");
}

#[test]
fn sticky_with_one_bucket_stays_on_it() {
    let info = table(&[("v", DataType::int())], &[], 1, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::Sticky).unwrap();
    let empty: [Datum<'_>; 0] = [];
    assert_eq!(assigner.assign(&empty[..]).unwrap(), 0);
    assigner.on_batch_sealed(0);
    assert_eq!(assigner.assign(&empty[..]).unwrap(), 0);
}

#[test]
fn round_robin_visits_every_bucket_in_turn() {
    let info = table(&[("v", DataType::int())], &[], 4, &[]);
    let mut assigner = BucketAssigner::new(&info, NoKeyAssigner::RoundRobin).unwrap();
    assert!(!assigner.needs_row() && !assigner.is_sticky());
    let empty: [Datum<'_>; 0] = [];
    let buckets: Vec<i32> = (0..8)
        .map(|_| assigner.assign(&empty[..]).unwrap())
        .collect();
    for pair in buckets.windows(2) {
        assert_eq!(pair[1], (pair[0] + 1) % 4, "{buckets:?}");
    }
}

#[test]
fn no_key_assigner_parses_fluss_option_values() {
    assert_eq!(
        "STICKY".parse::<NoKeyAssigner>().unwrap(),
        NoKeyAssigner::Sticky
    );
    assert_eq!(
        "round_robin".parse::<NoKeyAssigner>().unwrap(),
        NoKeyAssigner::RoundRobin
    );
    let error = "hash".parse::<NoKeyAssigner>().unwrap_err().to_string();
    assert!(error.contains("no-key-assigner"), "{error}");
}
