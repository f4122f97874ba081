//! The tool occurrences' decoding rules: one case per rule in the table, and properties
//! over generated occurrences (valid ones round-trip, a single broken member is refused).

use std::mem::discriminant;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::stage::MAX_PLAN_ID_BYTES;
use crate::tool::{Capability, Effect, MAX_CALL_ID_BYTES, ReplaySafety};

fn digest(c: char) -> String {
    c.to_string().repeat(64)
}

fn sha(c: char) -> String {
    format!("sha256:{}", digest(c))
}

fn facts(effect: Effect, replay_safety: ReplaySafety, capabilities: &[Capability]) -> ToolFacts {
    ToolFacts {
        fingerprint: digest('f'),
        effect,
        replay_safety,
        capabilities: capabilities.to_vec(),
    }
}

fn started() -> ToolStarted {
    ToolStarted {
        version: ToolStartedVersion,
        call_id: "c1".into(),
        name: "read".into(),
        turn: 1,
        plan_id: Arc::from("static:x"),
        plan_fingerprint: Arc::from(sha('0')),
        plan_identity: Arc::from(sha('1')),
        workspace: Some(Arc::from(sha('2'))),
        declared: Some(Arc::new(facts(
            Effect::ReadOnly,
            ReplaySafety::Safe,
            &[Capability::FilesystemRead],
        ))),
    }
}

fn completed() -> ToolCompleted {
    ToolCompleted::new("c1", "read", ToolOutcome::Problem)
}

fn failed() -> ToolFailed {
    ToolFailed::new(
        "c1",
        "read",
        FailureCode::ToolFailed,
        Some((ExecutionState::Definitive, RetryDisposition::Allowed)),
    )
}

fn envelope_json(event: Event) -> String {
    let envelope = Envelope::new(
        crate::RunId::new("r").expect("a valid run id"),
        1,
        Timestamp::from_unix_nanos(1),
        event,
    );
    serde_json::to_string(&envelope).unwrap()
}

/// Every way in refuses `event` with an error of `expected`'s variant: its own JSON, the
/// event's JSON and the in-memory check.
fn refused_everywhere(event: &Event, expected: &OccurrenceError) -> Result<(), String> {
    let (from_json, decoded) = match event {
        Event::ToolStarted(o) => (
            ToolStarted::from_json(&serde_json::to_string(o).unwrap()).map(|_| ()),
            ToolStarted::decode(event).map(|_| ()),
        ),
        Event::ToolCompleted(o) => (
            ToolCompleted::from_json(&serde_json::to_string(o).unwrap()).map(|_| ()),
            ToolCompleted::decode(event).map(|_| ()),
        ),
        Event::ToolFailed(o) => (
            ToolFailed::from_json(&serde_json::to_string(o).unwrap()).map(|_| ()),
            ToolFailed::decode(event).map(|_| ()),
        ),
        other => return Err(format!("not an occurrence: {other:?}")),
    };
    for (way, result) in [("from_json", from_json), ("decode", decoded)] {
        match result {
            Err(error) if discriminant(&error) == discriminant(expected) => {}
            other => return Err(format!("{way}: expected {expected:?}, got {other:?}")),
        }
    }
    let json = envelope_json(event.clone());
    match serde_json::from_str::<Envelope>(&json) {
        Err(error) if error.to_string().contains(&expected.to_string()) => Ok(()),
        other => Err(format!("envelope: expected {expected}, got {other:?}")),
    }
}

fn holds_everywhere(event: &Event) -> Result<(), String> {
    let json = envelope_json(event.clone());
    let back: Envelope = serde_json::from_str(&json).map_err(|e| format!("{e}: {json}"))?;
    if back.event() != event {
        return Err(format!("round trip changed {json}"));
    }
    let own = match event {
        Event::ToolStarted(o) => ToolStarted::decode(event)
            .and_then(|_| ToolStarted::from_json(&serde_json::to_string(o).unwrap()))
            .map(|back| back == *o),
        Event::ToolCompleted(o) => ToolCompleted::decode(event)
            .and_then(|_| ToolCompleted::from_json(&serde_json::to_string(o).unwrap()))
            .map(|back| back == *o),
        Event::ToolFailed(o) => ToolFailed::decode(event)
            .and_then(|_| ToolFailed::from_json(&serde_json::to_string(o).unwrap()))
            .map(|back| back == *o),
        other => return Err(format!("not an occurrence: {other:?}")),
    };
    match own {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("the occurrence's own round trip changed {json}")),
        Err(e) => Err(format!("{e}: {json}")),
    }
}

