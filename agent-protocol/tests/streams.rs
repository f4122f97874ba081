//! Event replay controls, interaction pages, the tail validator and the
//! unknown-field rules of StreamInteractions.

mod support;

use agent_protocol::pb::common::v1::{ErrorCode, Status};
use agent_protocol::pb::engine::v1::{
    EventKind, InteractionDelta, InteractionDeltaKind, InteractionSnapshot,
    InteractionStreamControl, PendingInteraction, RunEvent, StreamControl,
    StreamInteractionsRequest, StreamInteractionsResponse, stream_interactions_response::Payload,
};
use agent_protocol::requests::validate_stream_interactions_request;
use agent_protocol::status::ok_status;
use agent_protocol::stream::*;
use prost::Message as _;
use support::*;

fn control(
    earliest: u64,
    latest: u64,
    delivered: u64,
    page_last: Option<u64>,
    has_more: bool,
    tailing: bool,
) -> StreamControl {
    StreamControl {
        status: Some(ok_status()),
        earliest_sequence: earliest,
        latest_sequence: latest,
        last_delivered_sequence: delivered,
        tailing,
        page_last_sequence: page_last,
        has_more,
    }
}

#[test]
fn replay_controls_support_empty_and_imported_tails() {
    // Before any event: the empty window [1, 0].
    assert!(validate_stream_control(&control(1, 0, 0, Some(0), false, true)).is_ok());
    assert!(check_replay_cursor(0, 1, 0).is_ok());
    // After an import at N = 41: [42, 41], the cursor at 41.
    assert!(validate_stream_control(&control(42, 41, 41, Some(41), false, true)).is_ok());
    assert!(check_replay_cursor(41, 42, 41).is_ok());
    assert_eq!(
        check_replay_cursor(40, 42, 41).unwrap_err().code(),
        ErrorCode::OutOfRange
    );
    assert_eq!(
        check_replay_cursor(42, 42, 41).unwrap_err().code(),
        ErrorCode::OutOfRange
    );
    // Not a window at all.
    assert!(validate_stream_control(&control(0, 0, 0, Some(0), false, false)).is_err());
    assert!(validate_stream_control(&control(5, 2, 4, Some(4), false, false)).is_err());
    assert!(
        validate_stream_control(&control(
            u64::MAX,
            u64::MAX - 1,
            u64::MAX - 1,
            None,
            false,
            false
        ))
        .is_ok()
    );
    assert!(check_replay_cursor(u64::MAX - 1, u64::MAX, u64::MAX - 1).is_ok());
}

#[test]
fn stream_control_page_arithmetic() {
    let cases = [
        (control(1, 10, 10, Some(10), false, true), true),
        (control(1, 10, 5, Some(5), true, false), true),
        (control(1, 10, 0, Some(0), true, false), true), // cursor at earliest-1, nothing delivered yet
        (control(1, 10, 5, Some(5), false, false), false), // has_more must be set
        (control(1, 10, 10, Some(10), true, false), false), // has_more but at latest
        (control(1, 10, 5, Some(5), true, true), false), // has_more and tailing
        (control(1, 10, 6, Some(5), true, false), false), // delivered past page
        (control(3, 10, 1, Some(5), true, false), false), // delivered before earliest-1
        (control(3, 10, 2, Some(1), true, false), false), // page_last before earliest-1
        (control(1, 10, 10, Some(11), false, false), false), // page_last past latest
        (control(1, 10, 10, None, false, false), true),  // legacy
        (control(1, 10, 11, None, false, false), false),
        (control(1, 10, 10, None, false, true), false),
        (control(1, 10, 10, None, true, false), false),
    ];
    for (c, ok) in cases {
        assert_eq!(validate_stream_control(&c).is_ok(), ok, "{c:?}");
    }
    // A failure control needs nothing else, but its status must be valid.
    let failed = failed_stream_control(Status {
        code: ErrorCode::NotFound as i32,
        message: "gone".into(),
        ..Default::default()
    });
    assert!(validate_stream_control(&failed).is_ok());
    assert!(validate_stream_control(&StreamControl::default()).is_err());
}

