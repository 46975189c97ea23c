//! The `fluss` sink against an in-process Fjord server, fed by a scripted
//! source: primary-key and log tables hold what the changes imply, a
//! delete on a log table and a table definition clash are clear errors,
//! schema changes follow `schema.change.behavior`, and a sink that fails
//! after writing past its last commit resumes without writing a log
//! table's event twice.

mod support;

use std::sync::Arc;
use std::time::Duration;

use fjord_cdc::event::{EventBatch, SchemaChange};
use fjord_cdc::offsets::OffsetStore;
use fjord_cdc::route::Router;
use fjord_cdc::runtime::{drive, DriveConfig, RunSummary};
use fjord_cdc::sink::fluss::options::{FlussSinkOptions, SchemaChangeBehavior};
use fjord_cdc::sink::fluss::FlussSink;
use fjord_cdc::sink::{Checkpoint, Sink, SinkError, SinkStats};
use fjord_cdc::source::StopFlag;
use fjord_cdc::types::DataType;
use support::fjord::{change, counts, schema, Ev, Fjord, Script, V};

fn options(fjord: &Fjord) -> FlussSinkOptions {
    FlussSinkOptions {
        bootstrap_servers: vec![fjord.addr.clone()],
        ..FlussSinkOptions::default()
    }
}

fn config(commit_every_batch: bool) -> DriveConfig {
    DriveConfig {
        commit_interval: if commit_every_batch {
            Duration::ZERO
        } else {
            Duration::from_secs(3600)
        },
        batch_events_max: 1024,
        progress_interval: Duration::ZERO,
    }
}

fn run_script(
    fjord: &Fjord,
    batches: Vec<Vec<Ev>>,
    behavior: SchemaChangeBehavior,
    store: Option<&Arc<OffsetStore>>,
) -> Result<RunSummary, String> {
    let mut sink = FlussSink::new(options(fjord), behavior).map_err(|e| e.to_string())?;
    let committed = store.map(|s| s.load_committed().unwrap().unwrap_or_default());
    sink.restore(
        committed.as_ref().and_then(|c| c.sink_state.as_deref()),
        store.cloned(),
    )
    .map_err(|e| e.to_string())?;
    let source = Script::new(
        batches,
        committed.as_ref().and_then(|c| c.position.as_ref()),
    );
    drive(
        Box::new(source),
        Box::new(sink),
        Router::default(),
        store.map(|s| &**s),
        config(true),
        &StopFlag::new(),
    )
    .map_err(|e| e.to_string())
}

fn users(version: u32) -> Arc<fjord_cdc::schema::TableSchema> {
    schema(
        "app",
        "users",
        version,
        &[
            ("id", DataType::BigInt),
            ("name", DataType::Varchar { length: 20 }),
            ("age", DataType::Int),
        ],
        &["id"],
    )
}

fn clicks() -> Arc<fjord_cdc::schema::TableSchema> {
    schema(
        "app",
        "clicks",
        1,
        &[("user_id", DataType::BigInt), ("page", DataType::String)],
        &[],
    )
}

