//! Each `scan.startup.mode` starts reading where Flink CDC's does.

mod support;

use fjord_cdc::source::{SpecificOffset, StartupMode};
use support::capture::{capture, config, until_current};
use support::MariaDb;

fn setup() -> MariaDb {
    let db = MariaDb::start();
    db.sql(
        "SET timestamp = 1600000000;
         CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); INSERT INTO app.t VALUES (1); INSERT INTO app.t VALUES (2);",
    );
    db
}

fn later_writes(db: &MariaDb) {
    db.sql(
        "SET timestamp = 1700000000; INSERT INTO app.t VALUES (3); DELETE FROM app.t WHERE id = 1;",
    );
}

const LATER: [&str; 2] = ["insert app.t after=[3]", "delete app.t before=[1]"];

#[test]
fn latest_offset_reads_only_changes_after_start() {
    let db = setup();
    let mut source = fjord_cdc::source::mysql::open(
        config(&db, "app.t", StartupMode::LatestOffset),
        Default::default(),
    )
    .expect("open");
    later_writes(&db);
    let captured = support::capture::drain(source.as_mut(), 2).expect("drain");
    assert_eq!(captured.lines, LATER);
}

#[test]
fn specific_file_offset_starts_at_that_event() {
    let db = setup();
    let (file, pos) = db.master_status();
    later_writes(&db);
    let startup = StartupMode::SpecificOffset {
        offset: SpecificOffset::File { file, pos },
        skip_events: 0,
        skip_rows: 0,
    };
    let captured = capture(config(&db, "app.t", startup), until_current()).expect("capture");
    assert_eq!(captured.lines, LATER);
}

#[test]
fn mariadb_gtid_offset_starts_after_that_gtid() {
    let db = setup();
    let gtid = db.sql("SELECT @@gtid_binlog_pos").trim().to_string();
    assert!(!gtid.is_empty());
    later_writes(&db);
    let startup = StartupMode::SpecificOffset {
        offset: SpecificOffset::GtidSet(gtid),
        skip_events: 0,
        skip_rows: 0,
    };
    let captured = capture(config(&db, "app.t", startup), until_current()).expect("capture");
    assert_eq!(captured.lines, LATER);
}

#[test]
fn timestamp_mode_skips_transactions_before_the_timestamp() {
    let db = setup();
    later_writes(&db);
    let startup = StartupMode::Timestamp {
        millis: 1_650_000_000_000,
    };
    let captured = capture(config(&db, "app.t", startup), until_current()).expect("capture");
    assert_eq!(captured.lines, LATER);
}

#[test]
fn snapshot_mode_reads_the_table_and_ends() {
    let db = setup();
    later_writes(&db);
    let captured = capture(
        config(&db, "app.t", StartupMode::Snapshot),
        Default::default(),
    )
    .expect("capture");
    assert_eq!(
        captured.lines,
        ["insert app.t after=[2]", "insert app.t after=[3]"]
    );
}

#[test]
fn idle_source_returns_empty_batches_with_its_position() {
    let db = setup();
    let mut source = fjord_cdc::source::mysql::open(
        config(&db, "app.t", StartupMode::LatestOffset),
        Default::default(),
    )
    .expect("open");
    for _ in 0..2 {
        let mut batch = fjord_cdc::event::EventBatch::default();
        let poll = source.next_batch(&mut batch).expect("batch");
        assert_eq!(poll, fjord_cdc::source::Poll::Ready);
        assert!(batch.is_empty());
        assert!(
            batch.position().is_some(),
            "an idle batch still says where the source is"
        );
    }
}
