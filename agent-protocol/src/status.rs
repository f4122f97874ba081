//! The typed status model (docs/protocol.md, "Status model"): [`Violation`], [`validate_status`],
//! ownership checks and the fixed-shape constructors.

use crate::limits::{MAX_ID_BYTES, MAX_NAME_BYTES, MAX_STATUS_MESSAGE_BYTES};
use crate::negotiate::{validate_capability_names, validate_range};
use crate::pb::common::v1::{
    CapabilityMismatch, ErrorCode, Overload, ProtocolRange, ReplayBounds, StaleClient, Status,
    status::Detail,
};
use crate::token::is_token;

/// Re-exported: the status model is where callers look for it.
pub use crate::violation::Violation;

/// The success status: code OK and nothing else.
pub fn ok_status() -> Status {
    Status {
        code: ErrorCode::Ok as i32,
        ..Status::default()
    }
}

/// Whether `status` is present and OK (its validity is checked separately).
pub fn is_ok(status: Option<&Status>) -> bool {
    status.is_some_and(|s| s.code == ErrorCode::Ok as i32)
}

/// The fixed message of [`overload_status`].
pub const OVERLOAD_MESSAGE: &str = "protocol resource limit exceeded";
/// The fixed message of a stale-client status.
pub const STALE_CLIENT_MESSAGE: &str = "client ownership is stale";

/// `RESOURCE_EXHAUSTED` with an [`Overload`] detail and the fixed message.
pub fn overload_status(resource: &str, limit: u64, observed: u64) -> Status {
    Status {
        code: ErrorCode::ResourceExhausted as i32,
        message: OVERLOAD_MESSAGE.to_owned(),
        detail: Some(Detail::Overload(Overload {
            resource: resource.to_owned(),
            limit,
            observed,
        })),
        ..Status::default()
    }
}

/// Ok only if the ids are equal, the epochs are equal and the epoch is not
/// zero; otherwise `STALE_CLIENT` with `{expected, observed}`.
pub fn check_client_ownership(
    client_id: &str,
    observed_epoch: u64,
    expected_client_id: &str,
    expected_epoch: u64,
) -> Result<(), Violation> {
    if client_id == expected_client_id && observed_epoch == expected_epoch && observed_epoch != 0 {
        return Ok(());
    }
    Err(
        Violation::new(ErrorCode::StaleClient, STALE_CLIENT_MESSAGE).with_detail(
            Detail::StaleClient(StaleClient {
                expected_epoch,
                observed_epoch,
            }),
        ),
    )
}

/// Validates a status by itself: OK carries nothing else; a non-OK status has
/// a known code, a message token, an optional operation id token, and exactly
/// the detail its code requires (docs/protocol.md, "Status model").
pub fn validate_status(status: &Status) -> Result<(), Violation> {
    let code = ErrorCode::try_from(status.code)
        .map_err(|_| Violation::invalid("status code is unknown"))?;
    match code {
        ErrorCode::Unspecified => return Err(Violation::invalid("status code is unspecified")),
        ErrorCode::Ok => {
            if !status.message.is_empty()
                || status.retryable
                || !status.operation_id.is_empty()
                || status.detail.is_some()
            {
                return Err(Violation::invalid("an OK status carries nothing else"));
            }
            return Ok(());
        }
        _ => {}
    }
    if !is_token(&status.message, MAX_STATUS_MESSAGE_BYTES) {
        return Err(Violation::invalid(
            "status message is not a token of at most 2048 bytes",
        ));
    }
    if !status.operation_id.is_empty() && !is_token(&status.operation_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "status operation id is not a token of at most 128 bytes",
        ));
    }
    validate_detail(code, status.detail.as_ref())
}

/// [`validate_status`] plus the unary bound: a capability mismatch's three
/// lists each hold at most the negotiated `max_collection_items`.
pub fn validate_unary_status(status: &Status, max_collection_items: u32) -> Result<(), Violation> {
    validate_status(status)?;
    if let Some(Detail::CapabilityMismatch(m)) = &status.detail {
        let max = u64::from(max_collection_items);
        if [&m.required, &m.available, &m.missing]
            .iter()
            .any(|l| l.len() as u64 > max)
        {
            return Err(Violation::invalid(
                "capability mismatch exceeds the collection limit",
            ));
        }
    }
    Ok(())
}

