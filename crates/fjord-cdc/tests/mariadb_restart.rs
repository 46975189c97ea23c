//! A restarted source resumes from the position of the last batch it handed
//! out — also from inside a transaction — without losing or repeating a change.
//! Positions carry the table schemas in force at them, so a restart before a
//! DDL decodes the rows before it with the old schema even though the server's
//! catalog already has the new one.

mod support;

use fjord_cdc::event::EventBatch;
use fjord_cdc::position::SourcePosition;
use fjord_cdc::source::{Poll, StartOptions, StartupMode};
use support::capture::{capture, config, render, until_current};
use support::MariaDb;

fn workload(db: &MariaDb) {
    db.sql(
        "CREATE DATABASE app;
         CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO app.t VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),(7,'g');
         BEGIN; UPDATE app.t SET v = CONCAT(v, '!'); DELETE FROM app.t WHERE id IN (2, 4); COMMIT;
         INSERT INTO app.t VALUES (8,'h');
         BEGIN; INSERT INTO app.t VALUES (9,'i'),(10,'j'); UPDATE app.t SET v = id; COMMIT;
         BEGIN; INSERT INTO app.t VALUES (11,'k'); INSERT INTO app.t VALUES (12,'l');
           INSERT INTO app.t VALUES (13,'m'); DELETE FROM app.t WHERE id = 11; COMMIT;
         ALTER TABLE app.t ADD COLUMN w INT;
         BEGIN; INSERT INTO app.t VALUES (14,'n',14); UPDATE app.t SET w = id WHERE id < 4; COMMIT;",
    );
}

#[test]
fn restart_from_any_batch_position_resumes_without_loss_or_duplicate() {
    let db = MariaDb::start();
    workload(&db);
    let full = capture(
        config(&db, "app.t", StartupMode::EarliestOffset),
        until_current(),
    )
    .expect("uninterrupted capture")
    .lines;
    assert!(full.len() > 20, "{full:?}");

    // Tiny batches put positions inside transactions and rows events.
    for (batch_events, batches_per_run) in [(1usize, 1), (1, 2), (2, 1), (3, 2), (5, 1)] {
        let mut lines = Vec::new();
        let mut position: Option<SourcePosition> = None;
        let mut restarts = 0;
        let mut mid_transaction = false;
        'run: for _ in 0..1000 {
            let start = StartOptions {
                resume: position.clone(),
                ..until_current()
            };
            let mut source = fjord_cdc::source::mysql::open(
                config(&db, "app.t", StartupMode::EarliestOffset),
                start,
            )
            .expect("open");
            // Take a batch or two per incarnation, then "crash".
            for _ in 0..batches_per_run {
                let mut batch = EventBatch::new(batch_events, 1 << 20);
                let poll = source.next_batch(&mut batch).expect("batch");
                render(&batch, &mut lines);
                if let Some(p) = batch.position() {
                    // `file \t pos \t skip-rows \t schemas`
                    if let SourcePosition::Opaque { data, .. } = p {
                        mid_transaction |= data.split('\t').nth(2).is_some_and(|s| s != "0");
                    }
                    position = Some(p.clone());
                }
                if poll == Poll::End {
                    break 'run;
                }
            }
            restarts += 1;
        }
        assert!(restarts >= 2, "the test should restart several times");
        assert!(mid_transaction, "no restart happened inside a transaction");
        assert_eq!(
            lines, full,
            "batch size {batch_events}, {batches_per_run} per run"
        );
    }
}