fn with_facts(edit: impl FnOnce(&mut ToolFacts)) -> Event {
    let mut occurrence = started();
    let mut declared = (**occurrence.declared.as_ref().unwrap()).clone();
    edit(&mut declared);
    occurrence.declared = Some(Arc::new(declared));
    Event::ToolStarted(occurrence)
}

fn with_started(edit: impl FnOnce(&mut ToolStarted)) -> Event {
    let mut occurrence = started();
    edit(&mut occurrence);
    Event::ToolStarted(occurrence)
}

#[test]
fn the_fixtures_and_their_bounds_are_valid() {
    let at_bounds = with_started(|s| {
        s.call_id = "c".repeat(MAX_CALL_ID_BYTES);
        s.name = "n".repeat(MAX_CALL_ID_BYTES);
        s.plan_id = Arc::from("p".repeat(MAX_PLAN_ID_BYTES));
        s.turn = u32::MAX;
    });
    let undeclared = with_started(|s| {
        s.workspace = None;
        s.declared = None;
        s.name = "Not A Declared Tool".into();
    });
    let mutating = with_facts(|f| {
        f.effect = Effect::Mutating;
        f.replay_safety = ReplaySafety::Unsafe;
        f.capabilities = Capability::ALL.to_vec();
    });
    let unknown_outcome =
        Event::ToolFailed(ToolFailed::new("c1", "x", FailureCode::Cancelled, None));
    let uncertain = Event::ToolFailed(ToolFailed::new(
        "c1",
        "x",
        FailureCode::ToolFailed,
        Some((ExecutionState::Uncertain, RetryDisposition::Never)),
    ));
    for event in [
        Event::ToolStarted(started()),
        at_bounds,
        undeclared,
        mutating,
        Event::ToolCompleted(completed()),
        Event::ToolFailed(failed()),
        unknown_outcome,
        uncertain,
    ] {
        holds_everywhere(&event).unwrap();
    }
}

