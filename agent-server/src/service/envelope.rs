//! The kernel-to-wire translations: event kinds and payload projection, pending
//! interactions and their deltas, and the snapshot envelope in both directions.

use agent_core::event::{Envelope, Event, EventKind as CoreKind};
use agent_core::interaction::{Pending, PendingDelta};
use agent_core::tool::{ExecutionState, RetryDisposition};
use agent_protocol::event_payload::{
    MAX_EVENT_TOKEN_BYTES, WirePayload, decode_event_payload, decode_event_payload_rich,
    is_event_token,
};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::stream::{InteractionTailValidator, validate_run_event};
use serde_json::{Map, Value};

use super::TOOL_FAILED_TEXT;

fn map_kind(kind: CoreKind) -> pb::EventKind {
    use pb::EventKind as K;
    match kind {
        CoreKind::RunStarted => K::RunStarted,
        CoreKind::RunCompleted => K::RunCompleted,
        CoreKind::RunFailed => K::RunFailed,
        CoreKind::RunCancelled => K::RunCancelled,
        CoreKind::TurnStarted => K::TurnStarted,
        CoreKind::TurnCompleted => K::TurnCompleted,
        CoreKind::TurnFailed => K::TurnFailed,
        CoreKind::ModelStarted => K::ModelStarted,
        CoreKind::ModelDelta => K::ModelDelta,
        CoreKind::ModelCompleted => K::ModelCompleted,
        CoreKind::ModelFailed => K::ModelFailed,
        CoreKind::ToolStarted => K::ToolStarted,
        CoreKind::ToolProgress => K::ToolProgress,
        CoreKind::ToolCompleted => K::ToolCompleted,
        CoreKind::ToolFailed => K::ToolFailed,
        CoreKind::InteractionStarted => K::InteractionStarted,
        CoreKind::InteractionCompleted => K::InteractionCompleted,
        CoreKind::InteractionFailed => K::InteractionFailed,
        CoreKind::InteractionCancelled => K::InteractionCancelled,
        _ => K::Unspecified,
    }
}

/// The status text of a cancelled run (the kernel's `run.cancelled` carries no data).
pub const CANCELLED_TEXT: &str = "cancelled";
/// The message of every projected `model.failed`: the kernel records a problem code and
/// no provider text.
pub const MODEL_FAILED_MESSAGE: &str = "model operation failed";
/// The `model.failed` code when the kernel's problem is not a wire token.
pub const MODEL_FAILED_CODE: &str = "model_failed";
/// The error text of a projected `interaction.failed`.
pub const INTERACTION_FAILED_TEXT: &str = "interaction failed";
/// The error text of a projected `interaction.cancelled`.
pub const INTERACTION_CANCELLED_TEXT: &str = "interaction cancelled";

/// The model operation id of the model call of `turn`: `<run id>/model/<turn>`, as the
/// original writes it (the kernel asks the model once per turn, so the turn numbers the
/// operation). A run id too long for the token bound is cut at a character boundary.
pub fn model_operation_id(run_id: &str, turn: u32) -> String {
    let suffix = format!("/model/{turn}");
    let room = MAX_EVENT_TOKEN_BYTES.saturating_sub(suffix.len());
    let mut end = run_id.len().min(room);
    while !run_id.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &run_id[..end])
}

