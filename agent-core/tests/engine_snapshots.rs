//! Suspension, snapshots and resumption: a run parks at a turn boundary, exports a snapshot
//! that survives JSON, and continues in place or on another engine with the same tools;
//! resuming refuses other tool plans and duplicate runs; calls a failed or cancelled run left
//! open are settled without replaying anything that may have had an effect; and snapshot
//! validation refuses malformed or inconsistent input.

mod engine_support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use agent_core::agent::{
    CallState, Engine, EngineIdentity, Incompatibility, Run, RunStatus, SNAPSHOT_VERSION, Snapshot,
    SnapshotError, SnapshotStatus, StartError, SuspendError, UnfinishedCall,
};
use agent_core::event::{Event, EventKind};
use agent_core::interaction::{InteractionError, InteractionRequest};
use agent_core::message::{Message, Part, Role};
use agent_core::model::{ModelProvider, ModelRequest, ScriptedProvider, StreamEvent};
use agent_core::stage::{PlanError, PlanId, ToolDispatcher, ToolPlanLease, ToolPlanSource};
use agent_core::tool::{BoxFuture, Definition, Effect, ReplaySafety, RetryDisposition};
use engine_support::*;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Asks for `read` in the first two turns (calls `c1`, `c2`), then answers `done`. Decides
/// from the history alone, so a resumed run gets the same answers.
fn two_reads_then_answer() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let asked = request
            .messages()
            .iter()
            .filter(|m| m.role() == Role::Assistant)
            .count();
        if asked < 2 {
            let id = format!("c{}", asked + 1);
            vec![StreamEvent::ToolCall(call(&id, "read")), completed()]
        } else {
            vec![StreamEvent::TextDelta("done".into()), completed()]
        }
    }))
}

fn read_engine() -> Engine {
    engine(
        two_reads_then_answer(),
        vec![ScriptTool::read(Act::Succeed).arc()],
    )
}

/// A run of `engine` suspended at its first boundary, and its exported snapshot.
async fn suspended(engine: &Engine) -> (Run, Snapshot) {
    let run = engine.start(&agent(5), input()).await.expect("started");
    within("the suspension", run.suspend())
        .await
        .expect("suspends at the first boundary");
    let snapshot = run.snapshot().expect("a suspended run has a snapshot");
    (run, snapshot)
}

/// Polls `future` once; `true` while it is still pending.
async fn still_pending<F: Future + Unpin>(future: &mut F) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx).is_pending()))
        .await
}

// ---------------------------------------------------------------------------------------
// a. Suspend at a turn boundary, resume in place
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn suspend_parks_at_the_first_boundary_and_resume_continues_in_place() {
    let engine = read_engine();
    let (run, snapshot) = suspended(&engine).await;
    assert_eq!(run.status(), RunStatus::Suspended);
    assert_eq!(snapshot.status(), SnapshotStatus::Suspended);
    assert_eq!(snapshot.completed_turns(), 1);
    assert!(snapshot.unfinished_calls().is_empty());
    assert_eq!(snapshot.run_id(), run.id());
    assert_eq!(snapshot.plan_id(), run.plan_id());
    assert_eq!(snapshot.plan_fingerprint(), run.plan_fingerprint());
    assert_eq!(snapshot.last_sequence(), run.events().last_sequence());
    let roles: Vec<Role> = snapshot.history().iter().map(Message::role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);

    let json = snapshot.to_json();
    assert_eq!(Snapshot::from_json(&json), Ok(snapshot.clone()));
    assert_eq!(
        Snapshot::from_json(&json).unwrap().to_json(),
        json,
        "deterministic"
    );

    // Parked: nothing happens and `wait` keeps waiting.
    let before = run.events().last_sequence();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), run.wait())
            .await
            .is_err()
    );
    assert_eq!(run.events().last_sequence(), before);
    assert_eq!(run.status(), RunStatus::Suspended);
    // A parked run asks nobody: its exported snapshot must stay current.
    let question = InteractionRequest::new("ask-1", "confirm", "Go?", json!(null)).unwrap();
    assert_eq!(
        run.interact(question, &CancellationToken::new()).await,
        Err(InteractionError::Unavailable)
    );
    assert_eq!(run.events().last_sequence(), before);
    assert_eq!(run.snapshot(), Ok(snapshot.clone()));

    run.resume().expect("resumes");
    let output = within("the run", run.wait()).await.expect("completes");
    assert_eq!((output.answer.as_str(), output.turns), ("done", 3));
    assert_eq!(run.resume(), Err(SuspendError::NotSuspended));
    assert_eq!(assert_log(&run, 1), EventKind::RunCompleted);
    let turns: Vec<u32> = events(&run)
        .iter()
        .filter_map(|e| match e {
            Event::TurnStarted { turn } => Some(*turn),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [1, 2, 3]);
    let terminal = terminal_snapshot(&run);
    assert_eq!(terminal.status(), SnapshotStatus::Completed);
    assert_eq!(terminal.completed_turns(), 3);
    drained(&engine).await;
}

// ---------------------------------------------------------------------------------------
// b. Resume on another engine
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_exported_snapshot_resumes_on_a_new_engine_like_an_uninterrupted_run() {
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;
    let snapshot = Snapshot::from_json(&snapshot.to_json()).expect("valid");

    let engine2 = read_engine();
    let resumed = engine2.resume(snapshot.clone()).await.expect("resumes");
    assert_eq!(resumed.id(), snapshot.run_id());
    let output = within("the resumed run", resumed.wait())
        .await
        .expect("completes");
    let first = snapshot.last_sequence() + 1;
    let log = envelopes(&resumed);
    assert_eq!(log[0].sequence(), first);
    assert_eq!(log[0].event(), &Event::TurnStarted { turn: 2 });
    assert!(!log.iter().any(|e| e.kind() == EventKind::RunStarted));
    assert_eq!(check_log(&log, first), Ok(EventKind::RunCompleted));
    let resumed_end = terminal_snapshot(&resumed);

    let engine3 = read_engine();
    let straight = engine3.start(&agent(5), input()).await.expect("started");
    let expected = within("the straight run", straight.wait())
        .await
        .expect("completes");
    let straight_end = terminal_snapshot(&straight);
    assert_eq!(output, expected, "same answer, turns and usage");
    assert_eq!(resumed_end.history(), straight_end.history());
    assert_eq!(resumed_end.last_sequence(), straight_end.last_sequence());

    // Cancelling the parked original ends it cleanly at its boundary.
    original.cancel();
    let error = within("the original", original.wait())
        .await
        .expect_err("cancelled while suspended");
    assert!(error.is_cancelled());
    assert_eq!(assert_log(&original, 1), EventKind::RunCancelled);
    let cancelled = terminal_snapshot(&original);
    assert_eq!(cancelled.status(), SnapshotStatus::Cancelled);
    assert_eq!(cancelled.completed_turns(), 1);
    assert_eq!(cancelled.history(), snapshot.history());
    for engine in [&engine1, &engine2, &engine3] {
        drained(engine).await;
    }
}

