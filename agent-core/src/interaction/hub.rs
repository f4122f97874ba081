//! The [`PendingHub`]: a [`Broker`] that holds each prompt until a host answers it, lists what
//! is pending and streams every change as revisioned deltas.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Broker, InteractionError, InteractionRequest, InteractionResponse, Scope};
use crate::future::BoxFuture;

/// One pending interaction: the run that asked, the request, and the revision of the
/// [`PendingDelta::Opened`] that announced it (unique within a hub).
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    scope: Scope,
    request: Arc<InteractionRequest>,
    opened_revision: u64,
}

impl Pending {
    /// The run that asked; pass it to [`PendingHub::respond`] or [`PendingHub::decline`].
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// What was asked.
    pub fn request(&self) -> &InteractionRequest {
        &self.request
    }

    /// The revision at which it was opened.
    pub fn opened_revision(&self) -> u64 {
        self.opened_revision
    }
}

/// Every pending interaction, sorted by (run id, id), as of `revision`.
///
/// ```
/// use agent_core::interaction::PendingHub;
///
/// let snapshot = PendingHub::new().pending();
/// assert_eq!((snapshot.revision(), snapshot.pending().len()), (0, 0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PendingSnapshot {
    revision: u64,
    pending: Vec<Pending>,
}

impl PendingSnapshot {
    /// The revision this snapshot reflects: the number of deltas published before it.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The pending interactions, sorted by (run id, id).
    pub fn pending(&self) -> &[Pending] {
        &self.pending
    }
}

/// One change to the set of pending interactions. Revisions increase by exactly one per
/// delta, starting at 1 (an empty, new hub is at revision 0).
#[derive(Debug, Clone, PartialEq)]
pub enum PendingDelta {
    /// An interaction became pending.
    Opened {
        /// This delta's revision.
        revision: u64,
        /// The new pending interaction.
        pending: Pending,
    },
    /// An interaction stopped being pending.
    Closed {
        /// This delta's revision.
        revision: u64,
        /// The run that asked.
        run_id: Arc<str>,
        /// The request's id.
        id: String,
        /// Why it ended.
        reason: CloseReason,
    },
}

impl PendingDelta {
    /// This delta's revision.
    pub fn revision(&self) -> u64 {
        match self {
            PendingDelta::Opened { revision, .. } | PendingDelta::Closed { revision, .. } => {
                *revision
            }
        }
    }
}

/// Why an interaction stopped being pending.
///
/// ```
/// use agent_core::interaction::CloseReason;
///
/// assert_eq!(serde_json::to_string(&CloseReason::Answered)?, "\"answered\"");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// [`PendingHub::respond`] answered it.
    Answered,
    /// [`PendingHub::decline`] declined it.
    Declined,
    /// The requester was cancelled or its future dropped.
    Cancelled,
    /// [`PendingHub::close`] closed the hub.
    Closed,
}

/// The deltas after a snapshot, from [`PendingHub::subscribe`].
///
/// The queue is unbounded: a host must keep draining it (or drop the subscription), or it
/// grows with every delta.
///
/// ```
/// use agent_core::interaction::PendingHub;
///
/// let hub = PendingHub::new();
/// let (_, mut deltas) = hub.subscribe();
/// assert_eq!(deltas.try_next(), None); // nothing happened yet
/// ```
#[derive(Debug)]
pub struct PendingSubscription {
    deltas: mpsc::UnboundedReceiver<PendingDelta>,
}

impl PendingSubscription {
    /// The next delta, waiting for one; `None` once the hub is closed and every queued
    /// delta was delivered.
    pub async fn next(&mut self) -> Option<PendingDelta> {
        self.deltas.recv().await
    }

    /// The next delta if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<PendingDelta> {
        self.deltas.try_recv().ok()
    }
}

/// How a pending entry was resolved by the hub.
enum Outcome {
    Answered(InteractionResponse),
    Declined,
    Closed,
}

type Key = (Arc<str>, String);

struct Entry {
    pending: Pending,
    answer: oneshot::Sender<Outcome>,
}

#[derive(Default)]
struct State {
    revision: u64,
    closed: bool,
    entries: BTreeMap<Key, Entry>,
    subscribers: Vec<Subscriber>,
}

