//! Starting a run, and its turn loop, run on one task per run.

use std::sync::Arc;

use super::definition::AgentDefinition;
use super::identity::PlanIdentity;
use super::inner::EngineInner;
use super::ledger::{LedgerKey, Release};
use super::release::release_bounded;
use super::run::{EmitError, RunShared, SnapshotData, failure_for};
use super::run::{Run, RunError, RunOutput};
use super::run_task;
use super::snapshot::{CallState, Snapshot, SnapshotStatus, UnfinishedCall};
use crate::event::EventLog;
use crate::event::{Event, FailureCode, ToolCompleted, ToolFailed, ToolOutcome, ToolStarted};
use crate::future::unless_cancelled;
use crate::interaction::Requester;
use crate::message::{Message, Part, Role, ToolResultPart};
use crate::model::{
    EventStream, MAX_MESSAGES, MAX_OPERATION_TEXT_BYTES, MAX_OPERATION_TOOL_CALLS,
    MAX_REQUEST_BYTES, MAX_TEXT_DELTA_BYTES, ModelRequest, StreamEvent, Usage,
};
use crate::panic::{CatchUnwind, contained};
use crate::stage::ToolPlanLease;
use crate::stage::{ContractViolation, DispatchError, DispatchRequest, DispatchScope};
use crate::text::{Decimal, ShortText};
use crate::tool::{Call, Effect, ExecutionState, RetryDisposition, ToolFacts};
use std::collections::BTreeSet;
use tokio_util::sync::CancellationToken;

/// How a run begins.
pub(crate) enum Start {
    Fresh {
        agent: AgentDefinition,
        input: Message,
    },
    /// A fresh run whose history already holds an earlier conversation (checked).
    Continued {
        agent: AgentDefinition,
        history: Vec<Message>,
    },
    Resumed(Box<Snapshot>),
}

/// Starts a run: its shared state, then the task that drives it on `runtime`.
pub(crate) fn launch(
    runtime: &tokio::runtime::Handle,
    engine: Arc<EngineInner>,
    key: LedgerKey,
    (lease, identity): (ToolPlanLease, Arc<PlanIdentity>),
    log: EventLog,
    cancel: CancellationToken,
    start: Start,
) -> Run {
    let (agent, interaction_ids, loop_state) = match start {
        Start::Fresh { agent, input } => (agent, BTreeSet::new(), LoopState::fresh(input)),
        Start::Continued { agent, history } => {
            (agent, BTreeSet::new(), LoopState::continued(history))
        }
        Start::Resumed(snapshot) => {
            let snapshot = *snapshot;
            let agent = snapshot.agent.clone();
            let ids = snapshot.interaction_ids.clone();
            (agent, ids, LoopState::resumed(snapshot))
        }
    };
    let shared = RunShared::new(
        engine,
        key,
        (lease, identity),
        log,
        cancel,
        agent,
        interaction_ids,
    );
    // The task holds the driver boxed, which lets one task run one run after another; a
    // box the allocator's per-thread cache serves is also cheaper than a large task cell,
    // which tokio aligns to a cache line.
    run_task::spawn(runtime, Box::pin(drive(shared.clone(), loop_state)));
    Run::new(shared)
}

/// How far one requested tool call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallProgress {
    NotStarted,
    /// `tool.started` was committed; no outcome is known.
    Started,
    /// A result is in history.
    Done,
    /// The tool reported an infrastructure failure.
    Failed(ExecutionState, RetryDisposition),
}

/// Where a call of the open round sits in history: the assistant message that requested it
/// and its part there. The round reads its calls from history instead of keeping copies of
/// them (history is only ever appended to, so the position stays valid).
#[derive(Debug, Clone, Copy)]
struct CallAt {
    message: usize,
    part: usize,
}

impl CallAt {
    /// The latest request of call `id` in history.
    fn find<'h>(history: &'h [Message], id: &str) -> Option<(CallAt, &'h Call)> {
        history.iter().enumerate().rev().find_map(|(message, m)| {
            m.parts().iter().enumerate().find_map(|(part, p)| match p {
                Part::ToolCall(call) if call.id() == id => Some((CallAt { message, part }, call)),
                _ => None,
            })
        })
    }

    fn call(self, history: &[Message]) -> Option<&Call> {
        match history.get(self.message)?.parts().get(self.part)? {
            Part::ToolCall(call) => Some(call),
            _ => None,
        }
    }
}

