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

use crate::run_id::RunId;
use crate::stage::{is_plan_id, is_sha256_fingerprint};
use crate::tool::{
    Capability, ExecutionState, ReplaySafety, RetryDisposition, ShapeViolation, ToolFacts,
    check_identity, check_shape,
};

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

/// Why a tool occurrence was refused: one variant per rule, checked in the order listed
/// (the first one broken is reported). The rejected value is not echoed.
///
/// Both ways in apply every rule: decoding JSON (with serde, or with
/// [`ToolStarted::from_json`] and its siblings for this typed error) and checking an event
/// built in memory ([`ToolStarted::decode`] and its siblings).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OccurrenceError {
    /// The JSON does not have the occurrence's shape: not one object, an unknown, repeated
    /// or missing member (`null` is a value, absence is not), a value of the wrong type,
    /// another version, or data after the object. Carries the decoder's message.
    #[error("malformed tool occurrence: {0}")]
    Malformed(String),
    /// The event is not of the occurrence's kind.
    #[error("expected a `{expected}` event, found `{found}`")]
    Kind {
        /// The occurrence's kind.
        expected: EventKind,
        /// The event's kind.
        found: EventKind,
    },
    /// The call id breaks the rule of [`Call`](crate::tool::Call) ids: empty, longer than
    /// [`MAX_CALL_ID_BYTES`](crate::tool::MAX_CALL_ID_BYTES), surrounding whitespace, or a
    /// NUL, CR, LF or TAB.
    #[error("tool occurrence: call id is invalid: {0}")]
    CallId(&'static str),
    /// The tool name breaks the same rule (a call's name, which the plan may not declare).
    #[error("tool occurrence: tool name is invalid: {0}")]
    Name(&'static str),
    /// `turn` is 0; turns count from 1.
    #[error("tool occurrence: turn must be at least 1")]
    Turn,
    /// `plan_id` is not a [`PlanId`](crate::stage::PlanId).
    #[error(
        "tool occurrence: plan id must be 1 to 256 bytes without whitespace or control characters"
    )]
    PlanId,
    /// `plan_fingerprint` is not `sha256:` followed by 64 lowercase hex digits.
    #[error(
        "tool occurrence: plan fingerprint must be `sha256:` followed by 64 lowercase hex digits"
    )]
    PlanFingerprint,
    /// `plan_identity` is not `sha256:` followed by 64 lowercase hex digits.
    #[error("tool occurrence: plan identity must be `sha256:` followed by 64 lowercase hex digits")]
    PlanIdentity,
    /// `workspace` is neither `null` nor `sha256:` followed by 64 lowercase hex digits.
    #[error(
        "tool occurrence: workspace must be null or `sha256:` followed by 64 lowercase hex digits"
    )]
    Workspace,
    /// The declared definition fingerprint is not 64 lowercase hex digits (the form of
    /// [`Definition::fingerprint`](crate::tool::Definition::fingerprint)).
    #[error("tool occurrence: definition fingerprint must be 64 lowercase hex digits")]
    DefinitionFingerprint,
    /// A declared read-only tool is not replay-safe.
    #[error(
        "tool occurrence: a read_only tool must have replay safety `safe`, not `{replay_safety}`"
    )]
    ReadOnlyNotSafe {
        /// The declared replay safety.
        replay_safety: ReplaySafety,
    },
    /// A declared mutating tool claims replay safety `safe`.
    #[error("tool occurrence: a mutating tool cannot have replay safety `safe`")]
    MutatingSafe,
    /// A declared capability is listed twice.
    #[error("tool occurrence: capability `{capability}` is listed more than once")]
    DuplicateCapability {
        /// The repeated capability.
        capability: Capability,
    },
    /// A declared read-only tool lists a capability that can change state.
    #[error("tool occurrence: a read_only tool cannot declare capability `{capability}`")]
    ReadOnlyCapability {
        /// The capability.
        capability: Capability,
    },
    /// The declared capabilities are not in canonical order.
    #[error("tool occurrence: capabilities must be listed in canonical order")]
    CapabilityOrder,
    /// A failure has an execution state without a retry disposition, or the reverse.
    #[error("tool occurrence: execution state and retry disposition come together")]
    ExecutionUnpaired,
    /// A failure's uncertain outcome allows a retry.
    #[error("tool occurrence: an uncertain outcome never allows a retry")]
    UncertainRetry,
}