/// Where a subscription's deltas go: the hub's own unbounded queue, or a host's sink.
enum Subscriber {
    Queue(mpsc::UnboundedSender<PendingDelta>),
    Sink(Box<dyn FnMut(&PendingDelta) -> bool + Send>),
}

impl Subscriber {
    /// Hands `delta` over; `false` ends the subscription.
    fn deliver(&mut self, delta: &PendingDelta) -> bool {
        match self {
            Subscriber::Queue(tx) => tx.send(delta.clone()).is_ok(),
            Subscriber::Sink(sink) => sink(delta),
        }
    }
}

impl State {
    fn next_revision(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    fn publish(&mut self, delta: PendingDelta) {
        self.subscribers
            .retain_mut(|subscriber| subscriber.deliver(&delta));
    }

    fn publish_closed(&mut self, (run_id, id): Key, reason: CloseReason) {
        let revision = self.next_revision();
        self.publish(PendingDelta::Closed {
            revision,
            run_id,
            id,
            reason,
        });
    }

    fn snapshot(&self) -> PendingSnapshot {
        PendingSnapshot {
            revision: self.revision,
            pending: self.entries.values().map(|e| e.pending.clone()).collect(),
        }
    }
}

/// The in-process [`Broker`] a host or UI uses: every request waits as a [`Pending`] entry
/// until the host answers, declines, the requester is cancelled, or the hub is closed.
///
/// Share it through an `Arc`. Every change is one delta published under a single lock, so
/// [`PendingHub::subscribe`] sees a consistent snapshot and then every later change exactly
/// once, in order. A request's future registers its entry when first polled.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::interaction::*;
/// use serde_json::json;
/// use tokio_util::sync::CancellationToken;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let hub = Arc::new(PendingHub::new());
/// let (snapshot, mut deltas) = hub.subscribe();
/// assert_eq!((snapshot.revision(), snapshot.pending().len()), (0, 0));
/// let agent = tokio::spawn({
///     let hub = Arc::clone(&hub);
///     async move {
///         let schema = json!({ "type": "boolean" });
///         let request = InteractionRequest::new("w1", "confirm", "May I write a.md?", schema)?;
///         hub.request(&Scope::new("run-1")?, &request, &CancellationToken::new()).await
///     }
/// });
///
/// // The host sees the prompt and answers it for the run that asked.
/// let Some(PendingDelta::Opened { pending, .. }) = deltas.next().await else { panic!() };
/// assert_eq!(pending.request().prompt(), "May I write a.md?");
/// assert_eq!(hub.pending().pending(), [pending.clone()]);
/// // Another run can neither answer it nor learn that it exists.
/// let other = hub.decline(&Scope::new("run-2")?, "w1");
/// assert_eq!(other, Err(InteractionError::NotPending { id: "w1".into() }));
/// hub.respond(pending.scope(), InteractionResponse::new("w1", json!(true))?)?;
/// assert_eq!(agent.await??.value(), &json!(true));
///
/// hub.close(); // would fail pending requests with `Closed`; ends subscriptions
/// assert_eq!(deltas.next().await.map(|delta| delta.revision()), Some(2)); // answered
/// assert_eq!(deltas.next().await, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct PendingHub {
    state: Mutex<State>,
}

impl PendingHub {
    /// An empty, open hub at revision 0.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update completes under the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A complete snapshot of every pending interaction, sorted by (run id, id), with the
    /// revision it reflects. See [`PendingHub`] for an example.
    pub fn pending(&self) -> PendingSnapshot {
        self.lock().snapshot()
    }

    /// Atomically, the complete snapshot at some revision R and a subscription yielding
    /// exactly the deltas with revision greater than R, in order, without gaps or
    /// duplicates. After [`PendingHub::close`] the subscription yields nothing.
    /// See [`PendingSubscription`] on draining.
    pub fn subscribe(&self) -> (PendingSnapshot, PendingSubscription) {
        let mut state = self.lock();
        let (tx, deltas) = mpsc::unbounded_channel();
        if !state.closed {
            state.subscribers.push(Subscriber::Queue(tx));
        }
        (state.snapshot(), PendingSubscription { deltas })
    }

