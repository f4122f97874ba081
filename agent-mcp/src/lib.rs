//! Runtime tools from MCP servers, as leased, immutable tool-plan generations.
//!
//! [`McpToolPlanSource`] is a kernel `ToolPlanSource`: it launches the servers of an
//! [`McpConfig`] (the `mcpServers` JSON the common MCP hosts use, plus our trust, digest,
//! override and timeout fields), maps each server tool to a kernel `Definition` (annotations
//! are hints; trust only tightens; operator overrides are the only relaxation), and freezes
//! the compiled tools plus every server's tools into a generation with a plan id that is
//! never reused. A run leases one generation for its whole life; `tools/list_changed`
//! publishes a new one for new runs; a crashed server fails new leases closed until a
//! restart publishes a new generation. See `docs/runtime-tools.md`.
//!
//! [`beans`] makes it the application's plan source with one line in `compose!`.
#![forbid(unsafe_code)]

pub mod beans;
pub mod client;
pub mod config;
pub mod error;
pub mod generation;
pub mod health;
pub mod host;
pub mod mapping;
pub mod naming;
pub mod process;
pub mod result;
pub mod transport;

pub use config::{ConfigError, McpConfig, ServerConfig, TextPosition, Timeouts, ToolOverride};
pub use error::McpError;
pub use generation::{Origin, ToolEntry};
pub use health::{Health, HostState, ServerHealth, ServerState};
pub use host::{HostOptions, McpToolPlanSource, RestartPolicy};
