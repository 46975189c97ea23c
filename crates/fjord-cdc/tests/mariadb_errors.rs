//! Failure modes the MariaDB source must report clearly instead of reading
//! wrong data: a statement-based binlog, and a start position whose binlog
//! file was purged.

mod support;

use fjord_cdc::source::{SourceError, SpecificOffset, StartupMode};
use support::capture::{capture, config, until_current};
use support::MariaDb;

#[test]
fn statement_based_binlog_is_refused_with_the_format_named() {
    let db = MariaDb::start_with(&["--binlog-format=STATEMENT"]);
    db.sql("CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY)");
    let err = match capture(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    ) {
        Err(e) => e,
        Ok(c) => panic!("a STATEMENT binlog was read: {:?}", c.lines),
    };
    assert!(matches!(err, SourceError::Config(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("binlog_format is STATEMENT") && text.contains("ROW"),
        "{text}"
    );
}

#[test]
fn purged_start_position_is_refused_naming_the_file_and_position() {
    let db = MariaDb::start();
    db.sql("CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); INSERT INTO app.t VALUES (1)");
    db.sql("FLUSH BINARY LOGS; INSERT INTO app.t VALUES (2); FLUSH BINARY LOGS");
    db.purge_binlogs_to("binlog.000002");
    let startup = StartupMode::SpecificOffset {
        offset: SpecificOffset::File {
            file: "binlog.000001".into(),
            pos: 4,
        },
        skip_events: 0,
        skip_rows: 0,
    };
    let err = match capture(config(&db, "app.t", startup), until_current()) {
        Err(e) => e,
        Ok(c) => panic!("a purged position was read: {:?}", c.lines),
    };
    assert!(matches!(err, SourceError::PositionUnavailable(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("binlog.000001")
            && text.contains("position 4")
            && text.contains("binlog.000002"),
        "{text}"
    );
}

#[test]
fn earliest_offset_after_a_purge_starts_at_the_oldest_remaining_file() {
    let db = MariaDb::start();
    db.sql("CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY); INSERT INTO app.t VALUES (1)");
    db.sql("FLUSH BINARY LOGS");
    db.purge_binlogs_to("binlog.000002");
    db.sql("INSERT INTO app.t VALUES (2)");
    let captured = capture(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("capture");
    assert_eq!(captured.lines, ["insert app.t after=[2]"]);
}
