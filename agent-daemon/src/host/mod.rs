//! The run host (contract section 2.7): composes the engine, the run authority, sessions,
//! the ledger and the pending router. `docs/daemon.md` draws every ordering.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agent_authority::engine::{EngineImport, EngineLocalResume};
use agent_authority::{ActiveRun, ErrorKind, Lifecycle, SnapshotEnvelope, Store};
use agent_core::agent::{Engine, Run, RunStatus, Snapshot, SnapshotStatus, StartError};
use agent_core::event::{Envelope, LogError, ReplayRequest, Subscription};
use agent_core::interaction::{InteractionResponse, PendingDelta, PendingSnapshot, Scope};
use agent_core::message::Message;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::definition::DefinitionSet;
use crate::error::{Class, Failure, HostError, abandon, authority, commit, gate, uncertain};
use crate::ledger::{Execution, Ledger, LedgerError, Outcome, OutcomeKind, canonical_digest};
use crate::pending::{PendingObserver, PendingRouter, RunBinding};
use crate::session::{MAX_STREAM_LEASES, Session, SessionHold, SessionStore};
use crate::token::is_daemon_token;

/// The most runs the terminal cache may be configured for.
pub const MAX_TERMINAL_RUNS: usize = 65_536;
/// The most envelope bytes the terminal cache may be configured for.
pub const MAX_TERMINAL_BYTES: usize = 1 << 30;
/// The shortest and longest transition timeout.
pub const TRANSITION_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(30));
/// The most health sources per host.
pub const MAX_HEALTH_SOURCES: usize = 32;
/// The most reasons one source contributes.
pub const MAX_SOURCE_REASONS: usize = 16;

/// Mutation kinds, as the ledger records them.
pub mod kinds {
    /// Start.
    pub const START: &str = "run.start/v1";
    /// Import.
    pub const IMPORT: &str = "run.import/v1";
    /// Suspend.
    pub const SUSPEND: &str = "run.suspend/v1";
    /// Resume.
    pub const RESUME: &str = "run.resume/v1";
    /// Cancel.
    pub const CANCEL: &str = "run.cancel/v1";
    /// Respond.
    pub const RESPOND: &str = "run.respond/v1";
}

/// The host's budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// Active runs, counting reservations.
    pub active_runs: usize,
    /// Open streams per client (≤ [`MAX_STREAM_LEASES`]).
    pub concurrent_streams: usize,
    /// Events per replay page at most.
    pub replay_events: usize,
    /// Accounted bytes per replay page at most (≥ `replay_events`).
    pub replay_bytes: usize,
    /// Runs in the terminal cache (1..=[`MAX_TERMINAL_RUNS`]).
    pub terminal_runs: usize,
    /// Envelope bytes in the terminal cache (1..=[`MAX_TERMINAL_BYTES`]).
    pub terminal_bytes: usize,
    /// How long one durable transition may take.
    pub transition_timeout: Duration,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            active_runs: 64,
            concurrent_streams: 16,
            replay_events: 256,
            replay_bytes: 1 << 20,
            terminal_runs: 256,
            terminal_bytes: 64 << 20,
            transition_timeout: Duration::from_secs(5),
        }
    }
}

impl HostLimits {
    fn validate(&self) -> bool {
        self.active_runs > 0
            && (1..=MAX_STREAM_LEASES).contains(&self.concurrent_streams)
            && self.replay_events > 0
            && self.replay_events <= self.replay_bytes
            && (1..=MAX_TERMINAL_RUNS).contains(&self.terminal_runs)
            && (1..=MAX_TERMINAL_BYTES).contains(&self.terminal_bytes)
            && (TRANSITION_TIMEOUT_RANGE.0..=TRANSITION_TIMEOUT_RANGE.1)
                .contains(&self.transition_timeout)
    }
}

/// One of the four fixed degradation reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Degradation {
    /// `run authority outcome uncertain`
    AuthorityUncertain,
    /// `run authority unavailable`
    AuthorityUnavailable,
    /// `terminal snapshot unavailable`
    TerminalSnapshotUnavailable,
    /// `run lifecycle cleanup unavailable`
    CleanupUnavailable,
}

impl Degradation {
    /// The fixed text.
    pub fn as_str(self) -> &'static str {
        match self {
            Degradation::AuthorityUncertain => "run authority outcome uncertain",
            Degradation::AuthorityUnavailable => "run authority unavailable",
            Degradation::TerminalSnapshotUnavailable => "terminal snapshot unavailable",
            Degradation::CleanupUnavailable => "run lifecycle cleanup unavailable",
        }
    }
}

/// A reason a health source reports (a closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthReason {
    /// `dependency_degraded`
    DependencyDegraded,
    /// `dependency_recovering`
    DependencyRecovering,
    /// `dependency_unavailable`
    DependencyUnavailable,
}

impl HealthReason {
    /// The fixed code.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthReason::DependencyDegraded => "dependency_degraded",
            HealthReason::DependencyRecovering => "dependency_recovering",
            HealthReason::DependencyUnavailable => "dependency_unavailable",
        }
    }
}

/// A dependency whose health the host reports. Sampled outside the host's lock; a panic,
/// or more than [`MAX_SOURCE_REASONS`] reasons, counts as `dependency_unavailable`.
pub trait HealthSource: Send + Sync {
    /// The current reasons (empty: healthy).
    fn sample(&self) -> Vec<HealthReason>;
}

/// Everything a [`RunHost`] composes. The engine's broker must be `pending`.
pub struct RunHostConfig {
    /// The daemon's lifetime: cancelling it shuts the host down.
    pub root: CancellationToken,
    /// The kernel engine (built with `pending` as its broker).
    pub engine: Engine,
    /// The run authority; the host closes it last on shutdown.
    pub authority: Arc<Store>,
    /// The session table.
    pub sessions: SessionStore,
    /// The idempotency ledger.
    pub ledger: Arc<Ledger>,
    /// The pending router.
    pub pending: Arc<PendingRouter>,
    /// The served definitions.
    pub definitions: DefinitionSet,
    /// The budgets.
    pub limits: HostLimits,
    /// Health sources (at most [`MAX_HEALTH_SOURCES`]).
    pub health_sources: Vec<Arc<dyn HealthSource>>,
}