#[test]
fn each_rule_is_refused_with_its_error() {
    use OccurrenceError as E;
    let long = "c".repeat(MAX_CALL_ID_BYTES + 1);
    let rows: Vec<(&str, Event, E)> = vec![
        (
            "empty call id",
            with_started(|s| s.call_id.clear()),
            E::CallId(""),
        ),
        (
            "call id past its bound",
            with_started(|s| s.call_id = long.clone()),
            E::CallId(""),
        ),
        (
            "call id with surrounding whitespace",
            with_started(|s| s.call_id = " c1".into()),
            E::CallId(""),
        ),
        (
            "call id with a line break",
            with_started(|s| s.call_id = "c\n1".into()),
            E::CallId(""),
        ),
        ("empty name", with_started(|s| s.name.clear()), E::Name("")),
        (
            "name past its bound",
            with_started(|s| s.name = long.clone()),
            E::Name(""),
        ),
        ("turn 0", with_started(|s| s.turn = 0), E::Turn),
        (
            "empty plan id",
            with_started(|s| s.plan_id = Arc::from("")),
            E::PlanId,
        ),
        (
            "plan id past its bound",
            with_started(|s| s.plan_id = Arc::from("p".repeat(MAX_PLAN_ID_BYTES + 1))),
            E::PlanId,
        ),
        (
            "plan id with whitespace",
            with_started(|s| s.plan_id = Arc::from("static: x")),
            E::PlanId,
        ),
        (
            "short plan fingerprint",
            with_started(|s| s.plan_fingerprint = Arc::from("sha256:00")),
            E::PlanFingerprint,
        ),
        (
            "plan fingerprint without prefix",
            with_started(|s| s.plan_fingerprint = Arc::from(digest('0'))),
            E::PlanFingerprint,
        ),
        (
            "uppercase plan fingerprint",
            with_started(|s| s.plan_fingerprint = Arc::from(sha('A'))),
            E::PlanFingerprint,
        ),
        (
            "plan identity not sha256",
            with_started(|s| s.plan_identity = Arc::from("sha256:11")),
            E::PlanIdentity,
        ),
        (
            "workspace not sha256",
            with_started(|s| s.workspace = Some(Arc::from("/home/me/project"))),
            E::Workspace,
        ),
        (
            "definition fingerprint not hex",
            with_facts(|f| f.fingerprint = "f".into()),
            E::DefinitionFingerprint,
        ),
        (
            "definition fingerprint with a prefix",
            with_facts(|f| f.fingerprint = sha('f')),
            E::DefinitionFingerprint,
        ),
        (
            "read-only tool not replay-safe",
            with_facts(|f| f.replay_safety = ReplaySafety::Idempotent),
            E::ReadOnlyNotSafe {
                replay_safety: ReplaySafety::Idempotent,
            },
        ),
        (
            "mutating tool claims replay-safe",
            with_facts(|f| f.effect = Effect::Mutating),
            E::MutatingSafe,
        ),
        (
            "repeated capability",
            with_facts(|f| f.capabilities.push(Capability::FilesystemRead)),
            E::DuplicateCapability {
                capability: Capability::FilesystemRead,
            },
        ),
        (
            "read-only tool with filesystem.write",
            with_facts(|f| f.capabilities.push(Capability::FilesystemWrite)),
            E::ReadOnlyCapability {
                capability: Capability::FilesystemWrite,
            },
        ),
        (
            "capabilities out of canonical order",
            with_facts(|f| f.capabilities.insert(0, Capability::SecretsRead)),
            E::CapabilityOrder,
        ),
        (
            "completed: empty call id",
            Event::ToolCompleted(ToolCompleted::new("", "read", ToolOutcome::Success)),
            E::CallId(""),
        ),
        (
            "completed: name with a tab",
            Event::ToolCompleted(ToolCompleted::new("c1", "re\tad", ToolOutcome::Success)),
            E::Name(""),
        ),
        (
            "failed: empty call id",
            Event::ToolFailed(ToolFailed::new("", "read", FailureCode::ToolFailed, None)),
            E::CallId(""),
        ),
        (
            "failed: empty name",
            Event::ToolFailed(ToolFailed::new("c1", "", FailureCode::ToolFailed, None)),
            E::Name(""),
        ),
        (
            "failed: state without retry",
            Event::ToolFailed(ToolFailed {
                retry: None,
                ..failed()
            }),
            E::ExecutionUnpaired,
        ),
        (
            "failed: retry without state",
            Event::ToolFailed(ToolFailed {
                state: None,
                ..failed()
            }),
            E::ExecutionUnpaired,
        ),
        (
            "failed: uncertain outcome allows a retry",
            Event::ToolFailed(ToolFailed {
                state: Some(ExecutionState::Uncertain),
                ..failed()
            }),
            E::UncertainRetry,
        ),
    ];
    for (rule, event, expected) in rows {
        if let Err(why) = refused_everywhere(&event, &expected) {
            panic!("{rule}: {why}");
        }
    }
}

#[test]
fn a_decoded_event_of_another_kind_is_refused() {
    let completed = Event::ToolCompleted(completed());
    assert_eq!(
        ToolFailed::decode(&completed),
        Err(OccurrenceError::Kind {
            expected: EventKind::ToolFailed,
            found: EventKind::ToolCompleted,
        })
    );
    let turn = Event::TurnStarted { turn: 1 };
    assert!(matches!(
        ToolCompleted::decode(&turn),
        Err(OccurrenceError::Kind { .. })
    ));
    assert!(matches!(
        ToolStarted::decode(&turn),
        Err(OccurrenceError::Kind { .. })
    ));
}

fn data(event: Event) -> Value {
    let envelope = Envelope::new(
        crate::RunId::new("r").expect("a valid run id"),
        1,
        Timestamp::from_unix_nanos(1),
        event,
    );
    serde_json::to_value(&envelope).unwrap()
}

