//! Valid baseline values the tests mutate one field at a time.
#![allow(dead_code, unreachable_pub)]

use agent_protocol::Negotiated;
use agent_protocol::initialize::{
    InitializePlan, OwnershipGrant, ServerInputs, complete_initialize, preflight_initialize,
};
use agent_protocol::limits::{CAPABILITY_SNAPSHOT_AUTHORITY, CAPABILITY_SNAPSHOTS};
use agent_protocol::negotiate::{implemented_range, version};
use agent_protocol::pb::common::v1::{
    BuildIdentity, CapabilitySet, Health, HealthState, Limits, ProtocolRange,
};
use agent_protocol::pb::engine::v1::{
    Definition, DefinitionSet, InitializeRequest, InitializeResponse,
};

pub const MIB: u64 = 1024 * 1024;

pub fn server_limits() -> Limits {
    Limits {
        max_message_bytes: 4 * MIB,
        max_collection_items: 256,
        max_replay_events: 1000,
        max_replay_bytes: 4 * MIB,
        max_concurrent_streams: 16,
        max_active_runs: 8,
    }
}

pub fn build(component: &str) -> BuildIdentity {
    BuildIdentity {
        component: component.into(),
        version: "0.1.0".into(),
        commit: "abc123".into(),
        go_version: "rust-1.95".into(),
    }
}

pub fn snapshot_caps() -> Vec<String> {
    vec![
        CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
        CAPABILITY_SNAPSHOTS.to_owned(),
    ]
}

pub fn server() -> ServerInputs {
    let limits = server_limits();
    ServerInputs {
        range: implemented_range(),
        build: build("agentd"),
        capabilities: snapshot_caps(),
        limits,
        health: Health {
            state: HealthState::Ready as i32,
            degraded_reasons: vec![],
            active_runs: 0,
            limits: Some(limits),
        },
        definitions: DefinitionSet {
            revision: "set-1".into(),
            definitions: vec![Definition {
                id: "coder".into(),
                revision: "1".into(),
                model: "m".into(),
                max_turns: 10,
            }],
        },
    }
}

pub fn range(min_minor: u32, max_minor: u32) -> ProtocolRange {
    ProtocolRange {
        minimum: Some(version(1, min_minor, 0)),
        maximum: Some(version(1, max_minor, 0)),
    }
}

pub const ATTEMPT: [u8; 16] = [7; 16];

pub fn request(min_minor: u32, max_minor: u32) -> InitializeRequest {
    InitializeRequest {
        protocol: Some(range(min_minor, max_minor)),
        client: Some(build("agent-cli")),
        supported_capabilities: Some(CapabilitySet {
            names: snapshot_caps(),
        }),
        required_capabilities: Some(CapabilitySet { names: vec![] }),
        requested_limits: Some(server_limits()),
        reconnect_claim: None,
        initialization_attempt_id: if min_minor >= 3 {
            ATTEMPT.to_vec()
        } else {
            vec![]
        },
    }
}

pub fn negotiated(minor: u32) -> Negotiated {
    Negotiated {
        protocol: version(1, minor, 0),
        limits: server_limits(),
        capabilities: snapshot_caps(),
    }
}

/// Preflight plus a fresh grant: the response a server would send.
pub fn initialize(r: &InitializeRequest) -> (InitializePlan, InitializeResponse) {
    let s = server();
    let plan = preflight_initialize(r, &s).expect("preflight passes");
    let grant = match &r.reconnect_claim {
        None => OwnershipGrant {
            client_id: "client-1".into(),
            epoch: 1,
        },
        Some(c) => OwnershipGrant {
            client_id: c.client_id.clone(),
            epoch: c.expected_ownership_epoch + 1,
        },
    };
    let response = complete_initialize(&plan, &s, grant);
    (plan, response)
}
