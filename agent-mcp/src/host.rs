//! [`McpToolPlanSource`]: starts the configured servers, publishes generations, follows
//! `tools/list_changed` and crashes, and hands out leases (the kernel's `ToolPlanSource`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use agent_core::BoxFuture;
use agent_core::stage::{
    PlanError, PlanId, StaticToolPlanSource, ToolDispatchDecorator, ToolDispatchGuard,
    ToolDispatcher, ToolPlanLease, ToolPlanSource,
};
use agent_core::tool::Tool;
use rmcp::model::Tool as McpToolInfo;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::client::{ServerInstance, Signal};
use crate::config::{McpConfig, ServerConfig};
use crate::error::McpError;
use crate::generation::{self, Generation, MAX_RETAINED_GENERATIONS, Parts, Registry, ToolEntry};
use crate::health::{Health, HostState, ServerHealth, ServerState};
use crate::result::{DEFAULT_RESULT_BYTES, MAX_RESULT_BYTES, MIN_RESULT_BYTES};

/// Most restart attempts a policy may allow.
pub const MAX_RESTART_ATTEMPTS: u32 = 8;
/// Longest backoff a policy may use.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// How a crashed server of the current generation is brought back: `max_attempts` launches
/// (0 disables restarts), waiting 0 before the first, then `initial_backoff`, doubling, at
/// most `max_backoff`. Each success publishes a new generation; nothing is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Attempts per crash, 0 to [`MAX_RESTART_ATTEMPTS`].
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_backoff: Duration,
    /// Longest wait, at most [`MAX_BACKOFF`].
    pub max_backoff: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(1),
        }
    }
}

impl RestartPolicy {
    /// The wait before attempt `n` (1-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(attempt - 2).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

/// Options of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostOptions {
    /// The restart policy.
    pub restart: RestartPolicy,
    /// Bound of one result shown to the model, from [`MIN_RESULT_BYTES`] to [`MAX_RESULT_BYTES`].
    pub result_limit: usize,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            restart: RestartPolicy::default(),
            result_limit: DEFAULT_RESULT_BYTES,
        }
    }
}

/// Why options were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP host option `{field}`: {problem}")]
pub struct OptionsError {
    field: &'static str,
    problem: String,
}

impl HostOptions {
    /// Checks the bounds.
    pub fn validate(&self) -> Result<(), OptionsError> {
        let fail = |field, problem: String| Err(OptionsError { field, problem });
        if self.restart.max_attempts > MAX_RESTART_ATTEMPTS {
            return fail(
                "restart.max_attempts",
                format!("at most {MAX_RESTART_ATTEMPTS}"),
            );
        }
        if self.restart.initial_backoff > self.restart.max_backoff
            || self.restart.max_backoff > MAX_BACKOFF
        {
            return fail(
                "restart.max_backoff",
                format!("initial <= max <= {MAX_BACKOFF:?}"),
            );
        }
        if !(MIN_RESULT_BYTES..=MAX_RESULT_BYTES).contains(&self.result_limit) {
            return fail(
                "result_limit",
                format!("from {MIN_RESULT_BYTES} to {MAX_RESULT_BYTES} bytes"),
            );
        }
        Ok(())
    }
}

#[derive(Default)]
struct Slot {
    instance: Option<Arc<ServerInstance>>,
    tools: Arc<Vec<McpToolInfo>>,
    state: Option<ServerState>,
    restarts: u32,
    refreshing: bool,
    dirty: bool,
    last_error: Option<String>,
}

struct State {
    registry: Registry,
    generations: BTreeMap<u64, Arc<Generation>>,
    instances: BTreeMap<u64, Arc<ServerInstance>>,
    slots: Vec<Slot>,
    /// Why the current generation is not leasable (a down server, a failed build).
    failure: Option<McpError>,
    next_launch: u64,
    closing: bool,
    closed: bool,
    refreshes: u64,
}

struct Inner {
    servers: Vec<Arc<ServerConfig>>,
    compiled: BTreeMap<String, Arc<dyn Tool>>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
    decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
    options: HostOptions,
    epoch: String,
    state: Mutex<State>,
    signals: mpsc::UnboundedSender<Signal>,
    published: watch::Sender<Option<PlanId>>,
    stop: CancellationToken,
}

