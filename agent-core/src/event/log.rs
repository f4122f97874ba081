//! The run's authoritative event log: a bounded, sequence-checked window of envelopes with
//! cursor replay and live subscriptions that never block the run.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use tokio::sync::Notify;

use super::{Envelope, Event, Timestamp};
use crate::run_id::RunId;

/// Why the log refused an append, a replay or a subscription.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The log was closed; it accepts no more events.
    #[error("event log is closed")]
    Closed,
    /// The envelope belongs to another run.
    #[error("event of run {found:?} appended to the log of run {expected:?}")]
    RunMismatch {
        /// The log's run.
        expected: String,
        /// The envelope's run.
        found: String,
    },
    /// The envelope's sequence is not the next one.
    #[error("event sequence {found} is out of order: expected {expected}")]
    OutOfOrder {
        /// The next sequence the log accepts.
        expected: u64,
        /// The envelope's sequence.
        found: u64,
    },
    /// A bound was reached: `event_log_bytes` (one event larger than the log may hold),
    /// `event_replay_bytes` (one event larger than a page, or a subscription backlog over
    /// the subscriber byte limit), `event_replay_events` (a backlog over the subscriber event
    /// limit) or `event_sequence` (no sequence number left).
    #[error("event log limit exhausted: {resource}")]
    Exhausted {
        /// Which bound.
        resource: &'static str,
    },
    /// The cursor is outside the retained window: events after it were evicted, or it is
    /// ahead of the log. A cursor of `earliest - 1` (everything retained) up to `latest`
    /// (nothing new) is valid.
    #[error("replay cursor {requested_after} is outside the retained window {earliest}..={latest}")]
    OutOfRange {
        /// The cursor asked for.
        requested_after: u64,
        /// The first retained sequence (`latest + 1` when nothing is retained).
        earliest: u64,
        /// The last appended sequence (0 when nothing was ever appended).
        latest: u64,
    },
    /// The [`LogLimits`] are unusable.
    #[error("invalid event log limits: {0}")]
    InvalidLimits(&'static str),
    /// The [`ReplayRequest`] (or the imported cursor) is unusable.
    #[error("invalid replay request: {0}")]
    InvalidRequest(&'static str),
}

/// Why a [`Subscription`] stopped delivering events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubscriptionError {
    /// The subscriber fell behind: its undelivered queue would have exceeded
    /// `event_subscription_events` or `event_subscription_bytes`, so the log dropped it
    /// instead of blocking the run. Replay from [`Subscription::last_delivered`] to catch up.
    #[error("event subscriber fell behind: {resource} exceeded")]
    Lagged {
        /// Which bound.
        resource: &'static str,
    },
}

/// The bounds of one [`EventLog`] and of each of its subscribers.
///
/// Bytes are [`Envelope::accounted_bytes`]. Non-terminal events (see
/// [`EventKind::is_terminal`](super::EventKind::is_terminal)) may use only
/// `max_events - terminal_reserve_events` and `max_bytes - terminal_reserve_bytes`, so the
/// events that close an operation always find room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogLimits {
    /// Events retained at most (at least 2); the oldest are evicted first. Default 8192.
    pub max_events: usize,
    /// Bytes retained at most (at least 1024). Default 32 MiB.
    pub max_bytes: usize,
    /// Events only terminal events may use (at least 1, below `max_events`). Default 4.
    pub terminal_reserve_events: usize,
    /// Bytes only terminal events may use (at least 1, below `max_bytes`). Default 16 KiB.
    pub terminal_reserve_bytes: usize,
    /// Undelivered events one subscriber may have queued (at least 1). Default 1024.
    pub subscriber_max_events: usize,
    /// Undelivered bytes one subscriber may have queued (at least 1). Default 4 MiB.
    pub subscriber_max_bytes: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            max_events: 8192,
            max_bytes: 32 << 20,
            terminal_reserve_events: 4,
            terminal_reserve_bytes: 16 << 10,
            subscriber_max_events: 1024,
            subscriber_max_bytes: 4 << 20,
        }
    }
}

impl LogLimits {
    /// Checks the bounds documented on each field.
    pub fn validate(&self) -> Result<(), LogError> {
        let invalid = |why| Err(LogError::InvalidLimits(why));
        if self.max_events < 2 {
            return invalid("max_events must be at least 2");
        }
        if self.max_bytes < 1024 {
            return invalid("max_bytes must be at least 1024");
        }
        if self.terminal_reserve_events == 0 || self.terminal_reserve_events >= self.max_events {
            return invalid("terminal_reserve_events must be at least 1 and below max_events");
        }
        if self.terminal_reserve_bytes == 0 || self.terminal_reserve_bytes >= self.max_bytes {
            return invalid("terminal_reserve_bytes must be at least 1 and below max_bytes");
        }
        if self.subscriber_max_events == 0 {
            return invalid("subscriber_max_events must be at least 1");
        }
        if self.subscriber_max_bytes == 0 {
            return invalid("subscriber_max_bytes must be at least 1");
        }
        Ok(())
    }
}

/// Counters of one [`EventLog`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Events in the window now.
    pub retained_events: usize,
    /// Accounted bytes in the window now.
    pub retained_bytes: usize,
    /// Events evicted so far to make room.
    pub evicted_events: u64,
    /// Accounted bytes evicted so far.
    pub evicted_bytes: u64,
    /// Appends refused with [`LogError::Exhausted`].
    pub exhausted: u64,
    /// Subscribers dropped because they fell behind ([`SubscriptionError::Lagged`]).
    pub slow_subscribers: u64,
}

/// What [`EventLog::replay`] returns: events after a cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplayRequest {
    /// The cursor: return events with a greater sequence (0 = from the start).
    pub after: u64,
    /// Events in the page at most (at least 1).
    pub max_events: usize,
    /// Accounted bytes in the page at most (at least 1).
    pub max_bytes: usize,
    /// Whether to follow the live tail when the page reaches the head (see
    /// [`ReplayPage::tail`]).
    pub tail: bool,
}

