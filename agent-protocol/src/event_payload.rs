//! The `payload_json` of each run event in the wire's shape, and its strict decoder.
//!
//! `RunEvent.payload_json` is part of the wire contract: a client of the original system
//! decodes it for every kind and refuses the whole page when it does not fit. The decoder
//! here applies the same rules, so a server can check each payload before it is sent and a
//! client can refuse what the original's client would refuse:
//!
//! - one JSON object and nothing after it;
//! - no member the kind does not define (a daemon adds none of its own), except the
//!   [`RICH_MEMBER`] object when the connection enabled [`CAPABILITY_RICH_EVENTS`];
//! - an empty payload only for `run.completed`, which must be empty;
//! - an absent member decodes as its zero value and then meets the kind's rule, so an
//!   absent required token is refused as empty;
//! - the token and text bounds below.
//!
//! ```
//! use agent_protocol::event_payload::{Turn, WirePayload, decode_event_payload};
//! use agent_protocol::pb::engine::v1::EventKind;
//!
//! let payload = WirePayload::TurnStarted(Turn { turn: 1 });
//! let bytes = payload.encode();
//! assert_eq!(bytes, br#"{"turn":1}"#);
//! assert_eq!(decode_event_payload(EventKind::TurnStarted, &bytes)?, payload);
//! assert!(decode_event_payload(EventKind::TurnStarted, br#"{"turn":1,"extra":0}"#).is_err());
//! assert!(decode_event_payload(EventKind::TurnStarted, br#"{"turn":0}"#).is_err());
//! # Ok::<(), agent_protocol::event_payload::PayloadError>(())
//! ```

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::limits::{MAX_ID_BYTES, MAX_NAME_BYTES};
use crate::pb::engine::v1::EventKind;

/// Longest token in an event payload (call ids, tool names, interaction ids and kinds,
/// model operation ids, model failure codes).
pub const MAX_EVENT_TOKEN_BYTES: usize = MAX_ID_BYTES;
/// Longest definition id of `run.started`.
pub const MAX_EVENT_DEFINITION_BYTES: usize = MAX_NAME_BYTES;
/// Longest status text of `run.failed`, `run.cancelled` and `turn.failed` (1 MiB, the
/// protocol's text bound).
pub const MAX_EVENT_STATUS_TEXT_BYTES: usize = 1024 * 1024;
/// Longest `model.delta` text (256 KiB).
pub const MAX_MODEL_DELTA_TEXT_BYTES: usize = 256 * 1024;
/// Longest model failure message, tool progress message and tool error text.
pub const MAX_EVENT_DETAIL_TEXT_BYTES: usize = 4096;
/// Longest interaction terminal error text.
pub const MAX_INTERACTION_ERROR_BYTES: usize = 2048;

/// Capability of our own: event payloads may carry the kernel's richer facts in one extra
/// member, [`RICH_MEMBER`]. Only a connection that enabled it in Initialize sees that
/// member; every other connection receives exactly the wire's shapes.
pub const CAPABILITY_RICH_EVENTS: &str = "agent-kit.rich-events/v1";
/// The one member a payload may add under [`CAPABILITY_RICH_EVENTS`]: a JSON object.
pub const RICH_MEMBER: &str = "agent_kit";

/// Which rule a payload broke. Messages are fixed: they never echo payload content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadError {
    /// The kind is `EVENT_KIND_UNSPECIFIED` or unknown.
    UnknownKind,
    /// The kind requires a payload and it is empty.
    Empty,
    /// `run.completed` carries a payload.
    NotEmpty,
    /// Not one JSON object (malformed, another JSON type, or something after it).
    NotObject,
    /// A member the kind does not define, or [`RICH_MEMBER`] without the capability.
    UnknownMember,
    /// A member has the wrong JSON type.
    MemberType,
    /// A member breaks its kind's rule (a bound, a token, an enumeration).
    Rule(&'static str),
}

impl fmt::Display for PayloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PayloadError::UnknownKind => f.write_str("event kind is not known"),
            PayloadError::Empty => f.write_str("event payload is required"),
            PayloadError::NotEmpty => f.write_str("run.completed payload must be empty"),
            PayloadError::NotObject => f.write_str("event payload is not one JSON object"),
            PayloadError::UnknownMember => f.write_str("event payload has an unknown member"),
            PayloadError::MemberType => f.write_str("event payload member has the wrong type"),
            PayloadError::Rule(rule) => f.write_str(rule),
        }
    }
}