/// Both the occurrence's own decoder and the envelope's refuse `value`.
fn refused_as_malformed(value: &Value) -> Result<(), String> {
    if serde_json::from_value::<Envelope>(value.clone()).is_ok() {
        return Err(format!("the envelope decoded: {value}"));
    }
    let data = value["data"].to_string();
    let own = match value["kind"].as_str() {
        Some("tool.started") => ToolStarted::from_json(&data).map(|_| ()),
        Some("tool.completed") => ToolCompleted::from_json(&data).map(|_| ()),
        Some("tool.failed") => ToolFailed::from_json(&data).map(|_| ()),
        _ => return Err(format!("not an occurrence: {value}")),
    };
    match own {
        Err(OccurrenceError::Malformed(_)) => Ok(()),
        other => Err(format!("expected Malformed, got {other:?}: {value}")),
    }
}

#[test]
fn every_member_is_required_and_no_other_is_allowed() {
    for event in [
        Event::ToolStarted(started()),
        Event::ToolCompleted(completed()),
        Event::ToolFailed(failed()),
    ] {
        let valid = data(event);
        let members: Vec<String> = valid["data"].as_object().unwrap().keys().cloned().collect();
        for member in &members {
            let mut missing = valid.clone();
            missing["data"].as_object_mut().unwrap().remove(member);
            refused_as_malformed(&missing).unwrap_or_else(|why| panic!("missing {member}: {why}"));
        }
        for (extra, value) in [
            ("arguments", json!({"path": "/etc"})),
            ("input_schema", json!({})),
            ("description", json!("Reads.")),
            ("error", json!("disk full at /home/me")),
            ("content", json!("file body")),
        ] {
            let mut more = valid.clone();
            more["data"][extra] = value;
            refused_as_malformed(&more).unwrap_or_else(|why| panic!("extra {extra}: {why}"));
        }
        let mut version = valid.clone();
        version["data"]["version"] = json!("agent-core.tool-started/v0");
        refused_as_malformed(&version).unwrap();
    }
    // Absent together is absent too: unknown execution facts are written as two nulls.
    let mut neither = data(Event::ToolFailed(ToolFailed::new(
        "c1",
        "read",
        FailureCode::Cancelled,
        None,
    )));
    let object = neither["data"].as_object_mut().unwrap();
    object.remove("state");
    object.remove("retry");
    refused_as_malformed(&neither).unwrap();
    // A null workspace and a null `declared` are values; absent they are refused (above).
    let undeclared = data(Event::ToolStarted(ToolStarted {
        workspace: None,
        declared: None,
        ..started()
    }));
    assert!(serde_json::from_value::<Envelope>(undeclared).is_ok());
    // The declared facts are strict as well, and a terminal version is not a started one.
    let mut facts = data(Event::ToolStarted(started()));
    facts["data"]["declared"]["arguments"] = json!({});
    refused_as_malformed(&facts).unwrap();
    let mut terminal = data(Event::ToolStarted(started()));
    terminal["data"]["version"] = json!(TOOL_TERMINAL_VERSION);
    refused_as_malformed(&terminal).unwrap();
    let mut repeated = data(Event::ToolCompleted(completed()))["data"].to_string();
    repeated.insert_str(1, r#""name":"write","#);
    assert!(matches!(
        ToolCompleted::from_json(&repeated),
        Err(OccurrenceError::Malformed(_))
    ));
    let trailing = format!("{}{{}}", data(Event::ToolCompleted(completed()))["data"]);
    assert!(matches!(
        ToolCompleted::from_json(&trailing),
        Err(OccurrenceError::Malformed(_))
    ));
}

// Generated occurrences.

/// A valid call id or tool name: no surrounding whitespace, no NUL, CR, LF or TAB.
fn token() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9]([a-zA-Z0-9 ._:/é-]{0,100}[a-zA-Z0-9])?"
}

fn hex() -> impl Strategy<Value = String> {
    "[0-9a-f]{64}"
}

