//! The beans a composition lists to run on a cluster: the registry of executions and the
//! claim guard, last of the plan's guards. Outside an execution both change nothing, so the
//! same composition serves the one-shot run, the local daemon and a worker.

use std::sync::Arc;

use agent_core::bean;
use agent_core::stage::ToolDispatchGuard;

use crate::execution::{DurableRuns, ToolClaims};

/// The executions running in this process.
#[bean(name = "durable-runs")]
pub fn durable_runs() -> Arc<DurableRuns> {
    Arc::new(DurableRuns::new())
}

/// The claim guard ([`ToolClaims`]): the last guard, so approvals are asked before a call
/// is claimed.
#[bean(name = "tool-claims", order = 1000000)]
pub fn tool_claims(durable_runs: Arc<DurableRuns>) -> Arc<dyn ToolDispatchGuard> {
    Arc::new(ToolClaims::new(durable_runs))
}