#[test]
fn primary_key_and_log_tables_hold_what_the_changes_imply() {
    let fjord = Fjord::start();
    let u = users(1);
    let c = clicks();
    let script = vec![
        vec![
            Ev::Insert(u.clone(), vec![V::I(1), V::S("ann"), V::I(30)]),
            Ev::Insert(u.clone(), vec![V::I(2), V::S("bob"), V::Null]),
            Ev::Insert(u.clone(), vec![V::I(3), V::S("cy"), V::I(40)]),
            Ev::Insert(c.clone(), vec![V::I(1), V::S("/a")]),
        ],
        vec![
            Ev::Update(
                u.clone(),
                vec![V::I(2), V::S("bob"), V::Null],
                vec![V::I(2), V::S("bob"), V::I(25)],
            ),
            // A key change: the old key goes.
            Ev::Update(
                u.clone(),
                vec![V::I(3), V::S("cy"), V::I(40)],
                vec![V::I(30), V::S("cy"), V::I(41)],
            ),
            Ev::Delete(u.clone(), vec![V::I(1), V::S("ann"), V::I(30)]),
            Ev::Update(
                c.clone(),
                vec![V::I(1), V::S("/a")],
                vec![V::I(1), V::S("/b")],
            ),
        ],
    ];
    let summary = run_script(&fjord, script, SchemaChangeBehavior::Lenient, None).unwrap();
    assert_eq!(
        fjord.pk_rows("app", "users"),
        vec!["Int(2)|bob|Int(25)", "Int(30)|cy|Int(41)"]
    );
    assert_eq!(
        fjord.log_rows("app", "clicks"),
        vec!["Int(1)|/a", "Int(1)|/b"]
    );
    let users = summary
        .sink
        .tables
        .iter()
        .find(|t| t.table == "app.users")
        .unwrap();
    assert_eq!((users.rows, users.deletes), (5, 2));
    // The key is the source's; other columns are nullable.
    let info = fjord.info("app", "users");
    assert_eq!(info.descriptor.schema().primary_key().unwrap(), ["id"]);
    assert!(info.descriptor.schema().columns()[2]
        .data_type
        .is_nullable());
    assert!(!fjord.info("app", "clicks").descriptor.has_primary_key());
}

#[test]
fn a_delete_on_a_log_table_is_a_clear_error() {
    let fjord = Fjord::start();
    let c = clicks();
    let err = run_script(
        &fjord,
        vec![vec![
            Ev::Insert(c.clone(), vec![V::I(1), V::S("/a")]),
            Ev::Delete(c.clone(), vec![V::I(1), V::S("/a")]),
        ]],
        SchemaChangeBehavior::Lenient,
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("app.clicks is a log table") && err.contains("DELETE"),
        "{err}"
    );
}

#[test]
fn an_existing_table_with_another_key_is_a_clear_error_naming_both() {
    let fjord = Fjord::start();
    let first = schema(
        "app",
        "t",
        1,
        &[("id", DataType::BigInt), ("k", DataType::Int)],
        &["id"],
    );
    run_script(
        &fjord,
        vec![vec![Ev::Insert(first, vec![V::I(1), V::I(2)])]],
        SchemaChangeBehavior::Lenient,
        None,
    )
    .unwrap();
    let other = schema(
        "app",
        "t",
        1,
        &[("id", DataType::BigInt), ("k", DataType::Int)],
        &["id", "k"],
    );
    let err = run_script(
        &fjord,
        vec![vec![Ev::Insert(other, vec![V::I(1), V::I(2)])]],
        SchemaChangeBehavior::Lenient,
        None,
    )
    .unwrap_err();
    assert!(
        err.contains("primary key [\"id\"]") && err.contains("primary key [\"id\", \"k\"]"),
        "{err}"
    );
}