fn valid_facts() -> impl Strategy<Value = ToolFacts> {
    let read_only = (
        hex(),
        proptest::sample::subsequence(
            vec![
                Capability::EnvironmentRead,
                Capability::FilesystemRead,
                Capability::SecretsRead,
            ],
            0..=3,
        ),
    )
        .prop_map(|(fingerprint, capabilities)| ToolFacts {
            fingerprint,
            effect: Effect::ReadOnly,
            replay_safety: ReplaySafety::Safe,
            capabilities,
        });
    let mutating = (
        hex(),
        prop_oneof![Just(ReplaySafety::Idempotent), Just(ReplaySafety::Unsafe)],
        proptest::sample::subsequence(Capability::ALL.to_vec(), 0..=Capability::ALL.len()),
    )
        .prop_map(|(fingerprint, replay_safety, capabilities)| ToolFacts {
            fingerprint,
            effect: Effect::Mutating,
            replay_safety,
            capabilities,
        });
    prop_oneof![read_only, mutating]
}

fn valid_started() -> impl Strategy<Value = ToolStarted> {
    (
        (token(), token(), 1u32..),
        ("[!-~]{1,256}", hex(), hex()),
        proptest::option::of(hex()),
        proptest::option::of(valid_facts()),
    )
        .prop_map(
            |((call_id, name, turn), (plan_id, plan, identity), workspace, declared)| ToolStarted {
                version: ToolStartedVersion,
                call_id,
                name,
                turn,
                plan_id: Arc::from(plan_id),
                plan_fingerprint: Arc::from(format!("sha256:{plan}")),
                plan_identity: Arc::from(format!("sha256:{identity}")),
                workspace: workspace.map(|w| Arc::from(format!("sha256:{w}"))),
                declared: declared.map(Arc::new),
            },
        )
}

fn execution() -> impl Strategy<Value = Option<(ExecutionState, RetryDisposition)>> {
    prop_oneof![
        Just(None),
        Just(Some((ExecutionState::Definitive, RetryDisposition::Never))),
        Just(Some((
            ExecutionState::Definitive,
            RetryDisposition::Allowed
        ))),
        Just(Some((ExecutionState::Uncertain, RetryDisposition::Never))),
    ]
}

fn failure_code() -> impl Strategy<Value = FailureCode> {
    proptest::sample::select(vec![
        FailureCode::Cancelled,
        FailureCode::ToolFailed,
        FailureCode::UndeclaredTool,
        FailureCode::Panicked,
        FailureCode::EventLogExhausted,
    ])
}

fn valid_occurrence() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => valid_started().prop_map(Event::ToolStarted),
        1 => (token(), token(), prop_oneof![Just(ToolOutcome::Success), Just(ToolOutcome::Problem)])
            .prop_map(|(c, n, o)| Event::ToolCompleted(ToolCompleted::new(c, n, o))),
        1 => (token(), token(), failure_code(), execution())
            .prop_map(|(c, n, code, e)| Event::ToolFailed(ToolFailed::new(c, n, code, e))),
    ]
}

/// A call id or tool name that breaks the rule.
fn bad_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        token().prop_map(|t| format!(" {t}")),
        token().prop_map(|t| format!("{t}\t")),
        (
            token(),
            proptest::sample::select(vec!['\0', '\r', '\n', '\t'])
        )
            .prop_map(|(t, c)| format!("{t}{c}{t}")),
        (MAX_CALL_ID_BYTES + 1..MAX_CALL_ID_BYTES + 40).prop_map(|n| "c".repeat(n)),
    ]
}

/// Not `sha256:` and 64 lowercase hex digits.
fn bad_sha256() -> impl Strategy<Value = String> {
    prop_oneof![
        hex(),
        "[0-9a-f]{0,63}".prop_map(|h| format!("sha256:{h}")),
        "[0-9a-f]{65,80}".prop_map(|h| format!("sha256:{h}")),
        (hex(), 0usize..64, "[A-Zg-z:/ ]").prop_map(|(mut h, at, c)| {
            h.replace_range(at..=at, &c);
            format!("sha256:{h}")
        }),
        hex().prop_map(|h| format!("sha512:{h}")),
        hex().prop_map(|h| format!("SHA256:{h}")),
    ]
}