impl ReplayRequest {
    /// Events after `after`, at most 256 events or 1 MiB per page, without tail.
    pub const fn after(after: u64) -> Self {
        ReplayRequest {
            after,
            max_events: 256,
            max_bytes: 1 << 20,
            tail: false,
        }
    }

    /// The same request, following the live tail.
    pub const fn with_tail(mut self) -> Self {
        self.tail = true;
        self
    }
}

/// One page of [`EventLog::replay`].
#[derive(Debug)]
pub struct ReplayPage {
    /// The first retained sequence when the page was taken (`latest + 1` if none).
    pub earliest: u64,
    /// The last appended sequence when the page was taken (0 if none).
    pub latest: u64,
    /// The events after the cursor, in sequence order, within the request's limits.
    pub events: Vec<Envelope>,
    /// Whether events after the page were already retained: replay again from the last one.
    pub has_more: bool,
    /// With [`ReplayRequest::tail`] and `!has_more`: the live events after the page,
    /// registered under the same lock as the page was read, so nothing is missed or repeated.
    /// Already finished when the log was closed.
    pub tail: Option<Subscription>,
}

/// The authoritative, bounded event log of one run.
///
/// Appends must carry the log's run id and consecutive sequence numbers. The log keeps a
/// window of the newest events (evicting the oldest to make room), replays pages after a
/// cursor, and feeds live [`Subscription`]s, which are dropped when they fall behind rather
/// than ever blocking an append. Share it with an `Arc`.
///
/// ```
/// use agent_core::RunId;
/// use agent_core::event::{Envelope, Event, EventLog, LogLimits, ReplayRequest, Timestamp};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let run = RunId::new("run-1")?;
/// let at = Timestamp::from_unix_nanos(1);
/// let log = EventLog::new(run.clone(), LogLimits::default())?;
/// log.append(Envelope::new(run.clone(), 1, at, Event::TurnStarted { turn: 1 }))?;
/// log.append(Envelope::new(run.clone(), 2, at, Event::ModelStarted { turn: 1 }))?;
/// log.append(Envelope::new(run.clone(), 3, at, Event::ModelDelta { text: "hi".into() }))?;
///
/// // Everything after sequence 1, then the live tail without a gap.
/// let page = log.replay(ReplayRequest::after(1).with_tail())?;
/// let sequences: Vec<u64> = page.events.iter().map(Envelope::sequence).collect();
/// assert_eq!((page.earliest, page.latest, sequences), (1, 3, vec![2, 3]));
/// let mut tail = page.tail.expect("the page reached the head");
///
/// let done = Event::ModelCompleted { input_tokens: 3, output_tokens: 1 };
/// log.append(Envelope::new(run.clone(), 4, at, done))?;
/// log.close();
/// assert_eq!(tail.next().await?.map(|e| e.sequence()), Some(4));
/// assert_eq!(tail.next().await?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// ```
pub struct EventLog {
    run_id: RunId,
    limits: LogLimits,
    inner: Mutex<Inner>,
}

/// One retained event: its envelope without the run's id, which the log holds once for all
/// of them (each entry would otherwise take and later drop a reference count of it).
struct Entry {
    sequence: u64,
    at: Timestamp,
    event: Event,
    bytes: usize,
}

impl Entry {
    fn new(envelope: Envelope, bytes: usize) -> Self {
        Entry {
            sequence: envelope.sequence,
            at: envelope.at,
            event: envelope.event,
            bytes,
        }
    }

    /// The entry as an envelope of `run_id`.
    fn envelope(&self, run_id: &RunId) -> Envelope {
        Envelope::new(run_id.clone(), self.sequence, self.at, self.event.clone())
    }

    /// The entry as an envelope of `run_id`, queued with its bytes.
    fn queued(&self, run_id: &RunId) -> Queued {
        Queued {
            envelope: self.envelope(run_id),
            bytes: self.bytes,
        }
    }
}

/// An envelope waiting in a subscription's queue, with its accounted bytes.
struct Queued {
    envelope: Envelope,
    bytes: usize,
}

struct Inner {
    closed: bool,
    last: u64,
    entries: VecDeque<Entry>,
    bytes: usize,
    stats: LogStats,
    subscribers: Vec<Weak<Shared>>,
}

impl Inner {
    fn earliest(&self) -> u64 {
        self.entries
            .front()
            .map_or(self.last + 1, |entry| entry.sequence)
    }

    /// Index of the first entry after `after`, or `OutOfRange`.
    fn start(&self, after: u64) -> Result<usize, LogError> {
        let earliest = self.earliest();
        if after < earliest - 1 || after > self.last {
            return Err(LogError::OutOfRange {
                requested_after: after,
                earliest,
                latest: self.last,
            });
        }
        Ok(usize::try_from(after - (earliest - 1)).unwrap_or(usize::MAX))
    }

    /// Offers the newest entry to every subscriber, dropping the gone and the lagging.
    fn publish(&mut self, run_id: &RunId, limits: &LogLimits) {
        let Some(entry) = self.entries.back() else {
            return;
        };
        let stats = &mut self.stats;
        self.subscribers.retain(|weak| {
            let Some(shared) = weak.upgrade() else {
                return false;
            };
            let queued = shared.offer(entry.queued(run_id), limits);
            stats.slow_subscribers += u64::from(!queued);
            queued
        });
    }

    /// Registers a subscription that has seen `last_delivered` and has `queue` pending.
    fn subscribe(&mut self, last_delivered: u64, queue: VecDeque<Queued>) -> Subscription {
        let bytes = queue.iter().map(|entry| entry.bytes).sum();
        let end = if self.closed { End::Closed } else { End::Open };
        let shared = Arc::new(Shared {
            state: Mutex::new(SubState { queue, bytes, end }),
            notify: Notify::new(),
        });
        if !self.closed {
            self.subscribers.retain(|weak| weak.strong_count() > 0);
            self.subscribers.push(Arc::downgrade(&shared));
        }
        Subscription {
            shared,
            last_delivered,
        }
    }
}

