//! Generations: the compiled tools plus every server's tool list, frozen under a plan id
//! that is never reused, and the lease rules over them ([`Registry`], pure bookkeeping so
//! that property tests can drive it without processes).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agent_core::stage::{
    Dispatcher, PlanId, ToolDispatchDecorator, ToolDispatchGuard, ToolDispatcher, compose_pipeline,
};
use agent_core::tool::{Capability, Definition, Effect, ReplaySafety, Tool};
use rmcp::model::Tool as McpToolInfo;
use sha2::{Digest, Sha256};

use crate::client::{McpTool, ServerInstance};
use crate::error::McpError;
use crate::mapping::{self, Basis, Hints};
use crate::naming::model_name;

/// Most generations kept at once (the current one plus those still leased).
pub const MAX_RETAINED_GENERATIONS: usize = 128;

/// A fresh host epoch: 32 bytes from the standard library's per-instance random hash keys,
/// the process id, the time and a process-wide counter, hashed.
pub(crate) fn new_epoch() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = Sha256::new();
    for i in 0..4u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        hasher.update(h.finish().to_be_bytes());
    }
    hasher.update(std::process::id().to_be_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    hasher.update(now.to_be_bytes());
    hasher.update(COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn lp(hasher: &mut Sha256, field: &[u8]) {
    hasher.update((field.len() as u64).to_be_bytes());
    hasher.update(field);
}

/// `runtime:<sequence, 20 digits>:<hex SHA-256>` over the epoch, the sequence, each server's
/// launch number in configuration order, then each definition's name and fingerprint in
/// name order. The epoch makes ids unique across hosts and processes, the sequence across
/// generations of one host.
pub fn plan_id(epoch: &str, sequence: u64, launches: &[u64], definitions: &[Definition]) -> PlanId {
    let mut hasher = Sha256::new();
    lp(&mut hasher, epoch.as_bytes());
    hasher.update(sequence.to_be_bytes());
    for launch in launches {
        lp(&mut hasher, launch.to_string().as_bytes());
    }
    let mut sorted: Vec<&Definition> = definitions.iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    for definition in sorted {
        lp(&mut hasher, definition.name().as_bytes());
        lp(&mut hasher, definition.fingerprint().as_bytes());
    }
    let id = format!("runtime:{sequence:020}:{}", hex(&hasher.finalize()));
    PlanId::new(id)
        .unwrap_or_else(|_| unreachable!("a runtime plan id is short ASCII without spaces"))
}

/// Where a tool of a generation comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A compiled tool of the application.
    Compiled,
    /// A tool of the MCP server with this key.
    Server(String),
}

impl Origin {
    /// `compiled`, or the server's key.
    pub fn as_str(&self) -> &str {
        match self {
            Origin::Compiled => "compiled",
            Origin::Server(key) => key,
        }
    }
}

/// One tool of a generation, as `agent tools` shows it.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    /// The kernel definition (model-facing name, effect, replay safety, capabilities).
    pub definition: Definition,
    /// Where it comes from.
    pub origin: Origin,
    /// The server's own tool name (server tools only).
    pub server_tool: Option<String>,
    /// The server tool's fingerprint, the value an override pins (server tools only).
    pub fingerprint: Option<String>,
    /// Where the metadata came from (server tools only).
    pub basis: Option<Basis>,
    /// Whether the server said the tool may destroy data (server tools only).
    pub destructive: Option<bool>,
    /// An override for this tool is pinned to another fingerprint and was ignored.
    pub stale_override: bool,
}

impl ToolEntry {
    /// The tool's name.
    pub fn name(&self) -> &str {
        self.definition.name()
    }
    /// The effect.
    pub fn effect(&self) -> Effect {
        self.definition.effect()
    }
    /// The replay safety.
    pub fn replay(&self) -> ReplaySafety {
        self.definition.replay_safety()
    }
    /// The capabilities.
    pub fn capabilities(&self) -> Vec<Capability> {
        self.definition.capabilities().iter().copied().collect()
    }
}

/// The entries of compiled tools only (a source without servers).
pub(crate) fn compiled_entries(definitions: &[Definition]) -> Arc<[ToolEntry]> {
    definitions
        .iter()
        .map(|definition| ToolEntry {
            definition: definition.clone(),
            origin: Origin::Compiled,
            server_tool: None,
            fingerprint: None,
            basis: None,
            destructive: None,
            stale_override: false,
        })
        .collect()
}

/// A frozen generation.
pub struct Generation {
    pub(crate) sequence: u64,
    pub(crate) plan_id: PlanId,
    pub(crate) pipeline: Arc<dyn ToolDispatcher>,
    pub(crate) entries: Arc<[ToolEntry]>,
    pub(crate) instances: Vec<Arc<ServerInstance>>,
}

impl Generation {
    /// The plan id.
    pub fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }
    /// The tools, sorted by name.
    pub fn entries(&self) -> &[ToolEntry] {
        &self.entries
    }
    /// The launch numbers of its servers, in configuration order.
    pub(crate) fn launches(&self) -> Vec<u64> {
        self.instances.iter().map(|i| i.launch).collect()
    }
}

