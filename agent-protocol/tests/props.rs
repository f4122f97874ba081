//! Property tests of the validators.

mod support;

use std::collections::BTreeSet;

use agent_protocol::negotiate::{negotiate_capabilities, negotiate_protocol, version, version_key};
use agent_protocol::pb::common::v1::{ErrorCode, Limits, ProtocolRange};
use agent_protocol::pb::engine::v1::{
    EventKind, InteractionDelta, InteractionDeltaKind, InteractionSnapshot,
    InteractionStreamControl, PendingInteraction, RunEvent, StreamControl,
    StreamInteractionsResponse, stream_interactions_response::Payload,
};
use agent_protocol::status::{ok_status, validate_status};
use agent_protocol::stream::{
    InteractionTailValidator, check_replay_cursor, is_terminal_kind, validate_event_batch,
    validate_stream_control,
};
use agent_protocol::token::is_token;
use agent_protocol::wire::{fields, unknown_field_numbers};
use proptest::prelude::*;
use prost::Message as _;
use support::negotiated;

fn a_range() -> impl Strategy<Value = ProtocolRange> {
    (0u32..6, 0u32..3, 0u32..6, 0u32..3).prop_map(|(a, ap, b, bp)| {
        let (lo, hi) = if (a, ap) <= (b, bp) {
            ((a, ap), (b, bp))
        } else {
            ((b, bp), (a, ap))
        };
        ProtocolRange {
            minimum: Some(version(1, lo.0, lo.1)),
            maximum: Some(version(1, hi.0, hi.1)),
        }
    })
}