impl std::error::Error for PayloadError {}

/// `run.started`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunStarted {
    /// The run's definition id.
    pub definition: String,
}

/// `run.failed`, `run.cancelled`, `turn.failed`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatusText {
    /// Non-empty status text.
    pub error: String,
}

/// `turn.started`, `turn.completed`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Turn {
    /// From 1.
    pub turn: u32,
}

/// `model.started`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelStarted {
    /// From 1.
    pub turn: u32,
    /// The model operation (`<run id>/model/<n>` in the original).
    pub operation_id: String,
}

/// `model.delta`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelDelta {
    /// The new text.
    pub text: String,
}

/// `model.completed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelCompleted {
    /// Tokens in the request.
    pub input_tokens: u64,
    /// Tokens in the response.
    pub output_tokens: u64,
    /// Provider metadata, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Vec<Value>>,
}

/// `model.failed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelFailed {
    /// The problem code (token).
    pub code: String,
    /// Non-empty message.
    pub message: String,
    /// Whether a retry may succeed.
    pub retryable: bool,
    /// Whether it failed before any stream item.
    pub before_stream: bool,
    /// Provider metadata, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Vec<Value>>,
}

/// `tool.started`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolStarted {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub name: String,
}

/// `tool.progress`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolProgress {
    /// The call.
    pub call_id: String,
    /// Non-empty progress text.
    pub message: String,
}

/// Whether a failed call left the world in a known state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolExecution {
    /// Nothing happened, or exactly what happened is known.
    Definitive,
    /// A side effect may or may not have happened.
    Uncertain,
}

/// Whether running the same call again is advised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolRetry {
    /// Do not retry.
    Never,
    /// A retry may succeed.
    Allowed,
}

/// `tool.completed`, `tool.failed`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolTerminal {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The error text; may be empty.
    pub error: String,
    /// The execution facts, when known: both or neither on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ToolExecution>,
    /// Paired with `outcome`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<ToolRetry>,
}

/// [`ToolTerminal`] as decoded: the original reads the enumerations as strings, so an
/// empty string is the same as an absent member.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ToolTerminalFields {
    call_id: String,
    name: String,
    error: String,
    outcome: String,
    retry: String,
}

/// `interaction.started`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InteractionStarted {
    /// The interaction.
    pub id: String,
    /// Its kind.
    pub kind: String,
}

/// `interaction.completed`, `interaction.failed`, `interaction.cancelled`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InteractionTerminal {
    /// The interaction.
    pub id: String,
    /// The error text; may be empty (then omitted on the wire).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// One event payload in the wire's shape, one variant per kind.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // Each variant is the kind of the same name.
pub enum WirePayload {
    RunStarted(RunStarted),
    RunCompleted,
    RunFailed(StatusText),
    RunCancelled(StatusText),
    TurnStarted(Turn),
    TurnCompleted(Turn),
    TurnFailed(StatusText),
    ModelStarted(ModelStarted),
    ModelDelta(ModelDelta),
    ModelCompleted(ModelCompleted),
    ModelFailed(ModelFailed),
    ToolStarted(ToolStarted),
    ToolProgress(ToolProgress),
    ToolCompleted(ToolTerminal),
    ToolFailed(ToolTerminal),
    InteractionStarted(InteractionStarted),
    InteractionCompleted(InteractionTerminal),
    InteractionFailed(InteractionTerminal),
    InteractionCancelled(InteractionTerminal),
}

