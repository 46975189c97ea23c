//! Data-driven tests of the Fluss JSON forms: documents written the way the
//! Java client (`TableDescriptorJsonSerde`, Jackson, key order as written),
//! fluss-rs / pyfluss (`json_serde.rs`, serde_json with sorted keys) and a
//! pre-column-id Fluss produce them, checked for parse → serialise → parse
//! stability and semantic equality, plus malformed documents that must fail
//! with an error naming the problem.

use fjord_format::json::{data_type_from_json, data_type_to_json, table_from_json, table_to_json};
use fjord_format::types::TypeKind;
use fjord_format::{DataType, DatabaseDescriptor, Schema, TableDescriptor};
use serde_json::Value;

/// Java client, log table with most column types, 3 buckets, no bucket key.
const JAVA_LOG_TABLE: &str = r#"{"version":1,"schema":{"version":1,"columns":[
 {"name":"b","data_type":{"type":"BOOLEAN"},"id":0},
 {"name":"i8","data_type":{"type":"TINYINT"},"id":1},
 {"name":"i16","data_type":{"type":"SMALLINT"},"id":2},
 {"name":"i32","data_type":{"type":"INTEGER","nullable":false},"comment":"not null","id":3},
 {"name":"i64","data_type":{"type":"BIGINT"},"id":4},
 {"name":"f32","data_type":{"type":"FLOAT"},"id":5},
 {"name":"f64","data_type":{"type":"DOUBLE"},"id":6},
 {"name":"c","data_type":{"type":"CHAR","length":5},"id":7},
 {"name":"s","data_type":{"type":"STRING"},"id":8},
 {"name":"d","data_type":{"type":"DECIMAL","precision":10,"scale":2},"id":9},
 {"name":"day","data_type":{"type":"DATE"},"id":10},
 {"name":"t","data_type":{"type":"TIME_WITHOUT_TIME_ZONE","precision":3},"id":11},
 {"name":"ts","data_type":{"type":"TIMESTAMP_WITHOUT_TIME_ZONE","precision":6},"id":12},
 {"name":"ltz","data_type":{"type":"TIMESTAMP_WITH_LOCAL_TIME_ZONE","precision":3},"id":13},
 {"name":"raw","data_type":{"type":"BYTES"},"id":14},
 {"name":"fixed","data_type":{"type":"BINARY","length":4},"id":15},
 {"name":"tags","data_type":{"type":"ARRAY","element_type":{"type":"STRING"}},"id":16},
 {"name":"attrs","data_type":{"type":"MAP","key_type":{"type":"STRING","nullable":false},"value_type":{"type":"INTEGER"}},"id":17},
 {"name":"pt","data_type":{"type":"ROW","fields":[
    {"name":"x","field_type":{"type":"DOUBLE"},"field_id":19},
    {"name":"y","field_type":{"type":"DOUBLE"},"description":"north","field_id":20}]},"id":18}
],"highest_field_id":20},"comment":"all types","partition_key":[],"bucket_key":[],"bucket_count":3,
"properties":{"table.log.arrow.compression.type":"ZSTD","table.replication.factor":"1"},
"custom_properties":{"owner":"fjord"}}"#;

/// fluss-rs `TableDescriptor::serialize_json`: serde_json sorts the keys.
const FLUSS_RS_LOG_TABLE: &str = r#"{"bucket_count":4,"bucket_key":["user_id"],"custom_properties":{},
"partition_key":[],"properties":{"table.log.format":"ARROW"},"schema":{"columns":[
 {"data_type":{"type":"BIGINT"},"id":0,"name":"user_id"},
 {"data_type":{"type":"BIGINT"},"id":1,"name":"item_id"},
 {"data_type":{"type":"BIGINT"},"id":2,"name":"category_id"},
 {"data_type":{"type":"STRING"},"id":3,"name":"behavior"},
 {"data_type":{"precision":3,"type":"TIMESTAMP_WITHOUT_TIME_ZONE"},"id":4,"name":"ts"}],
 "highest_field_id":4,"version":1},"version":1}"#;

