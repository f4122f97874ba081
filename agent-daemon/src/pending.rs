//! Pending interactions (contract section 2.5): the kernel's interaction broker and the
//! per-client discovery source in one.
//!
//! Each stable client has a *partition*: one `agent_core` [`PendingHub`], which already
//! gives a complete sorted snapshot and a gap-free revisioned tail under one lock. The
//! router adds what a daemon needs around it: run bindings that route every prompt of a run
//! to exactly one client, the accounting limits, observer bounds and fencing.

use std::collections::HashMap;
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_core::interaction::{
    Broker, InteractionError, InteractionRequest, InteractionResponse, PendingDelta, PendingHub,
    PendingSnapshot, PendingSubscription, Scope,
};
use agent_core::tool::BoxFuture;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Accounting overhead added to a pending value's bytes for its delta.
pub const DELTA_OVERHEAD_BYTES: usize = 32;

/// Hard maxima of [`PendingLimits`].
pub mod hard {
    /// Client partitions.
    pub const CLIENTS: usize = 4096;
    /// Bound runs (global and per client).
    pub const RUNS: usize = 16_384;
    /// Pending interactions (global and per client).
    pub const PENDING: usize = 4096;
    /// Pending value bytes (global and per client).
    pub const PENDING_BYTES: usize = 16 << 20;
    /// Observers (global and per client).
    pub const OBSERVERS: usize = 1024;
}

/// The router's budgets; every per-client value is at most its global one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLimits {
    /// Client partitions.
    pub clients: usize,
    /// Bound runs.
    pub runs: usize,
    /// Bound runs per client.
    pub runs_per_client: usize,
    /// Pending interactions.
    pub pending: usize,
    /// Pending interactions per client.
    pub pending_per_client: usize,
    /// Pending value bytes.
    pub pending_bytes: usize,
    /// Pending value bytes per client.
    pub pending_bytes_per_client: usize,
    /// Observers.
    pub observers: usize,
    /// Observers per client.
    pub observers_per_client: usize,
}

impl Default for PendingLimits {
    fn default() -> Self {
        PendingLimits {
            clients: 1024,
            runs: 4096,
            runs_per_client: 256,
            pending: 1024,
            pending_per_client: 128,
            pending_bytes: 16 << 20,
            pending_bytes_per_client: 768 << 10,
            observers: 32,
            observers_per_client: 4,
        }
    }
}

impl PendingLimits {
    /// Whether every value is in range and every per-client value fits its global one.
    pub fn validate(&self) -> Result<(), PendingError> {
        let within = |value: usize, max: usize| (1..=max).contains(&value);
        let ok = within(self.clients, hard::CLIENTS)
            && within(self.runs, hard::RUNS)
            && within(self.runs_per_client, self.runs)
            && within(self.pending, hard::PENDING)
            && within(self.pending_per_client, self.pending)
            && within(self.pending_bytes, hard::PENDING_BYTES)
            && within(self.pending_bytes_per_client, self.pending_bytes)
            && within(self.observers, hard::OBSERVERS)
            && within(self.observers_per_client, self.observers);
        if ok {
            Ok(())
        } else {
            Err(PendingError::Limits)
        }
    }
}

/// What the router refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingError {
    /// The limits are out of range or contradictory.
    Limits,
    /// The router is closed.
    Closed,
    /// The run already has a binding.
    AlreadyBound,
    /// A run-binding or client-partition bound was reached.
    BindingCapacity,
    /// The run is not bound to this client (or not at all: the two read the same).
    NotBound,
    /// No such interaction is pending for the run.
    NotPending,
    /// An observer bound was reached.
    ObserverCapacity,
}

impl fmt::Display for PendingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PendingError::Limits => "pending limits invalid",
            PendingError::Closed => "pending hub closed",
            PendingError::AlreadyBound => "run already bound",
            PendingError::BindingCapacity => "run binding capacity exhausted",
            PendingError::NotBound => "run not bound",
            PendingError::NotPending => "interaction not pending",
            PendingError::ObserverCapacity => "pending observer capacity exhausted",
        })
    }
}

impl std::error::Error for PendingError {}

struct Partition {
    hub: Arc<PendingHub>,
    fence: CancellationToken,
    runs: usize,
    pending: usize,
    bytes: usize,
    observers: usize,
}