proptest! {
    #[test]
    fn negotiation_picks_the_greatest_common_version(client in a_range(), server in a_range()) {
        let key = |r: &ProtocolRange| (version_key(r.minimum.as_ref().unwrap()), version_key(r.maximum.as_ref().unwrap()));
        let (cmin, cmax) = key(&client);
        let (smin, smax) = key(&server);
        match negotiate_protocol(&client, &server) {
            Ok(v) => {
                let k = version_key(&v);
                prop_assert!(cmin <= k && k <= cmax && smin <= k && k <= smax);
                prop_assert_eq!(k, cmax.min(smax));
            }
            Err(e) => {
                prop_assert!(cmin.max(smin) > cmax.min(smax));
                prop_assert_eq!(e.code(), ErrorCode::IncompatibleVersion);
                prop_assert!(validate_status(&e.into_status()).is_ok());
            }
        }
    }

    #[test]
    fn capability_negotiation_is_an_intersection(
        supported in proptest::collection::btree_set("[a-e]{1,2}", 0..8),
        server in proptest::collection::btree_set("[a-e]{1,2}", 0..8),
        pick in proptest::collection::vec(any::<bool>(), 8),
    ) {
        let supported: Vec<String> = supported.into_iter().collect();
        let required: Vec<String> = supported.iter().zip(&pick).filter(|(_, p)| **p).map(|(s, _)| s.clone()).collect();
        let server: Vec<String> = server.into_iter().collect();
        match negotiate_capabilities(&supported, &required, &server) {
            Ok(enabled) => {
                let want: Vec<String> = supported.iter().filter(|s| server.contains(s)).cloned().collect();
                prop_assert_eq!(&enabled, &want);
                prop_assert!(required.iter().all(|r| enabled.contains(r)));
            }
            Err(e) => {
                prop_assert!(required.iter().any(|r| !server.contains(r)));
                prop_assert!(validate_status(&e.into_status()).is_ok());
            }
        }
    }

    #[test]
    fn replay_cursor_accepts_exactly_the_window(earliest in 1u64..50, len in 0u64..50, after in 0u64..120) {
        let latest = earliest + len - 1; // len 0 is the empty window [e, e-1]
        let inside = if len == 0 { after == latest } else { earliest - 1 <= after && after <= latest };
        match check_replay_cursor(after, earliest, latest) {
            Ok(()) => prop_assert!(inside),
            Err(e) => {
                prop_assert!(!inside);
                prop_assert_eq!(e.code(), ErrorCode::OutOfRange);
                if len > 0 {
                    prop_assert!(validate_status(&e.into_status()).is_ok());
                }
            }
        }
    }

    #[test]
    fn a_server_built_control_always_validates(earliest in 1u64..1000, len in 0u64..1000, page in 0u64..1001, delivered in 0u64..1001, tail in any::<bool>()) {
        let latest = earliest + len - 1;
        let page_last = earliest - 1 + page % (len + 1);
        let delivered = earliest - 1 + delivered % (page_last - (earliest - 1) + 1);
        let has_more = page_last < latest;
        let c = StreamControl {
            status: Some(ok_status()),
            earliest_sequence: earliest,
            latest_sequence: latest,
            last_delivered_sequence: delivered,
            tailing: tail && !has_more,
            page_last_sequence: Some(page_last),
            has_more,
        };
        prop_assert!(validate_stream_control(&c).is_ok());
        let flipped = StreamControl { has_more: !has_more, ..c.clone() };
        prop_assert!(validate_stream_control(&flipped).is_err());
    }

    #[test]
    fn contiguous_event_pages_validate_and_any_shift_fails(after in 0u64..1_000_000, kinds in proptest::collection::vec(1i32..=19, 1..40), shift in 0usize..40) {
        let events: Vec<RunEvent> = kinds.iter().enumerate().map(|(i, &k)| RunEvent {
            run_id: "run".into(),
            sequence: after + 1 + i as u64,
            unix_nano: 1,
            kind: k,
            payload_json: vec![],
            terminal: is_terminal_kind(EventKind::try_from(k).unwrap()),
        }).collect();
        let n = negotiated(2);
        prop_assert!(validate_event_batch(after, &events, &n).is_ok());
        let mut broken = events.clone();
        broken[shift % events.len()].sequence += 1;
        prop_assert!(validate_event_batch(after, &broken, &n).is_err());
    }

    #[test]
    fn the_tail_follows_any_valid_hub_history(ops in proptest::collection::vec((any::<bool>(), 0u8..6), 0..60)) {
        let item = |i: u8| PendingInteraction { run_id: format!("run-{}", i % 3), interaction_id: format!("ask-{i}"), kind: "k".into(), prompt: "p".into(), schema_json: b"{}".to_vec() };
        let frame = |p| StreamInteractionsResponse { payload: Some(p) };
        let page = [
            frame(Payload::Snapshot(InteractionSnapshot { revision: 0, pending: vec![] })),
            frame(Payload::Control(InteractionStreamControl { status: Some(ok_status()), latest_revision: 0, page_last_revision: 0, has_more: false, tailing: true })),
        ];
        let n = negotiated(2);
        let mut tail = InteractionTailValidator::new(&page, &n).unwrap();
        let mut model: BTreeSet<u8> = BTreeSet::new();
        let mut revision = 0;
        for (open, i) in ops {
            // The hub only emits a legal delta; the other kind is a protocol error.
            let legal_open = !model.contains(&i);
            let kind = if open == legal_open { InteractionDeltaKind::Opened } else { InteractionDeltaKind::Closed };
            let d = frame(Payload::Delta(InteractionDelta { revision: revision + 1, kind: kind as i32, interaction: Some(item(i)) }));
            let before = tail.snapshot();
            let legal = (kind == InteractionDeltaKind::Opened) == legal_open;
            prop_assert_eq!(tail.accept(&d).is_ok(), legal);
            if legal {
                revision += 1;
                if legal_open { model.insert(i); } else { model.remove(&i); }
            } else {
                prop_assert_eq!(tail.snapshot(), before);
            }
        }
        let mut want: Vec<PendingInteraction> = model.iter().map(|&i| item(i)).collect();
        want.sort_by(|a, b| (&a.run_id, &a.interaction_id).cmp(&(&b.run_id, &b.interaction_id)));
        prop_assert_eq!(tail.snapshot(), InteractionSnapshot { revision, pending: want });
    }

    #[test]
    fn the_walker_sees_exactly_the_appended_unknown_field(bytes in any::<u64>(), number in 7u32..100_000, value in any::<u64>()) {
        let limits = Limits { max_message_bytes: bytes, ..Default::default() };
        let mut raw = limits.encode_to_vec();
        prost::encoding::uint64::encode(number, &value, &mut raw);
        prop_assert_eq!(unknown_field_numbers(&raw, &[1, 2, 3, 4, 5, 6]).unwrap(), vec![number]);
        prop_assert_eq!(Limits::decode(raw.as_slice()).unwrap(), limits);
    }

    #[test]
    fn the_walker_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = fields(&bytes);
    }

    #[test]
    fn a_token_never_holds_a_control_separator(prefix in "[a-z]{0,5}", sep in prop::sample::select(vec!['\0', '\r', '\n', '\t']), suffix in "[a-z]{1,5}") {
        let with = format!("{prefix}{sep}{suffix}");
        prop_assert!(!is_token(&with, 64));
        let without = format!("{prefix}{suffix}");
        prop_assert!(is_token(&without, 64));
    }
}