/// Java client, partitioned primary-key table without explicit bucket keys
/// (the Java builder fills the default into the JSON it sends).
const JAVA_PK_TABLE: &str = r#"{"version":1,"schema":{"version":1,"columns":[
 {"name":"id","data_type":{"type":"BIGINT","nullable":false},"id":0},
 {"name":"dt","data_type":{"type":"STRING","nullable":false},"id":1},
 {"name":"v","data_type":{"type":"STRING"},"id":2}],
 "primary_key":["id","dt"],"highest_field_id":2},
 "partition_key":["dt"],"bucket_key":["id"],"properties":{},"custom_properties":{}}"#;

/// A schema written before Fluss had column ids.
const LEGACY_TABLE: &str = r#"{"version":1,"schema":{"version":1,"columns":[
 {"name":"a","data_type":{"type":"INTEGER","nullable":false},"comment":"first"},
 {"name":"b","data_type":{"type":"STRING"}}]},
 "partition_key":[],"properties":{},"custom_properties":{}}"#;

fn parse(json: &str) -> TableDescriptor {
    TableDescriptor::from_json_bytes(json.as_bytes())
        .unwrap_or_else(|e| panic!("fixture must parse: {e}"))
}

/// Parses, serialises, re-parses: the value is stable and the JSON we write
/// is semantically the document we read (after Fluss's normalisation).
fn check_round_trip(json: &str) -> TableDescriptor {
    let table = parse(json);
    let written = table.to_json_bytes();
    let again = TableDescriptor::from_json_bytes(&written).expect("our JSON must parse");
    assert_eq!(table, again);
    let ours: Value = serde_json::from_slice(&written).unwrap();
    assert_eq!(ours, table_to_json(&again));
    table
}

#[test]
fn java_log_table_round_trips_with_every_type() {
    let table = check_round_trip(JAVA_LOG_TABLE);
    assert_eq!(table.bucket_count(), Some(3));
    assert!(table.bucket_keys().is_empty());
    assert_eq!(table.comment(), Some("all types"));
    assert_eq!(table.custom_properties()["owner"], "fjord");
    let schema = table.schema();
    assert_eq!(schema.columns().len(), 19);
    assert_eq!(schema.highest_field_id(), 20);
    assert!(!schema.columns()[3].data_type.is_nullable());
    assert_eq!(schema.columns()[3].comment.as_deref(), Some("not null"));
    let TypeKind::Row(fields) = schema.columns()[18].data_type.kind() else {
        panic!("pt is a ROW")
    };
    assert_eq!(fields[1].field_id, 20);
    assert_eq!(fields[1].description.as_deref(), Some("north"));
    // What we write is exactly what the Java client wrote.
    let original: Value = serde_json::from_str(JAVA_LOG_TABLE).unwrap();
    assert_eq!(table_to_json(&table), original);
}

#[test]
fn fluss_rs_sorted_key_json_parses_to_the_same_shape() {
    let table = check_round_trip(FLUSS_RS_LOG_TABLE);
    assert_eq!(table.bucket_count(), Some(4));
    assert_eq!(table.bucket_keys(), ["user_id".to_string()]);
    let ts = &table.schema().columns()[4];
    assert_eq!(ts.data_type, DataType::timestamp(3).unwrap());
    let original: Value = serde_json::from_str(FLUSS_RS_LOG_TABLE).unwrap();
    assert_eq!(table_to_json(&table), original);
}

#[test]
fn primary_key_table_keeps_keys_and_not_null() {
    let table = check_round_trip(JAVA_PK_TABLE);
    assert_eq!(table.schema().primary_key().unwrap(), ["id", "dt"]);
    assert_eq!(table.partition_keys(), ["dt".to_string()]);
    assert_eq!(table.bucket_keys(), ["id".to_string()]);
    assert_eq!(table.bucket_count(), None);
}

