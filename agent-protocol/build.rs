//! Compiles `proto/` with protox (a Rust protobuf compiler, so no system
//! `protoc`), then generates prost messages and the tonic client and server
//! from the descriptor set. The encoded descriptor set is written next to the
//! generated code so the crate can expose it (tests walk it; reflection can
//! serve it).

use std::path::PathBuf;

use prost::Message as _;

const FILES: [&str; 2] = [
    "spice/agent/common/v1/common.proto",
    "spice/agent/engine/v1/engine.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(FILES, ["proto"])?;
    std::fs::write(out.join("descriptor_set.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // The transport feature of tonic stays with the transport crate; the
        // generated client takes any channel through `new`.
        .build_transport(false)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)?;
    Ok(())
}
