//! The idempotency ledger (docs/daemon.md, "The idempotency ledger"): one committed outcome per (stable client,
//! operation id), replayed to every duplicate.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use sha2::{Digest, Sha256};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::token::is_daemon_token;

/// The most clients, and the most entries per client, a ledger may be configured for; also
/// the bound of their product.
pub const MAX_LEDGER_ENTRIES: usize = 1 << 20;
/// The largest outcome payload, in bytes.
pub const MAX_OUTCOME_BYTES: usize = 1 << 20;
/// The fixed payload of an uncertain outcome the ledger commits itself.
pub const UNCERTAIN_PAYLOAD: &[u8] = b"operation outcome uncertain";

/// SHA-256 of `bytes`: the digest a caller passes for its canonical input.
pub fn canonical_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutcomeKind {
    /// It succeeded.
    Success,
    /// It failed, and that failure is final (replayed, never re-executed).
    Failure,
    /// Nobody knows whether it took effect; never retried.
    Uncertain,
}

/// A committed outcome: a kind and at most [`MAX_OUTCOME_BYTES`] of payload.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Outcome {
    kind: OutcomeKind,
    payload: Vec<u8>,
}

impl Outcome {
    /// An outcome; `None` when the payload is over [`MAX_OUTCOME_BYTES`].
    pub fn new(kind: OutcomeKind, payload: Vec<u8>) -> Option<Outcome> {
        (payload.len() <= MAX_OUTCOME_BYTES).then_some(Outcome { kind, payload })
    }

    /// The kind.
    pub fn kind(&self) -> OutcomeKind {
        self.kind
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    fn uncertain() -> Outcome {
        Outcome {
            kind: OutcomeKind::Uncertain,
            payload: UNCERTAIN_PAYLOAD.to_vec(),
        }
    }
}

/// What an executor returns.
#[derive(Debug)]
pub enum Execution<E> {
    /// Commit this outcome and replay it to every duplicate.
    Commit(Outcome),
    /// The operation failed before any durable or visible boundary (proven by the caller):
    /// forget the entry, so the same operation id may run again. The cause goes to the
    /// owner only.
    Abandon(E),
    /// The operation failed in an unknown way: commit the uncertain outcome.
    Fail,
}

/// What [`Ledger::run`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerError<E> {
    /// The client id, operation id or kind is not a daemon token.
    InvalidInput,
    /// An entry with this key exists with another kind or digest.
    Conflict,
    /// The client count or the client's entry count is at its bound.
    CapacityExhausted,
    /// The caller's context was cancelled (before owning the entry, or while a duplicate
    /// waited).
    Cancelled,
    /// The executor panicked, failed or returned an oversized outcome: the committed outcome
    /// is uncertain, for the owner and every later duplicate.
    Executor,
    /// The executor abandoned the operation (owner only).
    Abandoned(E),
}

impl<E> fmt::Display for LedgerError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LedgerError::InvalidInput => "operation identity is invalid",
            LedgerError::Conflict => "operation conflicts with existing input",
            LedgerError::CapacityExhausted => "operation ledger capacity exhausted",
            LedgerError::Cancelled => "operation wait cancelled",
            LedgerError::Executor => "operation outcome uncertain",
            LedgerError::Abandoned(_) => "operation abandoned before commit",
        })
    }
}

impl<E: fmt::Debug> std::error::Error for LedgerError<E> {}

enum EntryState {
    Running,
    Done(Outcome, bool),
    Abandoned,
}

struct Entry {
    kind: String,
    digest: [u8; 32],
    state: Mutex<EntryState>,
    done: Notify,
}

type Key = (Arc<str>, String);

struct State {
    clients: HashMap<Arc<str>, HashMap<String, Arc<Entry>>>,
}

/// Per (stable client id, operation id) outcomes; see the module docs. Entries survive
/// reconnects; [`Ledger::forget_client`] drops a reclaimed client's entries.
pub struct Ledger {
    max_clients: usize,
    max_per_client: usize,
    state: Mutex<State>,
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ledger")
            .field("clients", &self.lock().clients.len())
            .field("max_clients", &self.max_clients)
            .field("max_per_client", &self.max_per_client)
            .finish()
    }
}

/// Polls a future with panics contained.
struct Contained<F>(Pin<Box<F>>);

impl<F: Future> Future for Contained<F> {
    type Output = Option<F::Output>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(value)) => Poll::Ready(Some(value)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    }
}

/// Removes a running entry whose owner went away without a decision (its future was
/// dropped): nothing was committed, and duplicates must not wait forever.
struct OwnerGuard<'a> {
    ledger: &'a Ledger,
    key: Key,
    entry: Arc<Entry>,
    armed: bool,
}

impl Drop for OwnerGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            // A dropped owner never learned the outcome; what it did is unknown.
            self.ledger
                .finish(&self.key, &self.entry, Some(Outcome::uncertain()), true);
        }
    }
}