/// What a generation is built from.
pub(crate) struct Parts<'a> {
    pub(crate) epoch: &'a str,
    pub(crate) sequence: u64,
    pub(crate) compiled: &'a BTreeMap<String, Arc<dyn Tool>>,
    pub(crate) guards: &'a [Arc<dyn ToolDispatchGuard>],
    pub(crate) decorators: &'a [Arc<dyn ToolDispatchDecorator>],
    pub(crate) servers: Vec<(Arc<ServerInstance>, Arc<Vec<McpToolInfo>>)>,
    pub(crate) result_limit: usize,
}

fn server_claimant(server: &str, tool: &str) -> String {
    format!("MCP server `{server}` tool `{tool}`")
}

/// Maps, namespaces and freezes the parts; any collision or invalid definition fails the
/// whole generation with a typed error.
pub(crate) fn build(parts: Parts<'_>) -> Result<Generation, McpError> {
    let mut tools: BTreeMap<String, Arc<dyn Tool>> = BTreeMap::new();
    let mut claimants: BTreeMap<String, String> = BTreeMap::new();
    let mut entries = Vec::new();
    for (name, tool) in parts.compiled {
        claimants.insert(name.clone(), format!("compiled tool `{name}`"));
        tools.insert(name.clone(), tool.clone());
        entries.push(ToolEntry {
            definition: tool.definition().clone(),
            origin: Origin::Compiled,
            server_tool: None,
            fingerprint: None,
            basis: None,
            destructive: None,
            stale_override: false,
        });
    }
    for (instance, list) in &parts.servers {
        let config = &instance.config;
        for info in list.iter() {
            let name = model_name(&config.namespace, &info.name);
            let claimant = server_claimant(&config.key, &info.name);
            if let Some(first) = claimants.get(&name) {
                return Err(McpError::Collision {
                    name,
                    first: first.clone(),
                    second: claimant,
                });
            }
            let fingerprint = mapping::server_tool_fingerprint(info);
            let mapped = mapping::map(
                Hints::of(info.annotations.as_ref()),
                config.trusted,
                &config.capabilities,
                config.overrides.get(info.name.as_ref()),
                &fingerprint,
            );
            let definition = mapping::definition(config, &name, info, &mapped).map_err(|e| {
                McpError::Definition {
                    server: config.key.clone(),
                    tool: info.name.to_string(),
                    reason: e.to_string(),
                }
            })?;
            claimants.insert(name.clone(), claimant);
            tools.insert(
                name.clone(),
                Arc::new(McpTool {
                    definition: definition.clone(),
                    server_tool: info.name.to_string(),
                    instance: instance.clone(),
                    result_limit: parts.result_limit,
                }),
            );
            entries.push(ToolEntry {
                definition,
                origin: Origin::Server(config.key.clone()),
                server_tool: Some(info.name.to_string()),
                fingerprint: Some(fingerprint),
                basis: Some(mapped.basis),
                destructive: Some(mapped.destructive),
                stale_override: mapped.stale_override,
            });
        }
    }
    entries.sort_by(|a, b| a.name().cmp(b.name()));
    let definitions: Vec<Definition> = entries.iter().map(|e| e.definition.clone()).collect();
    let launches: Vec<u64> = parts.servers.iter().map(|(i, _)| i.launch).collect();
    let plan_id = plan_id(parts.epoch, parts.sequence, &launches, &definitions);
    let pipeline_error = |reason: String| McpError::Definition {
        server: "(generation)".to_owned(),
        tool: "(pipeline)".to_owned(),
        reason,
    };
    let base: Arc<dyn ToolDispatcher> =
        Arc::new(Dispatcher::new(tools).map_err(|e| pipeline_error(e.to_string()))?);
    let pipeline = compose_pipeline(base, parts.guards.to_vec(), parts.decorators.to_vec())
        .map_err(|e| pipeline_error(e.to_string()))?;
    Ok(Generation {
        sequence: parts.sequence,
        plan_id,
        pipeline,
        entries: entries.into(),
        instances: parts.servers.into_iter().map(|(i, _)| i).collect(),
    })
}

/// The lease rules, as bookkeeping over sequence numbers and launch numbers:
///
/// - a generation is retained while it is current or leased; only a retained generation
///   can be leased, so a generation whose last lease is released after it stopped being
///   current is gone for good;
/// - a launch is in use while a retained generation names it; the moment it is in use no
///   more, it is handed back (once) to be shut down;
/// - sequences only grow, so no two generations share one.
#[derive(Debug, Default)]
pub struct Registry {
    next_sequence: u64,
    current: Option<u64>,
    generations: BTreeMap<u64, Retained>,
    launch_uses: BTreeMap<u64, usize>,
    retired: BTreeSet<u64>,
}

#[derive(Debug)]
struct Retained {
    leases: usize,
    launches: Vec<u64>,
}

impl Registry {
    /// A registry whose first sequence is 1.
    pub fn new() -> Self {
        Registry {
            next_sequence: 1,
            ..Registry::default()
        }
    }