#[tokio::test]
async fn resuming_under_other_tools_fails_closed() {
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;

    // Other definitions: the static source has another generation id.
    let other_read = Definition::builder("read", "Read something else.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    let seen = journal();
    let engine2 = Setup::new(
        two_reads_then_answer(),
        plans(
            vec![ScriptTool::new(other_read, Act::Succeed).arc()],
            Vec::new(),
        ),
    )
    .observer(Arc::new(TestObserver::new(seen.clone())))
    .build();
    let error = engine2.resume(snapshot.clone()).await.expect_err("refused");
    assert!(
        matches!(&error, StartError::Plan(PlanError::UnknownGeneration(id)) if id == snapshot.plan_id()),
        "{error:?}"
    );
    assert_eq!(engine2.live_runs(), 0);
    assert!(entries(&seen).is_empty(), "no event was emitted");

    original.cancel();
    let _ = within("the original", original.wait()).await;
    drained(&engine1).await;
    drained(&engine2).await;
}

/// Serves one fixed generation id over whatever dispatcher it was given, counting releases:
/// a source that (wrongly) reuses an id for other tools.
struct FixedIdSource {
    dispatcher: Arc<dyn ToolDispatcher>,
    releases: Arc<AtomicUsize>,
}

impl FixedIdSource {
    fn lease(&self) -> ToolPlanLease {
        let releases = self.releases.clone();
        ToolPlanLease::new(
            PlanId::new("fixed:1").unwrap(),
            self.dispatcher.clone(),
            move || async move {
                releases.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
        )
    }
}

impl ToolPlanSource for FixedIdSource {
    fn lease_current<'a>(
        &'a self,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move { Ok(self.lease()) })
    }

    fn lease_generation<'a>(
        &'a self,
        _id: &'a PlanId,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move { Ok(self.lease()) })
    }
}

#[tokio::test]
async fn resuming_under_the_same_plan_id_with_other_definitions_is_plan_changed() {
    let source1 = FixedIdSource {
        dispatcher: dispatcher(vec![ScriptTool::read(Act::Succeed).arc()]),
        releases: Arc::new(AtomicUsize::new(0)),
    };
    let engine1 = Setup::new(two_reads_then_answer(), Arc::new(source1)).build();
    let (original, snapshot) = suspended(&engine1).await;

    let releases = Arc::new(AtomicUsize::new(0));
    let write = definition("write", Effect::Mutating, ReplaySafety::Unsafe);
    let source2 = FixedIdSource {
        dispatcher: dispatcher(vec![
            ScriptTool::read(Act::Succeed).arc(),
            ScriptTool::new(write, Act::Succeed).arc(),
        ]),
        releases: releases.clone(),
    };
    let engine2 = Setup::new(two_reads_then_answer(), Arc::new(source2)).build();
    let error = engine2.resume(snapshot).await.expect_err("refused");
    assert_eq!(
        error,
        StartError::PlanChanged(PlanId::new("fixed:1").unwrap())
    );
    assert_eq!(engine2.live_runs(), 0);
    assert_eq!(releases.load(Ordering::SeqCst), 1, "the lease was released");

    original.cancel();
    let _ = within("the original", original.wait()).await;
    drained(&engine1).await;
    drained(&engine2).await;
}

#[tokio::test]
async fn resuming_one_snapshot_twice_at_once_is_a_duplicate_run() {
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;
    let engine2 = read_engine();
    let (a, b) = tokio::join!(
        engine2.resume(snapshot.clone()),
        engine2.resume(snapshot.clone())
    );
    let (run, error) = match (a, b) {
        (Ok(run), Err(error)) | (Err(error), Ok(run)) => (run, error),
        (a, b) => panic!("expected exactly one resume to win: {a:?} / {b:?}"),
    };
    assert_eq!(
        error,
        StartError::DuplicateRun(snapshot.run_id().to_owned())
    );
    within("the resumed run", run.wait())
        .await
        .expect("completes");
    assert_eq!(
        check_log(&envelopes(&run), snapshot.last_sequence() + 1),
        Ok(EventKind::RunCompleted)
    );
    // The original engine still holds the suspended run under the same id.
    assert_eq!(
        engine1.resume(snapshot.clone()).await.expect_err("live"),
        StartError::DuplicateRun(snapshot.run_id().to_owned())
    );
    original.cancel();
    let _ = within("the original", original.wait()).await;
    drained(&engine1).await;
    drained(&engine2).await;
}

#[tokio::test]
async fn completed_and_invalid_snapshots_are_not_resumed() {
    let engine = read_engine();
    let run = engine.start(&agent(5), input()).await.expect("started");
    within("the run", run.wait()).await.expect("completes");
    let done = terminal_snapshot(&run);
    assert_eq!(
        engine.resume(done.clone()).await.expect_err("refused"),
        StartError::NotResumable
    );
    // Deserializing without `from_json` skips validation; resuming validates again.
    let mut value: Value = serde_json::from_slice(&done.to_json()).unwrap();
    value["status"] = json!("failed");
    value["history"] = json!([]);
    let invalid: Snapshot = serde_json::from_value(value).expect("serde alone accepts it");
    assert!(matches!(
        engine.resume(invalid).await,
        Err(StartError::Snapshot(SnapshotError::Invalid(_)))
    ));
    assert_eq!(engine.live_runs(), 0);
    drained(&engine).await;
}

// ---------------------------------------------------------------------------------------
// c. Unfinished calls
// ---------------------------------------------------------------------------------------

/// A row: the first tool the model asks for (before `read`), what it does on the first
/// engine, and what the snapshot and the resumed run must show.
struct UnfinishedRow {
    name: &'static str,
    definition: Definition,
    act: Act,
    cancel: bool,
    state: CallState,
    retry: Option<RetryDisposition>,
    rerun: bool,
}

fn unfinished_rows() -> Vec<UnfinishedRow> {
    let write = || definition("write", Effect::Mutating, ReplaySafety::Unsafe);
    let put = || definition("put", Effect::Mutating, ReplaySafety::Idempotent);
    let scan = || definition("scan", Effect::ReadOnly, ReplaySafety::Safe);
    let row = |name, definition, act, cancel, state, retry, rerun| UnfinishedRow {
        name,
        definition,
        act,
        cancel,
        state,
        retry,
        rerun,
    };
    vec![
        row(
            "mutating unsafe, cancelled while running",
            write(),
            Act::Block,
            true,
            CallState::Uncertain,
            None,
            false,
        ),
        row(
            "mutating idempotent, cancelled while running",
            put(),
            Act::Block,
            true,
            CallState::Uncertain,
            None,
            false,
        ),
        row(
            "read-only safe, cancelled while running",
            scan(),
            Act::Block,
            true,
            CallState::Interrupted,
            None,
            true,
        ),
        row(
            "idempotent, retryable failure",
            put(),
            Act::Retryable,
            false,
            CallState::Failed,
            Some(RetryDisposition::Allowed),
            true,
        ),
        row(
            "unsafe, definitive failure",
            write(),
            Act::Definitive,
            false,
            CallState::Failed,
            Some(RetryDisposition::Never),
            false,
        ),
        row(
            "idempotent, uncertain failure",
            put(),
            Act::Uncertain,
            false,
            CallState::Uncertain,
            Some(RetryDisposition::Never),
            false,
        ),
        row(
            "unsafe, advising a retry (contract violation)",
            write(),
            Act::Retryable,
            false,
            CallState::Uncertain,
            None,
            false,
        ),
    ]
}

