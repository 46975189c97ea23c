//! Every message and field of `proto/fluss_api.proto` must be identical
//! (name, number, label, type, packing) to fluss-rs 1.0.0's FlussApi.proto,
//! the compatibility truth. fluss-rs is a dev-dependency of the workspace's
//! interop tests, so cargo has its sources in the registry whenever the
//! workspace's tests build; the test fails, saying so, if they are missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where cargo unpacks crates.io sources.
fn registry_src() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
        .expect("CARGO_HOME or HOME is set");
    cargo_home.join("registry").join("src")
}

fn fluss_rs_proto_dir() -> PathBuf {
    let src = registry_src();
    let found = std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", src.display()))
        .filter_map(|index| {
            let dir = index.ok()?.path().join("fluss-rs-1.0.0").join("proto");
            dir.join("FlussApi.proto").is_file().then_some(dir)
        })
        .next();
    found.unwrap_or_else(|| {
        panic!(
            "fluss-rs 1.0.0 sources not found under {}; run `cargo fetch` in the workspace \
             (crates/fjord dev-depends on fluss-rs =1.0.0)",
            src.display()
        )
    })
}

/// One field as the wire sees it.
#[derive(Debug, PartialEq, Eq)]
struct Field {
    name: String,
    label: Option<i32>,
    kind: Option<i32>,
    type_name: Option<String>,
    packed: Option<bool>,
}

/// message name -> field number -> field, for every message of the file.
fn messages(dir: &Path, file: &str) -> BTreeMap<String, BTreeMap<i32, Field>> {
    let set = protox::compile([dir.join(file)], [dir]).expect("proto compiles");
    let mut out = BTreeMap::new();
    for file in set.file {
        for message in file.message_type {
            let fields = message
                .field
                .into_iter()
                .map(|f| {
                    let field = Field {
                        name: f.name.clone().unwrap_or_default(),
                        label: f.label,
                        kind: f.r#type,
                        type_name: f.type_name.clone(),
                        packed: f.options.as_ref().and_then(|o| o.packed),
                    };
                    (f.number.unwrap_or_default(), field)
                })
                .collect();
            out.insert(message.name.unwrap_or_default(), fields);
        }
    }
    out
}

#[test]
fn every_message_matches_fluss_rs_1_0_0() {
    let ours_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let ours = messages(&ours_dir, "fluss_api.proto");
    let theirs = messages(&fluss_rs_proto_dir(), "FlussApi.proto");
    assert!(ours.len() > 60, "our proto lost messages: {}", ours.len());
    for (name, fields) in &ours {
        let Some(their_fields) = theirs.get(name) else {
            panic!("message {name} does not exist in fluss-rs 1.0.0");
        };
        assert_eq!(
            fields, their_fields,
            "message {name} differs from fluss-rs 1.0.0"
        );
    }
}