/// Start a run of a served definition with one user text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The idempotency key.
    pub operation_id: String,
    /// The definition id.
    pub definition_id: String,
    /// The definition revision.
    pub revision: String,
    /// The user's text.
    pub text: String,
}

/// The outcome of a successful mutation (also what the ledger replays).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Success {
    /// A run started: its id, first sequence (1) and tool-plan id.
    Started {
        /// The run.
        run_id: String,
        /// Always 1.
        sequence: u64,
        /// The run's tool-plan id.
        plan_id: String,
    },
    /// A snapshot was imported: the run continues at `sequence`.
    Imported {
        /// The run.
        run_id: String,
        /// The snapshot's last sequence + 1.
        sequence: u64,
    },
    /// The run is suspended at this boundary sequence.
    Suspended {
        /// The snapshot's last sequence.
        sequence: u64,
    },
    /// The run resumed; its next event has this sequence.
    Resumed {
        /// The next sequence.
        next_sequence: u64,
    },
    /// Cancellation was requested.
    CancelRequested,
    /// The run had already ended at this sequence.
    AlreadyTerminal {
        /// The terminal sequence.
        sequence: u64,
    },
    /// The response was accepted.
    Responded,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
enum Recorded {
    Ok(Success),
    Err(HostError),
}

/// The host's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthStatus {
    /// Nothing to report.
    Ready,
    /// Some reasons are reported.
    Degraded,
    /// The host is shutting down.
    Stopping,
}

/// Describe and health, from one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// The status.
    pub status: HealthStatus,
    /// Sorted, de-duplicated reasons (empty while stopping).
    pub reasons: Vec<String>,
    /// Reserved plus active run slots.
    pub active_runs: usize,
    /// The configured limits.
    pub limits: HostLimits,
    /// The definition set's revision fingerprint.
    pub definitions_revision: String,
    /// `(id, revision)` of every served definition, canonical order.
    pub definitions: Vec<(String, String)>,
}

struct Transition {
    authority: ActiveRun,
    envelope: Option<SnapshotEnvelope>,
    /// Shutdown left the run SUSPENDED: the monitor writes no tombstone.
    detached: bool,
}

struct Hosted {
    owner: Arc<str>,
    run: Run,
    transition: tokio::sync::Mutex<Transition>,
}

struct TerminalEntry {
    owner: Arc<str>,
    run: Run,
    envelope: Option<Vec<u8>>,
    sequence: u64,
}

#[derive(Default)]
struct State {
    closing: bool,
    degraded: BTreeSet<Degradation>,
    reserved: usize,
    reservations: HashSet<String>,
    active: HashMap<String, Arc<Hosted>>,
    owners: HashMap<String, Arc<str>>,
    /// Oldest first; entries leave only from the front (eviction).
    terminal: VecDeque<(String, TerminalEntry)>,
    /// The position counter of `terminal`'s front entry: an entry pushed when the front
    /// was at `first` with `len` entries has position `first + len` for its whole stay.
    terminal_first: u64,
    /// Run id to its position in `terminal`, so a lookup under the host lock is O(1)
    /// instead of a scan of up to `terminal_runs` entries.
    terminal_index: HashMap<String, u64>,
    terminal_bytes: usize,
    inflight: usize,
}

struct Inner {
    /// Cancelled first on shutdown: every operation's context.
    root: CancellationToken,
    /// The runs' lifetime: cancelled by `engine.shutdown` only after suspended runs were
    /// detached, so a clean shutdown leaves them SUSPENDED.
    runs_root: CancellationToken,
    engine: Engine,
    authority: Arc<Store>,
    sessions: SessionStore,
    ledger: Arc<Ledger>,
    pending: Arc<PendingRouter>,
    definitions: DefinitionSet,
    limits: HostLimits,
    sources: Vec<Arc<dyn HealthSource>>,
    state: Mutex<State>,
    changed: Notify,
    /// The terminal monitors still running, plus the finished ones not reaped yet: each
    /// publish reaps the finished ones, so the set holds about the active runs rather than
    /// every run the host ever started.
    monitors: Mutex<Monitors>,
    shutdown: tokio::sync::Mutex<Option<Result<(), HostError>>>,
}

/// The run host; cheap to clone.
#[derive(Clone)]
pub struct RunHost {
    inner: Arc<Inner>,
}

impl fmt::Debug for RunHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("RunHost")
            .field("active", &state.active.len())
            .field("reserved", &state.reserved)
            .field("closing", &state.closing)
            .finish_non_exhaustive()
    }
}

/// Why a host could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// The root is already cancelled.
    Root,
    /// A limit is out of range.
    Limits,
    /// The definition set's fingerprint does not re-derive.
    Definitions,
    /// More than [`MAX_HEALTH_SOURCES`] sources.
    HealthSources,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigError::Root => "run host root already cancelled",
            ConfigError::Limits => "run host limits out of range",
            ConfigError::Definitions => "definition set fingerprint does not re-derive",
            ConfigError::HealthSources => "too many health sources",
        })
    }
}

impl std::error::Error for ConfigError {}

fn lifecycle_of(status: SnapshotStatus) -> Lifecycle {
    match status {
        SnapshotStatus::Suspended => Lifecycle::Suspended,
        SnapshotStatus::Completed => Lifecycle::Completed,
        SnapshotStatus::Failed => Lifecycle::Failed,
        SnapshotStatus::Cancelled => Lifecycle::Cancelled,
    }
}

fn is_ended(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
    )
}

/// Releases a reserved run slot (and a reserved run id) unless the run was published.
struct Slot<'a> {
    inner: &'a Inner,
    run_id: Option<String>,
    published: bool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        let mut state = self.inner.lock();
        state.reserved -= 1;
        if let Some(run_id) = &self.run_id {
            state.reservations.remove(run_id);
        }
        drop(state);
        self.inner.changed.notify_waiters();
    }
}

