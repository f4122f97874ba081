//! The Restate services a worker serves (docs/scale-out.md, "Services"):
//!
//! - [`AgentRun`], a workflow per run: its `run` handler executes the run, step after step,
//!   and waits on durable promises between steps (an answer, or cancellation);
//! - [`RunRecord`], a virtual object per run: the record executions replay from (model turns,
//!   tool claims and outcomes), the published events, the pending interactions;
//! - [`Runs`], the front door: validates a start before anything exists, and the catalog;
//! - [`RunIndex`], one virtual object listing the runs.
#![allow(
    missing_docs,
    reason = "the SDK's macros generate undocumented client methods"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use restate_sdk::prelude::*;

use crate::record::*;

/// The workflow's name on the cluster.
pub const AGENT_RUN: &str = "AgentRun";
/// The run record's name on the cluster.
pub const RUN_RECORD: &str = "RunRecord";
/// The front door's name on the cluster.
pub const RUNS: &str = "Runs";
/// The index's name on the cluster.
pub const RUN_INDEX: &str = "RunIndex";
/// The one key of the index.
pub const INDEX_KEY: &str = "all";

/// Status of a refusal: bad input.
pub const BAD_INPUT: u16 = 400;
/// Status of a refusal: no such definition, run or interaction.
pub const NOT_FOUND: u16 = 404;
/// Status of a refusal: the request conflicts with what happened (a second answer, a
/// run id in use).
pub const CONFLICT: u16 = 409;

/// The kind numbers of the run's terminal events on the wire (`run.completed`,
/// `run.failed`, `run.cancelled`).
pub(crate) const RUN_TERMINAL_KINDS: [(i32, &str); 3] = [
    (2, "run.completed"),
    (3, "run.failed"),
    (4, "run.cancelled"),
];

/// The name of a run-terminal kind number.
pub(crate) fn terminal_name(kind: i32) -> Option<&'static str> {
    RUN_TERMINAL_KINDS
        .iter()
        .find(|(number, _)| *number == kind)
        .map(|(_, name)| *name)
}

/// Runs one execution of a run: what a worker plugs into [`AgentRun`].
pub trait Executor: Send + Sync + 'static {
    /// The definitions this worker serves.
    fn catalog(&self) -> Vec<CatalogEntry>;

    /// Executes `start` from its beginning against the run's record, with the answers
    /// given so far, until the run ends or waits for an answer it does not have. With
    /// `cancelled`, the run is cancelled where the record ends. An error is retried.
    fn execute(
        &self,
        start: StartRun,
        answers: BTreeMap<String, serde_json::Value>,
        cancelled: bool,
    ) -> agent_core::BoxFuture<'static, Result<Step, String>>;
}

fn refuse(status: u16, message: impl Into<String>) -> HandlerError {
    TerminalError::new_with_code(status, message).into()
}

/// The workflow of one run.
pub struct AgentRun {
    executor: Arc<dyn Executor>,
}

impl AgentRun {
    /// The workflow over `executor`.
    pub fn new(executor: Arc<dyn Executor>) -> Self {
        AgentRun { executor }
    }
}

/// The promise an answer to `interaction` resolves.
fn answer_promise(interaction: &str) -> String {
    format!("answer/{interaction}")
}

/// The promise cancellation resolves.
const CANCEL_PROMISE: &str = "cancel";

