//! The negotiation and Initialize cases (docs/protocol.md, "Negotiation").

mod support;

use agent_protocol::initialize::{
    OVERSIZED_FAILURE_MESSAGE, OwnershipGrant, complete_initialize, decode_initialize_request,
    initialize_failure_response, preflight_initialize, validate_initialize_request,
    validate_initialize_response, validate_initialize_response_for_request,
};
use agent_protocol::limits::INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES;
use agent_protocol::negotiate::{
    implemented_range, negotiate_capabilities, negotiate_limits, negotiate_protocol,
    validate_range, version,
};
use agent_protocol::pb::common::v1::{ErrorCode, Limits, ProtocolRange, Status, status::Detail};
use agent_protocol::pb::engine::v1::{InitializeRequest, ReconnectClaim};
use agent_protocol::status::validate_status;
use prost::Message as _;
use support::*;

fn r(min: (u32, u32, u32), max: (u32, u32, u32)) -> ProtocolRange {
    ProtocolRange {
        minimum: Some(version(min.0, min.1, min.2)),
        maximum: Some(version(max.0, max.1, max.2)),
    }
}

#[test]
fn protocol_negotiation_selects_greatest_compatible_version() {
    let server = implemented_range();
    assert_eq!(
        negotiate_protocol(&range(0, 2), &server).unwrap(),
        version(1, 2, 0)
    );
    assert_eq!(
        negotiate_protocol(&range(3, 3), &server).unwrap(),
        version(1, 3, 0)
    );
    assert_eq!(
        negotiate_protocol(&range(1, 9), &server).unwrap(),
        version(1, 3, 0)
    );
    assert_eq!(
        negotiate_protocol(&r((1, 0, 0), (1, 1, 7)), &server).unwrap(),
        version(1, 1, 7)
    );
    // Symmetric: the greatest common version, whichever side is lower.
    assert_eq!(
        negotiate_protocol(&server, &range(0, 1)).unwrap(),
        version(1, 1, 0)
    );
}

#[test]
fn protocol_negotiation_rejects_old_new_and_invalid_ranges() {
    let server = range(2, 3);
    for client in [range(0, 1), r((2, 0, 0), (2, 4, 0))] {
        let err = negotiate_protocol(&client, &server).unwrap_err();
        assert_eq!(err.code(), ErrorCode::IncompatibleVersion);
        let Some(Detail::VersionMismatch(m)) = err.detail() else {
            panic!("needs the detail")
        };
        assert_eq!(
            (m.client.as_ref(), m.server.as_ref()),
            (Some(&client), Some(&server))
        );
        validate_status(&err.into_status()).expect("the typed status validates");
    }
    let invalid = [
        ProtocolRange {
            minimum: None,
            maximum: Some(version(1, 0, 0)),
        },
        ProtocolRange {
            minimum: Some(version(1, 0, 0)),
            maximum: None,
        },
        r((0, 1, 0), (0, 2, 0)),
        r((1, 2, 0), (1, 1, 0)),
        r((1, 0, 0), (2, 0, 0)),
    ];
    for range in invalid {
        assert_eq!(
            validate_range(Some(&range)).unwrap_err().code(),
            ErrorCode::InvalidArgument,
            "{range:?}"
        );
        assert_eq!(
            negotiate_protocol(&range, &server).unwrap_err().code(),
            ErrorCode::InvalidArgument
        );
    }
}

#[test]
fn capabilities_and_limits_negotiate_deterministically() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let enabled =
        negotiate_capabilities(&s(&["a", "b", "c"]), &s(&["b"]), &s(&["b", "c", "d"])).unwrap();
    assert_eq!(enabled, s(&["b", "c"]));
    let err =
        negotiate_capabilities(&s(&["a", "b", "e"]), &s(&["a", "e"]), &s(&["b", "c"])).unwrap_err();
    assert_eq!(err.code(), ErrorCode::MissingCapability);
    let Some(Detail::CapabilityMismatch(m)) = err.detail() else {
        panic!()
    };
    assert_eq!(
        (m.required.clone(), m.available.clone(), m.missing.clone()),
        (s(&["a", "e"]), s(&["b", "c"]), s(&["a", "e"]))
    );
    validate_status(&err.into_status()).unwrap();

    let a = Limits {
        max_message_bytes: 10,
        max_collection_items: 5,
        max_replay_events: 7,
        max_replay_bytes: 9,
        max_concurrent_streams: 1,
        max_active_runs: 30,
    };
    let b = Limits {
        max_message_bytes: 20,
        max_collection_items: 2,
        max_replay_events: 8,
        max_replay_bytes: 3,
        max_concurrent_streams: 4,
        max_active_runs: 6,
    };
    let want = Limits {
        max_message_bytes: 10,
        max_collection_items: 2,
        max_replay_events: 7,
        max_replay_bytes: 3,
        max_concurrent_streams: 1,
        max_active_runs: 6,
    };
    assert_eq!(negotiate_limits(&a, &b), want);
    assert_eq!(negotiate_limits(&b, &a), want);
}