impl WirePayload {
    /// The kind this payload belongs to.
    pub fn kind(&self) -> EventKind {
        use WirePayload as W;
        match self {
            W::RunStarted(_) => EventKind::RunStarted,
            W::RunCompleted => EventKind::RunCompleted,
            W::RunFailed(_) => EventKind::RunFailed,
            W::RunCancelled(_) => EventKind::RunCancelled,
            W::TurnStarted(_) => EventKind::TurnStarted,
            W::TurnCompleted(_) => EventKind::TurnCompleted,
            W::TurnFailed(_) => EventKind::TurnFailed,
            W::ModelStarted(_) => EventKind::ModelStarted,
            W::ModelDelta(_) => EventKind::ModelDelta,
            W::ModelCompleted(_) => EventKind::ModelCompleted,
            W::ModelFailed(_) => EventKind::ModelFailed,
            W::ToolStarted(_) => EventKind::ToolStarted,
            W::ToolProgress(_) => EventKind::ToolProgress,
            W::ToolCompleted(_) => EventKind::ToolCompleted,
            W::ToolFailed(_) => EventKind::ToolFailed,
            W::InteractionStarted(_) => EventKind::InteractionStarted,
            W::InteractionCompleted(_) => EventKind::InteractionCompleted,
            W::InteractionFailed(_) => EventKind::InteractionFailed,
            W::InteractionCancelled(_) => EventKind::InteractionCancelled,
        }
    }

    /// The payload as a JSON object, `None` for `run.completed`.
    fn to_object(&self) -> Option<Map<String, Value>> {
        use WirePayload as W;
        let value = match self {
            W::RunCompleted => return None,
            W::RunStarted(p) => serde_json::to_value(p),
            W::RunFailed(p) | W::RunCancelled(p) | W::TurnFailed(p) => serde_json::to_value(p),
            W::TurnStarted(p) | W::TurnCompleted(p) => serde_json::to_value(p),
            W::ModelStarted(p) => serde_json::to_value(p),
            W::ModelDelta(p) => serde_json::to_value(p),
            W::ModelCompleted(p) => serde_json::to_value(p),
            W::ModelFailed(p) => serde_json::to_value(p),
            W::ToolStarted(p) => serde_json::to_value(p),
            W::ToolProgress(p) => serde_json::to_value(p),
            W::ToolCompleted(p) | W::ToolFailed(p) => serde_json::to_value(p),
            W::InteractionStarted(p) => serde_json::to_value(p),
            W::InteractionCompleted(p) | W::InteractionFailed(p) | W::InteractionCancelled(p) => {
                serde_json::to_value(p)
            }
        };
        // Every shape is a struct of strings, integers, booleans and JSON values, which
        // serialize infallibly to an object.
        match value {
            Ok(Value::Object(map)) => Some(map),
            _ => Some(Map::new()),
        }
    }

    /// The payload bytes: empty for `run.completed`, else one JSON object. The bytes are
    /// not checked; [`decode_event_payload`] is the check.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(None)
    }

    /// [`encode`](Self::encode), adding `rich` as the [`RICH_MEMBER`] object (for a
    /// connection that enabled [`CAPABILITY_RICH_EVENTS`]). `run.completed` stays empty.
    pub fn encode_with(&self, rich: Option<Map<String, Value>>) -> Vec<u8> {
        let Some(mut object) = self.to_object() else {
            return Vec::new();
        };
        if let Some(rich) = rich {
            object.insert(RICH_MEMBER.to_owned(), Value::Object(rich));
        }
        serde_json::to_vec(&Value::Object(object)).unwrap_or_default()
    }
}

/// The original's client token rule: non-empty, at most `max` bytes, no control characters.
pub fn is_event_token(value: &str, max: usize) -> bool {
    !value.is_empty() && value.len() <= max && !value.chars().any(char::is_control)
}

fn rule(ok: bool, message: &'static str) -> Result<(), PayloadError> {
    if ok {
        Ok(())
    } else {
        Err(PayloadError::Rule(message))
    }
}

fn members<T: DeserializeOwned>(object: Map<String, Value>) -> Result<T, PayloadError> {
    serde_json::from_value(Value::Object(object)).map_err(|error| {
        if error.to_string().starts_with("unknown field") {
            PayloadError::UnknownMember
        } else {
            PayloadError::MemberType
        }
    })
}

fn status(object: Map<String, Value>) -> Result<StatusText, PayloadError> {
    let p: StatusText = members(object)?;
    rule(!p.error.is_empty(), "status text is required")?;
    rule(
        p.error.len() <= MAX_EVENT_STATUS_TEXT_BYTES,
        "status text is too long",
    )?;
    Ok(p)
}