#[test]
fn schema_changes_follow_the_behavior() {
    let fjord = Fjord::start();
    let v1 = users(1);
    // The source renames `name` to `full_name`.
    let v2 = schema(
        "app",
        "users",
        2,
        &[
            ("id", DataType::BigInt),
            ("full_name", DataType::Varchar { length: 20 }),
            ("age", DataType::Int),
        ],
        &["id"],
    );
    let rename = change(
        &v2,
        SchemaChange::RenameColumn {
            from: "name".into(),
            to: "full_name".into(),
        },
    );
    let script = || {
        vec![
            vec![Ev::Insert(v1.clone(), vec![V::I(1), V::S("ann"), V::I(30)])],
            vec![
                rename.clone(),
                Ev::Insert(v2.clone(), vec![V::I(2), V::S("bob"), V::I(20)]),
            ],
        ]
    };
    // exception: the rename stops the pipeline.
    let err = run_script(&fjord, script(), SchemaChangeBehavior::Exception, None).unwrap_err();
    assert!(
        err.contains("rename.column") && err.contains("exception"),
        "{err}"
    );
    // evolve: the server cannot rename; a clear error.
    let err = run_script(&fjord, script(), SchemaChangeBehavior::Evolve, None).unwrap_err();
    assert!(
        err.contains("cannot rename column `name` to `full_name`"),
        "{err}"
    );
    // try_evolve: the values keep going into `name`.
    run_script(&fjord, script(), SchemaChangeBehavior::TryEvolve, None).unwrap();
    assert_eq!(
        fjord.pk_rows("app", "users"),
        vec!["Int(1)|ann|Int(30)", "Int(2)|bob|Int(20)"]
    );
    // ignore: `full_name` matches no sink column: NULL.
    let v3 = schema(
        "app",
        "users",
        3,
        &[
            ("id", DataType::BigInt),
            ("full_name", DataType::Varchar { length: 20 }),
            ("age", DataType::Int),
        ],
        &["id"],
    );
    run_script(
        &fjord,
        vec![vec![Ev::Insert(v3, vec![V::I(3), V::S("cy"), V::I(9)])]],
        SchemaChangeBehavior::Ignore,
        None,
    )
    .unwrap();
    assert!(fjord
        .pk_rows("app", "users")
        .contains(&"Int(3)|NULL|Int(9)".to_string()));

    // truncate: lenient leaves the table alone, evolve empties it.
    let truncate = vec![vec![change(&v1, SchemaChange::TruncateTable)]];
    run_script(
        &fjord,
        truncate.clone(),
        SchemaChangeBehavior::Lenient,
        None,
    )
    .unwrap();
    assert_eq!(fjord.pk_rows("app", "users").len(), 3);
    run_script(&fjord, truncate, SchemaChangeBehavior::Evolve, None).unwrap();
    assert!(fjord.pk_rows("app", "users").is_empty());
    // drop table: lenient keeps it, evolve drops it.
    let drop = || {
        vec![vec![Ev::Schema(fjord_cdc::event::SchemaChangeEvent {
            table: v1.id().clone(),
            change: SchemaChange::DropTable,
            schema: None,
        })]]
    };
    run_script(&fjord, drop(), SchemaChangeBehavior::Lenient, None).unwrap();
    assert!(fjord.table_exists("app", "users"));
    run_script(&fjord, drop(), SchemaChangeBehavior::Evolve, None).unwrap();
    assert!(!fjord.table_exists("app", "users"));
}

#[test]
fn a_type_change_the_sink_cannot_apply_is_checked_per_value_under_try_evolve() {
    let fjord = Fjord::start();
    let v1 = schema(
        "app",
        "n",
        1,
        &[("id", DataType::Int), ("v", DataType::Int)],
        &["id"],
    );
    let v2 = schema(
        "app",
        "n",
        2,
        &[("id", DataType::Int), ("v", DataType::BigInt)],
        &["id"],
    );
    let widen = change(
        &v2,
        SchemaChange::AlterColumnType {
            name: "v".into(),
            data_type: DataType::BigInt,
        },
    );
    let script = |big: i64| {
        vec![
            vec![Ev::Insert(v1.clone(), vec![V::I(1), V::I(1)])],
            vec![
                widen.clone(),
                Ev::Insert(v2.clone(), vec![V::I(2), V::I(big)]),
            ],
        ]
    };
    let err = run_script(&fjord, script(5), SchemaChangeBehavior::Evolve, None).unwrap_err();
    assert!(
        err.contains("cannot change column `v` from INTEGER to BIGINT"),
        "{err}"
    );
    run_script(&fjord, script(5), SchemaChangeBehavior::TryEvolve, None).unwrap();
    let err = run_script(
        &fjord,
        script(1 << 40),
        SchemaChangeBehavior::TryEvolve,
        None,
    )
    .unwrap_err();
    assert!(err.contains("1099511627776"), "{err}");
}

/// Wraps the sink: it lets `commits` positions be committed, then holds
/// every later commit back, and after `ok_batches` batches it flushes (the
/// rows are in the tables) and fails, as a process killed after writing
/// past its last commit would have left them.
struct CrashAfter {
    ok_batches: usize,
    commits: usize,
    inner: FlussSink,
}

