use super::*;

fn ok(kind: EventKind, json: &str) -> WirePayload {
    decode_event_payload(kind, json.as_bytes()).unwrap_or_else(|e| panic!("{kind:?} {json}: {e}"))
}

fn refused(kind: EventKind, json: &str) -> PayloadError {
    match decode_event_payload(kind, json.as_bytes()) {
        Ok(p) => panic!("{kind:?} {json} decoded as {p:?}"),
        Err(e) => e,
    }
}

fn long(n: usize) -> String {
    "a".repeat(n)
}

/// One valid payload per kind, the wire's exact shape.
fn samples() -> Vec<(EventKind, &'static str)> {
    vec![
        (EventKind::RunStarted, r#"{"definition":"coder"}"#),
        (EventKind::RunCompleted, ""),
        (EventKind::RunFailed, r#"{"error":"model_failed"}"#),
        (EventKind::RunCancelled, r#"{"error":"cancelled"}"#),
        (EventKind::TurnStarted, r#"{"turn":1}"#),
        (EventKind::TurnCompleted, r#"{"turn":2}"#),
        (EventKind::TurnFailed, r#"{"error":"cancelled"}"#),
        (
            EventKind::ModelStarted,
            r#"{"turn":1,"operation_id":"run-1/model/1"}"#,
        ),
        (EventKind::ModelDelta, r#"{"text":"hi"}"#),
        (
            EventKind::ModelCompleted,
            r#"{"input_tokens":3,"output_tokens":4}"#,
        ),
        (
            EventKind::ModelFailed,
            r#"{"code":"rate_limited","message":"slow down","retryable":true,"before_stream":true}"#,
        ),
        (EventKind::ToolStarted, r#"{"call_id":"c1","name":"read"}"#),
        (
            EventKind::ToolProgress,
            r#"{"call_id":"c1","message":"50%"}"#,
        ),
        (
            EventKind::ToolCompleted,
            r#"{"call_id":"c1","name":"read","error":""}"#,
        ),
        (
            EventKind::ToolFailed,
            r#"{"call_id":"c1","name":"send","error":"tool execution failed","outcome":"uncertain","retry":"never"}"#,
        ),
        (
            EventKind::InteractionStarted,
            r#"{"id":"i1","kind":"approval"}"#,
        ),
        (EventKind::InteractionCompleted, r#"{"id":"i1"}"#),
        (
            EventKind::InteractionFailed,
            r#"{"id":"i1","error":"declined"}"#,
        ),
        (EventKind::InteractionCancelled, r#"{"id":"i1","error":""}"#),
    ]
}

#[test]
fn every_kind_decodes_its_wire_shape_and_encodes_it_back() {
    let samples = samples();
    assert_eq!(samples.len(), 19);
    for (kind, json) in samples {
        let payload = ok(kind, json);
        assert_eq!(payload.kind(), kind);
        // Encoding is a fixpoint of decoding.
        let bytes = payload.encode();
        assert_eq!(decode_event_payload(kind, &bytes), Ok(payload), "{kind:?}");
    }
}

#[test]
fn unknown_members_are_refused_for_every_kind() {
    for (kind, json) in samples() {
        if kind == EventKind::RunCompleted {
            continue;
        }
        let extra = json.replacen('{', r#"{"x":1,"#, 1);
        assert_eq!(
            refused(kind, &extra),
            PayloadError::UnknownMember,
            "{kind:?}"
        );
    }
    // The kernel's own shapes are not the wire's.
    assert_eq!(
        refused(EventKind::RunStarted, r#"{"agent":"coder"}"#),
        PayloadError::UnknownMember
    );
    assert_eq!(
        refused(
            EventKind::ModelFailed,
            r#"{"problem":"x","retryable":false,"before_stream":true}"#
        ),
        PayloadError::UnknownMember
    );
    assert_eq!(
        refused(EventKind::TurnFailed, r#"{"code":"cancelled","turn":1}"#),
        PayloadError::UnknownMember
    );
}

#[test]
fn the_rich_member_needs_the_rich_decoder() {
    let json = br#"{"call_id":"c1","name":"read","agent_kit":{"plan_id":"p"}}"#;
    assert_eq!(
        decode_event_payload(EventKind::ToolStarted, json),
        Err(PayloadError::UnknownMember)
    );
    let (payload, rich) = decode_event_payload_rich(EventKind::ToolStarted, json).unwrap();
    assert_eq!(payload.kind(), EventKind::ToolStarted);
    assert_eq!(rich.unwrap()["plan_id"], "p");
    // Only an object, and only that one extra member.
    assert_eq!(
        decode_event_payload_rich(
            EventKind::ToolStarted,
            br#"{"call_id":"c1","name":"read","agent_kit":1}"#
        ),
        Err(PayloadError::MemberType)
    );
    assert_eq!(
        decode_event_payload_rich(
            EventKind::ToolStarted,
            br#"{"call_id":"c1","name":"read","other":{}}"#
        ),
        Err(PayloadError::UnknownMember)
    );
    let mut rich = Map::new();
    rich.insert("plan_id".into(), Value::from("p"));
    let bytes = WirePayload::ToolStarted(ToolStarted {
        call_id: "c1".into(),
        name: "read".into(),
    })
    .encode_with(Some(rich.clone()));
    let (_, back) = decode_event_payload_rich(EventKind::ToolStarted, &bytes).unwrap();
    assert_eq!(back, Some(rich.clone()));
    assert!(WirePayload::RunCompleted.encode_with(Some(rich)).is_empty());
}

#[test]
fn trailing_json_and_non_objects_are_refused() {
    for json in [
        r#"{"turn":1}{"turn":2}"#,
        r#"{"turn":1} x"#,
        r#"[1]"#,
        "1",
        "null",
        r#""turn""#,
        "{",
        "\u{feff}{\"turn\":1}",
    ] {
        assert_eq!(
            refused(EventKind::TurnStarted, json),
            PayloadError::NotObject,
            "{json}"
        );
    }
    // Whitespace after the object is not JSON.
    ok(EventKind::TurnStarted, "{\"turn\":1}\n");
}

#[test]
fn empty_payloads_are_refused_except_for_run_completed() {
    for (kind, _) in samples() {
        let result = decode_event_payload(kind, b"");
        if kind == EventKind::RunCompleted {
            assert_eq!(result, Ok(WirePayload::RunCompleted));
        } else {
            assert_eq!(result, Err(PayloadError::Empty), "{kind:?}");
        }
    }
    assert_eq!(
        refused(EventKind::RunCompleted, "{}"),
        PayloadError::NotEmpty
    );
    assert_eq!(
        decode_event_payload(EventKind::Unspecified, b"{}"),
        Err(PayloadError::UnknownKind)
    );
    assert_eq!(
        decode_event_payload_raw(20, b"{}"),
        Err(PayloadError::UnknownKind)
    );
}

#[test]
fn absent_required_members_meet_their_rule_as_zero_values() {
    for (kind, json) in [
        (EventKind::RunStarted, "{}"),
        (EventKind::RunFailed, "{}"),
        (EventKind::RunCancelled, "{}"),
        (EventKind::TurnFailed, r#"{"error":""}"#),
        (EventKind::TurnStarted, "{}"),
        (EventKind::ModelStarted, r#"{"turn":1}"#),
        (EventKind::ModelFailed, r#"{"code":"x"}"#),
        (EventKind::ToolStarted, r#"{"call_id":"c1"}"#),
        (EventKind::ToolProgress, r#"{"call_id":"c1"}"#),
        (EventKind::ToolCompleted, r#"{"name":"read"}"#),
        (EventKind::InteractionStarted, r#"{"id":"i1"}"#),
        (EventKind::InteractionFailed, "{}"),
    ] {
        assert!(
            matches!(refused(kind, json), PayloadError::Rule(_)),
            "{kind:?} {json}"
        );
    }
    // Zero-valued members that have no rule are fine.
    ok(EventKind::ModelCompleted, "{}");
    ok(EventKind::ModelDelta, "{}");
    ok(EventKind::ToolCompleted, r#"{"call_id":"c","name":"n"}"#);
}

#[test]
fn members_of_the_wrong_type_are_refused() {
    for (kind, json) in [
        (EventKind::TurnStarted, r#"{"turn":"1"}"#),
        (EventKind::TurnStarted, r#"{"turn":-1}"#),
        (EventKind::TurnStarted, r#"{"turn":1.5}"#),
        (EventKind::ModelCompleted, r#"{"input_tokens":-1}"#),
        (EventKind::ModelCompleted, r#"{"metadata":{}}"#),
        (
            EventKind::ModelFailed,
            r#"{"code":"c","message":"m","retryable":1}"#,
        ),
        (EventKind::RunStarted, r#"{"definition":null}"#),
    ] {
        assert_eq!(refused(kind, json), PayloadError::MemberType, "{json}");
    }
    ok(EventKind::ModelCompleted, r#"{"metadata":[{"k":"v"}]}"#);
}

#[test]
fn tokens_are_bounded_and_free_of_control_characters() {
    let at = long(MAX_EVENT_TOKEN_BYTES);
    let past = long(MAX_EVENT_TOKEN_BYTES + 1);
    ok(
        EventKind::ToolStarted,
        &format!(r#"{{"call_id":"{at}","name":"{at}"}}"#),
    );
    refused(
        EventKind::ToolStarted,
        &format!(r#"{{"call_id":"{past}","name":"n"}}"#),
    );
    refused(
        EventKind::ToolStarted,
        &format!(r#"{{"call_id":"c","name":"{past}"}}"#),
    );
    refused(EventKind::ToolStarted, r#"{"call_id":"c\n1","name":"n"}"#);
    refused(
        EventKind::ToolStarted,
        r#"{"call_id":"c\u0000","name":"n"}"#,
    );
    ok(
        EventKind::ModelStarted,
        &format!(r#"{{"turn":1,"operation_id":"{at}"}}"#),
    );
    refused(
        EventKind::ModelStarted,
        &format!(r#"{{"turn":1,"operation_id":"{past}"}}"#),
    );
    for kind in [
        EventKind::InteractionCompleted,
        EventKind::InteractionFailed,
        EventKind::InteractionCancelled,
    ] {
        ok(kind, &format!(r#"{{"id":"{at}"}}"#));
        refused(kind, &format!(r#"{{"id":"{past}"}}"#));
    }
    ok(
        EventKind::InteractionStarted,
        &format!(r#"{{"id":"i","kind":"{at}"}}"#),
    );
    refused(
        EventKind::InteractionStarted,
        &format!(r#"{{"id":"i","kind":"{past}"}}"#),
    );
    ok(
        EventKind::ModelFailed,
        &format!(r#"{{"code":"{at}","message":"m"}}"#),
    );
    refused(
        EventKind::ModelFailed,
        &format!(r#"{{"code":"{past}","message":"m"}}"#),
    );
    let at = long(MAX_EVENT_DEFINITION_BYTES);
    let past = long(MAX_EVENT_DEFINITION_BYTES + 1);
    ok(
        EventKind::RunStarted,
        &format!(r#"{{"definition":"{at}"}}"#),
    );
    refused(
        EventKind::RunStarted,
        &format!(r#"{{"definition":"{past}"}}"#),
    );
    assert!(is_event_token("a b", 3));
    assert!(!is_event_token("a\u{7f}", 3));
    assert!(!is_event_token("", 3));
}

#[test]
fn texts_are_bounded() {
    type Shape = fn(&str) -> String;
    let cases: [(EventKind, usize, Shape); 7] = [
        (EventKind::RunFailed, MAX_EVENT_STATUS_TEXT_BYTES, |t| {
            format!(r#"{{"error":"{t}"}}"#)
        }),
        (EventKind::ModelDelta, MAX_MODEL_DELTA_TEXT_BYTES, |t| {
            format!(r#"{{"text":"{t}"}}"#)
        }),
        (EventKind::ModelFailed, MAX_EVENT_DETAIL_TEXT_BYTES, |t| {
            format!(r#"{{"code":"c","message":"{t}"}}"#)
        }),
        (EventKind::ToolProgress, MAX_EVENT_DETAIL_TEXT_BYTES, |t| {
            format!(r#"{{"call_id":"c","message":"{t}"}}"#)
        }),
        (EventKind::ToolCompleted, MAX_EVENT_DETAIL_TEXT_BYTES, |t| {
            format!(r#"{{"call_id":"c","name":"n","error":"{t}"}}"#)
        }),
        (EventKind::ToolFailed, MAX_EVENT_DETAIL_TEXT_BYTES, |t| {
            format!(r#"{{"call_id":"c","name":"n","error":"{t}"}}"#)
        }),
        (
            EventKind::InteractionFailed,
            MAX_INTERACTION_ERROR_BYTES,
            |t| format!(r#"{{"id":"i","error":"{t}"}}"#),
        ),
    ];
    for (kind, bound, shape) in cases {
        ok(kind, &shape(&long(bound)));
        assert!(
            matches!(
                refused(kind, &shape(&long(bound + 1))),
                PayloadError::Rule(_)
            ),
            "{kind:?}"
        );
    }
    // Required texts are non-empty.
    refused(EventKind::RunCancelled, r#"{"error":""}"#);
    refused(EventKind::ModelFailed, r#"{"code":"c","message":""}"#);
    refused(EventKind::ToolProgress, r#"{"call_id":"c","message":""}"#);
    // A bound counts bytes, not characters.
    let wide = "é".repeat(MAX_EVENT_DETAIL_TEXT_BYTES / 2 + 1);
    refused(
        EventKind::ToolProgress,
        &format!(r#"{{"call_id":"c","message":"{wide}"}}"#),
    );
}

#[test]
fn tool_outcome_and_retry_follow_the_pairing_rule() {
    let shape = |outcome: &str, retry: &str| {
        let mut json = String::from(r#"{"call_id":"c","name":"n","error":"e""#);
        if !outcome.is_empty() {
            json.push_str(&format!(r#","outcome":"{outcome}""#));
        }
        if !retry.is_empty() {
            json.push_str(&format!(r#","retry":"{retry}""#));
        }
        json.push('}');
        json
    };
    for kind in [EventKind::ToolCompleted, EventKind::ToolFailed] {
        for (outcome, retry) in [
            ("", ""),
            ("definitive", "never"),
            ("definitive", "allowed"),
            ("uncertain", "never"),
        ] {
            ok(kind, &shape(outcome, retry));
        }
        for (outcome, retry) in [
            ("uncertain", "allowed"),
            ("definitive", ""),
            ("", "never"),
            ("success", "never"),
            ("problem", ""),
            ("definitive", "sometimes"),
        ] {
            assert!(
                matches!(refused(kind, &shape(outcome, retry)), PayloadError::Rule(_)),
                "{outcome} {retry}"
            );
        }
    }
    // An empty string is the same as an absent member.
    let p = ok(
        EventKind::ToolFailed,
        r#"{"call_id":"c","name":"n","error":"","outcome":"","retry":""}"#,
    );
    let WirePayload::ToolFailed(t) = p else {
        panic!("kind")
    };
    assert_eq!((t.outcome, t.retry), (None, None));
}

#[test]
fn errors_have_fixed_messages() {
    for error in [
        PayloadError::UnknownKind,
        PayloadError::Empty,
        PayloadError::NotEmpty,
        PayloadError::NotObject,
        PayloadError::UnknownMember,
        PayloadError::MemberType,
        PayloadError::Rule("r"),
    ] {
        assert!(!error.to_string().is_empty());
    }
    assert_eq!(PayloadError::Empty.to_string(), "event payload is required");
}
