//! Pipeline YAML: Flink CDC definitions are accepted as written; unknown or
//! invalid options are refused with the option's name and line.

use fjord_cdc::config::{self, DecimalHandling, SinkDef, SourceDef};
use fjord_cdc::route::Router;
use fjord_cdc::schema::TableId;
use fjord_cdc::source::{SpecificOffset, StartupMode};

/// The seed document's pipeline, unchanged.
const SEED: &str = "\
source:
  type: mysql
  hostname: localhost
  port: 3308
  username: root
  password: 123456
  tables: test.user_behavior
  server-id: 5400-5404
  #server-time-zone: UTC
  scan.startup.mode: earliest-offset
  debezium.poll.interval.ms: 10
sink:
  type: values
  name: Values Sink
  materialized.in.memory: false
  print.enabled: false
pipeline:
  name: Sync MySQL Database to Values
  parallelism: 1
";

fn check_error(yaml: &str, line: usize, needle: &str) {
    let err = config::parse(yaml).expect_err("definition must be refused");
    assert_eq!(err.line, line, "{err}");
    assert!(err.message.contains(needle), "{err:?} lacks {needle:?}");
}

#[test]
fn seed_pipeline_is_accepted_as_written() {
    let def = config::parse(SEED).unwrap();
    let SourceDef::MySql(mysql) = def.source else {
        panic!("not mysql")
    };
    assert_eq!(mysql.hostname, "localhost");
    assert_eq!(mysql.port, 3308);
    assert_eq!(mysql.password, "123456");
    assert_eq!(mysql.startup, StartupMode::EarliestOffset);
    assert_eq!(
        mysql.server_id.map(|s| (s.start, s.end)),
        Some((5400, 5404))
    );
    assert!(mysql.tables.matches("test", "user_behavior"));
    assert!(!mysql.tables.matches("test", "user_behavior2"));
    assert_eq!(def.sink, SinkDef::Values { print: false });
    assert_eq!(
        def.pipeline.name.as_deref(),
        Some("Sync MySQL Database to Values")
    );
}

#[test]
fn unknown_source_option_names_option_and_line() {
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: a.b\n  hostnmae: x\nsink:\n  type: print\n",
        6,
        "unknown option `hostnmae` in `source`",
    );
}

#[test]
fn unknown_sink_and_pipeline_options_are_refused() {
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\n  colour: red\n",
        5,
        "`colour`",
    );
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\npipeline:\n  parallelism: 1\n  speed: max\n",
        7,
        "`speed`",
    );
}

#[test]
fn bad_table_regex_is_refused_with_its_line() {
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: db.(open\nsink:\n  type: print\n",
        5,
        "db.(open",
    );
    check_error(
        "source:\n  type: debezium-json\n  tables.exclude: \"db.[x\"\nsink:\n  type: print\n",
        3,
        "tables.exclude",
    );
}

#[test]
fn bad_route_regex_is_refused_with_its_line() {
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\nroute:\n  - source-table: db.ok\n    sink-table: a.b\n  - source-table: db.[bad\n    sink-table: a.b\n",
        8,
        "source-table",
    );
}

#[test]
fn missing_sections_and_required_options_are_named() {
    check_error("sink:\n  type: print\n", 0, "missing section `source`");
    check_error(
        "source:\n  type: debezium-json\n",
        0,
        "missing section `sink`",
    );
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  tables: a.b\nsink:\n  type: print\n",
        1,
        "needs option `username`",
    );
    check_error(
        "source:\n  type: kafka\nsink:\n  type: print\n",
        2,
        "unknown source type",
    );
}

#[test]
fn invalid_values_name_the_option() {
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: a.b\n  port: eighty\nsink:\n  type: print\n",
        6,
        "`port`",
    );
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: a.b\n  scan.startup.mode: whenever\nsink:\n  type: print\n",
        6,
        "scan.startup.mode",
    );
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: a.b\n  scan.startup.mode: specific-offset\nsink:\n  type: print\n",
        6,
        "specific-offset.file",
    );
    check_error(
        "source:\n  type: mysql\n  hostname: h\n  username: u\n  tables: a.b\n  connect.timeout: soon\nsink:\n  type: print\n",
        6,
        "connect.timeout",
    );
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: values\n  print.enabled: maybe\n",
        5,
        "print.enabled",
    );
}

