//! The values that cross the cluster: what the run record keeps, what its handlers take and
//! answer, and what one execution of a run reports to its workflow. All JSON.

use agent_core::model::{ModelProblem, StreamEvent};
use agent_core::tool::{ExecutionState, RetryDisposition, ToolResult};
use serde::{Deserialize, Serialize};

/// Most events one `events` page returns.
pub const MAX_EVENTS_PER_PAGE: usize = 512;
/// Most stream items one recorded model turn keeps; a longer response fails the turn.
pub const MAX_TURN_ITEMS: usize = 100_000;
/// Largest answer to an interaction, in bytes of JSON.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Most runs the run index lists; older entries are dropped first.
pub const MAX_INDEXED_RUNS: usize = 10_000;

/// How a run is started: the definition, the user's text and the run's id (chosen by the
/// client, so a retried start names the same run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// The run's id (the workflow's key).
    pub run_id: String,
    /// The definition's id, one of the worker's catalog.
    pub definition: String,
    /// The task.
    pub input: String,
}

/// One model turn as the first execution that finished it saw it: every stream item, or
/// the failure before the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnRecord {
    /// The provider's items, the terminal one last.
    Streamed(Vec<StreamEvent>),
    /// The provider refused the request before any item.
    Refused(ModelProblem),
}

/// A tool call's outcome as recorded: its result, or the infrastructure failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// What the tool answered (a problem included).
    Result(ToolResult),
    /// The tool failed definitively or retryably.
    Failed {
        /// Definitive or uncertain.
        state: ExecutionState,
        /// Whether the tool allows a retry.
        retry: RetryDisposition,
        /// The tool's message.
        message: String,
    },
}

/// What the record says when an execution is about to run a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Claim {
    /// Nobody ran it: this execution holds the claim and runs it.
    Granted,
    /// An earlier execution claimed it and never recorded an outcome: it may have run.
    Taken,
    /// It ran and its outcome is recorded.
    Done(CallOutcome),
}

/// A claim request: the call and the execution asking (a retried request of the same
/// execution gets its own claim back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    /// The model's call id.
    pub call_id: String,
    /// The asking execution.
    pub execution: String,
}

/// A call's outcome to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishCall {
    /// The model's call id.
    pub call_id: String,
    /// Its outcome.
    pub outcome: CallOutcome,
}

/// A model turn to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordTurn {
    /// The turn's index in the run, from 0.
    pub index: u32,
    /// What the provider sent.
    pub turn: TurnRecord,
}

/// One event as the engine protocol carries it (`RunEvent`), JSON text payload included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEvent {
    /// The event's sequence, from 1, gap-free.
    pub sequence: u64,
    /// Nanoseconds since the Unix epoch.
    pub unix_nano: i64,
    /// The protocol's kind number.
    pub kind: i32,
    /// The kind's payload (JSON text).
    pub payload_json: String,
    /// Whether the event ends its scope.
    pub terminal: bool,
}

/// An interaction the run waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingInteraction {
    /// The interaction's id.
    pub id: String,
    /// Its kind (`approval`, ...).
    pub kind: String,
    /// The question.
    pub prompt: String,
    /// The JSON schema of a valid answer.
    pub schema: serde_json::Value,
}

/// An answer to an interaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The interaction's id.
    pub interaction_id: String,
    /// The answer.
    pub value: serde_json::Value,
}

/// How a run stands, from its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    /// The last published sequence (0 before the first event).
    pub last_sequence: u64,
    /// The terminal event's kind name (`run.completed`, ...) once it is published.
    pub ended: Option<String>,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
    /// The interactions waiting for an answer.
    pub pending: Vec<PendingInteraction>,
}

/// What an execution needs from the record to replay: every recorded turn and call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replay {
    /// Recorded model turns by index.
    pub turns: Vec<TurnRecord>,
    /// Recorded call outcomes by call id.
    pub calls: std::collections::BTreeMap<String, CallOutcome>,
    /// The last published sequence.
    pub last_sequence: u64,
    /// Whether cancellation was requested.
    pub cancel_requested: bool,
}

/// A page of events after a sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventPage {
    /// The events, in order.
    pub events: Vec<WireEvent>,
    /// The last published sequence when the page was read.
    pub last_sequence: u64,
    /// The terminal event's kind name, once published.
    pub ended: Option<String>,
}