/// Not 64 lowercase hex digits.
fn bad_hex() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-f]{0,63}",
        "[0-9a-f]{65,80}",
        hex().prop_map(|h| format!("sha256:{h}")),
        (hex(), 0usize..64, "[A-Zg-z:/ ]").prop_map(|(mut h, at, c)| {
            h.replace_range(at..=at, &c);
            h
        }),
    ]
}

fn bad_plan_id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        ("[!-~]{0,20}", "[ \t\n\u{7f}\u{a0}]", "[!-~]{0,20}")
            .prop_map(|(a, c, b)| format!("{a}{c}{b}")),
        (MAX_PLAN_ID_BYTES + 1..MAX_PLAN_ID_BYTES + 40).prop_map(|n| "p".repeat(n)),
    ]
}

/// One member of a valid occurrence made invalid, and the error that must report it.
#[derive(Debug, Clone)]
enum Mutation {
    CallId(String),
    Name(String),
    Turn,
    PlanId(String),
    PlanFingerprint(String),
    PlanIdentity(String),
    Workspace(String),
    DefinitionFingerprint(String),
    ReadOnlyReplay(ReplaySafety),
    MutatingSafe,
    Duplicate(prop::sample::Index),
    ReadOnlyWrite(Capability),
    Reversed,
    Unpaired(bool),
    UncertainRetry,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        bad_token().prop_map(Mutation::CallId),
        bad_token().prop_map(Mutation::Name),
        Just(Mutation::Turn),
        bad_plan_id().prop_map(Mutation::PlanId),
        bad_sha256().prop_map(Mutation::PlanFingerprint),
        bad_sha256().prop_map(Mutation::PlanIdentity),
        bad_sha256().prop_map(Mutation::Workspace),
        bad_hex().prop_map(Mutation::DefinitionFingerprint),
        prop_oneof![Just(ReplaySafety::Idempotent), Just(ReplaySafety::Unsafe)]
            .prop_map(Mutation::ReadOnlyReplay),
        Just(Mutation::MutatingSafe),
        any::<prop::sample::Index>().prop_map(Mutation::Duplicate),
        proptest::sample::select(vec![
            Capability::EnvironmentWrite,
            Capability::FilesystemWrite,
            Capability::NetworkAccess,
            Capability::ProcessExecute,
        ])
        .prop_map(Mutation::ReadOnlyWrite),
        Just(Mutation::Reversed),
        any::<bool>().prop_map(Mutation::Unpaired),
        Just(Mutation::UncertainRetry),
    ]
}

