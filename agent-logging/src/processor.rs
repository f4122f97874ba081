//! The best-effort mailbox (the [`Observer`] side) and its single consumer (the `tracing`
//! side).
//!
//! Publishing filters, then `try_send`s into a bounded channel: a full mailbox drops the
//! incoming envelope and counts it, so a slow log sink can never hold a run up or fail it.
//! One consumer thread drains the channel under the `tracing` dispatcher that was current
//! when the logger started, and emits one record per envelope.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_core::event::{
    Envelope, Event, EventKind, FailureCode, Observer, ObserverError, ToolCompleted, ToolFailed,
    ToolOutcome, ToolStarted,
};
use agent_core::tool::BoxFuture;
use agent_core::tool::{Capability, Effect, ExecutionState, RetryDisposition};
use tracing::{Dispatch, Level, Span};

use crate::config::{Config, ConfigError, CorrelationKey};
use crate::pseudonym::Pseudonyms;

/// How many runs the consumer keeps `agent.run` / `agent.turn` spans open for at once. A
/// run whose terminal event was dropped would otherwise keep its span forever; past this
/// bound the oldest run's spans are closed.
pub const MAX_OPEN_RUN_SPANS: usize = 4096;

/// The record name of a decode failure.
pub const DECODE_FAILED: &str = "agent.event_decode_failed";

/// The record name of a drop report.
pub const EVENTS_DROPPED: &str = "agent.events_dropped";

/// Why the logger could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration's key could not be resolved.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The consumer thread could not be spawned.
    #[error("cannot start the log consumer: {0}")]
    Spawn(String),
}

/// Why [`EventLogger::close`] returned before the drain finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseError {
    /// The deadline passed first; the drain keeps running in the background and
    /// [`Snapshot::closed`] turns true when it ends.
    #[error("the log drain did not finish within the deadline")]
    DeadlineExceeded,
}

/// The projection's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Envelopes the consumer took from the mailbox.
    pub processed: u64,
    /// Envelopes that produced a record.
    pub handled: u64,
    /// Envelopes excluded by kind: at publish (`model.delta`, `tool.progress` unless
    /// included) plus those the consumer suppressed defensively.
    pub filtered: u64,
    /// Envelopes dropped because the mailbox was full (or already closed).
    pub dropped: u64,
    /// Records whose emission panicked in the subscriber.
    pub log_failures: u64,
    /// Tool occurrences that broke their rules (each logged as `agent.event_decode_failed`).
    pub decode_failures: u64,
    /// Whether the mailbox is closed and drained.
    pub closed: bool,
}

