//! DDL in the middle of the binlog: every schema change reaches the stream in
//! order, and rows after it decode with the new schema.

mod support;

use fjord_cdc::source::StartupMode;
use support::capture::{capture, config, until_current};
use support::MariaDb;

#[test]
fn rows_after_each_ddl_decode_with_the_changed_schema() {
    let db = MariaDb::start();
    db.sql(
        "CREATE DATABASE app;
         CREATE TABLE app.t (id INT PRIMARY KEY, a VARCHAR(10));
         INSERT INTO app.t VALUES (1, 'one');
         ALTER TABLE app.t ADD COLUMN b DECIMAL(5,2) AFTER id;
         INSERT INTO app.t VALUES (2, 1.25, 'two');
         ALTER TABLE app.t CHANGE a name VARCHAR(20);
         UPDATE app.t SET name = 'uno' WHERE id = 1;
         ALTER TABLE app.t MODIFY b BIGINT;
         INSERT INTO app.t VALUES (3, 9000000000, 'three');
         ALTER TABLE app.t DROP COLUMN name;
         DELETE FROM app.t WHERE id = 2;
         TRUNCATE TABLE app.t;
         INSERT INTO app.t VALUES (4, 4);
         CREATE TABLE app.other (x INT);
         INSERT INTO app.other VALUES (7);
         DROP TABLE app.t;",
    );
    let captured = capture(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("capture");
    assert_eq!(
        captured.lines,
        [
            "create_table app.t [id INT, a VARCHAR(10)]",
            "insert app.t after=[1, \"one\"]",
            "add_column app.t [id INT, b DECIMAL(5, 2), a VARCHAR(10)]",
            "insert app.t after=[2, 125e-2, \"two\"]",
            "rename_column app.t [id INT, b DECIMAL(5, 2), name VARCHAR(10)]",
            "alter_column_type app.t [id INT, b DECIMAL(5, 2), name VARCHAR(20)]",
            "update app.t before=[1, NULL, \"one\"] after=[1, NULL, \"uno\"]",
            "alter_column_type app.t [id INT, b BIGINT, name VARCHAR(20)]",
            "insert app.t after=[3, 9000000000, \"three\"]",
            "drop_column app.t [id INT, b BIGINT]",
            "delete app.t before=[2, 1]",
            "truncate_table app.t [id INT, b BIGINT]",
            "insert app.t after=[4, 4]",
            "drop_table app.t []",
        ]
    );
}