    /// Like [`PendingHub::subscribe`], but every later delta is handed to `sink`, in
    /// revision order and under the hub's lock, so a host can bound and account its own
    /// queue. The sink returns `false` to end the subscription; it is dropped then, on
    /// [`PendingHub::close`], or at once if the hub is already closed. It must not call
    /// back into this hub.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use agent_core::interaction::PendingHub;
    ///
    /// let hub = PendingHub::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let sink = Arc::clone(&seen);
    /// let snapshot = hub.subscribe_with(move |delta| {
    ///     sink.lock().unwrap().push(delta.revision());
    ///     true
    /// });
    /// assert_eq!(snapshot.revision(), 0);
    /// hub.close();
    /// assert!(seen.lock().unwrap().is_empty()); // nothing was pending
    /// ```
    pub fn subscribe_with(
        &self,
        sink: impl FnMut(&PendingDelta) -> bool + Send + 'static,
    ) -> PendingSnapshot {
        let mut state = self.lock();
        if !state.closed {
            state.subscribers.push(Subscriber::Sink(Box::new(sink)));
        }
        state.snapshot()
    }

    /// The current revision: the number of deltas published so far.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Answers the prompt `response.id()` of the run `scope`. Fails with
    /// [`InteractionError::NotPending`] if that run has no such pending prompt, including when
    /// another run has one (nothing about other runs is revealed), and with
    /// [`InteractionError::Closed`] after [`PendingHub::close`].
    pub fn respond(
        &self,
        scope: &Scope,
        response: InteractionResponse,
    ) -> Result<(), InteractionError> {
        self.resolve(scope, response.id.clone(), Outcome::Answered(response))
    }

    /// Declines the prompt `id` of the run `scope`: its requester fails with
    /// [`InteractionError::Declined`]. Errors as for [`PendingHub::respond`].
    pub fn decline(&self, scope: &Scope, id: &str) -> Result<(), InteractionError> {
        self.resolve(scope, id.to_owned(), Outcome::Declined)
    }

    fn resolve(&self, scope: &Scope, id: String, outcome: Outcome) -> Result<(), InteractionError> {
        let reason = match outcome {
            Outcome::Answered(_) => CloseReason::Answered,
            Outcome::Declined => CloseReason::Declined,
            Outcome::Closed => CloseReason::Closed,
        };
        let mut state = self.lock();
        if state.closed {
            return Err(InteractionError::Closed);
        }
        let key = (Arc::clone(scope.run_id.as_arc()), id);
        let Some(entry) = state.entries.remove(&key) else {
            return Err(InteractionError::NotPending { id: key.1 });
        };
        if entry.answer.send(outcome).is_ok() {
            state.publish_closed(key, reason);
            return Ok(());
        }
        // The requester's future is being dropped; its guard will find nothing to remove.
        let id = key.1.clone();
        state.publish_closed(key, CloseReason::Cancelled);
        Err(InteractionError::NotPending { id })
    }

    /// Closes the hub: every pending request fails with [`InteractionError::Closed`] (each
    /// with a [`CloseReason::Closed`] delta), new requests fail the same way, and every
    /// subscription ends once its queued deltas are delivered. Idempotent.
    pub fn close(&self) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.closed = true;
        for (key, entry) in std::mem::take(&mut state.entries) {
            // A dropped requester is fine: it is gone either way.
            let _ = entry.answer.send(Outcome::Closed);
            state.publish_closed(key, CloseReason::Closed);
        }
        state.subscribers.clear();
    }

    fn open(
        &self,
        scope: &Scope,
        request: &InteractionRequest,
    ) -> Result<(Ticket<'_>, oneshot::Receiver<Outcome>), InteractionError> {
        let mut state = self.lock();
        if state.closed {
            return Err(InteractionError::Closed);
        }
        let key = (Arc::clone(scope.run_id.as_arc()), request.id.clone());
        if state.entries.contains_key(&key) {
            return Err(InteractionError::DuplicateId {
                id: request.id.clone(),
            });
        }
        let revision = state.next_revision();
        let request = Arc::new(request.clone());
        let (scope, opened_revision) = (scope.clone(), revision);
        let pending = Pending {
            scope,
            request,
            opened_revision,
        };
        let (answer, receiver) = oneshot::channel();
        let entry = Entry {
            pending: pending.clone(),
            answer,
        };
        state.entries.insert(key.clone(), entry);
        state.publish(PendingDelta::Opened { revision, pending });
        Ok((
            Ticket {
                hub: self,
                key: Some(key),
                serial: revision,
            },
            receiver,
        ))
    }
}

