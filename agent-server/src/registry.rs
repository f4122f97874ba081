//! The negotiated-session registry and the 1.3 initialization attempt records
//! (docs/transport.md, "What the server serves"), under one lock so an attempt commits atomically with
//! its registry entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_daemon::session::Session;
use agent_protocol::Negotiated;
use agent_protocol::pb::engine::v1::InitializeResponse;
use tokio::sync::watch;

/// The most callers waiting on one client's reconnect gate.
pub const MAX_RECONNECT_WAITERS: usize = 64;
/// The most callers waiting on one in-flight initialization attempt.
pub const MAX_ATTEMPT_WAITERS: usize = 64;
/// The resource named when the registry is full.
pub const SESSIONS_RESOURCE: &str = "negotiated sessions";
/// The resource named when a reconnect gate has too many waiters.
pub const RECONNECT_WAITERS_RESOURCE: &str = "reconnect initialization waiters";
/// The resource named when an attempt has too many waiters.
pub const ATTEMPT_WAITERS_RESOURCE: &str = "initialization attempt waiters";
/// The resource named when too many attempts are in flight.
pub const ATTEMPT_RESERVATIONS_RESOURCE: &str = "initialization attempt reservations";

/// One negotiated client.
#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) session: Session,
    pub(crate) negotiated: Negotiated,
    pub(crate) gate: Arc<Gate>,
}

/// The per-client reconnect gate: one reconnect at a time, a bounded queue. The waiter
/// count is a watch, so an observer can wait for a queue length instead of polling.
#[derive(Default)]
pub(crate) struct Gate {
    lock: Arc<tokio::sync::Mutex<()>>,
    waiters: watch::Sender<usize>,
}

/// A held gate.
pub(crate) struct GateHeld {
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

struct WaiterCount<'a>(&'a AtomicUsize);

impl Drop for WaiterCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

struct GateWaiter<'a>(&'a watch::Sender<usize>);

impl Drop for GateWaiter<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Gate {
    /// Waits for the gate; `Err(())` when [`MAX_RECONNECT_WAITERS`] already wait.
    pub(crate) async fn acquire(self: &Arc<Gate>) -> Result<GateHeld, ()> {
        let mut before = 0;
        self.waiters.send_modify(|n| {
            before = *n;
            *n += 1;
        });
        let _count = GateWaiter(&self.waiters);
        if before >= MAX_RECONNECT_WAITERS {
            return Err(());
        }
        let guard = self.lock.clone().lock_owned().await;
        Ok(GateHeld { _guard: guard })
    }

    /// How many callers wait for the gate (the holder is not counted; a refused caller
    /// counts while it is being refused), as a watch.
    pub(crate) fn waiters(&self) -> watch::Receiver<usize> {
        self.waiters.subscribe()
    }
}

enum Attempt {
    InFlight {
        fingerprint: [u8; 32],
        waiters: Arc<AtomicUsize>,
        done: watch::Receiver<()>,
        token: u64,
    },
    Committed {
        fingerprint: [u8; 32],
        response: Box<InitializeResponse>,
    },
}

#[derive(Default)]
struct Retained {
    creation: Option<Vec<u8>>,
    latest_reconnect: Option<Vec<u8>>,
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    reservations: usize,
    attempts: HashMap<Vec<u8>, Attempt>,
    pending_attempts: usize,
    retained: HashMap<String, Retained>,
    next_token: u64,
    closed: bool,
    /// Initialize transactions running now ([`Registry::begin`]).
    transactions: usize,
}

/// The registry.
pub(crate) struct Registry {
    maximum: usize,
    state: Mutex<State>,
}

/// What reserving an attempt found.
pub(crate) enum Reserve {
    /// A committed record with the same fingerprint: its exact response.
    Replay(Box<InitializeResponse>),
    /// The id was used with another fingerprint.
    Conflict,
    /// A bound was reached: `(resource, limit)`.
    Overload(&'static str, u64),
    /// The registry is closed.
    Closed,
    /// This caller owns the attempt now.
    Owner(AttemptReservation),
}

/// An owned in-flight attempt; dropping it without committing aborts it (retryable), and
/// wakes every waiter to race for ownership.
pub(crate) struct AttemptReservation {
    registry: Arc<Registry>,
    id: Vec<u8>,
    token: u64,
    committed: bool,
    _done: watch::Sender<()>,
}

impl Drop for AttemptReservation {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let mut state = self.registry.lock();
        if let Some(Attempt::InFlight { token, .. }) = state.attempts.get(&self.id)
            && *token == self.token
        {
            state.attempts.remove(&self.id);
            state.pending_attempts -= 1;
        }
    }
}

/// A reserved registry slot for a fresh session; released unless installed.
pub(crate) struct SlotReservation {
    registry: Arc<Registry>,
    installed: bool,
}

impl Drop for SlotReservation {
    fn drop(&mut self) {
        if !self.installed {
            self.registry.lock().reservations -= 1;
        }
    }
}

/// How a committed attempt created its session.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptKind {
    Fresh,
    Reconnect,
}

