//! The run handle and the state it shares with the driver task.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::definition::AgentDefinition;
use super::identity::PlanIdentity;
use super::inner::EngineInner;
use super::ledger::LedgerKey;
use super::snapshot::{SNAPSHOT_VERSION, Snapshot, SnapshotError, SnapshotStatus, UnfinishedCall};
use crate::event::{Event, EventLog, FailureCode, LogError, ObserverError};
use crate::future::BoxFuture;
use crate::future::bounded;
use crate::interaction::{
    InteractionError, InteractionRequest, InteractionResponse, Requester, Scope,
};
use crate::message::Message;
use crate::model::Usage;
use crate::panic::{CatchUnwind, contained};
use crate::run_id::RunId;
use crate::stage::{PlanId, ReleaseError, ToolPlanLease};
use crate::tool::{Progress, ReportError, Reporter};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Executing (or finishing).
    Running,
    /// Parked at a turn boundary; see [`Run::resume`] and [`Run::snapshot`].
    Suspended,
    /// Ended with an answer.
    Completed,
    /// Ended with a failure.
    Failed,
    /// Ended because its token was cancelled.
    Cancelled,
}

/// What a completed run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// The model's final text (empty when it gave none).
    pub answer: String,
    /// Turns taken in total (including those before a resume).
    pub turns: u32,
    /// Tokens used in total.
    pub usage: Usage,
}

