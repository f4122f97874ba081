//! Stable client identities, ownership epochs and the per-client commit and stream gates
//! (docs/daemon.md, "Sessions"), plus the idle rule that reclaims sessions nobody uses.
//!
//! Every change to the table happens under one mutex and wakes every waiter through one
//! [`Notify`]; waiters re-check their condition (and their ownership) after each wake-up,
//! so a waiter of an epoch that moved on fails with a stale error.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The most sessions a store may be configured for.
pub const MAX_SESSIONS: usize = 4096;
/// Mutation, reconnect and stream waiters of one client, together, at most.
pub const MAX_GATE_WAITERS: usize = 64;
/// The most stream leases one client may be configured for.
pub const MAX_STREAM_LEASES: usize = 256;
/// How long a session must be idle (see [`SessionStore`]) before it may be reclaimed.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(600);
/// How many times [`SessionStore::fresh`] draws a new client id after a collision.
pub const ID_ATTEMPTS: usize = 4;

/// The gate resource named by [`SessionError::GateCapacity`] for waiters.
pub const GATE_WAITERS: &str = "session gate waiters";
/// The gate resource named by [`SessionError::GateCapacity`] for open stream leases.
pub const STREAM_LEASES: &str = "stream leases";

/// What a session operation refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The store is closed (or its root was cancelled).
    Closed,
    /// [`SessionStore::fresh`] found the table full.
    CapacityExhausted,
    /// The session no longer owns its client: `None` for an unknown client id (no facts
    /// are invented), else the exact epochs.
    Stale(Option<StaleFacts>),
    /// A per-client gate bound was reached.
    GateCapacity {
        /// [`GATE_WAITERS`] or [`STREAM_LEASES`].
        resource: &'static str,
        /// The bound.
        limit: usize,
    },
    /// A reconnect from the last representable epoch.
    EpochOverflow,
    /// The caller's context was cancelled while waiting.
    Cancelled,
    /// The configuration is out of range.
    Configuration,
    /// The OS random source failed.
    Randomness,
}

/// The facts of a known client's stale session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StaleFacts {
    /// The client.
    pub client_id: String,
    /// The client's current epoch.
    pub expected: u64,
    /// The epoch the caller presented.
    pub observed: u64,
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Closed => f.write_str("session store closed"),
            SessionError::CapacityExhausted => f.write_str("session capacity exhausted"),
            SessionError::Stale(_) => f.write_str("stale session"),
            SessionError::GateCapacity { resource, limit } => {
                write!(
                    f,
                    "session gate capacity exhausted: {resource} (limit {limit})"
                )
            }
            SessionError::EpochOverflow => f.write_str("session epoch overflow"),
            SessionError::Cancelled => f.write_str("session wait cancelled"),
            SessionError::Configuration => f.write_str("session store configuration invalid"),
            SessionError::Randomness => f.write_str("session id generation failed"),
        }
    }
}

impl std::error::Error for SessionError {}

/// One owner of a stable client identity at one epoch. Its token is cancelled when
/// ownership moves on or the store closes. Formats without its client id (a credential of
/// sorts: whoever presents it acts for the client).
#[derive(Clone)]
pub struct Session {
    client_id: Arc<str>,
    epoch: u64,
    token: CancellationToken,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("client_id", &"<redacted>")
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl Session {
    /// The stable client id (32 lowercase hex characters).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The ownership epoch (from 1).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Cancelled when this epoch ends.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }
}

struct Client {
    epoch: u64,
    token: CancellationToken,
    mutation_active: bool,
    mutations: VecDeque<u64>,
    reconnects: VecDeque<u64>,
    stream_waiters: usize,
    streams: BTreeMap<u64, CancellationToken>,
    holds: usize,
    idle_since: Instant,
}

impl Client {
    fn waiters(&self) -> usize {
        self.mutations.len() + self.reconnects.len() + self.stream_waiters
    }

    fn is_idle(&self) -> bool {
        !self.mutation_active && self.waiters() == 0 && self.streams.is_empty() && self.holds == 0
    }

    fn touch(&mut self) {
        if self.is_idle() {
            self.idle_since = Instant::now();
        }
    }
}

struct State {
    closed: bool,
    clients: HashMap<Arc<str>, Client>,
    next_ticket: u64,
}

type ReclaimListener = Arc<dyn Fn(&str) + Send + Sync>;

struct Inner {
    root: CancellationToken,
    maximum: usize,
    idle_after: Duration,
    state: Mutex<State>,
    changed: Notify,
    listener: Mutex<Option<ReclaimListener>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update completes under the lock, so a poisoned table is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn closed(&self, state: &State) -> bool {
        state.closed || self.root.is_cancelled()
    }