/// The MCP plan source: every generation is the compiled tools (behind the guards and
/// decorators, exactly like the static plan) plus every configured server's tools.
///
/// With no servers configured it is the static plan of the compiled tools, with its
/// `static:` id, so snapshots resume across processes as they do without MCP.
#[derive(Clone)]
pub struct McpToolPlanSource {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Static(StaticToolPlanSource, Arc<[ToolEntry]>),
    Mcp(Arc<Inner>),
}

impl std::fmt::Debug for McpToolPlanSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolPlanSource").finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl McpToolPlanSource {
    /// Starts every server (in parallel, each within its startup timeout), lists their
    /// tools and publishes the first generation. Any failure shuts down what was started.
    pub async fn start(
        config: &McpConfig,
        compiled: BTreeMap<String, Arc<dyn Tool>>,
        guards: Vec<Arc<dyn ToolDispatchGuard>>,
        decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
        options: HostOptions,
    ) -> Result<Self, McpError> {
        options.validate().map_err(|e| McpError::Definition {
            server: "(options)".to_owned(),
            tool: "(options)".to_owned(),
            reason: e.to_string(),
        })?;
        if config.servers().is_empty() {
            let base: Arc<dyn agent_core::stage::ToolDispatcher> =
                Arc::new(agent_core::stage::Dispatcher::new(compiled).map_err(|e| {
                    McpError::Definition {
                        server: "(compiled)".to_owned(),
                        tool: "(compiled)".to_owned(),
                        reason: e.to_string(),
                    }
                })?);
            let pipeline =
                agent_core::stage::compose_pipeline(base, guards, decorators).map_err(|e| {
                    McpError::Definition {
                        server: "(compiled)".to_owned(),
                        tool: "(pipeline)".to_owned(),
                        reason: e.to_string(),
                    }
                })?;
            let source = StaticToolPlanSource::new(pipeline).map_err(|e| McpError::Definition {
                server: "(compiled)".to_owned(),
                tool: "(pipeline)".to_owned(),
                reason: e.to_string(),
            })?;
            let definitions = pipeline_definitions(&source).await;
            let entries = generation::compiled_entries(&definitions);
            return Ok(McpToolPlanSource {
                kind: Kind::Static(source, entries),
            });
        }
        let servers: Vec<Arc<ServerConfig>> =
            config.servers().iter().cloned().map(Arc::new).collect();
        let (signals, receiver) = mpsc::unbounded_channel();
        let (published, _) = watch::channel(None);
        let inner = Arc::new(Inner {
            compiled,
            guards,
            decorators,
            options,
            epoch: generation::new_epoch(),
            state: Mutex::new(State {
                registry: Registry::new(),
                generations: BTreeMap::new(),
                instances: BTreeMap::new(),
                slots: servers.iter().map(|_| Slot::default()).collect(),
                failure: None,
                next_launch: servers.len() as u64 + 1,
                closing: false,
                closed: false,
                refreshes: 0,
            }),
            servers,
            signals,
            published,
            stop: CancellationToken::new(),
        });
        let mut launches = tokio::task::JoinSet::new();
        for (index, config) in inner.servers.iter().enumerate() {
            let (config, signals) = (config.clone(), inner.signals.clone());
            launches.spawn(async move {
                (
                    index,
                    start_and_list(config, index, index as u64 + 1, signals).await,
                )
            });
        }
        let mut started: Vec<Option<(Arc<ServerInstance>, Vec<McpToolInfo>)>> =
            inner.servers.iter().map(|_| None).collect();
        let mut errors: BTreeMap<usize, McpError> = BTreeMap::new();
        while let Some(joined) = launches.join_next().await {
            match joined {
                Ok((index, Ok(pair))) => started[index] = Some(pair),
                Ok((index, Err(error))) => {
                    errors.insert(index, error);
                }
                Err(join) => {
                    errors.insert(
                        usize::MAX,
                        McpError::Startup {
                            server: "(task)".to_owned(),
                            reason: join.to_string(),
                            stderr: String::new(),
                        },
                    );
                }
            }
        }
        if let Some((_, error)) = errors.into_iter().next() {
            for (instance, _) in started.into_iter().flatten() {
                instance.shutdown().await;
            }
            return Err(error);
        }
        let published = {
            let mut state = inner.lock();
            for (index, pair) in started.into_iter().enumerate() {
                let Some((instance, tools)) = pair else {
                    continue;
                };
                state.instances.insert(instance.launch, instance.clone());
                let slot = &mut state.slots[index];
                slot.instance = Some(instance);
                slot.tools = Arc::new(tools);
                slot.state = Some(ServerState::Ready);
            }
            publish_locked(&inner, &mut state)
        };
        if let Err(error) = published {
            shutdown_all(&inner).await;
            return Err(error);
        }
        tokio::spawn(follow_signals(
            Arc::downgrade(&inner),
            receiver,
            inner.stop.clone(),
        ));
        Ok(McpToolPlanSource {
            kind: Kind::Mcp(inner),
        })
    }

    /// Leases the current generation, takes its tools and releases the lease: what a run
    /// starting now would be offered (`agent tools`).
    pub async fn leased_tools(&self) -> Result<Arc<[ToolEntry]>, McpError> {
        let lease = self.lease_current_typed().await?;
        let tools = match &self.kind {
            Kind::Static(_, entries) => Some(entries.clone()),
            Kind::Mcp(_) => self.tools_of(lease.id()),
        };
        let _ = lease.release(&CancellationToken::new()).await;
        tools.ok_or(McpError::Closed)
    }

    /// The current generation's tools, sorted by name (compiled tools included), or why no
    /// generation is leasable.
    pub fn current_tools(&self) -> Result<Arc<[ToolEntry]>, McpError> {
        match &self.kind {
            Kind::Static(_, entries) => Ok(entries.clone()),
            Kind::Mcp(inner) => {
                let state = inner.lock();
                current_generation(&state).map(|g| g.entries.clone())
            }
        }
    }

    /// The tools of generation `id` while it is retained.
    pub fn tools_of(&self, id: &PlanId) -> Option<Arc<[ToolEntry]>> {
        let Kind::Mcp(inner) = &self.kind else {
            return None;
        };
        let state = inner.lock();
        state
            .generations
            .values()
            .find(|g| &g.plan_id == id)
            .map(|g| g.entries.clone())
    }

    /// Leases the current generation, with the typed reason when it is not leasable.
    pub async fn lease_current_typed(&self) -> Result<ToolPlanLease, McpError> {
        let inner = match &self.kind {
            Kind::Static(source, _) => {
                let cancel = CancellationToken::new();
                return source
                    .lease_current(&cancel)
                    .await
                    .map_err(|_| McpError::Closed);
            }
            Kind::Mcp(inner) => inner,
        };
        let mut state = inner.lock();
        let generation = current_generation(&state)?;
        let sequence = generation.sequence;
        if !state.registry.lease(sequence) {
            return Err(McpError::Closed);
        }
        Ok(lease_of(inner, generation))
    }

    /// Leases exactly generation `id`: it must still be retained (current, or held by a
    /// lease) and every server of it running; never a substitute.
    pub async fn lease_generation_typed(&self, id: &PlanId) -> Result<ToolPlanLease, PlanError> {
        let inner = match &self.kind {
            Kind::Static(source, _) => {
                let cancel = CancellationToken::new();
                return source.lease_generation(id, &cancel).await;
            }
            Kind::Mcp(inner) => inner,
        };
        let mut state = inner.lock();
        if state.closing {
            return Err(PlanError::Source(McpError::Closed.to_string()));
        }
        let Some(generation) = state
            .generations
            .values()
            .find(|g| &g.plan_id == id)
            .cloned()
        else {
            return Err(PlanError::UnknownGeneration(id.clone()));
        };
        if let Some(down) = generation
            .instances
            .iter()
            .find(|i| !i.is_alive() || i.is_shut_down())
        {
            return Err(PlanError::Source(
                McpError::ServerDown {
                    server: down.key().to_owned(),
                    reason: "its process of this generation exited".to_owned(),
                }
                .to_string(),
            ));
        }
        if !state.registry.lease(generation.sequence) {
            return Err(PlanError::UnknownGeneration(id.clone()));
        }
        Ok(lease_of(inner, generation))
    }

    /// The current plan id, if a generation is leasable.
    pub fn current_plan_id(&self) -> Option<PlanId> {
        match &self.kind {
            Kind::Static(source, _) => Some(source.plan_id().clone()),
            Kind::Mcp(inner) => current_generation(&inner.lock())
                .ok()
                .map(|g| g.plan_id.clone()),
        }
    }

    /// Completes when a generation other than `after` is current (or the source closes).
    pub async fn wait_for_generation(&self, after: Option<&PlanId>) -> Option<PlanId> {
        let Kind::Mcp(inner) = &self.kind else {
            return self.current_plan_id();
        };
        let mut published = inner.published.subscribe();
        let changed = published
            .wait_for(|id| id.as_ref() != after && id.is_some())
            .await
            .ok()?;
        changed.clone()
    }

    /// Every state, under the lock only.
    pub fn health(&self) -> Health {
        let inner = match &self.kind {
            Kind::Static(source, _) => return Health::compiled_only(source.plan_id().clone()),
            Kind::Mcp(inner) => inner,
        };
        let state = inner.lock();
        let servers: Vec<ServerHealth> = inner
            .servers
            .iter()
            .zip(&state.slots)
            .map(|(config, slot)| ServerHealth {
                server: config.key.clone(),
                state: slot.state.unwrap_or(ServerState::Starting),
                pgid: slot.instance.as_ref().map(|i| i.pgid()),
                launch: slot.instance.as_ref().map(|i| i.launch),
                tools: slot.tools.len(),
                restarts: slot.restarts,
                last_error: slot.last_error.clone(),
            })
            .collect();
        let leasable = current_generation(&state).ok();
        let host = if state.closed {
            HostState::Stopped
        } else if state.closing {
            HostState::Stopping
        } else if leasable.is_some() {
            if servers.iter().all(|s| s.state == ServerState::Ready) {
                HostState::Ready
            } else {
                HostState::Degraded
            }
        } else if servers.iter().any(|s| s.state == ServerState::Restarting) {
            HostState::Recovering
        } else {
            HostState::Unavailable
        };
        Health {
            state: host,
            plan_id: if state.closed {
                None
            } else {
                leasable.map(|g| g.plan_id.clone())
            },
            failure: state.failure.as_ref().map(ToString::to_string),
            servers,
            active_leases: state.registry.leases(),
            retained_generations: state.registry.retained(),
            refreshes: state.refreshes,
        }
    }

    /// Shuts every server down (bounded by their shutdown timeouts, in parallel); later
    /// leases fail closed, existing leases' calls fail definitively.
    pub async fn shutdown(&self) {
        if let Kind::Mcp(inner) = &self.kind {
            shutdown_all(inner).await;
        }
    }
}

