//! Initialize: request validation, the server's pure preflight (docs/protocol.md, "Initialize preflight",
//! steps 1-9), completing the response after ownership was granted, and the
//! client's correlation of a response with its request.

use prost::Message as _;

use crate::Negotiated;
use crate::limits::{
    CAPABILITY_SNAPSHOT_AUTHORITY, CAPABILITY_SNAPSHOTS, INITIALIZATION_ATTEMPT_MINIMUM_MINOR,
    INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES, INTERACTION_STREAM_MINIMUM_MINOR, MAX_ID_BYTES,
    MAX_RECONNECT_EXPECTED_EPOCH, PREVIEW_CLIENT_ID_BYTES, SNAPSHOT_TRANSFER_MINIMUM_MINOR,
};
use crate::negotiate::{
    check_minor_two_sizing, is_implemented, is_subset, limits_within, negotiate_capabilities,
    negotiate_limits, negotiate_protocol, server_capabilities_for, validate_attempt_request,
    validate_attempt_response, validate_capability_names, validate_capability_set, validate_limits,
    validate_range, version_key,
};
use crate::pb::common::v1::{
    BuildIdentity, CapabilitySet, ErrorCode, Health, Limits, ProtocolRange, Status,
};
use crate::pb::engine::v1::{DefinitionSet, InitializeRequest, InitializeResponse, ReconnectClaim};
use crate::requests::{fits, validate_definition_set};
use crate::responses::{validate_build_identity, validate_health};
use crate::status::{Violation, is_ok, ok_status, validate_status};
use crate::token::is_token;

/// The fixed status that replaces an error-only response too large for the
/// bootstrap bound.
pub const OVERSIZED_FAILURE_MESSAGE: &str = "initialize failure exceeds the bootstrap bound";

/// What the server brings to every Initialize.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerInputs {
    /// The implemented range it offers.
    pub range: ProtocolRange,
    /// Its build identity.
    pub build: BuildIdentity,
    /// Its capability names, sorted.
    pub capabilities: Vec<String>,
    /// Its global configured capacities.
    pub limits: Limits,
    /// Its current health (`health.limits` must equal `limits`).
    pub health: Health,
    /// The definitions it serves.
    pub definitions: DefinitionSet,
}

/// The outcome of a successful preflight: everything negotiated, before
/// any ownership is allocated.
#[derive(Clone, Debug, PartialEq)]
pub struct InitializePlan {
    /// Selected version, limits and enabled capabilities.
    pub negotiated: Negotiated,
    /// The attempt id the success response must echo (empty below 1.3).
    pub attempt_id: Vec<u8>,
    /// The reconnect claim, when the client asked to take over an identity.
    pub reconnect: Option<ReconnectClaim>,
}

/// Ownership the host granted after preflight: a fresh identity at epoch 1,
/// or the claimed identity at the claimed epoch plus one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnershipGrant {
    /// The client's stable id.
    pub client_id: String,
    /// The ownership epoch now in force.
    pub epoch: u64,
}

fn validate_reconnect_claim(claim: Option<&ReconnectClaim>) -> Result<(), Violation> {
    let Some(claim) = claim else { return Ok(()) };
    if !is_token(&claim.client_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "reconnect client id is not a token of at most 128 bytes",
        ));
    }
    if !(1..=MAX_RECONNECT_EXPECTED_EPOCH).contains(&claim.expected_ownership_epoch) {
        return Err(Violation::invalid(
            "reconnect expected epoch lies outside 1..=2^64-2",
        ));
    }
    Ok(())
}

/// Step 1: range, attempt rules, build identity, both capability sets,
/// required ⊆ supported, limits, reconnect claim, size <= 1 MiB.
pub fn validate_initialize_request(r: &InitializeRequest) -> Result<(), Violation> {
    let (min, max) = validate_range(r.protocol.as_ref())?;
    validate_attempt_request(min, max, &r.initialization_attempt_id)?;
    validate_build_identity(r.client.as_ref())?;
    let supported = validate_capability_set(r.supported_capabilities.as_ref())?;
    let required = validate_capability_set(r.required_capabilities.as_ref())?;
    if !is_subset(required, supported) {
        return Err(Violation::invalid(
            "required capabilities are not all supported",
        ));
    }
    validate_limits(r.requested_limits.as_ref())?;
    validate_reconnect_claim(r.reconnect_claim.as_ref())?;
    if r.encoded_len() > INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES {
        return Err(Violation::invalid(
            "initialize request exceeds the 1 MiB bootstrap bound",
        ));
    }
    Ok(())
}