impl Ledger {
    /// A ledger for `max_clients` × `max_per_client` entries (each 1..=2^20, the product
    /// at most [`MAX_LEDGER_ENTRIES`]).
    pub fn new(max_clients: usize, max_per_client: usize) -> Option<Ledger> {
        let valid = (1..=MAX_LEDGER_ENTRIES).contains(&max_clients)
            && (1..=MAX_LEDGER_ENTRIES).contains(&max_per_client)
            && max_clients.checked_mul(max_per_client)? <= MAX_LEDGER_ENTRIES;
        valid.then(|| Ledger {
            max_clients,
            max_per_client,
            state: Mutex::new(State {
                clients: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many entries `client` has.
    pub fn entries(&self, client: &str) -> usize {
        self.lock().clients.get(client).map_or(0, HashMap::len)
    }

    /// How many clients have entries.
    pub fn clients(&self) -> usize {
        self.lock().clients.len()
    }

    /// Drops every entry of `client` (a reclaimed session: its id is never issued again).
    pub fn forget_client(&self, client: &str) {
        self.lock().clients.remove(client);
    }

    fn finish(&self, key: &Key, entry: &Arc<Entry>, outcome: Option<Outcome>, failed: bool) {
        let mut state = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Some(outcome) => *state = EntryState::Done(outcome, failed),
            None => {
                *state = EntryState::Abandoned;
                let mut table = self.lock();
                if let Some(entries) = table.clients.get_mut(&key.0) {
                    if entries.get(&key.1).is_some_and(|e| Arc::ptr_eq(e, entry)) {
                        entries.remove(&key.1);
                    }
                    if entries.is_empty() {
                        table.clients.remove(&key.0);
                    }
                }
            }
        }
        drop(state);
        entry.done.notify_waiters();
    }

    /// Runs `execute` once per (client, operation id): a new key runs it (panics contained),
    /// an existing one with the same kind and digest waits for its outcome with the caller's
    /// own `ctx` (a cancelled duplicate never affects the owner). Returns the outcome and
    /// whether the caller was a duplicate.
    pub async fn run<E, F>(
        &self,
        ctx: &CancellationToken,
        client: &str,
        operation: &str,
        kind: &str,
        digest: [u8; 32],
        execute: impl FnOnce() -> F,
    ) -> Result<(Outcome, bool), LedgerError<E>>
    where
        F: Future<Output = Execution<E>>,
    {
        if !is_daemon_token(client) || !is_daemon_token(operation) || !is_daemon_token(kind) {
            return Err(LedgerError::InvalidInput);
        }
        let mut execute = Some(execute);
        loop {
            let (entry, owner, key) = {
                let mut state = self.lock();
                let existing = state
                    .clients
                    .get(client)
                    .and_then(|entries| entries.get(operation))
                    .cloned();
                match existing {
                    Some(entry) => {
                        if entry.kind != kind || entry.digest != digest {
                            return Err(LedgerError::Conflict);
                        }
                        (entry, false, None)
                    }
                    None => {
                        if ctx.is_cancelled() {
                            return Err(LedgerError::Cancelled);
                        }
                        let known = state.clients.contains_key(client);
                        if !known && state.clients.len() >= self.max_clients {
                            return Err(LedgerError::CapacityExhausted);
                        }
                        let key: Arc<str> = match state.clients.get_key_value(client) {
                            Some((key, _)) => key.clone(),
                            None => client.into(),
                        };
                        let entries = state.clients.entry(key.clone()).or_default();
                        if entries.len() >= self.max_per_client {
                            return Err(LedgerError::CapacityExhausted);
                        }
                        let entry = Arc::new(Entry {
                            kind: kind.to_owned(),
                            digest,
                            state: Mutex::new(EntryState::Running),
                            done: Notify::new(),
                        });
                        entries.insert(operation.to_owned(), entry.clone());
                        (entry, true, Some((key, operation.to_owned())))
                    }
                }
            };
            if let (true, Some(key)) = (owner, key) {
                let execute = execute.take().expect("an owner runs once");
                let mut guard = OwnerGuard {
                    ledger: self,
                    key,
                    entry: entry.clone(),
                    armed: true,
                };
                let result = match catch_unwind(AssertUnwindSafe(execute)) {
                    Ok(future) => Contained(Box::pin(future)).await,
                    Err(_) => None,
                };
                guard.armed = false;
                return match result {
                    Some(Execution::Commit(outcome)) => {
                        self.finish(&guard.key, &entry, Some(outcome.clone()), false);
                        Ok((outcome, false))
                    }
                    Some(Execution::Abandon(cause)) => {
                        self.finish(&guard.key, &entry, None, false);
                        Err(LedgerError::Abandoned(cause))
                    }
                    Some(Execution::Fail) | None => {
                        self.finish(&guard.key, &entry, Some(Outcome::uncertain()), true);
                        Err(LedgerError::Executor)
                    }
                };
            }
            // A duplicate: wait with the caller's own context.
            loop {
                let mut notified = pin!(entry.done.notified());
                notified.as_mut().enable();
                match &*entry.state.lock().unwrap_or_else(PoisonError::into_inner) {
                    EntryState::Running => {}
                    EntryState::Done(_, true) => return Err(LedgerError::Executor),
                    EntryState::Done(outcome, false) => return Ok((outcome.clone(), true)),
                    EntryState::Abandoned => break,
                }
                tokio::select! {
                    () = notified => {}
                    () = ctx.cancelled() => return Err(LedgerError::Cancelled),
                }
            }
            // Abandoned: compete to become the new owner.
            if execute.is_none() {
                return Err(LedgerError::Executor);
            }
        }
    }
}