/// Turn 1 asks for `<name>` (call `x1`) then `read` (call `r1`).
fn two_calls(name: &str) -> Script {
    Script::items([
        StreamEvent::ToolCall(call("x1", name)),
        StreamEvent::ToolCall(call("r1", "read")),
        completed(),
    ])
}

/// Runs the row's first engine to its end and returns the terminal snapshot.
async fn interrupted(row: &UnfinishedRow) -> Snapshot {
    let (tx, mut rx) = signal();
    let name = row.definition.name().to_owned();
    let provider = FaultProvider::new(vec![two_calls(&name), Script::answer("done")], None);
    let first = ScriptTool::new(row.definition.clone(), row.act).signalling(tx);
    let engine = engine(
        provider,
        vec![first.arc(), ScriptTool::read(Act::Succeed).arc()],
    );
    let run = engine.start(&agent(4), input()).await.expect("started");
    if row.cancel {
        within("the tool", rx.recv()).await;
        run.cancel();
    }
    let error = within("the run", run.wait()).await.expect_err(row.name);
    assert_eq!(error.is_cancelled(), row.cancel, "{}: {error}", row.name);
    assert_log(&run, 1);
    let snapshot = terminal_snapshot(&run);
    drained(&engine).await;
    snapshot
}

fn read_unfinished() -> UnfinishedCall {
    UnfinishedCall {
        call_id: "r1".into(),
        name: "read".into(),
        state: CallState::NotStarted,
        effect: Some(Effect::ReadOnly),
        replay_safety: Some(ReplaySafety::Safe),
        retry: None,
    }
}

/// Resumes `snapshot` on an engine whose tools succeed and count their executions; returns
/// the counts of the first tool and of `read`, the first request the model saw, and the
/// resumed run.
async fn resume_counting(
    snapshot: Snapshot,
    first: Definition,
) -> (usize, usize, ModelRequest, Run) {
    let provider = FaultProvider::new(vec![Script::answer("done")], None);
    let first = ScriptTool::new(first, Act::Succeed);
    let read = ScriptTool::read(Act::Succeed);
    let (first_runs, read_runs) = (first.counter(), read.counter());
    let engine = engine(provider.clone(), vec![first.arc(), read.arc()]);
    let run = engine.resume(snapshot.clone()).await.expect("resumes");
    within("the resumed run", run.wait())
        .await
        .expect("the resumed run completes");
    assert_eq!(
        check_log(&envelopes(&run), snapshot.last_sequence() + 1),
        Ok(EventKind::RunCompleted)
    );
    drained(&engine).await;
    let request = provider.requests().first().cloned().expect("one request");
    (
        first_runs.load(Ordering::SeqCst),
        read_runs.load(Ordering::SeqCst),
        request,
        run,
    )
}