/// How many entries a new log makes room for: a text run's six events.
const INITIAL_ENTRIES: usize = 6;

const fn exhausted(resource: &'static str) -> LogError {
    LogError::Exhausted { resource }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EventLog {
    /// An empty log for `run_id` whose first event has sequence 1.
    pub fn new(run_id: RunId, limits: LogLimits) -> Result<EventLog, LogError> {
        EventLog::after(run_id, 0, limits)
    }

    /// An empty log continuing after an imported cursor: its first event has sequence
    /// `last_sequence + 1`, and its bounds are `earliest = last_sequence + 1`,
    /// `latest = last_sequence` until then.
    pub fn after(
        run_id: RunId,
        last_sequence: u64,
        limits: LogLimits,
    ) -> Result<EventLog, LogError> {
        limits.validate()?;
        if last_sequence == u64::MAX {
            return Err(LogError::InvalidRequest(
                "last_sequence must be below u64::MAX",
            ));
        }
        Ok(EventLog {
            run_id,
            limits,
            inner: Mutex::new(Inner {
                closed: false,
                last: last_sequence,
                // A text run writes six events. Six entries (1,008 bytes) are also the most
                // glibc's per-thread cache serves; a larger first buffer takes its slow path
                // on every run.
                entries: VecDeque::with_capacity(limits.max_events.min(INITIAL_ENTRIES)),
                bytes: 0,
                stats: LogStats::default(),
                subscribers: Vec::new(),
            }),
        })
    }

    /// The run this log belongs to.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The limits it was created with.
    pub fn limits(&self) -> LogLimits {
        self.limits
    }

    /// Commits the next event, evicting the oldest retained events to make room, then
    /// queues it for every live subscriber (dropping those that fell behind).
    ///
    /// Fails with [`LogError::Closed`], [`LogError::RunMismatch`], [`LogError::OutOfOrder`]
    /// (the sequence must be exactly [`last_sequence`](Self::last_sequence) + 1) or
    /// [`LogError::Exhausted`] (`event_log_bytes`: the event alone is larger than the log
    /// may hold for its kind). A refused event consumes no sequence number.
    pub fn append(&self, envelope: Envelope) -> Result<(), LogError> {
        let mut guard = lock(&self.inner);
        self.append_locked(&mut guard, envelope)
    }

    /// Appends `event` as this run's next envelope, stamped by `now` under the log's lock, so
    /// concurrent emitters can never race for a number and stamps follow the sequence. The
    /// entry is built in its slot: the run's own id and the next number need none of the
    /// checks an envelope from outside gets.
    pub(crate) fn append_next(
        &self,
        now: impl FnOnce() -> Timestamp,
        event: Event,
    ) -> Result<(), LogError> {
        let mut guard = lock(&self.inner);
        let inner = &mut *guard;
        let bytes = self.run_id.as_str().len() + event.accounted_bytes();
        let sequence = self.admit(inner, event.kind().is_terminal(), bytes)?;
        // Built in the call: an entry returned from a helper measured as one more copy of
        // it on every append.
        let entry = Entry {
            sequence,
            at: now(),
            event,
            bytes,
        };
        self.store(inner, entry);
        Ok(())
    }

    /// [`append_next`](Self::append_next), returning a copy of the committed envelope (for
    /// the observers).
    pub(crate) fn append_next_observed(
        &self,
        now: impl FnOnce() -> Timestamp,
        event: Event,
    ) -> Result<Envelope, LogError> {
        let mut guard = lock(&self.inner);
        let inner = &mut *guard;
        let bytes = self.run_id.as_str().len() + event.accounted_bytes();
        let sequence = self.admit(inner, event.kind().is_terminal(), bytes)?;
        let entry = Entry {
            sequence,
            at: now(),
            event,
            bytes,
        };
        let envelope = entry.envelope(&self.run_id);
        self.store(inner, entry);
        Ok(envelope)
    }

    fn append_locked(&self, inner: &mut Inner, envelope: Envelope) -> Result<(), LogError> {
        // The order of the refusals: closed, another run, a number out of order (unless
        // the numbers are exhausted, which `admit` reports), then the bounds.
        if inner.closed {
            return Err(LogError::Closed);
        }
        if envelope.run_id() != &self.run_id {
            return Err(LogError::RunMismatch {
                expected: self.run_id.to_string(),
                found: envelope.run_id().to_string(),
            });
        }
        if let Some(expected) = inner.last.checked_add(1)
            && envelope.sequence() != expected
        {
            return Err(LogError::OutOfOrder {
                expected,
                found: envelope.sequence(),
            });
        }
        let bytes = envelope.accounted_bytes();
        self.admit(inner, envelope.kind().is_terminal(), bytes)?;
        self.store(inner, Entry::new(envelope, bytes));
        Ok(())
    }

    /// Checks that the log is open and has a next number, and makes room for an event of
    /// `bytes` accounted bytes (evicting the oldest; only a terminal event may use the
    /// terminal reserve); returns the event's sequence number. Nothing is committed yet.
    fn admit(&self, inner: &mut Inner, terminal: bool, bytes: usize) -> Result<u64, LogError> {
        if inner.closed {
            return Err(LogError::Closed);
        }
        let Some(sequence) = inner.last.checked_add(1) else {
            inner.stats.exhausted += 1;
            return Err(exhausted("event_sequence"));
        };
        let limits = &self.limits;
        let (max_events, max_bytes) = if terminal {
            (limits.max_events, limits.max_bytes)
        } else {
            (
                limits.max_events - limits.terminal_reserve_events,
                limits.max_bytes - limits.terminal_reserve_bytes,
            )
        };
        if bytes > max_bytes {
            inner.stats.exhausted += 1;
            return Err(exhausted("event_log_bytes"));
        }
        while inner.entries.len() >= max_events || inner.bytes.saturating_add(bytes) > max_bytes {
            let Some(old) = inner.entries.pop_front() else {
                break;
            };
            inner.bytes -= old.bytes;
            inner.stats.evicted_events += 1;
            inner.stats.evicted_bytes += old.bytes as u64;
        }
        Ok(sequence)
    }

    /// Commits the entry [`admit`](Self::admit) made room for and offers it to every
    /// subscriber.
    fn store(&self, inner: &mut Inner, entry: Entry) {
        inner.last = entry.sequence;
        inner.bytes += entry.bytes;
        inner.entries.push_back(entry);
        if !inner.subscribers.is_empty() {
            inner.publish(&self.run_id, &self.limits);
        }
    }

    /// The sequence of the last appended event (0, or the imported cursor, if none).
    pub fn last_sequence(&self) -> u64 {
        lock(&self.inner).last
    }

    /// The sequence of the first retained event, or `last_sequence() + 1` when none is.
    pub fn earliest(&self) -> u64 {
        lock(&self.inner).earliest()
    }

    /// Returns the retained events after `request.after`, in order, within the request's
    /// limits; with [`ReplayRequest::tail`], also the live tail when the page reaches the head.
    ///
    /// Fails with [`LogError::InvalidRequest`] for zero limits, [`LogError::OutOfRange`] for
    /// a cursor outside the retained window, and [`LogError::Exhausted`]
    /// (`event_replay_bytes`) when the first event alone exceeds `max_bytes`.
    pub fn replay(&self, request: ReplayRequest) -> Result<ReplayPage, LogError> {
        if request.max_events == 0 {
            return Err(LogError::InvalidRequest("max_events must be at least 1"));
        }
        if request.max_bytes == 0 {
            return Err(LogError::InvalidRequest("max_bytes must be at least 1"));
        }
        let mut inner = lock(&self.inner);
        let start = inner.start(request.after)?;
        let available = inner.entries.len() - start;
        let mut events = Vec::with_capacity(available.min(request.max_events));
        let mut bytes = 0usize;
        for entry in inner.entries.range(start..) {
            if events.len() == request.max_events {
                break;
            }
            if bytes.saturating_add(entry.bytes) > request.max_bytes {
                if events.is_empty() {
                    return Err(exhausted("event_replay_bytes"));
                }
                break;
            }
            bytes += entry.bytes;
            events.push(entry.envelope(&self.run_id));
        }
        let has_more = events.len() < available;
        let tail = (request.tail && !has_more).then(|| {
            let seen = events.last().map_or(request.after, Envelope::sequence);
            inner.subscribe(seen, VecDeque::new())
        });
        Ok(ReplayPage {
            earliest: inner.earliest(),
            latest: inner.last,
            events,
            has_more,
            tail,
        })
    }

    /// Replays every retained event after `after` and follows the live tail, in one step
    /// under one lock: the backlog is queued into the subscription.
    ///
    /// Fails with [`LogError::OutOfRange`] for a cursor outside the retained window and with
    /// [`LogError::Exhausted`] (`event_replay_events` or `event_replay_bytes`) when the
    /// backlog exceeds the subscriber limits; page through [`replay`](Self::replay) instead.
    /// On a closed log the subscription delivers the backlog and then finishes.
    pub fn subscribe(&self, after: u64) -> Result<Subscription, LogError> {
        let mut inner = lock(&self.inner);
        let start = inner.start(after)?;
        let backlog = inner.entries.range(start..);
        if backlog.len() > self.limits.subscriber_max_events {
            return Err(exhausted("event_replay_events"));
        }
        let bytes: usize = backlog.clone().map(|entry| entry.bytes).sum();
        if bytes > self.limits.subscriber_max_bytes {
            return Err(exhausted("event_replay_bytes"));
        }
        let queue = backlog.map(|entry| entry.queued(&self.run_id)).collect();
        Ok(inner.subscribe(after, queue))
    }

    /// Refuses later appends; live subscriptions finish after delivering what they have
    /// queued. Idempotent.
    pub fn close(&self) {
        let mut inner = lock(&self.inner);
        inner.closed = true;
        for weak in inner.subscribers.drain(..) {
            if let Some(shared) = weak.upgrade() {
                shared.close();
            }
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.inner).closed
    }

    /// The current counters.
    pub fn stats(&self) -> LogStats {
        let inner = lock(&self.inner);
        LogStats {
            retained_events: inner.entries.len(),
            retained_bytes: inner.bytes,
            ..inner.stats
        }
    }
}

impl fmt::Debug for EventLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("EventLog")
            .field("run_id", &self.run_id)
            .field("earliest", &inner.earliest())
            .field("latest", &inner.last)
            .field("closed", &inner.closed)
            .field("subscribers", &inner.subscribers.len())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Live.
    Open,
    /// The log closed: deliver the queue, then `None`.
    Closed,
    /// Fell behind; the error was not reported yet.
    Lagged(&'static str),
    /// Fell behind and was told so.
    Reported,
}

struct SubState {
    queue: VecDeque<Queued>,
    bytes: usize,
    end: End,
}

struct Shared {
    state: Mutex<SubState>,
    notify: Notify,
}

impl Shared {
    /// Queues `entry`, or ends the subscriber (`false`) when it would fall behind.
    ///
    /// Only registered subscribers are offered events, and a subscriber leaves `End::Open`
    /// only under the log's lock, in the same step that unregisters it.
    fn offer(&self, entry: Queued, limits: &LogLimits) -> bool {
        let mut state = lock(&self.state);
        debug_assert_eq!(state.end, End::Open);
        let lagged = if state.queue.len() >= limits.subscriber_max_events {
            Some("event_subscription_events")
        } else if state.bytes.saturating_add(entry.bytes) > limits.subscriber_max_bytes {
            Some("event_subscription_bytes")
        } else {
            None
        };
        if let Some(resource) = lagged {
            state.queue = VecDeque::new();
            state.bytes = 0;
            state.end = End::Lagged(resource);
            drop(state);
            self.notify.notify_one();
            return false;
        }
        let was_empty = state.queue.is_empty();
        state.bytes += entry.bytes;
        state.queue.push_back(entry);
        drop(state);
        if was_empty {
            self.notify.notify_one();
        }
        true
    }

    /// The log closed: deliver what is queued, then end.
    fn close(&self) {
        lock(&self.state).end = End::Closed;
        self.notify.notify_one();
    }
}

/// The live events of an [`EventLog`] after a cursor, from [`EventLog::subscribe`] or a
/// tailing [`EventLog::replay`].
///
/// The log queues each event for the subscription without waiting for it; a subscription
/// whose queue would exceed [`LogLimits::subscriber_max_events`] or
/// [`LogLimits::subscriber_max_bytes`] is dropped and reports [`SubscriptionError::Lagged`].
/// Dropping the subscription unregisters it.
pub struct Subscription {
    shared: Arc<Shared>,
    last_delivered: u64,
}

impl Subscription {
    /// Waits for the next event.
    ///
    /// Returns `Ok(Some(_))` in sequence order, `Ok(None)` once the log closed and the queue
    /// is drained, and [`SubscriptionError::Lagged`] once if the subscriber fell behind
    /// (its queue is discarded), `Ok(None)` after that. Cancel-safe: dropping the future
    /// loses no event.
    pub async fn next(&mut self) -> Result<Option<Envelope>, SubscriptionError> {
        loop {
            if let Some(outcome) = self.poll_queue() {
                return outcome;
            }
            // `notify_one` leaves a permit when nobody waits, so an event queued between
            // the check above and this await is not missed.
            self.shared.notify.notified().await;
        }
    }

    /// Takes the next event if one is queued now, without waiting.
    ///
    /// Unlike [`next`](Self::next), `Ok(None)` here also means "nothing yet": use
    /// [`is_finished`](Self::is_finished) to tell it from the end of the stream.
    pub fn try_next(&mut self) -> Result<Option<Envelope>, SubscriptionError> {
        self.poll_queue().unwrap_or(Ok(None))
    }

    /// Whether no event will ever be delivered again: the log closed and the queue is
    /// drained, or the subscriber fell behind.
    pub fn is_finished(&self) -> bool {
        let state = lock(&self.shared.state);
        state.end != End::Open && state.queue.is_empty()
    }

    /// The sequence of the last event delivered, or the cursor it started after.
    pub fn last_delivered(&self) -> u64 {
        self.last_delivered
    }

    /// The outcome of `next` if it is known without waiting.
    fn poll_queue(&mut self) -> Option<Result<Option<Envelope>, SubscriptionError>> {
        let mut state = lock(&self.shared.state);
        if let Some(entry) = state.queue.pop_front() {
            state.bytes -= entry.bytes;
            self.last_delivered = entry.envelope.sequence();
            return Some(Ok(Some(entry.envelope)));
        }
        match state.end {
            End::Open => None,
            End::Closed | End::Reported => Some(Ok(None)),
            End::Lagged(resource) => {
                state.end = End::Reported;
                Some(Err(SubscriptionError::Lagged { resource }))
            }
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared.state);
        f.debug_struct("Subscription")
            .field("last_delivered", &self.last_delivered)
            .field("queued", &state.queue.len())
            .field("end", &state.end)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Timestamp};
    use proptest::prelude::*;

    const RUN: &str = "run-1";
    /// Accounted bytes of a `delta` or `failed` envelope with empty text.
    const BASE: usize = RUN.len() + 64;

    fn envelope(sequence: u64, event: Event) -> Envelope {
        Envelope::new(
            RunId::new(RUN).expect("a valid run id"),
            sequence,
            Timestamp::from_unix_nanos(1),
            event,
        )
    }

    /// Non-terminal, `BASE + len` bytes.
    fn delta(sequence: u64, len: usize) -> Envelope {
        let text = "x".repeat(len);
        envelope(sequence, Event::ModelDelta { text })
    }

    /// Terminal, `BASE + len` bytes.
    fn failed(sequence: u64, len: usize) -> Envelope {
        let (problem, retryable, before_stream) = ("p".repeat(len), false, false);
        let event = Event::ModelFailed {
            problem,
            retryable,
            before_stream,
        };
        envelope(sequence, event)
    }

    fn log_with(limits: LogLimits) -> EventLog {
        EventLog::new(RunId::new(RUN).unwrap(), limits).unwrap()
    }

    /// Reserves of one event and 256 bytes.
    fn small(max_events: usize, max_bytes: usize) -> LogLimits {
        let mut limits = LogLimits::default();
        (limits.max_events, limits.max_bytes) = (max_events, max_bytes);
        (
            limits.terminal_reserve_events,
            limits.terminal_reserve_bytes,
        ) = (1, 256);
        limits
    }

    /// Default log limits with these subscriber limits.
    fn subscriber(max_events: usize, max_bytes: usize) -> LogLimits {
        let mut limits = LogLimits::default();
        (limits.subscriber_max_events, limits.subscriber_max_bytes) = (max_events, max_bytes);
        limits
    }

    fn req(after: u64, max_events: usize, max_bytes: usize) -> ReplayRequest {
        let mut request = ReplayRequest::after(after);
        (request.max_events, request.max_bytes) = (max_events, max_bytes);
        request
    }

    /// The sequences of a page and its `has_more`.
    fn page(log: &EventLog, request: ReplayRequest) -> (Vec<u64>, bool) {
        let page = log.replay(request).unwrap();
        (sequences(&page.events), page.has_more)
    }

    fn out_of_range(requested_after: u64, earliest: u64, latest: u64) -> LogError {
        let (after, e, l) = (requested_after, earliest, latest);
        LogError::OutOfRange {
            requested_after: after,
            earliest: e,
            latest: l,
        }
    }

    fn out_of_order(expected: u64, found: u64) -> Result<(), LogError> {
        Err(LogError::OutOfOrder { expected, found })
    }

    fn sequences(events: &[Envelope]) -> Vec<u64> {
        events.iter().map(Envelope::sequence).collect()
    }

    /// The whole retained window.
    fn retained(log: &EventLog) -> Vec<u64> {
        page(log, req(log.earliest() - 1, usize::MAX, usize::MAX)).0
    }

    async fn next(subscription: &mut Subscription) -> Option<u64> {
        let envelope = subscription.next().await.unwrap();
        envelope.map(|envelope| envelope.sequence())
    }

    fn try_next(subscription: &mut Subscription) -> Option<u64> {
        let envelope = subscription.try_next().unwrap();
        envelope.map(|envelope| envelope.sequence())
    }

    #[test]
    fn limits_are_validated_and_types_are_thread_safe() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        let log = log_with(LogLimits::default());
        let mut subscription = log.subscribe(0).unwrap();
        send_sync(&log);
        send_sync(&subscription.next());
        assert_eq!(LogLimits::default().validate(), Ok(()));
        let cases: [fn(&mut LogLimits); 8] = [
            |l| l.max_events = 1,
            |l| l.max_bytes = 1023,
            |l| l.terminal_reserve_events = 0,
            |l| l.terminal_reserve_events = l.max_events,
            |l| l.terminal_reserve_bytes = 0,
            |l| l.terminal_reserve_bytes = l.max_bytes,
            |l| l.subscriber_max_events = 0,
            |l| l.subscriber_max_bytes = 0,
        ];
        for case in cases {
            let mut limits = small(4, 1024);
            case(&mut limits);
            let error = EventLog::new(RunId::new(RUN).unwrap(), limits).unwrap_err();
            assert!(matches!(error, LogError::InvalidLimits(_)), "{limits:?}");
        }
        let error =
            EventLog::after(RunId::new(RUN).unwrap(), u64::MAX, LogLimits::default()).unwrap_err();
        assert!(matches!(error, LogError::InvalidRequest(_)));
    }

    #[test]
    fn appends_must_be_of_this_run_and_in_sequence() {
        let log = log_with(LogLimits::default());
        let mut other = delta(1, 0);
        other = Envelope::new(
            RunId::new("run-2").expect("a valid run id"),
            1,
            other.at(),
            other.event().clone(),
        );
        let (expected, found) = (RUN.to_owned(), "run-2".to_owned());
        assert_eq!(
            log.append(other),
            Err(LogError::RunMismatch { expected, found })
        );
        assert_eq!(log.append(delta(2, 0)), out_of_order(1, 2));
        log.append(delta(1, 0)).unwrap();
        assert_eq!(log.append(delta(1, 0)), out_of_order(2, 1));
        assert_eq!(log.append(delta(3, 0)), out_of_order(2, 3));
        log.append(delta(2, 0)).unwrap();
        assert_eq!(log.last_sequence(), 2);
        log.close();
        log.close();
        assert!(log.is_closed());
        assert_eq!(log.append(delta(3, 0)), Err(LogError::Closed));
        assert_eq!((log.stats().exhausted, retained(&log)), (0, vec![1, 2]));
    }

    #[test]
    fn an_oversized_event_is_refused_without_consuming_a_sequence() {
        let log = log_with(small(4, 1024));
        log.append(delta(1, 0)).unwrap();
        // Non-terminal events may use 1024 - 256 bytes.
        let refused = log.append(delta(2, 768 - BASE + 1));
        assert_eq!(refused, Err(exhausted("event_log_bytes")));
        assert_eq!((log.last_sequence(), log.stats().exhausted), (1, 1));
        assert_eq!(retained(&log), [1], "nothing evicted for the refused event");
        log.append(delta(2, 768 - BASE)).unwrap();
        assert_eq!(retained(&log), [2]);
    }

    #[test]
    fn retention_is_a_window_and_cursors_outside_it_are_out_of_range() {
        let log = log_with(small(4, 1 << 20));
        for sequence in 1..=6 {
            log.append(delta(sequence, 10)).unwrap();
        }
        // Non-terminal events may use 4 - 1 entries.
        let bounds = (log.earliest(), log.last_sequence());
        assert_eq!((bounds, retained(&log)), ((4, 6), vec![4, 5, 6]));
        let LogStats {
            retained_events,
            retained_bytes,
            evicted_events,
            evicted_bytes,
            ..
        } = log.stats();
        assert_eq!((retained_events, retained_bytes), (3, 3 * (BASE + 10)));
        assert_eq!((evicted_events, evicted_bytes), (3, 3 * (BASE as u64 + 10)));
        for after in [2, 7] {
            let error = log.replay(ReplayRequest::after(after)).unwrap_err();
            assert_eq!(error, out_of_range(after, 4, 6));
        }
        assert_eq!(log.subscribe(2).unwrap_err(), out_of_range(2, 4, 6));
        assert_eq!(page(&log, ReplayRequest::after(3)), (vec![4, 5, 6], false));
        let page = log.replay(ReplayRequest::after(6)).unwrap();
        assert!(page.events.is_empty() && !page.has_more && page.tail.is_none());
    }

    #[test]
    fn terminal_events_use_the_reserve() {
        let log = log_with(small(4, 1024));
        for sequence in 1..=3 {
            log.append(delta(sequence, 0)).unwrap();
        }
        // A terminal event takes the reserved fourth slot without evicting...
        log.append(failed(4, 0)).unwrap();
        let evicted = log.stats().evicted_events;
        assert_eq!((retained(&log), evicted), (vec![1, 2, 3, 4], 0));
        // ...and the next non-terminal event shrinks the window back to three.
        log.append(delta(5, 0)).unwrap();
        assert_eq!(retained(&log), [3, 4, 5]);
        // A terminal event larger than the non-terminal share of the bytes still fits.
        let big = 1024 - BASE;
        assert_eq!(log.append(delta(6, big)), Err(exhausted("event_log_bytes")));
        log.append(failed(6, big)).unwrap();
        let bytes = log.stats().retained_bytes;
        assert_eq!((retained(&log), bytes), (vec![6], 1024));
        let refused = log.append(failed(7, big + 1));
        assert_eq!(refused, Err(exhausted("event_log_bytes")));
    }

    #[test]
    fn pages_respect_count_and_byte_limits() {
        let log = log_with(LogLimits::default());
        for sequence in 1..=10 {
            log.append(delta(sequence, 100)).unwrap();
        }
        let size = BASE + 100;
        assert_eq!(page(&log, req(0, 3, 1 << 20)), (vec![1, 2, 3], true));
        let tailing = log.replay(req(3, 256, 3 * size - 1).with_tail()).unwrap();
        assert_eq!(
            (sequences(&tailing.events), tailing.has_more),
            (vec![4, 5], true)
        );
        assert!(tailing.tail.is_none(), "no tail before the head");
        assert_eq!(
            page(&log, req(5, 5, 5 * size)),
            (vec![6, 7, 8, 9, 10], false)
        );
        let full = log.replay(req(0, 5, 5 * size)).unwrap();
        assert_eq!((full.earliest, full.latest), (1, 10));
        let error = log.replay(req(0, 1, size - 1)).unwrap_err();
        assert_eq!(error, exhausted("event_replay_bytes"));
        for request in [req(0, 0, 1), req(0, 1, 0)] {
            let error = log.replay(request).unwrap_err();
            assert!(matches!(error, LogError::InvalidRequest(_)));
        }
    }

    #[tokio::test]
    async fn empty_logs_have_inverted_bounds_and_can_be_tailed() {
        let log = log_with(LogLimits::default());
        let page = log.replay(ReplayRequest::after(0).with_tail()).unwrap();
        assert_eq!((page.earliest, page.latest, page.has_more), (1, 0, false));
        let mut tail = page.tail.unwrap();
        let error = log.replay(ReplayRequest::after(1)).unwrap_err();
        assert_eq!(error, out_of_range(1, 1, 0));
        log.append(delta(1, 0)).unwrap();
        assert_eq!(next(&mut tail).await, Some(1));

        let log = EventLog::after(RunId::new(RUN).unwrap(), 41, LogLimits::default()).unwrap();
        assert_eq!((log.earliest(), log.last_sequence()), (42, 41));
        let page = log.replay(ReplayRequest::after(41).with_tail()).unwrap();
        assert_eq!((page.earliest, page.latest, page.events.len()), (42, 41, 0));
        let mut tail = page.tail.unwrap();
        assert_eq!(tail.last_delivered(), 41);
        let error = log.replay(ReplayRequest::after(40)).unwrap_err();
        assert_eq!(error, out_of_range(40, 42, 41));
        assert_eq!(log.append(delta(41, 0)), out_of_order(42, 41));
        log.append(delta(42, 0)).unwrap();
        assert_eq!((try_next(&mut tail), tail.last_delivered()), (Some(42), 42));
        assert_eq!(try_next(&mut tail), None);
        assert!(!tail.is_finished(), "nothing queued yet, but still live");
    }

    #[tokio::test]
    async fn replay_with_tail_has_no_gap_under_a_concurrent_appender() {
        const N: u64 = 2000;
        let log = Arc::new(log_with(subscriber(4096, 1 << 20)));
        let appender = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for sequence in 1..=N {
                    log.append(delta(sequence, 8)).unwrap();
                    if sequence % 10 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(20));
                    }
                }
                log.close();
            })
        };
        // Start paging mid-stream, so the tail is registered while appends go on.
        while log.last_sequence() < 100 {
            std::thread::yield_now();
        }
        let mut received = Vec::new();
        let mut tail = loop {
            let after = received.last().copied().unwrap_or(0);
            let page = log.replay(req(after, 7, 1 << 20).with_tail()).unwrap();
            received.extend(page.events.iter().map(Envelope::sequence));
            if let Some(tail) = page.tail {
                break tail;
            }
            tokio::task::yield_now().await;
        };
        while let Some(sequence) = next(&mut tail).await {
            received.push(sequence);
        }
        appender.join().unwrap();
        assert!(tail.is_finished());
        assert_eq!(received, (1..=N).collect::<Vec<_>>());
    }

    #[test]
    fn subscribe_refuses_a_backlog_over_the_subscriber_limits() {
        let log = log_with(subscriber(2, 2 * BASE + 1));
        for sequence in 1..=3 {
            log.append(delta(sequence, 0)).unwrap();
        }
        let error = log.subscribe(0).unwrap_err();
        assert_eq!(error, exhausted("event_replay_events"));
        let mut subscription = log.subscribe(1).unwrap();
        assert_eq!(try_next(&mut subscription), Some(2));
        log.append(delta(4, 2)).unwrap();
        let error = log.subscribe(2).unwrap_err();
        assert_eq!(error, exhausted("event_replay_bytes"));
    }

    #[tokio::test]
    async fn slow_subscribers_are_dropped_not_waited_for() {
        let log = log_with(subscriber(3, 1 << 20));
        let (mut slow, mut fast) = (log.subscribe(0).unwrap(), log.subscribe(0).unwrap());
        for sequence in 1..=5 {
            log.append(delta(sequence, 0)).unwrap();
            assert_eq!(next(&mut fast).await, Some(sequence));
        }
        assert!(slow.is_finished());
        assert_eq!(log.stats().slow_subscribers, 1);
        let resource = "event_subscription_events";
        let lagged = SubscriptionError::Lagged { resource };
        assert_eq!(slow.next().await, Err(lagged), "the queue was discarded");
        assert_eq!((slow.next().await, slow.last_delivered()), (Ok(None), 0));

        let log = log_with(subscriber(1024, 2 * BASE));
        let mut slow = log.subscribe(0).unwrap();
        for sequence in 1..=3 {
            log.append(delta(sequence, 0)).unwrap();
        }
        let resource = "event_subscription_bytes";
        let lagged = SubscriptionError::Lagged { resource };
        assert_eq!((slow.try_next(), slow.try_next()), (Err(lagged), Ok(None)));
        assert_eq!(log.stats().slow_subscribers, 1);
    }

    #[tokio::test]
    async fn close_drains_queued_events_then_ends() {
        let log = Arc::new(log_with(LogLimits::default()));
        log.append(delta(1, 0)).unwrap();
        let mut subscription = log.subscribe(0).unwrap();
        let waiter = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(sequence) = next(&mut subscription).await {
                seen.push(sequence);
            }
            seen
        });
        tokio::task::yield_now().await;
        log.append(delta(2, 0)).unwrap();
        log.append(failed(3, 0)).unwrap();
        log.close();
        assert_eq!(waiter.await.unwrap(), [1, 2, 3]);

        let page = log.replay(ReplayRequest::after(3).with_tail()).unwrap();
        let mut tail = page.tail.unwrap();
        assert!(tail.is_finished());
        assert_eq!(next(&mut tail).await, None);
        let mut late = log.subscribe(1).unwrap();
        assert_eq!(
            (next(&mut late).await, next(&mut late).await),
            (Some(2), Some(3))
        );
        assert_eq!((next(&mut late).await, late.last_delivered()), (None, 3));
    }

    #[test]
    fn dropped_subscriptions_are_pruned() {
        let log = log_with(LogLimits::default());
        let kept = log.subscribe(0).unwrap();
        drop(log.subscribe(0).unwrap());
        drop(log.replay(ReplayRequest::after(0).with_tail()).unwrap());
        log.append(delta(1, 0)).unwrap();
        assert_eq!(lock(&log.inner).subscribers.len(), 1);
        drop(kept);
        log.append(delta(2, 0)).unwrap();
        assert!(lock(&log.inner).subscribers.is_empty());
        assert_eq!(log.stats().slow_subscribers, 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Text length, terminal.
        Append(usize, bool),
        /// Cursor distance below `latest + 2`, page events, page bytes.
        Replay(u64, usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let append = (0usize..700, any::<bool>()).prop_map(|(len, t)| Op::Append(len, t));
        let replay = (0u64..12, 1usize..6, 1usize..1500);
        prop_oneof![3 => append, 1 => replay.prop_map(|(a, n, b)| Op::Replay(a, n, b))]
    }

    proptest! {
        #[test]
        fn pages_are_contiguous_and_the_window_is_a_suffix(
            max_events in 2usize..10,
            max_bytes in 1024usize..3000,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let log = log_with(LogLimits { terminal_reserve_bytes: 300, ..small(max_events, max_bytes) });
            let mut appended: Vec<usize> = Vec::new(); // accounted bytes of sequence i + 1
            for op in ops {
                match op {
                    Op::Append(len, terminal) => {
                        let sequence = appended.len() as u64 + 1;
                        let envelope = if terminal { failed(sequence, len) } else { delta(sequence, len) };
                        let (bytes, limit) = (envelope.accounted_bytes(), max_bytes - 300 * usize::from(!terminal));
                        match log.append(envelope) {
                            Ok(()) => appended.push(bytes),
                            Err(error) => {
                                prop_assert!(bytes > limit);
                                prop_assert_eq!(error, exhausted("event_log_bytes"));
                            }
                        }
                    }
                    Op::Replay(back, page_events, page_bytes) => {
                        let (earliest, latest) = (log.earliest(), log.last_sequence());
                        let after = (latest + 2).saturating_sub(back);
                        match log.replay(req(after, page_events, page_bytes)) {
                            Ok(page) => {
                                prop_assert!(after + 1 >= earliest && after <= latest);
                                let bytes: usize = page.events.iter().map(Envelope::accounted_bytes).sum();
                                prop_assert!(page.events.len() <= page_events && bytes <= page_bytes);
                                let expected: Vec<u64> = (after + 1..).take(page.events.len()).collect();
                                prop_assert_eq!(sequences(&page.events), expected);
                                let end = after + page.events.len() as u64;
                                prop_assert_eq!(page.has_more, end < latest);
                                if page.has_more && page.events.len() < page_events {
                                    prop_assert!(bytes + appended[end as usize] > page_bytes);
                                }
                            }
                            Err(LogError::OutOfRange { requested_after, earliest: e, latest: l }) => {
                                prop_assert!(after + 1 < earliest || after > latest);
                                prop_assert_eq!((requested_after, e, l), (after, earliest, latest));
                            }
                            Err(error) => {
                                prop_assert_eq!(error, exhausted("event_replay_bytes"));
                                prop_assert!(appended[after as usize] > page_bytes);
                            }
                        }
                    }
                }
                // The window is a suffix of what was appended (never empty after an append),
                // within the limits, and the stats agree with it.
                let window = retained(&log);
                let start = appended.len() - window.len();
                let expected: Vec<u64> = (start as u64 + 1..=appended.len() as u64).collect();
                prop_assert_eq!(&window, &expected);
                prop_assert!(appended.is_empty() || !window.is_empty());
                let bytes: usize = appended[start..].iter().sum();
                prop_assert!(window.len() <= max_events && bytes <= max_bytes);
                let stats = log.stats();
                prop_assert_eq!((stats.retained_events, stats.retained_bytes), (window.len(), bytes));
                prop_assert_eq!(stats.evicted_events, start as u64);
            }
        }
    }
}