struct OpenCall {
    at: CallAt,
    facts: Option<Arc<ToolFacts>>,
    progress: CallProgress,
}

impl OpenCall {
    fn unfinished(&self, history: &[Message]) -> Option<UnfinishedCall> {
        let Some(call) = self.at.call(history) else {
            debug_assert!(false, "an open call is always in history");
            return None;
        };
        let effect = self.facts.as_ref().map(|f| f.effect);
        let (state, retry) = match self.progress {
            CallProgress::Done => return None,
            CallProgress::NotStarted => (CallState::NotStarted, None),
            CallProgress::Started if effect == Some(Effect::ReadOnly) => {
                (CallState::Interrupted, None)
            }
            CallProgress::Started => (CallState::Uncertain, None),
            CallProgress::Failed(ExecutionState::Uncertain, _) => {
                (CallState::Uncertain, Some(RetryDisposition::Never))
            }
            CallProgress::Failed(ExecutionState::Definitive, retry) => {
                (CallState::Failed, Some(retry))
            }
        };
        Some(UnfinishedCall {
            call_id: call.id().to_owned(),
            name: call.name().to_owned(),
            state,
            effect,
            replay_safety: self.facts.as_ref().map(|f| f.replay_safety),
            retry,
        })
    }
}

/// What the loop owns while it runs.
pub(crate) struct LoopState {
    history: Arc<Vec<Message>>,
    history_bytes: usize,
    completed_turns: u32,
    fresh: bool,
    usage: Usage,
    answer: String,
    round: Vec<OpenCall>,
    /// Calls a resumed snapshot left open, settled at the start of the first turn.
    pending: Vec<UnfinishedCall>,
}