/// The kernel event of run `run_id` in the wire's shape; `None` for a kind the wire does
/// not know. The kernel keeps its richer facts; [`rich_facts`] carries them.
pub fn project_event(run_id: &str, event: &Event) -> Option<WirePayload> {
    use agent_protocol::event_payload as w;
    let status = |text: &str| w::StatusText {
        error: text.to_owned(),
    };
    let interaction = |id: &str, error: &str| w::InteractionTerminal {
        id: id.to_owned(),
        error: error.to_owned(),
    };
    Some(match event {
        Event::RunStarted { agent } => WirePayload::RunStarted(w::RunStarted {
            definition: agent.to_string(),
        }),
        Event::RunCompleted => WirePayload::RunCompleted,
        Event::RunFailed { code } => WirePayload::RunFailed(status(code.as_str())),
        Event::RunCancelled => WirePayload::RunCancelled(status(CANCELLED_TEXT)),
        Event::TurnStarted { turn } => WirePayload::TurnStarted(w::Turn { turn: *turn }),
        Event::TurnCompleted { turn } => WirePayload::TurnCompleted(w::Turn { turn: *turn }),
        Event::TurnFailed { code, .. } => WirePayload::TurnFailed(status(code.as_str())),
        Event::ModelStarted { turn } => WirePayload::ModelStarted(w::ModelStarted {
            turn: *turn,
            operation_id: model_operation_id(run_id, *turn),
        }),
        Event::ModelDelta { text } => WirePayload::ModelDelta(w::ModelDelta { text: text.clone() }),
        Event::ModelCompleted {
            input_tokens,
            output_tokens,
        } => WirePayload::ModelCompleted(w::ModelCompleted {
            input_tokens: *input_tokens,
            output_tokens: *output_tokens,
            metadata: None,
        }),
        Event::ModelFailed {
            problem,
            retryable,
            before_stream,
        } => WirePayload::ModelFailed(w::ModelFailed {
            code: if is_event_token(problem, MAX_EVENT_TOKEN_BYTES) {
                problem.clone()
            } else {
                MODEL_FAILED_CODE.to_owned()
            },
            message: MODEL_FAILED_MESSAGE.to_owned(),
            retryable: *retryable,
            before_stream: *before_stream,
            metadata: None,
        }),
        Event::ToolStarted(started) => WirePayload::ToolStarted(w::ToolStarted {
            call_id: started.call_id.clone(),
            name: started.name.clone(),
        }),
        Event::ToolProgress { call_id, message } => WirePayload::ToolProgress(w::ToolProgress {
            call_id: call_id.clone(),
            message: message.clone(),
        }),
        // A call that produced a result (a success or a model-visible problem) has no
        // execution facts on the wire: the original's client reads any outcome as failed.
        Event::ToolCompleted(completed) => WirePayload::ToolCompleted(w::ToolTerminal {
            call_id: completed.call_id.clone(),
            name: completed.name.clone(),
            error: String::new(),
            outcome: None,
            retry: None,
        }),
        Event::ToolFailed(failed) => {
            let (outcome, retry) = match (failed.state, failed.retry) {
                (Some(state), Some(retry)) => (
                    Some(match state {
                        ExecutionState::Definitive => w::ToolExecution::Definitive,
                        ExecutionState::Uncertain => w::ToolExecution::Uncertain,
                    }),
                    Some(match retry {
                        RetryDisposition::Never => w::ToolRetry::Never,
                        RetryDisposition::Allowed => w::ToolRetry::Allowed,
                    }),
                ),
                _ => (None, None),
            };
            WirePayload::ToolFailed(w::ToolTerminal {
                call_id: failed.call_id.clone(),
                name: failed.name.clone(),
                error: TOOL_FAILED_TEXT.to_owned(),
                outcome,
                retry,
            })
        }
        Event::InteractionStarted { id, kind } => {
            WirePayload::InteractionStarted(w::InteractionStarted {
                id: id.clone(),
                kind: kind.clone(),
            })
        }
        Event::InteractionCompleted { id } => {
            WirePayload::InteractionCompleted(interaction(id, ""))
        }
        Event::InteractionFailed { id } => {
            WirePayload::InteractionFailed(interaction(id, INTERACTION_FAILED_TEXT))
        }
        Event::InteractionCancelled { id } => {
            WirePayload::InteractionCancelled(interaction(id, INTERACTION_CANCELLED_TEXT))
        }
        _ => return None,
    })
}

/// The kernel's own facts of `event` (its serialized data: plan identity, declared effect
/// and replay, workspace, problem codes), sent only under
/// [`CAPABILITY_RICH_EVENTS`](agent_protocol::event_payload::CAPABILITY_RICH_EVENTS);
/// `None` for an event without data.
pub fn rich_facts(event: &Event) -> Option<Map<String, Value>> {
    match serde_json::to_value(event).ok()? {
        Value::Object(mut whole) => match whole.remove("data") {
            Some(Value::Object(data)) => Some(data),
            _ => None,
        },
        _ => None,
    }
}

/// The wire payload bytes of `event`; with `rich`, plus the kernel's facts in the
/// [`RICH_MEMBER`](agent_protocol::event_payload::RICH_MEMBER) object.
pub fn project_payload(run_id: &str, event: &Event, rich: bool) -> Option<Vec<u8>> {
    let payload = project_event(run_id, event)?;
    Some(payload.encode_with(if rich { rich_facts(event) } else { None }))
}

/// Whether `event` may be sent: the frame validator and the strict payload decoder (the
/// original client's rules; with `rich`, plus the one extra member). A refusal is a
/// server bug, so callers end the stream with the internal failure.
pub fn check_wire_event(event: &pb::RunEvent, rich: bool) -> bool {
    let Ok(kind) = pb::EventKind::try_from(event.kind) else {
        return false;
    };
    let decoded = if rich {
        decode_event_payload_rich(kind, &event.payload_json).map(|_| ())
    } else {
        decode_event_payload(kind, &event.payload_json).map(|_| ())
    };
    decoded.is_ok() && validate_run_event(event).is_ok()
}

/// One kernel envelope as a wire event in the wire's shape; `None` when it cannot be
/// represented or fails [`check_wire_event`].
pub fn event_to_wire(envelope: &Envelope) -> Option<pb::RunEvent> {
    event_to_wire_with(envelope, false)
}

