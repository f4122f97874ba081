//! Pending interactions (docs/daemon.md, "Pending interactions"): the kernel's interaction broker and the
//! per-client discovery source in one.
//!
//! Each stable client has a *partition*: one `agent_core` [`PendingHub`], which already
//! gives a complete sorted snapshot and a gap-free revisioned tail under one lock. The
//! router adds what a daemon needs around it: run bindings that route every prompt of a run
//! to exactly one client, the accounting limits, observer bounds and fencing.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_core::interaction::{
    Broker, InteractionError, InteractionRequest, InteractionResponse, PendingDelta, PendingHub,
    PendingSnapshot, Scope,
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
    /// Queued deltas of one observer.
    pub const OBSERVER_QUEUE_ENTRIES: usize = 1024;
    /// Queued delta bytes of one observer.
    pub const OBSERVER_QUEUE_BYTES: usize = 4 << 20;
    /// Queued deltas of every observer (global and per client).
    pub const QUEUED_ENTRIES: usize = 1 << 20;
    /// Queued delta bytes of every observer (global and per client).
    pub const QUEUED_BYTES: usize = 64 << 20;
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
    /// Queued deltas of one observer; past it the observer is cut off.
    pub observer_queue_entries: usize,
    /// Queued delta bytes of one observer; past it the observer is cut off.
    pub observer_queue_bytes: usize,
    /// Queued deltas of every observer; each observer reserves a full queue of them.
    pub queued_entries: usize,
    /// Queued deltas of one client's observers.
    pub queued_entries_per_client: usize,
    /// Queued delta bytes of every observer; each observer reserves a full queue of them.
    pub queued_bytes: usize,
    /// Queued delta bytes of one client's observers.
    pub queued_bytes_per_client: usize,
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
            observer_queue_entries: 64,
            observer_queue_bytes: 2 * (512 << 10) + 512,
            queued_entries: 2048,
            queued_entries_per_client: 256,
            queued_bytes: 33_570_816,
            queued_bytes_per_client: 4_196_352,
        }
    }
}

impl PendingLimits {
    /// Whether every value is in range, every per-client value fits its global one, and the
    /// queue budgets fund a full observer queue for every observer they allow (globally and
    /// per client), so a subscription admitted by the observer caps can always reserve one.
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
            && within(self.observers_per_client, self.observers)
            && within(self.observer_queue_entries, hard::OBSERVER_QUEUE_ENTRIES)
            && within(self.observer_queue_bytes, hard::OBSERVER_QUEUE_BYTES)
            && within(self.queued_entries, hard::QUEUED_ENTRIES)
            && within(self.queued_entries_per_client, self.queued_entries)
            && within(self.queued_bytes, hard::QUEUED_BYTES)
            && within(self.queued_bytes_per_client, self.queued_bytes);
        let funded = |budget: usize, queue: usize, observers: usize| budget / queue >= observers;
        let ok =
            ok && funded(
                self.queued_entries,
                self.observer_queue_entries,
                self.observers,
            ) && funded(
                self.queued_entries_per_client,
                self.observer_queue_entries,
                self.observers_per_client,
            ) && funded(self.queued_bytes, self.observer_queue_bytes, self.observers)
                && funded(
                    self.queued_bytes_per_client,
                    self.observer_queue_bytes,
                    self.observers_per_client,
                );
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

/// Why an observer was cut off: the first queue bound (docs/daemon.md, "Pending interactions", in its check
/// order) that the next delta would have passed. The client recovers by subscribing again,
/// which starts with a full snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverExhausted {
    /// The exhausted resource: `pending_observer_queue_entries`,
    /// `pending_observer_queue_bytes`, `pending_observer_entries`,
    /// `pending_observer_client_entries`, `pending_observer_bytes` or
    /// `pending_observer_client_bytes`.
    pub resource: &'static str,
    /// The bound.
    pub limit: usize,
    /// What the resource would have reached with the refused delta.
    pub observed: usize,
    /// The revision of the last delta actually handed to the consumer (the snapshot's if
    /// none was).
    pub last_delivered: u64,
}