/// Counts an operation in flight (shutdown waits for them).
struct Inflight<'a>(&'a Inner);

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        self.0.lock().inflight -= 1;
        self.0.changed.notify_waiters();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn degrade(&self, reason: Degradation) {
        self.lock().degraded.insert(reason);
    }

    fn degrade_authority(&self, kind: ErrorKind) {
        self.degrade(match kind {
            ErrorKind::Uncertain => Degradation::AuthorityUncertain,
            ErrorKind::Unavailable => Degradation::AuthorityUnavailable,
            _ => Degradation::CleanupUnavailable,
        });
    }

    fn begin(&self) -> Result<Inflight<'_>, HostError> {
        let mut state = self.lock();
        if state.closing {
            return Err(HostError::Closed);
        }
        state.inflight += 1;
        Ok(Inflight(self))
    }

    fn reserve_slot(&self) -> Result<Slot<'_>, Failure> {
        let mut state = self.lock();
        if state.closing {
            return Err(abandon(HostError::Closed));
        }
        if state.reserved >= self.limits.active_runs {
            let limit = self.limits.active_runs as u64;
            return Err(abandon(HostError::Capacity {
                resource: "active runs".into(),
                limit,
                observed: state.reserved as u64 + 1,
            }));
        }
        state.reserved += 1;
        Ok(Slot {
            inner: self,
            run_id: None,
            published: false,
        })
    }

    /// Reserves the run id on the slot and binds the run to the client.
    fn bind(&self, slot: &mut Slot<'_>, client: &str, run_id: &str) -> Result<RunBinding, Failure> {
        {
            let mut state = self.lock();
            if state.reservations.contains(run_id)
                || state.active.contains_key(run_id)
                || state.owners.contains_key(run_id)
            {
                return Err(commit(HostError::State));
            }
            state.reservations.insert(run_id.to_owned());
        }
        slot.run_id = Some(run_id.to_owned());
        let scope = Scope::new(run_id).map_err(|_| commit(HostError::State))?;
        self.pending.bind_run(client, &scope).map_err(|error| {
            let class = match error {
                crate::pending::PendingError::BindingCapacity => Class::Abandon,
                crate::pending::PendingError::Closed => Class::Abandon,
                _ => Class::Commit,
            };
            (HostError::from(error), class)
        })
    }

    /// The active run `run_id` if `client` owns it; otherwise the uniform unavailable error.
    fn owned_active(&self, client: &str, run_id: &str) -> Result<Arc<Hosted>, HostError> {
        match self.lock().active.get(run_id) {
            Some(hosted) if &*hosted.owner == client => Ok(hosted.clone()),
            _ => Err(HostError::RunUnavailable),
        }
    }

    fn owned_terminal(&self, client: &str, run_id: &str) -> Option<(Run, Option<Vec<u8>>, u64)> {
        let state = self.lock();
        let position = *state.terminal_index.get(run_id)?;
        let index = usize::try_from(position.checked_sub(state.terminal_first)?).ok()?;
        state
            .terminal
            .get(index)
            .filter(|(id, entry)| id == run_id && &*entry.owner == client)
            .map(|(_, e)| (e.run.clone(), e.envelope.clone(), e.sequence))
    }

    /// Appends a terminal entry at the back of the cache.
    fn push_terminal(state: &mut State, run_id: String, entry: TerminalEntry) {
        let position = state.terminal_first + state.terminal.len() as u64;
        state.terminal_index.insert(run_id.clone(), position);
        state.terminal.push_back((run_id, entry));
    }

    /// Evicts the oldest entries past either bound and returns them, so the caller drops
    /// them (each holds a whole run) after releasing the host lock.
    fn evict_terminal(&self, state: &mut State) -> Vec<TerminalEntry> {
        let mut evicted = Vec::new();
        while state.terminal.len() > self.limits.terminal_runs
            || state.terminal_bytes > self.limits.terminal_bytes
        {
            let Some((run_id, entry)) = state.terminal.pop_front() else {
                break;
            };
            if state.terminal_index.get(&run_id) == Some(&state.terminal_first) {
                state.terminal_index.remove(&run_id);
            }
            state.terminal_first += 1;
            state.terminal_bytes -= entry.envelope.as_ref().map_or(0, Vec::len);
            evicted.push(entry);
        }
        evicted
    }
}

/// Waits for `token` or the host root, whichever first; the caller's wait is abandoned.
async fn lock_transition<'a>(
    hosted: &'a Hosted,
    op: &CancellationToken,
) -> Result<tokio::sync::MutexGuard<'a, Transition>, Failure> {
    tokio::select! {
        guard = hosted.transition.lock() => Ok(guard),
        () = op.cancelled() => Err(abandon(HostError::Cancelled)),
    }
}