/// Why a run did not complete: a fixed code (the one its terminal event carries) and the
/// underlying error, if any, through [`source`](std::error::Error::source). The detail may
/// contain provider or tool text; it never reaches events.
#[derive(Debug, Clone)]
pub struct RunError {
    pub(crate) code: FailureCode,
    pub(crate) detail: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl RunError {
    pub(crate) fn new(code: FailureCode) -> Self {
        RunError { code, detail: None }
    }

    pub(crate) fn with(
        code: FailureCode,
        detail: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        RunError {
            code,
            detail: Some(Arc::new(detail)),
        }
    }

    /// Why, as a fixed code.
    pub fn code(&self) -> FailureCode {
        self.code
    }

    /// Whether the run was cancelled through its own token.
    pub fn is_cancelled(&self) -> bool {
        self.code == FailureCode::Cancelled
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            FailureCode::Cancelled => f.write_str("run was cancelled")?,
            code => write!(f, "run failed: {code}")?,
        }
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.detail
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Why a suspension did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SuspendError {
    /// The run ended (or reached its last turn) before a boundary where it could stop.
    #[error("the run ended before it could be suspended")]
    Finished,
    /// Another suspension request is pending.
    #[error("a suspension is already pending")]
    AlreadyRequested,
    /// Interactions were open at the boundary; the run went on.
    #[error("interactions were open at the turn boundary")]
    InteractionsActive,
    /// [`Run::resume`] was called on a run that is not suspended.
    #[error("the run is not suspended")]
    NotSuspended,
    /// A [`LocalResume`] holds the suspended boundary; its commit or abort decides.
    #[error("a local resume is already reserved")]
    ResumeReserved,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SuspendSlot {
    Idle,
    Requested,
    Refused(SuspendError),
}

/// The data a snapshot is built from; kept raw so runs that are never snapshotted pay
/// nothing for it.
pub(crate) struct SnapshotData {
    pub(crate) status: SnapshotStatus,
    pub(crate) completed_turns: u32,
    pub(crate) history: Arc<Vec<Message>>,
    pub(crate) usage: Usage,
    pub(crate) unfinished: Vec<UnfinishedCall>,
}

struct RunState {
    status: RunStatus,
    /// A [`LocalResume`] holds the suspended boundary: the run stays suspended, and a
    /// cancellation waits behind the reservation's decision.
    resume_reserved: bool,
    /// Some `suspend()` call has reported the current parking as done; from then on only
    /// `resume()` or cancellation may end it.
    suspension_acknowledged: bool,
    finishing: bool,
    suspend: SuspendSlot,
    /// Set while suspended or after the end.
    data: Option<SnapshotData>,
    outcome: Option<Result<RunOutput, RunError>>,
    active_interactions: u32,
    interaction_ids: BTreeSet<String>,
}

/// Why an emission failed, and whether the event was committed to the log anyway.
#[derive(Debug)]
pub(crate) enum EmitError {
    /// The operation was cancelled before the event was committed.
    Cancelled,
    Log(LogError),
    Observer(ObserverError),
    ObserverPanicked,
    ObserverTimedOut,
}

impl EmitError {
    pub(crate) fn committed(&self) -> bool {
        matches!(
            self,
            EmitError::Observer(_) | EmitError::ObserverPanicked | EmitError::ObserverTimedOut
        )
    }
}

/// The failure an emission error causes.
pub(crate) fn failure_for(error: EmitError) -> RunError {
    match error {
        EmitError::Cancelled => RunError::new(FailureCode::Cancelled),
        EmitError::Log(e) => RunError::with(FailureCode::EventLogExhausted, e),
        EmitError::Observer(e) => RunError::with(FailureCode::ObserverFailed, e),
        EmitError::ObserverPanicked => RunError::new(FailureCode::Panicked),
        EmitError::ObserverTimedOut => RunError::new(FailureCode::ObserverFailed),
    }
}

pub(crate) struct RunShared {
    /// The run's id, as the engine's ledger filed it.
    pub(crate) key: LedgerKey,
    pub(crate) engine: Arc<EngineInner>,
    pub(crate) cancel: CancellationToken,
    pub(crate) log: EventLog,
    pub(crate) lease: ToolPlanLease,
    /// What the run executes: the engine's static identity and the leased generation.
    pub(crate) identity: Arc<PlanIdentity>,
    pub(crate) agent: AgentDefinition,
    /// Serializes emission, so sequence numbers, the log and observers agree on one order.
    emit_lock: tokio::sync::Mutex<()>,
    /// The first emission that failed where the caller could not report it (inside a
    /// dispatch: progress, a guard's interaction); the driver fails the call with it.
    emission_failure: Mutex<Option<RunError>>,
    /// Whether `emission_failure` may hold one, so the driver's check after every turn and
    /// call reads a flag instead of taking the lock. Set and cleared under that lock.
    emission_failed: AtomicBool,
    state: Mutex<RunState>,
    changed: Notify,
}

impl RunShared {
    /// A running run's shared state; [`driver::launch`](super::driver::launch) starts
    /// the task that drives it.
    pub(crate) fn new(
        engine: Arc<EngineInner>,
        key: LedgerKey,
        (lease, identity): (ToolPlanLease, Arc<PlanIdentity>),
        log: EventLog,
        cancel: CancellationToken,
        agent: AgentDefinition,
        interaction_ids: BTreeSet<String>,
    ) -> Arc<RunShared> {
        Arc::new(RunShared {
            key,
            engine,
            cancel,
            log,
            lease,
            identity,
            agent,
            emit_lock: tokio::sync::Mutex::new(()),
            emission_failure: Mutex::new(None),
            emission_failed: AtomicBool::new(false),
            state: Mutex::new(RunState {
                status: RunStatus::Running,
                resume_reserved: false,
                suspension_acknowledged: false,
                finishing: false,
                suspend: SuspendSlot::Idle,
                data: None,
                outcome: None,
                active_interactions: 0,
                interaction_ids,
            }),
            changed: Notify::new(),
        })
    }

    /// Remembers `error` unless it is a plain cancellation (the run's token decides that).
    fn record_emission_failure(&self, error: EmitError) {
        if matches!(error, EmitError::Cancelled) {
            return;
        }
        let mut slot = self
            .emission_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(failure_for(error));
            self.emission_failed.store(true, Ordering::Release);
        }
    }

    /// The failure [`record_emission_failure`](Self::record_emission_failure) kept, if any.
    /// A failure recorded while this runs is seen by the next call, as with the lock alone.
    pub(crate) fn take_emission_failure(&self) -> Option<RunError> {
        if !self.emission_failed.load(Ordering::Acquire) {
            return None;
        }
        let mut slot = self
            .emission_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.emission_failed.store(false, Ordering::Relaxed);
        slot.take()
    }

    fn state(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every waiter. `changed` is only ever notified this way, and a `Notified`
    /// receives `notify_waiters` from its creation on, so a wait creates its future before
    /// reading the state and needs no `enable` (which would register it once more).
    fn notify(&self) {
        self.changed.notify_waiters();
    }

    /// The run's id.
    pub(crate) fn id(&self) -> &RunId {
        self.key.id()
    }

    /// Appends `event` to the log and hands it to every observer, in order. Ordinary
    /// emissions are refused once the run is cancelled; `detached` ones (terminals) are not,
    /// and observers get at most the finalization timeout for them.
    pub(crate) async fn emit(&self, event: Event, detached: bool) -> Result<(), EmitError> {
        if !detached && self.cancel.is_cancelled() {
            return Err(EmitError::Cancelled);
        }
        if self.engine.observers.is_empty() {
            // The log's own lock orders emitters; nothing is awaited. Keeping this path free
            // of the observer machinery keeps every caller's future small.
            return self
                .log
                .append_next(|| self.engine.clock.now(), event)
                .map_err(EmitError::Log);
        }
        Box::pin(self.emit_observed(event, detached)).await
    }

    async fn emit_observed(&self, event: Event, detached: bool) -> Result<(), EmitError> {
        // Observers are awaited in order, so emitters queue on an async lock.
        let _order = self.emit_lock.lock().await;
        let envelope = self
            .log
            .append_next_observed(|| self.engine.clock.now(), event)
            .map_err(EmitError::Log)?;
        for observer in &self.engine.observers {
            let publish = contained(|| observer.publish(&envelope))
                .map_err(|()| EmitError::ObserverPanicked)?;
            let publish = CatchUnwind::new(publish);
            let outcome = if detached {
                bounded(self.engine.options.finalization_timeout, publish).await
            } else {
                tokio::select! {
                    biased;
                    outcome = publish => Some(outcome),
                    () = self.cancel.cancelled() => None,
                }
            };
            match outcome {
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(error))) => return Err(EmitError::Observer(error)),
                Some(Err(_)) => return Err(EmitError::ObserverPanicked),
                None => return Err(EmitError::ObserverTimedOut),
            }
        }
        Ok(())
    }

    /// Whether a suspension waits for the next boundary.
    pub(crate) fn suspension_requested(&self) -> bool {
        self.state().suspend == SuspendSlot::Requested
    }

    /// At a completed non-final turn boundary: parks the run if a suspension is pending
    /// and no interaction is open. Returns the data back when the run was not parked, or
    /// `None` after it was parked and resumed.
    pub(crate) fn offer_suspension(&self, data: SnapshotData) -> Option<SnapshotData> {
        let mut state = self.state();
        if state.suspend != SuspendSlot::Requested {
            return Some(data);
        }
        if state.active_interactions > 0 {
            state.suspend = SuspendSlot::Refused(SuspendError::InteractionsActive);
            drop(state);
            self.notify();
            return Some(data);
        }
        state.suspend = SuspendSlot::Idle;
        state.status = RunStatus::Suspended;
        state.suspension_acknowledged = false;
        state.data = Some(data);
        drop(state);
        self.notify();
        None
    }

    /// Waits while suspended; `false` when the run was cancelled meanwhile. Gives the
    /// snapshot data back so the loop continues with it. While a local resume is reserved,
    /// a cancellation is latched: only the reservation's commit or abort ends the wait.
    pub(crate) async fn wait_while_suspended(&self) -> (Option<SnapshotData>, bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            let reserved = {
                let mut state = self.state();
                if state.status != RunStatus::Suspended {
                    return (state.data.take(), true);
                }
                state.resume_reserved
            };
            if reserved {
                notified.await;
                continue;
            }
            tokio::select! {
                () = &mut notified => {}
                () = self.cancel.cancelled() => {
                    let mut state = self.state();
                    if state.resume_reserved {
                        // Reserved since the check above: the cancellation waits.
                        continue;
                    }
                    state.status = RunStatus::Running;
                    return (state.data.take(), false);
                }
            }
        }
    }