#[restate_sdk::workflow(
    name = "AgentRun",
    // A waiting run suspends after `WorkerConfig::suspend_after` (set when it is bound), so
    // it holds no worker; a step may take as long as its model and tools take.
    abort_timeout = "1h",
    // Retried every 2 s for about 5.5 hours (workers or the engine away), then paused, not
    // killed: `restate invocations resume` continues it.
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "2s",
        max_attempts = 10000,
        on_max_attempts = "pause",
    ),
)]
impl AgentRun {
    /// Executes the run: each step replays the record and goes on from its end.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        start: Json<StartRun>,
    ) -> Result<Json<Step>, HandlerError> {
        let start = start.into_inner();
        let mut answers = BTreeMap::new();
        let mut cancelled = false;
        let mut step_number = 0u32;
        loop {
            step_number += 1;
            let executor = self.executor.clone();
            let (step_start, step_answers) = (start.clone(), answers.clone());
            let step = ctx
                .run(|| async move {
                    executor
                        .execute(step_start, step_answers, cancelled)
                        .await
                        .map(Json)
                        .map_err(|e| HandlerError::from(std::io::Error::other(e)))
                })
                .name(format!("execute-{step_number}"))
                .retry_policy(
                    RunRetryPolicy::default()
                        .initial_delay(Duration::from_millis(100))
                        .exponentiation_factor(2.0)
                        .max_delay(Duration::from_secs(2)),
                )
                .await?
                .into_inner();
            let interaction = match step {
                Step::Ended { .. } => return Ok(Json(step)),
                Step::Waiting { interaction_id } => interaction_id,
            };
            if cancelled {
                // A cancelled execution never waits; it ended, or the record broke.
                return Err(refuse(CONFLICT, "a cancelled run waited for an answer"));
            }
            let answer_key = answer_promise(&interaction);
            let answer = ctx.promise::<Json<serde_json::Value>>(&answer_key);
            let cancel = ctx.promise::<bool>(CANCEL_PROMISE);
            restate_sdk::select! {
                value = answer => { answers.insert(interaction, value?.into_inner()); },
                _ = cancel => { cancelled = true; },
            }
        }
    }

    /// Resolves an answer's promise (from the run record, after it checked the answer).
    #[handler]
    async fn deliver(
        &self,
        ctx: SharedWorkflowContext<'_>,
        answer: Json<Answer>,
    ) -> Result<(), HandlerError> {
        let answer = answer.into_inner();
        ctx.resolve_promise(&answer_promise(&answer.interaction_id), Json(answer.value));
        Ok(())
    }

    /// Resolves the cancellation promise once.
    #[handler]
    async fn wake(&self, ctx: SharedWorkflowContext<'_>) -> Result<(), HandlerError> {
        if ctx.peek_promise::<bool>(CANCEL_PROMISE).await?.is_none() {
            ctx.resolve_promise(CANCEL_PROMISE, true);
        }
        Ok(())
    }
}

/// The JSON value under `key`, or its type's default: what a list of the record is before
/// its first write.
macro_rules! json_or_default {
    ($ctx:expr, $key:expr, $ty:ty) => {
        $ctx.get::<Json<$ty>>($key)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default()
    };
}

/// How the run stands, read from any of the record's contexts (a macro: the SDK's
/// context traits do not name one lifetime a helper function could take).
macro_rules! state_of {
    ($ctx:expr) => {
        RunState {
            last_sequence: $ctx.get::<u64>(LAST).await?.unwrap_or(0),
            ended: $ctx.get::<String>(ENDED).await?,
            cancel_requested: $ctx.get::<bool>(CANCEL).await?.unwrap_or(false),
            pending: json_or_default!($ctx, PENDING, Vec<PendingInteraction>),
        }
    };
}

/// The record of one run.
pub struct RunRecord;

/// What the record keeps about a call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum CallEntry {
    Claimed { execution: String },
    Done(CallOutcome),
}

const LAST: &str = "last";
const ENDED: &str = "ended";
const CANCEL: &str = "cancel";
const PENDING: &str = "pending";
const ANSWERED: &str = "answered";
const TURNS: &str = "turns";
const CALLS: &str = "calls";

fn turn_key(index: u32) -> String {
    format!("turn/{index}")
}
fn call_key(id: &str) -> String {
    format!("call/{id}")
}
fn event_key(sequence: u64) -> String {
    format!("event/{sequence}")
}

#[restate_sdk::object(name = "RunRecord")]
impl RunRecord {
    /// Records model turn `index` unless one is recorded; answers the recorded one.
    #[handler]
    async fn record_turn(
        &self,
        ctx: ObjectContext<'_>,
        request: Json<RecordTurn>,
    ) -> Result<Json<TurnRecord>, HandlerError> {
        let RecordTurn { index, turn } = request.into_inner();
        let count = ctx.get::<u32>(TURNS).await?.unwrap_or(0);
        if index < count {
            let kept = ctx.get::<Json<TurnRecord>>(&turn_key(index)).await?;
            return kept.ok_or_else(|| refuse(CONFLICT, "a recorded turn is missing"));
        }
        if index != count {
            return Err(refuse(CONFLICT, "turns are recorded in order"));
        }
        ctx.set(&turn_key(index), Json(turn.clone()));
        ctx.set(TURNS, count + 1);
        Ok(Json(turn))
    }