/// The result the model saw for `call_id`: (problem, content).
fn result_for(request: &ModelRequest, call_id: &str) -> (bool, String) {
    request
        .messages()
        .iter()
        .flat_map(|m| m.parts())
        .find_map(|part| match part {
            Part::ToolResult(r) if r.call_id == call_id => Some((r.problem, r.content.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

#[tokio::test]
async fn unfinished_calls_are_settled_without_replaying_uncertain_effects() {
    for row in unfinished_rows() {
        let name = row.name;
        let snapshot = interrupted(&row).await;
        let expected_status = if row.cancel {
            SnapshotStatus::Cancelled
        } else {
            SnapshotStatus::Failed
        };
        assert_eq!(snapshot.status(), expected_status, "{name}");
        let first = UnfinishedCall {
            call_id: "x1".into(),
            name: row.definition.name().to_owned(),
            state: row.state,
            effect: Some(row.definition.effect()),
            replay_safety: Some(row.definition.replay_safety()),
            retry: row.retry,
        };
        assert_eq!(
            snapshot.unfinished_calls(),
            [first.clone(), read_unfinished()],
            "{name}"
        );
        assert_eq!(first.may_run_on_resume(), row.rerun, "{name}");

        let (first_runs, read_runs, request, run) =
            resume_counting(snapshot, row.definition.clone()).await;
        assert_eq!(
            first_runs,
            usize::from(row.rerun),
            "{name}: first tool runs"
        );
        assert_eq!(read_runs, 1, "{name}: the call that never started runs");
        let (problem, _) = result_for(&request, "x1");
        assert_eq!(problem, !row.rerun, "{name}: the model is told");
        assert!(!result_for(&request, "r1").0, "{name}");
        let started: Vec<String> = events(&run)
            .into_iter()
            .filter_map(|e| match e {
                Event::ToolStarted(s) => Some(s.call_id),
                _ => None,
            })
            .collect();
        let expected: Vec<&str> = if row.rerun {
            vec!["x1", "r1"]
        } else {
            vec!["r1"]
        };
        assert_eq!(started, expected, "{name}");
        assert_eq!(
            events(&run).first(),
            Some(&Event::TurnStarted { turn: 1 }),
            "{name}: the settling turn repeats the interrupted one"
        );
    }
}

/// Settling can itself be interrupted: the calls still open stay open, with what is known
/// about them, and a second resume finishes them.
#[tokio::test]
async fn an_interrupted_settlement_resumes_again() {
    let row = &unfinished_rows()[0];
    let snapshot = interrupted(row).await;

    let (tx, mut rx) = signal();
    let provider = FaultProvider::new(vec![Script::answer("done")], None);
    let write = ScriptTool::new(row.definition.clone(), Act::Succeed);
    let blocking_read = ScriptTool::read(Act::Block).signalling(tx);
    let (write_runs, read_runs) = (write.counter(), blocking_read.counter());
    let engine2 = engine(provider, vec![write.arc(), blocking_read.arc()]);
    let run = engine2.resume(snapshot.clone()).await.expect("resumes");
    within("the read", rx.recv()).await;
    run.cancel();
    within("the run", run.wait()).await.expect_err("cancelled");
    assert_eq!(
        check_log(&envelopes(&run), snapshot.last_sequence() + 1),
        Ok(EventKind::RunCancelled)
    );
    let again = terminal_snapshot(&run);
    assert_eq!(again.status(), SnapshotStatus::Cancelled);
    assert_eq!(
        again.unfinished_calls(),
        [UnfinishedCall {
            state: CallState::Interrupted,
            ..read_unfinished()
        }]
    );
    assert_eq!(again.last_sequence(), run.events().last_sequence());
    assert_eq!(
        (
            write_runs.load(Ordering::SeqCst),
            read_runs.load(Ordering::SeqCst)
        ),
        (0, 1)
    );
    drained(&engine2).await;

    let (write_runs, read_runs, request, _) = resume_counting(again, row.definition.clone()).await;
    assert_eq!((write_runs, read_runs), (0, 1));
    assert!(result_for(&request, "x1").0);
    assert!(!result_for(&request, "r1").0);
}

/// Interaction ids are single-use for the whole run, across a resume on another engine.
#[tokio::test]
async fn interaction_ids_stay_used_after_a_resume() {
    let (tx, mut rx) = signal();
    let approving = Setup::new(
        two_reads_then_answer(),
        plans(vec![ScriptTool::read(Act::Succeed).arc()], Vec::new()),
    )
    .broker(Arc::new(TestBroker {
        act: BrokerAct::Approve,
        signal: None,
    }))
    .build();
    let run = approving.start(&agent(5), input()).await.expect("started");
    let question = || InteractionRequest::new("ask-1", "confirm", "Go?", json!(null)).unwrap();
    let token = CancellationToken::new();
    run.interact(question(), &token).await.expect("answered");
    within("the suspension", run.suspend())
        .await
        .expect("suspends");
    let snapshot = run.snapshot().expect("snapshot");
    assert!(snapshot.interaction_ids().contains("ask-1"));

    let (engine2, gate) = gated_engine(tx);
    let resumed = engine2.resume(snapshot).await.expect("resumes");
    within("the tool", rx.recv()).await;
    assert_eq!(
        resumed.interact(question(), &token).await,
        Err(InteractionError::DuplicateId { id: "ask-1".into() })
    );
    gate.add_permits(1);
    within("the resumed run", resumed.wait())
        .await
        .expect("completes");
    assert!(!kinds(&resumed).contains(&EventKind::InteractionStarted));

    run.cancel();
    let _ = within("the original", run.wait()).await;
    drained(&approving).await;
    drained(&engine2).await;
}

/// Replay decisions follow the leased plan, and a snapshot cannot claim facts no tool can
/// have: read-only tools are always replay safe, so a snapshot saying otherwise is refused.
#[tokio::test]
async fn an_interrupted_read_only_call_runs_again_and_claims_cannot_change_that() {
    let scan = definition("scan", Effect::ReadOnly, ReplaySafety::Safe);
    let row = UnfinishedRow {
        name: "read-only safe, cancelled while running",
        definition: scan.clone(),
        act: Act::Block,
        cancel: true,
        state: CallState::Interrupted,
        retry: None,
        rerun: true,
    };
    let snapshot = interrupted(&row).await;
    let mut value: Value = serde_json::from_slice(&snapshot.to_json()).unwrap();
    value["unfinished_calls"][0]["replay_safety"] = json!("unsafe");
    assert!(Snapshot::from_json(&serde_json::to_vec(&value).unwrap()).is_err());

    let (scan_runs, _, request, _) = resume_counting(snapshot, scan).await;
    assert_eq!(scan_runs, 1, "the replay-safe call runs again");
    assert!(!result_for(&request, "x1").0);
}

#[test]
fn may_run_on_resume_follows_state_effect_and_replay_safety() {
    use CallState::*;
    let call = |state, effect, replay_safety, retry| UnfinishedCall {
        call_id: "c".into(),
        name: "t".into(),
        state,
        effect,
        replay_safety,
        retry,
    };
    let (ro, mu) = (Some(Effect::ReadOnly), Some(Effect::Mutating));
    let (safe, idem, uns) = (
        Some(ReplaySafety::Safe),
        Some(ReplaySafety::Idempotent),
        Some(ReplaySafety::Unsafe),
    );
    let (allowed, never) = (
        Some(RetryDisposition::Allowed),
        Some(RetryDisposition::Never),
    );
    let table = [
        (call(NotStarted, mu, uns, None), true),
        (call(NotStarted, None, None, None), false),
        (call(Interrupted, ro, safe, None), true),
        (call(Interrupted, ro, uns, None), false),
        (call(Interrupted, None, None, None), false),
        (call(Uncertain, mu, idem, None), false),
        (call(Uncertain, mu, safe, never), false),
        (call(Failed, mu, idem, allowed), true),
        (call(Failed, mu, idem, never), false),
        (call(Failed, mu, uns, allowed), false),
        (call(Failed, None, None, never), false),
    ];
    for (call, expected) in table {
        assert_eq!(call.may_run_on_resume(), expected, "{call:?}");
    }
}

// ---------------------------------------------------------------------------------------
// d. Snapshot validation
// ---------------------------------------------------------------------------------------

/// A cancelled snapshot with two open calls (max turns 4), and a completed one.
async fn base_snapshots() -> (Value, Value) {
    let row = &unfinished_rows()[0];
    let open = interrupted(row).await;
    let engine = read_engine();
    let run = engine.start(&agent(5), input()).await.expect("started");
    within("the run", run.wait()).await.expect("completes");
    let done = terminal_snapshot(&run);
    drained(&engine).await;
    (
        serde_json::from_slice(&open.to_json()).unwrap(),
        serde_json::from_slice(&done.to_json()).unwrap(),
    )
}

fn parse(value: &Value) -> Result<Snapshot, SnapshotError> {
    Snapshot::from_json(&serde_json::to_vec(value).unwrap())
}

fn invalid_because(result: Result<Snapshot, SnapshotError>, needle: &str) -> bool {
    matches!(result, Err(SnapshotError::Invalid(why)) if why.contains(needle))
}

#[tokio::test]
async fn snapshot_validation_rejects_malformed_and_inconsistent_input() {
    let (open, done) = base_snapshots().await;
    assert!(parse(&open).is_ok() && parse(&done).is_ok());
    assert_eq!(done["version"], json!(SNAPSHOT_VERSION));

    let mut unknown = done.clone();
    unknown["extra"] = json!(1);
    assert!(matches!(parse(&unknown), Err(SnapshotError::Malformed(_))));

    let mut nested = open.clone();
    nested["unfinished_calls"][0]["note"] = json!("x");
    assert!(matches!(parse(&nested), Err(SnapshotError::Malformed(_))));

    let mut version = done.clone();
    version["version"] = json!("agent-core.snapshot/v0");
    assert_eq!(
        parse(&version),
        Err(SnapshotError::Version("agent-core.snapshot/v0".into()))
    );

    // The identities travel with the snapshot, round-trip exactly and are checked.
    assert_eq!(done["compatibility"], json!(TEST_COMPATIBILITY));
    assert!(
        done.get("workspace").is_none(),
        "unset identities are left out"
    );
    let back = parse(&done).unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&back.to_json()).unwrap(),
        done
    );
    let mut v1 = done.clone();
    v1["version"] = json!("agent-core.snapshot/v1");
    assert_eq!(
        parse(&v1),
        Err(SnapshotError::Version("agent-core.snapshot/v1".into()))
    );
    let mut missing = done.clone();
    missing.as_object_mut().unwrap().remove("plan_identity");
    assert!(matches!(parse(&missing), Err(SnapshotError::Malformed(_))));
    for (field, bad, needle) in [
        ("plan_identity", json!("sha256:x"), "identities"),
        ("static_identity", json!("md5:0"), "identities"),
        ("compatibility", json!("two words"), "compatibility"),
        ("workspace", json!("/home/me/project"), "workspace"),
    ] {
        let mut broken = done.clone();
        broken[field] = bad;
        assert!(
            invalid_because(parse(&broken), needle),
            "{field}: {:?}",
            parse(&broken)
        );
    }

    let mut suspended_open = open.clone();
    suspended_open["status"] = json!("suspended");
    suspended_open["completed_turns"] = json!(1);
    assert!(
        invalid_because(parse(&suspended_open), "open"),
        "{:?}",
        parse(&suspended_open)
    );

    let mut completed_open = open.clone();
    completed_open["status"] = json!("completed");
    assert!(invalid_because(parse(&completed_open), "open"));

    let mut orphan = done.clone();
    orphan["history"].as_array_mut().unwrap().push(json!({
        "role": "tool",
        "parts": [{"tool_result": {"call_id": "ghost", "name": "read", "content": "{}"}}],
    }));
    assert!(invalid_because(parse(&orphan), "answers no open call"));

    let mut empty = done.clone();
    empty["history"] = json!([]);
    assert!(invalid_because(parse(&empty), "history needs"));

    let mut not_user = done.clone();
    not_user["history"][0] = json!({"role": "assistant", "parts": [{"text": "hi"}]});
    assert!(invalid_because(parse(&not_user), "user"));

    let mut unlisted = open.clone();
    unlisted["unfinished_calls"] = json!([]);
    assert!(invalid_because(parse(&unlisted), "unfinished calls"));

    let mut beyond = done.clone();
    beyond["completed_turns"] = json!(6);
    assert!(invalid_because(parse(&beyond), "completed turns"));

    let mut zero = done.clone();
    zero["last_sequence"] = json!(0);
    assert!(invalid_because(parse(&zero), "last sequence"));

    assert!(matches!(
        Snapshot::from_json(b"{\"version\": 1}"),
        Err(SnapshotError::Malformed(_))
    ));
    assert!(matches!(
        Snapshot::from_json(&vec![b' '; agent_core::agent::MAX_SNAPSHOT_BYTES + 1]),
        Err(SnapshotError::TooLarge)
    ));
}

// ---------------------------------------------------------------------------------------
// e. Suspension requests that cannot or do not park the run
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn suspending_a_run_without_a_boundary_reports_finished() {
    // One turn allowed: there is no boundary below the maximum.
    let engine = read_engine();
    let run = engine.start(&agent(1), input()).await.expect("started");
    assert_eq!(
        within("the suspension", run.suspend()).await,
        Err(SuspendError::Finished)
    );
    within("the run", run.wait()).await.expect_err("max turns");
    assert_eq!(run.suspend().await, Err(SuspendError::Finished));

    // The model answers in the first turn: the run ends before any boundary.
    let answer = FaultProvider::new(vec![Script::answer("hi")], None);
    let engine2 = engine_support::engine(answer, Vec::new());
    let run = engine2.start(&agent(5), input()).await.expect("started");
    assert_eq!(
        within("the suspension", run.suspend()).await,
        Err(SuspendError::Finished)
    );
    assert_eq!(run.snapshot().unwrap().status(), SnapshotStatus::Completed);
    drained(&engine).await;
    drained(&engine2).await;
}

/// An engine whose `read` waits for a permit of the returned gate before each call.
fn gated_engine(tx: Signal) -> (Engine, Arc<Semaphore>) {
    let gate = Arc::new(Semaphore::new(0));
    let read = ScriptTool::read(Act::Succeed)
        .signalling(tx.clone())
        .gated(gate.clone());
    let engine = Setup::new(two_reads_then_answer(), plans(vec![read.arc()], Vec::new()))
        .broker(Arc::new(TestBroker {
            act: BrokerAct::Block,
            signal: Some(tx),
        }))
        .build();
    (engine, gate)
}

#[tokio::test]
async fn dropping_a_suspend_request_before_the_boundary_withdraws_it() {
    let (tx, mut rx) = signal();
    let (engine, gate) = gated_engine(tx);
    let run = engine.start(&agent(5), input()).await.expect("started");
    within("the tool", rx.recv()).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(20), run.suspend())
            .await
            .is_err(),
        "no boundary yet"
    );
    gate.add_permits(2);
    let output = within("the run", run.wait())
        .await
        .expect("runs to the end without parking");
    assert_eq!(output.turns, 3);
    assert_eq!(assert_log(&run, 1), EventKind::RunCompleted);
    drained(&engine).await;
}

#[tokio::test]
async fn dropping_a_suspend_request_after_the_run_parked_resumes_it() {
    let (tx, mut rx) = signal();
    let (engine, gate) = gated_engine(tx);
    let run = engine.start(&agent(5), input()).await.expect("started");
    within("the tool", rx.recv()).await;
    let mut suspend = Box::pin(run.suspend());
    assert!(still_pending(&mut suspend).await);
    assert_eq!(
        run.suspend().await,
        Err(SuspendError::AlreadyRequested),
        "one request at a time"
    );
    gate.add_permits(2);
    within("the boundary", async {
        while run.status() != RunStatus::Suspended {
            tokio::task::yield_now().await;
        }
    })
    .await;
    drop(suspend);
    assert_eq!(
        run.status(),
        RunStatus::Running,
        "a withdrawn request never parks"
    );
    let output = within("the run", run.wait()).await.expect("completes");
    assert_eq!(output.turns, 3);
    assert_eq!(assert_log(&run, 1), EventKind::RunCompleted);
    drained(&engine).await;
}

#[tokio::test]
async fn an_open_interaction_refuses_suspension_and_the_run_goes_on() {
    let (tx, mut rx) = signal();
    let (engine, gate) = gated_engine(tx);
    let run = engine.start(&agent(5), input()).await.expect("started");
    assert_eq!(within("the tool", rx.recv()).await, Some("gated tool"));
    let token = CancellationToken::new();
    let asking = tokio::spawn({
        let (run, token) = (run.clone(), token.clone());
        async move {
            let question =
                InteractionRequest::new("ask-1", "confirm", "Proceed?", json!(null)).unwrap();
            run.interact(question, &token).await
        }
    });
    assert_eq!(within("the broker", rx.recv()).await, Some("broker"));
    assert!(matches!(
        run.snapshot(),
        Err(SnapshotError::InteractionsActive(1))
    ));
    let mut suspend = Box::pin(run.suspend());
    assert!(still_pending(&mut suspend).await);
    gate.add_permits(2);
    assert_eq!(
        within("the refusal", suspend).await,
        Err(SuspendError::InteractionsActive)
    );
    token.cancel();
    assert_eq!(
        within("the interaction", asking).await.unwrap(),
        Err(InteractionError::Cancelled)
    );
    let output = within("the run", run.wait()).await.expect("completes");
    assert_eq!(output.turns, 3);
    assert_eq!(assert_log(&run, 1), EventKind::RunCompleted);
    let all = events(&run);
    assert!(all.contains(&Event::InteractionCancelled { id: "ask-1".into() }));
    let snapshot = terminal_snapshot(&run);
    assert!(snapshot.interaction_ids().contains("ask-1"));
    drained(&engine).await;
}

// ---------------------------------------------------------------------------------------
// Local resume reservation
// ---------------------------------------------------------------------------------------

/// The original refuses a suspension while a local resume holds the boundary: the
/// reservation's commit would continue the run, so "suspended" cannot be promised.
#[tokio::test]
async fn a_suspension_is_refused_while_a_local_resume_is_reserved() {
    let engine = read_engine();
    let (run, snapshot) = suspended(&engine).await;
    let reservation = run.prepare_local_resume().expect("reserves the boundary");
    assert_eq!(
        within("the refusal", run.suspend()).await,
        Err(SuspendError::ResumeReserved)
    );
    assert_eq!(
        run.status(),
        RunStatus::Suspended,
        "the reservation decides"
    );
    // Given back, the boundary is the caller's again.
    reservation.abort().await.expect("holds no lease");
    assert_eq!(within("the suspension", run.suspend()).await, Ok(()));
    assert_eq!(run.snapshot().expect("exportable"), snapshot);
    // Committed, the run goes on: suspending it asks for the next boundary as usual.
    run.prepare_local_resume().expect("reserves").commit();
    within("the run", run.wait()).await.expect("completes");
    assert_eq!(
        within("after the end", run.suspend()).await,
        Err(SuspendError::Finished)
    );
    drained(&engine).await;
}

#[tokio::test]
async fn a_reserved_local_resume_is_inert_and_abort_restores_the_exact_snapshot() {
    let engine = read_engine();
    let (run, snapshot) = suspended(&engine).await;
    let before = snapshot.to_json();
    let events_before = envelopes(&run).len();

    let reservation = run.prepare_local_resume().expect("reserves the boundary");
    assert_eq!(reservation.run_id(), run.id());
    assert_eq!(reservation.next_sequence(), snapshot.last_sequence() + 1);
    assert_eq!(
        run.prepare_local_resume().expect_err("one reservation"),
        SuspendError::ResumeReserved
    );
    assert_eq!(run.resume(), Err(SuspendError::ResumeReserved));
    assert_eq!(run.snapshot(), Err(SnapshotError::ResumeReserved));
    tokio::task::yield_now().await;
    assert_eq!(run.status(), RunStatus::Suspended);
    assert_eq!(envelopes(&run).len(), events_before, "nothing happened");

    reservation.abort().await.expect("holds no lease");
    assert_eq!(run.status(), RunStatus::Suspended);
    assert_eq!(run.snapshot().expect("exportable again").to_json(), before);

    // Dropping a reservation aborts it the same way.
    drop(run.prepare_local_resume().expect("reserves again"));
    assert_eq!(run.snapshot().expect("exportable").to_json(), before);

    run.prepare_local_resume().expect("reserves").commit();
    within("the run", run.wait()).await.expect("completes");
    assert_eq!(assert_log(&run, 1), EventKind::RunCompleted);
    drained(&engine).await;
}

#[tokio::test]
async fn a_cancellation_during_a_reserved_resume_is_latched_and_skips_post_boundary_work() {
    for commit in [true, false] {
        let name = if commit { "commit" } else { "abort" };
        let engine = read_engine();
        let (run, snapshot) = suspended(&engine).await;
        let events_before = envelopes(&run).len();
        let reservation = run.prepare_local_resume().expect("reserves");
        run.cancel();
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(run.status(), RunStatus::Suspended, "{name}: latched");
        assert_eq!(envelopes(&run).len(), events_before, "{name}");
        if commit {
            reservation.commit();
        } else {
            reservation.abort().await.expect("holds no lease");
        }
        let error = within(name, run.wait()).await.expect_err("cancelled");
        assert!(error.is_cancelled(), "{name}");
        let log = envelopes(&run);
        let after: Vec<EventKind> = log[events_before..].iter().map(|e| e.kind()).collect();
        assert_eq!(
            after,
            [EventKind::RunCancelled],
            "{name}: no post-boundary work"
        );
        assert_eq!(check_log(&log, 1), Ok(EventKind::RunCancelled), "{name}");
        let terminal = terminal_snapshot(&run);
        assert_eq!(
            terminal.completed_turns(),
            snapshot.completed_turns(),
            "{name}"
        );
        drained(&engine).await;
    }
}

#[tokio::test]
async fn engine_shutdown_waits_for_a_reserved_resume_decision() {
    let engine = read_engine();
    let (run, _) = suspended(&engine).await;
    let reservation = run.prepare_local_resume().expect("reserves");
    let mut shutdown = Box::pin(engine.shutdown());
    for _ in 0..10 {
        assert!(still_pending(&mut shutdown).await, "shutdown waits");
        tokio::task::yield_now().await;
    }
    assert_eq!(run.status(), RunStatus::Suspended);
    reservation.commit();
    within("the shutdown", shutdown).await;
    assert_eq!(run.status(), RunStatus::Cancelled);
    let after: Vec<EventKind> = kinds(&run).into_iter().rev().take(2).collect();
    assert_eq!(after, [EventKind::RunCancelled, EventKind::TurnCompleted]);
}

/// `resume` files the run's token with its reservation, as `start` does: shutdown reaches
/// the resumed run while it waits on the model and before its task ever ran, and refuses
/// every later import.
#[tokio::test]
async fn shutdown_cancels_resumed_runs_and_refuses_later_resumes() {
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;
    for wait_for_the_model in [true, false] {
        let (signal, mut signalled) = signal();
        let blocking = FaultProvider::new(vec![Script::steps([Step::Block])], Some(signal));
        let engine2 = engine(blocking, vec![ScriptTool::read(Act::Succeed).arc()]);
        let resumed = engine2.resume(snapshot.clone()).await.expect("resumes");
        if wait_for_the_model {
            within("the model", signalled.recv())
                .await
                .expect("the resumed run asks the model");
        }
        within("the shutdown", engine2.shutdown()).await;
        let error = within("the resumed run", resumed.wait())
            .await
            .expect_err("cancelled");
        assert!(error.is_cancelled(), "{wait_for_the_model}: {error}");
        assert_eq!(resumed.status(), RunStatus::Cancelled);
        assert_eq!(kinds(&resumed).last(), Some(&EventKind::RunCancelled));
        assert_eq!(engine2.live_runs(), 0);
        assert_eq!(
            engine2.resume(snapshot.clone()).await.expect_err("closed"),
            StartError::Closed
        );
    }
    original.cancel();
    within("the original", original.wait())
        .await
        .expect_err("cancelled while suspended");
    drained(&engine1).await;
}

// ---------------------------------------------------------------------------------------
// Run identity across imports
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn an_import_is_refused_once_its_id_was_used_here() {
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;
    let id = snapshot.run_id().clone();

    // An aborted import leaves the id unused: the engine never ran it.
    let engine2 = read_engine();
    let prepared = engine2
        .prepare_resume(snapshot.clone())
        .await
        .expect("prepares");
    prepared.abort().await.expect("aborts");
    assert!(!engine2.is_retired(&id));
    let resumed = engine2.resume(snapshot.clone()).await.expect("resumes");
    within("the resumed run", resumed.wait())
        .await
        .expect("completes");
    assert!(engine2.is_retired(&id), "an ended run's id is retired");
    assert_eq!(
        engine2.resume(snapshot.clone()).await.expect_err("used"),
        StartError::RetiredRun(id.clone())
    );

    // An engine whose own counter issued the id refuses it too.
    let engine3 = read_engine();
    let own = engine3.start(&agent(5), input()).await.expect("started");
    assert_eq!(own.id(), id.as_str());
    within("its own run", own.wait()).await.expect("completes");
    assert_eq!(
        engine3.resume(snapshot.clone()).await.expect_err("used"),
        StartError::RetiredRun(id.clone())
    );

    // A host may retire an id it never ran here.
    let engine4 = read_engine();
    engine4.retire(&id).expect("retires");
    assert_eq!(
        engine4.resume(snapshot).await.expect_err("retired"),
        StartError::RetiredRun(id.clone())
    );

    original.cancel();
    let _ = within("the original", original.wait()).await;
    assert_eq!(engine1.retire(&id), Ok(()), "ended, so already retired");
    for engine in [&engine1, &engine2, &engine3, &engine4] {
        drained(engine).await;
    }
}

/// What a host sees of an id at each stage of an import, and of a suspended run whose
/// local resume is reserved (the run's own decision: its id stays started and live).
#[tokio::test]
async fn the_ledger_counts_an_import_reserved_paused_live_then_retired() {
    use agent_core::agent::RunIdentityCounts;
    let counts = |reserved, live, retired| RunIdentityCounts {
        reserved,
        live,
        retired,
    };
    let engine1 = read_engine();
    let (original, snapshot) = suspended(&engine1).await;
    let id = snapshot.run_id().clone();
    assert_eq!(engine1.identity_counts(), counts(0, 1, 0));
    assert!(engine1.is_live(&id) && !engine1.is_paused(&id));
    let reservation = original.prepare_local_resume().expect("reserves");
    assert_eq!(engine1.identity_counts(), counts(0, 1, 0));
    assert!(
        !engine1.is_paused(&id),
        "a local resume is not a paused run"
    );
    reservation.abort().await.expect("holds no lease");

    let engine2 = read_engine();
    assert_eq!(engine2.identity_counts(), RunIdentityCounts::default());
    let prepared = engine2
        .prepare_resume(snapshot.clone())
        .await
        .expect("prepares");
    assert_eq!(engine2.identity_counts(), counts(1, 1, 0));
    assert!(engine2.is_live(&id) && !engine2.is_paused(&id));
    let paused = prepared
        .commit_paused(&CancellationToken::new())
        .expect("paused");
    assert_eq!(engine2.identity_counts(), counts(1, 1, 0));
    assert!(engine2.is_paused(&id));
    paused.abort().await.expect("aborts");
    // An aborted import is forgotten, not retired: the engine never ran it.
    assert_eq!(engine2.identity_counts(), counts(0, 0, 0));
    assert!(!engine2.is_live(&id) && !engine2.is_paused(&id) && !engine2.is_retired(&id));

    let run = engine2
        .prepare_resume(snapshot)
        .await
        .expect("prepares again")
        .commit_paused(&CancellationToken::new())
        .expect("paused")
        .activate();
    assert_eq!(engine2.identity_counts(), counts(0, 1, 0));
    assert!(engine2.is_live(&id) && !engine2.is_paused(&id));
    within("the resumed run", run.wait())
        .await
        .expect("completes");
    assert_eq!(engine2.identity_counts(), counts(0, 0, 1));
    assert!(!engine2.is_live(&id) && engine2.is_retired(&id));

    original.cancel();
    let _ = within("the original", original.wait()).await;
    assert_eq!(engine1.identity_counts(), counts(0, 0, 1));
    drained(&engine1).await;
    drained(&engine2).await;
}

// ---------------------------------------------------------------------------------------
// Plan identity and compatibility across engines
// ---------------------------------------------------------------------------------------

/// Counts the generations leased for resumption, over a static plan of one `read` tool.
struct CountingLeases {
    inner: Arc<dyn ToolPlanSource>,
    generations: Arc<AtomicUsize>,
}

impl ToolPlanSource for CountingLeases {
    fn lease_current<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        self.inner.lease_current(cancel)
    }

    fn lease_generation<'a>(
        &'a self,
        id: &'a PlanId,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        self.generations.fetch_add(1, Ordering::SeqCst);
        self.inner.lease_generation(id, cancel)
    }
}

