//! Unary response validators (docs/protocol.md, "RPCs"): a failed response carries only
//! its status; a success has its RPC's shape. All fit the message size.

use prost::Message;

use crate::Negotiated;
use crate::limits::{MAX_ID_BYTES, MAX_NAME_BYTES};
use crate::negotiate::is_implemented;
use crate::pb::common::v1::{Health, HealthState, Status};
use crate::pb::engine::v1::{
    CancelRunResponse, ExportSnapshotResponse, HealthResponse, ImportSnapshotResponse,
    RespondInteractionResponse, ResumeRunResponse, StartRunResponse, SuspendRunResponse,
};
use crate::requests::fits;
use crate::snapshot::validate_snapshot_envelope;
use crate::status::{Violation, is_ok, validate_unary_status};
use crate::token::is_token;

/// The common shape: a present, valid status; the size bound; for a failure,
/// nothing but the status. Returns whether the response is a success.
fn status_shape<T: Message + PartialEq>(
    response: &T,
    status: Option<&Status>,
    only_status: impl FnOnce(Status) -> T,
    negotiated: &Negotiated,
) -> Result<bool, Violation> {
    let status = status.ok_or_else(|| Violation::invalid("response has no status"))?;
    validate_unary_status(status, negotiated.limits.max_collection_items)?;
    if !fits(response.encoded_len(), negotiated.limits.max_message_bytes) {
        return Err(Violation::invalid(
            "response exceeds the negotiated message size",
        ));
    }
    if is_ok(Some(status)) {
        return Ok(true);
    }
    if *response != only_status(status.clone()) {
        return Err(Violation::invalid(
            "a failed response carries only its status",
        ));
    }
    Ok(false)
}

/// A build identity: four tokens of at most 256 bytes.
pub fn validate_build_identity(
    b: Option<&crate::pb::common::v1::BuildIdentity>,
) -> Result<(), Violation> {
    let b = b.ok_or_else(|| Violation::invalid("build identity is missing"))?;
    if [&b.component, &b.version, &b.commit, &b.go_version]
        .iter()
        .all(|f| is_token(f, MAX_NAME_BYTES))
    {
        Ok(())
    } else {
        Err(Violation::invalid(
            "build identity fields are tokens of at most 256 bytes",
        ))
    }
}

/// A health value: a known state, degraded reasons as tokens, valid limits.
pub fn validate_health(h: Option<&Health>) -> Result<&Health, Violation> {
    let h = h.ok_or_else(|| Violation::invalid("health is missing"))?;
    match HealthState::try_from(h.state) {
        Ok(HealthState::Unspecified) | Err(_) => {
            return Err(Violation::invalid("health state is unknown"));
        }
        Ok(_) => {}
    }
    if h.degraded_reasons
        .iter()
        .any(|r| !is_token(r, MAX_NAME_BYTES))
    {
        return Err(Violation::invalid(
            "degraded reasons are tokens of at most 256 bytes",
        ));
    }
    crate::negotiate::validate_limits(h.limits.as_ref())?;
    Ok(h)
}

/// `Health`.
pub fn validate_health_response(
    r: &HealthResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| HealthResponse {
        status: Some(status),
        ..Default::default()
    };
    if !status_shape(r, r.status.as_ref(), only, negotiated)? {
        return Ok(());
    }
    validate_build_identity(r.server.as_ref())?;
    if !r.protocol.as_ref().is_some_and(is_implemented) {
        return Err(Violation::invalid(
            "health protocol is not a supported version",
        ));
    }
    let h = validate_health(r.health.as_ref())?;
    if h.degraded_reasons.len() as u64 > u64::from(negotiated.limits.max_collection_items) {
        return Err(Violation::invalid(
            "degraded reasons exceed max_collection_items",
        ));
    }
    Ok(())
}