#[derive(Default)]
struct Counters {
    processed: AtomicU64,
    handled: AtomicU64,
    filtered: AtomicU64,
    dropped: AtomicU64,
    log_failures: AtomicU64,
    decode_failures: AtomicU64,
    closed: AtomicBool,
    /// The consumer ended without finishing its drain (it panicked outside a record).
    lost: AtomicBool,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Projects run events onto `tracing` records (see the crate docs for names, levels and
/// fields). Register it as an engine [`Observer`]: publishing never blocks and never
/// fails the run. [`close`](Self::close) it after the engine stopped.
pub struct EventLogger {
    config: Config,
    pseudonyms: Pseudonyms,
    counters: Arc<Counters>,
    sender: Mutex<Option<SyncSender<Envelope>>>,
    drained: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for EventLogger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLogger")
            .field("config", &self.config)
            .field("snapshot", &self.snapshot())
            .finish_non_exhaustive()
    }
}

impl EventLogger {
    /// Starts the consumer thread under the current `tracing` dispatcher (the global one,
    /// or a scoped default the caller set).
    pub fn start(config: Config) -> Result<Self, StartError> {
        let key = match config.correlation_key() {
            Some(key) => key.clone(),
            None => CorrelationKey::process()?,
        };
        let pseudonyms = Pseudonyms::new(key);
        let (sender, receiver) = sync_channel(config.mailbox_capacity());
        let (done, drained) = tokio::sync::watch::channel(false);
        let counters = Arc::new(Counters::default());
        let consumer = Consumer {
            include_progress: config.include_progress(),
            pseudonyms: pseudonyms.clone(),
            counters: counters.clone(),
            spans: HashMap::new(),
            opened: 0,
            reported_drops: 0,
        };
        let dispatch = tracing::dispatcher::get_default(Dispatch::clone);
        std::thread::Builder::new()
            .name("agent-logging".to_owned())
            .spawn(move || {
                let guard = DrainGuard {
                    counters: consumer.counters.clone(),
                    done,
                    finished: false,
                };
                tracing::dispatcher::with_default(&dispatch, || consumer.drain(receiver, guard));
            })
            .map_err(|e| StartError::Spawn(e.to_string()))?;
        Ok(EventLogger {
            config,
            pseudonyms,
            counters,
            sender: Mutex::new(Some(sender)),
            drained,
        })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The pseudonyms its records carry, to correlate a run the caller knows by id.
    pub fn pseudonyms(&self) -> &Pseudonyms {
        &self.pseudonyms
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        Snapshot {
            processed: c.processed.load(Ordering::Relaxed),
            handled: c.handled.load(Ordering::Relaxed),
            filtered: c.filtered.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            log_failures: c.log_failures.load(Ordering::Relaxed),
            decode_failures: c.decode_failures.load(Ordering::Relaxed),
            closed: c.closed.load(Ordering::Acquire),
        }
    }

    /// Offers one envelope to the mailbox: filtered by kind, dropped (and counted) when
    /// the mailbox is full or closed. Never blocks.
    pub fn offer(&self, envelope: &Envelope) {
        if excluded(envelope.kind(), self.config.include_progress()) {
            bump(&self.counters.filtered);
            return;
        }
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let sent = match sender.as_ref() {
            Some(sender) => match sender.try_send(envelope.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !sent {
            bump(&self.counters.dropped);
        }
    }

    /// Closes the mailbox (once; later calls only wait) and waits up to `deadline` for the
    /// consumer to drain it. Call it after the engine stopped publishing. On
    /// [`CloseError::DeadlineExceeded`] the drain continues in the background.
    pub async fn close(&self, deadline: Duration) -> Result<(), CloseError> {
        drop(
            self.sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let mut drained = self.drained.clone();
        match tokio::time::timeout(deadline, drained.wait_for(|done| *done)).await {
            // A closed watch means the consumer thread is gone, which is also the end.
            Ok(_) => Ok(()),
            Err(_) => Err(CloseError::DeadlineExceeded),
        }
    }

    /// The health contribution (docs/logging.md, "Health"): empty unless the configuration enables readiness
    /// impact.
    pub fn health(&self) -> LogHealth {
        if !self.config.readiness_impact() {
            return LogHealth::Healthy;
        }
        let snapshot = self.snapshot();
        if self.counters.lost.load(Ordering::Acquire)
            || (snapshot.closed && snapshot.log_failures > 0)
        {
            return LogHealth::Unavailable;
        }
        if snapshot.log_failures > 0 || snapshot.decode_failures > 0 || snapshot.dropped > 0 {
            return LogHealth::Degraded;
        }
        LogHealth::Healthy
    }
}

impl Observer for EventLogger {
    fn publish<'a>(&'a self, envelope: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        self.offer(envelope);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The reason a degraded log projection reports.
pub const DEPENDENCY_DEGRADED: &str = "dependency_degraded";

/// The reason an unavailable log projection reports.
pub const DEPENDENCY_UNAVAILABLE: &str = "dependency_unavailable";

/// What the projection contributes to a host's health, when readiness impact is enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogHealth {
    /// Nothing to report (also the answer when readiness impact is disabled).
    Healthy,
    /// A record was lost: a log failure, a decode failure or an overflow drop.
    Degraded,
    /// There is no consumer, or it closed after log failures.
    Unavailable,
}

impl LogHealth {
    /// The health of an optional logger: `None` with readiness impact enabled means no
    /// processor, which is [`Unavailable`](Self::Unavailable).
    ///
    /// ```
    /// use agent_logging::LogHealth;
    ///
    /// assert_eq!(LogHealth::of(None, false), LogHealth::Healthy);
    /// assert_eq!(LogHealth::of(None, true).reason(), Some("dependency_unavailable"));
    /// ```
    pub fn of(logger: Option<&EventLogger>, readiness_impact: bool) -> LogHealth {
        match logger {
            _ if !readiness_impact => LogHealth::Healthy,
            None => LogHealth::Unavailable,
            Some(logger) => logger.health(),
        }
    }

    /// The fixed degradation reason, or `None` when there is nothing to report.
    pub const fn reason(self) -> Option<&'static str> {
        match self {
            LogHealth::Healthy => None,
            LogHealth::Degraded => Some(DEPENDENCY_DEGRADED),
            LogHealth::Unavailable => Some(DEPENDENCY_UNAVAILABLE),
        }
    }
}

fn excluded(kind: EventKind, include_progress: bool) -> bool {
    kind == EventKind::ModelDelta || (kind == EventKind::ToolProgress && !include_progress)
}

/// Marks the drain finished when the consumer ends, normally or by a panic outside a
/// record (then the logger reports no processor).
struct DrainGuard {
    counters: Arc<Counters>,
    done: tokio::sync::watch::Sender<bool>,
    finished: bool,
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.counters.lost.store(true, Ordering::Release);
        }
        self.counters.closed.store(true, Ordering::Release);
        self.done.send_replace(true);
    }
}

/// What the consumer keeps for one run: its pseudonym (derived once) and open spans.
struct RunSpans {
    pseudonym: Arc<str>,
    run: Span,
    turn: Option<Span>,
    opened: u64,
}

struct Consumer {
    include_progress: bool,
    pseudonyms: Pseudonyms,
    counters: Arc<Counters>,
    spans: HashMap<Arc<str>, RunSpans>,
    opened: u64,
    reported_drops: u64,
}

/// The facts every record carries.
struct Base {
    run: Arc<str>,
    sequence: u64,
    at: u64,
}

impl Consumer {
    fn drain(mut self, receiver: Receiver<Envelope>, mut guard: DrainGuard) {
        while let Ok(envelope) = receiver.recv() {
            bump(&self.counters.processed);
            self.process(&envelope);
            self.report_drops();
        }
        self.report_drops();
        self.spans.clear();
        guard.finished = true;
    }