/// Applies `mutation` to `event` where it names a member `event` has (the facts-level
/// ones give an undeclared start declared facts first), and answers the error expected.
fn apply(event: &mut Event, mutation: Mutation) -> Option<OccurrenceError> {
    use OccurrenceError as E;
    fn declared(started: &mut ToolStarted, effect: Effect) -> &mut ToolFacts {
        let keep = started
            .declared
            .as_deref()
            .filter(|f| f.effect == effect)
            .cloned();
        let facts = keep.unwrap_or_else(|| match effect {
            Effect::ReadOnly => facts(effect, ReplaySafety::Safe, &[Capability::FilesystemRead]),
            Effect::Mutating => facts(
                effect,
                ReplaySafety::Unsafe,
                &[Capability::FilesystemRead, Capability::FilesystemWrite],
            ),
        });
        Arc::make_mut(started.declared.insert(Arc::new(facts)))
    }
    let ids = match &mut *event {
        Event::ToolStarted(o) => Some((&mut o.call_id, &mut o.name)),
        Event::ToolCompleted(o) => Some((&mut o.call_id, &mut o.name)),
        Event::ToolFailed(o) => Some((&mut o.call_id, &mut o.name)),
        _ => None,
    };
    let mutation = match (mutation, ids) {
        (Mutation::CallId(bad), Some((call_id, _))) => {
            *call_id = bad;
            return Some(E::CallId(""));
        }
        (Mutation::Name(bad), Some((_, name))) => {
            *name = bad;
            return Some(E::Name(""));
        }
        (mutation, _) => mutation,
    };
    match (mutation, event) {
        (Mutation::Turn, Event::ToolStarted(s)) => {
            s.turn = 0;
            Some(E::Turn)
        }
        (Mutation::PlanId(bad), Event::ToolStarted(s)) => {
            s.plan_id = Arc::from(bad);
            Some(E::PlanId)
        }
        (Mutation::PlanFingerprint(bad), Event::ToolStarted(s)) => {
            s.plan_fingerprint = Arc::from(bad);
            Some(E::PlanFingerprint)
        }
        (Mutation::PlanIdentity(bad), Event::ToolStarted(s)) => {
            s.plan_identity = Arc::from(bad);
            Some(E::PlanIdentity)
        }
        (Mutation::Workspace(bad), Event::ToolStarted(s)) => {
            s.workspace = Some(Arc::from(bad));
            Some(E::Workspace)
        }
        (Mutation::DefinitionFingerprint(bad), Event::ToolStarted(s)) => {
            let effect = s.declared.as_ref().map_or(Effect::ReadOnly, |f| f.effect);
            declared(s, effect).fingerprint = bad;
            Some(E::DefinitionFingerprint)
        }
        (Mutation::ReadOnlyReplay(replay_safety), Event::ToolStarted(s)) => {
            declared(s, Effect::ReadOnly).replay_safety = replay_safety;
            Some(E::ReadOnlyNotSafe { replay_safety })
        }
        (Mutation::MutatingSafe, Event::ToolStarted(s)) => {
            declared(s, Effect::Mutating).replay_safety = ReplaySafety::Safe;
            Some(E::MutatingSafe)
        }
        (Mutation::Duplicate(at), Event::ToolStarted(s)) => {
            let effect = s.declared.as_ref().map_or(Effect::ReadOnly, |f| f.effect);
            let facts = declared(s, effect);
            if facts.capabilities.is_empty() {
                facts.capabilities.push(Capability::SecretsRead);
            }
            let capability = *at.get(&facts.capabilities);
            let position = facts.capabilities.iter().position(|c| *c == capability)?;
            facts.capabilities.insert(position + 1, capability);
            Some(E::DuplicateCapability { capability })
        }
        (Mutation::ReadOnlyWrite(capability), Event::ToolStarted(s)) => {
            let facts = declared(s, Effect::ReadOnly);
            facts.capabilities.push(capability);
            facts.capabilities.sort();
            Some(E::ReadOnlyCapability { capability })
        }
        (Mutation::Reversed, Event::ToolStarted(s)) => {
            let effect = s.declared.as_ref().map_or(Effect::ReadOnly, |f| f.effect);
            let facts = declared(s, effect);
            if facts.capabilities.len() < 2 {
                facts.capabilities = vec![Capability::EnvironmentRead, Capability::SecretsRead];
            }
            facts.capabilities.reverse();
            Some(E::CapabilityOrder)
        }
        (Mutation::Unpaired(keep_state), Event::ToolFailed(f)) => {
            if keep_state {
                f.state = Some(f.state.unwrap_or(ExecutionState::Definitive));
                f.retry = None;
            } else {
                f.state = None;
                f.retry = Some(f.retry.unwrap_or(RetryDisposition::Never));
            }
            Some(E::ExecutionUnpaired)
        }
        (Mutation::UncertainRetry, Event::ToolFailed(f)) => {
            f.state = Some(ExecutionState::Uncertain);
            f.retry = Some(RetryDisposition::Allowed);
            Some(E::UncertainRetry)
        }
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_occurrences_round_trip(event in valid_occurrence()) {
        prop_assert_eq!(holds_everywhere(&event), Ok(()));
    }

    #[test]
    fn one_invalid_member_is_refused(mut event in valid_occurrence(), mutation in mutation()) {
        let Some(expected) = apply(&mut event, mutation) else {
            return Ok(());
        };
        prop_assert_eq!(refused_everywhere(&event, &expected), Ok(()));
    }

    #[test]
    fn a_missing_member_is_refused(event in valid_occurrence(), at in any::<prop::sample::Index>()) {
        let mut value = data(event);
        let members: Vec<String> = value["data"].as_object().unwrap().keys().cloned().collect();
        let member = at.get(&members).clone();
        value["data"].as_object_mut().unwrap().remove(&member);
        prop_assert_eq!(refused_as_malformed(&value), Ok(()));
    }
}