    /// Claims a call for an execution, or says who has it.
    #[handler]
    async fn claim(
        &self,
        ctx: ObjectContext<'_>,
        request: Json<ClaimRequest>,
    ) -> Result<Json<Claim>, HandlerError> {
        let ClaimRequest { call_id, execution } = request.into_inner();
        let key = call_key(&call_id);
        let claim = match ctx
            .get::<Json<CallEntry>>(&key)
            .await?
            .map(Json::into_inner)
        {
            Some(CallEntry::Done(outcome)) => Claim::Done(outcome),
            Some(CallEntry::Claimed { execution: owner }) if owner == execution => Claim::Granted,
            Some(CallEntry::Claimed { .. }) => Claim::Taken,
            None => {
                ctx.set(&key, Json(CallEntry::Claimed { execution }));
                let mut calls = json_or_default!(ctx, CALLS, Vec<String>);
                calls.push(call_id);
                ctx.set(CALLS, Json(calls));
                Claim::Granted
            }
        };
        Ok(Json(claim))
    }

    /// Records a call's outcome (the first one stays).
    #[handler]
    async fn finish(
        &self,
        ctx: ObjectContext<'_>,
        request: Json<FinishCall>,
    ) -> Result<(), HandlerError> {
        let FinishCall { call_id, outcome } = request.into_inner();
        let key = call_key(&call_id);
        match ctx
            .get::<Json<CallEntry>>(&key)
            .await?
            .map(Json::into_inner)
        {
            Some(CallEntry::Done(_)) => {}
            Some(CallEntry::Claimed { .. }) => ctx.set(&key, Json(CallEntry::Done(outcome))),
            None => return Err(refuse(CONFLICT, "an outcome of a call nobody claimed")),
        }
        Ok(())
    }

    /// Publishes events in sequence: ones already published are skipped (the first
    /// publication stays; a re-execution publishes the same events again).
    #[handler]
    async fn append(
        &self,
        ctx: ObjectContext<'_>,
        events: Json<Vec<WireEvent>>,
    ) -> Result<u64, HandlerError> {
        let mut last = ctx.get::<u64>(LAST).await?.unwrap_or(0);
        for event in events.into_inner() {
            if event.sequence <= last {
                continue;
            }
            last = event.sequence;
            let ended = terminal_name(event.kind).map(str::to_owned);
            ctx.set(&event_key(last), Json(event));
            if let Some(name) = ended {
                ctx.set(ENDED, name.clone());
                ctx.clear(PENDING);
                ctx.object_client::<RunIndexClient<'_>>(INDEX_KEY)
                    .finish(Json((ctx.key().to_owned(), name)))
                    .send();
            }
        }
        ctx.set(LAST, last);
        Ok(last)
    }

    /// Opens an interaction the run waits on (again: the same one stays).
    #[handler]
    async fn open(
        &self,
        ctx: ObjectContext<'_>,
        interaction: Json<PendingInteraction>,
    ) -> Result<(), HandlerError> {
        let interaction = interaction.into_inner();
        let answered = json_or_default!(ctx, ANSWERED, Vec<String>);
        let mut pending = json_or_default!(ctx, PENDING, Vec<PendingInteraction>);
        if ctx.get::<String>(ENDED).await?.is_some()
            || answered.contains(&interaction.id)
            || pending.iter().any(|p| p.id == interaction.id)
        {
            return Ok(());
        }
        pending.push(interaction);
        ctx.set(PENDING, Json(pending));
        Ok(())
    }

    /// Answers a pending interaction once; anything else is refused and changes nothing.
    #[handler]
    async fn answer(
        &self,
        ctx: ObjectContext<'_>,
        answer: Json<Answer>,
    ) -> Result<(), HandlerError> {
        let answer = answer.into_inner();
        let size = serde_json::to_vec(&answer.value).map_or(usize::MAX, |b| b.len());
        if size > MAX_ANSWER_BYTES {
            return Err(refuse(
                BAD_INPUT,
                format!("an answer is at most {MAX_ANSWER_BYTES} bytes"),
            ));
        }
        let mut answered = json_or_default!(ctx, ANSWERED, Vec<String>);
        if answered.contains(&answer.interaction_id) {
            return Err(refuse(CONFLICT, "this interaction is already answered"));
        }
        let mut pending = json_or_default!(ctx, PENDING, Vec<PendingInteraction>);
        let Some(index) = pending.iter().position(|p| p.id == answer.interaction_id) else {
            return Err(refuse(NOT_FOUND, "no such interaction waits in this run"));
        };
        if !fits_schema(&answer.value, &pending[index].schema) {
            return Err(refuse(
                BAD_INPUT,
                "the answer does not fit the interaction's schema",
            ));
        }
        pending.remove(index);
        answered.push(answer.interaction_id.clone());
        ctx.set(PENDING, Json(pending));
        ctx.set(ANSWERED, Json(answered));
        ctx.workflow_client::<AgentRunClient<'_>>(ctx.key())
            .deliver(Json(answer))
            .send();
        Ok(())
    }