impl fmt::Debug for PendingHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("PendingHub")
            .field("revision", &state.revision)
            .field("pending", &state.entries.len())
            .field("subscribers", &state.subscribers.len())
            .field("closed", &state.closed)
            .finish()
    }
}

/// Removes a requester's own entry (by its opening revision) unless disarmed: on
/// cancellation and when the request future is dropped.
struct Ticket<'a> {
    hub: &'a PendingHub,
    key: Option<Key>,
    serial: u64,
}

impl Ticket<'_> {
    /// Removes the entry with a [`CloseReason::Cancelled`] delta; false if it was already
    /// resolved by someone else.
    fn withdraw(&mut self) -> bool {
        let Some(key) = self.key.take() else {
            return false;
        };
        let mut state = self.hub.lock();
        let ours = state.entries.get(&key);
        if ours.is_none_or(|e| e.pending.opened_revision != self.serial) {
            return false;
        }
        state.entries.remove(&key);
        state.publish_closed(key, CloseReason::Cancelled);
        true
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.withdraw();
    }
}

impl Broker for PendingHub {
    /// Registers a pending entry and waits for [`PendingHub::respond`],
    /// [`PendingHub::decline`], `cancel` or [`PendingHub::close`]. Fails with
    /// [`InteractionError::DuplicateId`] if the run already has a pending prompt with this id.
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
            let (mut ticket, mut answer) = self.open(scope, request)?;
            let outcome = tokio::select! {
                biased;
                outcome = &mut answer => outcome.map_err(|_| InteractionError::Closed),
                () = cancel.cancelled() => {
                    if ticket.withdraw() {
                        return Err(InteractionError::Cancelled);
                    }
                    // Resolved under the lock just before we got it: report that outcome.
                    answer.try_recv().map_err(|_| InteractionError::Cancelled)
                }
            };
            ticket.key = None;
            match outcome? {
                Outcome::Answered(response) => Ok(response),
                Outcome::Declined => Err(InteractionError::Declined {
                    id: request.id.clone(),
                }),
                Outcome::Closed => Err(InteractionError::Closed),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::btree_map;
    use std::task::{Context, Poll, Waker};

    type Reply = Result<InteractionResponse, InteractionError>;
    use CloseReason::{Answered, Cancelled, Closed, Declined};

    fn poll_once<T>(future: &mut BoxFuture<'_, T>) -> Poll<T> {
        future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
    }

    fn scope(run: &str) -> Scope {
        Scope::new(run).unwrap()
    }

    fn answer(id: &str) -> InteractionResponse {
        InteractionResponse::new(id, json!(id)).unwrap()
    }

    fn not_pending(id: &str) -> Result<(), InteractionError> {
        Err(InteractionError::NotPending { id: id.into() })
    }

    /// A request future of `run` for `id` (registers when first polled).
    fn ask(
        hub: &Arc<PendingHub>,
        run: &str,
        id: &str,
        cancel: &CancellationToken,
    ) -> BoxFuture<'static, Reply> {
        let (hub, scope, cancel) = (Arc::clone(hub), scope(run), cancel.clone());
        let request = InteractionRequest::new(id, "confirm", "May I?", json!({})).unwrap();
        Box::pin(async move { hub.request(&scope, &request, &cancel).await })
    }

    /// Every queued delta: `None` for an opening, the reason for a closing.
    fn drain(deltas: &mut PendingSubscription) -> Vec<Option<CloseReason>> {
        std::iter::from_fn(|| deltas.try_next())
            .map(|delta| match delta {
                PendingDelta::Opened { .. } => None,
                PendingDelta::Closed { reason, .. } => Some(reason),
            })
            .collect()
    }

