//! Version, capability, limit and attempt-id negotiation (docs/protocol.md, "Negotiation").

use crate::limits::{
    CAPABILITY_SNAPSHOT_AUTHORITY, CAPABILITY_SNAPSHOTS, INITIALIZATION_ATTEMPT_ID_BYTES,
    INITIALIZATION_ATTEMPT_MINIMUM_MINOR, INTERACTION_STREAM_MINIMUM_MINOR, MAX_CAPABILITIES,
    MAX_CAPABILITY_NAME_BYTES, PROTOCOL_MAJOR, PROTOCOL_MAXIMUM_MINOR, PROTOCOL_MINIMUM_MINOR,
};
use crate::pb::common::v1::{
    CapabilityMismatch, CapabilitySet, ErrorCode, Limits, ProtocolRange, ProtocolVersion,
    VersionMismatch, status::Detail,
};
use crate::token::is_token;
use crate::violation::Violation;

/// The fixed message of an `INCOMPATIBLE_VERSION` status.
pub const INCOMPATIBLE_VERSION_MESSAGE: &str = "no common protocol version";
/// The fixed message of a `MISSING_CAPABILITY` status.
pub const MISSING_CAPABILITY_MESSAGE: &str = "required capabilities are not available";

/// A version as a totally ordered key.
pub fn version_key(v: &ProtocolVersion) -> (u32, u32, u32) {
    (v.major, v.minor, v.patch)
}

/// `major.minor.patch`.
pub fn version(major: u32, minor: u32, patch: u32) -> ProtocolVersion {
    ProtocolVersion {
        major,
        minor,
        patch,
    }
}

/// The range this crate implements: 1.0.0 to 1.3.0.
pub fn implemented_range() -> ProtocolRange {
    ProtocolRange {
        minimum: Some(version(PROTOCOL_MAJOR, PROTOCOL_MINIMUM_MINOR, 0)),
        maximum: Some(version(PROTOCOL_MAJOR, PROTOCOL_MAXIMUM_MINOR, 0)),
    }
}

/// Whether `v` lies inside [`implemented_range`].
pub fn is_implemented(v: &ProtocolVersion) -> bool {
    v.major == PROTOCOL_MAJOR && v.minor <= PROTOCOL_MAXIMUM_MINOR && v.patch == 0
}

/// A range is valid when both ends are present, both majors are at least 1
/// and equal, and minimum <= maximum. Returns the two ends.
pub fn validate_range(
    range: Option<&ProtocolRange>,
) -> Result<(&ProtocolVersion, &ProtocolVersion), Violation> {
    let (Some(min), Some(max)) =
        range.map_or((None, None), |r| (r.minimum.as_ref(), r.maximum.as_ref()))
    else {
        return Err(Violation::invalid("protocol range needs both ends"));
    };
    if min.major < 1 || max.major < 1 {
        return Err(Violation::invalid("protocol major must be at least 1"));
    }
    if min.major != max.major {
        return Err(Violation::invalid("protocol range crosses a major"));
    }
    if version_key(min) > version_key(max) {
        return Err(Violation::invalid(
            "protocol range minimum exceeds its maximum",
        ));
    }
    Ok((min, max))
}

/// Picks the greatest version in the intersection of two valid ranges, or
/// `INCOMPATIBLE_VERSION` carrying both ranges.
pub fn negotiate_protocol(
    client: &ProtocolRange,
    server: &ProtocolRange,
) -> Result<ProtocolVersion, Violation> {
    let mismatch = || {
        Violation::new(ErrorCode::IncompatibleVersion, INCOMPATIBLE_VERSION_MESSAGE).with_detail(
            Detail::VersionMismatch(VersionMismatch {
                client: Some(*client),
                server: Some(*server),
            }),
        )
    };
    let (cmin, cmax) = validate_range(Some(client))?;
    let (smin, smax) = validate_range(Some(server))?;
    let low = if version_key(cmin) >= version_key(smin) {
        cmin
    } else {
        smin
    };
    let high = if version_key(cmax) <= version_key(smax) {
        cmax
    } else {
        smax
    };
    if version_key(low) > version_key(high) || low.major != high.major {
        return Err(mismatch());
    }
    Ok(*high)
}

/// Capability names: at most 1024, each a token of at most 256 bytes, sorted
/// strictly ascending (so unique).
pub fn validate_capability_names(names: &[String]) -> Result<(), Violation> {
    if names.len() > MAX_CAPABILITIES {
        return Err(Violation::invalid(
            "capability set holds more than 1024 names",
        ));
    }
    if names
        .iter()
        .any(|n| !is_token(n, MAX_CAPABILITY_NAME_BYTES))
    {
        return Err(Violation::invalid(
            "capability name is not a token of at most 256 bytes",
        ));
    }
    if names.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Violation::invalid(
            "capability names are not strictly ascending",
        ));
    }
    Ok(())
}

/// A present, valid capability set; its names.
pub fn validate_capability_set(set: Option<&CapabilitySet>) -> Result<&[String], Violation> {
    let set = set.ok_or_else(|| Violation::invalid("capability set is missing"))?;
    validate_capability_names(&set.names)?;
    Ok(&set.names)
}

/// The server's capability list as offered at `selected`: at minor 0 the
/// snapshot capabilities are removed first.
pub fn server_capabilities_for(selected: &ProtocolVersion, server: &[String]) -> Vec<String> {
    server
        .iter()
        .filter(|name| {
            selected.minor >= crate::limits::SNAPSHOT_TRANSFER_MINIMUM_MINOR
                || (name.as_str() != CAPABILITY_SNAPSHOTS
                    && name.as_str() != CAPABILITY_SNAPSHOT_AUTHORITY)
        })
        .cloned()
        .collect()
}