    /// First step of finalization: no suspension or interaction can start any more.
    /// Returns whether interactions are still open; none opens from now on, so without
    /// any there is nothing to wait for.
    pub(crate) fn begin_finishing(&self) -> bool {
        let mut state = self.state();
        state.finishing = true;
        let interacting = state.active_interactions > 0;
        if state.suspend == SuspendSlot::Requested {
            state.suspend = SuspendSlot::Refused(SuspendError::Finished);
            drop(state);
            self.notify();
        }
        interacting
    }

    pub(crate) async fn wait_for_interactions(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            if self.state().active_interactions == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Last step of finalization: records the outcome and wakes every waiter.
    pub(crate) fn finish(&self, outcome: Result<RunOutput, RunError>, data: SnapshotData) {
        let mut state = self.state();
        state.status = match &outcome {
            Ok(_) => RunStatus::Completed,
            Err(e) if e.is_cancelled() => RunStatus::Cancelled,
            Err(_) => RunStatus::Failed,
        };
        state.data = Some(data);
        state.outcome = Some(outcome);
        drop(state);
        self.notify();
    }

    async fn interact(
        &self,
        request: InteractionRequest,
        cancel: &CancellationToken,
    ) -> Result<InteractionResponse, InteractionError> {
        {
            let mut state = self.state();
            if state.finishing || state.outcome.is_some() {
                return Err(InteractionError::Closed);
            }
            // A parked run must not grow its log: its snapshot may already be exported.
            if state.status == RunStatus::Suspended {
                return Err(InteractionError::Unavailable);
            }
            if state.interaction_ids.contains(request.id()) {
                return Err(InteractionError::DuplicateId {
                    id: request.id().to_owned(),
                });
            }
            state.interaction_ids.insert(request.id().to_owned());
            state.active_interactions += 1;
        }
        let _active = ActiveInteraction(self);
        let id = request.id().to_owned();
        let started = Event::InteractionStarted {
            id: id.clone(),
            kind: request.kind().to_owned(),
        };
        if let Err(error) = self.emit(started, false).await {
            let cancelled = matches!(error, EmitError::Cancelled) || cancel.is_cancelled();
            let committed = error.committed();
            self.record_emission_failure(error);
            if committed {
                let terminal = if self.cancel.is_cancelled() || cancel.is_cancelled() {
                    Event::InteractionCancelled { id }
                } else {
                    Event::InteractionFailed { id }
                };
                let _ = self.emit(terminal, true).await;
            }
            return Err(if cancelled {
                InteractionError::Cancelled
            } else {
                InteractionError::Unavailable
            });
        }
        let outcome = match Scope::new(Arc::clone(self.id().as_arc())) {
            Ok(scope) => {
                let broker = self.engine.broker();
                match contained(|| broker.request(&scope, &request, &self.cancel)) {
                    Ok(future) => tokio::select! {
                        biased;
                        outcome = CatchUnwind::new(future) => {
                            outcome.unwrap_or(Err(InteractionError::Unavailable))
                        }
                        () = self.cancel.cancelled() => Err(InteractionError::Cancelled),
                        () = cancel.cancelled() => Err(InteractionError::Cancelled),
                    },
                    Err(_) => Err(InteractionError::Unavailable),
                }
            }
            Err(error) => Err(error),
        };
        let outcome = match outcome {
            Ok(response) if response.id() != id => {
                Err(InteractionError::Mismatch { id: id.clone() })
            }
            other => other,
        };
        let terminal = match &outcome {
            Ok(_) => Event::InteractionCompleted { id },
            Err(_) if self.cancel.is_cancelled() || cancel.is_cancelled() => {
                Event::InteractionCancelled { id }
            }
            Err(_) => Event::InteractionFailed { id },
        };
        // The terminal pairs with the committed start; a failure here is the run's to see.
        if let Err(error) = self.emit(terminal, true).await {
            self.record_emission_failure(error);
        }
        outcome
    }
}

/// Counts an open interaction; finalization waits for every one to close.
struct ActiveInteraction<'a>(&'a RunShared);

