//! Sequenced run events: what happened in a run, in order, without secrets.
//!
//! Every event is wrapped in an [`Envelope`] carrying its run id and a gap-free sequence
//! number starting at 1. The engine appends each envelope to the run's authoritative
//! [`EventLog`] before anyone else sees it; observers and subscribers get the same order.
//!
//! Payloads are typed and deliberately narrow: failures carry a fixed [`FailureCode`] plus
//! safe facts (counts, ids, enums), never raw error text, tool arguments, tool results,
//! paths or credentials. The model's streamed text is the one free-form payload, since it is
//! the answer itself.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::tool::{ExecutionState, RetryDisposition, ToolFacts};

mod log;

pub use log::{
    EventLog, LogError, LogLimits, LogStats, ReplayPage, ReplayRequest, Subscription,
    SubscriptionError,
};

/// A point in time: nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The instant `nanos` nanoseconds after the Unix epoch.
    pub const fn from_unix_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// Nanoseconds since the Unix epoch.
    pub const fn unix_nanos(self) -> u64 {
        self.0
    }
}

impl From<SystemTime> for Timestamp {
    /// Times before the epoch clamp to it; times after year 2554 saturate.
    fn from(time: SystemTime) -> Self {
        let nanos = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Timestamp(nanos)
    }
}

/// Where the engine reads the time for event envelopes.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        SystemTime::now().into()
    }
}

/// A clock that always answers the same instant, for deterministic tests and benchmarks.
///
/// ```
/// use agent_core::event::{Clock, FixedClock, Timestamp};
///
/// let clock = FixedClock::new(Timestamp::from_unix_nanos(1_000_000_000));
/// assert_eq!(clock.now(), clock.now());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(Timestamp);

