//! Every MySQL column type goes through the MariaDB source with exact values,
//! and the snapshot (text protocol) and the binlog (binary row events) agree
//! on every value.

mod support;

use fjord_cdc::source::StartupMode;
use support::capture::{capture, config, until_current};
use support::MariaDb;

const CREATE: &str = "CREATE DATABASE shop;
CREATE TABLE shop.all_types (
  id INT NOT NULL PRIMARY KEY,
  b1 TINYINT(1), ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE, dec_small DECIMAL(10,2), dec_wide DECIMAL(65,30), dec_int DECIMAL(20,0),
  bit1 BIT(1), bit10 BIT(10), y YEAR,
  dt DATE, tm TIME, tm3 TIME(3), dtm DATETIME, dtm6 DATETIME(6), ts TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL,
  c CHAR(4), vc VARCHAR(300), vlat VARCHAR(10) CHARACTER SET latin1, bin BINARY(4), vbin VARBINARY(8),
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT, tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  js JSON, e ENUM('small','medium','large'), s SET('a','b','c','d')
);";

const ROWS: &str = "INSERT INTO shop.all_types VALUES
(1, 1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
 -9223372036854775808, 18446744073709551615,
 1.5, 0.1, -12345678.91, -12345678901234567890123456789012345.123456789012345678901234567891, 99999999999999999999,
 b'1', b'1010101010', 2024,
 '2024-02-29', '-838:59:59', '12:34:56.789', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999',
 '1970-01-01 00:00:01', '2038-01-19 03:14:07.99',
 'ab', REPEAT('x', 300), 'café', X'0102', X'00FF00',
 'tiny', 'text with \\\"quotes\\\" and \\\\ backslash', 'medium', 'long ünïcödé 🎉', X'00', X'DEADBEEF', X'', X'01',
 '{\"a\": [1, 2.5, \"x\"]}', 'medium', 'a,c'),
(2, 0, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0,
 -3.25, -1e300, 0.00, 0.000000000000000000000000000001, 0,
 b'0', b'0000000001', 1901,
 '1000-01-01', '00:00:00', '-00:00:00.001', '2000-02-29 12:00:00', '1970-01-01 00:00:00.000001',
 '2000-01-01 00:00:00', NULL,
 '', '', '', X'', X'',
 '', '', '', '', X'', X'', X'', X'',
 'null', 'small', ''),
(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);";

fn strip_op(line: &str) -> String {
    // "insert shop.all_types after=[...]" -> "[...]"
    line.split_once("after=")
        .map(|(_, r)| r.to_string())
        .unwrap_or_default()
}

#[test]
fn every_column_type_round_trips_with_exact_values_through_binlog_and_snapshot() {
    let db = MariaDb::start();
    db.sql(CREATE);
    db.sql(ROWS);

    let binlog = capture(
        config(&db, "shop.all_types", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("binlog capture");
    let snapshot = capture(
        config(&db, "shop.all_types", StartupMode::Snapshot),
        until_current(),
    )
    .expect("snapshot capture");

    let expected = [
        "[1, true, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, \
         -9223372036854775808, 18446744073709551615e-0, 1.5f, 0.1, -1234567891e-2, \
         -12345678901234567890123456789012345123456789012345678901234567891e-30, 99999999999999999999e-0, \
         true, 0x02aa, 2024, d19782, t-3020399000000, t45296789000, t-30610224000000000, \
         t253402300799999999, t1000000, t2147483647990000, \"ab\", \"X300\", \
         \"café\", 0x01020000, 0x00ff00, \"tiny\", \"text with \\\"quotes\\\" and \\\\ backslash\", \"medium\", \
         \"long ünïcödé 🎉\", 0x00, 0xdeadbeef, 0x, 0x01, \"{\\\"a\\\": [1, 2.5, \\\"x\\\"]}\", \"medium\", \"a,c\"]",
        "[2, false, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0e-0, -3.25f, -1e300, \
         0e-2, 1e-30, 0e-0, false, 0x0001, 1901, d-354285, t0, t-1000, t951825600000000, t1, \
         t946684800000000, NULL, \"\", \"\", \"\", 0x00000000, 0x, \"\", \"\", \"\", \"\", 0x, 0x, 0x, 0x, \
         \"null\", \"small\", \"\"]",
        "[3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL]",
    ];
    let expected: Vec<String> = expected
        .iter()
        .map(|l| l.replace("X300", &"x".repeat(300)))
        .collect();
    let binlog_rows: Vec<String> = binlog
        .lines
        .iter()
        .filter(|l| l.starts_with("insert "))
        .map(|l| strip_op(l))
        .collect();
    let snapshot_rows: Vec<String> = snapshot.lines.iter().map(|l| strip_op(l)).collect();
    assert_eq!(
        binlog_rows, expected,
        "binlog values; all lines: {:#?} at {:?}",
        binlog.lines, binlog.position
    );
    assert_eq!(snapshot_rows, expected, "snapshot values");
}
