//! `initial` startup while writers keep changing the table: the snapshot plus
//! the binlog from the snapshot's position deliver every row's final state,
//! with no change missing (gap) and none applied twice (duplicate).

mod support;

use std::collections::BTreeMap;

use fjord_cdc::source::{StartOptions, StartupMode};
use support::capture::{config, drain};
use support::MariaDb;

const ROWS: i64 = 5000;
/// Write statements the concurrent writer issues (bounded run).
const WRITER_STATEMENTS: i64 = 600;

/// Parses `[id, v]` after the `before=`/`after=` marker.
fn image(line: &str, marker: &str) -> Option<(i64, String)> {
    let rest = line.split_once(marker)?.1;
    let inner = rest.trim_start_matches('[').split(']').next()?;
    let (id, v) = inner.split_once(", ")?;
    Some((id.parse().ok()?, v.to_string()))
}

#[test]
fn concurrent_writes_during_the_snapshot_give_each_rows_final_state_once() {
    let db = MariaDb::start();
    db.sql("CREATE DATABASE app; CREATE TABLE app.t (id BIGINT PRIMARY KEY, v INT NOT NULL)");
    db.sql_stream(|out| {
        for chunk in 0..ROWS / 500 {
            write!(out, "INSERT INTO app.t VALUES ")?;
            for i in 0..500 {
                let id = chunk * 500 + i;
                if i > 0 {
                    write!(out, ",")?;
                }
                write!(out, "({id}, 0)")?;
            }
            writeln!(out, ";")?;
        }
        Ok(())
    });

    let mut cfg = config(&db, "app.t", StartupMode::Initial);
    cfg.snapshot_fetch_size = 100;
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            // Updates, deletes and inserts spread over the table while the
            // source opens its snapshot and reads it.
            for n in 0..WRITER_STATEMENTS {
                let id = (n * 7919) % ROWS;
                let sql = match n % 3 {
                    0 => format!("UPDATE app.t SET v = v + 1 WHERE id = {id}"),
                    1 => format!("DELETE FROM app.t WHERE id = {id}"),
                    _ => format!(
                        "INSERT INTO app.t VALUES ({}, {n}) ON DUPLICATE KEY UPDATE v = {n}",
                        ROWS + n
                    ),
                };
                db.sql(&sql);
            }
            db.sql("INSERT INTO app.t VALUES (-1, -1)"); // end marker
        });

        let mut source =
            fjord_cdc::source::mysql::open(cfg, StartOptions::default()).expect("open");
        let mut state: BTreeMap<i64, String> = BTreeMap::new();
        let mut seen_marker = false;
        for _ in 0..600 {
            let captured = drain(source.as_mut(), 1).expect("drain");
            for line in &captured.lines {
                if line.starts_with("insert ") {
                    let (id, v) = image(line, "after=").expect("insert image");
                    assert!(
                        state.insert(id, v).is_none(),
                        "duplicate insert of id {id}: {line}"
                    );
                    seen_marker |= id == -1;
                } else if line.starts_with("update ") {
                    let (id, v) = image(line, "after=").expect("update image");
                    assert!(
                        state.insert(id, v).is_some(),
                        "update of unknown id {id} (gap): {line}"
                    );
                } else if line.starts_with("delete ") {
                    let (id, _) = image(line, "before=").expect("delete image");
                    assert!(
                        state.remove(&id).is_some(),
                        "delete of unknown id {id} (gap): {line}"
                    );
                }
            }
            if seen_marker {
                break;
            }
        }
        writer.join().expect("writer");
        assert!(seen_marker, "the end marker never arrived");

        let expected: BTreeMap<i64, String> = db
            .sql("SELECT id, v FROM app.t")
            .lines()
            .map(|l| {
                let (id, v) = l.split_once('\t').expect("two columns");
                (id.parse().expect("id"), v.to_string())
            })
            .collect();
        assert_eq!(state.len(), expected.len());
        assert!(
            state == expected,
            "materialized stream differs from the table"
        );
    });
}
