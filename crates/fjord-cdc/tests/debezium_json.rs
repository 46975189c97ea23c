//! Debezium JSON input: envelopes with and without schema, every time and
//! decimal encoding, ops c/u/d/r/t, schema evolution, table filtering — all
//! checked through the print sink's exact output.

use std::io::Cursor;

use fjord_cdc::config::{DebeziumJsonConfig, DecimalHandling};
use fjord_cdc::filter::TableFilter;
use fjord_cdc::route::Router;
use fjord_cdc::runtime::{drive, DriveConfig};
use fjord_cdc::sink::print::PrintSink;
use fjord_cdc::sink::{Sink, SinkError};
use fjord_cdc::source::{debezium, StartOptions, StopFlag};
use serde_json::{json, Value};

/// A sink that prints into a shared buffer the test reads afterwards.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config(decimals: DecimalHandling, tables: TableFilter) -> DebeziumJsonConfig {
    DebeziumJsonConfig {
        path: None,
        tables,
        decimal_handling: decimals,
    }
}

fn run_with(input: &str, config: &DebeziumJsonConfig) -> Result<Vec<String>, String> {
    let out = Shared::default();
    let source = debezium::from_reader(
        Cursor::new(input.as_bytes().to_vec()),
        config,
        StartOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let sink: Box<dyn Sink> = Box::new(PrintSink::new(out.clone()));
    drive(
        source,
        sink,
        Router::default(),
        None,
        DriveConfig::default(),
        &StopFlag::new(),
    )
    .map_err(|e| e.to_string())?;
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    Ok(text.lines().map(str::to_string).collect())
}

fn run(input: &str) -> Vec<String> {
    run_with(input, &config(DecimalHandling::Precise, TableFilter::all())).unwrap()
}

fn field(name: &str, kind: &str, logical: Option<&str>, params: Option<Value>) -> Value {
    let mut f = json!({"field": name, "type": kind, "optional": true});
    if let Some(l) = logical {
        f["name"] = json!(l);
    }
    if let Some(p) = params {
        f["parameters"] = p;
    }
    f
}

fn envelope(fields: &[Value], op: &str, before: Value, after: Value, table: &str) -> String {
    let row = json!({"type": "struct", "optional": true, "fields": fields});
    let mut before_schema = row.clone();
    before_schema["field"] = json!("before");
    let mut after_schema = row;
    after_schema["field"] = json!("after");
    json!({
        "schema": {"type": "struct", "fields": [
            before_schema, after_schema,
            {"type": "struct", "field": "source", "fields": []},
            {"type": "string", "field": "op"}
        ]},
        "payload": {
            "before": before, "after": after,
            "source": {"connector": "mysql", "db": "inventory", "table": table, "file": "mysql-bin.000003", "pos": 154},
            "op": op, "ts_ms": 1_700_000_000_000i64
        }
    })
    .to_string()
}

fn all_type_fields() -> Vec<Value> {
    vec![
        json!({"field": "id", "type": "int32", "optional": false}),
        field("flag", "boolean", None, None),
        field("tiny", "int8", None, None),
        field("small", "int16", None, None),
        field("big", "int64", None, None),
        field("f", "float32", None, None),
        field("d", "float64", None, None),
        field(
            "price",
            "bytes",
            Some("org.apache.kafka.connect.data.Decimal"),
            Some(json!({"scale": "2", "connect.decimal.precision": "10"})),
        ),
        field(
            "huge",
            "bytes",
            Some("org.apache.kafka.connect.data.Decimal"),
            Some(json!({"scale": "3", "connect.decimal.precision": "65"})),
        ),
        field("day", "int32", Some("io.debezium.time.Date"), None),
        field("t_ms", "int32", Some("io.debezium.time.Time"), None),
        field("t_us", "int64", Some("io.debezium.time.MicroTime"), None),
        field("t_ns", "int64", Some("io.debezium.time.NanoTime"), None),
        field("ts_ms", "int64", Some("io.debezium.time.Timestamp"), None),
        field(
            "ts_us",
            "int64",
            Some("io.debezium.time.MicroTimestamp"),
            None,
        ),
        field(
            "ts_ns",
            "int64",
            Some("io.debezium.time.NanoTimestamp"),
            None,
        ),
        field(
            "zoned",
            "string",
            Some("io.debezium.time.ZonedTimestamp"),
            None,
        ),
        field("yr", "int32", Some("io.debezium.time.Year"), None),
        field("doc", "string", Some("io.debezium.data.Json"), None),
        field("color", "string", Some("io.debezium.data.Enum"), None),
        field("name", "string", None, None),
        field("blob", "bytes", None, None),
    ]
}

fn all_type_row(id: i32) -> Value {
    json!({
        "id": id, "flag": true, "tiny": -128, "small": 32767, "big": -9_223_372_036_854_775_807i64,
        "f": 1.5, "d": -0.1,
        "price": "MDk=",                    // 12345 → 123.45
        "huge": "AQAAAAAAAAAAAAAAAAAAAAA=", // 2^128 at scale 3
        "day": 19723, "t_ms": 45_296_789, "t_us": 45_296_789_012i64, "t_ns": 45_296_789_012_345i64,
        "ts_ms": 1_704_067_199_000i64, "ts_us": 1_704_067_199_123_456i64,
        "ts_ns": 1_704_067_199_123_456_789i64,
        "zoned": "2024-01-01T01:00:00.5+01:00", "yr": 2024,
        "doc": "{\"a\": [1, {\"b\": null}]}", "color": "red",
        "name": "h\u{e9}llo \"q\"\n", "blob": "AQID"
    })
}

const ALL_TYPES_AFTER: &str = concat!(
    r#"{"id":1,"flag":true,"tiny":-128,"small":32767,"big":-9223372036854775807,"#,
    r#""f":1.5,"d":-0.1,"price":"123.45","huge":"340282366920938463463374607431768211.456","#,
    r#""day":"2024-01-01","t_ms":"12:34:56.789","t_us":"12:34:56.789012","t_ns":"12:34:56.789012345","#,
    r#""ts_ms":"2023-12-31T23:59:59.000","ts_us":"2023-12-31T23:59:59.123456","#,
    r#""ts_ns":"2023-12-31T23:59:59.123456789","zoned":"2024-01-01T00:00:00.500000Z","yr":2024,"#,
    r#""doc":{"a": [1, {"b": null}]},"color":"red","name":"héllo \"q\"\n","blob":"AQID"}"#
);

#[test]
fn every_debezium_encoding_decodes_to_exact_values() {
    let fields = all_type_fields();
    let input = envelope(&fields, "c", Value::Null, all_type_row(1), "all_types");
    let lines = run(&input);
    assert_eq!(
        lines,
        [format!(
            r#"{{"table":"inventory.all_types","op":"insert","before":null,"after":{ALL_TYPES_AFTER}}}"#
        )]
    );
}

#[test]
fn ops_c_r_u_d_t_map_to_insert_update_delete_truncate() {
    let fields = [
        json!({"field": "id", "type": "int32", "optional": false}),
        field("v", "string", None, None),
    ];
    let input = [
        envelope(&fields, "r", Value::Null, json!({"id": 1, "v": "a"}), "t"),
        envelope(&fields, "c", Value::Null, json!({"id": 2, "v": null}), "t"),
        envelope(
            &fields,
            "u",
            json!({"id": 1, "v": "a"}),
            json!({"id": 1, "v": "b"}),
            "t",
        ),
        envelope(&fields, "d", json!({"id": 2, "v": null}), Value::Null, "t"),
        "null".to_string(), // tombstone
        String::new(),      // blank line
        envelope(&fields, "t", Value::Null, Value::Null, "t"),
    ]
    .join("\n");
    assert_eq!(
        run(&input),
        [
            r#"{"table":"inventory.t","op":"insert","before":null,"after":{"id":1,"v":"a"}}"#,
            r#"{"table":"inventory.t","op":"insert","before":null,"after":{"id":2,"v":null}}"#,
            r#"{"table":"inventory.t","op":"update","before":{"id":1,"v":"a"},"after":{"id":1,"v":"b"}}"#,
            r#"{"table":"inventory.t","op":"delete","before":{"id":2,"v":null},"after":null}"#,
            r#"{"table":"inventory.t","schema_change":{"type":"truncate_table"}}"#,
        ]
    );
}

#[test]
fn decimal_modes_precise_string_and_double_give_the_same_events() {
    let precise = envelope(
        &[field(
            "amount",
            "bytes",
            Some("org.apache.kafka.connect.data.Decimal"),
            Some(json!({"scale": "2", "connect.decimal.precision": "10"})),
        )],
        "c",
        Value::Null,
        json!({"amount": "z8c="}), // -12345
        "money",
    );
    let typed = |kind: &str| {
        field(
            "amount",
            kind,
            None,
            Some(
                json!({"__debezium.source.column.type": "DECIMAL", "__debezium.source.column.length": "10", "__debezium.source.column.scale": "2"}),
            ),
        )
    };
    let string = envelope(
        &[typed("string")],
        "c",
        Value::Null,
        json!({"amount": "-123.45"}),
        "money",
    );
    let double = envelope(
        &[typed("float64")],
        "c",
        Value::Null,
        json!({"amount": -123.45}),
        "money",
    );
    let expected =
        [r#"{"table":"inventory.money","op":"insert","before":null,"after":{"amount":"-123.45"}}"#];
    assert_eq!(run(&precise), expected);
    let tables = TableFilter::all();
    assert_eq!(
        run_with(&string, &config(DecimalHandling::String, tables.clone())).unwrap(),
        expected
    );
    assert_eq!(
        run_with(&double, &config(DecimalHandling::Double, tables)).unwrap(),
        expected
    );
}

#[test]
fn envelope_without_schema_infers_types_per_table_and_adds_new_fields() {
    let input = [
        r#"{"before":null,"after":{"id":1,"price":2.5,"tags":["x"],"ok":true,"note":null},"source":{"db":"shop","table":"items"},"op":"c"}"#,
        r#"{"before":null,"after":{"id":2,"price":3,"tags":{"k":1},"ok":false,"note":"n","extra":"e"},"source":{"db":"shop","table":"items"},"op":"c"}"#,
    ]
    .join("\n");
    assert_eq!(
        run(&input),
        [
            r#"{"table":"shop.items","op":"insert","before":null,"after":{"id":1,"price":2.5,"tags":["x"],"ok":true,"note":null}}"#,
            r#"{"table":"shop.items","schema_change":{"type":"add_column","column":{"name":"extra","type":"STRING","nullable":true},"position":"last"}}"#,
            r#"{"table":"shop.items","op":"insert","before":null,"after":{"id":2,"price":3.0,"tags":{"k":1},"ok":false,"note":"n","extra":"e"}}"#,
        ]
    );
}

#[test]
fn changed_envelope_schema_emits_schema_changes_before_the_rows() {
    let v1 = [
        json!({"field": "id", "type": "int32", "optional": false}),
        field("a", "int32", None, None),
    ];
    let v2 = [
        json!({"field": "id", "type": "int32", "optional": false}),
        field("a", "int64", None, None),
        field("b", "string", None, None),
    ];
    let v3 = [
        json!({"field": "id", "type": "int32", "optional": false}),
        field("b", "string", None, None),
    ];
    let input = [
        envelope(&v1, "c", Value::Null, json!({"id": 1, "a": 1}), "t"),
        envelope(
            &v2,
            "c",
            Value::Null,
            json!({"id": 2, "a": 2, "b": "x"}),
            "t",
        ),
        envelope(&v3, "c", Value::Null, json!({"id": 3, "b": "y"}), "t"),
    ]
    .join("\n");
    assert_eq!(
        run(&input),
        [
            r#"{"table":"inventory.t","op":"insert","before":null,"after":{"id":1,"a":1}}"#,
            r#"{"table":"inventory.t","schema_change":{"type":"alter_column_type","column":"a","data_type":"BIGINT"}}"#,
            r#"{"table":"inventory.t","schema_change":{"type":"add_column","column":{"name":"b","type":"STRING","nullable":true},"position":"last"}}"#,
            r#"{"table":"inventory.t","op":"insert","before":null,"after":{"id":2,"a":2,"b":"x"}}"#,
            r#"{"table":"inventory.t","schema_change":{"type":"drop_column","column":"a"}}"#,
            r#"{"table":"inventory.t","op":"insert","before":null,"after":{"id":3,"b":"y"}}"#,
        ]
    );
}

#[test]
fn tables_filter_drops_unselected_tables() {
    let fields = [json!({"field": "id", "type": "int32", "optional": false})];
    let input = [
        envelope(&fields, "c", Value::Null, json!({"id": 1}), "keep_me"),
        envelope(&fields, "c", Value::Null, json!({"id": 2}), "secret"),
    ]
    .join("\n");
    let filter = TableFilter::new("inventory.\\.*", Some("inventory.secret")).unwrap();
    assert_eq!(
        run_with(&input, &config(DecimalHandling::Precise, filter)).unwrap(),
        [r#"{"table":"inventory.keep_me","op":"insert","before":null,"after":{"id":1}}"#]
    );
}

#[test]
fn malformed_input_is_an_error_naming_the_line() {
    let fields = [json!({"field": "id", "type": "int32", "optional": false})];
    let good = envelope(&fields, "c", Value::Null, json!({"id": 1}), "t");
    let cases = [
        (format!("{good}\n{{\"payload\": {{\"op\": \"c\""), "line 2"),
        (
            format!(
                "{good}\n{}",
                envelope(&fields, "c", Value::Null, json!({"id": "one"}), "t")
            ),
            "line 2",
        ),
        (
            format!(
                "{good}\n{}",
                envelope(&fields, "x", Value::Null, json!({"id": 1}), "t")
            ),
            "unknown op",
        ),
        (
            r#"{"before":null,"after":{"id":1},"op":"c"}"#.to_string(),
            "source",
        ),
        (
            envelope(
                &[field(
                    "amount",
                    "bytes",
                    Some("org.apache.kafka.connect.data.Decimal"),
                    Some(json!({"scale": "0", "connect.decimal.precision": "2"})),
                )],
                "c",
                Value::Null,
                json!({"amount": "MDk="}),
                "t",
            ),
            "precision",
        ),
    ];
    let oversized = envelope(
        &[field(
            "amount",
            "bytes",
            Some("org.apache.kafka.connect.data.Decimal"),
            Some(json!({"scale": "0", "connect.decimal.precision": "65"})),
        )],
        "c",
        Value::Null,
        json!({"amount": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}), // 40 bytes: more than 65 digits
        "t",
    );
    let cases = cases.into_iter().chain([(oversized, "precision")]);
    for (input, needle) in cases {
        let err = run_with(
            &input,
            &config(DecimalHandling::Precise, TableFilter::all()),
        )
        .unwrap_err();
        assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    }
}

/// A sink that accepts `ok_batches` batches and then fails (a crash stand-in).
struct FailingAfter {
    ok_batches: usize,
    inner: PrintSink<Shared>,
}

impl Sink for FailingAfter {
    fn write_batch(&mut self, batch: &fjord_cdc::event::EventBatch) -> Result<(), SinkError> {
        if self.ok_batches == 0 {
            return Err(SinkError::Io {
                sink: "failing",
                source: std::io::Error::other("simulated failure"),
            });
        }
        self.ok_batches -= 1;
        self.inner.write_batch(batch)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush()
    }
}

#[test]
fn restart_resumes_after_the_last_confirmed_event() {
    let fields = [json!({"field": "id", "type": "int32", "optional": false})];
    let input: String = (1..=5)
        .map(|id| envelope(&fields, "c", Value::Null, json!({"id": id}), "t") + "\n")
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let store = fjord_cdc::offsets::OffsetStore::open(dir.path(), "debezium-json").unwrap();
    let cfg = config(DecimalHandling::Precise, TableFilter::all());
    let drive_config = DriveConfig {
        commit_interval: std::time::Duration::ZERO,
        batch_events_max: 2,
        progress_interval: std::time::Duration::ZERO,
    };

    // First run: the sink confirms one batch (ids 1, 2), then fails.
    let first = Shared::default();
    let source = debezium::from_reader(
        Cursor::new(input.clone().into_bytes()),
        &cfg,
        StartOptions::default(),
    )
    .unwrap();
    let sink = Box::new(FailingAfter {
        ok_batches: 1,
        inner: PrintSink::new(first.clone()),
    });
    assert!(drive(
        source,
        sink,
        Router::default(),
        Some(&store),
        drive_config,
        &StopFlag::new()
    )
    .is_err());
    let printed = String::from_utf8(first.0.lock().unwrap().clone()).unwrap();
    assert_eq!(printed.lines().count(), 2);

    // Second run resumes from the stored position: ids 3..5, nothing twice.
    let resume = store.load().unwrap();
    assert!(resume.is_some());
    let second = Shared::default();
    let start = StartOptions {
        resume,
        ..StartOptions::default()
    };
    let source = debezium::from_reader(Cursor::new(input.into_bytes()), &cfg, start).unwrap();
    let sink = Box::new(PrintSink::new(second.clone()));
    let summary = drive(
        source,
        sink,
        Router::default(),
        Some(&store),
        drive_config,
        &StopFlag::new(),
    )
    .unwrap();
    assert_eq!(summary.events, 3);
    let printed = String::from_utf8(second.0.lock().unwrap().clone()).unwrap();
    let ids: Vec<&str> = printed
        .lines()
        .map(|l| &l[l.find("\"id\":").unwrap() + 5..l.len() - 2])
        .collect();
    assert_eq!(ids, ["3", "4", "5"]);
}