impl From<ShapeViolation> for OccurrenceError {
    fn from(violation: ShapeViolation) -> Self {
        match violation {
            ShapeViolation::ReadOnlyNotSafe(replay_safety) => {
                OccurrenceError::ReadOnlyNotSafe { replay_safety }
            }
            ShapeViolation::MutatingSafe => OccurrenceError::MutatingSafe,
            ShapeViolation::DuplicateCapability(capability) => {
                OccurrenceError::DuplicateCapability { capability }
            }
            ShapeViolation::ReadOnlyCapability(capability) => {
                OccurrenceError::ReadOnlyCapability { capability }
            }
        }
    }
}

/// The call id and tool name rules every occurrence shares.
fn check_call(call_id: &str, name: &str) -> Result<(), OccurrenceError> {
    check_identity(call_id).map_err(OccurrenceError::CallId)?;
    check_identity(name).map_err(OccurrenceError::Name)
}

/// Whether `value` is 64 lowercase hex digits.
fn is_hex_digest(value: &str) -> bool {
    value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The rules of [`DefinitionBuilder::build`](crate::tool::DefinitionBuilder::build) that
/// the facts carry, plus their canonical form.
fn check_facts(facts: &ToolFacts) -> Result<(), OccurrenceError> {
    if !is_hex_digest(&facts.fingerprint) {
        return Err(OccurrenceError::DefinitionFingerprint);
    }
    let unique = check_shape(
        facts.effect,
        facts.replay_safety,
        facts.capabilities.iter().copied(),
    )?;
    // Without duplicates, the list is canonical exactly when it iterates like the set.
    if !facts.capabilities.iter().eq(unique.iter()) {
        return Err(OccurrenceError::CapabilityOrder);
    }
    Ok(())
}

/// Maps a decoder error into [`OccurrenceError`], keeping a rule's own variant when the
/// rule (not the shape) refused the JSON.
fn from_json<'a, F, T>(json: &'a str) -> Result<T, OccurrenceError>
where
    F: Deserialize<'a>,
    T: TryFrom<F, Error = OccurrenceError>,
{
    let fields: F =
        serde_json::from_str(json).map_err(|e| OccurrenceError::Malformed(e.to_string()))?;
    T::try_from(fields)
}

/// The `tool.started` occurrence, written before a tool is dispatched (write-ahead): a
/// started call without a terminal is a call whose outcome is unknown. It holds the call's
/// identity, the declared definition's security facts and the exact plan and workspace
/// authority it runs under, and structurally nothing else: no arguments, schema,
/// description, paths or secrets.
///
/// Decoding refuses unknown, repeated and missing members, other versions and every rule of
/// [`OccurrenceError`]: the call id and name follow the rule of [`Call`](crate::tool::Call),
/// the turn counts from 1, the plan id is a [`PlanId`](crate::stage::PlanId), the plan
/// fingerprint, the plan identity and the workspace (when not `null`) are `sha256:` and 64
/// lowercase hex digits, and the declared facts are those of a valid
/// [`Definition`](crate::tool::Definition): a 64-hex-digit fingerprint, a read-only tool is
/// replay-safe and declares no capability that changes state, a mutating one is not `safe`,
/// and the capabilities are unique and in canonical order. [`ToolStarted::new`] builds one
/// from a run's [`PlanIdentity`](crate::agent::PlanIdentity) under the same rules.
///
/// ```
/// use agent_core::event::{OccurrenceError, ToolStarted};
///
/// let hex = "0".repeat(64);
/// let json = format!(
///     r#"{{"version":"agent-core.tool-started/v1","call_id":"c1","name":"read","turn":1,
///     "plan_id":"static:x","plan_fingerprint":"sha256:{hex}","plan_identity":"sha256:{hex}",
///     "workspace":null,"declared":null}}"#
/// );
/// let started = ToolStarted::from_json(&json)?;
/// assert_eq!(started.call_id, "c1");
/// assert_eq!(serde_json::from_str::<ToolStarted>(&json)?, started);
/// let turn_zero = json.replace(r#""turn":1"#, r#""turn":0"#);
/// assert_eq!(ToolStarted::from_json(&turn_zero), Err(OccurrenceError::Turn));
/// assert!(serde_json::from_str::<ToolStarted>(&turn_zero).is_err());
/// let extra = json.replace(r#""turn":1"#, r#""turn":1,"arguments":{}"#);
/// assert!(matches!(ToolStarted::from_json(&extra), Err(OccurrenceError::Malformed(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ToolStartedFields")]
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