    /// Requests cancellation: the run ends cancelled at its next unrecorded step.
    #[handler]
    async fn cancel(&self, ctx: ObjectContext<'_>) -> Result<Json<RunState>, HandlerError> {
        if ctx.get::<String>(ENDED).await?.is_none() {
            ctx.set(CANCEL, true);
            ctx.workflow_client::<AgentRunClient<'_>>(ctx.key())
                .wake()
                .send();
        }
        Ok(Json(state_of!(ctx)))
    }

    /// What an execution replays.
    #[handler]
    async fn replay(&self, ctx: SharedObjectContext<'_>) -> Result<Json<Replay>, HandlerError> {
        let mut replay = Replay {
            last_sequence: ctx.get::<u64>(LAST).await?.unwrap_or(0),
            cancel_requested: ctx.get::<bool>(CANCEL).await?.unwrap_or(false),
            ..Replay::default()
        };
        for index in 0..ctx.get::<u32>(TURNS).await?.unwrap_or(0) {
            let turn = ctx.get::<Json<TurnRecord>>(&turn_key(index)).await?;
            replay.turns.push(
                turn.ok_or_else(|| refuse(CONFLICT, "a recorded turn is missing"))?
                    .into_inner(),
            );
        }
        let calls = json_or_default!(ctx, CALLS, Vec<String>);
        for call in calls {
            if let Some(CallEntry::Done(outcome)) = ctx
                .get::<Json<CallEntry>>(&call_key(&call))
                .await?
                .map(Json::into_inner)
            {
                replay.calls.insert(call, outcome);
            }
        }
        Ok(Json(replay))
    }

    /// How the run stands.
    #[handler]
    async fn state(&self, ctx: SharedObjectContext<'_>) -> Result<Json<RunState>, HandlerError> {
        Ok(Json(state_of!(ctx)))
    }

    /// Published events after a sequence.
    #[handler]
    async fn events(
        &self,
        ctx: SharedObjectContext<'_>,
        query: Json<EventQuery>,
    ) -> Result<Json<EventPage>, HandlerError> {
        let EventQuery { after, limit } = query.into_inner();
        let last = ctx.get::<u64>(LAST).await?.unwrap_or(0);
        let limit = (limit as usize).clamp(1, MAX_EVENTS_PER_PAGE) as u64;
        let mut events = Vec::new();
        let mut sequence = after;
        while sequence < last && sequence < after.saturating_add(limit) {
            sequence += 1;
            // A kernel event the wire has no kind for keeps its number and is not kept.
            if let Some(event) = ctx.get::<Json<WireEvent>>(&event_key(sequence)).await? {
                events.push(event.into_inner());
            }
        }
        Ok(Json(EventPage {
            events,
            last_sequence: last,
            ended: ctx.get::<String>(ENDED).await?,
        }))
    }
}

/// Whether `value` fits the subset of JSON Schema interactions use: `enum`, `const` and
/// `type`; other keywords are not checked.
pub fn fits_schema(value: &serde_json::Value, schema: &serde_json::Value) -> bool {
    use serde_json::Value;
    let Value::Object(schema) = schema else {
        return true;
    };
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return false;
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return false;
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("boolean") => value.is_boolean(),
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("null") => value.is_null(),
        _ => true,
    }
}

/// The front door: starts runs after checking them, and lists what workers serve.
pub struct Runs {
    executor: Arc<dyn Executor>,
}

impl Runs {
    /// The front door over `executor`'s catalog.
    pub fn new(executor: Arc<dyn Executor>) -> Self {
        Runs { executor }
    }
}