impl LoopState {
    pub(crate) fn fresh(input: Message) -> Self {
        // Four messages is what the first append would grow the history to anyway; reserving
        // them up front saves that reallocation in every run that uses a tool.
        let history_bytes = input.size_bytes();
        let mut history = Vec::with_capacity(4);
        history.push(input);
        LoopState {
            history_bytes,
            history: Arc::new(history),
            completed_turns: 0,
            fresh: true,
            usage: Usage::default(),
            answer: String::new(),
            round: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// A fresh run over a checked conversation: its turns count from 1.
    pub(crate) fn continued(history: Vec<Message>) -> Self {
        LoopState {
            history_bytes: history.iter().map(Message::size_bytes).sum(),
            history: Arc::new(history),
            completed_turns: 0,
            fresh: true,
            usage: Usage::default(),
            answer: String::new(),
            round: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(crate) fn resumed(snapshot: Snapshot) -> Self {
        let answer = match snapshot.history.last() {
            Some(last) if last.role() == Role::Assistant => last.text().into_owned(),
            _ => String::new(),
        };
        LoopState {
            history_bytes: snapshot.history.iter().map(Message::size_bytes).sum(),
            history: Arc::new(snapshot.history),
            completed_turns: snapshot.completed_turns,
            fresh: false,
            usage: snapshot.usage,
            answer,
            round: Vec::new(),
            pending: snapshot.unfinished_calls,
        }
    }

    fn push(&mut self, message: Message) -> Result<(), RunError> {
        let size = message.size_bytes();
        if self.history.len() >= MAX_MESSAGES || self.history_bytes + size > MAX_REQUEST_BYTES {
            return Err(RunError::with(FailureCode::ModelProtocol, HistoryFull));
        }
        self.history_bytes += size;
        Arc::make_mut(&mut self.history).push(message);
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the run's history reached its bound")]
struct HistoryFull;

#[derive(Debug, thiserror::Error)]
#[error("the model requested undeclared tool `{0}`")]
struct UndeclaredTool(String);

#[derive(Debug, thiserror::Error)]
#[error("the model reused tool call id `{0}`")]
struct DuplicateCallId(String);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Protocol(&'static str);

/// The model's answer for one turn.
struct Response {
    text: String,
    calls: Vec<Call>,
    usage: Usage,
}

/// A failed model operation: what `model.failed` says, and the run's failure.
struct ModelFailure {
    problem: String,
    retryable: bool,
    before_stream: bool,
    failure: RunError,
}

impl ModelFailure {
    fn protocol(why: &'static str, observed: bool) -> Self {
        ModelFailure {
            problem: "model_protocol".to_owned(),
            retryable: false,
            before_stream: !observed,
            failure: RunError::with(FailureCode::ModelProtocol, Protocol(why)),
        }
    }

    fn cancelled(observed: bool) -> Self {
        ModelFailure {
            problem: "cancelled".to_owned(),
            retryable: false,
            before_stream: !observed,
            failure: RunError::new(FailureCode::Cancelled),
        }
    }

    fn panicked(observed: bool) -> Self {
        ModelFailure {
            problem: "panicked".to_owned(),
            retryable: false,
            before_stream: !observed,
            failure: RunError::new(FailureCode::Panicked),
        }
    }

    fn problem(
        problem: &crate::model::ModelProblem,
        observed: bool,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ModelFailure {
            problem: problem.code().to_owned(),
            retryable: problem.is_retryable() && !observed,
            before_stream: !observed,
            failure: RunError::with(FailureCode::ModelFailed, error),
        }
    }
}

/// Owns the stream and contains a panic from its destructor.
struct StreamGuard(Option<Box<dyn EventStream>>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let stream = self.0.take();
        let _ = contained(move || drop(stream));
    }
}

/// The run task: the loop, then finalization, whatever happened.
///
/// An `async` block rather than an `async fn`: a function's parameters would be kept twice
/// in the future (as captured and as moved-in locals), the block's captures once.
#[expect(
    clippy::manual_async_fn,
    reason = "the block keeps the loop state once"
)]
pub(crate) fn drive(
    shared: Arc<RunShared>,
    mut state: LoopState,
) -> impl Future<Output = ()> + Send + 'static {
    async move {
        let result = {
            let run = std::pin::pin!(run_loop(&shared, &mut state));
            match CatchUnwind::new(run).await {
                Ok(result) => result,
                Err(_) => Err(RunError::new(FailureCode::Panicked)),
            }
        };
        finalize(&shared, state, result).await;
    }
}

/// The terminal classification comes from the run's own token only.
fn classify(shared: &RunShared, failure: RunError) -> RunError {
    // Read once: each read takes the token's lock, and one reading decides both ways.
    let cancelled = shared.cancel.is_cancelled();
    if cancelled && failure.code != FailureCode::Cancelled {
        RunError {
            code: FailureCode::Cancelled,
            detail: failure.detail,
        }
    } else if !cancelled && failure.code == FailureCode::Cancelled {
        // Something else reported a cancellation while the run was alive.
        RunError {
            code: FailureCode::ToolFailed,
            detail: failure.detail,
        }
    } else {
        failure
    }
}

/// Writes a `*.started` event. If the write fails, the run fails with the classified
/// failure; if the event was committed all the same, the pair `failed` builds from the
/// failure's code is written first, so no started event is left without its end.
async fn emit_started(
    shared: &Arc<RunShared>,
    started: Event,
    failed: impl FnOnce(FailureCode) -> Event,
) -> Result<(), RunError> {
    let Err(error) = shared.emit(started, false).await else {
        return Ok(());
    };
    let committed = error.committed();
    let failure = classify(shared, failure_for(error));
    if committed {
        let _ = shared.emit(failed(failure.code), true).await;
    }
    Err(failure)
}

async fn run_loop(shared: &Arc<RunShared>, state: &mut LoopState) -> Result<(), RunError> {
    let max_turns = shared.agent.max_turns();
    if state.fresh {
        let started = Event::RunStarted {
            agent: shared.agent.name.clone(),
        };
        shared.emit(started, true).await.map_err(failure_for)?;
    }
    let mut turn = state.completed_turns + 1;
    while turn <= max_turns {
        emit_started(shared, Event::TurnStarted { turn }, |code| {
            Event::TurnFailed { turn, code }
        })
        .await?;
        let result = match run_turn(shared, state, turn).await {
            // An event written outside the loop's own path (a host's interaction) failed.
            Ok(_) if let Some(failure) = shared.take_emission_failure() => Err(failure),
            other => other,
        };
        match result {
            Ok(last) => {
                state.completed_turns = turn;
                shared
                    .emit(Event::TurnCompleted { turn }, true)
                    .await
                    .map_err(failure_for)?;
                if last {
                    return Ok(());
                }
                if turn < max_turns {
                    boundary(shared, state, turn).await?;
                }
            }
            Err(failure) => {
                let failure = classify(shared, failure);
                let failed = Event::TurnFailed {
                    turn,
                    code: failure.code,
                };
                let _ = shared.emit(failed, true).await;
                return Err(failure);
            }
        }
        turn += 1;
    }
    Err(RunError::new(FailureCode::MaxTurnsExceeded))
}

/// Parks the run here if a suspension was requested.
async fn boundary(
    shared: &Arc<RunShared>,
    state: &mut LoopState,
    turn: u32,
) -> Result<(), RunError> {
    if !shared.suspension_requested() {
        return Ok(());
    }
    let data = SnapshotData {
        status: SnapshotStatus::Suspended,
        completed_turns: turn,
        history: std::mem::replace(&mut state.history, Arc::new(Vec::new())),
        usage: state.usage,
        unfinished: Vec::new(),
    };
    match shared.offer_suspension(data) {
        Some(data) => state.history = data.history,
        None => {
            let (data, resumed) = shared.wait_while_suspended().await;
            if let Some(data) = data {
                state.history = data.history;
            }
            // A cancellation latched behind a local resume applies here, before any
            // post-boundary work.
            if !resumed || shared.cancel.is_cancelled() {
                return Err(RunError::new(FailureCode::Cancelled));
            }
        }
    }
    Ok(())
}

/// One turn; `Ok(true)` when the model answered without tool calls.
///
/// The model's half and the tool round are futures of their own, awaited one after the
/// other, so the run's task holds the larger of the two instead of both halves' locals
/// around the tool round.
async fn run_turn(
    shared: &Arc<RunShared>,
    state: &mut LoopState,
    turn: u32,
) -> Result<bool, RunError> {
    let Response { text, calls, .. } = model_turn(shared, state, turn).await?;
    if calls.is_empty() {
        if !text.is_empty() {
            let answer = Message::new(Role::Assistant, text_parts(&text))
                .map_err(|e| RunError::with(FailureCode::ModelProtocol, e))?;
            state.push(answer)?;
        }
        state.answer = text;
        return Ok(true);
    }
    // Boxed: only a turn with calls has a round, and inline its future would grow every
    // run's task by the size of a tool call's.
    Box::pin(tool_round(shared, state, turn, text, calls)).await?;
    Ok(false)
}

/// Settles what a resumed run left open, then asks the model and records its answer's
/// usage.
async fn model_turn(
    shared: &Arc<RunShared>,
    state: &mut LoopState,
    turn: u32,
) -> Result<Response, RunError> {
    if !state.pending.is_empty() {
        // Finish the interrupted round first; the model then sees every result this turn.
        // Boxed: only a resumed run with open calls settles, and inline its future would
        // grow every run's task.
        Box::pin(settle(shared, state, turn)).await?;
    }
    emit_started(shared, Event::ModelStarted { turn }, |code| {
        Event::ModelFailed {
            problem: code.as_str().to_owned(),
            retryable: false,
            before_stream: true,
        }
    })
    .await?;
    // Built after `model.started` and handed to the provider before the operation's first
    // await, so no future of the turn holds the request.
    let request = ModelRequest::from_checked_parts(
        ShortText::join(&[
            shared.id().as_str(),
            "/model/",
            Decimal::new(u64::from(turn)).as_str(),
        ]),
        shared.agent.model.clone(),
        state.history.clone(),
        shared.lease.definitions_arc().clone(),
    );
    let response = match model_operation(shared, request).await {
        Ok(response) => response,
        Err(failure) => {
            // A failure already named a cancellation needs neither the token's lock nor a
            // second copy of its name.
            let failure = if failure.problem != "cancelled" && shared.cancel.is_cancelled() {
                ModelFailure {
                    problem: "cancelled".to_owned(),
                    ..failure
                }
            } else {
                failure
            };
            let failed = Event::ModelFailed {
                problem: failure.problem,
                retryable: failure.retryable,
                before_stream: failure.before_stream,
            };
            let _ = shared.emit(failed, true).await;
            return Err(failure.failure);
        }
    };
    state.usage = Usage::new(
        state
            .usage
            .input_tokens
            .saturating_add(response.usage.input_tokens),
        state
            .usage
            .output_tokens
            .saturating_add(response.usage.output_tokens),
    );
    let completed = Event::ModelCompleted {
        input_tokens: response.usage.input_tokens,
        output_tokens: response.usage.output_tokens,
    };
    shared.emit(completed, true).await.map_err(failure_for)?;
    Ok(response)
}

/// Records the model's request (its text and calls) in history and runs the calls in order.
async fn tool_round(
    shared: &Arc<RunShared>,
    state: &mut LoopState,
    turn: u32,
    text: String,
    calls: Vec<Call>,
) -> Result<(), RunError> {
    check_call_ids(&state.history, &calls)?;
    // The round refers to the calls where the request message keeps them.
    let message = state.history.len();
    let mut parts = text_parts(&text);
    let first = parts.len();
    let round = calls
        .iter()
        .enumerate()
        .map(|(offset, call)| OpenCall {
            facts: shared.lease.facts(call.name()).cloned(),
            at: CallAt {
                message,
                part: first + offset,
            },
            progress: CallProgress::NotStarted,
        })
        .collect();
    parts.reserve(calls.len());
    parts.extend(calls.into_iter().map(Part::ToolCall));
    let request_message = Message::new(Role::Assistant, parts)
        .map_err(|e| RunError::with(FailureCode::ModelProtocol, e))?;
    state.push(request_message)?;
    state.round = round;
    for index in 0..state.round.len() {
        run_call(shared, state, turn, index).await?;
    }
    state.round.clear();
    Ok(())
}

/// `text` as parts of at most [`MAX_TEXT_BYTES`](crate::message::MAX_TEXT_BYTES) each (a
/// model may stream more text than one part holds); none when it is empty.
fn text_parts(text: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(crate::message::MAX_TEXT_BYTES);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        parts.push(Part::Text(rest[..end].to_owned()));
        rest = &rest[end..];
    }
    parts
}

/// Rejects a call id used twice in this response or anywhere in history, before anything
/// runs.
fn check_call_ids(history: &[Message], calls: &[Call]) -> Result<(), RunError> {
    for (index, call) in calls.iter().enumerate() {
        let repeated = calls[..index].iter().any(|c| c.id() == call.id())
            || history
                .iter()
                .flat_map(Message::tool_calls)
                .any(|c| c.id() == call.id());
        if repeated {
            return Err(RunError::with(
                FailureCode::DuplicateCallId,
                DuplicateCallId(call.id().to_owned()),
            ));
        }
    }
    Ok(())
}

/// Asks the provider and consumes its stream, racing the run's token at every await.
///
/// The provider is called when the operation is created (the caller awaits it at once), so
/// the operation's future holds the provider's future, not the request too.
fn model_operation(
    shared: &RunShared,
    request: ModelRequest,
) -> impl Future<Output = Result<Response, ModelFailure>> + Send + '_ {
    let provider = &*shared.engine.provider;
    let start = contained(|| provider.stream(request));
    async move {
        let start = start.map_err(|_| ModelFailure::panicked(false))?;
        consume(shared, start).await
    }
}

/// The rest of [`model_operation`]: awaits the provider's stream and reads it to its end.
async fn consume(
    shared: &RunShared,
    start: crate::future::BoxFuture<'_, Result<Box<dyn EventStream>, crate::model::ProviderError>>,
) -> Result<Response, ModelFailure> {
    let cancel = &shared.cancel;
    let stream = match unless_cancelled(&mut CatchUnwind::new(start), cancel).await {
        Some(Ok(Ok(stream))) => stream,
        Some(Ok(Err(error))) => {
            let problem = error.problem().clone();
            return Err(ModelFailure::problem(&problem, false, error));
        }
        Some(Err(_)) => return Err(ModelFailure::panicked(false)),
        None => return Err(ModelFailure::cancelled(false)),
    };
    let mut stream = StreamGuard(Some(stream));
    let mut observed = false;
    let mut text = String::new();
    let mut calls = Vec::new();
    loop {
        let Some(inner) = stream.0.as_mut() else {
            return Err(ModelFailure::protocol("stream vanished", observed));
        };
        let next = contained(move || inner.next()).map_err(|_| ModelFailure::panicked(observed))?;
        let Some(item) = unless_cancelled(&mut CatchUnwind::new(next), cancel).await else {
            return Err(ModelFailure::cancelled(observed));
        };
        let event = match item {
            Err(_) => return Err(ModelFailure::panicked(observed)),
            Ok(Err(error)) => {
                let problem = error.problem().clone();
                return Err(ModelFailure::problem(&problem, observed, error));
            }
            Ok(Ok(None)) => {
                return Err(ModelFailure {
                    problem: "provider_stream".to_owned(),
                    retryable: false,
                    before_stream: !observed,
                    failure: RunError::with(
                        FailureCode::ModelProtocol,
                        Protocol("the model stream ended without a terminal event"),
                    ),
                });
            }
            Ok(Ok(Some(event))) => event,
        };
        // Only a valid item counts as observed.
        match event {
            StreamEvent::TextDelta(delta) => {
                if delta.is_empty() || delta.len() > MAX_TEXT_DELTA_BYTES {
                    return Err(ModelFailure::protocol(
                        "a text delta is empty or too large",
                        observed,
                    ));
                }
                if text.len() + delta.len() > MAX_OPERATION_TEXT_BYTES {
                    return Err(ModelFailure::protocol(
                        "the model streamed too much text",
                        observed,
                    ));
                }
                observed = true;
                text.push_str(&delta);
                match shared.emit(Event::ModelDelta { text: delta }, false).await {
                    Ok(()) => {}
                    Err(EmitError::Cancelled) => return Err(ModelFailure::cancelled(observed)),
                    Err(error) => {
                        return Err(ModelFailure {
                            problem: "event_emission".to_owned(),
                            retryable: false,
                            before_stream: false,
                            failure: failure_for(error),
                        });
                    }
                }
            }
            StreamEvent::ToolCall(call) => {
                if calls.len() == MAX_OPERATION_TOOL_CALLS {
                    return Err(ModelFailure::protocol(
                        "the model requested too many tool calls",
                        observed,
                    ));
                }
                observed = true;
                calls.push(call);
            }
            StreamEvent::Completed { usage } => {
                // Closing the stream is part of the operation: a destructor that panics
                // fails it, even after a valid `completed`.
                if contained(move || drop(stream.0.take())).is_err() {
                    return Err(ModelFailure::panicked(true));
                }
                return Ok(Response { text, calls, usage });
            }
            StreamEvent::Failed(problem) => {
                let error = crate::model::StreamError::new(problem.clone());
                return Err(ModelFailure::problem(&problem, true, error));
            }
        }
    }
}

/// Dispatches `state.round[index]`: `tool.started` first (write-ahead), then the leased
/// dispatcher, then exactly one terminal and, on success, the result in history.
async fn run_call(
    shared: &Arc<RunShared>,
    state: &mut LoopState,
    turn: u32,
    index: usize,
) -> Result<(), RunError> {
    let requester: Arc<dyn Requester> = shared.clone();
    // Built before `tool.started`, so nothing can fail between a committed start and the
    // dispatch.
    let scope = DispatchScope::of_run(
        shared.id().clone(),
        turn,
        shared.lease.id().clone(),
        shared.lease.fingerprint_arc().clone(),
        requester,
    )
    .map_err(|e| RunError::with(FailureCode::ToolFailed, e))?;
    let entry = &state.round[index];
    let at = entry.at;
    let facts = entry.facts.clone();
    let Some(call) = at.call(&state.history) else {
        return Err(RunError::with(
            FailureCode::ModelProtocol,
            Protocol("an open call is missing from history"),
        ));
    };
    let (call_id, name) = (call.id().to_owned(), call.name().to_owned());
    // The identity describes the lease, so its plan id and fingerprint are the lease's.
    let started = ToolStarted::new(
        call_id.clone(),
        name.clone(),
        turn,
        &shared.identity,
        facts.clone(),
    )
    .map_err(|e| RunError::with(FailureCode::ToolFailed, e))?;
    let started = Event::ToolStarted(started);
    let mut committed = false;
    let written = emit_started(shared, started, |code| {
        committed = true;
        Event::ToolFailed(ToolFailed::new(call_id.clone(), name.clone(), code, None))
    })
    .await;
    // A started event that was committed is a started call, whatever the write reported.
    if written.is_ok() || committed {
        state.round[index].progress = CallProgress::Started;
    }
    written?;
    if facts.is_none() {
        state.round[index].progress =
            CallProgress::Failed(ExecutionState::Definitive, RetryDisposition::Never);
        let definitive = (ExecutionState::Definitive, RetryDisposition::Never);
        emit_tool_failed(
            shared,
            call_id,
            name.clone(),
            FailureCode::UndeclaredTool,
            Some(definitive),
        )
        .await;
        return Err(RunError::with(
            FailureCode::UndeclaredTool,
            UndeclaredTool(name),
        ));
    }
    let outcome = {
        let dispatcher = shared.lease.dispatcher_ref();
        let request = DispatchRequest {
            cancel: &shared.cancel,
            scope: &scope,
            call,
            reporter: &**shared,
        };
        match contained(|| dispatcher.dispatch(request)) {
            Ok(future) => CatchUnwind::new(future).await.map_err(|_| ()),
            Err(_) => Err(()),
        }
    };
    // Events written inside the dispatch (progress, a guard's interactions) may have failed
    // without the tool or guard being able to tell; such a failure fails the call and the run.
    if let Some(failure) = shared.take_emission_failure() {
        let failure = classify(shared, failure);
        emit_tool_failed(shared, call_id, name, failure.code, None).await;
        return Err(failure);
    }
    match outcome {
        Ok(Ok(result)) => {
            let problem = result.is_problem();
            let outcome = if problem {
                ToolOutcome::Problem
            } else {
                ToolOutcome::Success
            };
            // The result's own strings move into history: its call id when it is the
            // call's (the canonical dispatcher guarantees that; another plan's may not), and
            // its content.
            let (result_call_id, content) = result.into_parts();
            let part_call_id = if result_call_id == call_id {
                result_call_id
            } else {
                call_id.clone()
            };
            let completed =
                Event::ToolCompleted(ToolCompleted::new(call_id, name.clone(), outcome));
            let emitted = shared.emit(completed, true).await;
            let part = Part::ToolResult(ToolResultPart {
                call_id: part_call_id,
                name,
                content,
                problem,
            });
            let message = Message::new(Role::Tool, vec![part])
                .map_err(|e| RunError::with(FailureCode::ToolFailed, e))?;
            state.push(message)?;
            state.round[index].progress = CallProgress::Done;
            emitted.map_err(failure_for)
        }
        Ok(Err(error)) => {
            let execution = match &error {
                DispatchError::Execution(e) => Some(e),
                DispatchError::Failure(f) => Some(f.execution()),
                _ => None,
            };
            if let Some(e) = execution {
                state.round[index].progress = CallProgress::Failed(e.state(), e.retry());
            }
            let code = if shared.cancel.is_cancelled() {
                FailureCode::Cancelled
            } else {
                FailureCode::ToolFailed
            };
            let execution = execution.map(|e| (e.state(), e.retry()));
            emit_tool_failed(shared, call_id, name, code, execution).await;
            Err(RunError::with(code, error))
        }
        Err(()) => {
            // A panic inside the dispatch (a layer the plan wraps that no pipeline contained)
            // is a contract violation of the call, like a tool's or guard's panic.
            let code = if shared.cancel.is_cancelled() {
                FailureCode::Cancelled
            } else {
                FailureCode::ToolFailed
            };
            emit_tool_failed(shared, call_id, name, code, None).await;
            Err(RunError::with(
                code,
                DispatchError::Contract(ContractViolation::LayerPanicked),
            ))
        }
    }
}

/// Closes a started call with `tool.failed`, detached and best effort: what the run does
/// next (its failure, or the model's problem result) does not depend on this event. Boxed:
/// it is only awaited on a failure, and inline it would grow every run's task by its size.
fn emit_tool_failed(
    shared: &RunShared,
    call_id: String,
    name: String,
    code: FailureCode,
    execution: Option<(ExecutionState, RetryDisposition)>,
) -> crate::future::BoxFuture<'_, ()> {
    let failed = Event::ToolFailed(ToolFailed::new(call_id, name, code, execution));
    Box::pin(async move {
        let _ = shared.emit(failed, true).await;
    })
}

