//! The `fjord` binary alone and with its dev-dependencies (the fluss-rs
//! benchmark examples) resolve every shared crate with the same features.
//!
//! Cargo's resolver turns on a dev-dependency's features only in builds
//! that include a dev target. Where they differ, `cargo build --release -p
//! fjord` (the quickstart) and a benchmark build of `--example
//! fluss_rs_kv_bench` each rebuild arrow, DataFusion and tokio after the
//! other (32 min on 2 cores, docs/BENCHMARKS.md "Builds") and run differently
//! built tokios.
//! `crates/fjord/Cargo.toml` turns those features on for the binary too;
//! this test fails, naming the crate and the features to add there, when a
//! dev-dependency's upgrade brings a new one.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Every package of `fjord`'s dependency tree over `edges`, with the
/// features it is built with.
fn features(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "--locked",
            "--manifest-path",
            manifest,
            "-p",
            "fjord",
            "-e",
            edges,
            "--prefix",
            "none",
            "-f",
            "{p}|{f}",
        ])
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -e {edges} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).expect("utf-8").lines() {
        let line = line.trim_end_matches(" (*)");
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        packages.entry(package.to_owned()).or_default().extend(
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned),
        );
    }
    packages
}

/// The crates the binary shares with its dev-dependencies are built with
/// one set of features, whichever of the two builds runs.
#[test]
fn the_binary_alone_and_the_benchmark_build_share_every_crates_features() {
    let alone = features("normal,build");
    let with_dev = features("normal,build,dev");
    assert!(
        alone.len() > 100,
        "the tree of fjord should be large, got {} packages",
        alone.len()
    );
    let differing: Vec<String> = alone
        .iter()
        .filter_map(|(package, features)| {
            let dev = with_dev.get(package)?;
            (dev != features).then(|| {
                let missing: Vec<&String> = dev.difference(features).collect();
                format!("{package}: add features {missing:?}")
            })
        })
        .collect();
    assert!(
        differing.is_empty(),
        "crates/fjord/Cargo.toml must turn on what the dev-dependencies turn on:\n{}",
        differing.join("\n")
    );
}
