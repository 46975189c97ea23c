//! `fjord partitions list|create|drop` from the command line against the real
//! `fjord server` binary: output, exit codes and the messages of bad input.

mod support;

use std::collections::BTreeMap;
use std::process::{Command, Output};

use fjord_client::{Admin, ServerConnection, TablePath};
use fjord_format::schema::{DatabaseDescriptor, Schema, TableDescriptor};
use fjord_format::types::DataType;
use support::FjordServer;

/// Creates `db.<name>` (`id BIGINT` plus one STRING column per partition
/// key, partitioned by `keys`) through the native client.
fn create_table(server: &FjordServer, name: &str, keys: &[&str]) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let addr = server.bootstrap_servers();
        let connection = server
            .step("connect", ServerConnection::connect(&addr))
            .await;
        let admin = Admin::new(connection);
        let mut schema = Schema::builder().column("id", DataType::bigint());
        for key in keys {
            schema = schema.column(*key, DataType::string());
        }
        let descriptor = TableDescriptor::new(
            schema.build().expect("schema"),
            None,
            keys.iter().map(|k| (*k).to_owned()).collect(),
            None,
            BTreeMap::new(),
            BTreeMap::new(),
        )
        .expect("descriptor");
        server
            .step(
                "create database",
                admin.create_database("db", &DatabaseDescriptor::default(), true),
            )
            .await;
        server
            .step(
                "create table",
                admin.create_table(&TablePath::new("db", name), &descriptor, false),
            )
            .await;
    });
}

/// Runs `fjord partitions <args>` against `server`.
fn fjord(server: &FjordServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fjord"))
        .arg("partitions")
        .args(args)
        .args(["--bootstrap", &server.bootstrap_servers()])
        .env("NO_COLOR", "1")
        .output()
        .expect("run fjord partitions")
}

/// Runs it and requires success; returns stdout.
fn ok(server: &FjordServer, args: &[&str]) -> String {
    let out = fjord(server, args);
    assert!(
        out.status.success(),
        "fjord partitions {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs it and requires failure; returns stderr.
fn fails(server: &FjordServer, args: &[&str]) -> String {
    let out = fjord(server, args);
    assert!(
        !out.status.success(),
        "fjord partitions {args:?} should have failed; stdout:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).expect("utf-8 stderr")
}

/// The NAME column of `list` output (header skipped).
fn listed_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect()
}

#[test]
fn create_list_drop_round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = FjordServer::start(dir.path());
    create_table(&server, "events", &["dt", "region"]);
    let t = ["--table", "db.events"];

    let empty = ok(&server, &["list", t[0], t[1]]);
    assert_eq!(empty.lines().count(), 1, "header only:\n{empty}");
    assert!(empty.starts_with("PARTITION_ID"), "{empty}");

    let created = ok(
        &server,
        &["create", t[0], t[1], "--spec", "region=eu,dt=20261130"],
    );
    assert!(
        created.contains("dt=20261130/region=eu") && created.contains("name 20261130$eu"),
        "{created}"
    );
    ok(
        &server,
        &["create", t[0], t[1], "--spec", "dt=20261201,region=us"],
    );

    let all = ok(&server, &["list", t[0], t[1]]);
    assert_eq!(listed_names(&all), ["20261130$eu", "20261201$us"], "{all}");
    assert!(all.contains("dt=20261201/region=us"), "{all}");

    let eu = ok(&server, &["list", t[0], t[1], "--spec", "region=eu"]);
    assert_eq!(listed_names(&eu), ["20261130$eu"], "{eu}");

    let again = fails(
        &server,
        &["create", t[0], t[1], "--spec", "dt=20261130,region=eu"],
    );
    assert!(again.contains("PARTITION_ALREADY_EXISTS"), "{again}");
    ok(
        &server,
        &[
            "create",
            t[0],
            t[1],
            "--spec",
            "dt=20261130,region=eu",
            "--if-not-exists",
        ],
    );

    let dropped = ok(
        &server,
        &["drop", t[0], t[1], "--spec", "dt=20261130,region=eu"],
    );
    assert!(dropped.contains("dropped"), "{dropped}");
    let after = ok(&server, &["list", t[0], t[1]]);
    assert_eq!(listed_names(&after), ["20261201$us"], "{after}");

    let missing = fails(
        &server,
        &["drop", t[0], t[1], "--spec", "dt=20261130,region=eu"],
    );
    assert!(missing.contains("PARTITION_NOT_EXISTS"), "{missing}");
    ok(
        &server,
        &[
            "drop",
            t[0],
            t[1],
            "--spec",
            "dt=20261130,region=eu",
            "--if-exists",
        ],
    );
}

#[test]
fn bad_input_is_refused_with_a_message_naming_the_problem() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = FjordServer::start(dir.path());
    create_table(&server, "events", &["dt", "region"]);
    create_table(&server, "plain", &[]);

    let check = |args: &[&str], expected: &str| {
        let stderr = fails(&server, args);
        assert!(
            stderr.contains(expected),
            "fjord partitions {args:?}: expected {expected:?} in:\n{stderr}"
        );
    };
    check(
        &["list", "--table", "db.plain"],
        "db.plain is not partitioned",
    );
    check(&["list", "--table", "db.nope"], "db.nope");
    check(&["list", "--table", "nodot"], "expected database.table");
    check(
        &["create", "--table", "db.events", "--spec", "dt"],
        "is not key=value",
    );
    check(
        &[
            "create",
            "--table",
            "db.events",
            "--spec",
            "day=1,region=eu",
        ],
        "`day` is not a partition key of db.events; its partition keys are dt, region",
    );
    check(
        &["create", "--table", "db.events", "--spec", "dt=20261130"],
        "`region` is missing",
    );
    check(
        &["drop", "--table", "db.events", "--spec", "dt=1,dt=2"],
        "given twice",
    );
}