    /// The client at `epoch`, or the error a caller presenting it gets.
    fn owned<'a>(
        &self,
        state: &'a mut State,
        id: &str,
        epoch: u64,
    ) -> Result<&'a mut Client, SessionError> {
        if self.closed(state) {
            return Err(SessionError::Closed);
        }
        let Some(client) = state.clients.get_mut(id) else {
            return Err(SessionError::Stale(None));
        };
        if epoch == 0 || epoch != client.epoch {
            return Err(SessionError::Stale(Some(StaleFacts {
                client_id: id.to_owned(),
                expected: client.epoch,
                observed: epoch,
            })));
        }
        Ok(client)
    }

    fn ticket(state: &mut State) -> u64 {
        state.next_ticket += 1;
        state.next_ticket
    }

    /// Waits until `check` is ready, re-checking after every change; `ctx` or the store
    /// root ends the wait.
    async fn wait<T>(
        &self,
        ctx: &CancellationToken,
        mut check: impl FnMut(&mut State) -> Option<Result<T, SessionError>>,
    ) -> Result<T, SessionError> {
        loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            if let Some(result) = check(&mut self.lock()) {
                return result;
            }
            tokio::select! {
                () = notified => {}
                () = ctx.cancelled() => return Err(SessionError::Cancelled),
                () = self.root.cancelled() => {
                    self.close();
                }
            }
        }
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        for client in state.clients.values() {
            for stream in client.streams.values() {
                stream.cancel();
            }
            client.token.cancel();
        }
        drop(state);
        self.root.cancel();
        self.changed.notify_waiters();
    }
}

/// Which queue a waiter sits in; removed from it when its future is dropped.
#[derive(Clone, Copy)]
enum Queue {
    Mutation,
    Reconnect,
    Stream,
}

struct WaiterGuard<'a> {
    inner: &'a Inner,
    client: &'a str,
    ticket: u64,
    queue: Queue,
    armed: bool,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.inner.lock();
        if let Some(client) = state.clients.get_mut(self.client) {
            match self.queue {
                Queue::Mutation => client.mutations.retain(|t| *t != self.ticket),
                Queue::Reconnect => client.reconnects.retain(|t| *t != self.ticket),
                Queue::Stream => client.stream_waiters -= 1,
            }
            client.touch();
        }
        drop(state);
        self.inner.changed.notify_waiters();
    }
}

/// The table of stable client identities.
///
/// **Idle rule** (an improvement on the original, whose table only grows): a client is
/// *idle* while it has no mutation lease, no waiter, no stream lease and no hold (the run
/// host holds a client for every run it owns and every operation in flight). A client idle
/// for at least the store's idle period (default [`DEFAULT_IDLE_AFTER`]) is reclaimed by
/// [`SessionStore::reclaim_idle`], which [`SessionStore::fresh`] calls first; its id then
/// reads as unknown (a bare stale error) and the reclaim listener is told, so the ledger can
/// forget it.
#[derive(Clone)]
pub struct SessionStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.lock();
        f.debug_struct("SessionStore")
            .field("sessions", &state.clients.len())
            .field("maximum", &self.inner.maximum)
            .field("closed", &self.inner.closed(&state))
            .finish()
    }
}

impl SessionStore {
    /// A store for at most `maximum` (1..=[`MAX_SESSIONS`]) sessions under a child of `root`.
    pub fn new(root: &CancellationToken, maximum: usize) -> Result<SessionStore, SessionError> {
        SessionStore::with_idle_after(root, maximum, DEFAULT_IDLE_AFTER)
    }

    /// As [`SessionStore::new`], with another idle period.
    pub fn with_idle_after(
        root: &CancellationToken,
        maximum: usize,
        idle_after: Duration,
    ) -> Result<SessionStore, SessionError> {
        if !(1..=MAX_SESSIONS).contains(&maximum) || root.is_cancelled() {
            return Err(SessionError::Configuration);
        }
        Ok(SessionStore {
            inner: Arc::new(Inner {
                root: root.child_token(),
                maximum,
                idle_after,
                state: Mutex::new(State {
                    closed: false,
                    clients: HashMap::new(),
                    next_ticket: 0,
                }),
                changed: Notify::new(),
                listener: Mutex::new(None),
            }),
        })
    }