/// The enabled set, client-supported ∩ server; `MISSING_CAPABILITY` when a
/// required name is not in the server list. All lists must be valid sets and
/// `required` ⊆ `supported` (checked by request validation).
pub fn negotiate_capabilities(
    supported: &[String],
    required: &[String],
    server: &[String],
) -> Result<Vec<String>, Violation> {
    let missing: Vec<String> = required
        .iter()
        .filter(|n| server.binary_search(n).is_err())
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Err(
            Violation::new(ErrorCode::MissingCapability, MISSING_CAPABILITY_MESSAGE).with_detail(
                Detail::CapabilityMismatch(CapabilityMismatch {
                    required: required.to_vec(),
                    available: server.to_vec(),
                    missing,
                }),
            ),
        );
    }
    Ok(supported
        .iter()
        .filter(|n| server.binary_search(n).is_ok())
        .cloned()
        .collect())
}

/// Whether `subset` ⊆ `set`, both sorted.
pub fn is_subset(subset: &[String], set: &[String]) -> bool {
    subset.iter().all(|n| set.binary_search(n).is_ok())
}

/// A limit set is valid when all six values are > 0 and
/// `max_replay_events <= max_replay_bytes` (compared as u64).
pub fn validate_limits(limits: Option<&Limits>) -> Result<&Limits, Violation> {
    let l = limits.ok_or_else(|| Violation::invalid("limits are missing"))?;
    if l.max_message_bytes == 0
        || l.max_collection_items == 0
        || l.max_replay_events == 0
        || l.max_replay_bytes == 0
        || l.max_concurrent_streams == 0
        || l.max_active_runs == 0
    {
        return Err(Violation::invalid("every limit must be positive"));
    }
    if u64::from(l.max_replay_events) > l.max_replay_bytes {
        return Err(Violation::invalid(
            "max_replay_events exceeds max_replay_bytes",
        ));
    }
    Ok(l)
}

/// Each selected limit is the minimum of requested and server.
pub fn negotiate_limits(requested: &Limits, server: &Limits) -> Limits {
    Limits {
        max_message_bytes: requested.max_message_bytes.min(server.max_message_bytes),
        max_collection_items: requested
            .max_collection_items
            .min(server.max_collection_items),
        max_replay_events: requested.max_replay_events.min(server.max_replay_events),
        max_replay_bytes: requested.max_replay_bytes.min(server.max_replay_bytes),
        max_concurrent_streams: requested
            .max_concurrent_streams
            .min(server.max_concurrent_streams),
        max_active_runs: requested.max_active_runs.min(server.max_active_runs),
    }
}

/// Whether every selected limit is <= the corresponding bound.
pub fn limits_within(selected: &Limits, bound: &Limits) -> bool {
    selected.max_message_bytes <= bound.max_message_bytes
        && selected.max_collection_items <= bound.max_collection_items
        && selected.max_replay_events <= bound.max_replay_events
        && selected.max_replay_bytes <= bound.max_replay_bytes
        && selected.max_concurrent_streams <= bound.max_concurrent_streams
        && selected.max_active_runs <= bound.max_active_runs
}

/// The minor-2 sizing rule: from minor 2 on the client must request at least
/// the server's message size and collection count, so the complete pending
/// set always fits one reconnect frame.
pub fn check_minor_two_sizing(
    selected: &ProtocolVersion,
    requested: &Limits,
    server: &Limits,
) -> Result<(), Violation> {
    if selected.minor >= INTERACTION_STREAM_MINIMUM_MINOR
        && (requested.max_message_bytes < server.max_message_bytes
            || requested.max_collection_items < server.max_collection_items)
    {
        return Err(Violation::invalid(
            "minor 2 needs requested sizes of at least the server's",
        ));
    }
    Ok(())
}

/// Attempt-id rules of a request range: a range from below 1.3 up to 1.3 or
/// more crosses the semantic boundary; from 1.3 on an id of exactly 16 bytes,
/// not all zero, is required; below, the id must be empty.
pub fn validate_attempt_request(
    minimum: &ProtocolVersion,
    maximum: &ProtocolVersion,
    attempt_id: &[u8],
) -> Result<(), Violation> {
    let floor = INITIALIZATION_ATTEMPT_MINIMUM_MINOR;
    if minimum.minor < floor && maximum.minor >= floor {
        return Err(Violation::invalid(
            "protocol range crosses the 1.2/1.3 boundary",
        ));
    }
    if minimum.minor >= floor {
        if attempt_id.len() != INITIALIZATION_ATTEMPT_ID_BYTES {
            return Err(Violation::invalid(
                "initialization attempt id must be 16 bytes",
            ));
        }
        if attempt_id.iter().all(|&b| b == 0) {
            return Err(Violation::invalid("initialization attempt id is all zero"));
        }
    } else if !attempt_id.is_empty() {
        return Err(Violation::invalid(
            "legacy initialization carries no attempt id",
        ));
    }
    Ok(())
}

/// Attempt-id rule of a response: a 1.3 success echoes the request's id byte
/// for byte; a legacy success and every failure carry none.
pub fn validate_attempt_response(
    selected: Option<&ProtocolVersion>,
    success: bool,
    request_id: &[u8],
    response_id: &[u8],
) -> Result<(), Violation> {
    let exact =
        success && selected.is_some_and(|v| v.minor >= INITIALIZATION_ATTEMPT_MINIMUM_MINOR);
    if exact {
        if response_id != request_id {
            return Err(Violation::invalid(
                "response does not echo the initialization attempt id",
            ));
        }
    } else if !response_id.is_empty() {
        return Err(Violation::invalid(
            "response carries an initialization attempt id it must not",
        ));
    }
    Ok(())
}