impl Drop for ActiveInteraction<'_> {
    fn drop(&mut self) {
        self.0.state().active_interactions -= 1;
        self.0.notify();
    }
}

/// Tool progress becomes `tool.progress` events.
impl Reporter for RunShared {
    fn report(&self, progress: Progress) -> BoxFuture<'_, Result<(), ReportError>> {
        Box::pin(async move {
            let event = Event::ToolProgress {
                call_id: progress.call_id().to_owned(),
                message: progress.message().to_owned(),
            };
            self.emit(event, false).await.map_err(|error| {
                self.record_emission_failure(error);
                ReportError::new("progress could not be recorded")
            })
        })
    }
}

/// The run-bound capability guards receive through the dispatch scope: the run's shared
/// state itself, so a run with tools pays no allocation for it.
impl Requester for RunShared {
    fn request<'a>(
        &'a self,
        request: InteractionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        Box::pin(self.interact(request, cancel))
    }
}

/// A started run. Cheap to clone; clones observe the same run.
#[derive(Clone)]
pub struct Run {
    shared: Arc<RunShared>,
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("id", self.shared.id())
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Run {
    pub(crate) fn new(shared: Arc<RunShared>) -> Run {
        Run { shared }
    }

    /// The run's id.
    pub fn id(&self) -> &RunId {
        self.shared.id()
    }

    /// The agent it executes.
    pub fn agent(&self) -> &AgentDefinition {
        &self.shared.agent
    }

    /// The leased tool plan generation.
    pub fn plan_id(&self) -> &PlanId {
        self.shared.lease.id()
    }

    /// The leased plan's fingerprint.
    pub fn plan_fingerprint(&self) -> &str {
        self.shared.lease.fingerprint()
    }

    /// What the run executes: the engine's static identity and the leased generation with
    /// its definitions, as one identity. A resumed run has its snapshot's.
    pub fn plan_identity(&self) -> &PlanIdentity {
        &self.shared.identity
    }

    /// The run's authoritative event log: replay pages and live subscriptions.
    pub fn events(&self) -> &EventLog {
        &self.shared.log
    }

    /// Where the run stands now.
    pub fn status(&self) -> RunStatus {
        self.shared.state().status
    }

    /// Cancels the run (cooperatively: code that ignores cancellation cannot be stopped).
    /// The terminal event is `run.cancelled`.
    pub fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// Waits until the terminal event is committed and returns the outcome. A suspended
    /// run is not finished: this keeps waiting.
    pub async fn wait(&self) -> Result<RunOutput, RunError> {
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            if let Some(outcome) = &self.shared.state().outcome {
                return outcome.clone();
            }
            notified.await;
        }
    }