fn validate_detail(code: ErrorCode, detail: Option<&Detail>) -> Result<(), Violation> {
    const WRONG: &str = "status detail does not match its code";
    match (code, detail) {
        (ErrorCode::IncompatibleVersion, Some(Detail::VersionMismatch(m))) => {
            let (Some(client), Some(server)) = (m.client.as_ref(), m.server.as_ref()) else {
                return Err(Violation::invalid("version mismatch needs both ranges"));
            };
            validate_range(Some(client))?;
            validate_range(Some(server))?;
            if ranges_overlap(client, server) {
                return Err(Violation::invalid("version mismatch ranges overlap"));
            }
            Ok(())
        }
        (ErrorCode::MissingCapability, Some(Detail::CapabilityMismatch(m))) => {
            validate_capability_mismatch(m)
        }
        (ErrorCode::OutOfRange, Some(Detail::ReplayBounds(b))) => validate_replay_bounds(b),
        (ErrorCode::ResourceExhausted, Some(Detail::Overload(o))) => {
            if !is_token(&o.resource, MAX_NAME_BYTES) || o.limit == 0 || o.observed <= o.limit {
                return Err(Violation::invalid(
                    "overload needs a resource, a limit and more observed",
                ));
            }
            Ok(())
        }
        (ErrorCode::StaleClient, Some(Detail::StaleClient(s))) => {
            if s.expected_epoch == 0 || s.expected_epoch == s.observed_epoch {
                return Err(Violation::invalid(
                    "stale client needs distinct non-zero epochs",
                ));
            }
            Ok(())
        }
        (ErrorCode::SnapshotVersionMismatch, Some(Detail::SnapshotVersionMismatch(m))) => {
            if !is_token(&m.expected, MAX_NAME_BYTES)
                || !is_token(&m.observed, MAX_NAME_BYTES)
                || m.expected == m.observed
            {
                return Err(Violation::invalid(
                    "snapshot version mismatch needs distinct tokens",
                ));
            }
            Ok(())
        }
        (ErrorCode::UncertainOperation, Some(Detail::UncertainOperation(u))) => {
            if !is_token(&u.operation_id, MAX_ID_BYTES)
                || !is_token(&u.operation_kind, MAX_NAME_BYTES)
            {
                return Err(Violation::invalid(
                    "uncertain operation needs an id and a kind",
                ));
            }
            Ok(())
        }
        (
            ErrorCode::IncompatibleVersion
            | ErrorCode::MissingCapability
            | ErrorCode::OutOfRange
            | ErrorCode::ResourceExhausted
            | ErrorCode::StaleClient
            | ErrorCode::SnapshotVersionMismatch
            | ErrorCode::UncertainOperation,
            _,
        ) => Err(Violation::invalid(WRONG)),
        (_, Some(_)) => Err(Violation::invalid(WRONG)),
        (_, None) => Ok(()),
    }
}

fn validate_capability_mismatch(m: &CapabilityMismatch) -> Result<(), Violation> {
    validate_capability_names(&m.required)?;
    validate_capability_names(&m.available)?;
    validate_capability_names(&m.missing)?;
    let expected: Vec<&String> = m
        .required
        .iter()
        .filter(|name| m.available.binary_search(name).is_err())
        .collect();
    if m.missing.is_empty()
        || expected.len() != m.missing.len()
        || expected.iter().zip(&m.missing).any(|(a, b)| *a != b)
    {
        return Err(Violation::invalid(
            "missing capabilities must equal required minus available",
        ));
    }
    Ok(())
}

/// Rules of a [`ReplayBounds`] detail: a valid window, a cursor outside
/// `[earliest-1, latest]`, and the recovery cursor it implies.
pub fn validate_replay_bounds(b: &ReplayBounds) -> Result<(), Violation> {
    if b.earliest_sequence == 0 || b.latest_sequence < b.earliest_sequence {
        return Err(Violation::invalid("replay bounds window is invalid"));
    }
    let floor = b.earliest_sequence - 1;
    if (floor..=b.latest_sequence).contains(&b.requested_after_sequence) {
        return Err(Violation::invalid(
            "replay bounds cursor lies inside the window",
        ));
    }
    let recovery = if b.requested_after_sequence < b.earliest_sequence {
        floor
    } else {
        b.latest_sequence
    };
    if b.recovery_sequence != recovery {
        return Err(Violation::invalid("replay bounds recovery cursor is wrong"));
    }
    Ok(())
}

/// Whether two valid ranges share at least one version.
pub(crate) fn ranges_overlap(a: &ProtocolRange, b: &ProtocolRange) -> bool {
    use crate::negotiate::version_key;
    let (Some(amin), Some(amax), Some(bmin), Some(bmax)) = (
        a.minimum.as_ref(),
        a.maximum.as_ref(),
        b.minimum.as_ref(),
        b.maximum.as_ref(),
    ) else {
        return false;
    };
    version_key(amin).max(version_key(bmin)) <= version_key(amax).min(version_key(bmax))
}