impl Registry {
    pub(crate) fn new(maximum: usize) -> Arc<Registry> {
        Arc::new(Registry {
            maximum,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn maximum(&self) -> usize {
        self.maximum
    }

    /// Reserves or joins the attempt `id`; waits while another caller owns it.
    pub(crate) async fn reserve_attempt(
        self: &Arc<Registry>,
        id: &[u8],
        fingerprint: [u8; 32],
    ) -> Reserve {
        loop {
            let (mut done, waiters) = {
                let mut state = self.lock();
                if state.closed {
                    return Reserve::Closed;
                }
                match state.attempts.get(id) {
                    Some(Attempt::Committed {
                        fingerprint: stored,
                        response,
                    }) => {
                        return if *stored == fingerprint {
                            Reserve::Replay(response.clone())
                        } else {
                            Reserve::Conflict
                        };
                    }
                    Some(Attempt::InFlight {
                        fingerprint: stored,
                        waiters,
                        done,
                        ..
                    }) => {
                        if *stored != fingerprint {
                            return Reserve::Conflict;
                        }
                        if waiters.fetch_add(1, Ordering::SeqCst) >= MAX_ATTEMPT_WAITERS {
                            waiters.fetch_sub(1, Ordering::SeqCst);
                            return Reserve::Overload(
                                ATTEMPT_WAITERS_RESOURCE,
                                MAX_ATTEMPT_WAITERS as u64,
                            );
                        }
                        (done.clone(), waiters.clone())
                    }
                    None => {
                        if state.pending_attempts >= self.maximum {
                            return Reserve::Overload(
                                ATTEMPT_RESERVATIONS_RESOURCE,
                                self.maximum as u64,
                            );
                        }
                        let (tx, rx) = watch::channel(());
                        state.next_token += 1;
                        let token = state.next_token;
                        state.attempts.insert(
                            id.to_vec(),
                            Attempt::InFlight {
                                fingerprint,
                                waiters: Arc::new(AtomicUsize::new(0)),
                                done: rx,
                                token,
                            },
                        );
                        state.pending_attempts += 1;
                        return Reserve::Owner(AttemptReservation {
                            registry: self.clone(),
                            id: id.to_vec(),
                            token,
                            committed: false,
                            _done: tx,
                        });
                    }
                }
            };
            let _count = WaiterCount(&waiters);
            // The owner's sender drops when it commits or aborts; then look again.
            let _ = done.changed().await;
        }
    }

    /// Reserves capacity for a fresh entry: entries + reservations < maximum.
    pub(crate) fn reserve_slot(self: &Arc<Registry>) -> Result<SlotReservation, Option<u64>> {
        let mut state = self.lock();
        if state.closed {
            return Err(None);
        }
        if state.entries.len() + state.reservations >= self.maximum {
            return Err(Some(self.maximum as u64));
        }
        state.reservations += 1;
        Ok(SlotReservation {
            registry: self.clone(),
            installed: false,
        })
    }

    /// Installs a fresh entry in its reserved slot, committing the attempt with it.
    pub(crate) fn install_fresh(
        &self,
        mut slot: SlotReservation,
        entry: Entry,
        attempt: Option<(AttemptReservation, InitializeResponse)>,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        slot.installed = true;
        state.reservations -= 1;
        let client = entry.session.client_id().to_owned();
        state.entries.insert(client.clone(), entry);
        if let Some((reservation, response)) = attempt {
            Self::commit(
                &mut state,
                reservation,
                response,
                &client,
                AttemptKind::Fresh,
            );
        }
        true
    }

    /// Replaces `client`'s entry if it is still at `expected` (registry CAS), committing
    /// the attempt with it.
    pub(crate) fn replace(
        &self,
        expected: u64,
        entry: Entry,
        attempt: Option<(AttemptReservation, InitializeResponse)>,
    ) -> bool {
        let mut state = self.lock();
        let client = entry.session.client_id().to_owned();
        if state.closed
            || state
                .entries
                .get(&client)
                .is_none_or(|e| e.session.epoch() != expected)
        {
            return false;
        }
        state.entries.insert(client.clone(), entry);
        if let Some((reservation, response)) = attempt {
            Self::commit(
                &mut state,
                reservation,
                response,
                &client,
                AttemptKind::Reconnect,
            );
        }
        true
    }

    fn commit(
        state: &mut State,
        mut reservation: AttemptReservation,
        response: InitializeResponse,
        client: &str,
        kind: AttemptKind,
    ) {
        reservation.committed = true;
        let Some(Attempt::InFlight {
            fingerprint, token, ..
        }) = state.attempts.get(&reservation.id)
        else {
            return;
        };
        if *token != reservation.token {
            return;
        }
        let fingerprint = *fingerprint;
        state.pending_attempts -= 1;
        state.attempts.insert(
            reservation.id.clone(),
            Attempt::Committed {
                fingerprint,
                response: Box::new(response),
            },
        );
        let retained = state.retained.entry(client.to_owned()).or_default();
        let evicted = match kind {
            AttemptKind::Fresh => retained.creation.replace(reservation.id.clone()),
            AttemptKind::Reconnect => retained.latest_reconnect.replace(reservation.id.clone()),
        };
        if let Some(old) = evicted
            && old != reservation.id
        {
            state.attempts.remove(&old);
        }
    }

    /// The entry of `client` (any epoch).
    pub(crate) fn entry(&self, client: &str) -> Option<Entry> {
        self.lock().entries.get(client).cloned()
    }

    /// The entry at exactly `epoch` with a live session; never says why not.
    pub(crate) fn lookup(&self, client: &str, epoch: u64) -> Option<Entry> {
        self.lock()
            .entries
            .get(client)
            .filter(|e| e.session.epoch() == epoch && !e.session.token().is_cancelled())
            .cloned()
    }

    /// Drops every entry whose session ended (the session store reclaimed it after its
    /// idle period, or the daemon is stopping), with the attempt records kept for it;
    /// returns how many. Without this a long-lived daemon would refuse fresh sessions once
    /// `maximum` clients had ever connected.
    pub(crate) fn prune_ended(&self) -> usize {
        let mut state = self.lock();
        let ended: Vec<String> = state
            .entries
            .iter()
            .filter(|(_, e)| e.session.token().is_cancelled())
            .map(|(client, _)| client.clone())
            .collect();
        for client in &ended {
            state.entries.remove(client);
            if let Some(retained) = state.retained.remove(client) {
                for id in [retained.creation, retained.latest_reconnect]
                    .into_iter()
                    .flatten()
                {
                    state.attempts.remove(&id);
                }
            }
        }
        ended.len()
    }

    /// How many entries and attempt records the registry holds.
    pub(crate) fn sizes(&self) -> (usize, usize) {
        let state = self.lock();
        (state.entries.len(), state.attempts.len())
    }

    /// Marks an Initialize transaction active until the guard drops; `None` once closed.
    pub(crate) fn begin(self: &Arc<Registry>) -> Option<Transaction> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        state.transactions += 1;
        Some(Transaction {
            registry: self.clone(),
        })
    }

    /// Refuses new work and aborts every in-flight attempt (its owner can no longer commit,
    /// and its reservation is not counted again); the entries are cleared once no
    /// Initialize transaction is active (now, or when the last one ends).
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state
            .attempts
            .retain(|_, a| matches!(a, Attempt::Committed { .. }));
        state.pending_attempts = 0;
        if state.transactions == 0 {
            Self::clear(&mut state);
        }
    }

    fn clear(state: &mut State) {
        state.entries.clear();
        state.retained.clear();
        state.attempts.clear();
    }
}

/// An active Initialize transaction: a closed registry keeps its entries until the last
/// one drops.
pub(crate) struct Transaction {
    registry: Arc<Registry>,
}

impl Drop for Transaction {
    fn drop(&mut self) {
        let mut state = self.registry.lock();
        state.transactions -= 1;
        if state.closed && state.transactions == 0 {
            Registry::clear(&mut state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn gate_refuses_past_its_waiter_bound() {
        let gate = Arc::new(Gate::default());
        let held = gate.acquire().await.unwrap();
        // The holder is not a waiter: exactly MAX_RECONNECT_WAITERS more may queue.
        let mut waiters = gate.waiters();
        assert_eq!(*waiters.borrow(), 0);
        let mut waiting = Vec::new();
        for _ in 0..MAX_RECONNECT_WAITERS {
            let gate = gate.clone();
            waiting.push(tokio::spawn(async move { gate.acquire().await.map(drop) }));
        }
        let queued = waiters.wait_for(|n| *n == MAX_RECONNECT_WAITERS);
        tokio::time::timeout(std::time::Duration::from_secs(30), queued)
            .await
            .expect("every waiter queued")
            .unwrap();
        assert!(gate.acquire().await.is_err());
        drop(held);
        for w in waiting {
            assert!(w.await.unwrap().is_ok());
        }
    }

    #[tokio::test]
    async fn close_waits_for_active_transactions_and_aborts_pending_attempts() {
        let registry = Registry::new(4);
        let root = CancellationToken::new();
        let store = agent_daemon::session::SessionStore::new(&root, 4).unwrap();
        let slot = registry.reserve_slot().unwrap();
        let session = store.fresh().unwrap();
        let entry = Entry {
            session,
            negotiated: Negotiated {
                protocol: agent_protocol::negotiate::version(1, 3, 0),
                limits: Default::default(),
                capabilities: Vec::new(),
            },
            gate: Arc::new(Gate::default()),
        };
        assert!(registry.install_fresh(slot, entry, None));
        let Reserve::Owner(pending) = registry.reserve_attempt(&[7; 16], [1; 32]).await else {
            panic!("a new attempt is owned");
        };
        let transaction = registry.begin().unwrap();
        registry.close();
        // The in-flight attempt is aborted at once; the entry stays while a transaction runs.
        assert_eq!(registry.sizes(), (1, 0));
        assert!(
            registry.begin().is_none(),
            "a closed registry starts no transaction"
        );
        drop(pending);
        assert_eq!(registry.sizes(), (1, 0));
        drop(transaction);
        assert_eq!(registry.sizes(), (0, 0));
    }
}