/// [`event_to_wire`] for a connection that enabled the rich-events capability (`rich`).
pub fn event_to_wire_with(envelope: &Envelope, rich: bool) -> Option<pb::RunEvent> {
    project_wire_event(envelope, rich).filter(|event| check_wire_event(event, rich))
}

/// The projected wire event, not yet checked (the stream pages check every one).
pub(super) fn project_wire_event(envelope: &Envelope, rich: bool) -> Option<pb::RunEvent> {
    let kind = map_kind(envelope.kind());
    if kind == pb::EventKind::Unspecified {
        return None;
    }
    Some(pb::RunEvent {
        run_id: envelope.run_id().to_string(),
        sequence: envelope.sequence(),
        unix_nano: i64::try_from(envelope.at().unix_nanos()).ok()?,
        kind: kind as i32,
        payload_json: project_payload(envelope.run_id().as_str(), envelope.event(), rich)?,
        // On the wire `terminal` marks every event that ends its scope (run, turn, model,
        // tool, interaction), not only the run's end.
        terminal: agent_protocol::stream::is_terminal_kind(kind),
    })
}

/// One kernel pending interaction on the wire.
pub(super) fn pending_to_wire(pending: &Pending) -> Option<pb::PendingInteraction> {
    let request = pending.request();
    let value = pb::PendingInteraction {
        run_id: pending.scope().run_id().to_string(),
        interaction_id: request.id().to_owned(),
        kind: request.kind().to_owned(),
        prompt: request.prompt().to_owned(),
        schema_json: serde_json::to_vec(request.schema()).ok()?,
    };
    agent_protocol::stream::validate_pending_interaction(&value).ok()?;
    Some(value)
}

/// One kernel delta on the wire; a close names the interaction the tail last saw opened.
pub(super) fn delta_to_wire(
    delta: &PendingDelta,
    validator: &InteractionTailValidator,
) -> Option<pb::StreamInteractionsResponse> {
    let (revision, kind, interaction) = match delta {
        PendingDelta::Opened { revision, pending } => (
            *revision,
            pb::InteractionDeltaKind::Opened,
            pending_to_wire(pending)?,
        ),
        PendingDelta::Closed {
            revision,
            run_id,
            id,
            ..
        } => (
            *revision,
            pb::InteractionDeltaKind::Closed,
            validator
                .pending()
                .find(|p| p.run_id == **run_id && p.interaction_id == *id)?
                .clone(),
        ),
    };
    Some(pb::StreamInteractionsResponse {
        payload: Some(pb::stream_interactions_response::Payload::Delta(
            pb::InteractionDelta {
                revision,
                kind: kind as i32,
                interaction: Some(interaction),
            },
        )),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The run authority's JSON envelope as the wire envelope (same fields, bytes for hex).
pub fn envelope_to_wire(json: &[u8]) -> Option<pb::SnapshotEnvelope> {
    let envelope = agent_authority::SnapshotEnvelope::decode(json).ok()?;
    let authority = envelope.authority();
    Some(pb::SnapshotEnvelope {
        format: agent_protocol::limits::SNAPSHOT_FORMAT.to_owned(),
        run_id: envelope.run_id().to_owned(),
        last_sequence: envelope.last_sequence(),
        lifecycle: i32::try_from(envelope.lifecycle().number()).ok()?,
        payload: envelope.payload().to_vec(),
        sha256: envelope.payload_sha256().to_vec(),
        authority: Some(pb::SnapshotAuthority {
            scope_id: authority.scope_id().as_bytes().to_vec(),
            generation: authority.generation(),
            hmac_sha256: authority.mac().to_vec(),
        }),
    })
}

/// The wire envelope as the run authority's JSON envelope, which the host decodes and
/// verifies (the payload must be JSON; its bytes are kept exactly, so its digest holds).
pub fn envelope_from_wire(envelope: &pb::SnapshotEnvelope) -> Option<Vec<u8>> {
    let authority = envelope.authority.as_ref()?;
    let payload = std::str::from_utf8(&envelope.payload).ok()?;
    serde_json::from_str::<serde_json::Value>(payload).ok()?;
    let text = |value: &str| serde_json::to_string(value).ok();
    let json = format!(
        "{{\"format\":{},\"run_id\":{},\"last_sequence\":{},\"lifecycle\":{},\"payload\":{},\"sha256\":{},\"authority\":{{\"scope_id\":{},\"generation\":{},\"hmac_sha256\":{}}}}}",
        text(&envelope.format)?,
        text(&envelope.run_id)?,
        envelope.last_sequence,
        u32::try_from(envelope.lifecycle).ok()?,
        payload,
        text(&hex(&envelope.sha256))?,
        text(&hex(&authority.scope_id))?,
        authority.generation,
        text(&hex(&authority.hmac_sha256))?,
    );
    agent_authority::SnapshotEnvelope::decode(json.as_bytes()).ok()?;
    Some(json.into_bytes())
}

#[cfg(test)]
mod tests;