    fn process(&mut self, envelope: &Envelope) {
        if excluded(envelope.kind(), self.include_progress) {
            bump(&self.counters.filtered);
            return;
        }
        let (run, span) = self.span_for(envelope);
        let base = Base {
            run,
            sequence: envelope.sequence(),
            at: envelope.at().unix_nanos(),
        };
        let emitted = {
            let _entered = span.enter();
            self.guarded(|consumer| consumer.emit(envelope, &base))
        };
        if emitted {
            bump(&self.counters.handled);
        }
        if envelope.kind().ends_run() {
            self.spans.remove(envelope.run_id().as_str());
        } else if matches!(
            envelope.kind(),
            EventKind::TurnCompleted | EventKind::TurnFailed
        ) && let Some(spans) = self.spans.get_mut(envelope.run_id().as_str())
        {
            spans.turn = None;
        }
    }

    /// Runs one emission; a panic in the subscriber is a log failure, never more.
    fn guarded(&mut self, emit: impl FnOnce(&mut Self) -> Result<(), Malformed>) -> bool {
        match catch_unwind(AssertUnwindSafe(|| emit(self))) {
            Ok(Ok(())) => true,
            Ok(Err(Malformed)) => false,
            Err(_) => {
                bump(&self.counters.log_failures);
                false
            }
        }
    }

