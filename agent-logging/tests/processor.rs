//! The projection's contract (docs/logging.md, "Records"), against a capturing subscriber.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agent_core::event::{
    Event, EventKind, FailureCode, Observer, ToolCompleted, ToolFailed, ToolOutcome, ToolStarted,
    ToolStartedVersion, ToolTerminalVersion,
};
use agent_core::tool::{
    Capability, Definition, Effect, ExecutionState, ReplaySafety, RetryDisposition,
};
use agent_logging::{
    Config, CorrelationKey, DEPENDENCY_DEGRADED, DEPENDENCY_UNAVAILABLE, EventLogger, LogHealth,
    Pseudonyms,
};
use support::{Behaviour, Gate, Record, capture, envelope, runtime};
use tracing::Level;

/// Generous: only reached if the drain is stuck, which fails the test.
const DRAIN: Duration = Duration::from_secs(30);

fn key() -> CorrelationKey {
    CorrelationKey::new([9; 32]).unwrap()
}

fn config() -> Config {
    Config::new().with_correlation_key(key())
}

fn started(call_id: &str, declared: bool) -> ToolStarted {
    let facts = Definition::builder("write", "Writes a file.")
        .effect(Effect::Mutating)
        .replay_safety(ReplaySafety::Unsafe)
        .capabilities([Capability::FilesystemWrite, Capability::FilesystemRead])
        .build()
        .unwrap()
        .facts();
    ToolStarted {
        version: ToolStartedVersion,
        call_id: call_id.to_owned(),
        name: "write".to_owned(),
        turn: 1,
        plan_id: Arc::from("static:plan"),
        plan_fingerprint: Arc::from("sha256:ab12"),
        plan_identity: Arc::from("sha256:cd34"),
        workspace: None,
        declared: declared.then(|| Arc::new(facts)),
    }
}

/// Starts a logger under `dispatch`, publishes `events` as sequences 1.. of run `run-1`,
/// closes it and returns the logger.
fn project(dispatch: &tracing::Dispatch, config: Config, events: Vec<Event>) -> EventLogger {
    let _scope = tracing::dispatcher::set_default(dispatch);
    let logger = EventLogger::start(config).unwrap();
    runtime().block_on(async {
        for (i, event) in events.into_iter().enumerate() {
            logger
                .publish(&envelope("run-1", i as u64 + 1, event))
                .await
                .expect("publishing never fails");
        }
        logger.close(DRAIN).await.expect("drained");
    });
    logger
}

fn named<'a>(records: &'a [Record], name: &str) -> Vec<&'a Record> {
    records.iter().filter(|r| r.name == name).collect()
}

#[test]
fn mailbox_filters_high_volume_kinds_before_enqueue() {
    let (dispatch, records) = capture(Behaviour::Record);
    let mut events = Vec::new();
    for _ in 0..100 {
        events.push(Event::ModelDelta {
            text: "secret answer".into(),
        });
        events.push(Event::ToolProgress {
            call_id: "c1".into(),
            message: "secret progress".into(),
        });
    }
    // A mailbox of one would overflow at once if any of them were enqueued.
    let logger = project(
        &dispatch,
        config().with_mailbox_capacity(1).unwrap(),
        events.clone(),
    );
    let snapshot = logger.snapshot();
    assert_eq!(
        (snapshot.filtered, snapshot.processed, snapshot.dropped),
        (200, 0, 0)
    );
    assert!(records.lock().unwrap().is_empty());

    // IncludeProgress lets progress through (at TRACE, without its text); deltas never.
    let (dispatch, records) = capture(Behaviour::Record);
    let logger = project(&dispatch, config().with_progress(true), events);
    let snapshot = logger.snapshot();
    assert_eq!((snapshot.filtered, snapshot.processed), (100, 100));
    let records = records.lock().unwrap();
    assert_eq!(records.len(), 100);
    for record in records.iter() {
        assert_eq!(
            (record.name.as_str(), record.level),
            ("agent.tool.progress", Level::TRACE)
        );
        assert_eq!(record.extra_fields(), ["tool_call_correlation"]);
        assert!(!record.fields.values().any(|v| v.contains("secret")));
    }
}

