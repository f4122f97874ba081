//! The local daemon endpoint, shared by the server and its clients: the bearer credential
//! a client presents on every RPC ([`token`]), current-user Unix sockets ([`localipc`]),
//! the per-user scope directory ([`scope`]), the published endpoint metadata
//! ([`metadata`]) and the store that publishes and discovers it ([`store`]).
//!
//! This crate never depends on the kernel crates; `agent-core/tests/architecture.rs`
//! proves it.
#![forbid(unsafe_code)]

pub mod base64url;
pub mod localipc;
pub mod metadata;
pub mod scope;
pub mod store;
pub mod token;

pub use localipc::IpcError;
pub use metadata::{Metadata, MetadataError};
pub use scope::{ScopeError, UserScope};
pub use store::{Publication, StartupLease, Store, StoreError};
pub use token::{EndpointToken, TokenError};