    /// Folds every queued delta over `snapshot`, checking revisions are consecutive.
    fn replay(snapshot: PendingSnapshot, deltas: &mut PendingSubscription) -> PendingSnapshot {
        let mut revision = snapshot.revision;
        let key = |p: &Pending| (p.scope.run_id().to_string(), p.request.id.clone());
        let mut map: BTreeMap<_, _> = snapshot.pending.into_iter().map(|p| (key(&p), p)).collect();
        while let Some(delta) = deltas.try_next() {
            assert_eq!(delta.revision(), revision + 1);
            revision = delta.revision();
            match delta {
                PendingDelta::Opened { pending, .. } => {
                    assert!(map.insert(key(&pending), pending).is_none());
                }
                PendingDelta::Closed { run_id, id, .. } => {
                    assert!(map.remove(&(run_id.to_string(), id)).is_some());
                }
            }
        }
        let pending = map.into_values().collect();
        PendingSnapshot { revision, pending }
    }

    #[tokio::test]
    async fn a_sink_sees_every_delta_in_order_until_it_declines() {
        use std::sync::Mutex as StdMutex;
        let hub = Arc::new(PendingHub::new());
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let (sink, limit) = (Arc::clone(&seen), 3);
        let snapshot = hub.subscribe_with(move |delta| {
            let mut seen = sink.lock().unwrap();
            seen.push(delta.revision());
            seen.len() < limit
        });
        assert_eq!(snapshot.revision(), 0);
        let (_, mut queue) = hub.subscribe();
        for id in ["w1", "w2", "w3"] {
            let mut request = ask(&hub, "run-1", id, &CancellationToken::new());
            assert!(poll_once(&mut request).is_pending());
            hub.respond(&scope("run-1"), answer(id)).unwrap();
            assert_eq!(request.await, Ok(answer(id)));
        }
        // The sink declined after its third delta and saw nothing more; the queue saw all.
        assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
        assert_eq!(drain(&mut queue).len(), 6);
        assert_eq!(hub.revision(), 6);
        // On close the hub drops a live sink; a sink after close is dropped at once.
        let dropped = Arc::new(());
        let held = Arc::clone(&dropped);
        hub.subscribe_with(move |_| {
            let _ = &held;
            true
        });
        assert_eq!(Arc::strong_count(&dropped), 2);
        hub.close();
        assert_eq!(Arc::strong_count(&dropped), 1);
        let held = Arc::clone(&dropped);
        hub.subscribe_with(move |_| {
            let _ = &held;
            true
        });
        assert_eq!(Arc::strong_count(&dropped), 1);
    }

    #[tokio::test]
    async fn respond_requires_the_owning_run() {
        let hub = Arc::new(PendingHub::new());
        let (_, mut deltas) = hub.subscribe();
        let mut request = ask(&hub, "run-1", "w1", &CancellationToken::new());
        assert!(poll_once(&mut request).is_pending());
        assert_eq!(
            hub.respond(&scope("run-2"), answer("w1")),
            not_pending("w1")
        );
        assert_eq!(hub.decline(&scope("run-2"), "w1"), not_pending("w1"));
        assert!(poll_once(&mut request).is_pending());
        assert_eq!(hub.pending().pending()[0].scope(), &scope("run-1"));

        hub.respond(&scope("run-1"), answer("w1")).unwrap();
        assert_eq!(request.await, Ok(answer("w1")));
        assert_eq!(drain(&mut deltas), [None, Some(Answered)]);
        assert_eq!(
            hub.pending(),
            PendingSnapshot {
                revision: 2,
                pending: vec![]
            }
        );
        assert_eq!(
            hub.respond(&scope("run-1"), answer("w1")),
            not_pending("w1")
        );
    }

    #[tokio::test]
    async fn decline_and_cancel_end_the_request() {
        let hub = Arc::new(PendingHub::new());
        let (_, mut deltas) = hub.subscribe();
        let cancel = CancellationToken::new();
        let declined = tokio::spawn(ask(&hub, "run-1", "w1", &cancel));
        assert_eq!(deltas.next().await.map(|d| d.revision()), Some(1));
        hub.decline(&scope("run-1"), "w1").unwrap();
        let id = "w1".to_owned();
        let result = declined.await.unwrap();
        assert_eq!(result, Err(InteractionError::Declined { id }));
        assert_eq!(drain(&mut deltas), [Some(Declined)]);

        let cancelled = tokio::spawn(ask(&hub, "run-1", "w2", &cancel));
        assert_eq!(deltas.next().await.map(|d| d.revision()), Some(3));
        cancel.cancel();
        assert_eq!(cancelled.await.unwrap(), Err(InteractionError::Cancelled));
        assert_eq!(drain(&mut deltas), [Some(Cancelled)]);
        assert!(hub.pending().pending().is_empty());
        // Already cancelled: nothing is opened.
        let late = ask(&hub, "run-1", "w3", &cancel).await;
        assert_eq!(late, Err(InteractionError::Cancelled));
        assert_eq!(hub.pending().revision(), 4);
    }