#[test]
fn unreachable_bootstrap_fails_instead_of_hanging() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(["partitions", "list", "--table", "db.t", "--bootstrap"])
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .expect("run fjord partitions");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no bootstrap server reachable"), "{stderr}");
}

/// (id, name) of each `list` row, in printed order.
fn listed_ids_and_names(stdout: &str) -> Vec<(i64, String)> {
    stdout
        .lines()
        .skip(1)
        .map(|line| {
            let mut cells = line.split_whitespace();
            let id = cells.next().expect("id cell").parse().expect("numeric id");
            (id, cells.next().expect("name cell").to_owned())
        })
        .collect()
}

#[test]
fn fluss_rs_and_the_cli_agree_on_partition_names_ids_and_specs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = FjordServer::start(dir.path());
    create_table(&server, "shared", &["dt", "region"]);
    let t = ["--table", "db.shared"];
    ok(
        &server,
        &["create", t[0], t[1], "--spec", "dt=20261130,region=eu"],
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let from_fluss = runtime.block_on(async {
        let config = fluss::config::Config {
            bootstrap_servers: server.bootstrap_servers(),
            ..fluss::config::Config::default()
        };
        let conn = server
            .step(
                "fluss-rs connect",
                fluss::client::FlussConnection::new(config),
            )
            .await;
        let admin = conn.get_admin().expect("admin");
        let path = fluss::metadata::TablePath::new("db", "shared");
        let spec = fluss::metadata::PartitionSpec::new(std::collections::HashMap::from([
            ("dt", "20261201"),
            ("region", "us"),
        ]));
        server
            .step(
                "fluss-rs create partition",
                admin.create_partition(&path, &spec, false),
            )
            .await;
        let infos = server
            .step(
                "fluss-rs list partitions",
                admin.list_partition_infos(&path),
            )
            .await;
        support::described_partitions(&infos)
    });

    let cli = ok(&server, &["list", t[0], t[1]]);
    let from_cli = listed_ids_and_names(&cli);
    // The CLI prints by id; fluss-rs's listing is sorted by name.
    let mut by_id: Vec<(i64, String)> = from_fluss
        .iter()
        .map(|(name, id, _)| (*id, name.clone()))
        .collect();
    by_id.sort();
    assert_eq!(from_cli, by_id, "CLI:\n{cli}");
    assert_eq!(
        from_fluss
            .iter()
            .map(|(n, _, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["20261130$eu", "20261201$us"]
    );
    assert_eq!(
        from_fluss[0].2,
        [
            ("dt".to_owned(), "20261130".to_owned()),
            ("region".to_owned(), "eu".to_owned())
        ]
    );
    assert!(cli.contains("dt=20261201/region=us"), "{cli}");
}