async fn pipeline_definitions(source: &StaticToolPlanSource) -> Vec<agent_core::tool::Definition> {
    match source.lease_current(&CancellationToken::new()).await {
        Ok(lease) => lease.definitions().to_vec(),
        Err(_) => Vec::new(),
    }
}

fn current_generation(state: &State) -> Result<Arc<Generation>, McpError> {
    if state.closing || state.closed {
        return Err(McpError::Closed);
    }
    if let Some(failure) = &state.failure {
        return Err(failure.clone());
    }
    let generation = state
        .registry
        .current()
        .and_then(|s| state.generations.get(&s))
        .cloned()
        .ok_or(McpError::Closed)?;
    if let Some(down) = generation.instances.iter().find(|i| !i.is_alive()) {
        return Err(McpError::ServerDown {
            server: down.key().to_owned(),
            reason: "its process exited".to_owned(),
        });
    }
    Ok(generation)
}

fn lease_of(inner: &Arc<Inner>, generation: Arc<Generation>) -> ToolPlanLease {
    let once = Arc::new(ReleaseOnce {
        inner: Arc::downgrade(inner),
        sequence: generation.sequence,
        done: AtomicBool::new(false),
    });
    let leased = Arc::new(Leased {
        pipeline: generation.pipeline.clone(),
        once: once.clone(),
    });
    ToolPlanLease::new(generation.plan_id.clone(), leased, move || async move {
        once.release();
        Ok(())
    })
}