    /// Calls `listener` with each reclaimed client id (outside the store's lock).
    pub fn set_reclaim_listener(&self, listener: impl Fn(&str) + Send + Sync + 'static) {
        *self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(listener));
    }

    /// How many sessions the table holds.
    pub fn len(&self) -> usize {
        self.inner.lock().clients.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new client identity (16 random bytes, hex) at epoch 1.
    pub fn fresh(&self) -> Result<Session, SessionError> {
        self.reclaim_idle();
        let mut state = self.inner.lock();
        if self.inner.closed(&state) {
            return Err(SessionError::Closed);
        }
        if state.clients.len() >= self.inner.maximum {
            return Err(SessionError::CapacityExhausted);
        }
        for _ in 0..ID_ATTEMPTS {
            let mut bytes = [0u8; 16];
            getrandom::fill(&mut bytes).map_err(|_| SessionError::Randomness)?;
            let id: Arc<str> = bytes
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
                .into();
            if state.clients.contains_key(&id) {
                continue;
            }
            let token = self.inner.root.child_token();
            state.clients.insert(
                id.clone(),
                Client {
                    epoch: 1,
                    token: token.clone(),
                    mutation_active: false,
                    mutations: VecDeque::new(),
                    reconnects: VecDeque::new(),
                    stream_waiters: 0,
                    streams: BTreeMap::new(),
                    holds: 0,
                    idle_since: Instant::now(),
                },
            );
            return Ok(Session {
                client_id: id,
                epoch: 1,
                token,
            });
        }
        Err(SessionError::Randomness)
    }

    /// Reclaims every client idle for at least the idle period; returns how many.
    pub fn reclaim_idle(&self) -> usize {
        let mut state = self.inner.lock();
        let now = Instant::now();
        let idle_after = self.inner.idle_after;
        let reclaimed: Vec<Arc<str>> = state
            .clients
            .iter()
            .filter(|(_, c)| c.is_idle() && now.duration_since(c.idle_since) >= idle_after)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &reclaimed {
            if let Some(client) = state.clients.remove(id) {
                client.token.cancel();
            }
        }
        drop(state);
        let listener = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(listener) = listener {
            for id in &reclaimed {
                listener(id);
            }
        }
        reclaimed.len()
    }

    /// Whether `session` still owns its client.
    pub fn check(&self, session: &Session) -> Result<(), SessionError> {
        self.check_epoch(&session.client_id, session.epoch)
    }

    /// Whether epoch `epoch` still owns client `id`.
    pub fn check_epoch(&self, id: &str, epoch: u64) -> Result<(), SessionError> {
        let mut state = self.inner.lock();
        self.inner.owned(&mut state, id, epoch).map(|_| ())
    }

    /// As [`SessionStore::check`], returning the current epoch's token.
    pub fn fence(&self, session: &Session) -> Result<CancellationToken, SessionError> {
        let mut state = self.inner.lock();
        self.inner
            .owned(&mut state, &session.client_id, session.epoch)
            .map(|c| c.token.clone())
    }

    /// Keeps the client from being reclaimed while the hold lives (a run it owns, an
    /// operation in flight). `None` for an unknown client.
    pub fn hold(&self, id: &str) -> Option<SessionHold> {
        let mut state = self.inner.lock();
        let client = state.clients.get_mut(id)?;
        client.holds += 1;
        Some(SessionHold {
            inner: self.inner.clone(),
            client: id.into(),
        })
    }

    /// The client's exclusive mutation commit lease. FIFO among mutations; queued reconnects
    /// go first. Dropping the future removes the waiter.
    pub async fn acquire_mutation(
        &self,
        ctx: &CancellationToken,
        session: &Session,
    ) -> Result<MutationLease, SessionError> {
        let inner = &*self.inner;
        let id = &*session.client_id;
        let ticket = {
            let mut state = inner.lock();
            let ticket = Inner::ticket(&mut state);
            let client = inner.owned(&mut state, id, session.epoch)?;
            if !client.mutation_active
                && client.mutations.is_empty()
                && client.reconnects.is_empty()
            {
                client.mutation_active = true;
                return Ok(self.mutation_lease(id));
            }
            if client.waiters() >= MAX_GATE_WAITERS {
                return Err(SessionError::GateCapacity {
                    resource: GATE_WAITERS,
                    limit: MAX_GATE_WAITERS,
                });
            }
            client.mutations.push_back(ticket);
            ticket
        };
        let mut guard = WaiterGuard {
            inner,
            client: id,
            ticket,
            queue: Queue::Mutation,
            armed: true,
        };
        let epoch = session.epoch;
        inner
            .wait(ctx, |state| {
                let client = match inner.owned(state, id, epoch) {
                    Ok(client) => client,
                    Err(error) => return Some(Err(error)),
                };
                let first = client.mutations.front() == Some(&ticket);
                if !client.mutation_active && client.reconnects.is_empty() && first {
                    client.mutations.pop_front();
                    client.mutation_active = true;
                    guard.armed = false;
                    return Some(Ok(()));
                }
                None
            })
            .await?;
        Ok(self.mutation_lease(id))
    }

    fn mutation_lease(&self, id: &str) -> MutationLease {
        MutationLease {
            inner: self.inner.clone(),
            client: id.into(),
            released: false,
        }
    }

    /// A stream lease (at most `maximum` ≤ [`MAX_STREAM_LEASES`] open per client), granted
    /// only while no reconnect is queued. Its token is a child of the epoch's token and is
    /// cancelled by a reconnect or the store's close.
    pub async fn acquire_stream(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        maximum: usize,
    ) -> Result<StreamLease, SessionError> {
        if !(1..=MAX_STREAM_LEASES).contains(&maximum) {
            return Err(SessionError::Configuration);
        }
        let inner = &*self.inner;
        let id = &*session.client_id;
        let epoch = session.epoch;
        let mut guard: Option<WaiterGuard<'_>> = None;
        let (ticket, token) = inner
            .wait(ctx, |state| {
                let ticket = Inner::ticket(state);
                let client = match inner.owned(state, id, epoch) {
                    Ok(client) => client,
                    Err(error) => return Some(Err(error)),
                };
                if client.reconnects.is_empty() {
                    if client.streams.len() >= maximum {
                        return Some(Err(SessionError::GateCapacity {
                            resource: STREAM_LEASES,
                            limit: maximum,
                        }));
                    }
                    let token = client.token.child_token();
                    client.streams.insert(ticket, token.clone());
                    return Some(Ok((ticket, token)));
                }
                if guard.is_none() {
                    if client.waiters() >= MAX_GATE_WAITERS {
                        return Some(Err(SessionError::GateCapacity {
                            resource: GATE_WAITERS,
                            limit: MAX_GATE_WAITERS,
                        }));
                    }
                    client.stream_waiters += 1;
                    guard = Some(WaiterGuard {
                        inner,
                        client: id,
                        ticket,
                        queue: Queue::Stream,
                        armed: true,
                    });
                }
                None
            })
            .await?;
        drop(guard);
        Ok(StreamLease {
            inner: self.inner.clone(),
            client: id.into(),
            ticket,
            token,
            closed: false,
        })
    }

    /// Compare-and-swap reconnect from epoch `expected`: exactly one of any number of
    /// claimants wins. In order: verify ownership; queue the intent (ahead of queued
    /// mutations); wait until it is first and no mutation commit is active; cancel every
    /// stream lease; wait until every one has closed; then advance the epoch, cancel the old
    /// epoch's token and return the new session. Dropping the future before the advance
    /// removes the intent; the old epoch keeps working.
    pub async fn reconnect(
        &self,
        ctx: &CancellationToken,
        id: &str,
        expected: u64,
    ) -> Result<Session, SessionError> {
        let inner = &*self.inner;
        let ticket = {
            let mut state = inner.lock();
            let ticket = Inner::ticket(&mut state);
            let client = inner.owned(&mut state, id, expected)?;
            if expected == u64::MAX {
                return Err(SessionError::EpochOverflow);
            }
            if client.waiters() >= MAX_GATE_WAITERS {
                return Err(SessionError::GateCapacity {
                    resource: GATE_WAITERS,
                    limit: MAX_GATE_WAITERS,
                });
            }
            client.reconnects.push_back(ticket);
            ticket
        };
        let mut guard = WaiterGuard {
            inner,
            client: id,
            ticket,
            queue: Queue::Reconnect,
            armed: true,
        };
        inner.changed.notify_waiters();
        let mut streams_cancelled = false;
        let (client_id, token) = inner
            .wait(ctx, |state| {
                let root = inner.root.clone();
                let (key, client) = match state.clients.get_key_value(id) {
                    Some((key, _)) => {
                        let key = key.clone();
                        match inner.owned(state, id, expected) {
                            Ok(client) => (key, client),
                            Err(error) => return Some(Err(error)),
                        }
                    }
                    None => return Some(Err(SessionError::Stale(None))),
                };
                if client.reconnects.front() != Some(&ticket) || client.mutation_active {
                    return None;
                }
                if !streams_cancelled {
                    streams_cancelled = true;
                    for stream in client.streams.values() {
                        stream.cancel();
                    }
                }
                if !client.streams.is_empty() {
                    return None;
                }
                client.reconnects.pop_front();
                guard.armed = false;
                client.epoch = expected + 1;
                let old = std::mem::replace(&mut client.token, root.child_token());
                old.cancel();
                client.touch();
                Some(Ok((key, client.token.clone())))
            })
            .await?;
        inner.changed.notify_waiters();
        Ok(Session {
            client_id,
            epoch: expected + 1,
            token,
        })
    }

    /// Closes the store without blocking: new work fails, every stream lease, epoch token
    /// and the root are cancelled, every waiter wakes up. Idempotent.
    pub fn close(&self) {
        self.inner.close();
    }

    /// [`SessionStore::close`], then waits (bounded by `ctx`) until no mutation lease, no
    /// waiter and no stream lease is left.
    pub async fn shutdown(&self, ctx: &CancellationToken) -> Result<(), SessionError> {
        self.close();
        loop {
            let mut notified = pin!(self.inner.changed.notified());
            notified.as_mut().enable();
            let drained = self
                .inner
                .lock()
                .clients
                .values()
                .all(|c| !c.mutation_active && c.waiters() == 0 && c.streams.is_empty());
            if drained {
                return Ok(());
            }
            tokio::select! {
                () = notified => {}
                () = ctx.cancelled() => return Err(SessionError::Cancelled),
            }
        }
    }

    #[cfg(test)]
    fn set_epoch(&self, id: &str, epoch: u64) -> Session {
        let mut state = self.inner.lock();
        let client = state.clients.get_mut(id).unwrap();
        client.epoch = epoch;
        Session {
            client_id: id.into(),
            epoch,
            token: client.token.clone(),
        }
    }
}

