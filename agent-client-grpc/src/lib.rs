//! The gRPC adapter of the `agent-client` seam: [`GrpcConnector`] dials the
//! daemon's `EngineService` over a Unix socket with tonic and implements
//! [`agent_client::Connector`]; [`managed::ManagedConnector`] attaches to a
//! running daemon or starts one.
//!
//! What it guarantees (reference section 4.5): the bearer token on every
//! call; negotiated message bounds in both directions; a per-client
//! reconnect gate that fences and joins the prior local session; at most one
//! byte-identical Initialize resend, and only for a 1.3 attempt id after
//! `Unavailable`; mutations never retried and transport loss reported as
//! [`agent_client::Error::UncertainOperation`]; status correlation, page and
//! tail validation with `agent-protocol`'s validators.
#![forbid(unsafe_code)]

mod connector;
mod convert;
pub mod managed;
mod session;
mod status;

pub use connector::{
    ATTEMPTS_LEGACY, ATTEMPTS_WITH_ATTEMPT_ID, AUTHORIZATION_HEADER, Config, GrpcConnector,
    RECONNECT_GATE_WAITERS, RECONNECT_WAITERS_RESOURCE,
};
pub use session::{GrpcEventStream, GrpcInteractionStream, GrpcSession, STREAM_BUFFER_FRAMES};