struct Binding {
    client: Arc<str>,
    accepting: bool,
    inflight: usize,
}

struct State {
    closed: bool,
    partitions: HashMap<Arc<str>, Partition>,
    bindings: HashMap<String, Binding>,
    pending: usize,
    bytes: usize,
    observers: usize,
    refused: u64,
}

/// The broker and discovery source; share it as an `Arc` (the engine's broker and the run
/// host hold the same one).
pub struct PendingRouter {
    limits: PendingLimits,
    state: Mutex<State>,
    released: Notify,
}

impl fmt::Debug for PendingRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("PendingRouter")
            .field("clients", &state.partitions.len())
            .field("bindings", &state.bindings.len())
            .field("pending", &state.pending)
            .field("closed", &state.closed)
            .finish()
    }
}

/// Accounted bytes of one pending value: run id, interaction id, kind, prompt and schema.
pub fn value_bytes(scope: &Scope, request: &InteractionRequest) -> usize {
    scope.run_id().len()
        + request.id().len()
        + request.kind().len()
        + request.prompt().len()
        + request.schema().to_string().len()
}

impl PendingRouter {
    /// A router with validated limits.
    pub fn new(limits: PendingLimits) -> Result<Arc<PendingRouter>, PendingError> {
        limits.validate()?;
        Ok(Arc::new(PendingRouter {
            limits,
            state: Mutex::new(State {
                closed: false,
                partitions: HashMap::new(),
                bindings: HashMap::new(),
                pending: 0,
                bytes: 0,
                observers: 0,
                refused: 0,
            }),
            released: Notify::new(),
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limits.
    pub fn limits(&self) -> PendingLimits {
        self.limits
    }

    /// Requests refused for capacity or for a missing binding so far.
    pub fn refused(&self) -> u64 {
        self.lock().refused
    }

    fn partition<'a>(
        limits: &PendingLimits,
        state: &'a mut State,
        client: &str,
    ) -> Result<&'a mut Partition, PendingError> {
        if !state.partitions.contains_key(client) {
            if state.partitions.len() >= limits.clients {
                return Err(PendingError::BindingCapacity);
            }
            state.partitions.insert(
                client.into(),
                Partition {
                    hub: Arc::new(PendingHub::new()),
                    fence: CancellationToken::new(),
                    runs: 0,
                    pending: 0,
                    bytes: 0,
                    observers: 0,
                },
            );
        }
        Ok(state.partitions.get_mut(client).expect("inserted above"))
    }

    /// Routes every prompt of `scope`'s run to `client` until the binding is released.
    pub fn bind_run(
        self: &Arc<Self>,
        client: &str,
        scope: &Scope,
    ) -> Result<RunBinding, PendingError> {
        let mut state = self.lock();
        if state.closed {
            return Err(PendingError::Closed);
        }
        if state.bindings.contains_key(scope.run_id()) {
            return Err(PendingError::AlreadyBound);
        }
        if state.bindings.len() >= self.limits.runs {
            return Err(PendingError::BindingCapacity);
        }
        let limits = self.limits;
        let partition = Self::partition(&limits, &mut state, client)?;
        if partition.runs >= limits.runs_per_client {
            return Err(PendingError::BindingCapacity);
        }
        partition.runs += 1;
        let key = state
            .partitions
            .get_key_value(client)
            .map(|(k, _)| k.clone())
            .expect("present");
        state.bindings.insert(
            scope.run_id().to_owned(),
            Binding {
                client: key,
                accepting: true,
                inflight: 0,
            },
        );
        Ok(RunBinding {
            router: self.clone(),
            run_id: scope.run_id().to_owned(),
            released: false,
        })
    }

    /// Removes a released binding once its accepted requests have completed.
    fn reclaim(&self, state: &mut State, run_id: &str) {
        let done = state
            .bindings
            .get(run_id)
            .is_some_and(|b| !b.accepting && b.inflight == 0);
        if done && let Some(binding) = state.bindings.remove(run_id) {
            if let Some(partition) = state.partitions.get_mut(&binding.client) {
                partition.runs -= 1;
            }
            self.released.notify_waiters();
        }
    }

    /// Answers a pending prompt of a run bound to `client`. Another client's run reads as
    /// [`PendingError::NotBound`], exactly like an unknown run.
    pub fn respond(
        &self,
        client: &str,
        scope: &Scope,
        response: InteractionResponse,
    ) -> Result<(), PendingError> {
        let hub = {
            let state = self.lock();
            if state.closed {
                return Err(PendingError::Closed);
            }
            match state.bindings.get(scope.run_id()) {
                Some(binding) if &*binding.client == client => {}
                _ => return Err(PendingError::NotBound),
            }
            state.partitions.get(client).map(|p| p.hub.clone())
        };
        let hub = hub.ok_or(PendingError::NotBound)?;
        hub.respond(scope, response).map_err(|error| match error {
            InteractionError::Closed => PendingError::Closed,
            _ => PendingError::NotPending,
        })
    }

    /// The client's complete pending snapshot, sorted by (run id, interaction id); an
    /// unknown client gets revision 0 and nothing. Allocates no watcher.
    pub fn snapshot(&self, client: &str) -> PendingSnapshot {
        let hub = self.lock().partitions.get(client).map(|p| p.hub.clone());
        hub.unwrap_or_default().pending()
    }

    /// Atomically, the client's complete snapshot at revision R and every later delta.
    pub fn subscribe(self: &Arc<Self>, client: &str) -> Result<PendingObserver, PendingError> {
        let mut state = self.lock();
        if state.closed {
            return Err(PendingError::Closed);
        }
        if state.observers >= self.limits.observers {
            return Err(PendingError::ObserverCapacity);
        }
        let limits = self.limits;
        let partition = Self::partition(&limits, &mut state, client)?;
        if partition.observers >= limits.observers_per_client {
            return Err(PendingError::ObserverCapacity);
        }
        partition.observers += 1;
        let (snapshot, deltas) = partition.hub.subscribe();
        let fence = partition.fence.clone();
        state.observers += 1;
        Ok(PendingObserver {
            router: self.clone(),
            client: client.into(),
            snapshot: Some(snapshot),
            deltas,
            fence,
        })
    }

    /// Ends every observer of `client`; pending calls and revisions are kept.
    pub fn fence_observers(&self, client: &str) {
        if let Some(partition) = self.lock().partitions.get_mut(client) {
            std::mem::take(&mut partition.fence).cancel();
        }
    }

    /// Forgets an idle client's partition (a reclaimed session); refused while it has
    /// bound runs or observers.
    pub fn forget_client(&self, client: &str) -> bool {
        let mut state = self.lock();
        let idle = state
            .partitions
            .get(client)
            .is_some_and(|p| p.runs == 0 && p.observers == 0 && p.pending == 0);
        if idle {
            state.partitions.remove(client);
        }
        idle
    }

    /// Closes the router: bindings stop accepting, every pending call fails as closed
    /// (a closed delta each), observers end. Idempotent.
    pub fn close(&self) {
        let hubs: Vec<(Arc<PendingHub>, CancellationToken)> = {
            let mut state = self.lock();
            state.closed = true;
            for binding in state.bindings.values_mut() {
                binding.accepting = false;
            }
            let runs: Vec<String> = state.bindings.keys().cloned().collect();
            for run in runs {
                self.reclaim(&mut state, &run);
            }
            state
                .partitions
                .values()
                .map(|p| (p.hub.clone(), p.fence.clone()))
                .collect()
        };
        for (hub, fence) in hubs {
            hub.close();
            fence.cancel();
        }
    }

    /// Bound runs, pending interactions and observers (for tests and health).
    pub fn counts(&self) -> (usize, usize, usize) {
        let state = self.lock();
        (state.bindings.len(), state.pending, state.observers)
    }
}

/// Releases a request's accounting when it completes (or its future is dropped).
struct Accepted<'a> {
    router: &'a PendingRouter,
    client: Arc<str>,
    run_id: String,
    bytes: usize,
}

impl Drop for Accepted<'_> {
    fn drop(&mut self) {
        let mut state = self.router.lock();
        state.pending -= 1;
        state.bytes -= self.bytes;
        if let Some(partition) = state.partitions.get_mut(&self.client) {
            partition.pending -= 1;
            partition.bytes -= self.bytes;
        }
        if let Some(binding) = state.bindings.get_mut(&self.run_id) {
            binding.inflight -= 1;
        }
        let run_id = self.run_id.clone();
        self.router.reclaim(&mut state, &run_id);
    }
}