/// Which events to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventQuery {
    /// Events after this sequence.
    pub after: u64,
    /// At most this many ([`MAX_EVENTS_PER_PAGE`] at most).
    pub limit: u32,
}

/// How one execution of a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The run ended; its terminal event is published.
    Ended {
        /// The terminal kind's name.
        kind: String,
    },
    /// The run waits for an answer to this interaction.
    Waiting {
        /// The interaction's id.
        interaction_id: String,
    },
}

/// One run in the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexedRun {
    /// The run's id.
    pub run_id: String,
    /// Its definition.
    pub definition: String,
    /// When it was started (Unix milliseconds).
    pub started_unix_ms: u64,
    /// The terminal kind's name once it ended.
    pub ended: Option<String>,
}

/// A definition a worker serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// The definition's id.
    pub id: String,
    /// Its model.
    pub model: String,
    /// Its turn budget.
    pub max_turns: u32,
}

/// Converts a kernel outcome into its record.
pub(crate) fn outcome_of(
    result: &Result<ToolResult, agent_core::stage::DispatchError>,
) -> Option<CallOutcome> {
    match result {
        Ok(result) => Some(CallOutcome::Result(result.clone())),
        Err(agent_core::stage::DispatchError::Execution(error)) => Some(CallOutcome::Failed {
            state: error.state(),
            retry: error.retry(),
            message: error.message().to_owned(),
        }),
        // Cancellation and contract breaches are not outcomes of the tool: not recorded.
        Err(_) => None,
    }
}

/// The kernel outcome a record stands for.
pub(crate) fn outcome_from(
    call_id: &str,
    outcome: CallOutcome,
) -> Result<ToolResult, agent_core::stage::DispatchError> {
    use agent_core::tool::ExecutionError;
    match outcome {
        CallOutcome::Result(result) => Ok(result),
        CallOutcome::Failed {
            state,
            retry,
            message,
        } => Err(agent_core::stage::DispatchError::Execution(
            match (state, retry) {
                (ExecutionState::Uncertain, _) => ExecutionError::uncertain(call_id, message),
                (_, RetryDisposition::Allowed) => ExecutionError::retryable(call_id, message),
                _ => ExecutionError::definitive(call_id, message),
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::stage::DispatchError;
    use agent_core::tool::ExecutionError;

    #[test]
    fn outcomes_round_trip_through_their_records() {
        let results = [
            Ok(ToolResult::success("c1", "done")),
            Ok(ToolResult::problem("c1", "no such file")),
            Err(DispatchError::Execution(ExecutionError::definitive(
                "c1",
                "disk full",
            ))),
            Err(DispatchError::Execution(ExecutionError::retryable(
                "c1", "busy",
            ))),
            Err(DispatchError::Execution(ExecutionError::uncertain(
                "c1", "lost",
            ))),
        ];
        for result in results {
            let record = outcome_of(&result).expect("an outcome of the tool");
            let json = serde_json::to_string(&record).unwrap();
            let back: CallOutcome = serde_json::from_str(&json).unwrap();
            let replayed = outcome_from("c1", back);
            match (&result, &replayed) {
                (Ok(a), Ok(b)) => assert_eq!(a, b),
                (Err(DispatchError::Execution(a)), Err(DispatchError::Execution(b))) => {
                    assert_eq!(
                        (a.state(), a.retry(), a.message()),
                        (b.state(), b.retry(), b.message())
                    );
                }
                _ => panic!("{result:?} replayed as {replayed:?}"),
            }
        }
    }

    #[test]
    fn cancellation_is_not_an_outcome_of_the_tool() {
        let cancelled = Err(DispatchError::Cancelled {
            call_id: "c1".into(),
        });
        assert_eq!(outcome_of(&cancelled), None);
    }

    #[test]
    fn steps_and_claims_have_a_stable_json_form() {
        let step = Step::Waiting {
            interaction_id: "approve-c1".into(),
        };
        assert_eq!(
            serde_json::to_value(&step).unwrap(),
            serde_json::json!({ "waiting": { "interaction_id": "approve-c1" } })
        );
        assert_eq!(serde_json::to_value(Claim::Taken).unwrap(), "taken");
    }
}