impl fmt::Display for ObserverExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pending observer exhausted: {} {} past {} (last delivered revision {})",
            self.resource, self.observed, self.limit, self.last_delivered
        )
    }
}

impl std::error::Error for ObserverExhausted {}

/// Accounted bytes of one queued delta: an opened delta's value bytes, or a closed delta's
/// run and interaction ids, plus [`DELTA_OVERHEAD_BYTES`].
pub fn delta_bytes(delta: &PendingDelta) -> usize {
    DELTA_OVERHEAD_BYTES
        + match delta {
            PendingDelta::Opened { pending, .. } => value_bytes(pending.scope(), pending.request()),
            PendingDelta::Closed { run_id, id, .. } => run_id.len() + id.len(),
        }
}

/// Whether a partition at `revision` with `pending` open calls may open one more: the
/// opening and a close for every call pending afterwards must still fit in a `u64`, so a
/// close can never run out of revisions.
pub fn revision_room(revision: u64, pending: usize) -> bool {
    u64::try_from(pending)
        .ok()
        .and_then(|pending| pending.checked_add(2))
        .and_then(|needed| revision.checked_add(needed))
        .is_some()
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

/// Queued and reserved delta accounting of a scope (everything, or one client).
#[derive(Default, Clone, Copy)]
struct Counts {
    entries: usize,
    bytes: usize,
    reserved_entries: usize,
    reserved_bytes: usize,
}

/// Queue accounting of every observer. A leaf lock: the hub's delivery calls into it under
/// the hub's lock, so nothing else is locked while it is held.
#[derive(Default)]
struct QueueBook {
    all: Counts,
    clients: HashMap<Arc<str>, Counts>,
}

impl QueueBook {
    fn client(&mut self, client: &Arc<str>) -> &mut Counts {
        self.clients.entry(client.clone()).or_default()
    }

    fn forget_idle(&mut self, client: &str) {
        if self
            .clients
            .get(client)
            .is_some_and(|c| c.entries == 0 && c.reserved_entries == 0)
        {
            self.clients.remove(client);
        }
    }
}

/// Why an observer's queue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueEnd {
    Exhausted(ObserverExhausted),
    Ended,
}

struct QueueState {
    deltas: VecDeque<(PendingDelta, usize)>,
    bytes: usize,
    /// `None` until the first delta is handed out.
    last_delivered: Option<u64>,
    end: Option<QueueEnd>,
}

