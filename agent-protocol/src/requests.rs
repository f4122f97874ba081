//! Request validators (docs/protocol.md, "RPCs"). Each returns `INVALID_ARGUMENT`
//! violations (except where a rule names another code).

use prost::Message as _;

use crate::Negotiated;
use crate::limits::{
    CAPABILITY_SNAPSHOT_AUTHORITY, CAPABILITY_SNAPSHOTS, SNAPSHOT_TRANSFER_MINIMUM_MINOR,
};
use crate::limits::{
    INTERACTION_STREAM_MINIMUM_MINOR, MAX_CANCEL_REASON_BYTES, MAX_DEFINITION_TURNS, MAX_ID_BYTES,
    MAX_INTERACTION_PAYLOAD_BYTES, MAX_JSON_BYTES, MAX_MESSAGE_PARTS, MAX_NAME_BYTES,
    MIN_DEFINITION_TURNS, MIN_MESSAGE_PARTS,
};
use crate::negotiate::MISSING_CAPABILITY_MESSAGE;
use crate::pb::common::v1::{CapabilityMismatch, ErrorCode, status::Detail};
use crate::pb::engine::v1::{
    CancelRunRequest, ContentPart, Definition, DefinitionSet, ExportSnapshotRequest, HealthRequest,
    Message, MessageRole, PendingInteraction, RespondInteractionRequest, ResumeRunRequest,
    StartRunRequest, StreamEventsRequest, StreamInteractionsRequest, SuspendRunRequest,
    content_part::Value,
};
use crate::status::{Violation, check_client_ownership};
use crate::token::{is_json, is_token};
use crate::wire;

/// The retired `replay_limit` field of `StreamInteractionsRequest`.
pub const STREAM_INTERACTIONS_RETIRED_FIELD: u32 = 3;

pub(crate) fn fits(len: usize, max: u64) -> bool {
    len as u64 <= max
}

fn size(len: usize, negotiated: &Negotiated) -> Result<(), Violation> {
    if fits(len, negotiated.limits.max_message_bytes) {
        Ok(())
    } else {
        Err(Violation::invalid(
            "message exceeds the negotiated message size",
        ))
    }
}

/// Client fields: id token <= 128 and a non-zero epoch.
pub fn validate_client_fields(client_id: &str, epoch: u64) -> Result<(), Violation> {
    if !is_token(client_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "client id is not a token of at most 128 bytes",
        ));
    }
    if epoch == 0 {
        return Err(Violation::invalid("ownership epoch is zero"));
    }
    Ok(())
}

/// Mutation fields: client fields plus an operation id token <= 128.
pub fn validate_mutation_fields(
    client_id: &str,
    epoch: u64,
    operation_id: &str,
) -> Result<(), Violation> {
    validate_client_fields(client_id, epoch)?;
    if !is_token(operation_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "operation id is not a token of at most 128 bytes",
        ));
    }
    Ok(())
}

/// A run id token <= 128.
pub fn validate_run_id(run_id: &str) -> Result<(), Violation> {
    if is_token(run_id, MAX_ID_BYTES) {
        Ok(())
    } else {
        Err(Violation::invalid(
            "run id is not a token of at most 128 bytes",
        ))
    }
}

/// One served definition.
pub fn validate_definition(d: &Definition) -> Result<(), Violation> {
    if !is_token(&d.id, MAX_NAME_BYTES)
        || !is_token(&d.revision, MAX_NAME_BYTES)
        || !is_token(&d.model, MAX_NAME_BYTES)
    {
        return Err(Violation::invalid(
            "definition id, revision and model are tokens of at most 256 bytes",
        ));
    }
    if !(MIN_DEFINITION_TURNS..=MAX_DEFINITION_TURNS).contains(&d.max_turns) {
        return Err(Violation::invalid(
            "definition max_turns lies outside 1..=1000",
        ));
    }
    Ok(())
}

/// The canonical definition set under `max_collection_items` and
/// `max_message_bytes`: a revision token, 1..=max definitions, each valid,
/// sorted strictly by (id, revision), encoded size within bound.
pub fn validate_definition_set(
    set: Option<&DefinitionSet>,
    max_collection_items: u32,
    max_message_bytes: u64,
) -> Result<(), Violation> {
    let set = set.ok_or_else(|| Violation::invalid("definition set is missing"))?;
    if !is_token(&set.revision, MAX_NAME_BYTES) {
        return Err(Violation::invalid(
            "definition set revision is not a token of at most 256 bytes",
        ));
    }
    if set.definitions.is_empty() || set.definitions.len() as u64 > u64::from(max_collection_items)
    {
        return Err(Violation::invalid(
            "definition count lies outside 1..=max_collection_items",
        ));
    }
    for d in &set.definitions {
        validate_definition(d)?;
    }
    // Tokens hold no NUL, so ordering the pair equals ordering "id NUL revision".
    if set
        .definitions
        .windows(2)
        .any(|w| (&w[0].id, &w[0].revision) >= (&w[1].id, &w[1].revision))
    {
        return Err(Violation::invalid(
            "definitions are not sorted strictly by id and revision",
        ));
    }
    if !fits(set.encoded_len(), max_message_bytes) {
        return Err(Violation::invalid(
            "definition set exceeds the message size",
        ));
    }
    Ok(())
}

