//! The kernel-to-wire translations: event kinds and payload projection, pending
//! interactions and their deltas, and the snapshot envelope in both directions.

use agent_core::event::{Envelope, Event, EventKind as CoreKind};
use agent_core::interaction::{Pending, PendingDelta};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::stream::{InteractionTailValidator, validate_run_event};

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

/// The wire payload of an event: tool occurrences are projected to their safe fields;
/// every other event carries the kernel's payload (its serialized `data`) unchanged.
pub fn project_payload(event: &Event) -> Option<Vec<u8>> {
    let value = match event {
        Event::ToolStarted(started) => serde_json::json!({
            "call_id": started.call_id,
            "name": started.name,
        }),
        Event::ToolCompleted(completed) => serde_json::json!({
            "call_id": completed.call_id,
            "name": completed.name,
            "error": "",
            "outcome": completed.outcome,
        }),
        Event::ToolFailed(failed) => {
            let mut value = serde_json::json!({
                "call_id": failed.call_id,
                "name": failed.name,
                "error": TOOL_FAILED_TEXT,
            });
            if let Some(retry) = failed.retry {
                value["retry"] = serde_json::to_value(retry).ok()?;
            }
            value
        }
        other => {
            // An event without data (`run.completed`) has an empty payload.
            let mut whole = serde_json::to_value(other).ok()?;
            match whole.get_mut("data") {
                Some(data) => data.take(),
                None => return Some(Vec::new()),
            }
        }
    };
    serde_json::to_vec(&value).ok()
}

/// One kernel envelope as a wire event; `None` when it cannot be represented.
pub fn event_to_wire(envelope: &Envelope) -> Option<pb::RunEvent> {
    let kind = map_kind(envelope.kind());
    if kind == pb::EventKind::Unspecified {
        return None;
    }
    let event = pb::RunEvent {
        run_id: envelope.run_id().to_owned(),
        sequence: envelope.sequence(),
        unix_nano: i64::try_from(envelope.at().unix_nanos()).ok()?,
        kind: kind as i32,
        payload_json: project_payload(envelope.event())?,
        // On the wire `terminal` marks every event that ends its scope (run, turn, model,
        // tool, interaction), not only the run's end.
        terminal: agent_protocol::stream::is_terminal_kind(kind),
    };
    validate_run_event(&event).ok()?;
    Some(event)
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use agent_core::event::{
        FailureCode, Timestamp, ToolCompleted, ToolFailed, ToolOutcome, ToolStarted,
        ToolStartedVersion,
    };
    use agent_core::tool::{ExecutionState, RetryDisposition};

    fn wire(sequence: u64, event: Event) -> pb::RunEvent {
        let envelope = Envelope::new(
            Arc::from("run-1"),
            sequence,
            Timestamp::from_unix_nanos(1_700_000_000_000_000_000),
            event,
        );
        event_to_wire(&envelope).expect("representable")
    }

    fn json(event: &pb::RunEvent) -> serde_json::Value {
        serde_json::from_slice(&event.payload_json).unwrap()
    }

    #[test]
    fn event_to_wire_projects_only_the_safe_tool_fields() {
        let started = wire(
            1,
            Event::ToolStarted(ToolStarted {
                version: ToolStartedVersion,
                call_id: "c1".into(),
                name: "write".into(),
                turn: 1,
                plan_id: Arc::from("plan-secret"),
                plan_fingerprint: Arc::from(format!("sha256:{}", "a".repeat(64))),
                plan_identity: Arc::from(format!("sha256:{}", "b".repeat(64))),
                workspace: Some(Arc::from(format!("sha256:{}", "c".repeat(64)))),
                declared: None,
            }),
        );
        assert_eq!(started.kind, pb::EventKind::ToolStarted as i32);
        assert_eq!(
            json(&started),
            serde_json::json!({"call_id": "c1", "name": "write"})
        );
        let completed = wire(
            2,
            Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Problem)),
        );
        assert_eq!(
            json(&completed),
            serde_json::json!({"call_id": "c1", "name": "write", "error": "", "outcome": "problem"})
        );
        assert!(completed.terminal);
        let failed = wire(
            3,
            Event::ToolFailed(ToolFailed::new(
                "c1",
                "write",
                FailureCode::ToolFailed,
                Some((ExecutionState::Uncertain, RetryDisposition::Never)),
            )),
        );
        let value = json(&failed);
        assert_eq!(value["error"], TOOL_FAILED_TEXT);
        assert_eq!(value["call_id"], "c1");
        assert!(value.get("retry").is_some(), "{value}");
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(
            keys.iter()
                .all(|k| ["call_id", "name", "error", "retry"].contains(k)),
            "{keys:?}"
        );
        // Every other event carries the kernel's payload unchanged.
        let turn = wire(4, Event::TurnStarted { turn: 2 });
        assert_eq!(json(&turn), serde_json::json!({"turn": 2}));
        assert!(!turn.terminal);
    }
}