    #[test]
    fn dropping_the_request_withdraws_the_prompt() {
        let hub = Arc::new(PendingHub::new());
        let (_, mut deltas) = hub.subscribe();
        let mut request = ask(&hub, "run-1", "w1", &CancellationToken::new());
        assert!(poll_once(&mut request).is_pending());
        drop(request);
        assert_eq!(drain(&mut deltas), [None, Some(Cancelled)]);
        assert!(hub.pending().pending().is_empty());
        assert_eq!(
            hub.respond(&scope("run-1"), answer("w1")),
            not_pending("w1")
        );

        // A receiver gone before its guard ran: NotPending, and a single closing delta.
        let request = InteractionRequest::new("w2", "confirm", "May I?", json!(null)).unwrap();
        let (ticket, receiver) = hub.open(&scope("run-1"), &request).unwrap();
        drop(receiver);
        assert_eq!(
            hub.respond(&scope("run-1"), answer("w2")),
            not_pending("w2")
        );
        drop(ticket);
        assert_eq!(drain(&mut deltas), [None, Some(Cancelled)]);
    }

    #[test]
    fn duplicate_ids_are_per_run() {
        let hub = Arc::new(PendingHub::new());
        let cancel = CancellationToken::new();
        let mut first = ask(&hub, "run-1", "w1", &cancel);
        assert!(poll_once(&mut first).is_pending());
        let mut again = ask(&hub, "run-1", "w1", &cancel);
        let duplicate = Err(InteractionError::DuplicateId { id: "w1".into() });
        assert_eq!(poll_once(&mut again), Poll::Ready(duplicate));
        drop(again); // a rejected duplicate must not withdraw the original
        let mut other = ask(&hub, "run-2", "w1", &cancel);
        assert!(poll_once(&mut other).is_pending());
        let snapshot = hub.pending();
        let runs: Vec<_> = snapshot
            .pending()
            .iter()
            .map(|p| p.scope().run_id())
            .collect();
        assert_eq!(runs, ["run-1", "run-2"]);

        hub.respond(&scope("run-1"), answer("w1")).unwrap();
        let mut reused = ask(&hub, "run-1", "w1", &cancel);
        assert!(poll_once(&mut reused).is_pending());
        drop(first); // answered, never polled again: must not withdraw the reused id
        assert_eq!(hub.pending().pending().len(), 2);
    }

    #[test]
    fn subscribe_is_gap_free_under_concurrency() {
        let hub = Arc::new(PendingHub::new());
        let worker = |t: usize| {
            let hub = Arc::clone(&hub);
            std::thread::spawn(move || {
                let (run, cancel) = (format!("run-{t}"), CancellationToken::new());
                let mut kept = Vec::new();
                for i in 0..300 {
                    let id = format!("p{i}");
                    let mut request = ask(&hub, &run, &id, &cancel);
                    assert!(poll_once(&mut request).is_pending());
                    match i % 3 {
                        0 => hub.respond(&scope(&run), answer(&id)).unwrap(),
                        1 => drop(request),
                        _ => kept.push(request),
                    }
                }
                kept
            })
        };
        let workers: Vec<_> = (0..4).map(worker).collect();
        let mut subscriptions = Vec::new();
        for _ in 0..50 {
            subscriptions.push(hub.subscribe());
            std::thread::yield_now();
        }
        let kept: Vec<_> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        let last = hub.pending();
        assert_eq!(
            (last.pending().len(), last.revision()),
            (kept.len(), 4 * 500)
        );
        for (snapshot, mut deltas) in subscriptions {
            assert_eq!(replay(snapshot, &mut deltas), last);
        }
    }