#[test]
fn transform_section_is_refused_as_not_supported_yet() {
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\ntransform:\n  - source-table: a.b\n    projection: \\*\n",
        5,
        "not supported yet",
    );
}

/// A Flink CDC definition's `parallelism` runs unchanged (kept as a hint);
/// only a count that is not positive is refused, naming the option.
#[test]
fn parallelism_is_accepted_as_flink_cdc_writes_it() {
    let def = config::parse(
        "source:\n  type: debezium-json\nsink:\n  type: print\npipeline:\n  parallelism: 4\n",
    )
    .unwrap();
    assert_eq!(def.pipeline.parallelism, 4);
    let def = config::parse("source:\n  type: debezium-json\nsink:\n  type: print\n").unwrap();
    assert_eq!(def.pipeline.parallelism, 1, "the default");
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\npipeline:\n  parallelism: 0\n",
        6,
        "`parallelism` must be a positive count; found 0",
    );
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: print\npipeline:\n  parallelism: -2\n",
        6,
        "parallelism",
    );
}

#[test]
fn unsupported_materialisation_is_refused() {
    check_error(
        "source:\n  type: debezium-json\nsink:\n  type: values\n  materialized.in.memory: true\n",
        5,
        "not supported yet",
    );
}

#[test]
fn specific_offsets_and_timestamps_are_parsed() {
    let base = "source:\n  type: mariadb\n  hostname: h\n  username: u\n  tables: a.b\n";
    let def = config::parse(&format!(
        "{base}  scan.startup.mode: specific-offset\n  scan.startup.specific-offset.file: mysql-bin.000003\n  scan.startup.specific-offset.pos: 4711\n  scan.startup.specific-offset.skip-rows: 2\nsink:\n  type: print\n"
    ))
    .unwrap();
    let SourceDef::MySql(c) = def.source else {
        panic!("not mysql")
    };
    assert_eq!(c.source_type, "mariadb");
    assert_eq!(
        c.startup,
        StartupMode::SpecificOffset {
            offset: SpecificOffset::File {
                file: "mysql-bin.000003".into(),
                pos: 4711
            },
            skip_events: 0,
            skip_rows: 2,
        }
    );
    let def = config::parse(&format!(
        "{base}  scan.startup.mode: specific-offset\n  scan.startup.specific-offset.gtid-set: 0-1-100\nsink:\n  type: print\n"
    ))
    .unwrap();
    let SourceDef::MySql(c) = def.source else {
        panic!("not mysql")
    };
    assert!(
        matches!(c.startup, StartupMode::SpecificOffset { offset: SpecificOffset::GtidSet(ref s), .. } if s == "0-1-100")
    );
    let def = config::parse(&format!(
        "{base}  scan.startup.mode: timestamp\n  scan.startup.timestamp-millis: 1700000000000\nsink:\n  type: print\n"
    ))
    .unwrap();
    let SourceDef::MySql(c) = def.source else {
        panic!("not mysql")
    };
    assert_eq!(
        c.startup,
        StartupMode::Timestamp {
            millis: 1_700_000_000_000
        }
    );
}

#[test]
fn debezium_source_and_state_dir_are_parsed() {
    let def = config::parse(
        "source:\n  type: debezium-json\n  path: /tmp/in.json\n  decimal.handling.mode: string\nsink:\n  type: print\npipeline:\n  state-dir: /tmp/state\n  state.commit-interval-ms: 0\n",
    )
    .unwrap();
    let SourceDef::DebeziumJson(c) = def.source else {
        panic!("not debezium")
    };
    assert_eq!(
        c.path.as_deref(),
        Some(std::path::Path::new("/tmp/in.json"))
    );
    assert_eq!(c.decimal_handling, DecimalHandling::String);
    assert!(c.tables.matches("any", "table"));
    assert_eq!(
        def.pipeline.state_dir.as_deref(),
        Some(std::path::Path::new("/tmp/state"))
    );
    assert!(def.pipeline.state_commit_interval.is_zero());
}