    /// The run's pseudonym and the span this envelope's record goes into: the run's turn
    /// span, else its run span, opened on first sight (a resumed run has no `run.started`
    /// here).
    fn span_for(&mut self, envelope: &Envelope) -> (Arc<str>, Span) {
        if !self.spans.contains_key(envelope.run_id().as_str()) {
            if self.spans.len() >= MAX_OPEN_RUN_SPANS
                && let Some(oldest) = self
                    .spans
                    .iter()
                    .min_by_key(|(_, spans)| spans.opened)
                    .map(|(id, _)| id.clone())
            {
                self.spans.remove(&oldest);
            }
            let pseudonym: Arc<str> = Arc::from(self.pseudonyms.run(envelope.run_id().as_str()));
            let run = catch_unwind(AssertUnwindSafe(|| {
                tracing::span!(target: "agent_logging", Level::INFO, "agent.run", run_correlation = &*pseudonym)
            }))
            .unwrap_or_else(|_| Span::none());
            self.opened += 1;
            self.spans.insert(
                Arc::from(envelope.run_id().as_str()),
                RunSpans {
                    pseudonym,
                    run,
                    turn: None,
                    opened: self.opened,
                },
            );
        }
        let Some(spans) = self.spans.get_mut(envelope.run_id().as_str()) else {
            return (
                Arc::from(self.pseudonyms.run(envelope.run_id().as_str())),
                Span::none(),
            );
        };
        if let Event::TurnStarted { turn } = envelope.event() {
            let turn = *turn;
            let parent = spans.run.clone();
            spans.turn = Some(
                catch_unwind(AssertUnwindSafe(|| {
                    tracing::span!(target: "agent_logging", parent: &parent, Level::DEBUG, "agent.turn", turn)
                }))
                .unwrap_or_else(|_| Span::none()),
            );
        }
        let span = spans.turn.clone().unwrap_or_else(|| spans.run.clone());
        (spans.pseudonym.clone(), span)
    }

    fn report_drops(&mut self) {
        let total = self.counters.dropped.load(Ordering::Relaxed);
        if total > self.reported_drops {
            let delta = total - self.reported_drops;
            self.reported_drops = total;
            self.guarded(|_| {
                tracing::event!(
                    name: "agent.events_dropped",
                    target: "agent_logging",
                    Level::WARN,
                    dropped_count = delta,
                    dropped_total = total,
                    "events dropped"
                );
                Ok(())
            });
        }
    }