fn event(seq: u64, kind: EventKind) -> RunEvent {
    RunEvent {
        run_id: "run-1".into(),
        sequence: seq,
        unix_nano: 1,
        kind: kind as i32,
        payload_json: b"{}".to_vec(),
        terminal: is_terminal_kind(kind),
    }
}

#[test]
fn twelve_kinds_are_terminal() {
    let terminal: Vec<i32> = (1..=19)
        .filter(|&k| is_terminal_kind(EventKind::try_from(k).unwrap()))
        .collect();
    assert_eq!(terminal, [2, 3, 4, 6, 7, 10, 11, 14, 15, 17, 18, 19]);
    let mut e = event(1, EventKind::RunCompleted);
    assert!(validate_run_event(&e).is_ok());
    e.terminal = false;
    assert!(validate_run_event(&e).is_err());
    let mut e = event(1, EventKind::ModelDelta);
    e.payload_json = b"{".to_vec();
    assert!(validate_run_event(&e).is_err());
    e.payload_json.clear();
    assert!(validate_run_event(&e).is_ok());
    e.unix_nano = 0;
    assert!(validate_run_event(&e).is_err());
}

#[test]
fn event_batches_are_contiguous_after_the_cursor() {
    let n = negotiated(2);
    let page: Vec<_> = (5..=8).map(|s| event(s, EventKind::ModelDelta)).collect();
    assert!(validate_event_batch(4, &page, &n).is_ok());
    assert!(validate_event_batch(3, &page, &n).is_err());
    let mut gap = page.clone();
    gap.remove(1);
    assert!(validate_event_batch(4, &gap, &n).is_err());
    let mut mixed = page.clone();
    mixed[2].run_id = "run-2".into();
    assert!(validate_event_batch(4, &mixed, &n).is_err());
    let mut few = negotiated(2);
    few.limits.max_replay_events = 3;
    assert!(validate_event_batch(4, &page, &few).is_err());
    let per = page[0].encoded_len() as u64;
    few.limits.max_replay_events = 4;
    few.limits.max_replay_bytes = per * 4;
    assert!(validate_event_batch(4, &page, &few).is_ok());
    few.limits.max_replay_bytes = per * 4 - 1;
    assert!(validate_event_batch(4, &page, &few).is_err());
    assert!(
        validate_event_batch(u64::MAX, &[event(1, EventKind::ModelDelta)], &n).is_err(),
        "overflow"
    );
}

fn item(run: &str, id: &str) -> PendingInteraction {
    PendingInteraction {
        run_id: run.into(),
        interaction_id: id.into(),
        kind: "approval".into(),
        prompt: "Proceed?".into(),
        schema_json: b"{\"type\":\"boolean\"}".to_vec(),
    }
}

fn snapshot_frame(revision: u64, pending: Vec<PendingInteraction>) -> StreamInteractionsResponse {
    StreamInteractionsResponse {
        payload: Some(Payload::Snapshot(InteractionSnapshot { revision, pending })),
    }
}

fn control_frame(
    latest: u64,
    page_last: u64,
    has_more: bool,
    tailing: bool,
) -> StreamInteractionsResponse {
    StreamInteractionsResponse {
        payload: Some(Payload::Control(InteractionStreamControl {
            status: Some(ok_status()),
            latest_revision: latest,
            page_last_revision: page_last,
            has_more,
            tailing,
        })),
    }
}

fn delta(
    revision: u64,
    kind: InteractionDeltaKind,
    item: PendingInteraction,
) -> StreamInteractionsResponse {
    StreamInteractionsResponse {
        payload: Some(Payload::Delta(InteractionDelta {
            revision,
            kind: kind as i32,
            interaction: Some(item),
        })),
    }
}