/// Step 2: the server's own inputs; every failure is the server's fault.
pub fn validate_server_inputs(s: &ServerInputs) -> Result<(), Violation> {
    let check = || -> Result<(), Violation> {
        validate_range(Some(&s.range))?;
        validate_build_identity(Some(&s.build))?;
        validate_capability_names(&s.capabilities)?;
        validate_limits(Some(&s.limits))?;
        validate_health(Some(&s.health))?;
        if s.health.limits.as_ref() != Some(&s.limits) {
            return Err(Violation::invalid(
                "health limits differ from the server limits",
            ));
        }
        validate_definition_set(
            Some(&s.definitions),
            s.limits.max_collection_items,
            s.limits.max_message_bytes,
        )
    };
    check().map_err(|v| v.recode(ErrorCode::Internal))
}

fn success_response(
    plan: &InitializePlan,
    s: &ServerInputs,
    client_id: String,
    epoch: u64,
) -> InitializeResponse {
    InitializeResponse {
        status: Some(ok_status()),
        protocol: Some(plan.negotiated.protocol),
        server: Some(s.build.clone()),
        capabilities: Some(CapabilitySet {
            names: plan.negotiated.capabilities.clone(),
        }),
        limits: Some(plan.negotiated.limits),
        health: Some(s.health.clone()),
        client_id,
        ownership_epoch: epoch,
        definitions: Some(s.definitions.clone()),
        initialization_attempt_id: plan.attempt_id.clone(),
    }
}

/// The pure preflight, in the reference's order. Nothing is allocated; the
/// same inputs always give the same result. The host allocates or CASes
/// ownership only after this succeeds.
pub fn preflight_initialize(
    r: &InitializeRequest,
    s: &ServerInputs,
) -> Result<InitializePlan, Violation> {
    // 1. The request.
    validate_initialize_request(r).map_err(|v| v.recode(ErrorCode::InvalidArgument))?;
    // 2. The server's inputs.
    validate_server_inputs(s)?;
    // 3. Protocol, then re-check the selection is one we implement.
    let client_range = r.protocol.as_ref().expect("validated");
    let selected = negotiate_protocol(client_range, &s.range)?;
    if !is_implemented(&selected) {
        return Err(Violation::internal("selected protocol is not implemented"));
    }
    // 4. Minor-2 sizing.
    let requested = r.requested_limits.as_ref().expect("validated");
    check_minor_two_sizing(&selected, requested, &s.limits)?;
    // 5. Limits.
    let limits = negotiate_limits(requested, &s.limits);
    // 6. The request itself fits the selected size.
    if !fits(r.encoded_len(), limits.max_message_bytes) {
        return Err(Violation::invalid(
            "initialize request exceeds the selected message size",
        ));
    }
    // 7. Capabilities, after filtering the snapshot ones at minor 0.
    let offered = server_capabilities_for(&selected, &s.capabilities);
    let supported = &r.supported_capabilities.as_ref().expect("validated").names;
    let required = &r.required_capabilities.as_ref().expect("validated").names;
    let capabilities = negotiate_capabilities(supported, required, &offered)?;
    // 8. Counts and definitions fit the selection.
    let items = u64::from(limits.max_collection_items);
    if capabilities.len() as u64 > items {
        return Err(Violation::invalid(
            "enabled capabilities exceed max_collection_items",
        ));
    }
    if s.health.degraded_reasons.len() as u64 > items {
        return Err(Violation::invalid(
            "degraded reasons exceed max_collection_items",
        ));
    }
    if s.definitions.definitions.len() as u64 > items {
        return Err(Violation::invalid(
            "definitions exceed max_collection_items",
        ));
    }
    if !fits(s.definitions.encoded_len(), limits.max_message_bytes) {
        return Err(Violation::invalid(
            "definitions exceed the selected message size",
        ));
    }
    let attempt_id = if selected.minor >= INITIALIZATION_ATTEMPT_MINIMUM_MINOR {
        r.initialization_attempt_id.clone()
    } else {
        Vec::new()
    };
    let plan = InitializePlan {
        negotiated: Negotiated {
            protocol: selected,
            limits,
            capabilities,
        },
        attempt_id,
        reconnect: r.reconnect_claim.clone(),
    };
    // 9. The largest success response we could send must fit and be valid.
    let preview = success_response(&plan, s, "x".repeat(PREVIEW_CLIENT_ID_BYTES), u64::MAX);
    if !fits(preview.encoded_len(), limits.max_message_bytes) {
        return Err(Violation::invalid(
            "a success response would exceed the selected message size",
        ));
    }
    validate_initialize_response(&preview).map_err(|v| v.recode(ErrorCode::Internal))?;
    Ok(plan)
}