#[test]
fn processor_emits_safe_structured_lifecycle_and_tool_records() {
    let (dispatch, records) = capture(Behaviour::Record);
    let events = vec![
        Event::RunStarted {
            agent: Arc::from("demo"),
        },
        Event::TurnStarted { turn: 1 },
        Event::ModelStarted { turn: 1 },
        Event::ModelCompleted {
            input_tokens: 10,
            output_tokens: 5,
        },
        Event::ToolStarted(started("c1", true)),
        Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Success)),
        Event::TurnCompleted { turn: 1 },
        Event::RunCompleted,
    ];
    let logger = project(&dispatch, config(), events);
    let snapshot = logger.snapshot();
    assert_eq!(
        (
            snapshot.processed,
            snapshot.handled,
            snapshot.dropped,
            snapshot.closed
        ),
        (8, 8, 0, true)
    );
    let records = records.lock().unwrap();
    let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "agent.run.started",
            "agent.turn.started",
            "agent.model.started",
            "agent.model.completed",
            "agent.tool.started",
            "agent.tool.completed",
            "agent.turn.completed",
            "agent.run.completed",
        ]
    );
    let pseudonyms = Pseudonyms::new(key());
    let run = pseudonyms.run("run-1");
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.field("run_correlation"), Some(run.as_str()));
        assert_eq!(record.field("sequence"), Some((i + 1).to_string().as_str()));
        assert_eq!(
            record.field("at_unix_nanos"),
            Some((1_001 + i).to_string().as_str())
        );
    }
    assert_eq!(records[0].level, Level::INFO);
    assert_eq!(records[0].field("message"), Some("run started"));
    assert!(records[0].extra_fields().is_empty(), "{:?}", records[0]);
    assert_eq!(records[3].field("input_tokens"), Some("10"));
    let tool = &records[4];
    assert_eq!(tool.level, Level::DEBUG);
    assert_eq!(
        tool.extra_fields(),
        [
            "capabilities",
            "declared",
            "effect",
            "executable",
            "replay_safety",
            "tool_call_correlation",
            "turn"
        ]
    );
    let call = pseudonyms.call("run-1", "c1");
    assert_eq!(tool.field("tool_call_correlation"), Some(call.as_str()));
    assert_eq!(
        tool.field("capabilities"),
        Some("filesystem.read,filesystem.write")
    );
    assert_eq!(tool.field("effect"), Some("mutating"));
    assert_eq!(tool.field("replay_safety"), Some("unsafe"));
    assert_eq!(tool.field("declared"), Some("true"));
    assert_eq!(tool.field("executable"), Some("true"));
    assert_eq!(records[5].field("outcome"), Some("success"));
    assert_eq!(records[7].level, Level::INFO);
    // Neither the run id, the call id nor the tool's name reaches a record.
    for record in records.iter() {
        for value in record.fields.values() {
            assert!(
                !value.contains("run-1") && value != "c1" && !value.contains("write\""),
                "{record:?}"
            );
        }
    }
}

#[test]
fn an_undeclared_tool_logs_empty_facts() {
    let (dispatch, records) = capture(Behaviour::Record);
    project(
        &dispatch,
        config(),
        vec![Event::ToolStarted(started("c1", false))],
    );
    let records = records.lock().unwrap();
    assert_eq!(records[0].name, "agent.tool.started");
    assert_eq!(records[0].field("declared"), Some("false"));
    assert_eq!(records[0].field("executable"), Some("false"));
    assert_eq!(records[0].field("effect"), Some(""));
    assert_eq!(records[0].field("capabilities"), Some(""));
}