    /// Asks the run to stop at the next completed turn boundary that is not its last, and
    /// waits until it did. Refused with [`SuspendError::ResumeReserved`] while a
    /// [`LocalResume`] holds the boundary: its commit would continue the run, so the run
    /// cannot be promised to stay parked. If this future is dropped first, the request is withdrawn (and a
    /// run that had just stopped is resumed), so an abandoned or failed suspension never
    /// leaves the run parked.
    pub async fn suspend(&self) -> Result<(), SuspendError> {
        {
            let mut state = self.shared.state();
            if state.finishing || state.outcome.is_some() {
                return Err(SuspendError::Finished);
            }
            if state.resume_reserved {
                // The boundary is the reservation's: its commit continues the run, so this
                // caller cannot be told the run stays parked.
                return Err(SuspendError::ResumeReserved);
            }
            if state.status == RunStatus::Suspended {
                state.suspension_acknowledged = true;
                return Ok(());
            }
            if state.suspend == SuspendSlot::Requested {
                return Err(SuspendError::AlreadyRequested);
            }
            state.suspend = SuspendSlot::Requested;
        }
        let mut withdraw = Withdraw {
            shared: &self.shared,
            armed: true,
        };
        loop {
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            {
                let mut state = self.shared.state();
                if state.resume_reserved {
                    // Parked for this request, but a local resume took the boundary first.
                    withdraw.armed = false;
                    return Err(SuspendError::ResumeReserved);
                }
                if state.status == RunStatus::Suspended {
                    state.suspension_acknowledged = true;
                    withdraw.armed = false;
                    return Ok(());
                }
                if let SuspendSlot::Refused(error) = &state.suspend {
                    let error = error.clone();
                    state.suspend = SuspendSlot::Idle;
                    withdraw.armed = false;
                    return Err(error);
                }
                if state.outcome.is_some() {
                    state.suspend = SuspendSlot::Idle;
                    withdraw.armed = false;
                    return Err(SuspendError::Finished);
                }
            }
            notified.await;
        }
    }

