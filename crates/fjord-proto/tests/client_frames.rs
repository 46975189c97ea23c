//! Frames captured from the official clients (pyfluss 1.0.0, fluss-rs 1.0.0,
//! the Java client 0.9.1) and the hand-made seeds, all in the
//! `frame_decode` fuzz corpus, must decode: the frame, and for every request
//! of a served api the body, which then round-trips decode -> encode ->
//! decode. This is the protocol layer's interop check against real bytes.

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use fjord_proto::{decode_request, ApiKey, FrameDecoder, Request, ResponseFrame};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/frame_decode")
}

/// The corpus files whose name starts with `prefix`, sorted, with contents.
fn corpus_files(prefix: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .expect("fuzz/corpus/frame_decode exists")
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix))
        })
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&path).expect("readable corpus file");
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Decodes every request frame in `bytes`, checking each served request
/// round-trips; returns the api keys seen.
fn check_request_frames(name: &str, bytes: &[u8]) -> Vec<ApiKey> {
    let decoder = FrameDecoder::default();
    let mut buf = BytesMut::from(bytes);
    let mut keys = Vec::new();
    while !buf.is_empty() {
        let frame = decoder
            .decode_request(&mut buf)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: truncated frame"));
        let header = frame.header;
        let key = ApiKey::from_id(header.api_key)
            .unwrap_or_else(|| panic!("{name}: unknown api key {}", header.api_key));
        keys.push(key);
        let request = decode_request(header.api_key, header.api_version, frame.body)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut again = BytesMut::new();
        request
            .encode_frame(&mut again, header.api_version, header.request_id)
            .unwrap();
        let frame = decoder.decode_request(&mut again).unwrap().unwrap();
        let redecoded: Request =
            decode_request(frame.header.api_key, frame.header.api_version, frame.body).unwrap();
        assert_eq!(redecoded, request, "{name}: round trip changed the request");
    }
    keys
}

#[test]
fn frames_captured_from_official_clients_decode_and_round_trip() {
    let mut seen = Vec::new();
    for client in ["pyfluss-", "fluss-rs-", "java-"] {
        for (name, bytes) in corpus_files(client) {
            seen.extend(check_request_frames(&name, &bytes));
        }
    }
    // Nothing to check is a failure, not a pass: the capture must be there.
    for key in [
        ApiKey::ApiVersions,
        ApiKey::MetaData,
        ApiKey::CreateTable,
        ApiKey::ProduceLog,
    ] {
        assert!(seen.contains(&key), "no captured {key} frame");
    }
}

#[test]
fn hand_made_request_seeds_decode_and_round_trip() {
    let files = corpus_files("request");
    assert!(files.len() >= 10, "seed requests missing");
    for (name, bytes) in files {
        check_request_frames(&name, &bytes);
    }
}

#[test]
fn hand_made_response_seeds_decode() {
    let files = corpus_files("response_");
    assert!(files.len() >= 4, "seed responses missing");
    for (name, bytes) in files {
        let mut buf = BytesMut::from(&bytes[..]);
        let frame = FrameDecoder::default()
            .decode_response(&mut buf)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: truncated frame"));
        assert!(buf.is_empty(), "{name}: trailing bytes");
        if name.ends_with("server_failure") {
            assert!(
                matches!(frame, ResponseFrame::ServerFailure { .. }),
                "{name}"
            );
        }
    }
}
