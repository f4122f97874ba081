//! The client seam of the engine daemon: transport-neutral, standard
//! library only.
//!
//! - immutable values with validating constructors ([`Connection`],
//!   [`Event`], [`PendingInteraction`], [`Health`], [`Snapshot`], requests
//!   and results); every bound is a named constant;
//! - typed errors ([`Error`]) that keep the wire status's safe facts;
//! - the [`Connector`], [`Session`], [`EventStream`] and
//!   [`InteractionStream`] traits, implemented over gRPC by
//!   `agent-client-grpc`.
//!
//! A UI or script depends on this crate and takes a connector from an
//! adapter; see `docs/client.md`.
#![forbid(unsafe_code)]

mod error;
mod event;
mod interaction;
pub mod json;
mod session;
mod stream;
mod token;
mod values;

pub use error::*;
pub use event::*;
pub use interaction::*;
pub use session::*;
pub use stream::*;
pub use values::*;