impl FixedClock {
    /// A clock stopped at `at`.
    pub const fn new(at: Timestamp) -> Self {
        FixedClock(at)
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

/// Why a run, turn or tool failed, as a fixed code. The text of the underlying error stays
/// with the caller of [`Run::wait`](crate::agent::Run::wait); events carry only this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureCode {
    /// The run's cancellation token fired.
    Cancelled,
    /// The model operation failed (see the `model.failed` event for its problem code).
    ModelFailed,
    /// The model broke the streaming protocol or a bound (text, tool calls, history).
    ModelProtocol,
    /// The model asked for a tool the plan does not declare.
    UndeclaredTool,
    /// The model reused a tool call id.
    DuplicateCallId,
    /// A tool dispatch failed with an infrastructure error.
    ToolFailed,
    /// The model still asked for tools in the last allowed turn.
    MaxTurnsExceeded,
    /// Code outside the engine panicked (provider, stream, observer) or the loop itself did;
    /// the panic was contained and its text discarded. Panics inside a dispatch (tools,
    /// guards, decorators) are contained by the dispatcher and fail the call as
    /// [`ToolFailed`](Self::ToolFailed); a panicking broker makes the interaction fail.
    Panicked,
    /// Releasing the tool plan lease failed.
    PlanReleaseFailed,
    /// A required observer refused an event.
    ObserverFailed,
    /// The event log could not hold an event.
    EventLogExhausted,
}

impl FailureCode {
    /// The snake_case code, as serialized.
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureCode::Cancelled => "cancelled",
            FailureCode::ModelFailed => "model_failed",
            FailureCode::ModelProtocol => "model_protocol",
            FailureCode::UndeclaredTool => "undeclared_tool",
            FailureCode::DuplicateCallId => "duplicate_call_id",
            FailureCode::ToolFailed => "tool_failed",
            FailureCode::MaxTurnsExceeded => "max_turns_exceeded",
            FailureCode::Panicked => "panicked",
            FailureCode::PlanReleaseFailed => "plan_release_failed",
            FailureCode::ObserverFailed => "observer_failed",
            FailureCode::EventLogExhausted => "event_log_exhausted",
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version of the [`ToolStarted`] occurrence.
pub const TOOL_STARTED_VERSION: &str = "agent-core.tool-started/v1";

/// The version of the terminal occurrences, [`ToolCompleted`] and [`ToolFailed`].
pub const TOOL_TERMINAL_VERSION: &str = "agent-core.tool-terminal/v1";

/// A field that serializes as exactly one version string and refuses any other on decode.
macro_rules! version_marker {
    ($(#[$doc:meta])* $name:ident = $version:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name;

        impl $name {
            /// The version string.
            pub const fn as_str(self) -> &'static str {
                $version
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str($version)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let version = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                if version == $version {
                    Ok($name)
                } else {
                    Err(serde::de::Error::custom(format_args!("expected version `{}`", $version)))
                }
            }
        }
    };
}

version_marker! {
    /// [`TOOL_STARTED_VERSION`], as a field.
    ToolStartedVersion = TOOL_STARTED_VERSION
}

version_marker! {
    /// [`TOOL_TERMINAL_VERSION`], as a field.
    ToolTerminalVersion = TOOL_TERMINAL_VERSION
}

/// The `tool.started` occurrence, written before a tool is dispatched (write-ahead): a
/// started call without a terminal is a call whose outcome is unknown. It holds the call's
/// identity, the declared definition's security facts and the exact plan and workspace
/// authority it runs under, and structurally nothing else: no arguments, schema,
/// description, paths or secrets. Decoding refuses unknown members and other versions.
///
/// ```
/// use agent_core::event::ToolStarted;
///
/// let json = r#"{"version":"agent-core.tool-started/v1","call_id":"c1","name":"read","turn":1,
///   "plan_id":"static:x","plan_fingerprint":"sha256:00","plan_identity":"sha256:11",
///   "workspace":null,"declared":null}"#;
/// let started: ToolStarted = serde_json::from_str(json)?;
/// assert_eq!(started.call_id, "c1");
/// let extra = json.replace(r#""turn":1"#, r#""turn":1,"arguments":{}"#);
/// assert!(serde_json::from_str::<ToolStarted>(&extra).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStarted {
    /// Always [`TOOL_STARTED_VERSION`].
    pub version: ToolStartedVersion,
    /// The call's id.
    pub call_id: String,
    /// The requested tool name.
    pub name: String,
    /// The turn, from 1.
    pub turn: u32,
    /// The leased plan's id.
    pub plan_id: Arc<str>,
    /// The leased plan's fingerprint (`sha256:...`).
    pub plan_fingerprint: Arc<str>,
    /// The run's plan identity (`sha256:...`; see
    /// [`PlanIdentity`](crate::agent::PlanIdentity)).
    pub plan_identity: Arc<str>,
    /// The engine's workspace identity, if it has one.
    pub workspace: Option<Arc<str>>,
    /// The tool's declared facts (definition fingerprint, effect, replay safety,
    /// capabilities), or `None` when the plan does not declare the name (no code runs).
    pub declared: Option<Arc<ToolFacts>>,
}

/// How a tool call that produced a result ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool succeeded.
    Success,
    /// The tool (or a guard) answered with a model-visible problem; the run continues.
    Problem,
}

/// The `tool.completed` occurrence: the call produced a result. It names the call and the
/// tool and says whether the result was a success or a model-visible problem, and
/// structurally nothing else: no result content and no problem text.
///
/// ```
/// use agent_core::event::{ToolCompleted, ToolOutcome};
///
/// let completed = ToolCompleted::new("c1", "read", ToolOutcome::Success);
/// let json = serde_json::to_string(&completed)?;
/// assert_eq!(json, r#"{"version":"agent-core.tool-terminal/v1","call_id":"c1","name":"read","outcome":"success"}"#);
/// assert_eq!(serde_json::from_str::<ToolCompleted>(&json)?, completed);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCompleted {
    /// Always [`TOOL_TERMINAL_VERSION`].
    pub version: ToolTerminalVersion,
    /// The call.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// Success or model-visible problem.
    pub outcome: ToolOutcome,
}

impl ToolCompleted {
    /// The occurrence of call `call_id` of tool `name`.
    pub fn new(call_id: impl Into<String>, name: impl Into<String>, outcome: ToolOutcome) -> Self {
        ToolCompleted {
            version: ToolTerminalVersion,
            call_id: call_id.into(),
            name: name.into(),
            outcome,
        }
    }
}