    fn emit(&self, envelope: &Envelope, base: &Base) -> Result<(), Malformed> {
        macro_rules! record {
            ($level:ident, $name:literal, $message:literal $(, $field:ident = $value:expr)* $(,)?) => {
                tracing::event!(
                    name: $name,
                    target: "agent_logging",
                    Level::$level,
                    run_correlation = &*base.run,
                    sequence = base.sequence,
                    at_unix_nanos = base.at,
                    $($field = $value,)*
                    $message
                )
            };
        }
        let call = |call_id: &str| self.pseudonyms.call(envelope.run_id().as_str(), call_id);
        match envelope.event() {
            Event::RunStarted { .. } => record!(INFO, "agent.run.started", "run started"),
            Event::RunCompleted => record!(INFO, "agent.run.completed", "run completed"),
            // A run that failed because its model did repeats what `agent.model.failed`
            // said (at WARN): INFO. ERROR is for failures that are our bug.
            Event::RunFailed { code } if *code == FailureCode::ModelFailed => record!(
                INFO,
                "agent.run.failed",
                "run failed",
                failure_code = code.as_str()
            ),
            Event::RunFailed { code } => record!(
                ERROR,
                "agent.run.failed",
                "run failed",
                failure_code = code.as_str()
            ),
            Event::RunCancelled => record!(INFO, "agent.run.cancelled", "run cancelled"),
            Event::TurnStarted { turn } => {
                record!(DEBUG, "agent.turn.started", "turn started", turn = *turn)
            }
            Event::TurnCompleted { turn } => {
                record!(
                    DEBUG,
                    "agent.turn.completed",
                    "turn completed",
                    turn = *turn
                )
            }
            // A cancelled run is an expected outcome: its turn, model and tool records say
            // so at INFO; so does a turn that failed because its model did (the model's
            // record says it at WARN). ERROR is for failures someone must look at.
            Event::TurnFailed { turn, code }
                if matches!(code, FailureCode::Cancelled | FailureCode::ModelFailed) =>
            {
                record!(
                    INFO,
                    "agent.turn.failed",
                    "turn failed",
                    turn = *turn,
                    failure_code = code.as_str()
                )
            }
            Event::TurnFailed { turn, code } => record!(
                ERROR,
                "agent.turn.failed",
                "turn failed",
                turn = *turn,
                failure_code = code.as_str()
            ),
            Event::ModelStarted { turn } => {
                record!(DEBUG, "agent.model.started", "model started", turn = *turn)
            }
            Event::ModelCompleted {
                input_tokens,
                output_tokens,
            } => record!(
                DEBUG,
                "agent.model.completed",
                "model completed",
                input_tokens = *input_tokens,
                output_tokens = *output_tokens
            ),
            // The problem code is the provider's string: not logged. A model operation that
            // fails is the provider's answer (a rejected key, a rate limit, an outage), not
            // our bug: WARN. The kernel's own name for a cancelled one lowers it to INFO.
            Event::ModelFailed {
                problem,
                retryable,
                before_stream,
            } if problem == FailureCode::Cancelled.as_str() => record!(
                INFO,
                "agent.model.failed",
                "model failed",
                retryable = *retryable,
                before_stream = *before_stream
            ),
            Event::ModelFailed {
                retryable,
                before_stream,
                ..
            } => record!(
                WARN,
                "agent.model.failed",
                "model failed",
                retryable = *retryable,
                before_stream = *before_stream
            ),
            Event::ToolStarted(started) => {
                let facts = self.decode(envelope, started_facts(started))?;
                record!(
                    DEBUG,
                    "agent.tool.started",
                    "tool started",
                    tool_call_correlation = call(&started.call_id).as_str(),
                    turn = started.turn,
                    effect = facts.effect,
                    replay_safety = facts.replay_safety,
                    capabilities = facts.capabilities.as_str(),
                    declared = facts.declared,
                    executable = facts.declared,
                )
            }
            Event::ToolProgress { call_id, .. } => {
                self.decode(envelope, non_empty(call_id))?;
                record!(
                    TRACE,
                    "agent.tool.progress",
                    "tool progress",
                    tool_call_correlation = call(call_id).as_str()
                )
            }
            Event::ToolCompleted(completed) => {
                self.decode(envelope, completed_facts(completed))?;
                record!(
                    DEBUG,
                    "agent.tool.completed",
                    "tool completed",
                    tool_call_correlation = call(&completed.call_id).as_str(),
                    outcome = match completed.outcome {
                        ToolOutcome::Success => "success",
                        ToolOutcome::Problem => "problem",
                    }
                )
            }
            Event::ToolFailed(failed) => {
                self.decode(envelope, failed_facts(failed))?;
                if failed.code == FailureCode::Cancelled {
                    record!(
                        INFO,
                        "agent.tool.failed",
                        "tool failed",
                        tool_call_correlation = call(&failed.call_id).as_str(),
                        failure_code = failed.code.as_str(),
                        execution_state = failed.state.map(execution_state),
                        retry_disposition = failed.retry.map(retry_disposition),
                    )
                } else {
                    record!(
                        ERROR,
                        "agent.tool.failed",
                        "tool failed",
                        tool_call_correlation = call(&failed.call_id).as_str(),
                        failure_code = failed.code.as_str(),
                        execution_state = failed.state.map(execution_state),
                        retry_disposition = failed.retry.map(retry_disposition),
                    )
                }
            }
            // Interaction ids and kinds are not logged: only that one happened.
            Event::InteractionStarted { .. } => {
                record!(DEBUG, "agent.interaction.started", "interaction started")
            }
            Event::InteractionCompleted { .. } => {
                record!(
                    DEBUG,
                    "agent.interaction.completed",
                    "interaction completed"
                )
            }
            Event::InteractionFailed { .. } => {
                record!(ERROR, "agent.interaction.failed", "interaction failed")
            }
            Event::InteractionCancelled { .. } => {
                record!(INFO, "agent.interaction.cancelled", "interaction cancelled")
            }
            // Suppressed before this point; a kind added to the kernel later logs only its
            // (static) kind name.
            _ => record!(
                DEBUG,
                "agent.event",
                "event",
                event_kind = envelope.kind().as_str()
            ),
        }
        Ok(())
    }