#[test]
fn interaction_stream_always_starts_from_atomic_pending_snapshot() {
    let n = negotiated(2);
    let snap = snapshot_frame(7, vec![item("a", "1"), item("b", "1")]);
    for tail in [false, true] {
        assert!(
            validate_interaction_stream_page(
                tail,
                &[snap.clone(), control_frame(7, 7, false, tail)],
                &n
            )
            .is_ok()
        );
        assert!(
            validate_interaction_stream_page(
                tail,
                &[snap.clone(), control_frame(7, 7, false, !tail)],
                &n
            )
            .is_err()
        );
    }
    let bad_pages = [
        vec![snap.clone()],
        vec![control_frame(7, 7, false, true), snap.clone()],
        vec![snap.clone(), control_frame(8, 7, true, false)],
        vec![snap.clone(), control_frame(6, 6, false, true)],
        vec![
            snap.clone(),
            control_frame(7, 7, false, true),
            delta(8, InteractionDeltaKind::Opened, item("c", "1")),
        ],
        vec![
            snapshot_frame(7, vec![item("b", "1"), item("a", "1")]),
            control_frame(7, 7, false, true),
        ],
        vec![
            snapshot_frame(7, vec![item("a", "1"), item("a", "1")]),
            control_frame(7, 7, false, true),
        ],
    ];
    for page in bad_pages {
        assert!(
            validate_interaction_stream_page(true, &page, &n).is_err(),
            "{page:?}"
        );
    }
    let failed = StreamInteractionsResponse {
        payload: Some(Payload::Control(InteractionStreamControl {
            status: Some(Status {
                code: ErrorCode::Unavailable as i32,
                message: "x".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
    };
    assert!(validate_interaction_stream_page(true, &[snap, failed], &n).is_err());
    // Sorting is by (run_id, interaction_id): "a"/"z" sorts before "ab"/"a".
    let snap = snapshot_frame(1, vec![item("a", "z"), item("ab", "a")]);
    assert!(
        validate_interaction_stream_page(false, &[snap, control_frame(1, 1, false, false)], &n)
            .is_ok()
    );
}

#[test]
fn interaction_tail_validator_requires_contiguous_matching_membership() {
    let n = negotiated(2);
    let page = [
        snapshot_frame(3, vec![item("a", "1")]),
        control_frame(3, 3, false, true),
    ];
    let mut tail = InteractionTailValidator::new(&page, &n).unwrap();
    // A non-tailing page cannot start a tail.
    assert!(
        InteractionTailValidator::new(&[page[0].clone(), control_frame(3, 3, false, false)], &n)
            .is_err()
    );

    let rejected = [
        delta(5, InteractionDeltaKind::Opened, item("b", "1")), // gap
        delta(3, InteractionDeltaKind::Opened, item("b", "1")), // repeat
        delta(4, InteractionDeltaKind::Opened, item("a", "1")), // already pending
        delta(4, InteractionDeltaKind::Closed, item("b", "1")), // not pending
        delta(
            4,
            InteractionDeltaKind::Closed,
            PendingInteraction {
                prompt: "Other?".into(),
                ..item("a", "1")
            },
        ), // mismatch
        delta(4, InteractionDeltaKind::Unspecified, item("b", "1")),
        control_frame(4, 4, false, true),
    ];
    for frame in &rejected {
        let before = (tail.revision(), tail.snapshot());
        assert!(tail.accept(frame).is_err(), "{frame:?}");
        assert_eq!(
            (tail.revision(), tail.snapshot()),
            before,
            "a rejected frame changes nothing"
        );
    }
    tail.accept(&delta(4, InteractionDeltaKind::Opened, item("b", "1")))
        .unwrap();
    tail.accept(&delta(5, InteractionDeltaKind::Closed, item("a", "1")))
        .unwrap();
    assert_eq!(tail.revision(), 5);
    assert_eq!(tail.snapshot().pending, vec![item("b", "1")]);

    // The collection limit applies to the pending count.
    let mut one = negotiated(2);
    one.limits.max_collection_items = 1;
    let mut tail = InteractionTailValidator::new(&page, &one).unwrap();
    assert!(
        tail.accept(&delta(4, InteractionDeltaKind::Opened, item("b", "1")))
            .is_err()
    );
    tail.accept(&delta(4, InteractionDeltaKind::Closed, item("a", "1")))
        .unwrap();
    tail.accept(&delta(5, InteractionDeltaKind::Opened, item("b", "1")))
        .unwrap();

    // The revision cannot pass u64::MAX.
    let top = [
        snapshot_frame(u64::MAX, vec![]),
        control_frame(u64::MAX, u64::MAX, false, true),
    ];
    let mut tail = InteractionTailValidator::new(&top, &n).unwrap();
    assert_eq!(
        tail.accept(&delta(
            u64::MAX,
            InteractionDeltaKind::Opened,
            item("a", "1")
        ))
        .unwrap_err()
        .message(),
        "interaction revision overflows"
    );
}

#[test]
fn interaction_tail_validator_keeps_reconnect_snapshot_within_complete_frame_bound() {
    let mut n = negotiated(2);
    let page = [
        snapshot_frame(1, vec![item("a", "1")]),
        control_frame(1, 1, false, true),
    ];
    // Exactly the frame of the snapshot holding both items.
    let both = snapshot_frame(2, vec![item("a", "1"), item("b", "1")]);
    n.limits.max_message_bytes = both.encoded_len() as u64;
    let mut tail = InteractionTailValidator::new(&page, &n).unwrap();
    tail.accept(&delta(2, InteractionDeltaKind::Opened, item("b", "1")))
        .unwrap();
    assert_eq!(
        snapshot_frame(tail.revision(), tail.snapshot().pending).encoded_len() as u64,
        n.limits.max_message_bytes
    );
    // One byte less and the same delta is refused, though the delta frame itself fits.
    n.limits.max_message_bytes -= 1;
    let mut tail = InteractionTailValidator::new(&page, &n).unwrap();
    let frame = delta(2, InteractionDeltaKind::Opened, item("b", "1"));
    assert!((frame.encoded_len() as u64) < n.limits.max_message_bytes);
    assert_eq!(
        tail.accept(&frame).unwrap_err().message(),
        "the pending set would not fit one snapshot frame"
    );
    assert_eq!(tail.revision(), 1);
}

#[test]
fn stream_interaction_unknown_fields_remain_additive() {
    let n = negotiated(2);
    let r = StreamInteractionsRequest {
        client_id: "c".into(),
        ownership_epoch: 1,
        tail: true,
    };
    let mut raw = r.encode_to_vec();
    assert_eq!(validate_stream_interactions_request(&raw, &n).unwrap(), r);
    // An unknown field 9 is allowed...
    raw.extend([0x48, 0x01]);
    assert_eq!(validate_stream_interactions_request(&raw, &n).unwrap(), r);
    // ...and counts toward the size bound.
    let mut small = negotiated(2);
    small.limits.max_message_bytes = raw.len() as u64 - 1;
    assert!(validate_stream_interactions_request(&raw, &small).is_err());
    // Field 3, the retired replay limit, is refused in any wire type.
    for extra in [[0x18u8, 0x05], [0x1a, 0x00]] {
        let mut old = r.encode_to_vec();
        old.extend(extra);
        assert_eq!(
            validate_stream_interactions_request(&old, &n)
                .unwrap_err()
                .message(),
            "request carries the retired replay_limit field"
        );
    }
    // Malformed unknown bytes are refused.
    let mut broken = r.encode_to_vec();
    broken.extend([0x4a, 0x05, 0x00]);
    assert_eq!(
        validate_stream_interactions_request(&broken, &n)
            .unwrap_err()
            .message(),
        "request bytes are malformed"
    );
    // Minor 1 has no interaction streams.
    assert!(validate_stream_interactions_request(&r.encode_to_vec(), &negotiated(1)).is_err());
}

#[test]
fn an_event_page_is_events_then_one_control() {
    use agent_protocol::pb::engine::v1::{
        StreamEventsResponse, stream_events_response::Payload as P,
    };
    let n = negotiated(2);
    let ev = |s| StreamEventsResponse {
        payload: Some(P::Event(event(s, EventKind::ModelDelta))),
    };
    let ctl = StreamEventsResponse {
        payload: Some(P::Control(control(1, 3, 3, Some(3), false, true))),
    };
    assert!(validate_event_page(1, &[ev(2), ev(3), ctl.clone()], &n).is_ok());
    assert!(validate_event_page(3, std::slice::from_ref(&ctl), &n).is_ok());
    assert!(
        validate_event_page(1, &[ev(2), ev(3)], &n).is_err(),
        "no control"
    );
    assert!(
        validate_event_page(1, &[ev(2), ctl.clone(), ev(3), ctl.clone()], &n).is_err(),
        "control mid-page"
    );
    assert!(validate_event_page(1, &[ev(3), ctl], &n).is_err(), "gap");
    assert!(validate_event_page(1, &[], &n).is_err());
}