#[test]
fn tool_failure_emits_only_typed_execution_metadata() {
    let (dispatch, records) = capture(Behaviour::Record);
    let events = vec![
        Event::ToolFailed(ToolFailed::new(
            "c1",
            "send",
            FailureCode::ToolFailed,
            Some((ExecutionState::Uncertain, RetryDisposition::Never)),
        )),
        Event::ToolFailed(ToolFailed::new("c2", "send", FailureCode::Cancelled, None)),
    ];
    project(&dispatch, config(), events);
    let records = records.lock().unwrap();
    assert_eq!(records.len(), 2);
    let with = &records[0];
    assert_eq!(
        (with.name.as_str(), with.level),
        ("agent.tool.failed", Level::ERROR)
    );
    assert_eq!(with.field("message"), Some("tool failed"));
    assert_eq!(
        with.extra_fields(),
        [
            "execution_state",
            "failure_code",
            "retry_disposition",
            "tool_call_correlation"
        ]
    );
    assert_eq!(with.field("execution_state"), Some("uncertain"));
    assert_eq!(with.field("retry_disposition"), Some("never"));
    assert_eq!(with.field("failure_code"), Some("tool_failed"));
    let without = &records[1];
    assert_eq!(
        without.extra_fields(),
        ["failure_code", "tool_call_correlation"]
    );
    assert_eq!(without.field("failure_code"), Some("cancelled"));
}

#[test]
fn processor_never_reads_generic_payloads_and_warns_on_malformed_typed_occurrence() {
    let (dispatch, records) = capture(Behaviour::Record);
    let mut zero_turn = started("c1", true);
    zero_turn.turn = 0;
    let mut bad_fingerprint = started("c2", true);
    bad_fingerprint.plan_fingerprint = Arc::from("md5:zz");
    let unsafe_retry = ToolFailed {
        version: ToolTerminalVersion,
        call_id: "c3".into(),
        name: "send".into(),
        code: FailureCode::ToolFailed,
        state: Some(ExecutionState::Uncertain),
        retry: Some(RetryDisposition::Allowed),
    };
    let half_pair = ToolFailed {
        state: Some(ExecutionState::Definitive),
        retry: None,
        ..unsafe_retry.clone()
    };
    let events = vec![
        Event::ToolStarted(zero_turn),
        Event::ToolStarted(bad_fingerprint),
        Event::ToolFailed(unsafe_retry),
        Event::ToolFailed(half_pair),
        Event::ToolCompleted(ToolCompleted::new("", "read", ToolOutcome::Problem)),
        Event::ModelFailed {
            problem: "secret-provider-text".into(),
            retryable: true,
            before_stream: false,
        },
        Event::InteractionStarted {
            id: "secret-interaction".into(),
            kind: "secret-kind".into(),
        },
        Event::RunFailed {
            code: FailureCode::ModelFailed,
        },
    ];
    let logger = project(&dispatch, config(), events);
    let snapshot = logger.snapshot();
    assert_eq!(
        (
            snapshot.decode_failures,
            snapshot.processed,
            snapshot.handled
        ),
        (5, 8, 3)
    );
    let records = records.lock().unwrap();
    let failures = named(&records, "agent.event_decode_failed");
    assert_eq!(failures.len(), 5);
    let kinds: Vec<_> = failures.iter().map(|r| r.field("event_kind")).collect();
    assert_eq!(
        kinds,
        [
            Some("tool.started"),
            Some("tool.started"),
            Some("tool.failed"),
            Some("tool.failed"),
            Some("tool.completed")
        ]
    );
    for failure in &failures {
        assert_eq!(failure.level, Level::WARN);
        let mut keys: Vec<&str> = failure.fields.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["event_kind", "message", "run_correlation", "sequence"]
        );
    }
    assert_eq!(failures[2].field("sequence"), Some("3"));
    let model = named(&records, "agent.model.failed");
    assert_eq!(model[0].extra_fields(), ["before_stream", "retryable"]);
    assert_eq!(
        named(&records, "agent.interaction.started")[0]
            .extra_fields()
            .len(),
        0
    );
    for record in records.iter() {
        assert!(
            !record.fields.values().any(|v| v.contains("secret")),
            "{record:?}"
        );
    }
    assert_eq!(
        named(&records, "agent.run.failed")[0].field("failure_code"),
        Some("model_failed")
    );
}

