//! Property tests: the seam's own validators (standard library only, so
//! written again there) agree with agent-protocol's and with serde_json.

use agent_client as c;
use agent_client::json::{JsonKind, validate_json};
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use proptest::prelude::*;

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| n.into()),
        (-1e300f64..1e300).prop_map(|f| serde_json::json!(f)),
        any::<String>().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn kind_of(v: &serde_json::Value) -> JsonKind {
    match v {
        serde_json::Value::Null => JsonKind::Null,
        serde_json::Value::Bool(_) => JsonKind::Bool,
        serde_json::Value::Number(_) => JsonKind::Number,
        serde_json::Value::String(_) => JsonKind::String,
        serde_json::Value::Array(_) => JsonKind::Array,
        serde_json::Value::Object(_) => JsonKind::Object,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every document serde_json writes is valid, with its top-level kind.
    #[test]
    fn serialized_json_is_valid(v in json_value(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
        prop_assert_eq!(validate_json(&text), Ok(kind_of(&v)));
    }

    /// On arbitrary JSON-like text both validators give the same verdict
    /// (depth stays far below both recursion bounds).
    #[test]
    fn validator_agrees_with_serde_json(text in "[\\[\\]{}\",:0-9eE.+\\-a-z\\\\ \t\n]{0,40}") {
        let ours = validate_json(text.as_bytes()).is_ok();
        let theirs = serde_json::from_str::<serde_json::Value>(&text).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", text);
    }

    /// Mutating one byte of a valid document: still the same verdict.
    #[test]
    fn validator_agrees_on_mutations(v in json_value(), at in any::<prop::sample::Index>(), b in any::<u8>()) {
        let mut bytes = serde_json::to_vec(&v).unwrap();
        let i = at.index(bytes.len());
        bytes[i] = b;
        let ours = validate_json(&bytes).is_ok();
        let theirs = serde_json::from_slice::<serde_json::Value>(&bytes).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", String::from_utf8_lossy(&bytes));
    }

    /// The seam's token rule is the protocol's.
    #[test]
    fn token_rule_matches_protocol(text in "[a \t\n\r\u{0}\u{a0}\u{2003}é]{0,6}") {
        prop_assert_eq!(
            c::OperationId::new(&text).is_ok(),
            agent_protocol::token::is_token(&text, 128)
        );
    }

    /// The seam's event control arithmetic is the protocol's.
    #[test]
    fn event_control_matches_protocol(
        earliest in 0u64..6, latest in 0u64..6, last in 0u64..6,
        page_last in prop::option::of(0u64..6), has_more: bool, tailing: bool,
    ) {
        let wire = pbe::StreamControl {
            status: Some(agent_protocol::status::ok_status()),
            earliest_sequence: earliest,
            latest_sequence: latest,
            last_delivered_sequence: last,
            tailing,
            page_last_sequence: page_last,
            has_more,
        };
        let theirs = agent_protocol::stream::validate_stream_control(&wire).is_ok();
        let ours = match page_last {
            Some(p) => c::EventControl::new(earliest, latest, last, p, has_more, tailing).is_ok(),
            None => !has_more && !tailing && c::EventControl::legacy(earliest, latest, last).is_ok(),
        };
        prop_assert_eq!(ours, theirs);
    }

    /// The seam's interaction control arithmetic is the protocol's.
    #[test]
    fn interaction_control_matches_protocol(latest in 0u64..4, page_last in 0u64..4, has_more: bool, tailing: bool) {
        let wire = pbe::InteractionStreamControl {
            status: Some(agent_protocol::status::ok_status()),
            latest_revision: latest,
            page_last_revision: page_last,
            has_more,
            tailing,
        };
        prop_assert_eq!(
            c::InteractionControl::new(latest, page_last, has_more, tailing).is_ok(),
            agent_protocol::stream::validate_interaction_control(&wire).is_ok()
        );
    }

    /// A cursor gap is consistent exactly when the protocol accepts its bounds.
    #[test]
    fn cursor_gap_matches_replay_bounds(requested in 0u64..8, earliest in 0u64..8, latest in 0u64..8, recovery in 0u64..8) {
        let facts = c::ErrorFacts::new("m", false, None).unwrap();
        let ours = c::CursorGapError::new(c::RunRef::new("r").unwrap(), requested, earliest, latest, recovery, facts).is_ok();
        let theirs = agent_protocol::status::validate_replay_bounds(&pbc::ReplayBounds {
            requested_after_sequence: requested,
            earliest_sequence: earliest,
            latest_sequence: latest,
            recovery_sequence: recovery,
        })
        .is_ok();
        prop_assert_eq!(ours, theirs);
    }

    /// Limits accept exactly what the protocol's limit check accepts.
    #[test]
    fn limits_match_protocol(a in 0u64..3, b in 0u32..3, e in 0u32..4, r in 0u64..4, s in 0u32..2, n in 0u32..2) {
        let wire = pbc::Limits {
            max_message_bytes: a, max_collection_items: b, max_replay_events: e,
            max_replay_bytes: r, max_concurrent_streams: s, max_active_runs: n,
        };
        prop_assert_eq!(
            c::Limits::new(a, b, e, r, s, n).is_ok(),
            agent_protocol::negotiate::validate_limits(Some(&wire)).is_ok()
        );
    }
}

/// The seam's snapshot bound is the protocol's envelope bound: the largest
/// kernel payload plus the 295-byte signed-envelope overhead.
#[test]
fn snapshot_bound_is_the_protocol_envelope_bound() {
    assert_eq!(
        c::MAXIMUM_SNAPSHOT_BYTES,
        agent_protocol::limits::MAXIMUM_SNAPSHOT_ENVELOPE_BYTES
    );
    assert_eq!(
        c::MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES,
        agent_protocol::limits::MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES
    );
    assert_eq!(
        c::INITIALIZATION_ATTEMPT_ID_BYTES,
        agent_protocol::limits::INITIALIZATION_ATTEMPT_ID_BYTES
    );
    assert_eq!(
        c::MAX_RECONNECT_EXPECTED_EPOCH,
        agent_protocol::limits::MAX_RECONNECT_EXPECTED_EPOCH
    );
    assert_eq!(
        c::MAX_STRUCTURED_VALUE_BYTES,
        agent_protocol::limits::MAX_INTERACTION_PAYLOAD_BYTES
    );
    assert_eq!(
        c::MAX_CAPABILITIES,
        agent_protocol::limits::MAX_CAPABILITIES
    );
}
