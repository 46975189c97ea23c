//! `runtime::run` end to end on a Debezium JSON file: a pipeline definition
//! with a state dir resumes where the previous run's sink confirmed, and
//! `until_current` stops at the input's size at start.

use std::io::Write;

use fjord_cdc::config;
use fjord_cdc::position::SourcePosition;
use fjord_cdc::runtime::{run, RunOptions};

fn line(id: u32) -> String {
    format!(
        "{{\"before\":null,\"after\":{{\"id\":{id}}},\"source\":{{\"db\":\"app\",\"table\":\"t\"}},\"op\":\"c\"}}\n"
    )
}

fn definition(input: &std::path::Path, state: &std::path::Path) -> config::PipelineDef {
    config::parse(&format!(
        "source:\n  type: debezium-json\n  path: {}\nsink:\n  type: values\npipeline:\n  name: resume test\n  state-dir: {}\n  state.commit-interval-ms: 0\n",
        input.display(),
        state.display()
    ))
    .unwrap()
}

#[test]
fn rerun_with_state_dir_delivers_only_new_events() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("events.json");
    let state = dir.path().join("state");
    let mut file = std::fs::File::create(&input).unwrap();
    for id in 1..=5 {
        file.write_all(line(id).as_bytes()).unwrap();
    }
    file.flush().unwrap();

    let first = run(definition(&input, &state), RunOptions::default()).unwrap();
    assert_eq!(first.events, 5);
    assert_eq!(first.resumed_from, None);
    let size = std::fs::metadata(&input).unwrap().len();
    assert_eq!(
        first.position,
        Some(SourcePosition::InputOffset { bytes: size })
    );

    for id in 6..=7 {
        file.write_all(line(id).as_bytes()).unwrap();
    }
    file.flush().unwrap();
    let second = run(definition(&input, &state), RunOptions::default()).unwrap();
    assert_eq!(second.events, 2);
    assert_eq!(
        second.resumed_from,
        Some(SourcePosition::InputOffset { bytes: size })
    );

    let third = run(
        definition(&input, &state),
        RunOptions {
            until_current: true,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(third.events, 0);
}

#[test]
fn state_dir_of_another_source_type_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let store = fjord_cdc::offsets::OffsetStore::open(&state, "mysql").unwrap();
    store
        .commit(&SourcePosition::InputOffset { bytes: 1 })
        .unwrap();
    let input = dir.path().join("events.json");
    std::fs::write(&input, line(1)).unwrap();
    let err = run(definition(&input, &state), RunOptions::default()).unwrap_err();
    assert!(err.to_string().contains("mysql"), "{err}");
}

#[test]
fn missing_input_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = run(
        definition(&dir.path().join("absent.json"), &dir.path().join("state")),
        RunOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("absent.json"), "{err}");
}
