//! Crash regressions: every file under `fuzz/regressions/<target>/` is run
//! through that fuzz target's logic (`fjord_format::fuzzing`, the very
//! functions the fuzz targets call), so an input that once crashed a
//! decoder stays covered by `cargo test`. To keep a crash found by
//! `scripts/fuzz.sh`, copy its file from `fuzz/artifacts/<target>/` into
//! `fuzz/regressions/<target>/` together with the fix.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use fjord_format::fuzzing::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The `[[bin]]` names of `fuzz/Cargo.toml`: every fuzz target of the project.
fn fuzz_bins() -> Vec<String> {
    let manifest = fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let mut bins = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if let (true, Some(value)) = (in_bin, line.strip_prefix("name")) {
            let name = value
                .trim_start()
                .trim_start_matches('=')
                .trim()
                .trim_matches('"');
            bins.push(name.to_owned());
        }
    }
    bins
}

#[test]
fn every_target_here_is_a_fuzz_target() {
    let bins = fuzz_bins();
    for (name, _) in TARGETS {
        assert!(
            bins.iter().any(|b| b == name),
            "fuzzing::TARGETS names `{name}`, which fuzz/Cargo.toml has no [[bin]] for"
        );
    }
}

#[test]
fn recorded_crashes_stay_fixed() {
    let root = fuzz_dir().join("regressions");
    let bins = fuzz_bins();
    let mut replayed = 0;
    let mut failures = Vec::new();
    for entry in fs::read_dir(&root).expect("fuzz/regressions exists") {
        let dir = entry.expect("readable entry").path();
        if !dir.is_dir() {
            continue;
        }
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            bins.contains(&name),
            "fuzz/regressions/{name} is not named after a fuzz target of fuzz/Cargo.toml"
        );
        // Targets of other crates (proto, storage) are replayed by their own tests.
        let Some((_, run)) = TARGETS.iter().find(|(target, _)| *target == name) else {
            continue;
        };
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .expect("readable target dir")
            .map(|e| e.expect("readable entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        for file in files {
            let data = fs::read(&file).expect("readable regression file");
            if panic::catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failures.push(file.display().to_string());
            }
            replayed += 1;
        }
    }
    assert!(failures.is_empty(), "regressions crash again: {failures:?}");
    assert!(
        replayed > 0,
        "no regression files found under {}",
        root.display()
    );
}