/// An engine like [`read_engine`] that states `identity` and counts resumption leases.
fn engine_stating(identity: EngineIdentity) -> (Engine, Arc<AtomicUsize>) {
    let generations = Arc::new(AtomicUsize::new(0));
    let source = CountingLeases {
        inner: plans(vec![ScriptTool::read(Act::Succeed).arc()], Vec::new()),
        generations: generations.clone(),
    };
    let engine = Setup::new(two_reads_then_answer(), Arc::new(source))
        .build_with(|builder| builder.identity(identity));
    (engine, generations)
}

fn compiled() -> EngineIdentity {
    EngineIdentity::new(["tool:read@1", "model_provider:scripted@2"]).unwrap()
}

/// The original checks an import's id before it leases anything: a refused id costs no
/// lease, and a retired id is reported as retired even where its plan generation is gone.
#[tokio::test]
async fn an_import_checks_its_id_before_it_leases_a_plan() {
    let ours = compiled().with_compatibility("app/1").unwrap();
    let (engine1, leases1) = engine_stating(ours.clone());
    let (original, snapshot) = suspended(&engine1).await;
    let id = snapshot.run_id().clone();

    // Live here: refused, by both paths, with nothing leased.
    assert_eq!(
        engine1.resume(snapshot.clone()).await.expect_err("live"),
        StartError::DuplicateRun(id.clone())
    );
    assert_eq!(
        engine1
            .prepare_resume(snapshot.clone())
            .await
            .expect_err("live"),
        StartError::DuplicateRun(id.clone())
    );
    assert_eq!(
        leases1.load(Ordering::SeqCst),
        0,
        "a live id costs no lease"
    );

    // Accepted elsewhere: exactly one lease; once it ended, refused without another.
    let (engine2, leases2) = engine_stating(ours.clone());
    let resumed = engine2.resume(snapshot.clone()).await.expect("resumes");
    assert_eq!(leases2.load(Ordering::SeqCst), 1, "one lease per import");
    within("the resumed run", resumed.wait())
        .await
        .expect("completes");
    assert_eq!(
        engine2.resume(snapshot.clone()).await.expect_err("used"),
        StartError::RetiredRun(id.clone())
    );
    assert_eq!(
        leases2.load(Ordering::SeqCst),
        1,
        "a used id costs no lease"
    );

    // An engine whose tools changed no longer has the generation ...
    let other_read = Definition::builder("read", "Read something else.")
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .build()
        .unwrap();
    let leases3 = Arc::new(AtomicUsize::new(0));
    let source = CountingLeases {
        inner: plans(
            vec![ScriptTool::new(other_read, Act::Succeed).arc()],
            Vec::new(),
        ),
        generations: leases3.clone(),
    };
    let engine3 = Setup::new(two_reads_then_answer(), Arc::new(source))
        .build_with(|builder| builder.identity(ours));
    assert!(matches!(
        engine3.resume(snapshot.clone()).await.expect_err("gone"),
        StartError::Plan(PlanError::UnknownGeneration(_))
    ));
    assert_eq!(leases3.load(Ordering::SeqCst), 1);
    // ... and once the host retired the id, the id is what it reports, without a lease.
    engine3.retire(&id).expect("retires");
    assert_eq!(
        engine3.resume(snapshot.clone()).await.expect_err("retired"),
        StartError::RetiredRun(id.clone())
    );
    assert_eq!(
        leases3.load(Ordering::SeqCst),
        1,
        "a retired id costs no lease"
    );

    original.cancel();
    let _ = within("the original", original.wait()).await;
    for engine in [&engine1, &engine2, &engine3] {
        drained(engine).await;
    }
}