impl RunHost {
    /// Validates the configuration and builds the host.
    pub fn new(config: RunHostConfig) -> Result<RunHost, ConfigError> {
        if config.root.is_cancelled() {
            return Err(ConfigError::Root);
        }
        if !config.limits.validate() {
            return Err(ConfigError::Limits);
        }
        if !config.definitions.verify() {
            return Err(ConfigError::Definitions);
        }
        if config.health_sources.len() > MAX_HEALTH_SOURCES {
            return Err(ConfigError::HealthSources);
        }
        let ledger = config.ledger.clone();
        let pending = config.pending.clone();
        config.sessions.set_reclaim_listener(move |client| {
            ledger.forget_client(client);
            pending.forget_client(client);
        });
        Ok(RunHost {
            inner: Arc::new(Inner {
                root: config.root.child_token(),
                runs_root: CancellationToken::new(),
                engine: config.engine,
                authority: config.authority,
                sessions: config.sessions,
                ledger: config.ledger,
                pending: config.pending,
                definitions: config.definitions,
                limits: config.limits,
                sources: config.health_sources,
                state: Mutex::new(State::default()),
                changed: Notify::new(),
                monitors: Mutex::new(Monitors::default()),
                shutdown: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// The session table (the transport creates and reconnects sessions through it).
    pub fn sessions(&self) -> &SessionStore {
        &self.inner.sessions
    }

    /// The served definitions.
    pub fn definitions(&self) -> &DefinitionSet {
        &self.inner.definitions
    }

    /// The mutation envelope: check the session, enter the ledger under (client, operation
    /// id), run the operation under request ∧ epoch ∧ host-root cancellation, and decode the
    /// committed outcome.
    async fn mutation<F>(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        kind: &'static str,
        input: serde_json::Value,
        execute: impl FnOnce(CancellationToken) -> F,
    ) -> Result<(Success, bool), HostError>
    where
        F: std::future::Future<Output = Result<Success, Failure>>,
    {
        let inner = &*self.inner;
        if !is_daemon_token(operation_id) {
            return Err(HostError::State);
        }
        inner.sessions.check(session)?;
        let _inflight = inner.begin()?;
        let _hold: Option<SessionHold> = inner.sessions.hold(session.client_id());
        let op = inner.root.child_token();
        let digest = canonical_digest(input.to_string().as_bytes());
        let sessions = inner.sessions.clone();
        let session_for_exec = session.clone();
        let op_for_exec = op.clone();
        let run = inner.ledger.run(
            &op,
            session.client_id(),
            operation_id,
            kind,
            digest,
            move || async move {
                if let Err(error) = sessions.check(&session_for_exec) {
                    return Execution::Abandon(HostError::from(error));
                }
                let encode = |kind, recorded: &Recorded| {
                    let bytes = serde_json::to_vec(recorded).expect("plain data serializes");
                    Outcome::new(kind, bytes)
                };
                let outcome = match execute(op_for_exec).await {
                    Ok(success) => encode(OutcomeKind::Success, &Recorded::Ok(success)),
                    Err((error, Class::Abandon)) => return Execution::Abandon(error),
                    Err((error, Class::Commit)) => {
                        encode(OutcomeKind::Failure, &Recorded::Err(error))
                    }
                    Err((_, Class::Uncertain)) => {
                        encode(OutcomeKind::Uncertain, &Recorded::Err(HostError::Uncertain))
                    }
                };
                match outcome {
                    Some(outcome) => Execution::Commit(outcome),
                    None => Execution::Fail,
                }
            },
        );
        let mut run = pin!(run);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut run => break result,
                () = ctx.cancelled(), if !op.is_cancelled() => op.cancel(),
                () = session.token().cancelled(), if !op.is_cancelled() => op.cancel(),
            }
        };
        match result {
            Ok((outcome, duplicate)) => decode(inner, &outcome).map(|s| (s, duplicate)),
            Err(LedgerError::Abandoned(error)) => Err(error),
            Err(LedgerError::Executor) => {
                inner.degrade(Degradation::CleanupUnavailable);
                Err(HostError::Uncertain)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Starts a run: publishes nothing before the authority records it ACTIVE.
    pub async fn start(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        request: StartRequest,
    ) -> Result<(Success, bool), HostError> {
        let input = json!([request.definition_id, request.revision, request.text]);
        let host = self.clone();
        let client = session.client_id().to_owned();
        let session_c = session.clone();
        let operation_id = request.operation_id.clone();
        self.mutation(
            ctx,
            session,
            &operation_id,
            kinds::START,
            input,
            |op| async move { host.start_inner(&op, &session_c, &client, &request).await },
        )
        .await
    }

    async fn start_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        client: &str,
        request: &StartRequest,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let mut slot = inner.reserve_slot()?;
        let definition = inner
            .definitions
            .resolve(&request.definition_id, &request.revision)
            .map_err(|_| commit(HostError::State))?;
        let input = Message::user(request.text.clone()).map_err(|_| commit(HostError::State))?;
        let prepared = inner
            .engine
            .prepare(definition.agent(), input)
            .await
            .map_err(start_error)?;
        let run_id = prepared.run_id().to_owned();
        let binding = inner.bind(&mut slot, client, &run_id)?;
        let paused = prepared
            .commit_paused(&inner.runs_root)
            .map_err(start_error)?;
        let lease = acquire(inner, op, session).await?;
        if inner.root.is_cancelled() {
            return Err(abandon(HostError::Closed));
        }
        let owner = inner.authority.start(&run_id).map_err(|error| {
            inner.degrade_authority(error.kind());
            authority(&error)
        })?;
        let run = paused.activate();
        let plan_id = run.plan_id().to_string();
        self.publish(&mut slot, client, run, owner, binding);
        drop(lease);
        Ok(Success::Started {
            run_id,
            sequence: 1,
            plan_id,
        })
    }

    /// Moves a run from its reservation to the active table and spawns its monitor.
    fn publish(
        &self,
        slot: &mut Slot<'_>,
        client: &str,
        run: Run,
        owner: ActiveRun,
        binding: RunBinding,
    ) {
        let inner = &*self.inner;
        let run_id = run.id().to_owned();
        let owner_id: Arc<str> = client.into();
        let hosted = Arc::new(Hosted {
            owner: owner_id.clone(),
            run,
            transition: tokio::sync::Mutex::new(Transition {
                authority: owner,
                envelope: None,
                detached: false,
            }),
        });
        {
            let mut state = inner.lock();
            state.reservations.remove(&run_id);
            state.active.insert(run_id.clone(), hosted.clone());
            state.owners.insert(run_id.clone(), owner_id);
        }
        slot.published = true;
        let hold = inner.sessions.hold(client);
        let host = self.clone();
        let mut monitors = inner
            .monitors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        monitors.reap();
        monitors.tasks.spawn(async move {
            host.monitor(run_id, hosted, binding, hold).await;
        });
    }

    /// The terminal monitor: waits for the kernel run to end, records its terminal
    /// envelope, closes the authority handle, moves the run to the terminal cache, drains
    /// its binding, then forgets its owner.
    async fn monitor(
        &self,
        run_id: String,
        hosted: Arc<Hosted>,
        mut binding: RunBinding,
        hold: Option<SessionHold>,
    ) {
        let inner = &*self.inner;
        let _ = hosted.run.wait().await;
        let mut transition = hosted.transition.lock().await;
        let mut clean = true;
        let mut envelope = None;
        let sequence = hosted.run.events().last_sequence();
        if !transition.detached {
            match hosted.run.snapshot() {
                Ok(snapshot) => {
                    match transition.authority.issue_snapshot(
                        lifecycle_of(snapshot.status()),
                        snapshot.last_sequence(),
                        snapshot.to_json(),
                    ) {
                        Ok(issued) => envelope = Some(issued.to_json()),
                        Err(error) => {
                            inner.degrade_authority(error.kind());
                            inner.degrade(Degradation::TerminalSnapshotUnavailable);
                            clean = false;
                        }
                    }
                }
                Err(_) => {
                    inner.degrade(Degradation::TerminalSnapshotUnavailable);
                    clean = false;
                }
            }
        }
        if let Err(error) = transition.authority.close() {
            inner.degrade_authority(error.kind());
            clean = false;
        }
        let evicted = {
            let mut state = inner.lock();
            state.active.remove(&run_id);
            state.reserved -= 1;
            let envelope = match envelope {
                Some(bytes) if bytes.len() > inner.limits.terminal_bytes => {
                    state
                        .degraded
                        .insert(Degradation::TerminalSnapshotUnavailable);
                    None
                }
                other => other,
            };
            state.terminal_bytes += envelope.as_ref().map_or(0, Vec::len);
            Inner::push_terminal(
                &mut state,
                run_id.clone(),
                TerminalEntry {
                    owner: hosted.owner.clone(),
                    run: hosted.run.clone(),
                    envelope,
                    sequence,
                },
            );
            inner.evict_terminal(&mut state)
        };
        drop(evicted);
        drop(transition);
        binding.wait_released().await;
        inner.lock().owners.remove(&run_id);
        if !clean {
            inner.degrade(Degradation::CleanupUnavailable);
        }
        drop(hold);
        inner.changed.notify_waiters();
    }

    /// Imports a signed suspended snapshot: verify, IMPORTING, kernel commit paused, ACTIVE,
    /// activate. Nothing runs before the authority records ACTIVE.
    pub async fn import(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        snapshot: &[u8],
    ) -> Result<(Success, bool), HostError> {
        let envelope = SnapshotEnvelope::decode(snapshot).map_err(|_| HostError::State)?;
        if envelope.lifecycle() != Lifecycle::Suspended {
            return Err(HostError::State);
        }
        let kernel = Snapshot::from_json(envelope.payload()).map_err(|_| HostError::State)?;
        if kernel.run_id() != envelope.run_id()
            || kernel.last_sequence() != envelope.last_sequence()
            || kernel.status() != SnapshotStatus::Suspended
        {
            return Err(HostError::State);
        }
        let digest: String = canonical_digest(snapshot)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let host = self.clone();
        let client = session.client_id().to_owned();
        let session_c = session.clone();
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::IMPORT,
            json!([digest]),
            |op| async move {
                host.import_inner(&op, &session_c, &client, envelope, kernel)
                    .await
            },
        )
        .await
    }

    async fn import_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        client: &str,
        envelope: SnapshotEnvelope,
        kernel: Snapshot,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let mut slot = inner.reserve_slot()?;
        let run_id = envelope.run_id().to_owned();
        let sequence = envelope.last_sequence() + 1;
        let binding = inner.bind(&mut slot, client, &run_id)?;
        let import = inner
            .authority
            .prepare_import(&envelope)
            .map_err(|error| authority(&error))?;
        let prepared = match inner.engine.prepare_resume(kernel).await {
            Ok(prepared) => prepared,
            Err(error) => {
                import.abort();
                return Err(start_error(error));
            }
        };
        let lease = acquire(inner, op, session).await?;
        if inner.root.is_cancelled() {
            return Err(abandon(HostError::Closed));
        }
        let (owner, run) = import
            .complete(EngineImport::new(prepared, inner.runs_root.clone()))
            .map_err(|error| {
                if error.kind() == ErrorKind::Uncertain {
                    inner.degrade(Degradation::AuthorityUncertain);
                    uncertain()
                } else {
                    authority(&error)
                }
            })?;
        self.publish(&mut slot, client, run, owner, binding);
        drop(lease);
        Ok(Success::Imported { run_id, sequence })
    }

    /// Suspends an owned run at its next safe boundary (waiting for it without the commit
    /// gate) and records the signed SUSPENDED snapshot.
    pub async fn suspend(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<(Success, bool), HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::SUSPEND,
            json!([run_id]),
            |op| async move { host.suspend_inner(&op, &session_c, &run_id_c).await },
        )
        .await
    }

    async fn suspend_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        let mut transition = lock_transition(&hosted, op).await?;
        if let Some(envelope) = &transition.envelope {
            return Ok(Success::Suspended {
                sequence: envelope.last_sequence(),
            });
        }
        tokio::select! {
            result = hosted.run.suspend() => result.map_err(|_| commit(HostError::State))?,
            () = op.cancelled() => return Err(abandon(HostError::Cancelled)),
        }
        let restore = |failure: Failure| {
            if hosted.run.resume().is_err() {
                hosted.run.cancel();
                inner.degrade(Degradation::CleanupUnavailable);
                return uncertain();
            }
            failure
        };
        let lease = match acquire(inner, op, session).await {
            Ok(lease) => lease,
            Err(failure) => return Err(restore(failure)),
        };
        let snapshot = match hosted.run.snapshot() {
            Ok(snapshot) => snapshot,
            Err(_) => return Err(restore(commit(HostError::State))),
        };
        let sequence = snapshot.last_sequence();
        match transition.authority.issue_snapshot(
            Lifecycle::Suspended,
            sequence,
            snapshot.to_json(),
        ) {
            Ok(envelope) => transition.envelope = Some(envelope),
            Err(error) if error.kind() == ErrorKind::Uncertain => {
                hosted.run.cancel();
                inner.degrade(Degradation::AuthorityUncertain);
                return Err(uncertain());
            }
            Err(error) => {
                inner.degrade_authority(error.kind());
                return Err(restore(authority(&error)));
            }
        }
        drop(lease);
        Ok(Success::Suspended { sequence })
    }

    /// Resumes an owned suspended run: kernel reservation, durable ACTIVE (which invalidates
    /// the signed snapshot), then kernel commit.
    pub async fn resume(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<(Success, bool), HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::RESUME,
            json!([run_id]),
            |op| async move { host.resume_inner(&op, &session_c, &run_id_c).await },
        )
        .await
    }