impl Sink for CrashAfter {
    fn restore(
        &mut self,
        state: Option<&str>,
        store: Option<Arc<OffsetStore>>,
    ) -> Result<(), SinkError> {
        self.inner.restore(state, store)
    }
    fn write_batch(&mut self, batch: &EventBatch) -> Result<(), SinkError> {
        if self.ok_batches == 0 {
            self.inner.flush()?;
            return Err(SinkError::Failed {
                sink: "crash",
                message: "simulated crash".into(),
            });
        }
        self.ok_batches -= 1;
        self.inner.write_batch(batch)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush()
    }
    fn checkpoint(&mut self) -> Result<Checkpoint, SinkError> {
        if self.commits == 0 {
            return Ok(Checkpoint::Hold);
        }
        self.commits -= 1;
        self.inner.checkpoint()
    }
    fn stats(&self) -> SinkStats {
        self.inner.stats()
    }
}

#[test]
fn a_log_table_holds_each_event_once_across_failures_past_the_last_commit() {
    let fjord = Fjord::start();
    let c = clicks();
    let u = users(1);
    // 40 batches of 50 clicks (with repeated rows: equal rows must count
    // right too) and some user upserts.
    let pages = ["/a", "/b", "/c", "/d", "/e"];
    let script: Vec<Vec<Ev>> = (0..40)
        .map(|b| {
            let mut events: Vec<Ev> = (0..50)
                .map(|i| {
                    Ev::Insert(
                        c.clone(),
                        vec![V::I(((b * 50 + i) % 7) as i64), V::S(pages[i % 5])],
                    )
                })
                .collect();
            events.push(Ev::Insert(
                u.clone(),
                vec![V::I(b as i64 % 5), V::S("u"), V::I(b as i64)],
            ));
            events
        })
        .collect();
    let expected: Vec<String> = {
        let mut rows: Vec<String> = (0..40 * 50)
            .map(|n| format!("Int({})|{}", n % 7, pages[n % 50 % 5]))
            .collect();
        rows.sort();
        rows
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(OffsetStore::open(dir.path(), "script").unwrap());
    let mut crashes = 0;
    // Each incarnation commits once early (the interval is long), writes
    // some batches past it and fails.
    for (ok_batches, commits) in [(3usize, 1usize), (7, 2), (2, 0), (9, 3), (5, 1), (30, 2)] {
        let committed = store.load_committed().unwrap().unwrap_or_default();
        let mut sink = CrashAfter {
            ok_batches,
            commits,
            inner: FlussSink::new(options(&fjord), SchemaChangeBehavior::Lenient).unwrap(),
        };
        sink.restore(committed.sink_state.as_deref(), Some(store.clone()))
            .unwrap();
        let source = Script::new(script.clone(), committed.position.as_ref());
        let result = drive(
            Box::new(source),
            Box::new(sink),
            Router::default(),
            Some(&store),
            DriveConfig {
                // A commit after every batch, of which the wrapper lets `commits` through.
                commit_interval: Duration::ZERO,
                batch_events_max: 1024,
                progress_interval: Duration::ZERO,
            },
            &StopFlag::new(),
        );
        match result {
            Err(e) => {
                assert!(e.to_string().contains("simulated crash"), "{e}");
                crashes += 1;
            }
            Ok(_) => break,
        }
    }
    assert!(crashes >= 5);
    // A final clean run to the end; it finds rows of the last failed run.
    let last = run_script(&fjord, script, SchemaChangeBehavior::Lenient, Some(&store)).unwrap();
    assert!(last.sink.skipped_replays > 0, "{:?}", last.sink);
    let rows = fjord.log_rows("app", "clicks");
    assert_eq!(counts(&rows), counts(&expected), "every click exactly once");
    assert_eq!(fjord.pk_rows("app", "users").len(), 5);
}

#[test]
fn an_added_column_is_added_to_the_sink_table_through_alter_table() {
    let fjord = Fjord::start();
    let c1 = clicks();
    // The source adds `ms` after `user_id` (not last: the sink adds it last
    // and maps columns by name).
    let c2 = schema(
        "app",
        "clicks",
        2,
        &[
            ("user_id", DataType::BigInt),
            ("ms", DataType::Int),
            ("page", DataType::String),
        ],
        &[],
    );
    let u1 = users(1);
    let u2 = schema(
        "app",
        "users",
        2,
        &[
            ("id", DataType::BigInt),
            ("name", DataType::Varchar { length: 20 }),
            ("age", DataType::Int),
            ("email", DataType::String),
        ],
        &["id"],
    );
    let add = |s: &Arc<fjord_cdc::schema::TableSchema>, name: &str, t: DataType, after: &str| {
        change(
            s,
            SchemaChange::AddColumn {
                column: fjord_cdc::schema::Column::new(name, t, true),
                position: fjord_cdc::event::ColumnPosition::After(after.into()),
            },
        )
    };
    let script = vec![
        vec![
            Ev::Insert(c1.clone(), vec![V::I(1), V::S("/a")]),
            Ev::Insert(u1.clone(), vec![V::I(1), V::S("ann"), V::I(30)]),
        ],
        vec![
            add(&c2, "ms", DataType::Int, "user_id"),
            Ev::Insert(c2.clone(), vec![V::I(2), V::I(7), V::S("/b")]),
            add(&u2, "email", DataType::String, "age"),
            Ev::Update(
                u2.clone(),
                vec![V::I(1), V::S("ann"), V::I(30), V::Null],
                vec![V::I(1), V::S("ann"), V::I(31), V::S("a@x")],
            ),
            Ev::Insert(u2.clone(), vec![V::I(2), V::S("bob"), V::I(20), V::Null]),
        ],
    ];
    let summary = run_script(&fjord, script, SchemaChangeBehavior::Evolve, None).unwrap();
    assert_eq!(summary.sink.schema_changes, 4, "{:?}", summary.sink);
    let info = fjord.info("app", "clicks");
    let names: Vec<&str> = info
        .descriptor
        .schema()
        .columns()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["user_id", "page", "ms"]);
    assert_eq!(
        fjord.pk_rows("app", "users"),
        vec!["Int(1)|ann|Int(31)|a@x", "Int(2)|bob|Int(20)|NULL"]
    );
    // The log table holds batches of both schemas; its rows read with the new one.
    assert_eq!(
        fjord.log_rows("app", "clicks"),
        vec!["Int(1)|/a|NULL", "Int(2)|/b|Int(7)"]
    );
}

