//! The run host (docs/daemon.md, "The run host"): composes the engine, the run authority, sessions,
//! the ledger and the pending router. `docs/daemon.md` draws every ordering.
//!
//! This file holds the configuration, the budgets, the shared state and its bookkeeping;
//! each operation lives in the sibling file named for its concern.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agent_authority::{ActiveRun, AuthorityError, ErrorKind, Lifecycle, SnapshotEnvelope, Store};
use agent_core::agent::{Engine, Run, RunStatus, SnapshotStatus};
use agent_core::interaction::Scope;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::definition::DefinitionSet;
use crate::error::{Class, Failure, HostError, abandon, authority, commit};
use crate::ledger::Ledger;
use crate::pending::{PendingRouter, RunBinding};
use crate::session::{MAX_STREAM_LEASES, SessionStore};

mod control;
mod health;
mod monitor;
mod mutation;
mod observe;
mod shutdown;
mod start;
mod suspend;

pub use health::{Degradation, Description, HealthReason, HealthSource, HealthStatus};
pub use mutation::Success;
pub use observe::{EventObservation, InteractionObservation, TailLag};
pub use start::StartRequest;

use monitor::Monitors;

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

    /// A failed durable authority write (a start's ACTIVE record, a suspension's snapshot, a
    /// local resume's ACTIVE record) as the operation's failure, with the health degradation
    /// it implies. Refusals before anything durable (an import's preparation) map through
    /// [`authority`] alone: they say nothing about the host's health.
    fn durable_failure(&self, error: &AuthorityError) -> Failure {
        self.degrade_authority(error.kind());
        authority(error)
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
}