/// `StartRun`: run id, `initial_sequence == 1`, plan id token <= 256.
pub fn validate_start_run_response(
    r: &StartRunResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| StartRunResponse {
        status: Some(status),
        ..Default::default()
    };
    if !status_shape(r, r.status.as_ref(), only, negotiated)? {
        return Ok(());
    }
    if !is_token(&r.run_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "run id is not a token of at most 128 bytes",
        ));
    }
    if r.initial_sequence != 1 {
        return Err(Violation::invalid("a started run's initial sequence is 1"));
    }
    if !is_token(&r.plan_id, MAX_NAME_BYTES) {
        return Err(Violation::invalid(
            "plan id is not a token of at most 256 bytes",
        ));
    }
    Ok(())
}

/// `CancelRun`: exactly one of requested / already terminal, with the
/// terminal sequence set exactly when already terminal.
pub fn validate_cancel_run_response(
    r: &CancelRunResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| CancelRunResponse {
        status: Some(status),
        ..Default::default()
    };
    if !status_shape(r, r.status.as_ref(), only, negotiated)? {
        return Ok(());
    }
    match (r.cancellation_requested, r.already_terminal) {
        (true, false) if r.terminal_sequence == 0 => Ok(()),
        (false, true) if r.terminal_sequence > 0 => Ok(()),
        (true, false) => Err(Violation::invalid(
            "a requested cancellation has no terminal sequence yet",
        )),
        (false, true) => Err(Violation::invalid(
            "an already terminal run names its terminal sequence",
        )),
        _ => Err(Violation::invalid(
            "exactly one of cancellation_requested and already_terminal",
        )),
    }
}

/// `RespondInteraction`: accepted.
pub fn validate_respond_interaction_response(
    r: &RespondInteractionResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| RespondInteractionResponse {
        status: Some(status),
        ..Default::default()
    };
    if status_shape(r, r.status.as_ref(), only, negotiated)? && !r.accepted {
        return Err(Violation::invalid("a successful response is accepted"));
    }
    Ok(())
}

fn inner_sequence(value: u64) -> bool {
    value > 0 && value < u64::MAX
}

/// `SuspendRun`: suspended at a boundary in 1..u64::MAX.
pub fn validate_suspend_run_response(
    r: &SuspendRunResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| SuspendRunResponse {
        status: Some(status),
        ..Default::default()
    };
    if status_shape(r, r.status.as_ref(), only, negotiated)?
        && !(r.suspended && inner_sequence(r.boundary_sequence))
    {
        return Err(Violation::invalid(
            "a suspension names a boundary in 1..u64::MAX",
        ));
    }
    Ok(())
}

/// `ResumeRun`: resumed with a next sequence in 1..u64::MAX.
pub fn validate_resume_run_response(
    r: &ResumeRunResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| ResumeRunResponse {
        status: Some(status),
        ..Default::default()
    };
    if status_shape(r, r.status.as_ref(), only, negotiated)?
        && !(r.resumed && inner_sequence(r.next_sequence))
    {
        return Err(Violation::invalid(
            "a resumption names a next sequence in 1..u64::MAX",
        ));
    }
    Ok(())
}

/// `ImportSnapshot`: a run id and a next sequence in 1..u64::MAX.
pub fn validate_import_snapshot_response(
    r: &ImportSnapshotResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| ImportSnapshotResponse {
        status: Some(status),
        ..Default::default()
    };
    if status_shape(r, r.status.as_ref(), only, negotiated)?
        && !(is_token(&r.run_id, MAX_ID_BYTES) && inner_sequence(r.next_sequence))
    {
        return Err(Violation::invalid(
            "an import names its run and a next sequence in 1..u64::MAX",
        ));
    }
    Ok(())
}

/// `ExportSnapshot`: a structurally valid envelope.
pub fn validate_export_snapshot_response(
    r: &ExportSnapshotResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let only = |status| ExportSnapshotResponse {
        status: Some(status),
        ..Default::default()
    };
    if status_shape(r, r.status.as_ref(), only, negotiated)? {
        let envelope = r
            .snapshot
            .as_ref()
            .ok_or_else(|| Violation::invalid("an export carries a snapshot"))?;
        validate_snapshot_envelope(envelope)?;
    }
    Ok(())
}