#[test]
fn overflow_is_accounted_separately_and_reported() {
    let gate = Gate::default();
    let (dispatch, records) = capture(Behaviour::Block(gate.clone()));
    let _scope = tracing::dispatcher::set_default(&dispatch);
    let logger = EventLogger::start(config().with_mailbox_capacity(2).unwrap()).unwrap();
    let rt = runtime();
    rt.block_on(async {
        logger
            .publish(&envelope("run-1", 1, Event::TurnStarted { turn: 1 }))
            .await
            .unwrap();
        // The consumer holds envelope 1 at the blocked sink: the mailbox is empty.
        gate.wait_for_waiting(1);
        for sequence in 2..=6 {
            logger
                .publish(&envelope(
                    "run-1",
                    sequence,
                    Event::ModelStarted { turn: 1 },
                ))
                .await
                .unwrap();
        }
        // A filtered kind is not an overflow.
        logger
            .publish(&envelope(
                "run-1",
                7,
                Event::ModelDelta { text: "x".into() },
            ))
            .await
            .unwrap();
        let snapshot = logger.snapshot();
        assert_eq!((snapshot.dropped, snapshot.filtered), (3, 1));
        assert_eq!(
            logger.health(),
            LogHealth::Healthy,
            "readiness impact is off"
        );
        gate.open();
        logger.close(DRAIN).await.unwrap();
    });
    let snapshot = logger.snapshot();
    assert_eq!(
        (snapshot.processed, snapshot.handled, snapshot.dropped),
        (3, 3, 3)
    );
    let records = records.lock().unwrap();
    let reports = named(&records, "agent.events_dropped");
    assert_eq!(reports.len(), 1, "{records:?}");
    assert_eq!(reports[0].level, Level::WARN);
    assert_eq!(reports[0].field("dropped_count"), Some("3"));
    assert_eq!(reports[0].field("dropped_total"), Some("3"));
    let sequences: Vec<_> = records.iter().filter_map(|r| r.field("sequence")).collect();
    assert_eq!(
        sequences,
        ["1", "2", "3"],
        "the incoming envelopes were dropped"
    );
}

#[test]
fn logger_failures_and_panics_remain_diagnostic_only() {
    let (dispatch, records) = capture(Behaviour::PanicOn("agent.run.started"));
    let events = vec![
        Event::RunStarted {
            agent: Arc::from("demo"),
        },
        Event::TurnStarted { turn: 1 },
        Event::RunCompleted,
    ];
    let logger = project(&dispatch, config().with_readiness_impact(true), events);
    let snapshot = logger.snapshot();
    assert_eq!(
        (snapshot.processed, snapshot.handled, snapshot.log_failures),
        (3, 2, 1)
    );
    let names: Vec<String> = records
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(names, ["agent.turn.started", "agent.run.completed"]);
    // Closed after a log failure: the sink is not trustworthy.
    assert_eq!(logger.health(), LogHealth::Unavailable);
}

#[test]
fn blocked_sink_makes_cancellation_honest_and_can_finish_later() {
    let gate = Gate::default();
    let (dispatch, records) = capture(Behaviour::Block(gate.clone()));
    let _scope = tracing::dispatcher::set_default(&dispatch);
    let logger = EventLogger::start(config()).unwrap();
    runtime().block_on(async {
        logger
            .publish(&envelope("run-1", 1, Event::RunCompleted))
            .await
            .unwrap();
        gate.wait_for_waiting(1);
        // The sink is blocked until the gate opens, so this deadline passes.
        assert_eq!(
            logger.close(Duration::from_millis(20)).await,
            Err(agent_logging::CloseError::DeadlineExceeded)
        );
        assert!(!logger.snapshot().closed);
        // Closing twice is fine; publishing after close is a counted drop.
        logger
            .publish(&envelope("run-1", 2, Event::RunCompleted))
            .await
            .unwrap();
        assert_eq!(logger.snapshot().dropped, 1);
        gate.open();
        logger.close(DRAIN).await.expect("the drain finishes later");
    });
    let snapshot = logger.snapshot();
    assert!(snapshot.closed);
    assert_eq!(snapshot.handled, 1);
    let records = records.lock().unwrap();
    assert_eq!(named(&records, "agent.run.completed").len(), 1);
    // The drop after close is reported at the end of the drain.
    assert_eq!(named(&records, "agent.events_dropped").len(), 1);
}