    async fn resume_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        let mut transition = lock_transition(&hosted, op).await?;
        let reservation = hosted
            .run
            .prepare_local_resume()
            .map_err(|_| commit(HostError::State))?;
        let next_sequence = reservation.next_sequence();
        let lease = acquire(inner, op, session).await?;
        match transition
            .authority
            .resume_local(EngineLocalResume::new(reservation))
        {
            Ok(()) => transition.envelope = None,
            Err(error) if error.kind() == ErrorKind::Uncertain => {
                hosted.run.cancel();
                inner.degrade(Degradation::AuthorityUncertain);
                return Err(uncertain());
            }
            Err(error) => {
                inner.degrade_authority(error.kind());
                return Err(authority(&error));
            }
        }
        drop(lease);
        Ok(Success::Resumed { next_sequence })
    }

    /// Requests cancellation of an owned run (or reports its terminal sequence).
    pub async fn cancel(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<Success, HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::CANCEL,
            json!([run_id]),
            |op| async move { host.cancel_inner(&op, &session_c, &run_id_c).await },
        )
        .await
        .map(|(success, _)| success)
    }

    async fn cancel_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        if let Some((_, _, sequence)) = inner.owned_terminal(session.client_id(), run_id) {
            return if sequence == 0 {
                Err(commit(HostError::State))
            } else {
                Ok(Success::AlreadyTerminal { sequence })
            };
        }
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        // Cancelling needs no transition lock: a suspend waiting for its boundary holds it,
        // and a cancel must not wait behind that.
        if is_ended(hosted.run.status()) {
            return Ok(Success::AlreadyTerminal {
                sequence: hosted.run.events().last_sequence(),
            });
        }
        let lease = acquire(inner, op, session).await?;
        hosted.run.cancel();
        drop(lease);
        Ok(Success::CancelRequested)
    }

    /// Answers a pending interaction of an owned run.
    pub async fn respond(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
        response: InteractionResponse,
    ) -> Result<Success, HostError> {
        let value = canonical_digest(response.value().to_string().as_bytes());
        let value: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let input = json!([run_id, response.id(), value]);
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::RESPOND,
            input,
            |op| async move {
                let inner = &*host.inner;
                let owned = inner
                    .lock()
                    .owners
                    .get(&run_id_c)
                    .is_some_and(|owner| &**owner == session_c.client_id());
                if !owned {
                    return Err(commit(HostError::RunUnavailable));
                }
                let scope = Scope::new(run_id_c.as_str()).map_err(|_| commit(HostError::State))?;
                let lease = acquire(inner, &op, &session_c).await?;
                let result = inner
                    .pending
                    .respond(session_c.client_id(), &scope, response)
                    .map_err(|error| commit(error.into()));
                drop(lease);
                result.map(|()| Success::Responded)
            },
        )
        .await
        .map(|(success, _)| success)
    }

    /// The authority-issued envelope of an owned run: a suspended run's signed snapshot, or
    /// an ended run's terminal envelope. Read-only; no ledger.
    pub async fn export(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Vec<u8>, HostError> {
        let inner = &*self.inner;
        inner.sessions.check(session)?;
        if let Some((_, envelope, _)) = inner.owned_terminal(session.client_id(), run_id) {
            return envelope.ok_or(HostError::State);
        }
        let hosted = inner.owned_active(session.client_id(), run_id)?;
        let transition = tokio::select! {
            guard = hosted.transition.lock() => guard,
            () = ctx.cancelled() => return Err(HostError::Cancelled),
        };
        inner.sessions.check(session)?;
        if let Some(envelope) = &transition.envelope {
            return Ok(envelope.to_json());
        }
        drop(transition);
        match inner.owned_terminal(session.client_id(), run_id) {
            Some((_, Some(envelope), _)) => Ok(envelope),
            _ => Err(HostError::State),
        }
    }

    /// A page of an owned run's events (active or in the terminal cache), optionally with
    /// the live tail registered atomically with the page. Holds a stream lease.
    pub async fn replay_events(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        run_id: &str,
        request: ReplayRequest,
    ) -> Result<EventObservation, HostError> {
        let inner = &*self.inner;
        let limits = inner.limits;
        if request.max_events == 0
            || request.max_events > limits.replay_events
            || request.max_bytes == 0
            || request.max_bytes > limits.replay_bytes
        {
            return Err(HostError::State);
        }
        let lease = inner
            .sessions
            .acquire_stream(ctx, session, limits.concurrent_streams)
            .await?;
        let run = match inner.owned_active(session.client_id(), run_id) {
            Ok(hosted) => hosted.run.clone(),
            Err(error) => match inner.owned_terminal(session.client_id(), run_id) {
                Some((run, _, _)) => run,
                None => return Err(error),
            },
        };
        let page = run.events().replay(request).map_err(|error| match error {
            LogError::OutOfRange {
                earliest, latest, ..
            } => HostError::OutOfRange { earliest, latest },
            _ => HostError::State,
        })?;
        if request.tail && !page.has_more && page.tail.is_none() {
            return Err(HostError::Unavailable);
        }
        let stop = inner.root.child_token();
        let log_limits = run.events().limits();
        Ok(EventObservation {
            log_limits,
            events: page.events,
            has_more: page.has_more,
            earliest: page.earliest,
            latest: page.latest,
            tail: page.tail,
            lease,
            stop,
        })
    }

    /// The client's pending interactions: a complete sorted snapshot, then the gap-free
    /// tail. Holds a stream lease.
    pub async fn subscribe_interactions(
        &self,
        ctx: &CancellationToken,
        session: &Session,
    ) -> Result<InteractionObservation, HostError> {
        let inner = &*self.inner;
        let lease = inner
            .sessions
            .acquire_stream(ctx, session, inner.limits.concurrent_streams)
            .await?;
        let observer = inner.pending.subscribe(session.client_id())?;
        Ok(InteractionObservation {
            observer,
            lease,
            stop: inner.root.child_token(),
        })
    }

    /// The client's pending interactions as one finite snapshot (counts toward the stream
    /// bound while it is taken; allocates no watcher).
    pub async fn snapshot_interactions(
        &self,
        ctx: &CancellationToken,
        session: &Session,
    ) -> Result<PendingSnapshot, HostError> {
        let inner = &*self.inner;
        let lease = inner
            .sessions
            .acquire_stream(ctx, session, inner.limits.concurrent_streams)
            .await?;
        let snapshot = inner.pending.snapshot(session.client_id());
        drop(lease);
        Ok(snapshot)
    }

    /// Waits until no run slot is reserved or active (what [`Description::active_runs`]
    /// counts is zero), or `ctx` ends ([`HostError::Cancelled`]). A run's slot is released
    /// by its monitor just after the terminal event is published, so this is the signal for
    /// "every finished run let go of its slot".
    pub async fn wait_idle(&self, ctx: &CancellationToken) -> Result<(), HostError> {
        let inner = &*self.inner;
        loop {
            let mut notified = pin!(inner.changed.notified());
            notified.as_mut().enable();
            if inner.lock().reserved == 0 {
                return Ok(());
            }
            tokio::select! {
                () = notified => {}
                () = ctx.cancelled() => return Err(HostError::Cancelled),
            }
        }
    }

    /// The host's description, from one snapshot of its state; needs no session.
    pub fn describe(&self) -> Description {
        let inner = &*self.inner;
        let (stopping, mut reasons, active_runs) = {
            let state = inner.lock();
            let reasons: BTreeSet<String> = state
                .degraded
                .iter()
                .map(|d| d.as_str().to_owned())
                .collect();
            (state.closing, reasons, state.reserved)
        };
        let definitions = inner
            .definitions
            .definitions()
            .iter()
            .map(|d| (d.id().to_owned(), d.revision().to_owned()))
            .collect();
        let status = if stopping {
            reasons.clear();
            HealthStatus::Stopping
        } else {
            for source in &inner.sources {
                let sampled = catch_unwind(AssertUnwindSafe(|| source.sample()));
                match sampled {
                    Ok(list) if list.len() <= MAX_SOURCE_REASONS => {
                        reasons.extend(list.iter().map(|r| r.as_str().to_owned()));
                    }
                    _ => {
                        reasons.insert(HealthReason::DependencyUnavailable.as_str().to_owned());
                    }
                }
            }
            if reasons.is_empty() {
                HealthStatus::Ready
            } else {
                HealthStatus::Degraded
            }
        };
        Description {
            status,
            reasons: reasons.into_iter().collect(),
            active_runs,
            limits: inner.limits,
            definitions_revision: inner.definitions.revision().to_owned(),
            definitions,
        }
    }

    /// [`RunHost::describe`] for a session that still owns its client.
    pub fn health(&self, session: &Session) -> Result<Description, HostError> {
        self.inner.sessions.check(session)?;
        Ok(self.describe())
    }

    /// Shuts the host down once; later callers get the first outcome. Admission is fenced
    /// synchronously (before the first await), then: sessions close (fencing owners and
    /// streams), the pending router closes, in-flight operations finish, suspended runs
    /// are detached (their SUSPENDED record stays importable), the engine shuts down
    /// (cancelling every other run), monitors finish, sessions drain, the authority closes.
    pub async fn shutdown(&self) -> Result<(), HostError> {
        let inner = &*self.inner;
        {
            let mut state = inner.lock();
            state.closing = true;
        }
        inner.root.cancel();
        let mut done = inner.shutdown.lock().await;
        if let Some(result) = &*done {
            return result.clone();
        }
        let mut result = Ok(());
        inner.sessions.close();
        inner.pending.close();
        loop {
            let mut notified = pin!(inner.changed.notified());
            notified.as_mut().enable();
            if inner.lock().inflight == 0 {
                break;
            }
            notified.await;
        }
        let active: Vec<Arc<Hosted>> = inner.lock().active.values().cloned().collect();
        for hosted in active {
            let mut transition = hosted.transition.lock().await;
            if transition.envelope.is_some() && !is_ended(hosted.run.status()) {
                transition.detached = true;
                if transition.authority.close().is_err() {
                    inner.degrade(Degradation::AuthorityUncertain);
                    result = Err(HostError::Uncertain);
                }
            }
        }
        inner.engine.shutdown().await;
        inner.runs_root.cancel();
        let mut monitors = Detaching(std::mem::take(
            &mut *inner
                .monitors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        ));
        let mut failed = std::mem::take(&mut monitors.0.failed);
        while let Some(joined) = monitors.0.tasks.join_next().await {
            failed |= joined.is_err();
        }
        if failed {
            inner.degrade(Degradation::CleanupUnavailable);
            result = Err(HostError::Unavailable);
        }
        let drain = CancellationToken::new();
        let timer = {
            let drain = drain.clone();
            let timeout = inner.limits.transition_timeout;
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                drain.cancel();
            })
        };
        if inner.sessions.shutdown(&drain).await.is_err() {
            result = Err(HostError::Unavailable);
        }
        timer.abort();
        if inner.authority.close().is_err() {
            inner.degrade(Degradation::AuthorityUnavailable);
            result = Err(HostError::Unavailable);
        }
        *done = Some(result.clone());
        result
    }
}