/// Releases one lease at most once: through `ToolPlanLease::release`, or when the lease
/// (and every dispatcher taken from it) is dropped without a release, so a forgotten
/// release cannot keep a generation and its servers forever.
struct ReleaseOnce {
    inner: Weak<Inner>,
    sequence: u64,
    done: AtomicBool,
}

impl ReleaseOnce {
    fn release(&self) {
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(inner) = self.inner.upgrade() {
            release(&inner, self.sequence);
        }
    }
}

/// The dispatcher one lease holds: the generation's pipeline, plus the drop-time release.
struct Leased {
    pipeline: Arc<dyn ToolDispatcher>,
    once: Arc<ReleaseOnce>,
}

impl Drop for Leased {
    fn drop(&mut self) {
        self.once.release();
    }
}

impl ToolDispatcher for Leased {
    fn definitions(&self) -> &[agent_core::tool::Definition] {
        self.pipeline.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: agent_core::stage::DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<agent_core::tool::ToolResult, agent_core::stage::DispatchError>> {
        self.pipeline.dispatch(request)
    }

    fn is_composed(&self) -> bool {
        true
    }
}

/// Drops one lease; superseded servers are shut down on their own tasks, so the caller
/// (a run finishing) never waits for a process to exit.
fn release(inner: &Arc<Inner>, sequence: u64) {
    let mut state = inner.lock();
    let retired = state.registry.release(sequence);
    collect_retired(&mut state, retired);
}

fn collect_retired(state: &mut State, retired: Vec<u64>) {
    for launch in retired {
        if let Some(instance) = state.instances.remove(&launch) {
            // Outside a runtime (a lease dropped late), dropping the instance kills its group.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { instance.shutdown().await });
            }
        }
    }
    let current = state.registry.current();
    let registry = &state.registry;
    state
        .generations
        .retain(|s, _| Some(*s) == current || registry.is_retained(*s));
}