#[test]
fn pseudonyms_are_stable_within_key_and_isolated_across_keys() {
    let run = |key: CorrelationKey| {
        let (dispatch, records) = capture(Behaviour::Record);
        let config = Config::new().with_correlation_key(key);
        project(
            &dispatch,
            config,
            vec![
                Event::RunCompleted,
                Event::ToolCompleted(ToolCompleted::new("c1", "read", ToolOutcome::Success)),
            ],
        );
        let records = records.lock().unwrap();
        (
            records[0].field("run_correlation").unwrap().to_owned(),
            records[1].field("run_correlation").unwrap().to_owned(),
            records[1]
                .field("tool_call_correlation")
                .unwrap()
                .to_owned(),
        )
    };
    let a = run(CorrelationKey::new([1; 32]).unwrap());
    let again = run(CorrelationKey::new([1; 32]).unwrap());
    let b = run(CorrelationKey::new([2; 32]).unwrap());
    assert_eq!(a, again);
    assert_eq!(a.0, a.1);
    assert_ne!(a.0, b.0);
    assert_ne!(a.2, b.2);
    assert_ne!(a.0, a.2);
}

#[test]
fn health_is_opt_in_and_uses_fixed_reasons() {
    assert_eq!(LogHealth::of(None, false), LogHealth::Healthy);
    assert_eq!(LogHealth::of(None, true), LogHealth::Unavailable);
    assert_eq!(LogHealth::Healthy.reason(), None);
    assert_eq!(LogHealth::Degraded.reason(), Some(DEPENDENCY_DEGRADED));
    assert_eq!(
        LogHealth::Unavailable.reason(),
        Some(DEPENDENCY_UNAVAILABLE)
    );
    assert_eq!(DEPENDENCY_DEGRADED, "dependency_degraded");
    assert_eq!(DEPENDENCY_UNAVAILABLE, "dependency_unavailable");

    let malformed = ToolFailed {
        version: ToolTerminalVersion,
        call_id: "c".into(),
        name: "n".into(),
        code: FailureCode::ToolFailed,
        state: None,
        retry: Some(RetryDisposition::Never),
    };
    for (readiness, expected) in [(false, LogHealth::Healthy), (true, LogHealth::Degraded)] {
        let (dispatch, _records) = capture(Behaviour::Record);
        let logger = project(
            &dispatch,
            config().with_readiness_impact(readiness),
            vec![Event::ToolFailed(malformed.clone())],
        );
        assert_eq!(logger.snapshot().decode_failures, 1);
        assert_eq!(logger.health(), expected);
        assert_eq!(LogHealth::of(Some(&logger), readiness), expected);
    }
    let (dispatch, _records) = capture(Behaviour::Record);
    let healthy = project(
        &dispatch,
        config().with_readiness_impact(true),
        vec![Event::RunCompleted],
    );
    assert_eq!(healthy.health(), LogHealth::Healthy);
}

/// One event of every kind, in the kernel's order.
fn every_kind() -> Vec<Event> {
    vec![
        Event::RunStarted {
            agent: Arc::from("a"),
        },
        Event::RunCompleted,
        Event::RunFailed {
            code: FailureCode::ToolFailed,
        },
        Event::RunCancelled,
        Event::TurnStarted { turn: 1 },
        Event::TurnCompleted { turn: 1 },
        Event::TurnFailed {
            turn: 1,
            code: FailureCode::ModelFailed,
        },
        Event::ModelStarted { turn: 1 },
        Event::ModelDelta { text: "hi".into() },
        Event::ModelCompleted {
            input_tokens: 1,
            output_tokens: 2,
        },
        Event::ModelFailed {
            problem: "overloaded".into(),
            retryable: false,
            before_stream: true,
        },
        Event::ToolStarted(started("c1", true)),
        Event::ToolProgress {
            call_id: "c1".into(),
            message: "half".into(),
        },
        Event::ToolCompleted(ToolCompleted::new("c1", "write", ToolOutcome::Success)),
        Event::ToolFailed(ToolFailed::new(
            "c1",
            "write",
            FailureCode::ToolFailed,
            None,
        )),
        Event::InteractionStarted {
            id: "i".into(),
            kind: "approval".into(),
        },
        Event::InteractionCompleted { id: "i".into() },
        Event::InteractionFailed { id: "i".into() },
        Event::InteractionCancelled { id: "i".into() },
    ]
}