    /// Continues a suspended run in place. Its snapshot can no longer be exported. The same
    /// as [`prepare_local_resume`](Self::prepare_local_resume) then
    /// [`LocalResume::commit`].
    pub fn resume(&self) -> Result<(), SuspendError> {
        self.prepare_local_resume()?.commit();
        Ok(())
    }

    /// Reserves the exact suspended boundary for a decision: the run stays suspended and
    /// nothing happens until [`LocalResume::commit`] (the run continues from the boundary)
    /// or [`LocalResume::abort`] (the run is suspended exactly as before: its snapshot is
    /// byte-identical). Meanwhile a cancellation (of the run, or by an engine shutdown) is
    /// latched and no snapshot is exported; after a commit the run goes straight to
    /// `run.cancelled` without post-boundary work, after an abort the suspended run is
    /// cancelled as usual. Takes no time and does no I/O, so a host can durably invalidate
    /// an exported snapshot between the reservation and the commit.
    ///
    /// ```
    /// # use std::collections::BTreeMap;
    /// # use std::sync::Arc;
    /// # use agent_core::agent::{AgentDefinition, Engine, RunStatus};
    /// # use agent_core::message::Message;
    /// # use agent_core::model::{ModelRequest, ScriptedProvider, StreamEvent, Usage};
    /// # use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    /// # use agent_core::tool::*;
    /// # struct Echo(Definition);
    /// # impl Tool for Echo {
    /// #     fn definition(&self) -> &Definition { &self.0 }
    /// #     fn execute<'a>(&'a self, call: Call, _ctx: ToolContext<'a>) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
    /// #         Box::pin(async move { Ok(ToolResult::success(call.id(), "ok")) })
    /// #     }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let echo = Definition::builder("echo", "Echoes.").effect(Effect::ReadOnly).replay_safety(ReplaySafety::Safe).build()?;
    /// # let tools = BTreeMap::from([("echo".to_owned(), Arc::new(Echo(echo)) as Arc<dyn Tool>)]);
    /// # let provider = Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
    /// #     if request.messages().len() == 1 {
    /// #         vec![StreamEvent::ToolCall(Call::new("c1", "echo", serde_json::json!({})).unwrap()), StreamEvent::Completed { usage: Usage::new(1, 1) }]
    /// #     } else {
    /// #         vec![StreamEvent::Completed { usage: Usage::new(1, 1) }]
    /// #     }
    /// # }));
    /// # let engine = Engine::builder(provider, StaticToolPlanSource::from_dispatcher(Dispatcher::new(tools)?)).build()?;
    /// let run = engine.start(&AgentDefinition::new("a", "scripted", 3)?, Message::user("hi")?).await?;
    /// run.suspend().await?;
    /// let before = run.snapshot()?.to_json();
    ///
    /// let reservation = run.prepare_local_resume()?;
    /// assert!(run.snapshot().is_err()); // reserved: nothing is exported
    /// reservation.abort().await?;
    /// assert_eq!(run.snapshot()?.to_json(), before); // exactly as it was
    ///
    /// run.prepare_local_resume()?.commit(); // continues from the boundary
    /// run.wait().await?;
    /// assert_eq!(run.status(), RunStatus::Completed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prepare_local_resume(&self) -> Result<LocalResume, SuspendError> {
        let mut state = self.shared.state();
        if state.status != RunStatus::Suspended {
            return Err(SuspendError::NotSuspended);
        }
        if state.resume_reserved {
            return Err(SuspendError::ResumeReserved);
        }
        if self.shared.cancel.is_cancelled() {
            // The run is on its way to `run.cancelled`; there is no boundary to reserve.
            return Err(SuspendError::Finished);
        }
        state.resume_reserved = true;
        // The parking is now the reservation's to end; a withdrawn suspend() must not.
        state.suspension_acknowledged = true;
        Ok(LocalResume {
            id: self.shared.id().clone(),
            shared: Some(self.shared.clone()),
        })
    }

    /// A snapshot of the run: while suspended (status `suspended`) or after it ended. Not
    /// while a local resume is reserved ([`SnapshotError::ResumeReserved`]).
    pub fn snapshot(&self) -> Result<Snapshot, SnapshotError> {
        let state = self.shared.state();
        if state.active_interactions > 0 {
            return Err(SnapshotError::InteractionsActive(state.active_interactions));
        }
        if state.resume_reserved {
            return Err(SnapshotError::ResumeReserved);
        }
        let Some(data) = &state.data else {
            return Err(SnapshotError::NotAtBoundary);
        };
        if state.status == RunStatus::Running {
            return Err(SnapshotError::NotAtBoundary);
        }
        Ok(Snapshot {
            version: SNAPSHOT_VERSION.to_owned(),
            run_id: self.shared.id().clone(),
            agent: self.shared.agent.clone(),
            status: data.status,
            completed_turns: data.completed_turns,
            history: data.history.as_ref().clone(),
            // Built from the leased generation, so its plan id and fingerprint are the lease's.
            plan: PlanIdentity::clone(&self.shared.identity),
            last_sequence: self.shared.log.last_sequence(),
            usage: data.usage,
            unfinished_calls: data.unfinished.clone(),
            interaction_ids: state.interaction_ids.clone(),
        })
    }

    /// Asks the run's user through the engine's broker, recording `interaction.*` events.
    /// Each id may be used once per run (across resumes too).
    pub async fn interact(
        &self,
        request: InteractionRequest,
        cancel: &CancellationToken,
    ) -> Result<InteractionResponse, InteractionError> {
        self.shared.interact(request, cancel).await
    }
}