/// The `tool.failed` occurrence: the call produced no result. It names the call and the
/// tool, the fixed failure code and, when the tool reported it, whether a side effect may
/// have happened and whether a retry is advised; structurally nothing else: no error text.
/// Decoding refuses unknown members, other versions, an execution state without a retry
/// disposition (or the reverse) and an uncertain outcome that allows a retry.
///
/// ```
/// use agent_core::event::{FailureCode, ToolFailed};
/// use agent_core::tool::{ExecutionState, RetryDisposition};
///
/// let failed = ToolFailed::new("c1", "send", FailureCode::ToolFailed,
///     Some((ExecutionState::Uncertain, RetryDisposition::Never)));
/// let json = serde_json::to_string(&failed)?;
/// assert_eq!(serde_json::from_str::<ToolFailed>(&json)?, failed);
/// let unsafe_retry = json.replace(r#""retry":"never""#, r#""retry":"allowed""#);
/// assert!(serde_json::from_str::<ToolFailed>(&unsafe_retry).is_err());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ToolFailedFields")]
pub struct ToolFailed {
    /// Always [`TOOL_TERMINAL_VERSION`].
    pub version: ToolTerminalVersion,
    /// The call.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// Why.
    pub code: FailureCode,
    /// Whether a side effect may have happened, when known.
    pub state: Option<ExecutionState>,
    /// Whether a retry is advised, when known.
    pub retry: Option<RetryDisposition>,
}

impl ToolFailed {
    /// The occurrence of call `call_id` of tool `name`, with the execution facts the tool
    /// reported, if any.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        code: FailureCode,
        execution: Option<(ExecutionState, RetryDisposition)>,
    ) -> Self {
        ToolFailed {
            version: ToolTerminalVersion,
            call_id: call_id.into(),
            name: name.into(),
            code,
            state: execution.map(|(state, _)| state),
            retry: execution.map(|(_, retry)| retry),
        }
    }
}

/// [`ToolFailed`] as decoded, before its execution facts are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFailedFields {
    version: ToolTerminalVersion,
    call_id: String,
    name: String,
    code: FailureCode,
    state: Option<ExecutionState>,
    retry: Option<RetryDisposition>,
}

impl TryFrom<ToolFailedFields> for ToolFailed {
    type Error = &'static str;

    fn try_from(fields: ToolFailedFields) -> Result<Self, Self::Error> {
        match (fields.state, fields.retry) {
            (Some(_), None) | (None, Some(_)) => {
                return Err("execution state and retry disposition come together");
            }
            (Some(ExecutionState::Uncertain), Some(RetryDisposition::Allowed)) => {
                return Err("an uncertain outcome never allows a retry");
            }
            _ => {}
        }
        Ok(ToolFailed {
            version: fields.version,
            call_id: fields.call_id,
            name: fields.name,
            code: fields.code,
            state: fields.state,
            retry: fields.retry,
        })
    }
}