/// Builds a generation from the slots and publishes it, or records why it cannot be.
fn publish_locked(inner: &Arc<Inner>, state: &mut State) -> Result<PlanId, McpError> {
    if !state.registry.has_room() {
        let error = McpError::RetentionExhausted {
            retained: state.registry.retained(),
            max: MAX_RETAINED_GENERATIONS,
        };
        state.failure = Some(error.clone());
        return Err(error);
    }
    let servers = state
        .slots
        .iter()
        .filter_map(|slot| slot.instance.clone().map(|i| (i, slot.tools.clone())))
        .collect();
    let sequence = state.registry.next_sequence();
    let built = generation::build(Parts {
        epoch: &inner.epoch,
        sequence,
        compiled: &inner.compiled,
        guards: &inner.guards,
        decorators: &inner.decorators,
        servers,
        result_limit: inner.options.result_limit,
    });
    let generation = match built {
        Ok(generation) => Arc::new(generation),
        Err(error) => {
            state.failure = Some(error.clone());
            return Err(error);
        }
    };
    let id = generation.plan_id.clone();
    let launches = generation.launches();
    state.generations.insert(sequence, generation);
    let retired = state.registry.publish(sequence, launches);
    state.failure = None;
    collect_retired(state, retired);
    inner.published.send_replace(Some(id.clone()));
    Ok(id)
}

async fn start_and_list(
    config: Arc<ServerConfig>,
    index: usize,
    launch: u64,
    signals: mpsc::UnboundedSender<Signal>,
) -> Result<(Arc<ServerInstance>, Vec<McpToolInfo>), McpError> {
    let startup = config.timeouts.startup;
    let started = tokio::time::Instant::now();
    let instance = ServerInstance::start(config.clone(), index, launch, signals).await?;
    let left = startup
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    match instance.list_tools(left).await {
        Ok(tools) => Ok((instance, tools)),
        Err(error) => {
            instance.shutdown().await;
            Err(error)
        }
    }
}