impl ToolStarted {
    /// Checks every rule decoding checks, for an occurrence built in memory.
    pub fn check(&self) -> Result<(), OccurrenceError> {
        check_call(&self.call_id, &self.name)?;
        if self.turn == 0 {
            return Err(OccurrenceError::Turn);
        }
        if !is_plan_id(&self.plan_id) {
            return Err(OccurrenceError::PlanId);
        }
        if !is_sha256_fingerprint(&self.plan_fingerprint) {
            return Err(OccurrenceError::PlanFingerprint);
        }
        if !is_sha256_fingerprint(&self.plan_identity) {
            return Err(OccurrenceError::PlanIdentity);
        }
        if self
            .workspace
            .as_deref()
            .is_some_and(|w| !is_sha256_fingerprint(w))
        {
            return Err(OccurrenceError::Workspace);
        }
        self.declared.as_deref().map_or(Ok(()), check_facts)
    }

    /// The occurrence of a `tool.started` event, once it holds every rule: what an observer
    /// or host uses to read an event it did not decode itself.
    ///
    /// ```
    /// use agent_core::event::{Event, EventKind, OccurrenceError, ToolCompleted, ToolOutcome, ToolStarted};
    ///
    /// let completed = Event::ToolCompleted(ToolCompleted::new("c1", "read", ToolOutcome::Success));
    /// assert_eq!(
    ///     ToolStarted::decode(&completed),
    ///     Err(OccurrenceError::Kind { expected: EventKind::ToolStarted, found: EventKind::ToolCompleted })
    /// );
    /// ```
    pub fn decode(event: &Event) -> Result<&ToolStarted, OccurrenceError> {
        match event {
            Event::ToolStarted(started) => started.check().map(|()| started),
            other => Err(OccurrenceError::Kind {
                expected: EventKind::ToolStarted,
                found: other.kind(),
            }),
        }
    }

    /// Decodes the JSON of one occurrence (the `data` of a `tool.started` event), reporting
    /// the rule it breaks.
    pub fn from_json(json: &str) -> Result<ToolStarted, OccurrenceError> {
        from_json::<ToolStartedFields, _>(json)
    }
}

/// [`ToolStarted`] as decoded, before its rules are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolStartedFields {
    version: ToolStartedVersion,
    call_id: String,
    name: String,
    turn: u32,
    plan_id: Arc<str>,
    plan_fingerprint: Arc<str>,
    plan_identity: Arc<str>,
    // `deserialize_with` makes an absent member an error instead of `None`.
    #[serde(deserialize_with = "Option::deserialize")]
    workspace: Option<Arc<str>>,
    #[serde(deserialize_with = "Option::deserialize")]
    declared: Option<Arc<ToolFacts>>,
}

impl TryFrom<ToolStartedFields> for ToolStarted {
    type Error = OccurrenceError;

