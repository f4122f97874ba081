//! The engine process boundary: the `spice.agent.common.v1` and
//! `spice.agent.engine.v1` Protobuf packages (wire-compatible with the
//! original daemon), the tonic service traits, and the hand-written
//! validators that sit next to them.
//!
//! Validators are pure functions: no I/O, no clocks, no kernel types. A
//! failed check returns a [`Violation`], which names the broken rule with a
//! fixed message and converts into the typed [`pb::common::v1::Status`] that
//! travels inside a response. gRPC status codes are only used for the
//! transport-level failures listed in [`grpc`].
#![forbid(unsafe_code)]

pub mod event_payload;
pub mod grpc;
pub mod initialize;
pub mod limits;
pub mod negotiate;
pub mod pb;
pub mod requests;
pub mod responses;
pub mod snapshot;
pub mod status;
pub mod stream;
pub mod token;
pub mod violation;
pub mod wire;

pub use violation::Violation;

/// What a connection negotiated: the selected protocol version and limits.
/// Per-request validators need both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The selected protocol version.
    pub protocol: pb::common::v1::ProtocolVersion,
    /// The selected per-connection limits.
    pub limits: pb::common::v1::Limits,
    /// The enabled capabilities, sorted.
    pub capabilities: Vec<String>,
}
