//! Compiles `proto/fluss_api.proto` into Rust types with prost, using protox
//! (a pure-Rust protobuf compiler) so that no system `protoc` is required.

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = Path::new("proto/fluss_api.proto");
    println!("cargo:rerun-if-changed={}", proto.display());

    let descriptors = protox::compile([proto], ["proto"])?;
    prost_build::Config::new()
        // Every `bytes` field becomes `bytes::Bytes`: decoding from a `Bytes`
        // body then slices the frame instead of copying, which matters for the
        // record data in ProduceLog requests and FetchLog responses.
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
