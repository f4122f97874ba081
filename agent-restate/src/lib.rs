//! Agents on a Restate cluster (docs/scale-out.md).
//!
//! A worker serves the composed definitions as Restate services ([`services`]); each run
//! is a workflow whose steps replay the run's record ([`record`]) through the kernel's
//! hooks ([`execution`]). Clients reach the cluster through its ingress ([`ingress`]);
//! [`client`] is the `agent-client` adapter that drives runs through it.
#![forbid(unsafe_code)]

pub mod beans;
pub mod client;
pub mod execution;
pub mod ingress;
pub mod record;
pub mod services;
pub mod worker;