#[test]
fn legacy_schema_without_ids_gets_positions() {
    let table = check_round_trip(LEGACY_TABLE);
    let ids: Vec<i32> = table.schema().columns().iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![0, 1]);
    assert_eq!(table.schema().highest_field_id(), 1);
    assert!(table.distribution().is_none());
}

#[test]
fn server_defaults_make_the_get_table_info_form() {
    let table = parse(LEGACY_TABLE).with_server_defaults(1, 1);
    let json: Value = serde_json::from_slice(&table.to_json_bytes()).unwrap();
    assert_eq!(json["bucket_count"], 1);
    assert_eq!(json["bucket_key"], serde_json::json!([]));
    assert_eq!(json["properties"]["table.replication.factor"], "1");
}

#[test]
fn every_type_round_trips_through_its_json() {
    let types = [
        DataType::boolean(),
        DataType::tinyint().not_null(),
        DataType::smallint(),
        DataType::int(),
        DataType::bigint(),
        DataType::float(),
        DataType::double(),
        DataType::char(1).unwrap(),
        DataType::string().not_null(),
        DataType::decimal(38, 0).unwrap(),
        DataType::date(),
        DataType::time(0).unwrap(),
        DataType::timestamp(9).unwrap(),
        DataType::timestamp_ltz(0).unwrap(),
        DataType::bytes(),
        DataType::binary(1).unwrap(),
        DataType::array(DataType::array(DataType::int().not_null())),
        DataType::map(DataType::int(), DataType::string()),
        DataType::row(vec![
            fjord_format::DataField::new("a", DataType::int()).with_id(7)
        ]),
    ];
    for t in types {
        let back = data_type_from_json(&data_type_to_json(&t)).unwrap();
        assert_eq!(back, t, "{t}");
    }
}

/// Replaces `from` by `to` in a good fixture and expects an error containing `needle`.
fn check_error(base: &str, from: &str, to: &str, needle: &str) {
    assert!(base.contains(from), "fixture lacks {from:?}");
    let bad = base.replacen(from, to, 1);
    let err = TableDescriptor::from_json_bytes(bad.as_bytes())
        .expect_err("malformed table JSON must be refused")
        .to_string();
    assert!(
        err.contains(needle),
        "error {err:?} should mention {needle:?}"
    );
}

