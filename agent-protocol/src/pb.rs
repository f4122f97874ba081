//! Generated Protobuf messages and the tonic client and server of `common/v1`
//! and `engine/v1`, compiled by `build.rs` from `proto/`.

/// Package `spice.agent.common.v1`.
pub mod common {
    /// Version 1 of the common vocabulary.
    #[allow(missing_docs, unreachable_pub, clippy::all, rust_2018_idioms)]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/spice.agent.common.v1.rs"));
    }
}

/// Package `spice.agent.engine.v1`.
pub mod engine {
    /// Version 1 of the engine service.
    #[allow(missing_docs, unreachable_pub, clippy::all, rust_2018_idioms)]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/spice.agent.engine.v1.rs"));
    }
}

/// The encoded `FileDescriptorSet` of both packages, as protox compiled it
/// (for gRPC reflection and for the wire-table test).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/descriptor_set.bin"));