/// What happened. Serialized adjacently tagged: `{"kind": "turn.started", "data": {"turn": 1}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", deny_unknown_fields)]
#[non_exhaustive]
pub enum Event {
    /// A new run began (not emitted when a snapshot is resumed).
    #[serde(rename = "run.started")]
    RunStarted {
        /// The agent definition's name.
        agent: Arc<str>,
    },
    /// The run finished with an answer. Terminal.
    #[serde(rename = "run.completed")]
    RunCompleted,
    /// The run failed. Terminal.
    #[serde(rename = "run.failed")]
    RunFailed {
        /// Why.
        code: FailureCode,
    },
    /// The run was cancelled through its own token. Terminal.
    #[serde(rename = "run.cancelled")]
    RunCancelled,
    /// A turn began.
    #[serde(rename = "turn.started")]
    TurnStarted {
        /// From 1.
        turn: u32,
    },
    /// A turn finished.
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        /// From 1.
        turn: u32,
    },
    /// A turn failed.
    #[serde(rename = "turn.failed")]
    TurnFailed {
        /// From 1.
        turn: u32,
        /// Why.
        code: FailureCode,
    },
    /// The model was asked.
    #[serde(rename = "model.started")]
    ModelStarted {
        /// The turn.
        turn: u32,
    },
    /// The model streamed text.
    #[serde(rename = "model.delta")]
    ModelDelta {
        /// The new text.
        text: String,
    },
    /// The model finished its response.
    #[serde(rename = "model.completed")]
    ModelCompleted {
        /// Tokens in the request (0 = unknown).
        input_tokens: u64,
        /// Tokens in the response (0 = unknown).
        output_tokens: u64,
    },
    /// The model operation failed.
    #[serde(rename = "model.failed")]
    ModelFailed {
        /// The provider's problem code, or one the engine assigned: `cancelled`,
        /// `model_protocol`, `provider_stream`, `panicked`, `event_emission`, or the failure
        /// code of an emission that failed before the model was asked.
        problem: String,
        /// Whether the provider called it retryable.
        retryable: bool,
        /// Whether it failed before any stream item was observed.
        before_stream: bool,
    },
    /// A tool call is about to be dispatched.
    #[serde(rename = "tool.started")]
    ToolStarted(ToolStarted),
    /// A tool reported progress.
    #[serde(rename = "tool.progress")]
    ToolProgress {
        /// The call.
        call_id: String,
        /// The tool's bounded progress text.
        message: String,
    },
    /// A tool call produced a result.
    #[serde(rename = "tool.completed")]
    ToolCompleted(ToolCompleted),
    /// A tool call produced no result.
    #[serde(rename = "tool.failed")]
    ToolFailed(ToolFailed),
    /// The run asked its user something.
    #[serde(rename = "interaction.started")]
    InteractionStarted {
        /// The interaction's id.
        id: String,
        /// Its kind.
        kind: String,
    },
    /// The user answered.
    #[serde(rename = "interaction.completed")]
    InteractionCompleted {
        /// The interaction's id.
        id: String,
    },
    /// The interaction failed (unavailable, declined, invalid answer).
    #[serde(rename = "interaction.failed")]
    InteractionFailed {
        /// The interaction's id.
        id: String,
    },
    /// The interaction was cancelled.
    #[serde(rename = "interaction.cancelled")]
    InteractionCancelled {
        /// The interaction's id.
        id: String,
    },
}

/// The kind of an [`Event`], without its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
#[allow(missing_docs)] // Each variant is the event of the same name.
pub enum EventKind {
    RunStarted,
    RunCompleted,
    RunFailed,
    RunCancelled,
    TurnStarted,
    TurnCompleted,
    TurnFailed,
    ModelStarted,
    ModelDelta,
    ModelCompleted,
    ModelFailed,
    ToolStarted,
    ToolProgress,
    ToolCompleted,
    ToolFailed,
    InteractionStarted,
    InteractionCompleted,
    InteractionFailed,
    InteractionCancelled,
}