#[test]
fn malformed_tables_fail_with_errors_naming_the_problem() {
    let cases = [
        (
            r#""type":"BIGINT"},"id":1"#,
            r#""type":"LONG"},"id":1"#,
            "unknown data type `LONG`",
        ),
        (
            r#""bucket_key":["user_id"]"#,
            r#""bucket_key":["nobody"]"#,
            "bucket key `nobody` does not exist",
        ),
        (
            r#""precision":3,"type""#,
            r#""type""#,
            "missing required field `precision`",
        ),
        (
            r#""precision":3,"type""#,
            r#""precision":12,"type""#,
            "precision 12 is outside 0..=9",
        ),
        (
            r#""partition_key":[],"#,
            "",
            "missing required field `partition_key`",
        ),
        (
            r#""table.log.format":"ARROW""#,
            r#""table.log.format":3"#,
            "`properties`",
        ),
        (
            r#""bucket_count":4"#,
            r#""bucket_count":0"#,
            "bucket count must be at least 1",
        ),
        (
            r#""bucket_count":4"#,
            r#""bucket_count":"4""#,
            "`bucket_count`",
        ),
        (
            r#""id":1,"name":"item_id""#,
            r#""id":0,"name":"item_id""#,
            "field id 0 is used twice",
        ),
        (
            r#""highest_field_id":4"#,
            r#""highest_field_id":3"#,
            "highest field id 3",
        ),
        (
            r#""name":"category_id""#,
            r#""name":"user_id""#,
            "column `user_id` is defined twice",
        ),
        (r#""version":1}"#, r#""version":2}"#, "`version`"),
    ];
    for (from, to, needle) in cases {
        check_error(FLUSS_RS_LOG_TABLE, from, to, needle);
    }
    check_error(
        JAVA_LOG_TABLE,
        r#""type":"DECIMAL","precision":10,"scale":2"#,
        r#""type":"DECIMAL","precision":10,"scale":11"#,
        "scale 11 is larger than precision 10",
    );
    check_error(
        JAVA_LOG_TABLE,
        r#""nullable":false},"comment""#,
        r#""nullable":"no"},"comment""#,
        "`nullable`",
    );
    check_error(
        JAVA_PK_TABLE,
        r#""primary_key":["id","dt"]"#,
        r#""primary_key":["id","nope"]"#,
        "primary key column `nope`",
    );
    let err = TableDescriptor::from_json_bytes(b"{not json").unwrap_err();
    assert!(err.to_string().contains("malformed JSON"), "{err}");
}

#[test]
fn database_descriptor_round_trips_and_tolerates_missing_properties() {
    let java = br#"{"version":1,"comment":"analytics","custom_properties":{"k":"v"}}"#;
    let db = DatabaseDescriptor::from_json_bytes(java).unwrap();
    assert_eq!(db.comment.as_deref(), Some("analytics"));
    assert_eq!(db.custom_properties["k"], "v");
    assert_eq!(
        DatabaseDescriptor::from_json_bytes(&db.to_json_bytes()).unwrap(),
        db
    );
    let bare = DatabaseDescriptor::from_json_bytes(br#"{"version":1}"#).unwrap();
    assert_eq!(bare, DatabaseDescriptor::default());
    assert!(DatabaseDescriptor::from_json_bytes(br#"{"comment":5}"#).is_err());
}

#[test]
fn schema_json_alone_round_trips() {
    let table = parse(JAVA_LOG_TABLE);
    let bytes = table.schema().to_json_bytes();
    assert_eq!(&Schema::from_json_bytes(&bytes).unwrap(), table.schema());
    let _ = table_from_json(&serde_json::from_str::<Value>(JAVA_LOG_TABLE).unwrap()).unwrap();
}

mod random_types {
    use super::*;
    use fjord_format::DataField;
    use proptest::prelude::*;

    fn leaf() -> impl Strategy<Value = DataType> {
        prop_oneof![
            Just(DataType::boolean()),
            Just(DataType::tinyint()),
            Just(DataType::smallint()),
            Just(DataType::int()),
            Just(DataType::bigint()),
            Just(DataType::float()),
            Just(DataType::double()),
            Just(DataType::string()),
            Just(DataType::date()),
            Just(DataType::bytes()),
            (1u32..1000).prop_map(|n| DataType::char(n).unwrap()),
            (1u32..1000).prop_map(|n| DataType::binary(n).unwrap()),
            (1u32..=38)
                .prop_flat_map(|p| (Just(p), 0..=p))
                .prop_map(|(p, s)| DataType::decimal(p, s).unwrap()),
            (0u32..=9).prop_map(|p| DataType::time(p).unwrap()),
            (0u32..=9).prop_map(|p| DataType::timestamp(p).unwrap()),
            (0u32..=9).prop_map(|p| DataType::timestamp_ltz(p).unwrap()),
        ]
    }

    fn any_type() -> impl Strategy<Value = DataType> {
        let nested = leaf().prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(DataType::array),
                (inner.clone(), inner.clone()).prop_map(|(k, v)| DataType::map(k, v)),
                prop::collection::vec(("[a-z]{1,6}", inner, any::<Option<String>>()), 1..4)
                    .prop_map(|fields| {
                        DataType::row(
                            fields
                                .into_iter()
                                .enumerate()
                                .map(|(i, (name, t, description))| DataField {
                                    description,
                                    ..DataField::new(name, t).with_id(i as i32)
                                })
                                .collect(),
                        )
                    }),
            ]
        });
        (nested, any::<bool>()).prop_map(|(t, nullable)| t.with_nullable(nullable))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_type_round_trips_through_json_text(t in any_type()) {
            let text = data_type_to_json(&t).to_string();
            let value: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(data_type_from_json(&value).unwrap(), t);
        }
    }
}