/// The client's exclusive mutation commit lease; released by [`MutationLease::close`] or by
/// dropping it, never by a cancellation.
pub struct MutationLease {
    inner: Arc<Inner>,
    client: Arc<str>,
    released: bool,
}

impl fmt::Debug for MutationLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutationLease")
            .field("released", &self.released)
            .finish_non_exhaustive()
    }
}

impl MutationLease {
    /// Releases the lease. Idempotent.
    pub fn close(&mut self) {
        if std::mem::replace(&mut self.released, true) {
            return;
        }
        let mut state = self.inner.lock();
        if let Some(client) = state.clients.get_mut(&*self.client) {
            client.mutation_active = false;
            client.touch();
        }
        drop(state);
        self.inner.changed.notify_waiters();
    }
}

impl Drop for MutationLease {
    fn drop(&mut self) {
        self.close();
    }
}

/// An open stream of one client; [`StreamLease::close`] (or dropping it) means "every
/// sender has joined" and releases a reconnect waiting for it.
pub struct StreamLease {
    inner: Arc<Inner>,
    client: Arc<str>,
    ticket: u64,
    token: CancellationToken,
    closed: bool,
}

impl fmt::Debug for StreamLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamLease")
            .field("cancelled", &self.token.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl StreamLease {
    /// Cancelled on reconnect, on store close, and when the epoch ends.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Releases the lease. Idempotent.
    pub fn close(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        self.token.cancel();
        let mut state = self.inner.lock();
        if let Some(client) = state.clients.get_mut(&*self.client) {
            client.streams.remove(&self.ticket);
            client.touch();
        }
        drop(state);
        self.inner.changed.notify_waiters();
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        self.close();
    }
}

/// Keeps a client from being reclaimed; see [`SessionStore::hold`].
pub struct SessionHold {
    inner: Arc<Inner>,
    client: Arc<str>,
}

impl fmt::Debug for SessionHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionHold").finish_non_exhaustive()
    }
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        let mut state = self.inner.lock();
        if let Some(client) = state.clients.get_mut(&*self.client) {
            client.holds -= 1;
            client.touch();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn epoch_overflow_does_not_change_ownership() {
        let root = CancellationToken::new();
        let store = SessionStore::new(&root, 1).unwrap();
        let session = store.fresh().unwrap();
        let last = store.set_epoch(session.client_id(), u64::MAX);
        let ctx = CancellationToken::new();
        let error = store
            .reconnect(&ctx, last.client_id(), u64::MAX)
            .await
            .unwrap_err();
        assert_eq!(error, SessionError::EpochOverflow);
        store.check(&last).unwrap();
        assert!(!last.token().is_cancelled());
    }
}
