//! `fjord bench write` end to end against a real `fjord server`: every way
//! of handing the writer its records (`--input` rows and typed-rows, one at
//! a time; row-runs; arrow; a partitioned table too) writes exactly the
//! records asked for — the command checks the table's record count itself
//! and fails otherwise — and prints the one JSON line the benchmark notes
//! are built from, with its CPU split by thread. Typed rows of a
//! partitioned table are refused before anything is written. `fjord bench
//! lookup` reads every key back, both ways of keeping lookups in flight.

mod support;

use std::process::Command;

use support::FjordServer;

/// Records per run: small, so the test is quick; more than one batch.
const ROWS: &str = "20000";

/// Runs `fjord bench write` with `args` against `bootstrap`; the JSON line.
fn bench_write(bootstrap: &str, args: &[&str]) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(["bench", "write", "--bootstrap", bootstrap, "--rows", ROWS])
        // Batches of 64 KiB, so every run seals several.
        .args([
            "--batch-rows",
            "3000",
            "--set",
            "client.writer.batch-size=64kb",
        ])
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run fjord bench write");
    report_of(output, &format!("{args:?}"))
}

/// The one JSON line a bench run that must succeed (`what`) printed.
fn report_of(output: std::process::Output, what: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed: {stderr}");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
    serde_json::from_str(lines[0]).expect("a JSON object")
}

#[test]
fn every_input_writes_the_records_asked_for_and_reports_its_cpu_by_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = FjordServer::start(dir.path());
    let bootstrap = server.bootstrap_servers();
    for (input, compression, name) in [
        ("rows", "zstd", "rows"),
        ("typed-rows", "zstd", "typed_rows"),
        ("row-runs", "zstd", "row_runs"),
        ("row-runs", "none", "row_runs"),
        ("arrow", "lz4", "arrow"),
    ] {
        let report = bench_write(
            &bootstrap,
            &["--input", input, "--compression", compression],
        );
        assert_eq!(report["op"], "write");
        assert_eq!(report["client"], "fjord");
        assert_eq!(report["input"], name, "{report}");
        assert_eq!(report["records"], 20_000, "{report}");
        for field in ["records_per_s", "mb_per_s", "client_cpu_ns_per_record"] {
            assert!(
                report[field].as_f64().unwrap_or(0.0) > 0.0,
                "{field}: {report}"
            );
        }
        // The thread that hands the records over is measured apart from
        // the encoder's: both did work in every mode.
        for field in ["caller_cpu_ns_per_record", "encoder_cpu_ns_per_record"] {
            assert!(
                report[field].as_f64().unwrap_or(0.0) > 0.0,
                "{field}: {report}"
            );
        }
        assert!(report["batches"].as_f64().unwrap_or(0.0) >= 2.0, "{report}");
    }
    // Row runs into a partitioned table go row by row through the
    // partition router, and still write every record.
    let report = bench_write(&bootstrap, &["--input", "row-runs", "--partitioned"]);
    assert_eq!(report["records"], 20_000, "{report}");
    assert_eq!(report["partitions"], 30.0, "{report}");
    // The one-column workload, as rows of a type of its own.
    let report = bench_write(
        &bootstrap,
        &[
            "--input",
            "typed-rows",
            "--schema",
            "long",
            "--compression",
            "none",
        ],
    );
    assert_eq!(report["schema"], "long", "{report}");
    assert_eq!(report["records"], 20_000, "{report}");
    // Typed rows have no day column: refused before anything is written.
    let output = Command::new(env!("CARGO_BIN_EXE_fjord"))
        .args(["bench", "write", "--bootstrap", &bootstrap, "--rows", ROWS])
        .args(["--input", "typed-rows", "--partitioned"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run fjord bench write");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("--input typed-rows"), "{stderr}");
    assert!(output.stdout.is_empty(), "no JSON line for a refused run");
}

/// `fjord bench lookup` writes the primary-key workload, then looks up
/// `--lookups` of its keys, each way of keeping them in flight (`--drive`):
/// the command fails when a row is missing or is not its key's last write,
/// or when fewer lookups were timed than asked for; its JSON line says
/// how many lookups, how many in flight and which way.
#[test]
fn bench_lookup_reads_every_key_back_both_ways_of_keeping_lookups_in_flight() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = FjordServer::start(dir.path());
    let bootstrap = server.bootstrap_servers();
    for drive in ["tasks", "stream"] {
        let output = Command::new(env!("CARGO_BIN_EXE_fjord"))
            .args(["bench", "lookup", "--bootstrap", &bootstrap])
            .args(["--keys", "3000", "--lookups", "5000", "--in-flight", "64"])
            .args(["--drive", drive])
            .env("RUST_LOG", "warn")
            .output()
            .expect("run fjord bench lookup");
        let report = report_of(output, &format!("--drive {drive}"));
        assert_eq!(report["bench"], "lookup", "{report}");
        assert_eq!(report["client"], "fjord", "{report}");
        assert_eq!(report["drive"], drive, "{report}");
        assert_eq!(report["lookups"], 5000, "{report}");
        assert_eq!(report["keys"], 3000, "{report}");
        assert_eq!(report["in_flight"], 64, "{report}");
    }
}