/// A cancelled run is an expected outcome (issue 33): none of its records is at WARN or
/// above; its failure records say `cancelled` at INFO, correlated to the run.
#[test]
fn a_cancelled_run_logs_nothing_at_error() {
    let events = vec![
        Event::RunStarted {
            agent: Arc::from("a"),
        },
        Event::TurnStarted { turn: 1 },
        Event::ModelStarted { turn: 1 },
        Event::ModelFailed {
            problem: "cancelled".into(),
            retryable: false,
            before_stream: false,
        },
        Event::ToolFailed(ToolFailed::new("c1", "send", FailureCode::Cancelled, None)),
        Event::TurnFailed {
            turn: 1,
            code: FailureCode::Cancelled,
        },
        Event::RunCancelled,
    ];
    let (dispatch, records) = capture(Behaviour::Record);
    project(&dispatch, config(), events);
    let records = records.lock().unwrap();
    let levels: Vec<(&str, Level)> = records.iter().map(|r| (r.name.as_str(), r.level)).collect();
    assert_eq!(
        levels,
        [
            ("agent.run.started", Level::INFO),
            ("agent.turn.started", Level::DEBUG),
            ("agent.model.started", Level::DEBUG),
            ("agent.model.failed", Level::INFO),
            ("agent.tool.failed", Level::INFO),
            ("agent.turn.failed", Level::INFO),
            ("agent.run.cancelled", Level::INFO),
        ]
    );
    let run = Pseudonyms::new(key()).run("run-1");
    for record in records.iter() {
        assert_eq!(
            record.field("run_correlation"),
            Some(run.as_str()),
            "{record:?}"
        );
    }
    assert_eq!(
        named(&records, "agent.turn.failed")[0].field("failure_code"),
        Some("cancelled")
    );
}

/// A model operation that fails is the provider's answer (a rejected key, a rate limit),
/// not our bug: `agent.model.failed` says it once at WARN, and the turn and run that failed
/// because of it repeat it at INFO. Nothing is at ERROR.
#[test]
fn a_model_failure_logs_once_at_warn_and_nothing_at_error() {
    let events = vec![
        Event::RunStarted {
            agent: Arc::from("a"),
        },
        Event::TurnStarted { turn: 1 },
        Event::ModelStarted { turn: 1 },
        Event::ModelFailed {
            problem: "auth".into(),
            retryable: false,
            before_stream: true,
        },
        Event::TurnFailed {
            turn: 1,
            code: FailureCode::ModelFailed,
        },
        Event::RunFailed {
            code: FailureCode::ModelFailed,
        },
    ];
    let (dispatch, records) = capture(Behaviour::Record);
    project(&dispatch, config(), events);
    let records = records.lock().unwrap();
    let levels: Vec<(&str, Level)> = records.iter().map(|r| (r.name.as_str(), r.level)).collect();
    assert_eq!(
        levels,
        [
            ("agent.run.started", Level::INFO),
            ("agent.turn.started", Level::DEBUG),
            ("agent.model.started", Level::DEBUG),
            ("agent.model.failed", Level::WARN),
            ("agent.turn.failed", Level::INFO),
            ("agent.run.failed", Level::INFO),
        ]
    );
    assert_eq!(
        named(&records, "agent.run.failed")[0].field("failure_code"),
        Some("model_failed")
    );
}

