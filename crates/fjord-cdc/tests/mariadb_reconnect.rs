//! A binlog connection killed by the server mid-stream is re-established and
//! the stream continues from the last position: no change lost or repeated.

mod support;

use fjord_cdc::event::EventBatch;
use fjord_cdc::source::{Poll, StartupMode};
use support::capture::{capture, config, render, until_current};
use support::MariaDb;

#[test]
fn killed_binlog_connection_resumes_without_loss_or_duplicate() {
    let db = MariaDb::start();
    db.sql(
        "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY, v INT);
         INSERT INTO app.t VALUES (1,1),(2,2),(3,3),(4,4),(5,5),(6,6);
         BEGIN; UPDATE app.t SET v = v * 10; DELETE FROM app.t WHERE id = 3; COMMIT;
         INSERT INTO app.t VALUES (7,7);",
    );
    let full = capture(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("uninterrupted capture")
    .lines;

    let mut source = fjord_cdc::source::mysql::open(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("open");
    let mut lines = Vec::new();
    let mut kills = 0;
    for _ in 0..1000 {
        let mut batch = EventBatch::new(1, 1 << 20);
        let poll = source.next_batch(&mut batch).expect("batch");
        render(&batch, &mut lines);
        if poll == Poll::End {
            break;
        }
        // Kill the source's binlog dump connection after every batch.
        let ids =
            db.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'");
        for id in ids.lines() {
            if db.try_sql(&format!("KILL CONNECTION {id}")).is_ok() {
                kills += 1;
            }
        }
    }
    assert!(kills >= 2, "the dump connection was never killed");
    assert_eq!(lines, full);
}