/// A pipeline killed between reading a schema and applying its ADD COLUMN
/// restarts into a source (a snapshot read again) that has the column and
/// no event saying so: the sink adds what its existing table lacks, or,
/// under `exception`, refuses naming the columns, and never drops the
/// values silently.
#[test]
fn an_existing_table_lacking_source_columns_gets_them_or_a_clear_error() {
    let fjord = Fjord::start();
    let u1 = users(1);
    let u2 = schema(
        "app",
        "users",
        2,
        &[
            ("id", DataType::BigInt),
            ("name", DataType::Varchar { length: 20 }),
            ("age", DataType::Int),
            ("email", DataType::String),
        ],
        &["id"],
    );
    let first = vec![vec![Ev::Insert(
        u1.clone(),
        vec![V::I(1), V::S("ann"), V::I(30)],
    )]];
    run_script(&fjord, first, SchemaChangeBehavior::Lenient, None).unwrap();
    let again = || {
        vec![vec![Ev::Insert(
            u2.clone(),
            vec![V::I(2), V::S("bob"), V::I(20), V::S("b@x")],
        )]]
    };
    let err = run_script(&fjord, again(), SchemaChangeBehavior::Exception, None).unwrap_err();
    assert!(
        err.contains("app.users") && err.contains("\"email\"") && err.contains("exception"),
        "{err}"
    );
    run_script(&fjord, again(), SchemaChangeBehavior::Lenient, None).unwrap();
    assert_eq!(
        fjord.pk_rows("app", "users"),
        vec!["Int(1)|ann|Int(30)|NULL", "Int(2)|bob|Int(20)|b@x"]
    );
}