impl EventKind {
    /// The dotted name, as serialized (`"turn.started"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStarted => "run.started",
            EventKind::RunCompleted => "run.completed",
            EventKind::RunFailed => "run.failed",
            EventKind::RunCancelled => "run.cancelled",
            EventKind::TurnStarted => "turn.started",
            EventKind::TurnCompleted => "turn.completed",
            EventKind::TurnFailed => "turn.failed",
            EventKind::ModelStarted => "model.started",
            EventKind::ModelDelta => "model.delta",
            EventKind::ModelCompleted => "model.completed",
            EventKind::ModelFailed => "model.failed",
            EventKind::ToolStarted => "tool.started",
            EventKind::ToolProgress => "tool.progress",
            EventKind::ToolCompleted => "tool.completed",
            EventKind::ToolFailed => "tool.failed",
            EventKind::InteractionStarted => "interaction.started",
            EventKind::InteractionCompleted => "interaction.completed",
            EventKind::InteractionFailed => "interaction.failed",
            EventKind::InteractionCancelled => "interaction.cancelled",
        }
    }

    /// Whether this kind closes an operation that a start event opened (the log reserves
    /// room for these so a run can always finish).
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            EventKind::RunCompleted
                | EventKind::RunFailed
                | EventKind::RunCancelled
                | EventKind::TurnCompleted
                | EventKind::TurnFailed
                | EventKind::ModelCompleted
                | EventKind::ModelFailed
                | EventKind::ToolCompleted
                | EventKind::ToolFailed
                | EventKind::InteractionCompleted
                | EventKind::InteractionFailed
                | EventKind::InteractionCancelled
        )
    }

    /// Whether this kind ends the run's log.
    pub const fn ends_run(self) -> bool {
        matches!(
            self,
            EventKind::RunCompleted | EventKind::RunFailed | EventKind::RunCancelled
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Event {
    /// The payload-free kind.
    pub const fn kind(&self) -> EventKind {
        match self {
            Event::RunStarted { .. } => EventKind::RunStarted,
            Event::RunCompleted => EventKind::RunCompleted,
            Event::RunFailed { .. } => EventKind::RunFailed,
            Event::RunCancelled => EventKind::RunCancelled,
            Event::TurnStarted { .. } => EventKind::TurnStarted,
            Event::TurnCompleted { .. } => EventKind::TurnCompleted,
            Event::TurnFailed { .. } => EventKind::TurnFailed,
            Event::ModelStarted { .. } => EventKind::ModelStarted,
            Event::ModelDelta { .. } => EventKind::ModelDelta,
            Event::ModelCompleted { .. } => EventKind::ModelCompleted,
            Event::ModelFailed { .. } => EventKind::ModelFailed,
            Event::ToolStarted(_) => EventKind::ToolStarted,
            Event::ToolProgress { .. } => EventKind::ToolProgress,
            Event::ToolCompleted(_) => EventKind::ToolCompleted,
            Event::ToolFailed(_) => EventKind::ToolFailed,
            Event::InteractionStarted { .. } => EventKind::InteractionStarted,
            Event::InteractionCompleted { .. } => EventKind::InteractionCompleted,
            Event::InteractionFailed { .. } => EventKind::InteractionFailed,
            Event::InteractionCancelled { .. } => EventKind::InteractionCancelled,
        }
    }

    /// The bytes this payload is charged in log and page limits: its variable-length text
    /// plus a fixed allowance for the rest. Computed without serializing, since it is paid
    /// on every append.
    pub fn accounted_bytes(&self) -> usize {
        const FIXED: usize = 64;
        FIXED
            + match self {
                Event::RunStarted { agent } => agent.len(),
                Event::ModelDelta { text } => text.len(),
                Event::ModelFailed { problem, .. } => problem.len(),
                Event::ToolStarted(started) => {
                    started.call_id.len()
                        + started.name.len()
                        + started.plan_id.len()
                        + started.plan_fingerprint.len()
                        + started.plan_identity.len()
                        + started.workspace.as_ref().map_or(0, |w| w.len())
                        + started
                            .declared
                            .as_ref()
                            .map_or(0, |d| d.fingerprint.len() + 24 * d.capabilities.len())
                }
                Event::ToolProgress { call_id, message } => call_id.len() + message.len(),
                Event::ToolCompleted(ToolCompleted { call_id, name, .. })
                | Event::ToolFailed(ToolFailed { call_id, name, .. }) => call_id.len() + name.len(),
                Event::InteractionStarted { id, kind } => id.len() + kind.len(),
                Event::InteractionCompleted { id }
                | Event::InteractionFailed { id }
                | Event::InteractionCancelled { id } => id.len(),
                _ => 0,
            }
    }
}

/// One sequenced event of one run.
///
/// ```
/// use std::sync::Arc;
/// use agent_core::event::{Envelope, Event, Timestamp};
///
/// let envelope = Envelope::new(Arc::from("run-1"), 1, Timestamp::from_unix_nanos(1), Event::TurnStarted { turn: 1 });
/// let json = serde_json::to_string(&envelope)?;
/// assert_eq!(json, r#"{"run_id":"run-1","sequence":1,"at":1,"kind":"turn.started","data":{"turn":1}}"#);
/// assert_eq!(serde_json::from_str::<Envelope>(&json)?, envelope);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    run_id: Arc<str>,
    sequence: u64,
    at: Timestamp,
    #[serde(flatten)]
    event: Event,
}

impl Envelope {
    /// Wraps `event`.
    pub fn new(run_id: Arc<str>, sequence: u64, at: Timestamp, event: Event) -> Self {
        Envelope {
            run_id,
            sequence,
            at,
            event,
        }
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The position in the run's log, from 1, without gaps.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// When the engine's clock stamped it.
    pub fn at(&self) -> Timestamp {
        self.at
    }

    /// What happened.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// Shorthand for `self.event().kind()`.
    pub fn kind(&self) -> EventKind {
        self.event.kind()
    }

    /// The bytes charged for this envelope in log limits.
    pub fn accounted_bytes(&self) -> usize {
        self.run_id.len() + self.event.accounted_bytes()
    }
}

/// Receives every event of every run, in order, after the log committed it. An observer
/// that fails (or panics) fails the run with [`FailureCode::ObserverFailed`] (or
/// [`FailureCode::Panicked`]); the event stays committed.
pub trait Observer: Send + Sync {
    /// Accepts one event; an error means it could not be recorded.
    fn publish<'a>(
        &'a self,
        envelope: &'a Envelope,
    ) -> crate::future::BoxFuture<'a, Result<(), ObserverError>>;
}

/// Why an [`Observer`] refused an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("observer refused event: {0}")]
pub struct ObserverError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_their_dotted_names() {
        let events = [
            Event::RunStarted {
                agent: Arc::from("a"),
            },
            Event::RunCompleted,
            Event::RunFailed {
                code: FailureCode::ToolFailed,
            },
            Event::RunCancelled,
            Event::TurnStarted { turn: 1 },
            Event::TurnCompleted { turn: 1 },
            Event::TurnFailed {
                turn: 1,
                code: FailureCode::Cancelled,
            },
            Event::ModelStarted { turn: 1 },
            Event::ModelDelta { text: "hi".into() },
            Event::ModelCompleted {
                input_tokens: 1,
                output_tokens: 2,
            },
            Event::ModelFailed {
                problem: "cancelled".into(),
                retryable: false,
                before_stream: true,
            },
            Event::ToolProgress {
                call_id: "c".into(),
                message: "m".into(),
            },
            Event::ToolCompleted(ToolCompleted::new("c", "read", ToolOutcome::Problem)),
            Event::ToolFailed(ToolFailed::new(
                "c",
                "read",
                FailureCode::ToolFailed,
                Some((ExecutionState::Uncertain, RetryDisposition::Never)),
            )),
            Event::ToolStarted(ToolStarted {
                version: ToolStartedVersion,
                call_id: "c".into(),
                name: "read".into(),
                turn: 1,
                plan_id: Arc::from("static:x"),
                plan_fingerprint: Arc::from("sha256:0"),
                plan_identity: Arc::from("sha256:1"),
                workspace: None,
                declared: None,
            }),
            Event::InteractionStarted {
                id: "i".into(),
                kind: "approval".into(),
            },
            Event::InteractionCompleted { id: "i".into() },
            Event::InteractionFailed { id: "i".into() },
            Event::InteractionCancelled { id: "i".into() },
        ];
        for event in events {
            let json = serde_json::to_value(&event).unwrap();
            assert_eq!(json["kind"], event.kind().as_str(), "{json}");
            let back: Event = serde_json::from_value(json).unwrap();
            assert_eq!(back, event);
        }
    }

    #[test]
    fn failure_codes_serialize_as_their_names() {
        for code in [
            FailureCode::Cancelled,
            FailureCode::ModelFailed,
            FailureCode::ModelProtocol,
            FailureCode::UndeclaredTool,
            FailureCode::DuplicateCallId,
            FailureCode::ToolFailed,
            FailureCode::MaxTurnsExceeded,
            FailureCode::Panicked,
            FailureCode::PlanReleaseFailed,
            FailureCode::ObserverFailed,
            FailureCode::EventLogExhausted,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::Value::from(code.as_str())
            );
        }
    }

    #[test]
    fn terminal_kinds_are_the_closing_ones() {
        assert!(EventKind::RunCancelled.is_terminal() && EventKind::RunCancelled.ends_run());
        assert!(EventKind::ToolFailed.is_terminal() && !EventKind::ToolFailed.ends_run());
        assert!(!EventKind::ToolStarted.is_terminal());
        assert!(!EventKind::ModelDelta.is_terminal());
    }

    #[test]
    fn unknown_payload_members_are_rejected() {
        let json =
            r#"{"run_id":"r","sequence":1,"at":1,"kind":"turn.started","data":{"turn":1,"x":2}}"#;
        assert!(serde_json::from_str::<Envelope>(json).is_err());
        let json = r#"{"run_id":"r","sequence":1,"at":1,"kind":"no.such","data":{}}"#;
        assert!(serde_json::from_str::<Envelope>(json).is_err());
    }
}