#[restate_sdk::service(name = "Runs")]
impl Runs {
    /// Starts a run: refused with nothing created when the definition is unknown, the
    /// input is empty or too large, the id is not a run id, or the id is taken.
    #[handler]
    async fn start(
        &self,
        ctx: Context<'_>,
        start: Json<StartRun>,
    ) -> Result<Json<String>, HandlerError> {
        let start = start.into_inner();
        if agent_core::RunId::new(start.run_id.as_str()).is_err() {
            return Err(refuse(BAD_INPUT, "the run id is not a valid run id"));
        }
        if start.input.trim().is_empty() {
            return Err(refuse(BAD_INPUT, "the input is empty"));
        }
        if start.input.len() > agent_client::MAX_INPUT_TEXT_BYTES {
            return Err(refuse(
                BAD_INPUT,
                format!(
                    "the input is larger than {} bytes",
                    agent_client::MAX_INPUT_TEXT_BYTES
                ),
            ));
        }
        if !self
            .executor
            .catalog()
            .iter()
            .any(|d| d.id == start.definition)
        {
            return Err(refuse(
                NOT_FOUND,
                format!("no definition `{}` is served", start.definition),
            ));
        }
        let started_unix_ms = ctx
            .run(|| async {
                Ok(std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
            })
            .name("clock")
            .await?;
        ctx.object_client::<RunIndexClient<'_>>(INDEX_KEY)
            .add(Json(IndexedRun {
                run_id: start.run_id.clone(),
                definition: start.definition.clone(),
                started_unix_ms,
                ended: None,
            }))
            .call()
            .await?;
        let run_id = start.run_id.clone();
        ctx.workflow_client::<AgentRunClient<'_>>(run_id.clone())
            .run(Json(start))
            .send();
        Ok(Json(run_id))
    }

    /// The definitions served.
    #[handler]
    async fn catalog(&self, _ctx: Context<'_>) -> Result<Json<Vec<CatalogEntry>>, HandlerError> {
        Ok(Json(self.executor.catalog()))
    }
}

/// The list of runs (one key, [`INDEX_KEY`]), newest last, at most [`MAX_INDEXED_RUNS`].
pub struct RunIndex;

const RUNS_KEY: &str = "runs";

#[restate_sdk::object(name = "RunIndex")]
impl RunIndex {
    /// Adds a run; a taken id is refused.
    #[handler]
    async fn add(&self, ctx: ObjectContext<'_>, run: Json<IndexedRun>) -> Result<(), HandlerError> {
        let run = run.into_inner();
        let mut runs = json_or_default!(ctx, RUNS_KEY, Vec<IndexedRun>);
        if runs.iter().any(|r| r.run_id == run.run_id) {
            return Err(refuse(CONFLICT, "a run with this id exists"));
        }
        if runs.len() >= MAX_INDEXED_RUNS {
            runs.remove(0);
        }
        runs.push(run);
        ctx.set(RUNS_KEY, Json(runs));
        Ok(())
    }

    /// Marks a run ended.
    #[handler]
    async fn finish(
        &self,
        ctx: ObjectContext<'_>,
        ended: Json<(String, String)>,
    ) -> Result<(), HandlerError> {
        let (run_id, kind) = ended.into_inner();
        let mut runs = json_or_default!(ctx, RUNS_KEY, Vec<IndexedRun>);
        if let Some(run) = runs.iter_mut().find(|r| r.run_id == run_id) {
            run.ended = Some(kind);
            ctx.set(RUNS_KEY, Json(runs));
        }
        Ok(())
    }

    /// Every indexed run.
    #[handler]
    async fn list(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<Vec<IndexedRun>>, HandlerError> {
        Ok(Json(json_or_default!(ctx, RUNS_KEY, Vec<IndexedRun>)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_checked_against_enum_const_and_type() {
        let approval = json!({ "enum": [true, false, "always"] });
        assert!(fits_schema(&json!(true), &approval));
        assert!(fits_schema(&json!("always"), &approval));
        assert!(!fits_schema(&json!("maybe"), &approval));
        assert!(!fits_schema(&json!(1), &json!({ "type": "boolean" })));
        assert!(fits_schema(&json!(1), &json!({ "type": "integer" })));
        assert!(!fits_schema(&json!(2), &json!({ "const": 1 })));
        assert!(fits_schema(&json!({}), &json!(true)));
    }
}
