//! Initialize (docs/transport.md, "What the server serves"): attempt replay, session registration, the attempt
//! fingerprint.

use std::sync::Arc;

use agent_protocol::initialize::{
    OwnershipGrant, complete_initialize, initialize_failure_response, preflight_initialize,
    validate_initialize_request,
};
use agent_protocol::limits::INITIALIZATION_ATTEMPT_ID_BYTES;
use agent_protocol::pb::common::v1::ErrorCode;
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::status::{Violation, overload_status};
use prost::Message as _;
use sha2::{Digest, Sha256};

use crate::registry::{AttemptReservation, Entry, Gate, Reserve, SESSIONS_RESOURCE};
use crate::status::{ATTEMPT_CONFLICT_MESSAGE, session_failure, session_unavailable};

use super::{Reply, STOPPING_MESSAGE, Service, reply};

impl Service {
    pub(super) async fn initialize_inner(
        &self,
        r: pb::InitializeRequest,
    ) -> Reply<pb::InitializeResponse> {
        let registry = &self.shared.registry;
        // A closing registry keeps its entries until this transaction ends.
        let Some(_transaction) = registry.begin() else {
            return Err(tonic::Status::unavailable(STOPPING_MESSAGE));
        };
        let mut attempt: Option<AttemptReservation> = None;
        if !r.initialization_attempt_id.is_empty()
            && r.initialization_attempt_id.len() == INITIALIZATION_ATTEMPT_ID_BYTES
            && validate_initialize_request(&r).is_ok()
        {
            let fingerprint = attempt_fingerprint(&r);
            let reserved = tokio::select! {
                reserved = registry.reserve_attempt(&r.initialization_attempt_id, fingerprint) => reserved,
                () = self.shared.root.cancelled() => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
            };
            match reserved {
                Reserve::Replay(response) => return reply(*response),
                Reserve::Conflict => {
                    return reply(initialize_failure_response(
                        Violation::new(ErrorCode::Conflict, ATTEMPT_CONFLICT_MESSAGE).into_status(),
                    ));
                }
                Reserve::Overload(resource, limit) => {
                    return reply(initialize_failure_response(overload_status(
                        resource,
                        limit,
                        limit + 1,
                    )));
                }
                Reserve::Closed => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                Reserve::Owner(reservation) => attempt = Some(reservation),
            }
        }
        let inputs = self.inputs();
        let plan = match preflight_initialize(&r, &inputs) {
            Ok(plan) => plan,
            Err(violation) => return reply(initialize_failure_response(violation.into_status())),
        };
        let sessions = self.host().sessions();
        match &plan.reconnect {
            None => {
                let mut slot = registry.reserve_slot();
                if matches!(slot, Err(Some(_))) {
                    // Full: make room from sessions that ended (idle ones the store reclaims
                    // now included) before refusing.
                    sessions.reclaim_idle();
                    if registry.prune_ended() > 0 {
                        slot = registry.reserve_slot();
                    }
                }
                let slot = match slot {
                    Ok(slot) => slot,
                    Err(Some(max)) => {
                        return reply(initialize_failure_response(overload_status(
                            SESSIONS_RESOURCE,
                            max,
                            max + 1,
                        )));
                    }
                    Err(None) => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                };
                let session = match sessions.fresh() {
                    Ok(session) => session,
                    Err(error) => {
                        return reply(initialize_failure_response(session_failure(&error)));
                    }
                };
                let response = complete_initialize(
                    &plan,
                    &inputs,
                    OwnershipGrant {
                        client_id: session.client_id().to_owned(),
                        epoch: session.epoch(),
                    },
                );
                let entry = Entry {
                    session,
                    negotiated: plan.negotiated.clone(),
                    gate: Arc::new(Gate::default()),
                };
                let attempt = attempt.map(|a| (a, response.clone()));
                if !registry.install_fresh(slot, entry, attempt) {
                    return Err(tonic::Status::unavailable(STOPPING_MESSAGE));
                }
                reply(response)
            }
            Some(claim) => {
                let expected = claim.expected_ownership_epoch;
                let Some(current) = registry.entry(&claim.client_id) else {
                    return reply(initialize_failure_response(session_unavailable()));
                };
                let held = tokio::select! {
                    held = current.gate.acquire() => held,
                    () = self.shared.root.cancelled() => return Err(tonic::Status::unavailable(STOPPING_MESSAGE)),
                };
                let Ok(_held) = held else {
                    let limit = crate::registry::MAX_RECONNECT_WAITERS as u64;
                    return reply(initialize_failure_response(overload_status(
                        crate::registry::RECONNECT_WAITERS_RESOURCE,
                        limit,
                        limit + 1,
                    )));
                };
                match registry.entry(&claim.client_id) {
                    Some(e) if e.session.epoch() == expected => {}
                    Some(e) => {
                        let status = session_failure(&agent_daemon::session::SessionError::Stale(
                            Some(agent_daemon::session::StaleFacts {
                                client_id: claim.client_id.clone(),
                                expected: e.session.epoch(),
                                observed: expected,
                            }),
                        ));
                        return reply(initialize_failure_response(status));
                    }
                    None => return reply(initialize_failure_response(session_unavailable())),
                }
                let ctx = self.ctx();
                let session = match sessions.reconnect(&ctx, &claim.client_id, expected).await {
                    Ok(session) => session,
                    Err(error) => {
                        return reply(initialize_failure_response(session_failure(&error)));
                    }
                };
                let response = complete_initialize(
                    &plan,
                    &inputs,
                    OwnershipGrant {
                        client_id: session.client_id().to_owned(),
                        epoch: session.epoch(),
                    },
                );
                let entry = Entry {
                    session,
                    negotiated: plan.negotiated.clone(),
                    gate: current.gate.clone(),
                };
                let attempt = attempt.map(|a| (a, response.clone()));
                if !registry.replace(expected, entry, attempt) {
                    return reply(initialize_failure_response(session_unavailable()));
                }
                reply(response)
            }
        }
    }
}

/// SHA-256 of the request's deterministic encoding with the attempt id cleared.
pub fn attempt_fingerprint(request: &pb::InitializeRequest) -> [u8; 32] {
    let mut cleared = request.clone();
    cleared.initialization_attempt_id.clear();
    Sha256::digest(cleared.encode_to_vec()).into()
}