#[cfg(test)]
mod occurrence_tests {
    use super::*;
    use serde_json::{Value, json};

    fn started() -> Value {
        json!({
            "run_id": "r", "sequence": 1, "at": 1, "kind": "tool.started",
            "data": {
                "version": TOOL_STARTED_VERSION, "call_id": "c1", "name": "read", "turn": 1,
                "plan_id": "static:x", "plan_fingerprint": "sha256:0", "plan_identity": "sha256:1",
                "workspace": null,
                "declared": {
                    "fingerprint": "f", "effect": "read_only", "replay_safety": "safe",
                    "capabilities": ["filesystem.read"]
                }
            }
        })
    }

    fn failed() -> Value {
        json!({
            "run_id": "r", "sequence": 2, "at": 1, "kind": "tool.failed",
            "data": {
                "version": TOOL_TERMINAL_VERSION, "call_id": "c1", "name": "read",
                "code": "tool_failed", "state": "definitive", "retry": "allowed"
            }
        })
    }

    fn decodes(value: &Value) -> bool {
        serde_json::from_value::<Envelope>(value.clone()).is_ok()
    }

    #[test]
    fn occurrences_decode_strictly() {
        let completed = json!({
            "run_id": "r", "sequence": 2, "at": 1, "kind": "tool.completed",
            "data": { "version": TOOL_TERMINAL_VERSION, "call_id": "c1", "name": "read", "outcome": "problem" }
        });
        for valid in [started(), failed(), completed.clone()] {
            assert!(decodes(&valid), "{valid}");
            let envelope: Envelope = serde_json::from_value(valid.clone()).unwrap();
            assert_eq!(serde_json::to_value(&envelope).unwrap(), valid);
        }
        // Each row breaks one rule; every one is refused.
        let rows: Vec<(&str, Value, &str, Value)> = vec![
            (
                "started: arguments",
                started(),
                "arguments",
                json!({"path": "/etc"}),
            ),
            ("started: schema", started(), "input_schema", json!({})),
            (
                "started: description",
                started(),
                "description",
                json!("Reads."),
            ),
            (
                "started: old version",
                started(),
                "version",
                json!("agent-core.tool-started/v0"),
            ),
            (
                "started: terminal version",
                started(),
                "version",
                json!(TOOL_TERMINAL_VERSION),
            ),
            (
                "failed: error text",
                failed(),
                "error",
                json!("disk full at /home/me"),
            ),
            ("failed: problem", failed(), "problem", json!("secret")),
            (
                "failed: state without retry",
                failed(),
                "retry",
                Value::Null,
            ),
            (
                "failed: uncertain retry",
                failed(),
                "state",
                json!("uncertain"),
            ),
            (
                "completed: result",
                completed.clone(),
                "content",
                json!("file body"),
            ),
            (
                "completed: state",
                completed.clone(),
                "state",
                json!("definitive"),
            ),
            (
                "completed: version",
                completed,
                "version",
                json!(TOOL_STARTED_VERSION),
            ),
        ];
        for (name, mut value, field, bad) in rows {
            value["data"][field] = bad;
            assert!(!decodes(&value), "{name}: {value}");
        }
        // A missing member is refused too.
        let mut missing = started();
        missing["data"]
            .as_object_mut()
            .unwrap()
            .remove("plan_identity");
        assert!(!decodes(&missing));
        // Declared facts are strict as well.
        let mut facts = started();
        facts["data"]["declared"]["arguments"] = json!({});
        assert!(!decodes(&facts));
    }
}