fn turn(object: Map<String, Value>) -> Result<Turn, PayloadError> {
    let p: Turn = members(object)?;
    rule(p.turn >= 1, "turn must be at least 1")?;
    Ok(p)
}

fn token(value: &str, max: usize, message: &'static str) -> Result<(), PayloadError> {
    rule(is_event_token(value, max), message)
}

fn tool_terminal(object: Map<String, Value>) -> Result<ToolTerminal, PayloadError> {
    let p: ToolTerminalFields = members(object)?;
    token(
        &p.call_id,
        MAX_EVENT_TOKEN_BYTES,
        "tool call id is not a token",
    )?;
    token(&p.name, MAX_EVENT_TOKEN_BYTES, "tool name is not a token")?;
    rule(
        p.error.len() <= MAX_EVENT_DETAIL_TEXT_BYTES,
        "tool error text is too long",
    )?;
    let outcome = match p.outcome.as_str() {
        "" => None,
        "definitive" => Some(ToolExecution::Definitive),
        "uncertain" => Some(ToolExecution::Uncertain),
        _ => {
            return Err(PayloadError::Rule(
                "tool outcome must be definitive or uncertain",
            ));
        }
    };
    let retry = match p.retry.as_str() {
        "" => None,
        "never" => Some(ToolRetry::Never),
        "allowed" => Some(ToolRetry::Allowed),
        _ => return Err(PayloadError::Rule("tool retry must be never or allowed")),
    };
    match (outcome, retry) {
        (None, None)
        | (Some(ToolExecution::Definitive), Some(_))
        | (Some(ToolExecution::Uncertain), Some(ToolRetry::Never)) => {}
        (Some(ToolExecution::Uncertain), Some(ToolRetry::Allowed)) => {
            return Err(PayloadError::Rule(
                "an uncertain tool outcome allows no retry",
            ));
        }
        _ => {
            return Err(PayloadError::Rule(
                "tool outcome and retry are both present or both absent",
            ));
        }
    }
    Ok(ToolTerminal {
        call_id: p.call_id,
        name: p.name,
        error: p.error,
        outcome,
        retry,
    })
}

fn interaction_terminal(object: Map<String, Value>) -> Result<InteractionTerminal, PayloadError> {
    let p: InteractionTerminal = members(object)?;
    token(
        &p.id,
        MAX_EVENT_TOKEN_BYTES,
        "interaction id is not a token",
    )?;
    rule(
        p.error.len() <= MAX_INTERACTION_ERROR_BYTES,
        "interaction error text is too long",
    )?;
    Ok(p)
}

/// The payload of an event of `kind`, decoded with the original client's rules. Refuses
/// [`RICH_MEMBER`]: use [`decode_event_payload_rich`] on a connection that enabled
/// [`CAPABILITY_RICH_EVENTS`].
pub fn decode_event_payload(kind: EventKind, bytes: &[u8]) -> Result<WirePayload, PayloadError> {
    decode(kind, bytes, false).map(|(payload, _)| payload)
}

/// [`decode_event_payload`] that also accepts one [`RICH_MEMBER`] object, returned beside
/// the wire payload.
pub fn decode_event_payload_rich(
    kind: EventKind,
    bytes: &[u8],
) -> Result<(WirePayload, Option<Map<String, Value>>), PayloadError> {
    decode(kind, bytes, true)
}