/// Finishes the tool round a resumed snapshot left open: runs what may run, and tells the
/// model about the rest instead of replaying it.
async fn settle(shared: &Arc<RunShared>, state: &mut LoopState, turn: u32) -> Result<(), RunError> {
    let pending = std::mem::take(&mut state.pending);
    let mut round = Vec::with_capacity(pending.len());
    for unfinished in &pending {
        let (at, call) =
            CallAt::find(&state.history, &unfinished.call_id).ok_or(RunError::with(
                FailureCode::ModelProtocol,
                Protocol("an unfinished call is missing from history"),
            ))?;
        round.push(OpenCall {
            facts: shared.lease.facts(call.name()).cloned(),
            at,
            progress: match unfinished.state {
                CallState::NotStarted => CallProgress::NotStarted,
                CallState::Interrupted => CallProgress::Started,
                CallState::Uncertain => {
                    CallProgress::Failed(ExecutionState::Uncertain, RetryDisposition::Never)
                }
                CallState::Failed => CallProgress::Failed(
                    ExecutionState::Definitive,
                    unfinished.retry.unwrap_or(RetryDisposition::Never),
                ),
            },
        });
    }
    state.round = round;
    for (index, unfinished) in pending.iter().enumerate() {
        // Decide from the leased plan's facts, not from what the snapshot claims about them.
        let facts = state.round[index].facts.as_ref();
        let judged = UnfinishedCall {
            effect: facts.map(|f| f.effect),
            replay_safety: facts.map(|f| f.replay_safety),
            ..unfinished.clone()
        };
        if judged.may_run_on_resume() {
            run_call(shared, state, turn, index).await?;
            continue;
        }
        let content = match unfinished.state {
            CallState::Uncertain => super::snapshot::UNCERTAIN_CALL_NOT_RUN_AGAIN,
            CallState::Failed => "This call failed and was not run again.",
            CallState::NotStarted | CallState::Interrupted => {
                "This call was interrupted and is not safe to run again; it was not run again."
            }
        };
        let part = Part::ToolResult(ToolResultPart {
            call_id: unfinished.call_id.clone(),
            name: unfinished.name.clone(),
            content: content.to_owned(),
            problem: true,
        });
        let message = Message::new(Role::Tool, vec![part])
            .map_err(|e| RunError::with(FailureCode::ModelProtocol, e))?;
        state.push(message)?;
        state.round[index].progress = CallProgress::Done;
    }
    state.round.clear();
    Ok(())
}