    fn try_from(fields: ToolStartedFields) -> Result<Self, Self::Error> {
        let started = ToolStarted {
            version: fields.version,
            call_id: fields.call_id,
            name: fields.name,
            turn: fields.turn,
            plan_id: fields.plan_id,
            plan_fingerprint: fields.plan_fingerprint,
            plan_identity: fields.plan_identity,
            workspace: fields.workspace,
            declared: fields.declared,
        };
        started.check()?;
        Ok(started)
    }
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
/// structurally nothing else: no result content and no problem text. Decoding refuses
/// unknown, repeated and missing members, other versions, and a call id or name that breaks
/// the rule of [`Call`](crate::tool::Call).
///
/// ```
/// use agent_core::event::{OccurrenceError, ToolCompleted, ToolOutcome};
///
/// let completed = ToolCompleted::new("c1", "read", ToolOutcome::Success);
/// let json = serde_json::to_string(&completed)?;
/// assert_eq!(json, r#"{"version":"agent-core.tool-terminal/v1","call_id":"c1","name":"read","outcome":"success"}"#);
/// assert_eq!(serde_json::from_str::<ToolCompleted>(&json)?, completed);
/// let no_id = json.replace(r#""call_id":"c1""#, r#""call_id":"""#);
/// assert!(matches!(ToolCompleted::from_json(&no_id), Err(OccurrenceError::CallId(_))));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "ToolCompletedFields")]
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
    /// The occurrence of call `call_id` of tool `name` (the ids of a valid
    /// [`Call`](crate::tool::Call); [`check`](Self::check) tells).
    pub fn new(call_id: impl Into<String>, name: impl Into<String>, outcome: ToolOutcome) -> Self {
        ToolCompleted {
            version: ToolTerminalVersion,
            call_id: call_id.into(),
            name: name.into(),
            outcome,
        }
    }

    /// Checks every rule decoding checks, for an occurrence built in memory.
    pub fn check(&self) -> Result<(), OccurrenceError> {
        check_call(&self.call_id, &self.name)
    }

    /// The occurrence of a `tool.completed` event, once it holds every rule.
    pub fn decode(event: &Event) -> Result<&ToolCompleted, OccurrenceError> {
        match event {
            Event::ToolCompleted(completed) => completed.check().map(|()| completed),
            other => Err(OccurrenceError::Kind {
                expected: EventKind::ToolCompleted,
                found: other.kind(),
            }),
        }
    }

    /// Decodes the JSON of one occurrence (the `data` of a `tool.completed` event),
    /// reporting the rule it breaks.
    pub fn from_json(json: &str) -> Result<ToolCompleted, OccurrenceError> {
        from_json::<ToolCompletedFields, _>(json)
    }
}

/// [`ToolCompleted`] as decoded, before its rules are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCompletedFields {
    version: ToolTerminalVersion,
    call_id: String,
    name: String,
    outcome: ToolOutcome,
}

impl TryFrom<ToolCompletedFields> for ToolCompleted {
    type Error = OccurrenceError;

    fn try_from(fields: ToolCompletedFields) -> Result<Self, Self::Error> {
        check_call(&fields.call_id, &fields.name)?;
        Ok(ToolCompleted {
            version: fields.version,
            call_id: fields.call_id,
            name: fields.name,
            outcome: fields.outcome,
        })
    }
}