/// The terminal monitors' tasks, and whether one that was reaped early had panicked (shutdown
/// reports it as it reports a monitor it joins itself).
#[derive(Default)]
struct Monitors {
    tasks: JoinSet<()>,
    failed: bool,
}

impl Monitors {
    /// Drops the finished tasks, remembering a panic.
    fn reap(&mut self) {
        while let Some(joined) = self.tasks.try_join_next() {
            self.failed |= joined.is_err();
        }
    }
}

/// Monitors taken by a shutdown: if the shutdown's future is dropped before it joined them
/// all, the rest keep running (dropping a `JoinSet` would abort them, cutting a run's
/// cleanup short).
struct Detaching(Monitors);

impl Drop for Detaching {
    fn drop(&mut self) {
        self.0.tasks.detach_all();
    }
}

/// The client's commit lease for an operation. A wait ended by the operation's cancellation
/// reports the stale session if that is why it was cancelled (a reconnect), so the caller
/// sees the same error whichever wake-up came first.
async fn acquire(
    inner: &Inner,
    op: &CancellationToken,
    session: &Session,
) -> Result<crate::session::MutationLease, Failure> {
    match inner.sessions.acquire_mutation(op, session).await {
        Ok(lease) => Ok(lease),
        Err(crate::session::SessionError::Cancelled) => match inner.sessions.check(session) {
            Err(stale) => Err(gate(stale)),
            Ok(()) => Err(gate(crate::session::SessionError::Cancelled)),
        },
        Err(error) => Err(gate(error)),
    }
}