/// The reserved suspended boundary of a run; see [`Run::prepare_local_resume`]. Exactly one
/// of [`commit`](Self::commit) or [`abort`](Self::abort) happens; dropping it aborts.
pub struct LocalResume {
    /// Kept beside the state, so the id outlives the decision that takes the state.
    id: RunId,
    shared: Option<Arc<RunShared>>,
}

impl fmt::Debug for LocalResume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalResume")
            .field("run_id", &self.run_id())
            .finish_non_exhaustive()
    }
}

impl LocalResume {
    /// The run's id.
    pub fn run_id(&self) -> &RunId {
        &self.id
    }

    /// The sequence number the run's next event will get.
    pub fn next_sequence(&self) -> u64 {
        self.shared
            .as_ref()
            .map_or(0, |s| s.log.last_sequence().saturating_add(1))
    }

    /// Continues the run from the reserved boundary; its suspended snapshot can no longer
    /// be exported. A latched cancellation applies at once: the run ends `run.cancelled`
    /// without starting another turn.
    pub fn commit(mut self) {
        if let Some(shared) = self.shared.take() {
            let mut state = shared.state();
            state.resume_reserved = false;
            state.status = RunStatus::Running;
            drop(state);
            shared.notify();
        }
    }

    /// Gives the boundary back: the run is suspended exactly as before (its snapshot is
    /// byte-identical), and a latched cancellation now cancels it.
    ///
    /// The same shape as [`PreparedRun::abort`](super::PreparedRun::abort) and
    /// [`PausedRun::abort`](super::PausedRun::abort), so a host undoes every reservation
    /// with one `abort().await?`: those wait for a plan lease to be released, while a local
    /// resume holds no lease of its own, so this is ready at once and never fails.
    pub async fn abort(mut self) -> Result<(), ReleaseError> {
        self.release();
        Ok(())
    }

    fn release(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.state().resume_reserved = false;
            shared.notify();
        }
    }
}

impl Drop for LocalResume {
    fn drop(&mut self) {
        self.release();
    }
}

/// Withdraws a suspension request whose caller stopped waiting.
struct Withdraw<'a> {
    shared: &'a RunShared,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.shared.state();
        match state.status {
            // Parked for this request, and nobody was told: undo it.
            RunStatus::Suspended if !state.suspension_acknowledged => {
                state.status = RunStatus::Running;
            }
            RunStatus::Suspended => {}
            _ => {
                if state.suspend == SuspendSlot::Requested {
                    state.suspend = SuspendSlot::Idle;
                }
            }
        }
        drop(state);
        self.shared.notify();
    }
}