/// The `tool.failed` occurrence: the call produced no result. It names the call and the
/// tool, the fixed failure code and, when the tool reported it, whether a side effect may
/// have happened and whether a retry is advised; structurally nothing else: no error text.
/// Decoding refuses unknown, repeated and missing members (`state` and `retry` are `null`
/// when unknown, never absent), other versions, a call id or name that breaks the rule of
/// [`Call`](crate::tool::Call), an execution state without a retry disposition (or the
/// reverse) and an uncertain outcome that allows a retry.
///
/// ```
/// use agent_core::event::{FailureCode, OccurrenceError, ToolFailed};
/// use agent_core::tool::{ExecutionState, RetryDisposition};
///
/// let failed = ToolFailed::new("c1", "send", FailureCode::ToolFailed,
///     Some((ExecutionState::Uncertain, RetryDisposition::Never)));
/// let json = serde_json::to_string(&failed)?;
/// assert_eq!(serde_json::from_str::<ToolFailed>(&json)?, failed);
/// let unsafe_retry = json.replace(r#""retry":"never""#, r#""retry":"allowed""#);
/// assert_eq!(ToolFailed::from_json(&unsafe_retry), Err(OccurrenceError::UncertainRetry));
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
    /// The occurrence of call `call_id` of tool `name` (the ids of a valid
    /// [`Call`](crate::tool::Call); [`check`](Self::check) tells), with the execution facts
    /// the tool reported, if any.
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

    /// Checks every rule decoding checks, for an occurrence built in memory.
    pub fn check(&self) -> Result<(), OccurrenceError> {
        check_call(&self.call_id, &self.name)?;
        match (self.state, self.retry) {
            (Some(_), None) | (None, Some(_)) => Err(OccurrenceError::ExecutionUnpaired),
            (Some(ExecutionState::Uncertain), Some(RetryDisposition::Allowed)) => {
                Err(OccurrenceError::UncertainRetry)
            }
            _ => Ok(()),
        }
    }

    /// The occurrence of a `tool.failed` event, once it holds every rule.
    pub fn decode(event: &Event) -> Result<&ToolFailed, OccurrenceError> {
        match event {
            Event::ToolFailed(failed) => failed.check().map(|()| failed),
            other => Err(OccurrenceError::Kind {
                expected: EventKind::ToolFailed,
                found: other.kind(),
            }),
        }
    }

    /// Decodes the JSON of one occurrence (the `data` of a `tool.failed` event), reporting
    /// the rule it breaks.
    pub fn from_json(json: &str) -> Result<ToolFailed, OccurrenceError> {
        from_json::<ToolFailedFields, _>(json)
    }
}

/// [`ToolFailed`] as decoded, before its rules are checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFailedFields {
    version: ToolTerminalVersion,
    call_id: String,
    name: String,
    code: FailureCode,
    // `deserialize_with` makes an absent member an error instead of `None`.
    #[serde(deserialize_with = "Option::deserialize")]
    state: Option<ExecutionState>,
    #[serde(deserialize_with = "Option::deserialize")]
    retry: Option<RetryDisposition>,
}

impl TryFrom<ToolFailedFields> for ToolFailed {
    type Error = OccurrenceError;

    fn try_from(fields: ToolFailedFields) -> Result<Self, Self::Error> {
        let failed = ToolFailed {
            version: fields.version,
            call_id: fields.call_id,
            name: fields.name,
            code: fields.code,
            state: fields.state,
            retry: fields.retry,
        };
        failed.check()?;
        Ok(failed)
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
/// use agent_core::RunId;
/// use agent_core::event::{Envelope, Event, Timestamp};
///
/// let envelope = Envelope::new(RunId::new("run-1")?, 1, Timestamp::from_unix_nanos(1), Event::TurnStarted { turn: 1 });
/// let json = serde_json::to_string(&envelope)?;
/// assert_eq!(json, r#"{"run_id":"run-1","sequence":1,"at":1,"kind":"turn.started","data":{"turn":1}}"#);
/// assert_eq!(serde_json::from_str::<Envelope>(&json)?, envelope);
/// // The run id is a kernel run id: one that breaks its rule does not decode.
/// assert!(serde_json::from_str::<Envelope>(&json.replace("run-1", " run-1")).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    run_id: RunId,
    sequence: u64,
    at: Timestamp,
    #[serde(flatten)]
    event: Event,
}

impl Envelope {
    /// Wraps `event`.
    pub fn new(run_id: RunId, sequence: u64, at: Timestamp, event: Event) -> Self {
        Envelope {
            run_id,
            sequence,
            at,
            event,
        }
    }

    /// The run.
    pub fn run_id(&self) -> &RunId {
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
        self.run_id.as_str().len() + self.event.accounted_bytes()
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
                plan_fingerprint: Arc::from(format!("sha256:{}", "0".repeat(64))),
                plan_identity: Arc::from(format!("sha256:{}", "1".repeat(64))),
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
mod occurrence_tests;