#[test]
fn event_presentation_covers_every_kind() {
    let events = every_kind();
    let kinds: Vec<EventKind> = events.iter().map(Event::kind).collect();
    let (dispatch, records) = capture(Behaviour::Record);
    project(&dispatch, config().with_progress(true), events);
    let records = records.lock().unwrap();
    let expected: Vec<(String, Level)> = kinds
        .iter()
        .filter(|k| **k != EventKind::ModelDelta)
        .map(|kind| {
            let level = match kind {
                // The turn failed because its model did (`model_failed`): INFO.
                EventKind::RunStarted
                | EventKind::RunCompleted
                | EventKind::RunCancelled
                | EventKind::TurnFailed
                | EventKind::InteractionCancelled => Level::INFO,
                // The provider's answer, not our bug.
                EventKind::ModelFailed => Level::WARN,
                EventKind::RunFailed | EventKind::ToolFailed | EventKind::InteractionFailed => {
                    Level::ERROR
                }
                EventKind::ToolProgress => Level::TRACE,
                _ => Level::DEBUG,
            };
            (format!("agent.{}", kind.as_str()), level)
        })
        .collect();
    let actual: Vec<(String, Level)> = records.iter().map(|r| (r.name.clone(), r.level)).collect();
    assert_eq!(actual, expected);
    // Every message is the fixed one: the kind's words.
    for record in records.iter() {
        let words = record.name["agent.".len()..].replace('.', " ");
        assert_eq!(record.field("message"), Some(words.as_str()), "{record:?}");
    }
}

mod open_spans {
    use std::sync::{Arc, Mutex};

    use agent_core::event::{Event, Observer};
    use agent_logging::{EventLogger, MAX_MAILBOX_CAPACITY, MAX_OPEN_RUN_SPANS};
    use tracing::Subscriber;
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::Registry;
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    use super::support::{envelope, runtime};
    use super::{DRAIN, config};

    /// Counts `agent.run` spans closed before the drain's end, and records emitted.
    #[derive(Clone, Default)]
    struct Closes {
        log: Arc<Mutex<Vec<&'static str>>>,
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Closes {
        fn on_new_span(&self, _: &Attributes<'_>, _: &Id, _: Context<'_, S>) {}

        fn on_event(&self, _: &tracing::Event<'_>, _: Context<'_, S>) {
            self.log.lock().unwrap().push("record");
        }

        fn on_close(&self, id: Id, ctx: Context<'_, S>) {
            if ctx.span(&id).is_some_and(|s| s.name() == "agent.run") {
                self.log.lock().unwrap().push("close");
            }
        }
    }

    /// Publishes one `turn.started` for each of `runs` distinct runs and returns how many
    /// run spans closed before the last record.
    fn evictions(runs: usize) -> usize {
        let closes = Closes::default();
        let dispatch = tracing::Dispatch::new(Registry::default().with(closes.clone()));
        let _scope = tracing::dispatcher::set_default(&dispatch);
        // Room for every envelope: this test is about spans, not overflow.
        let logger = EventLogger::start(
            config()
                .with_mailbox_capacity(MAX_MAILBOX_CAPACITY)
                .unwrap(),
        )
        .unwrap();
        runtime().block_on(async {
            for run in 0..runs {
                logger
                    .publish(&envelope(
                        &format!("run-{run}"),
                        1,
                        Event::TurnStarted { turn: 1 },
                    ))
                    .await
                    .unwrap();
            }
            logger.close(DRAIN).await.unwrap();
        });
        assert_eq!(logger.snapshot().dropped, 0);
        let log = closes.log.lock().unwrap();
        let last_record = log.iter().rposition(|e| *e == "record").unwrap();
        log[..last_record].iter().filter(|e| **e == "close").count()
    }

    #[test]
    fn run_spans_are_bounded_at_max_open_run_spans() {
        assert_eq!(
            evictions(MAX_OPEN_RUN_SPANS),
            0,
            "at the bound nothing is evicted"
        );
        assert_eq!(
            evictions(MAX_OPEN_RUN_SPANS + 1),
            1,
            "past it the oldest run's spans close"
        );
    }
}