/// One observer's bounded queue, filled by the hub's delivery and drained by
/// [`PendingObserver::next`].
struct ObserverQueue {
    client: Arc<str>,
    limits: PendingLimits,
    book: Arc<Mutex<QueueBook>>,
    state: Mutex<QueueState>,
    ready: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update completes under its lock, so a poisoned state is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ObserverQueue {
    /// Enqueues `delta` within every bound, or cuts the observer off; `false` ends the
    /// hub's delivery to it.
    fn offer(&self, delta: &PendingDelta) -> bool {
        let mut state = lock(&self.state);
        if state.end.is_some() {
            return false;
        }
        let bytes = delta_bytes(delta);
        let mut book = lock(&self.book);
        let client = book.clients.get(&self.client).copied().unwrap_or_default();
        let limits = &self.limits;
        let checks = [
            (
                "pending_observer_queue_entries",
                limits.observer_queue_entries,
                state.deltas.len() + 1,
            ),
            (
                "pending_observer_queue_bytes",
                limits.observer_queue_bytes,
                state.bytes + bytes,
            ),
            (
                "pending_observer_entries",
                limits.queued_entries,
                book.all.entries + 1,
            ),
            (
                "pending_observer_client_entries",
                limits.queued_entries_per_client,
                client.entries + 1,
            ),
            (
                "pending_observer_bytes",
                limits.queued_bytes,
                book.all.bytes + bytes,
            ),
            (
                "pending_observer_client_bytes",
                limits.queued_bytes_per_client,
                client.bytes + bytes,
            ),
        ];
        if let Some(&(resource, limit, observed)) =
            checks.iter().find(|(_, limit, observed)| observed > limit)
        {
            // Before any delivery the last delivered revision is the snapshot's: one before
            // the oldest delta it has seen (revisions are consecutive after it).
            let oldest = state.deltas.front().map_or(delta, |(d, _)| d).revision();
            let exhausted = ObserverExhausted {
                resource,
                limit,
                observed,
                last_delivered: state.last_delivered.unwrap_or(oldest - 1),
            };
            self.end(&mut state, &mut book, QueueEnd::Exhausted(exhausted));
            drop(book);
            drop(state);
            self.ready.notify_one();
            return false;
        }
        book.all.entries += 1;
        book.all.bytes += bytes;
        let counts = book.client(&self.client);
        counts.entries += 1;
        counts.bytes += bytes;
        state.deltas.push_back((delta.clone(), bytes));
        state.bytes += bytes;
        drop(book);
        drop(state);
        self.ready.notify_one();
        true
    }

    /// Terminates the queue once: releases its reservation and queued accounting and
    /// discards its queued deltas.
    fn end(&self, state: &mut QueueState, book: &mut QueueBook, end: QueueEnd) {
        if state.end.is_some() {
            return;
        }
        state.end = Some(end);
        let (entries, bytes) = (state.deltas.len(), state.bytes);
        let (queue_entries, queue_bytes) = (
            self.limits.observer_queue_entries,
            self.limits.observer_queue_bytes,
        );
        for counts in [
            &mut book.all,
            book.clients.entry(self.client.clone()).or_default(),
        ] {
            counts.entries -= entries;
            counts.bytes -= bytes;
            counts.reserved_entries -= queue_entries;
            counts.reserved_bytes -= queue_bytes;
        }
        book.forget_idle(&self.client);
        state.deltas.clear();
        state.bytes = 0;
    }

    fn finish(&self, end: QueueEnd) {
        let mut state = lock(&self.state);
        let mut book = lock(&self.book);
        self.end(&mut state, &mut book, end);
        drop(book);
        drop(state);
        self.ready.notify_one();
    }
}

/// Ends the queue when the hub drops its delivery (hub closed, or delivery ended).
struct Delivery(Arc<ObserverQueue>);

impl Drop for Delivery {
    fn drop(&mut self) {
        self.0.finish(QueueEnd::Ended);
    }
}

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
    queues: Arc<Mutex<QueueBook>>,
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
    scope.run_id().as_str().len()
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
            queues: Arc::default(),
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
        if state.bindings.contains_key(scope.run_id().as_str()) {
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
            scope.run_id().to_string(),
            Binding {
                client: key,
                accepting: true,
                inflight: 0,
            },
        );
        Ok(RunBinding {
            router: self.clone(),
            run_id: scope.run_id().to_string(),
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
            match state.bindings.get(scope.run_id().as_str()) {
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
        let key = state
            .partitions
            .get_key_value(client)
            .map(|(k, _)| k.clone())
            .expect("present");
        {
            // Reserve a full queue; the validated funding makes this fit whenever the
            // observer caps admit the observer, so it is checked, not relied upon.
            let mut book = lock(&self.queues);
            let (entries, bytes) = (limits.observer_queue_entries, limits.observer_queue_bytes);
            let counts = book.client(&key);
            if counts.reserved_entries + entries > limits.queued_entries_per_client
                || counts.reserved_bytes + bytes > limits.queued_bytes_per_client
            {
                book.forget_idle(&key);
                return Err(PendingError::ObserverCapacity);
            }
            if book.all.reserved_entries + entries > limits.queued_entries
                || book.all.reserved_bytes + bytes > limits.queued_bytes
            {
                book.forget_idle(&key);
                return Err(PendingError::ObserverCapacity);
            }
            let book = &mut *book;
            let client = book.clients.get_mut(&key).expect("present");
            for counts in [&mut book.all, client] {
                counts.reserved_entries += entries;
                counts.reserved_bytes += bytes;
            }
        }
        let partition = state.partitions.get_mut(client).expect("present");
        partition.observers += 1;
        let queue = Arc::new(ObserverQueue {
            client: key.clone(),
            limits,
            book: self.queues.clone(),
            state: Mutex::new(QueueState {
                deltas: VecDeque::new(),
                bytes: 0,
                last_delivered: None,
                end: None,
            }),
            ready: Notify::new(),
        });
        let delivery = Delivery(queue.clone());
        let snapshot = partition
            .hub
            .subscribe_with(move |delta| delivery.0.offer(delta));
        let snapshot_revision = snapshot.revision();
        let fence = partition.fence.clone();
        state.observers += 1;
        Ok(PendingObserver {
            router: self.clone(),
            client: key,
            snapshot: Some(snapshot),
            snapshot_revision,
            queue,
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

    /// Queued deltas and their bytes over every observer (for tests and health).
    pub fn queued(&self) -> (usize, usize) {
        let book = lock(&self.queues);
        (book.all.entries, book.all.bytes)
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
                let client = match state.bindings.get(scope.run_id().as_str()) {
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
                    || !revision_room(partition.hub.revision(), partition.pending)
                {
                    state.refused += 1;
                    return Err(InteractionError::Unavailable);
                }
                partition.pending += 1;
                partition.bytes += bytes;
                let hub = partition.hub.clone();
                state.pending += 1;
                state.bytes += bytes;
                if let Some(binding) = state.bindings.get_mut(scope.run_id().as_str()) {
                    binding.inflight += 1;
                }
                let accepted = Accepted {
                    router: self,
                    client,
                    run_id: scope.run_id().to_string(),
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
    snapshot_revision: u64,
    queue: Arc<ObserverQueue>,
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

    /// The next delta; `None` once the observer is fenced, `cancel` fires, the router
    /// closes or the observer was cut off for a queue bound ([`PendingObserver::exhausted`]
    /// says which).
    pub async fn next(&mut self, cancel: &CancellationToken) -> Option<PendingDelta> {
        loop {
            let mut ready = pin!(self.queue.ready.notified());
            ready.as_mut().enable();
            if self.fence.is_cancelled() || cancel.is_cancelled() {
                return None;
            }
            {
                let mut state = lock(&self.queue.state);
                if let Some((delta, bytes)) = state.deltas.pop_front() {
                    state.bytes -= bytes;
                    state.last_delivered = Some(delta.revision());
                    let mut book = lock(&self.queue.book);
                    let book = &mut *book;
                    let client = book.clients.entry(self.client.clone()).or_default();
                    for counts in [&mut book.all, client] {
                        counts.entries -= 1;
                        counts.bytes -= bytes;
                    }
                    return Some(delta);
                }
                if state.end.is_some() {
                    return None;
                }
            }
            tokio::select! {
                biased;
                () = self.fence.cancelled() => return None,
                () = cancel.cancelled() => return None,
                () = ready => {}
            }
        }
    }

    /// The bound this observer was cut off for, if it was.
    pub fn exhausted(&self) -> Option<ObserverExhausted> {
        match lock(&self.queue.state).end {
            Some(QueueEnd::Exhausted(exhausted)) => Some(exhausted),
            _ => None,
        }
    }

    /// The revision of the last delta handed out by [`PendingObserver::next`] (the
    /// snapshot's before the first).
    pub fn last_delivered(&self) -> u64 {
        lock(&self.queue.state)
            .last_delivered
            .unwrap_or(self.snapshot_revision)
    }
}

impl Drop for PendingObserver {
    fn drop(&mut self) {
        // Releases the queue's accounting now; the hub drops its delivery at the next delta.
        self.queue.finish(QueueEnd::Ended);
        let mut state = self.router.lock();
        state.observers -= 1;
        if let Some(partition) = state.partitions.get_mut(&self.client) {
            partition.observers -= 1;
        }
    }
}