#[test]
fn routes_map_tables_with_replace_symbol_and_first_match_wins() {
    let def = config::parse(
        "source:\n  type: debezium-json\nsink:\n  type: print\nroute:\n  - source-table: app.orders\n    sink-table: ods.orders_all\n  - source-table: app.\\.*\n    sink-table: ods.ods_<>\n    replace-symbol: <>\n    description: everything else\n",
    )
    .unwrap();
    let router = Router::new(def.routes);
    let check = |db: &str, table: &str, expected: Option<&str>| {
        let routed = router
            .route(&TableId::new(db, table))
            .map(|t| t.to_string());
        assert_eq!(routed.as_deref(), expected, "{db}.{table}");
    };
    check("app", "orders", Some("ods.orders_all"));
    check("app", "users", Some("ods.ods_users"));
    check("other", "users", None);
}

/// Flink CDC's Fluss pipeline connector definition (its documentation's
/// example, with every option), as written.
const FLUSS: &str = "\
source:
  type: mysql
  hostname: localhost
  port: 3306
  username: root
  password: 123456
  tables: app.\\.*
  scan.incremental.snapshot.chunk.size: 4096
sink:
  type: fluss
  name: Fluss Sink
  bootstrap.servers: localhost:9123,localhost:9124
  bucket.key: app.orders:id;app.users:id,name
  bucket.num: app.orders:4;app.users:8
  properties.client.writer.batch-size: 1mb
  properties.table.log.ttl: 7d
  include.schema.changes: [create.table, column]
  exclude.schema.changes: drop.column
route:
  - source-table: app.\\.*
    sink-table: ods.ods_<>
    replace-symbol: <>
pipeline:
  name: MySQL to Fluss
  schema.change.behavior: try_evolve
";

#[test]
fn fluss_sink_options_are_parsed_with_flink_cdc_names() {
    use fjord_cdc::sink::fluss::options::SchemaChangeBehavior;
    let def = config::parse(FLUSS).unwrap();
    let SinkDef::Fluss(fluss) = &def.sink else {
        panic!("not fluss: {:?}", def.sink)
    };
    assert_eq!(
        fluss.bootstrap_servers,
        ["localhost:9123", "localhost:9124"]
    );
    assert_eq!(
        fluss.bucket_keys[&TableId::new("app", "users")],
        ["id", "name"]
    );
    assert_eq!(fluss.bucket_nums[&TableId::new("app", "orders")], 4);
    assert_eq!(fluss.client_options["client.writer.batch-size"], "1mb");
    assert_eq!(fluss.table_properties["table.log.ttl"], "7d");
    let include: Vec<&str> = fluss
        .include_schema_changes
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.as_str())
        .collect();
    assert_eq!(include, ["create.table", "column"]);
    assert!(fluss.applies(SchemaChangeBehavior::TryEvolve, "add.column"));
    assert!(!fluss.applies(SchemaChangeBehavior::TryEvolve, "drop.column"));
    assert!(!fluss.applies(SchemaChangeBehavior::TryEvolve, "truncate.table"));
    assert_eq!(
        def.pipeline.schema_change_behavior,
        SchemaChangeBehavior::TryEvolve
    );
    let SourceDef::MySql(mysql) = def.source else {
        panic!("not mysql")
    };
    assert_eq!(mysql.snapshot_chunk_size, 4096);
}

#[test]
fn bad_fluss_sink_options_name_the_option_and_line() {
    let with = |from: &str, to: &str| FLUSS.replace(from, to);
    check_error(
        &with("bucket.num: app.orders:4;", "bucket.num: app.orders:x;"),
        14,
        "bucket.num",
    );
    check_error(
        &with("bucket.key: app.orders:id;", "bucket.key: orders:id;"),
        13,
        "bucket.key",
    );
    check_error(
        &with("[create.table, column]", "[create.table, columns]"),
        17,
        "unknown schema change type \"columns\"",
    );
    check_error(
        &with("try_evolve", "evolving"),
        25,
        "schema.change.behavior",
    );
    check_error(
        &with(
            "  name: Fluss Sink\n",
            "  name: Fluss Sink\n  properties.foo: 1\n",
        ),
        12,
        "properties.foo",
    );
    check_error(&with("1mb", "huge"), 9, "client.writer.batch-size");
    check_error(
        &with("  bootstrap.servers: localhost:9123,localhost:9124\n", ""),
        9,
        "bootstrap.servers",
    );
}