/// An error-only response. If even the status exceeds the bootstrap bound it
/// is replaced by a fixed `INTERNAL` status.
pub fn initialize_failure_response(status: Status) -> InitializeResponse {
    let response = InitializeResponse {
        status: Some(status),
        ..Default::default()
    };
    if response.encoded_len() <= INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES {
        return response;
    }
    InitializeResponse {
        status: Some(Violation::internal(OVERSIZED_FAILURE_MESSAGE).into_status()),
        ..Default::default()
    }
}

/// Builds the response once ownership was granted: a fresh grant must be
/// epoch 1; a reconnect grant the claimed id at the expected epoch plus one.
/// A broken grant or an oversized response gives an `INTERNAL` failure.
pub fn complete_initialize(
    plan: &InitializePlan,
    s: &ServerInputs,
    grant: OwnershipGrant,
) -> InitializeResponse {
    let valid = match &plan.reconnect {
        None => grant.epoch == 1,
        Some(claim) => {
            grant.client_id == claim.client_id
                && Some(grant.epoch) == claim.expected_ownership_epoch.checked_add(1)
        }
    };
    if !valid || !is_token(&grant.client_id, MAX_ID_BYTES) {
        return initialize_failure_response(
            Violation::internal("ownership grant breaks the compare-and-swap").into_status(),
        );
    }
    let response = success_response(plan, s, grant.client_id, grant.epoch);
    if !fits(
        response.encoded_len(),
        plan.negotiated.limits.max_message_bytes,
    ) {
        return initialize_failure_response(
            Violation::internal("initialize response exceeds the selected message size")
                .into_status(),
        );
    }
    response
}

/// A response by itself: failures carry only a valid status within the
/// bootstrap bound; a success carries a consistent selection.
pub fn validate_initialize_response(r: &InitializeResponse) -> Result<(), Violation> {
    let status = r
        .status
        .as_ref()
        .ok_or_else(|| Violation::invalid("response has no status"))?;
    validate_status(status)?;
    if !is_ok(Some(status)) {
        if *r
            != (InitializeResponse {
                status: Some(status.clone()),
                ..Default::default()
            })
        {
            return Err(Violation::invalid(
                "a failed response carries only its status",
            ));
        }
        if r.encoded_len() > INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES {
            return Err(Violation::invalid(
                "a failed response exceeds the bootstrap bound",
            ));
        }
        return Ok(());
    }
    let protocol = r
        .protocol
        .as_ref()
        .ok_or_else(|| Violation::invalid("response has no protocol"))?;
    if !is_implemented(protocol) {
        return Err(Violation::invalid("response protocol is not implemented"));
    }
    validate_build_identity(r.server.as_ref())?;
    let capabilities = validate_capability_set(r.capabilities.as_ref())?;
    let limits = validate_limits(r.limits.as_ref())?;
    let health = validate_health(r.health.as_ref())?;
    let capacity = health.limits.as_ref().expect("validated health has limits");
    if !limits_within(limits, capacity) {
        return Err(Violation::invalid(
            "selected limits exceed the server capacity",
        ));
    }
    if protocol.minor >= INTERACTION_STREAM_MINIMUM_MINOR
        && (limits.max_message_bytes != capacity.max_message_bytes
            || limits.max_collection_items != capacity.max_collection_items)
    {
        return Err(Violation::invalid(
            "minor 2 selects the server's message size and collection count",
        ));
    }
    if protocol.minor < SNAPSHOT_TRANSFER_MINIMUM_MINOR
        && capabilities
            .iter()
            .any(|c| c == CAPABILITY_SNAPSHOTS || c == CAPABILITY_SNAPSHOT_AUTHORITY)
    {
        return Err(Violation::invalid(
            "minor 0 cannot enable snapshot capabilities",
        ));
    }
    let items = u64::from(limits.max_collection_items);
    if capabilities.len() as u64 > items || health.degraded_reasons.len() as u64 > items {
        return Err(Violation::invalid(
            "response lists exceed max_collection_items",
        ));
    }
    if !is_token(&r.client_id, MAX_ID_BYTES) || r.ownership_epoch == 0 {
        return Err(Violation::invalid(
            "response needs a client id and a non-zero epoch",
        ));
    }
    validate_definition_set(
        r.definitions.as_ref(),
        limits.max_collection_items,
        limits.max_message_bytes,
    )?;
    if protocol.minor >= INITIALIZATION_ATTEMPT_MINIMUM_MINOR {
        let id = &r.initialization_attempt_id;
        if id.len() != crate::limits::INITIALIZATION_ATTEMPT_ID_BYTES || id.iter().all(|&b| b == 0)
        {
            return Err(Violation::invalid(
                "a 1.3 response carries a 16-byte attempt id",
            ));
        }
    } else if !r.initialization_attempt_id.is_empty() {
        return Err(Violation::invalid(
            "a legacy response carries no attempt id",
        ));
    }
    if !fits(r.encoded_len(), limits.max_message_bytes) {
        return Err(Violation::invalid(
            "response exceeds the selected message size",
        ));
    }
    Ok(())
}