async fn shutdown_all(inner: &Arc<Inner>) {
    inner.stop.cancel();
    let instances: Vec<Arc<ServerInstance>> = {
        let mut state = inner.lock();
        state.closing = true;
        let _ = state.registry.clear_current();
        for slot in &mut state.slots {
            slot.state = Some(ServerState::Stopped);
        }
        let mut all: Vec<Arc<ServerInstance>> = state.instances.values().cloned().collect();
        all.extend(state.slots.iter().filter_map(|s| s.instance.clone()));
        all
    };
    let mut tasks = tokio::task::JoinSet::new();
    for instance in instances {
        tasks.spawn(async move { instance.shutdown().await });
    }
    while tasks.join_next().await.is_some() {}
    let mut state = inner.lock();
    state.closed = true;
    state.instances.clear();
    inner.published.send_replace(None);
}

async fn follow_signals(
    inner: Weak<Inner>,
    mut receiver: mpsc::UnboundedReceiver<Signal>,
    stop: CancellationToken,
) {
    loop {
        let signal = tokio::select! {
            signal = receiver.recv() => signal,
            () = stop.cancelled() => return,
        };
        let Some(signal) = signal else { return };
        let Some(inner) = inner.upgrade() else { return };
        match signal {
            Signal::ListChanged { server, launch } => {
                let mut state = inner.lock();
                let slot = &mut state.slots[server];
                let Some(instance) = slot.instance.as_ref().filter(|i| i.launch == launch) else {
                    continue; // a superseded launch: its list no longer matters
                };
                // Before the refresh lists, so a change after this point queues again.
                instance.take_queued_list_change();
                if slot.refreshing {
                    slot.dirty = true; // coalesced into one follow-up refresh
                    continue;
                }
                slot.refreshing = true;
                drop(state);
                tokio::spawn(refresh(inner.clone(), server, launch));
            }
            Signal::Exited { server, launch } => {
                let mut state = inner.lock();
                if state.closing {
                    continue;
                }
                let slot = &mut state.slots[server];
                if slot.instance.as_ref().map(|i| i.launch) != Some(launch) {
                    continue; // a retired launch: its crash never triggers a restart
                }
                let key = inner.servers[server].key.clone();
                slot.last_error = Some("the process exited".to_owned());
                let policy = inner.options.restart;
                slot.state = Some(if policy.max_attempts == 0 {
                    ServerState::Failed
                } else {
                    ServerState::Restarting
                });
                state.failure = Some(McpError::ServerDown {
                    server: key,
                    reason: "its process exited".to_owned(),
                });
                drop(state);
                if policy.max_attempts > 0 {
                    tokio::spawn(restart(inner.clone(), server));
                }
            }
        }
    }
}

/// Re-lists one server's tools until no list change arrived meanwhile; each list that is
/// still of the slot's current launch becomes a new generation.
async fn refresh(inner: Arc<Inner>, server: usize, launch: u64) {
    let timeout = inner.servers[server].timeouts.list;
    loop {
        let instance = {
            let state = inner.lock();
            match &state.slots[server].instance {
                Some(i) if i.launch == launch => i.clone(),
                _ => return,
            }
        };
        let listed = instance.list_tools(timeout).await;
        let mut state = inner.lock();
        state.refreshes += 1;
        // A restart replaced the launch while we listed: this list is stale, drop it.
        if state.slots[server].instance.as_ref().map(|i| i.launch) != Some(launch) || state.closing
        {
            state.slots[server].refreshing = false;
            return;
        }
        let slot = &mut state.slots[server];
        match listed {
            Ok(tools) => {
                slot.tools = Arc::new(tools);
                slot.last_error = None;
                if let Err(error) = publish_locked(&inner, &mut state) {
                    state.slots[server].last_error = Some(error.to_string());
                    tracing::warn!(target: "agent_mcp", server = %inner.servers[server].key, "{error}");
                }
            }
            Err(error) => {
                slot.last_error = Some(error.to_string());
                tracing::warn!(target: "agent_mcp", server = %inner.servers[server].key, "{error}");
            }
        }
        let slot = &mut state.slots[server];
        if slot.dirty {
            slot.dirty = false;
            continue;
        }
        slot.refreshing = false;
        return;
    }
}

