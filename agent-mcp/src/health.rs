//! The health value of an MCP plan source: every state, taken under the lock only.

use agent_core::stage::PlanId;
use serde::Serialize;

/// The source as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostState {
    /// Every server runs; the current generation is leasable.
    Ready,
    /// The current generation is leasable, but a server is not ready (its list failed to
    /// refresh, a restart is pending for a server that no generation uses yet).
    Degraded,
    /// A server of the current generation is down and being restarted; leases fail closed.
    Recovering,
    /// No generation is leasable and no restart is running (restarts exhausted or disabled,
    /// a generation failed to build).
    Unavailable,
    /// Shutting down.
    Stopping,
    /// Shut down.
    Stopped,
}

/// One server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    /// Being launched.
    Starting,
    /// Running, its tools listed.
    Ready,
    /// Its process exited; a restart is scheduled or running.
    Restarting,
    /// Its process exited and will not be restarted.
    Failed,
    /// Shut down with the source.
    Stopped,
}

/// One server's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerHealth {
    /// The server's key.
    pub server: String,
    /// Its state.
    pub state: ServerState,
    /// The process group of its current launch.
    pub pgid: Option<i32>,
    /// The host-unique number of its current launch.
    pub launch: Option<u64>,
    /// Tools in its last list.
    pub tools: usize,
    /// Restart attempts so far.
    pub restarts: u32,
    /// The last problem (a failed refresh or restart, an exit).
    pub last_error: Option<String>,
}

/// The source's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// Overall state.
    pub state: HostState,
    /// The leasable generation, if any.
    pub plan_id: Option<PlanId>,
    /// Why no generation is leasable, if so.
    pub failure: Option<String>,
    /// Each server, in configuration order.
    pub servers: Vec<ServerHealth>,
    /// Leases held.
    pub active_leases: usize,
    /// Generations retained (current or leased).
    pub retained_generations: usize,
    /// `tools/list` refreshes run after `tools/list_changed`.
    pub refreshes: u64,
}

impl Health {
    /// The health of a source without servers: always ready, one static generation.
    pub(crate) fn compiled_only(plan_id: PlanId) -> Self {
        Health {
            state: HostState::Ready,
            plan_id: Some(plan_id),
            failure: None,
            servers: Vec::new(),
            active_leases: 0,
            retained_generations: 1,
            refreshes: 0,
        }
    }
}
