//! Observing: event replay with its live tail ([`EventObservation`], [`TailLag`]) and the
//! client's pending interactions ([`InteractionObservation`]).

use std::fmt;

use agent_core::event::{Envelope, LogError, ReplayRequest, Subscription};
use agent_core::interaction::{PendingDelta, PendingSnapshot};
use tokio_util::sync::CancellationToken;

use super::RunHost;
use crate::error::HostError;
use crate::pending::PendingObserver;
use crate::session::Session;

impl RunHost {
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