#[tokio::test]
async fn local_suspend_and_resume_need_no_compatibility_identity() {
    let (engine, _) = engine_stating(EngineIdentity::default());
    let (run, snapshot) = suspended(&engine).await;
    assert_eq!(snapshot.compatibility(), None);
    run.resume().expect("resumes in place");
    within("the run", run.wait()).await.expect("completes");
    drained(&engine).await;
}

#[tokio::test]
async fn snapshots_move_only_between_engines_of_one_identity_checked_before_leasing() {
    let ours = compiled().with_compatibility("app/1").unwrap();
    let (engine1, _) = engine_stating(ours.clone());
    let (original, snapshot) = suspended(&engine1).await;
    assert_eq!(snapshot.compatibility(), Some("app/1"));
    assert_eq!(snapshot.static_identity(), ours.static_identity());
    assert_eq!(snapshot.plan_identity(), original.plan_identity());

    let rows: Vec<(&str, EngineIdentity, Incompatibility)> = vec![
        (
            "no compatibility identity here",
            compiled(),
            Incompatibility::NoCompatibilityIdentity,
        ),
        (
            "another compatibility identity",
            compiled().with_compatibility("app/2").unwrap(),
            Incompatibility::CompatibilityIdentity,
        ),
        (
            "other compiled identities",
            EngineIdentity::new(["tool:read@1", "model_provider:scripted@3"])
                .unwrap()
                .with_compatibility("app/1")
                .unwrap(),
            Incompatibility::StaticIdentity,
        ),
        (
            "another workspace",
            ours.clone()
                .with_workspace(EngineIdentity::workspace_of(b"/elsewhere"))
                .unwrap(),
            Incompatibility::StaticIdentity,
        ),
    ];
    for (name, identity, why) in rows {
        let (engine, generations) = engine_stating(identity);
        let error = engine.resume(snapshot.clone()).await.expect_err(name);
        assert_eq!(error, StartError::Incompatible(why), "{name}");
        assert_eq!(
            generations.load(Ordering::SeqCst),
            0,
            "{name}: nothing leased"
        );
        assert_eq!(engine.live_runs(), 0, "{name}");
    }
    // A snapshot without a compatibility identity moves nowhere.
    let (local, _) = engine_stating(compiled());
    let (local_run, local_snapshot) = suspended(&local).await;
    let (same, generations) = engine_stating(compiled());
    assert_eq!(
        same.resume(local_snapshot).await.expect_err("local only"),
        StartError::Incompatible(Incompatibility::NoCompatibilityIdentity)
    );
    assert_eq!(generations.load(Ordering::SeqCst), 0);

    // The same identity resumes, under the snapshot's plan identity.
    let (engine2, generations) = engine_stating(ours);
    let resumed = engine2.resume(snapshot.clone()).await.expect("resumes");
    assert_eq!(generations.load(Ordering::SeqCst), 1);
    assert_eq!(resumed.plan_identity(), original.plan_identity());
    within("the resumed run", resumed.wait())
        .await
        .expect("completes");
    let started: Vec<String> = events(&resumed)
        .into_iter()
        .filter_map(|e| match e {
            Event::ToolStarted(s) => Some(s.plan_identity.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(started, [snapshot.plan_identity().fingerprint().to_owned()]);

    for run in [&original, &local_run] {
        run.cancel();
        let _ = within("a suspended run", run.wait()).await;
    }
    for engine in [&engine1, &local, &same, &engine2] {
        drained(engine).await;
    }
}

#[tokio::test]
async fn the_plan_identity_covers_every_part() {
    async fn identity_of(
        identity: EngineIdentity,
        tools: Vec<Arc<dyn agent_core::tool::Tool>>,
    ) -> String {
        let engine = Setup::new(two_reads_then_answer(), plans(tools, Vec::new()))
            .build_with(|builder| builder.identity(identity));
        let run = engine.start(&agent(5), input()).await.expect("started");
        let fingerprint = run.plan_identity().fingerprint().to_owned();
        run.cancel();
        let _ = within("the run", run.wait()).await;
        drained(&engine).await;
        fingerprint
    }
    let read = || vec![ScriptTool::read(Act::Succeed).arc()];
    let base = identity_of(compiled(), read()).await;
    assert_eq!(base, identity_of(compiled(), read()).await, "deterministic");
    let other_tool = || {
        vec![
            ScriptTool::new(
                definition("send", Effect::Mutating, ReplaySafety::Unsafe),
                Act::Succeed,
            )
            .arc(),
        ]
    };
    let variants = [
        (
            "compatibility",
            compiled().with_compatibility("x").unwrap(),
            read(),
        ),
        (
            "workspace",
            compiled()
                .with_workspace(EngineIdentity::workspace_of(b"/w"))
                .unwrap(),
            read(),
        ),
        (
            "compiled",
            EngineIdentity::new(["tool:read@1"]).unwrap(),
            read(),
        ),
        ("definitions", compiled(), other_tool()),
    ];
    for (name, identity, tools) in variants {
        assert_ne!(identity_of(identity, tools).await, base, "{name}");
    }
}