/// The client's check of a response against the request it sent. Returns
/// the negotiated connection for a success, `None` for a valid failure.
pub fn validate_initialize_response_for_request(
    request: &InitializeRequest,
    response: &InitializeResponse,
) -> Result<Option<Negotiated>, Violation> {
    validate_initialize_request(request)?;
    validate_initialize_response(response)?;
    if !is_ok(response.status.as_ref()) {
        return Ok(None);
    }
    let (min, max) = validate_range(request.protocol.as_ref())?;
    let protocol = *response.protocol.as_ref().expect("validated");
    if version_key(&protocol) < version_key(min) || version_key(&protocol) > version_key(max) {
        return Err(Violation::invalid(
            "selected protocol lies outside the requested range",
        ));
    }
    let enabled = &response.capabilities.as_ref().expect("validated").names;
    let supported = &request
        .supported_capabilities
        .as_ref()
        .expect("validated")
        .names;
    let required = &request
        .required_capabilities
        .as_ref()
        .expect("validated")
        .names;
    if !is_subset(enabled, supported) || !is_subset(required, enabled) {
        return Err(Violation::invalid(
            "enabled capabilities must lie between required and supported",
        ));
    }
    let limits = *response.limits.as_ref().expect("validated");
    if !limits_within(
        &limits,
        request.requested_limits.as_ref().expect("validated"),
    ) {
        return Err(Violation::invalid(
            "selected limits exceed the requested ones",
        ));
    }
    if !fits(request.encoded_len(), limits.max_message_bytes) {
        return Err(Violation::invalid(
            "request exceeds the selected message size",
        ));
    }
    validate_attempt_response(
        Some(&protocol),
        true,
        &request.initialization_attempt_id,
        &response.initialization_attempt_id,
    )?;
    let cas = match &request.reconnect_claim {
        None => response.ownership_epoch == 1,
        Some(claim) => {
            response.client_id == claim.client_id
                && Some(response.ownership_epoch) == claim.expected_ownership_epoch.checked_add(1)
        }
    };
    if !cas {
        return Err(Violation::invalid(
            "ownership result breaks the compare-and-swap",
        ));
    }
    Ok(Some(Negotiated {
        protocol,
        limits,
        capabilities: enabled.clone(),
    }))
}

/// Decodes an Initialize request from its raw bytes under the bootstrap
/// bound, which is fixed before anything is negotiated (unknown fields count
/// toward it), then validates it.
pub fn decode_initialize_request(raw: &[u8]) -> Result<InitializeRequest, Violation> {
    if raw.len() > INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES {
        return Err(Violation::invalid(
            "initialize request exceeds the 1 MiB bootstrap bound",
        ));
    }
    let request = InitializeRequest::decode(raw)
        .map_err(|_| Violation::invalid("initialize request bytes are malformed"))?;
    validate_initialize_request(&request)?;
    Ok(request)
}