/// The definition with exactly this id and revision, cloned.
pub fn resolve_definition(
    set: &DefinitionSet,
    id: &str,
    revision: &str,
) -> Result<Definition, Violation> {
    set.definitions
        .iter()
        .find(|d| d.id == id && d.revision == revision)
        .cloned()
        .ok_or_else(|| {
            Violation::new(
                ErrorCode::NotFound,
                "no definition with this id and revision",
            )
        })
}

fn validate_part(part: &ContentPart) -> Result<(), Violation> {
    match part.value.as_ref() {
        None => Err(Violation::invalid("content part is empty")),
        Some(Value::Text(text)) => {
            if text.is_empty() || text.len() > MAX_JSON_BYTES {
                return Err(Violation::invalid("text part must hold 1 byte to 1 MiB"));
            }
            Ok(())
        }
        Some(Value::ToolCall(c)) => validate_tool_part(&c.call_id, &c.name, &c.arguments_json),
        Some(Value::ToolResult(r)) => validate_tool_part(&r.call_id, &r.name, &r.result_json),
        Some(Value::Extension(e)) => {
            if !is_token(&e.namespace, MAX_NAME_BYTES) {
                return Err(Violation::invalid(
                    "extension namespace is not a token of at most 256 bytes",
                ));
            }
            if !is_json(&e.value_json, MAX_JSON_BYTES) {
                return Err(Violation::invalid(
                    "extension value is not JSON of at most 1 MiB",
                ));
            }
            Ok(())
        }
    }
}

fn validate_tool_part(call_id: &str, name: &str, json: &[u8]) -> Result<(), Violation> {
    if !is_token(call_id, MAX_ID_BYTES) || !is_token(name, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "tool call id and name are tokens of at most 128 bytes",
        ));
    }
    if !is_json(json, MAX_JSON_BYTES) {
        return Err(Violation::invalid("tool JSON is not JSON of at most 1 MiB"));
    }
    Ok(())
}

/// A message: id token <= 128, a known role, 1..=128 valid parts.
pub fn validate_message(m: &Message) -> Result<(), Violation> {
    if !is_token(&m.id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "message id is not a token of at most 128 bytes",
        ));
    }
    match MessageRole::try_from(m.role) {
        Ok(MessageRole::Unspecified) | Err(_) => {
            return Err(Violation::invalid("message role is unknown"));
        }
        Ok(_) => {}
    }
    if !(MIN_MESSAGE_PARTS..=MAX_MESSAGE_PARTS).contains(&m.parts.len()) {
        return Err(Violation::invalid(
            "message part count lies outside 1..=128",
        ));
    }
    m.parts.iter().try_for_each(validate_part)
}

/// `StartRun`.
pub fn validate_start_run_request(
    r: &StartRunRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_mutation_fields(&r.client_id, r.ownership_epoch, &r.client_operation_id)?;
    let def = r
        .definition
        .as_ref()
        .ok_or_else(|| Violation::invalid("definition ref is missing"))?;
    if !is_token(&def.id, MAX_NAME_BYTES) || !is_token(&def.revision, MAX_NAME_BYTES) {
        return Err(Violation::invalid(
            "definition ref id and revision are tokens of at most 256 bytes",
        ));
    }
    let input = r
        .input
        .as_ref()
        .ok_or_else(|| Violation::invalid("input message is missing"))?;
    validate_message(input)?;
    if input.role != MessageRole::User as i32 {
        return Err(Violation::invalid("input message role must be USER"));
    }
    if input.parts.len() as u64 > u64::from(negotiated.limits.max_collection_items) {
        return Err(Violation::invalid(
            "input part count exceeds max_collection_items",
        ));
    }
    size(r.encoded_len(), negotiated)
}

/// `StreamEvents`: client fields, run id, `replay_limit` in 1..=max_replay_events.
pub fn validate_stream_events_request(
    r: &StreamEventsRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_client_fields(&r.client_id, r.ownership_epoch)?;
    validate_run_id(&r.run_id)?;
    if r.replay_limit == 0 || r.replay_limit > negotiated.limits.max_replay_events {
        return Err(Violation::invalid(
            "replay limit lies outside 1..=max_replay_events",
        ));
    }
    size(r.encoded_len(), negotiated)
}