/// The single path every run ends through.
async fn finalize(shared: &Arc<RunShared>, state: LoopState, result: Result<(), RunError>) {
    let interacting = shared.begin_finishing();
    let mut outcome = result.map_err(|failure| classify(shared, failure));
    shared.cancel.cancel();
    if interacting {
        shared.wait_for_interactions().await;
    }
    let timeout = shared.engine.options.finalization_timeout;
    if let Err(error) = release_bounded(&shared.lease, timeout).await {
        outcome = Err(RunError::with(FailureCode::PlanReleaseFailed, error));
    }
    let terminal = match &outcome {
        Ok(()) => Event::RunCompleted,
        Err(failure) if failure.code == FailureCode::Cancelled => Event::RunCancelled,
        Err(failure) => Event::RunFailed { code: failure.code },
    };
    // The log is authoritative: a terminal it committed stands even if an observer then
    // refused it; only a terminal that never reached the log changes the outcome.
    if let Err(error) = shared.emit(terminal, true).await
        && !error.committed()
        && outcome.is_ok()
    {
        outcome = Err(failure_for(error));
    }
    let status = match &outcome {
        Ok(()) => SnapshotStatus::Completed,
        Err(failure) if failure.code == FailureCode::Cancelled => SnapshotStatus::Cancelled,
        Err(_) => SnapshotStatus::Failed,
    };
    let LoopState {
        history,
        completed_turns,
        usage,
        answer,
        round,
        pending,
        ..
    } = state;
    let mut unfinished: Vec<UnfinishedCall> = round
        .iter()
        .filter_map(|call| call.unfinished(&history))
        .collect();
    // A resumed run that stopped before settling keeps its calls open as they were.
    if unfinished.is_empty() {
        unfinished = pending;
    }
    let data = SnapshotData {
        status,
        completed_turns,
        history,
        usage,
        unfinished,
    };
    let output = outcome.map(|()| RunOutput {
        answer,
        turns: completed_turns,
        usage,
    });
    shared.log.close();
    // Forget the run before publishing its outcome, so a caller that saw the outcome never
    // finds the id still taken.
    shared.engine.unregister(&shared.key, Release::Retire);
    shared.finish(output, data);
}
