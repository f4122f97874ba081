//! The local daemon's transport: the tonic `EngineService` over a current-user Unix socket
//! (docs/transport.md), in front of a [`agent_daemon::RunHost`].
//!
//! - [`server::Server`]: authentication on every RPC (exactly one `authorization: Bearer`
//!   value and the expected peer uid), the negotiated-session registry, Initialize with
//!   attempt replay, the lifecycle handlers and the event stream.
//! - [`daemon::Daemon`]: the boot order (token, socket, server, serve, publish) and the
//!   teardown (withdraw, stop serving, stop the host, close the socket).
//! - [`fixture`]: a definition set and engine with two fixed definitions for client
//!   tests: `00-fixture-text` (one text turn, then complete) and `01-fixture-pending`
//!   (stays active until cancelled), both at revision `fixture-v1`.
//!
//! `docs/transport.md` describes the socket rules, authentication, the endpoint files and
//! shutdown.
#![forbid(unsafe_code)]

mod connection;
pub mod daemon;
pub mod fixture;
mod registry;
pub mod server;
mod service;
pub mod status;
mod workspace;

pub use daemon::{Daemon, DaemonConfig, DaemonError};
pub use registry::{
    ATTEMPT_RESERVATIONS_RESOURCE, ATTEMPT_WAITERS_RESOURCE, MAX_ATTEMPT_WAITERS,
    MAX_RECONNECT_WAITERS, RECONNECT_WAITERS_RESOURCE, SESSIONS_RESOURCE,
};
pub use server::{Server, ServerConfig, ServerError};
pub use service::{
    CANCELLED_TEXT, INTERACTION_CANCELLED_TEXT, INTERACTION_FAILED_TEXT, MODEL_FAILED_CODE,
    MODEL_FAILED_MESSAGE, STOPPING_MESSAGE, STREAM_BUFFER, TOOL_FAILED_TEXT,
    UNAUTHENTICATED_MESSAGE, attempt_fingerprint, check_wire_event, envelope_from_wire,
    envelope_to_wire, event_to_wire, event_to_wire_with, model_operation_id, project_event,
    project_payload, rich_facts,
};
pub use workspace::{WORKSPACE_METADATA, workspace_refusal};