fn decode(
    kind: EventKind,
    bytes: &[u8],
    rich: bool,
) -> Result<(WirePayload, Option<Map<String, Value>>), PayloadError> {
    use WirePayload as W;
    match kind {
        EventKind::Unspecified => return Err(PayloadError::UnknownKind),
        EventKind::RunCompleted => {
            return if bytes.is_empty() {
                Ok((W::RunCompleted, None))
            } else {
                Err(PayloadError::NotEmpty)
            };
        }
        _ if bytes.is_empty() => return Err(PayloadError::Empty),
        _ => {}
    }
    // One object and nothing after it (serde refuses trailing non-whitespace).
    let mut object: Map<String, Value> =
        serde_json::from_slice(bytes).map_err(|_| PayloadError::NotObject)?;
    let extra = match object.remove(RICH_MEMBER) {
        None => None,
        Some(_) if !rich => return Err(PayloadError::UnknownMember),
        Some(Value::Object(extra)) => Some(extra),
        Some(_) => return Err(PayloadError::MemberType),
    };
    let payload = match kind {
        EventKind::Unspecified | EventKind::RunCompleted => return Err(PayloadError::UnknownKind),
        EventKind::RunStarted => {
            let p: RunStarted = members(object)?;
            token(
                &p.definition,
                MAX_EVENT_DEFINITION_BYTES,
                "definition id is not a token",
            )?;
            W::RunStarted(p)
        }
        EventKind::RunFailed => W::RunFailed(status(object)?),
        EventKind::RunCancelled => W::RunCancelled(status(object)?),
        EventKind::TurnFailed => W::TurnFailed(status(object)?),
        EventKind::TurnStarted => W::TurnStarted(turn(object)?),
        EventKind::TurnCompleted => W::TurnCompleted(turn(object)?),
        EventKind::ModelStarted => {
            let p: ModelStarted = members(object)?;
            rule(p.turn >= 1, "turn must be at least 1")?;
            token(
                &p.operation_id,
                MAX_EVENT_TOKEN_BYTES,
                "model operation id is not a token",
            )?;
            W::ModelStarted(p)
        }
        EventKind::ModelDelta => {
            let p: ModelDelta = members(object)?;
            rule(
                p.text.len() <= MAX_MODEL_DELTA_TEXT_BYTES,
                "model delta text is too long",
            )?;
            W::ModelDelta(p)
        }
        EventKind::ModelCompleted => {
            // `metadata` is an array by type; its items are the provider's.
            W::ModelCompleted(members(object)?)
        }
        EventKind::ModelFailed => {
            let p: ModelFailed = members(object)?;
            token(
                &p.code,
                MAX_EVENT_TOKEN_BYTES,
                "model failure code is not a token",
            )?;
            rule(!p.message.is_empty(), "model failure message is required")?;
            rule(
                p.message.len() <= MAX_EVENT_DETAIL_TEXT_BYTES,
                "model failure message is too long",
            )?;
            W::ModelFailed(p)
        }
        EventKind::ToolStarted => {
            let p: ToolStarted = members(object)?;
            token(
                &p.call_id,
                MAX_EVENT_TOKEN_BYTES,
                "tool call id is not a token",
            )?;
            token(&p.name, MAX_EVENT_TOKEN_BYTES, "tool name is not a token")?;
            W::ToolStarted(p)
        }
        EventKind::ToolProgress => {
            let p: ToolProgress = members(object)?;
            token(
                &p.call_id,
                MAX_EVENT_TOKEN_BYTES,
                "tool call id is not a token",
            )?;
            rule(!p.message.is_empty(), "tool progress message is required")?;
            rule(
                p.message.len() <= MAX_EVENT_DETAIL_TEXT_BYTES,
                "tool progress message is too long",
            )?;
            W::ToolProgress(p)
        }
        EventKind::ToolCompleted => W::ToolCompleted(tool_terminal(object)?),
        EventKind::ToolFailed => W::ToolFailed(tool_terminal(object)?),
        EventKind::InteractionStarted => {
            let p: InteractionStarted = members(object)?;
            token(
                &p.id,
                MAX_EVENT_TOKEN_BYTES,
                "interaction id is not a token",
            )?;
            token(
                &p.kind,
                MAX_EVENT_TOKEN_BYTES,
                "interaction kind is not a token",
            )?;
            W::InteractionStarted(p)
        }
        EventKind::InteractionCompleted => W::InteractionCompleted(interaction_terminal(object)?),
        EventKind::InteractionFailed => W::InteractionFailed(interaction_terminal(object)?),
        EventKind::InteractionCancelled => W::InteractionCancelled(interaction_terminal(object)?),
    };
    Ok((payload, extra))
}

/// [`decode_event_payload`] for a raw wire kind number.
pub fn decode_event_payload_raw(kind: i32, bytes: &[u8]) -> Result<WirePayload, PayloadError> {
    let kind = EventKind::try_from(kind).map_err(|_| PayloadError::UnknownKind)?;
    decode_event_payload(kind, bytes)
}

#[cfg(test)]
mod tests;
