//! The print sink writes exactly the JSON lines issue 6 specifies, for every
//! column type; the values sink counts events by kind.

use std::sync::Arc;

use fjord_cdc::event::{ColumnPosition, EventBatch, SchemaChange, SchemaChangeEvent};
use fjord_cdc::schema::{Column, TableId, TableSchema};
use fjord_cdc::sink::print::PrintSink;
use fjord_cdc::sink::values::{EventCounts, ValuesSink};
use fjord_cdc::sink::Sink;
use fjord_cdc::types::DataType;

fn all_types_schema() -> Arc<TableSchema> {
    let columns = vec![
        Column::new("c_bool", DataType::Boolean, true),
        Column::new("c_tinyint", DataType::TinyInt, true),
        Column::new("c_smallint", DataType::SmallInt, true),
        Column::new("c_int", DataType::Int, true),
        Column::new("c_bigint", DataType::BigInt, false),
        Column::new("c_float", DataType::Float, true),
        Column::new("c_double", DataType::Double, true),
        Column::new(
            "c_dec",
            DataType::Decimal {
                precision: 10,
                scale: 2,
            },
            true,
        ),
        Column::new(
            "c_ubig",
            DataType::Decimal {
                precision: 20,
                scale: 0,
            },
            true,
        ),
        Column::new(
            "c_wide",
            DataType::Decimal {
                precision: 65,
                scale: 30,
            },
            true,
        ),
        Column::new("c_char", DataType::Char { length: 3 }, true),
        Column::new("c_varchar", DataType::Varchar { length: 16 }, true),
        Column::new("c_text", DataType::String, true),
        Column::new("c_json", DataType::Json, true),
        Column::new("c_binary", DataType::Binary { length: 2 }, true),
        Column::new("c_varbinary", DataType::Varbinary { length: 8 }, true),
        Column::new("c_blob", DataType::Bytes, true),
        Column::new("c_date", DataType::Date, true),
        Column::new("c_time", DataType::Time { precision: 0 }, true),
        Column::new("c_time3", DataType::Time { precision: 3 }, true),
        Column::new("c_datetime", DataType::Timestamp { precision: 0 }, true),
        Column::new("c_datetime6", DataType::Timestamp { precision: 6 }, true),
        Column::new("c_ts3", DataType::TimestampLtz { precision: 3 }, true),
        Column::new("c_ts9", DataType::TimestampLtz { precision: 9 }, true),
    ];
    Arc::new(
        TableSchema::new(TableId::new("shop", "all_types"), 1, columns, &["c_bigint"]).unwrap(),
    )
}

fn print(batch: &EventBatch) -> String {
    let mut sink = PrintSink::new(Vec::new());
    sink.write_batch(batch).unwrap();
    sink.flush().unwrap();
    String::from_utf8(sink.into_inner()).unwrap()
}