#[test]
fn minor_zero_removes_the_snapshot_capabilities() {
    let mut req = request(0, 0);
    let (plan, _) = initialize(&req);
    assert!(plan.negotiated.capabilities.is_empty());
    // Requiring them at minor 0 is a missing capability.
    req.required_capabilities.as_mut().unwrap().names = snapshot_caps();
    assert_eq!(
        preflight_initialize(&req, &server()).unwrap_err().code(),
        ErrorCode::MissingCapability
    );
    let (plan, _) = initialize(&request(0, 1));
    assert_eq!(plan.negotiated.capabilities, snapshot_caps());
}

#[test]
fn initialize_preflight_precedes_ownership_and_is_deterministic() {
    let req = request(0, 2);
    let s = server();
    // Pure: the same inputs give the same plan, and nothing is granted yet.
    assert_eq!(
        preflight_initialize(&req, &s),
        preflight_initialize(&req, &s)
    );
    // Order: a request that is both invalid (step 1) and incompatible (step 3)
    // reports the invalid argument.
    let mut bad = request(0, 0);
    bad.protocol = Some(r((2, 0, 0), (2, 0, 0)));
    bad.client.as_mut().unwrap().version = " padded".into();
    assert_eq!(
        preflight_initialize(&bad, &s).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    // Broken server inputs (step 2) come before negotiation (step 3).
    bad.client = req.client.clone();
    let mut broken = server();
    broken.health.limits.as_mut().unwrap().max_active_runs = 1;
    assert_eq!(
        preflight_initialize(&bad, &broken).unwrap_err().code(),
        ErrorCode::Internal
    );
    assert_eq!(
        preflight_initialize(&bad, &s).unwrap_err().code(),
        ErrorCode::IncompatibleVersion
    );
    // Step 3 before step 4: an undersized minor-2 request that is also incompatible.
    let mut small = request(0, 2);
    small.requested_limits.as_mut().unwrap().max_message_bytes = 1;
    assert_eq!(
        preflight_initialize(&small, &s).unwrap_err().message(),
        "minor 2 needs requested sizes of at least the server's"
    );
    small.protocol = Some(r((1, 4, 0), (1, 5, 0)));
    small.initialization_attempt_id = ATTEMPT.to_vec();
    assert_eq!(
        preflight_initialize(&small, &s).unwrap_err().code(),
        ErrorCode::IncompatibleVersion
    );
    // Step 6: the request itself must fit the selected size (legacy minor 1
    // has no sizing rule, so a tiny requested size reaches it).
    let mut tiny = request(0, 1);
    tiny.requested_limits.as_mut().unwrap().max_message_bytes = 16;
    tiny.requested_limits.as_mut().unwrap().max_replay_bytes = 16;
    tiny.requested_limits.as_mut().unwrap().max_replay_events = 16;
    let err = preflight_initialize(&tiny, &s).unwrap_err();
    assert_eq!(
        (err.code(), err.message()),
        (
            ErrorCode::InvalidArgument,
            "initialize request exceeds the selected message size"
        )
    );
    // Step 9: the smallest size that passes is the preview response's; one
    // byte less fails on the preview, not earlier.
    let smallest = (1..10_000u64)
        .find(|&n| {
            tiny.requested_limits.as_mut().unwrap().max_message_bytes = n;
            preflight_initialize(&tiny, &s).is_ok()
        })
        .expect("some size fits");
    assert!(smallest > tiny.encoded_len() as u64);
    tiny.requested_limits.as_mut().unwrap().max_message_bytes = smallest - 1;
    let err = preflight_initialize(&tiny, &s).unwrap_err();
    assert_eq!(
        err.message(),
        "a success response would exceed the selected message size"
    );
}

#[test]
fn preflight_counts_fit_the_selected_collection_limit() {
    let mut req = request(0, 1);
    req.requested_limits.as_mut().unwrap().max_collection_items = 1;
    let err = preflight_initialize(&req, &server()).unwrap_err();
    assert_eq!(
        err.message(),
        "enabled capabilities exceed max_collection_items"
    );
    req.supported_capabilities
        .as_mut()
        .unwrap()
        .names
        .truncate(1);
    let mut s = server();
    s.health.degraded_reasons = vec!["a".into(), "b".into()];
    assert_eq!(
        preflight_initialize(&req, &s).unwrap_err().message(),
        "degraded reasons exceed max_collection_items"
    );
    assert!(preflight_initialize(&req, &server()).is_ok());
}

#[test]
fn initialize_bootstrap_bound_is_fixed_before_negotiation() {
    // Pad a valid request with an unknown field up to the bound, then past it.
    let base = request(0, 2).encode_to_vec();
    let padded = |total: usize| {
        let mut raw = base.clone();
        // field 99, wire type 2: key 0x9a 0x06; a 3-byte length prefix.
        let payload = total - raw.len() - 2 - 3;
        raw.extend([0x9a, 0x06]);
        raw.extend([
            (payload as u8 & 0x7f) | 0x80,
            ((payload >> 7) as u8 & 0x7f) | 0x80,
            (payload >> 14) as u8,
        ]);
        raw.resize(total, b'x');
        raw
    };
    let at = padded(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES);
    assert_eq!(at.len(), INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES);
    assert!(decode_initialize_request(&at).is_ok());
    let past = padded(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES + 1);
    let err = decode_initialize_request(&past).unwrap_err();
    assert_eq!(
        err.message(),
        "initialize request exceeds the 1 MiB bootstrap bound"
    );
    // A larger requested message size does not lift the bootstrap bound.
    let mut big = request(0, 2);
    big.requested_limits.as_mut().unwrap().max_message_bytes = 64 * MIB;
    assert!(validate_initialize_request(&big).is_ok());
    // An error-only response over the bound is replaced by a fixed INTERNAL.
    let huge = Status {
        code: ErrorCode::Conflict as i32,
        message: "m".repeat(INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES),
        ..Default::default()
    };
    let replaced = initialize_failure_response(huge);
    let status = replaced.status.as_ref().unwrap();
    assert_eq!(
        (status.code, status.message.as_str()),
        (ErrorCode::Internal as i32, OVERSIZED_FAILURE_MESSAGE)
    );
    let small = Status {
        code: ErrorCode::Conflict as i32,
        message: "m".into(),
        ..Default::default()
    };
    assert_eq!(
        initialize_failure_response(small.clone()).status,
        Some(small)
    );
}

#[test]
fn initialize_success_correlates_request_selection_and_server_capacity() {
    let req = request(0, 2);
    let (_, resp) = initialize(&req);
    let negotiated = validate_initialize_response_for_request(&req, &resp)
        .unwrap()
        .expect("success");
    assert_eq!(negotiated.protocol, version(1, 2, 0));
    type Edit = fn(&mut agent_protocol::pb::engine::v1::InitializeResponse);
    let cases: [(&str, Edit); 7] = [
        ("protocol outside range", |r| {
            r.protocol = Some(version(1, 3, 0))
        }),
        ("enabled not supported", |r| {
            r.capabilities
                .as_mut()
                .unwrap()
                .names
                .insert(0, "extra".into())
        }),
        ("limit above requested and capacity", |r| {
            r.limits.as_mut().unwrap().max_active_runs = 9
        }),
        ("minor-2 size differs from capacity", |r| {
            r.limits.as_mut().unwrap().max_collection_items = 255
        }),
        ("legacy response with attempt id", |r| {
            r.initialization_attempt_id = ATTEMPT.to_vec()
        }),
        ("fresh epoch is not 1", |r| r.ownership_epoch = 2),
        ("minor 0 advertising snapshots", |r| {
            r.protocol = Some(version(1, 0, 0))
        }),
    ];
    for (name, edit) in cases {
        let mut bad = resp.clone();
        edit(&mut bad);
        assert!(
            validate_initialize_response_for_request(&req, &bad).is_err(),
            "{name}"
        );
    }
    // Required capabilities must be enabled.
    let mut need = request(0, 2);
    need.required_capabilities.as_mut().unwrap().names = vec!["snapshots".into()];
    let (_, ok) = initialize(&need);
    let mut dropped = ok.clone();
    dropped.capabilities.as_mut().unwrap().names = vec!["snapshot-authority-v1".into()];
    assert!(validate_initialize_response_for_request(&need, &ok).is_ok());
    assert!(validate_initialize_response_for_request(&need, &dropped).is_err());
    // A lower selected limit than the request is fine where the rules allow it.
    let mut lower = request(0, 1);
    lower
        .requested_limits
        .as_mut()
        .unwrap()
        .max_concurrent_streams = 2;
    let (_, resp) = initialize(&lower);
    assert_eq!(
        validate_initialize_response_for_request(&lower, &resp)
            .unwrap()
            .unwrap()
            .limits
            .max_concurrent_streams,
        2
    );
}

#[test]
fn minor_two_negotiation_requires_server_sized_snapshot_bounds() {
    for (field, minor, ok) in [
        ("bytes", 2, false),
        ("items", 2, false),
        ("bytes", 1, true),
        ("items", 3, false),
    ] {
        let mut req = request(if minor == 3 { 3 } else { 0 }, minor);
        let l = req.requested_limits.as_mut().unwrap();
        match field {
            "bytes" => l.max_message_bytes -= 1,
            _ => l.max_collection_items -= 1,
        }
        let got = preflight_initialize(&req, &server());
        assert_eq!(got.is_ok(), ok, "{field} at minor {minor}");
        if !ok {
            assert_eq!(
                got.unwrap_err().message(),
                "minor 2 needs requested sizes of at least the server's"
            );
        }
    }
    // Requesting more than the server is allowed and selects the server's values.
    let mut more = request(0, 2);
    more.requested_limits.as_mut().unwrap().max_message_bytes = 64 * MIB;
    let (plan, _) = initialize(&more);
    assert_eq!(
        plan.negotiated.limits.max_message_bytes,
        server_limits().max_message_bytes
    );
}

#[test]
fn initialization_attempt_rejects_semantic_boundary_and_malformed_ids() {
    let mut crossing = request(2, 3);
    crossing.initialization_attempt_id = ATTEMPT.to_vec();
    assert_eq!(
        validate_initialize_request(&crossing)
            .unwrap_err()
            .message(),
        "protocol range crosses the 1.2/1.3 boundary"
    );
    crossing.initialization_attempt_id.clear();
    assert!(validate_initialize_request(&crossing).is_err());
    let mut exact = request(3, 3);
    for (id, msg) in [
        (vec![], "initialization attempt id must be 16 bytes"),
        (vec![1; 15], "initialization attempt id must be 16 bytes"),
        (vec![1; 17], "initialization attempt id must be 16 bytes"),
        (vec![0; 16], "initialization attempt id is all zero"),
    ] {
        exact.initialization_attempt_id = id;
        assert_eq!(
            validate_initialize_request(&exact).unwrap_err().message(),
            msg
        );
    }
    let mut zero_but_one = vec![0; 16];
    zero_but_one[15] = 1;
    exact.initialization_attempt_id = zero_but_one;
    assert!(validate_initialize_request(&exact).is_ok());
    let mut legacy = request(0, 2);
    legacy.initialization_attempt_id = ATTEMPT.to_vec();
    assert_eq!(
        validate_initialize_request(&legacy).unwrap_err().message(),
        "legacy initialization carries no attempt id"
    );
}

#[test]
fn initialization_attempt_response_must_echo_request_exactly() {
    let req = request(3, 3);
    let (_, resp) = initialize(&req);
    assert_eq!(resp.initialization_attempt_id, ATTEMPT);
    assert!(
        validate_initialize_response_for_request(&req, &resp)
            .unwrap()
            .is_some()
    );
    let mut other = resp.clone();
    other.initialization_attempt_id[0] ^= 1;
    assert!(
        validate_initialize_response(&other).is_ok(),
        "well-formed by itself"
    );
    assert_eq!(
        validate_initialize_response_for_request(&req, &other)
            .unwrap_err()
            .message(),
        "response does not echo the initialization attempt id"
    );
    // Failures carry no attempt id.
    let mut failed = initialize_failure_response(Status {
        code: ErrorCode::Unavailable as i32,
        message: "down".into(),
        ..Default::default()
    });
    assert!(
        validate_initialize_response_for_request(&req, &failed)
            .unwrap()
            .is_none()
    );
    failed.initialization_attempt_id = ATTEMPT.to_vec();
    assert!(validate_initialize_response_for_request(&req, &failed).is_err());
}

#[test]
fn initialize_reconnect_claim_requires_ownership_epoch_compare_and_swap() {
    let mut req = request(0, 2);
    for (epoch, ok) in [
        (0, false),
        (1, true),
        (u64::MAX - 1, true),
        (u64::MAX, false),
    ] {
        req.reconnect_claim = Some(ReconnectClaim {
            client_id: "client-1".into(),
            expected_ownership_epoch: epoch,
        });
        assert_eq!(
            validate_initialize_request(&req).is_ok(),
            ok,
            "expected epoch {epoch}"
        );
    }
    req.reconnect_claim = Some(ReconnectClaim {
        client_id: "client-1".into(),
        expected_ownership_epoch: 4,
    });
    let s = server();
    let plan = preflight_initialize(&req, &s).unwrap();
    let granted = complete_initialize(
        &plan,
        &s,
        OwnershipGrant {
            client_id: "client-1".into(),
            epoch: 5,
        },
    );
    assert!(
        validate_initialize_response_for_request(&req, &granted)
            .unwrap()
            .is_some()
    );
    for grant in [
        OwnershipGrant {
            client_id: "client-1".into(),
            epoch: 4,
        },
        OwnershipGrant {
            client_id: "client-1".into(),
            epoch: 6,
        },
        OwnershipGrant {
            client_id: "client-2".into(),
            epoch: 5,
        },
    ] {
        let resp = complete_initialize(&plan, &s, grant.clone());
        assert_eq!(
            resp.status.unwrap().code,
            ErrorCode::Internal as i32,
            "{grant:?}"
        );
    }
    // The client checks the same rule on what it receives.
    let mut forged = granted.clone();
    forged.ownership_epoch = 6;
    assert!(validate_initialize_response_for_request(&req, &forged).is_err());
    forged.ownership_epoch = 5;
    forged.client_id = "client-2".into();
    assert!(validate_initialize_response_for_request(&req, &forged).is_err());
    // A fresh grant must be epoch 1.
    let fresh = request(0, 2);
    let plan = preflight_initialize(&fresh, &s).unwrap();
    let resp = complete_initialize(
        &plan,
        &s,
        OwnershipGrant {
            client_id: "c".into(),
            epoch: 2,
        },
    );
    assert_eq!(resp.status.unwrap().code, ErrorCode::Internal as i32);
}

#[test]
fn maximum_uint32_limits_do_not_overflow_count_validation() {
    let mut req = request(0, 2);
    let l = req.requested_limits.as_mut().unwrap();
    l.max_collection_items = u32::MAX;
    l.max_replay_events = u32::MAX;
    l.max_concurrent_streams = u32::MAX;
    l.max_active_runs = u32::MAX;
    l.max_replay_bytes = u64::from(u32::MAX);
    l.max_message_bytes = u64::MAX;
    assert!(validate_initialize_request(&req).is_ok());
    let mut s = server();
    s.limits = *req.requested_limits.as_ref().unwrap();
    s.health.limits = Some(s.limits);
    let plan = preflight_initialize(&req, &s).unwrap();
    assert_eq!(plan.negotiated.limits.max_collection_items, u32::MAX);
    // One replay event more than the bytes is still refused in 64-bit arithmetic.
    let mut l = s.limits;
    l.max_replay_bytes = u64::from(u32::MAX) - 1;
    req.requested_limits = Some(l);
    assert_eq!(
        validate_initialize_request(&req).unwrap_err().message(),
        "max_replay_events exceeds max_replay_bytes"
    );
}

#[test]
fn required_capabilities_must_be_supported() {
    let mut req: InitializeRequest = request(0, 2);
    req.required_capabilities.as_mut().unwrap().names = vec!["other".into()];
    assert_eq!(
        validate_initialize_request(&req).unwrap_err().message(),
        "required capabilities are not all supported"
    );
    req.required_capabilities = None;
    assert_eq!(
        validate_initialize_request(&req).unwrap_err().message(),
        "capability set is missing"
    );
}