impl Broker for PendingRouter {
    /// Routes the prompt to the client the run is bound to, within the budgets; a run
    /// without an accepting binding, or over a budget, is [`InteractionError::Unavailable`].
    fn request<'a>(
        &'a self,
        scope: &'a Scope,
        request: &'a InteractionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(InteractionError::Cancelled);
            }
            let bytes = value_bytes(scope, request);
            let (hub, accepted) = {
                let mut state = self.lock();
                if state.closed {
                    return Err(InteractionError::Closed);
                }
                let client = match state.bindings.get(scope.run_id()) {
                    Some(binding) if binding.accepting => binding.client.clone(),
                    _ => {
                        state.refused += 1;
                        return Err(InteractionError::Unavailable);
                    }
                };
                let limits = self.limits;
                let global_full =
                    state.pending >= limits.pending || state.bytes + bytes > limits.pending_bytes;
                let Some(partition) = state.partitions.get_mut(&client) else {
                    return Err(InteractionError::Unavailable);
                };
                if global_full
                    || partition.pending >= limits.pending_per_client
                    || partition.bytes + bytes > limits.pending_bytes_per_client
                {
                    state.refused += 1;
                    return Err(InteractionError::Unavailable);
                }
                partition.pending += 1;
                partition.bytes += bytes;
                let hub = partition.hub.clone();
                state.pending += 1;
                state.bytes += bytes;
                if let Some(binding) = state.bindings.get_mut(scope.run_id()) {
                    binding.inflight += 1;
                }
                let accepted = Accepted {
                    router: self,
                    client,
                    run_id: scope.run_id().to_owned(),
                    bytes,
                };
                (hub, accepted)
            };
            let result = hub.request(scope, request, cancel).await;
            drop(accepted);
            result
        })
    }
}

