//! The gRPC adapter of the `agent-client` seam: [`GrpcConnector`] dials the
//! daemon's `EngineService` over a Unix socket with tonic and implements
//! [`agent_client::Connector`]; [`managed::ManagedConnector`] attaches to a
//! running daemon or starts one; [`local`] finds the daemon of a user scope
//! through the endpoint store and connects with the socket checks of
//! `agent_endpoint::localipc`.
//!
//! What it guarantees (docs/client.md): the bearer token on every
//! call; negotiated message bounds in both directions; a per-client
//! reconnect gate that fences and joins the prior local session; at most one
//! byte-identical Initialize resend, and only for a 1.3 attempt id after
//! `Unavailable`; mutations never retried and transport loss reported as
//! [`agent_client::Error::UncertainOperation`]; status correlation, page and
//! tail validation with `agent-protocol`'s validators.
//!
//! ```no_run
//! use agent_client::{Connector as _, Session as _, *};
//! use agent_client_grpc::{Config, GrpcConnector};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let connector = GrpcConnector::new(Config::unix("/run/user/1000/agent/engine.sock".as_ref(), "token")?);
//! let v = |minor| ProtocolVersion::new(1, minor, 0);
//! let request = InitializeRequest::new(
//!     ProtocolRange::new(v(0)?, v(2)?)?,
//!     Build::new("my-ui", "0.1.0", "abc123", "rustc")?,
//!     vec![],
//!     vec![],
//!     Limits::new(4 << 20, 256, 256, 4 << 20, 8, 8)?,
//! )?;
//! let session = connector.initialize(request).await?;
//! let health = session.health().await?;
//! println!("{:?} with {} active runs", health.state(), health.active_runs());
//! session.close();
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod attempt;
mod connector;
mod convert;
pub mod local;
pub mod managed;
mod session;
mod status;

pub use attempt::{AttemptIdError, new_attempt_id};
pub use connector::{
    ATTEMPTS_LEGACY, ATTEMPTS_WITH_ATTEMPT_ID, Config, GrpcConnector, RECONNECT_GATE_WAITERS,
    RECONNECT_WAITERS_RESOURCE,
};
pub use convert::decode_event;
pub use session::{
    AUTHORIZATION_HEADER, GrpcEventStream, GrpcInteractionStream, GrpcSession,
    STREAM_BUFFER_FRAMES, WORKSPACE_METADATA,
};