    /// Passes a decoded occurrence through, or emits `agent.event_decode_failed` and counts
    /// it.
    fn decode<T>(&self, envelope: &Envelope, decoded: Option<T>) -> Result<T, Malformed> {
        match decoded {
            Some(facts) => Ok(facts),
            None => {
                bump(&self.counters.decode_failures);
                tracing::event!(
                    name: "agent.event_decode_failed",
                    target: "agent_logging",
                    Level::WARN,
                    run_correlation = self.pseudonyms.run(envelope.run_id().as_str()).as_str(),
                    sequence = envelope.sequence(),
                    event_kind = envelope.kind().as_str(),
                    "event decode failed"
                );
                Err(Malformed)
            }
        }
    }
}

/// A tool occurrence broke its rules; its decode failure was already logged.
struct Malformed;

/// What `agent.tool.started` logs.
struct StartedFacts {
    declared: bool,
    effect: &'static str,
    replay_safety: &'static str,
    capabilities: String,
}

fn non_empty(id: &str) -> Option<()> {
    (!id.is_empty()).then_some(())
}

/// `sha256:` and at least one lowercase hex digit.
fn sha256_ref(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        !hex.is_empty()
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The rules of docs/run-lifecycle.md ("Tool occurrences") that a typed `ToolStarted` can
/// still break.
fn started_facts(started: &ToolStarted) -> Option<StartedFacts> {
    non_empty(&started.call_id)?;
    non_empty(&started.name)?;
    non_empty(&started.plan_id)?;
    if started.turn == 0
        || !sha256_ref(&started.plan_fingerprint)
        || !sha256_ref(&started.plan_identity)
        || started.workspace.as_deref().is_some_and(|w| !sha256_ref(w))
    {
        return None;
    }
    let Some(facts) = started.declared.as_deref() else {
        return Some(StartedFacts {
            declared: false,
            effect: "",
            replay_safety: "",
            capabilities: String::new(),
        });
    };
    let fingerprint_ok = facts.fingerprint.len() == 64
        && facts
            .fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let canonical = facts.capabilities.windows(2).all(|w| w[0] < w[1]);
    let read_only_ok = facts.effect != Effect::ReadOnly
        || facts.capabilities.iter().all(|c| {
            matches!(
                c,
                Capability::EnvironmentRead | Capability::FilesystemRead | Capability::SecretsRead
            )
        });
    if !(fingerprint_ok && canonical && read_only_ok) {
        return None;
    }
    let mut capabilities: Vec<&str> = facts.capabilities.iter().map(|c| c.as_str()).collect();
    capabilities.sort_unstable();
    Some(StartedFacts {
        declared: true,
        effect: facts.effect.as_str(),
        replay_safety: facts.replay_safety.as_str(),
        capabilities: capabilities.join(","),
    })
}

fn completed_facts(completed: &ToolCompleted) -> Option<()> {
    non_empty(&completed.call_id)?;
    non_empty(&completed.name)
}

/// A failure's execution facts come as a pair, and an uncertain outcome never allows a
/// retry.
fn failed_facts(failed: &ToolFailed) -> Option<()> {
    non_empty(&failed.call_id)?;
    non_empty(&failed.name)?;
    match (failed.state, failed.retry) {
        (None, None) => Some(()),
        (Some(ExecutionState::Uncertain), Some(RetryDisposition::Allowed)) => None,
        (Some(_), Some(_)) => Some(()),
        _ => None,
    }
}

fn execution_state(state: ExecutionState) -> &'static str {
    match state {
        ExecutionState::Definitive => "definitive",
        ExecutionState::Uncertain => "uncertain",
    }
}

fn retry_disposition(retry: RetryDisposition) -> &'static str {
    match retry {
        RetryDisposition::Never => "never",
        RetryDisposition::Allowed => "allowed",
    }
}