/// A run's route to one client. [`RunBinding::release`] stops new requests; the capacity is
/// reclaimed, and [`RunBinding::wait_released`] returns, once every request accepted before
/// has completed. Dropping it releases it.
pub struct RunBinding {
    router: Arc<PendingRouter>,
    run_id: String,
    released: bool,
}

impl fmt::Debug for RunBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunBinding")
            .field("run_id", &self.run_id)
            .field("released", &self.released)
            .finish()
    }
}

impl RunBinding {
    /// The bound run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Stops new requests. Idempotent.
    pub fn release(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let mut state = self.router.lock();
        if let Some(binding) = state.bindings.get_mut(&self.run_id) {
            binding.accepting = false;
        }
        self.router.reclaim(&mut state, &self.run_id);
    }

    /// Releases the binding and waits until its accepted requests have completed.
    pub async fn wait_released(&mut self) {
        self.release();
        loop {
            let mut notified = pin!(self.router.released.notified());
            notified.as_mut().enable();
            if !self.router.lock().bindings.contains_key(&self.run_id) {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for RunBinding {
    fn drop(&mut self) {
        self.release();
    }
}

/// One client's pending discovery: the complete snapshot first, then the gap-free tail.
pub struct PendingObserver {
    router: Arc<PendingRouter>,
    client: Arc<str>,
    snapshot: Option<PendingSnapshot>,
    deltas: PendingSubscription,
    fence: CancellationToken,
}

impl fmt::Debug for PendingObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingObserver")
            .field("fenced", &self.fence.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl PendingObserver {
    /// The snapshot the tail follows (taken once).
    pub fn take_snapshot(&mut self) -> Option<PendingSnapshot> {
        self.snapshot.take()
    }

    /// The next delta; `None` once the observer is fenced, `cancel` fires or the router
    /// closes.
    pub async fn next(&mut self, cancel: &CancellationToken) -> Option<PendingDelta> {
        tokio::select! {
            biased;
            () = self.fence.cancelled() => None,
            () = cancel.cancelled() => None,
            delta = self.deltas.next() => delta,
        }
    }
}

impl Drop for PendingObserver {
    fn drop(&mut self) {
        let mut state = self.router.lock();
        state.observers -= 1;
        if let Some(partition) = state.partitions.get_mut(&self.client) {
            partition.observers -= 1;
        }
    }
}