    /// Reserves the next sequence number.
    pub fn next_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    /// The current generation.
    pub fn current(&self) -> Option<u64> {
        self.current
    }

    /// Generations retained (current or leased).
    pub fn retained(&self) -> usize {
        self.generations.len()
    }

    /// Leases held, over every generation.
    pub fn leases(&self) -> usize {
        self.generations.values().map(|g| g.leases).sum()
    }

    /// Whether another generation may be published without passing
    /// [`MAX_RETAINED_GENERATIONS`].
    pub fn has_room(&self) -> bool {
        let previous_drops = self
            .current
            .is_some_and(|c| self.generations.get(&c).is_some_and(|g| g.leases == 0));
        self.generations.len() - usize::from(previous_drops) < MAX_RETAINED_GENERATIONS
    }

    /// Makes `sequence` (reserved, using `launches`) current; returns the launches no
    /// retained generation uses any more.
    pub fn publish(&mut self, sequence: u64, launches: Vec<u64>) -> Vec<u64> {
        debug_assert!(sequence < self.next_sequence && !self.generations.contains_key(&sequence));
        for launch in &launches {
            *self.launch_uses.entry(*launch).or_default() += 1;
        }
        self.generations.insert(
            sequence,
            Retained {
                leases: 0,
                launches,
            },
        );
        let previous = self.current.replace(sequence);
        match previous {
            Some(previous) => self.drop_if_unused(previous),
            None => Vec::new(),
        }
    }

    /// Leases the current generation.
    pub fn lease_current(&mut self) -> Option<u64> {
        let current = self.current?;
        self.lease(current).then_some(current)
    }

    /// Leases `sequence` if it is retained.
    pub fn lease(&mut self, sequence: u64) -> bool {
        match self.generations.get_mut(&sequence) {
            Some(generation) => {
                generation.leases += 1;
                true
            }
            None => false,
        }
    }

    /// Whether `sequence` is retained.
    pub fn is_retained(&self, sequence: u64) -> bool {
        self.generations.contains_key(&sequence)
    }

    /// Releases one lease of `sequence`; returns the launches no longer in use.
    pub fn release(&mut self, sequence: u64) -> Vec<u64> {
        match self.generations.get_mut(&sequence) {
            Some(generation) if generation.leases > 0 => generation.leases -= 1,
            _ => return Vec::new(),
        }
        self.drop_if_unused(sequence)
    }

    /// Stops treating any generation as current (closing); returns launches no longer in use.
    pub fn clear_current(&mut self) -> Vec<u64> {
        match self.current.take() {
            Some(previous) => self.drop_if_unused(previous),
            None => Vec::new(),
        }
    }

    /// Retires a launch that never entered a generation or whose generations are all gone
    /// (a failed restart attempt); returns it if it was not retired before.
    pub fn retire_unused(&mut self, launch: u64) -> Option<u64> {
        if self.launch_uses.get(&launch).copied().unwrap_or(0) == 0 && self.retired.insert(launch) {
            Some(launch)
        } else {
            None
        }
    }

    fn drop_if_unused(&mut self, sequence: u64) -> Vec<u64> {
        let unused = self.current != Some(sequence)
            && self
                .generations
                .get(&sequence)
                .is_some_and(|g| g.leases == 0);
        if !unused {
            return Vec::new();
        }
        let Some(generation) = self.generations.remove(&sequence) else {
            return Vec::new();
        };
        let mut retired = Vec::new();
        for launch in generation.launches {
            let uses = self.launch_uses.entry(launch).or_default();
            *uses -= 1;
            if *uses == 0 {
                self.launch_uses.remove(&launch);
                if self.retired.insert(launch) {
                    retired.push(launch);
                }
            }
        }
        retired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_ids_differ_by_epoch_and_sequence_and_fit_the_kernel_bound() {
        let (a, b) = (new_epoch(), new_epoch());
        assert_ne!(a, b);
        let id = plan_id(&a, 1, &[1], &[]);
        assert_ne!(id, plan_id(&a, 2, &[1], &[]));
        assert_ne!(id, plan_id(&b, 1, &[1], &[]));
        assert_ne!(id, plan_id(&a, 1, &[2], &[]));
        assert!(id.as_str().starts_with("runtime:00000000000000000001:"));
        assert!(id.as_str().len() <= agent_core::stage::MAX_PLAN_ID_BYTES);
    }

    #[test]
    fn retention_is_bounded() {
        let mut registry = Registry::new();
        for _ in 0..MAX_RETAINED_GENERATIONS {
            assert!(registry.has_room());
            let s = registry.next_sequence();
            registry.publish(s, vec![]);
            assert!(registry.lease_current().is_some());
        }
        assert_eq!(registry.retained(), MAX_RETAINED_GENERATIONS);
        assert!(!registry.has_room());
        let current = registry.current().unwrap();
        registry.release(current);
        // The current one would be dropped by the next publish: room again.
        assert!(registry.has_room());
    }
}
