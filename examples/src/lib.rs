//! The framework's examples and the guide's code.
//!
//! The programs are this package's examples (run one with
//! `cargo run -p examples --example first_agent`):
//!
//! - `first_agent`: a model provider of your own, a stage, two typed tools, `compose!` with
//!   the starter and a run with its events printed;
//! - `choosing`: fallback, primary, a qualifier, ordered decorators and a typed test override;
//! - `mcp_tools`: tools from an MCP server in your own agent;
//! - `daemon_client`: a program that talks to the daemon through `agent-client`;
//! - `guard_and_snapshot`: a guard that asks before mutating tools, and a run suspended,
//!   snapshotted and resumed.
//!
//! The library itself holds nothing: its doc tests compile and run every Rust block of
//! `docs/getting-started.md`.
#![forbid(unsafe_code)]

/// The guide, from `cargo new` to a running agent: each Rust block is a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../docs/getting-started.md")]
struct GettingStarted;
