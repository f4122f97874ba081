//! The transport-independent daemon host seam: served definitions, stable client sessions
//! with ownership epochs, the idempotency ledger, pending interactions and the
//! [`RunHost`] that composes them with the kernel engine and the run
//! authority. No transport, sockets or Protobuf: `docs/daemon.md` describes the orderings.
//!
//! The kernel crates never depend on this crate.
#![forbid(unsafe_code)]

pub mod definition;
mod error;
pub mod host;
pub mod ledger;
pub mod pending;
pub mod session;
pub mod token;

pub use error::{Class, HostError};
pub use host::{RunHost, RunHostConfig};
