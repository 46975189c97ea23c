//! `fjord pipeline run` as a user runs it: Debezium JSON in, the print sink's
//! JSON lines and the `--until-current` summary line out on stdout; a bad
//! YAML option is refused with `file:line` and a non-zero exit.

use std::process::Command;

fn fjord() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fjord"))
}

#[test]
fn print_pipeline_emits_events_then_one_summary_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("events.json");
    std::fs::write(
        &input,
        concat!(
            r#"{"before":null,"after":{"id":1,"name":"a"},"source":{"db":"app","table":"users"},"op":"c"}"#,
            "\n",
            r#"{"before":{"id":1,"name":"a"},"after":null,"source":{"db":"app","table":"users"},"op":"d"}"#,
            "\n"
        ),
    )
    .expect("write input");
    let yaml = dir.path().join("pipeline.yaml");
    std::fs::write(
        &yaml,
        format!(
            "source:\n  type: debezium-json\n  path: {}\nsink:\n  type: print\npipeline:\n  name: cli test\n",
            input.display()
        ),
    )
    .expect("write yaml");

    let output = fjord()
        .args(["pipeline", "run"])
        .arg(&yaml)
        .arg("--until-current")
        .output()
        .expect("run fjord");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    assert_eq!(lines.len(), 3, "two events and a summary:\n{stdout}");
    assert_eq!(lines[0]["table"], "app.users");
    assert_eq!(lines[0]["op"], "insert");
    assert_eq!(lines[0]["after"]["id"], 1);
    assert_eq!(lines[0]["after"]["name"], "a");
    assert_eq!(lines[1]["op"], "delete");
    assert_eq!(lines[1]["before"]["id"], 1);
    assert!(lines[1]["after"].is_null());
    let summary = &lines[2];
    assert_eq!(summary["events"], 2);
    assert!(summary["events_per_s"].is_number(), "{summary}");
    assert!(summary["cpu_ns_per_event"].is_number(), "{summary}");
}

#[test]
fn unknown_option_is_refused_with_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = dir.path().join("bad.yaml");
    std::fs::write(
        &yaml,
        "source:\n  type: debezium-json\n  hostnme: db\nsink:\n  type: print\n",
    )
    .expect("write yaml");
    let output = fjord()
        .args(["pipeline", "run"])
        .arg(&yaml)
        .output()
        .expect("run fjord");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.yaml:3") && stderr.contains("hostnme"),
        "stderr should name the file, line 3 and the option:\n{stderr}"
    );
}
