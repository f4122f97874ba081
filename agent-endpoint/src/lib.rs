//! The local daemon endpoint, shared by the server and its clients: the bearer credential
//! a client presents on every RPC.
//!
//! This crate never depends on the kernel crates; `agent-core/tests/architecture.rs`
//! proves it.
#![forbid(unsafe_code)]

pub mod base64url;
pub mod token;

pub use token::{EndpointToken, TokenError};