/// Relaunches a crashed server with backoff; a success publishes a new generation.
async fn restart(inner: Arc<Inner>, server: usize) {
    let policy = inner.options.restart;
    let config = inner.servers[server].clone();
    for attempt in 1..=policy.max_attempts {
        tokio::select! {
            () = tokio::time::sleep(policy.backoff(attempt)) => {}
            () = inner.stop.cancelled() => return,
        }
        let launch = {
            let mut state = inner.lock();
            if state.closing {
                return;
            }
            state.slots[server].restarts += 1;
            let launch = state.next_launch;
            state.next_launch += 1;
            launch
        };
        let started = tokio::select! {
            started = start_and_list(config.clone(), server, launch, inner.signals.clone()) => started,
            () = inner.stop.cancelled() => return,
        };
        match started {
            Ok((instance, tools)) => {
                if !install(&inner, server, launch, instance.clone(), tools) {
                    instance.shutdown().await;
                }
                return;
            }
            Err(error) => {
                let mut state = inner.lock();
                state.slots[server].last_error = Some(error.to_string());
            }
        }
    }
    let mut state = inner.lock();
    state.slots[server].state = Some(ServerState::Failed);
}

/// Installs a restarted launch and publishes; false when the source is closing.
fn install(
    inner: &Arc<Inner>,
    server: usize,
    launch: u64,
    instance: Arc<ServerInstance>,
    tools: Vec<McpToolInfo>,
) -> bool {
    let mut state = inner.lock();
    if state.closing {
        return false;
    }
    state.instances.insert(launch, instance.clone());
    let old = state.slots[server].instance.replace(instance);
    state.slots[server].tools = Arc::new(tools);
    state.slots[server].state = Some(ServerState::Ready);
    state.slots[server].last_error = None;
    state.slots[server].refreshing = false;
    state.slots[server].dirty = false;
    let published = publish_locked(inner, &mut state);
    // The crashed launch goes once no retained generation names it.
    if let Some(old) = old
        && let Some(retired) = state.registry.retire_unused(old.launch)
    {
        collect_retired(&mut state, vec![retired]);
    }
    if let Err(error) = published {
        state.slots[server].last_error = Some(error.to_string());
    }
    true
}

impl ToolPlanSource for McpToolPlanSource {
    fn lease_current<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(PlanError::Cancelled);
            }
            self.lease_current_typed()
                .await
                .map_err(|e| PlanError::Source(e.to_string()))
        })
    }

    fn lease_generation<'a>(
        &'a self,
        id: &'a PlanId,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(PlanError::Cancelled);
            }
            self.lease_generation_typed(id).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_second_attempt_up_to_the_maximum() {
        let policy = RestartPolicy::default();
        let ms = |n| policy.backoff(n).as_millis();
        assert_eq!(
            [ms(1), ms(2), ms(3), ms(4), ms(40)],
            [0, 250, 500, 1000, 1000]
        );
    }

    #[test]
    fn options_are_bounded() {
        let with = |f: fn(&mut HostOptions)| {
            let mut options = HostOptions::default();
            f(&mut options);
            options.validate()
        };
        assert!(with(|o| o.restart.max_attempts = MAX_RESTART_ATTEMPTS).is_ok());
        assert!(with(|o| o.restart.max_attempts = MAX_RESTART_ATTEMPTS + 1).is_err());
        assert!(with(|o| o.restart.max_backoff = MAX_BACKOFF).is_ok());
        assert!(with(|o| o.restart.max_backoff = MAX_BACKOFF + Duration::from_millis(1)).is_err());
        assert!(
            with(|o| o.restart.initial_backoff = o.restart.max_backoff + Duration::from_millis(1))
                .is_err()
        );
        assert!(with(|o| o.result_limit = MIN_RESULT_BYTES).is_ok());
        assert!(with(|o| o.result_limit = MIN_RESULT_BYTES - 1).is_err());
        assert!(with(|o| o.result_limit = MAX_RESULT_BYTES).is_ok());
        assert!(with(|o| o.result_limit = MAX_RESULT_BYTES + 1).is_err());
    }
}