#[test]
fn every_type_prints_with_exact_json_spelling() {
    let schema = all_types_schema();
    let mut batch = EventBatch::default();
    let slot = batch.table_slot(&schema);
    let mut w = batch.row_writer(slot);
    w.set_bool(0, true);
    w.set_i64(1, -128);
    w.set_i64(2, 32767);
    w.set_i64(3, -2147483648);
    w.set_i64(4, 9223372036854775807);
    w.set_f32(5, 1.5);
    w.set_f64(6, -0.1);
    w.set_decimal_unscaled(7, -12345);
    w.set_decimal_digits(8, false, b"18446744073709551615");
    w.set_decimal_digits(
        9,
        false,
        b"12345678901234567890123456789012345678901234567890123456789012345",
    );
    w.set_str(10, "abc");
    w.set_str(11, "quote\" and \\ é\n");
    w.set_str(12, "日本語");
    w.set_str(13, r#"{"a": [1, 2.5, null], "b": {"c": "d"}}"#);
    w.set_bytes(14, &[0x00, 0xff]);
    w.set_bytes(15, b"hello");
    w.set_bytes(16, &[1, 2, 3, 4]);
    w.set_i64(17, 19_723); // 2024-01-01
    w.set_micros(18, -(838 * 3600 + 59 * 60 + 59) * 1_000_000);
    w.set_micros(19, (12 * 3600 + 34 * 60 + 56) * 1_000_000 + 789_000);
    w.set_micros(20, 1_704_067_199_000_000); // 2023-12-31T23:59:59
    w.set_micros(21, 1_704_067_199_000_001);
    w.set_micros(22, 1_704_067_200_120_000);
    w.set_nanos(23, 1_704_067_200_123_456_789);
    let row = w.finish().unwrap();
    batch.push_insert(slot, row);

    let expected = concat!(
        r#"{"table":"shop.all_types","op":"insert","before":null,"after":{"#,
        r#""c_bool":true,"c_tinyint":-128,"c_smallint":32767,"c_int":-2147483648,"#,
        r#""c_bigint":9223372036854775807,"c_float":1.5,"c_double":-0.1,"c_dec":"-123.45","#,
        r#""c_ubig":"18446744073709551615","#,
        r#""c_wide":"12345678901234567890123456789012345.678901234567890123456789012345","#,
        r#""c_char":"abc","c_varchar":"quote\" and \\ é\n","c_text":"日本語","#,
        r#""c_json":{"a": [1, 2.5, null], "b": {"c": "d"}},"#,
        r#""c_binary":"AP8=","c_varbinary":"aGVsbG8=","c_blob":"AQIDBA==","#,
        r#""c_date":"2024-01-01","c_time":"-838:59:59","c_time3":"12:34:56.789","#,
        r#""c_datetime":"2023-12-31T23:59:59","c_datetime6":"2023-12-31T23:59:59.000001","#,
        r#""c_ts3":"2024-01-01T00:00:00.120Z","c_ts9":"2024-01-01T00:00:00.123456789Z"}}"#,
        "\n"
    );
    assert_eq!(print(&batch), expected);
}

#[test]
fn nulls_updates_and_deletes_print_before_and_after() {
    let schema = Arc::new(
        TableSchema::new(
            TableId::new("db", "t"),
            1,
            vec![
                Column::new("id", DataType::Int, false),
                Column::new("v", DataType::Varchar { length: 10 }, true),
            ],
            &["id"],
        )
        .unwrap(),
    );
    let mut batch = EventBatch::default();
    let slot = batch.table_slot(&schema);
    let mut w = batch.row_writer(slot);
    w.set_i64(0, 1);
    let before = w.finish().unwrap();
    let mut w = batch.row_writer(slot);
    w.set_i64(0, 1);
    w.set_str(1, "x");
    let after = w.finish().unwrap();
    batch.push_update(slot, before, after);
    batch.push_delete(slot, after);
    assert_eq!(
        print(&batch),
        concat!(
            r#"{"table":"db.t","op":"update","before":{"id":1,"v":null},"after":{"id":1,"v":"x"}}"#,
            "\n",
            r#"{"table":"db.t","op":"delete","before":{"id":1,"v":"x"},"after":null}"#,
            "\n"
        )
    );
}

#[test]
fn schema_changes_print_as_schema_change_objects() {
    let schema = Arc::new(
        TableSchema::new(
            TableId::new("db", "t"),
            1,
            vec![Column::new("id", DataType::BigInt, false)],
            &["id"],
        )
        .unwrap(),
    );
    let table = TableId::new("db", "t");
    let mut batch = EventBatch::default();
    let changes = [
        SchemaChange::CreateTable,
        SchemaChange::AddColumn {
            column: Column::new(
                "price",
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            position: ColumnPosition::After("id".into()),
        },
        SchemaChange::RenameColumn {
            from: "price".into(),
            to: "cost".into(),
        },
        SchemaChange::AlterColumnType {
            name: "cost".into(),
            data_type: DataType::Double,
        },
        SchemaChange::DropColumn {
            name: "cost".into(),
        },
        SchemaChange::TruncateTable,
        SchemaChange::DropTable,
    ];
    for change in changes {
        batch.push_schema_change(SchemaChangeEvent {
            table: table.clone(),
            schema: (change != SchemaChange::DropTable).then(|| Arc::clone(&schema)),
            change,
        });
    }
    let lines: Vec<String> = print(&batch).lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        [
            r#"{"table":"db.t","schema_change":{"type":"create_table","columns":[{"name":"id","type":"BIGINT","nullable":false}],"primary_key":["id"]}}"#,
            r#"{"table":"db.t","schema_change":{"type":"add_column","column":{"name":"price","type":"DECIMAL(10, 2)","nullable":true},"position":{"after":"id"}}}"#,
            r#"{"table":"db.t","schema_change":{"type":"rename_column","from":"price","to":"cost"}}"#,
            r#"{"table":"db.t","schema_change":{"type":"alter_column_type","column":"cost","data_type":"DOUBLE"}}"#,
            r#"{"table":"db.t","schema_change":{"type":"drop_column","column":"cost"}}"#,
            r#"{"table":"db.t","schema_change":{"type":"truncate_table"}}"#,
            r#"{"table":"db.t","schema_change":{"type":"drop_table"}}"#,
        ]
    );
}

#[test]
fn values_sink_counts_each_kind_and_prints_nothing_by_default() {
    let schema = all_types_schema();
    let mut sink: ValuesSink<Vec<u8>> = ValuesSink::new(None);
    let mut batch = EventBatch::default();
    for round in 0..3 {
        batch.clear();
        let slot = batch.table_slot(&schema);
        let mut w = batch.row_writer(slot);
        w.set_i64(4, round);
        let row = w.finish().unwrap();
        batch.push_insert(slot, row);
        batch.push_insert(slot, row);
        batch.push_update(slot, row, row);
        batch.push_delete(slot, row);
        batch.push_schema_change(SchemaChangeEvent {
            table: schema.id().clone(),
            change: SchemaChange::TruncateTable,
            schema: Some(Arc::clone(&schema)),
        });
        sink.write_batch(&batch).unwrap();
    }
    sink.flush().unwrap();
    assert_eq!(
        sink.counts(),
        EventCounts {
            inserts: 6,
            updates: 3,
            deletes: 3,
            schema_changes: 3
        }
    );
    assert_eq!(sink.counts().total(), 15);
}

#[test]
fn values_sink_with_print_enabled_prints_each_event() {
    let schema = all_types_schema();
    let mut sink = ValuesSink::new(Some(Vec::new()));
    let mut batch = EventBatch::default();
    let slot = batch.table_slot(&schema);
    let mut w = batch.row_writer(slot);
    w.set_i64(4, 7);
    let row = w.finish().unwrap();
    batch.push_delete(slot, row);
    sink.write_batch(&batch).unwrap();
    assert_eq!(sink.counts().deletes, 1);
}