fn start_error(error: StartError) -> Failure {
    match error {
        StartError::IdentityCapacity => abandon(HostError::Capacity {
            resource: "run identities".into(),
            limit: agent_core::agent::MAX_RECORDED_RUN_IDS as u64,
            observed: agent_core::agent::MAX_RECORDED_RUN_IDS as u64 + 1,
        }),
        StartError::Closed | StartError::Cancelled => abandon(HostError::Closed),
        _ => commit(HostError::State),
    }
}

fn decode(inner: &Inner, outcome: &Outcome) -> Result<Success, HostError> {
    if outcome.kind() == OutcomeKind::Uncertain {
        return Err(HostError::Uncertain);
    }
    match serde_json::from_slice::<Recorded>(outcome.payload()) {
        Ok(Recorded::Ok(success)) => Ok(success),
        Ok(Recorded::Err(error)) => Err(error),
        Err(_) => {
            inner.degrade(Degradation::CleanupUnavailable);
            Err(HostError::Unavailable)
        }
    }
}

/// A page of a run's events plus its optional live tail; closing it (or dropping it)
/// releases the stream lease. A reconnect or the host's shutdown ends the tail.
pub struct EventObservation {
    /// The page's events, in sequence order.
    pub events: Vec<Envelope>,
    /// Whether retained events follow the page.
    pub has_more: bool,
    /// The first retained sequence when the page was taken.
    pub earliest: u64,
    /// The last sequence when the page was taken.
    pub latest: u64,
    tail: Option<Subscription>,
    lease: crate::session::StreamLease,
    stop: CancellationToken,
    log_limits: agent_core::event::LogLimits,
}

