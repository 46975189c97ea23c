//! The whole pipeline on a MariaDB source: a Flink CDC 3 YAML definition,
//! `runtime::run` with the `values` sink and a state dir; a second run after
//! more writes delivers only the new changes (resume through the offset
//! store with the source's own positions), also across a DDL.

mod support;

use fjord_cdc::config;
use fjord_cdc::runtime::{run, RunOptions};
use support::{MariaDb, REPL_PASSWORD, REPL_USER};

fn definition(db: &MariaDb, state: &std::path::Path) -> config::PipelineDef {
    config::parse(&format!(
        "source:
  type: mysql
  hostname: 127.0.0.1
  port: {port}
  username: {REPL_USER}
  password: {REPL_PASSWORD}
  tables: app.t
  server-id: 5400-5404
  scan.startup.mode: initial
sink:
  type: values
  name: Values Sink
pipeline:
  name: Sync MariaDB to Values
  parallelism: 1
  state-dir: {state}
  state.commit-interval-ms: 0
",
        port = db.port(),
        state = state.display()
    ))
    .expect("valid pipeline YAML")
}

fn until_current() -> RunOptions {
    RunOptions {
        until_current: true,
        ..RunOptions::default()
    }
}

#[test]
fn rerun_with_state_dir_delivers_only_changes_after_the_confirmed_position() {
    let db = MariaDb::start();
    let state = tempfile::tempdir().expect("state dir");
    db.sql(
        "CREATE DATABASE app; CREATE TABLE app.t (id INT PRIMARY KEY, v VARCHAR(10));
         INSERT INTO app.t VALUES (1,'a'),(2,'b'),(3,'c');",
    );
    // Snapshot (3 rows), then the binlog up to the position current at start.
    let first = run(definition(&db, state.path()), until_current()).expect("first run");
    assert_eq!(first.events, 3);
    assert!(first.resumed_from.is_none());

    db.sql(
        "UPDATE app.t SET v = 'x' WHERE id = 1; ALTER TABLE app.t ADD COLUMN w INT;
         INSERT INTO app.t VALUES (4,'d',4); DELETE FROM app.t WHERE id = 2;",
    );
    let second = run(definition(&db, state.path()), until_current()).expect("second run");
    assert!(second.resumed_from.is_some());
    // update + add_column + insert + delete
    assert_eq!(second.events, 4);

    let third = run(definition(&db, state.path()), until_current()).expect("third run");
    assert_eq!(third.events, 0, "nothing new: nothing delivered twice");
}