/// `StreamInteractions` from its raw bytes: minor >= 2; field 3 (the retired
/// replay limit) must not appear and malformed bytes are refused; other
/// unknown fields are allowed and count toward the size bound (the raw
/// length is measured, not the decoded one). Returns the decoded request.
pub fn validate_stream_interactions_request(
    raw: &[u8],
    negotiated: &Negotiated,
) -> Result<StreamInteractionsRequest, Violation> {
    if negotiated.protocol.minor < INTERACTION_STREAM_MINIMUM_MINOR {
        return Err(Violation::invalid(
            "interaction streams need protocol minor 2",
        ));
    }
    let fields =
        wire::fields(raw).map_err(|_| Violation::invalid("request bytes are malformed"))?;
    if fields
        .iter()
        .any(|f| f.number == STREAM_INTERACTIONS_RETIRED_FIELD)
    {
        return Err(Violation::invalid(
            "request carries the retired replay_limit field",
        ));
    }
    let r = StreamInteractionsRequest::decode(raw)
        .map_err(|_| Violation::invalid("request bytes are malformed"))?;
    validate_client_fields(&r.client_id, r.ownership_epoch)?;
    size(raw.len(), negotiated)?;
    Ok(r)
}

/// `CancelRun`: mutation fields, run id, reason empty or a token <= 1024.
pub fn validate_cancel_run_request(
    r: &CancelRunRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_mutation_fields(&r.client_id, r.ownership_epoch, &r.client_operation_id)?;
    validate_run_id(&r.run_id)?;
    if !r.reason.is_empty() && !is_token(&r.reason, MAX_CANCEL_REASON_BYTES) {
        return Err(Violation::invalid(
            "cancel reason is not a token of at most 1024 bytes",
        ));
    }
    size(r.encoded_len(), negotiated)
}

/// `SuspendRun`.
pub fn validate_suspend_run_request(
    r: &SuspendRunRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_mutation_fields(&r.client_id, r.ownership_epoch, &r.client_operation_id)?;
    validate_run_id(&r.run_id)?;
    size(r.encoded_len(), negotiated)
}

/// `ResumeRun`.
pub fn validate_resume_run_request(
    r: &ResumeRunRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_mutation_fields(&r.client_id, r.ownership_epoch, &r.client_operation_id)?;
    validate_run_id(&r.run_id)?;
    size(r.encoded_len(), negotiated)
}

/// `RespondInteraction`: mutation fields, run and interaction id tokens,
/// `value_json` valid JSON of at most 512 KiB.
pub fn validate_respond_interaction_request(
    r: &RespondInteractionRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_mutation_fields(&r.client_id, r.ownership_epoch, &r.client_operation_id)?;
    validate_run_id(&r.run_id)?;
    if !is_token(&r.interaction_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "interaction id is not a token of at most 128 bytes",
        ));
    }
    if !is_json(&r.value_json, MAX_INTERACTION_PAYLOAD_BYTES) {
        return Err(Violation::invalid(
            "response value is not JSON of at most 512 KiB",
        ));
    }
    size(r.encoded_len(), negotiated)
}

/// The pending-correlation form: ownership first (`STALE_CLIENT`), then the
/// fields (`INVALID_ARGUMENT`), then that the run and interaction match the
/// pending one (`CONFLICT`). A stale response never reaches its payload.
pub fn validate_interaction_response(
    r: &RespondInteractionRequest,
    negotiated: &Negotiated,
    owner_client_id: &str,
    owner_epoch: u64,
    pending: &PendingInteraction,
) -> Result<(), Violation> {
    check_client_ownership(
        &r.client_id,
        r.ownership_epoch,
        owner_client_id,
        owner_epoch,
    )?;
    validate_respond_interaction_request(r, negotiated)?;
    if r.run_id != pending.run_id || r.interaction_id != pending.interaction_id {
        return Err(Violation::new(
            ErrorCode::Conflict,
            "response does not match the pending interaction",
        ));
    }
    Ok(())
}

/// `Health`.
pub fn validate_health_request(
    r: &HealthRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_client_fields(&r.client_id, r.ownership_epoch)?;
    size(r.encoded_len(), negotiated)
}

/// Snapshot RPCs need minor 1 and both snapshot capabilities enabled;
/// otherwise `MISSING_CAPABILITY` naming what is missing.
pub fn check_snapshot_transfer(negotiated: &Negotiated) -> Result<(), Violation> {
    // Sorted, as every capability list on the wire.
    let required = vec![
        CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
        CAPABILITY_SNAPSHOTS.to_owned(),
    ];
    let available = if negotiated.protocol.minor >= SNAPSHOT_TRANSFER_MINIMUM_MINOR {
        negotiated.capabilities.clone()
    } else {
        Vec::new()
    };
    let missing: Vec<String> = required
        .iter()
        .filter(|n| available.binary_search(n).is_err())
        .cloned()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(
        Violation::new(ErrorCode::MissingCapability, MISSING_CAPABILITY_MESSAGE).with_detail(
            Detail::CapabilityMismatch(CapabilityMismatch {
                required,
                available,
                missing,
            }),
        ),
    )
}

/// `ExportSnapshot`: snapshot transfer enabled, client fields, run id.
pub fn validate_export_snapshot_request(
    r: &ExportSnapshotRequest,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    check_snapshot_transfer(negotiated)?;
    validate_client_fields(&r.client_id, r.ownership_epoch)?;
    validate_run_id(&r.run_id)?;
    size(r.encoded_len(), negotiated)
}