    #[tokio::test]
    async fn close_fails_pending_and_ends_subscriptions() {
        let hub = Arc::new(PendingHub::new());
        let (_, mut deltas) = hub.subscribe();
        let cancel = CancellationToken::new();
        let mut first = ask(&hub, "run-1", "a", &cancel);
        let mut second = ask(&hub, "run-2", "b", &cancel);
        assert!(poll_once(&mut first).is_pending() && poll_once(&mut second).is_pending());
        hub.close();
        hub.close();
        assert_eq!(first.await, Err(InteractionError::Closed));
        assert_eq!(second.await, Err(InteractionError::Closed));
        assert_eq!(drain(&mut deltas), [None, None, Some(Closed), Some(Closed)]);
        assert_eq!(deltas.next().await, None);
        let late = ask(&hub, "run-1", "c", &cancel).await;
        assert_eq!(late, Err(InteractionError::Closed));
        let answered = hub.respond(&scope("run-1"), answer("a"));
        assert_eq!(answered, Err(InteractionError::Closed));
        let (snapshot, mut subscription) = hub.subscribe();
        assert_eq!((snapshot.revision(), snapshot.pending().len()), (4, 0));
        assert_eq!(subscription.next().await, None);
        assert!(format!("{hub:?}").contains("closed: true"));
    }

    #[derive(Debug, Clone, Copy)]
    enum Op {
        Open,
        Respond,
        Decline,
        Cancel,
        Drop,
        Subscribe,
    }

    type InFlight = BTreeMap<(u8, u8), (BoxFuture<'static, Reply>, CancellationToken)>;

    proptest! {
        #[test]
        fn deltas_fold_to_pending(
            ops in proptest::collection::vec((0..6u8, 0..3u8, 0..3u8), 0..48),
        ) {
            let hub = Arc::new(PendingHub::new());
            let mut subscriptions = vec![hub.subscribe()];
            let mut in_flight = InFlight::new();
            for (op, r, i) in ops {
                let op = [Op::Open, Op::Respond, Op::Decline, Op::Cancel, Op::Drop, Op::Subscribe]
                    [usize::from(op)];
                let (run, id) = (format!("r{r}"), format!("i{i}"));
                match op {
                    Op::Open => {
                        let cancel = CancellationToken::new();
                        let mut request = ask(&hub, &run, &id, &cancel);
                        let polled = poll_once(&mut request);
                        if let btree_map::Entry::Vacant(slot) = in_flight.entry((r, i)) {
                            prop_assert!(polled.is_pending());
                            slot.insert((request, cancel));
                        } else {
                            let duplicate = Err(InteractionError::DuplicateId { id });
                            prop_assert_eq!(polled, Poll::Ready(duplicate));
                        }
                    }
                    Op::Respond | Op::Decline => {
                        let (result, expected) = if matches!(op, Op::Respond) {
                            (hub.respond(&scope(&run), answer(&id)), Ok(answer(&id)))
                        } else {
                            let declined = Err(InteractionError::Declined { id: id.clone() });
                            (hub.decline(&scope(&run), &id), declined)
                        };
                        match in_flight.remove(&(r, i)) {
                            None => prop_assert_eq!(result, not_pending(&id)),
                            Some((mut request, _)) => {
                                prop_assert_eq!(result, Ok(()));
                                prop_assert_eq!(poll_once(&mut request), Poll::Ready(expected));
                            }
                        }
                    }
                    Op::Cancel => {
                        if let Some((mut request, cancel)) = in_flight.remove(&(r, i)) {
                            cancel.cancel();
                            let cancelled = Err(InteractionError::Cancelled);
                            prop_assert_eq!(poll_once(&mut request), Poll::Ready(cancelled));
                        }
                    }
                    Op::Drop => drop(in_flight.remove(&(r, i))),
                    Op::Subscribe => subscriptions.push(hub.subscribe()),
                }
            }
            let last = hub.pending();
            let keys: Vec<_> = last.pending().iter()
                .map(|p| (p.scope().run_id().to_string(), p.request().id().to_owned()))
                .collect();
            let model: Vec<_> = in_flight.keys()
                .map(|(r, i)| (format!("r{r}"), format!("i{i}")))
                .collect();
            prop_assert_eq!(keys, model);
            for (snapshot, mut deltas) in subscriptions {
                prop_assert_eq!(replay(snapshot, &mut deltas), last.clone());
            }
        }
    }
}