/// Why a tail ended before the log did: the subscriber fell behind the run's bounded
/// subscription queue ([`EventObservation::next_or_lag`]). Replay after `last_delivered`
/// catches up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailLag {
    /// The bound that was exceeded: `event_subscription_events` or
    /// `event_subscription_bytes`.
    pub resource: &'static str,
    /// That bound.
    pub limit: u64,
    /// What the queue would have held: one past the bound (limit + 1).
    pub observed: u64,
    /// The sequence of the last event handed out (or the page's end, before the first).
    pub last_delivered: u64,
}

impl fmt::Debug for EventObservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventObservation")
            .field("events", &self.events.len())
            .field("tailing", &self.tail.is_some())
            .finish_non_exhaustive()
    }
}

impl EventObservation {
    /// Whether the page carries a live tail.
    pub fn is_tailing(&self) -> bool {
        self.tail.is_some()
    }

    /// The next live event; `None` when the log ended, the tail lagged, the stream was
    /// fenced (reconnect), or the host stopped.
    pub async fn next(&mut self) -> Option<Envelope> {
        let tail = self.tail.as_mut()?;
        // An event already queued is taken without registering on the two tokens, with the
        // same priority as below: a fenced or stopped stream delivers nothing.
        if self.lease.token().is_cancelled() || self.stop.is_cancelled() {
            return None;
        }
        match tail.try_next() {
            Ok(Some(event)) => return Some(event),
            Err(_) => return None,
            Ok(None) => {}
        }
        tokio::select! {
            biased;
            () = self.lease.token().cancelled() => None,
            () = self.stop.cancelled() => None,
            next = tail.next() => next.ok().flatten(),
        }
    }

    /// Like [`next`](Self::next), but a tail that fell behind ends with `Err` and its facts
    /// instead of `None`, so a caller can tell a lag from the end of the log. A fence or the
    /// host's stop is still `Ok(None)`.
    pub async fn next_or_lag(&mut self) -> Result<Option<Envelope>, TailLag> {
        let Some(tail) = self.tail.as_mut() else {
            return Ok(None);
        };
        let next = tokio::select! {
            biased;
            () = self.lease.token().cancelled() => return Ok(None),
            () = self.stop.cancelled() => return Ok(None),
            next = tail.next() => next,
        };
        match next {
            Ok(next) => Ok(next),
            Err(agent_core::event::SubscriptionError::Lagged { resource }) => {
                let limit = if resource == "event_subscription_bytes" {
                    self.log_limits.subscriber_max_bytes
                } else {
                    self.log_limits.subscriber_max_events
                } as u64;
                Err(TailLag {
                    resource,
                    limit,
                    observed: limit.saturating_add(1),
                    last_delivered: tail.last_delivered(),
                })
            }
            // `SubscriptionError` is non-exhaustive: any other end is the end.
            Err(_) => Ok(None),
        }
    }

    /// Whether a reconnect or close fenced this stream.
    pub fn is_fenced(&self) -> bool {
        self.lease.token().is_cancelled()
    }

    /// Ends the stream and releases its lease.
    pub fn close(mut self) {
        self.tail = None;
        self.lease.close();
    }
}

/// The client's pending snapshot and tail; closing (or dropping) releases the stream lease.
pub struct InteractionObservation {
    observer: PendingObserver,
    lease: crate::session::StreamLease,
    stop: CancellationToken,
}

impl fmt::Debug for InteractionObservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InteractionObservation")
            .finish_non_exhaustive()
    }
}

impl InteractionObservation {
    /// The complete snapshot the tail follows (taken once).
    pub fn take_snapshot(&mut self) -> Option<PendingSnapshot> {
        self.observer.take_snapshot()
    }

    /// The next delta; `None` once fenced, closed or the host stopped.
    pub async fn next(&mut self) -> Option<PendingDelta> {
        let stop = self.stop.clone();
        let fence = self.lease.token().clone();
        tokio::select! {
            biased;
            () = fence.cancelled() => None,
            delta = self.observer.next(&stop) => delta,
        }
    }

    /// Why the tail was cut off, if a queue bound ended it ([`PendingObserver::exhausted`]):
    /// the facts a stream reports instead of ending quietly.
    pub fn exhausted(&self) -> Option<crate::pending::ObserverExhausted> {
        self.observer.exhausted()
    }

    /// Ends the stream and releases its lease.
    pub fn close(mut self) {
        self.lease.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reaps until at most `left` tasks remain; bounded.
    async fn reap_until(
        monitors: &mut Monitors,
        left: usize,
    ) -> Result<(), tokio::time::error::Elapsed> {
        let work = async {
            while monitors.tasks.len() > left {
                tokio::task::yield_now().await;
                monitors.reap();
            }
        };
        tokio::time::timeout(Duration::from_secs(10), work).await
    }

    #[tokio::test]
    async fn reaping_drops_finished_monitors_keeps_running_ones_and_remembers_a_panic() {
        let mut monitors = Monitors::default();
        let (release, running) = tokio::sync::oneshot::channel::<()>();
        monitors.tasks.spawn(async move {
            let _ = running.await;
        });
        for _ in 0..3 {
            monitors.tasks.spawn(async {});
        }
        monitors.tasks.spawn(async { panic!("a monitor panics") });
        reap_until(&mut monitors, 1)
            .await
            .expect("finished monitors are reaped");
        assert!(monitors.failed, "the panic is remembered for shutdown");
        release.send(()).unwrap();
        reap_until(&mut monitors, 0)
            .await
            .expect("the last monitor is reaped once it finished");
    }
}
