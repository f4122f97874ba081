//! Property test of the engine over random model scripts: whatever the model streams (text,
//! calls to declared, failing or unknown tools, reused call ids, completion, failure, stream
//! errors, premature ends, provider errors) and wherever the run is cancelled, every run's
//! log is gap-free with exactly one terminal, last; every committed start is closed exactly
//! once; `wait()` agrees with the terminal (and with a reference model of the loop); the
//! terminal snapshot validates; and a failed or cancelled run resumes from it consistently.
//! A second property drives the host decisions (commit, commit paused then activate or abort,
//! abort, cancellation while paused) in any order: run ids are never reused, aborted runs
//! publish nothing, and the engine drains. A third drives the run-identity ledger as a
//! state machine and checks its counts and per-id answers against a model after each step.

mod engine_support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use agent_core::agent::{Run, RunStatus, Snapshot, SnapshotStatus};
use agent_core::event::{Envelope, EventKind, FailureCode, Observer, ObserverError};
use agent_core::model::{ModelProblem, ProviderError, StreamError, StreamEvent};
use agent_core::tool::{BoxFuture, Effect, ReplaySafety};
use engine_support::*;
use proptest::prelude::*;

/// A tool the model may call; `Nope` is not declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Succeeds.
    Read,
    /// Answers with a model-visible problem.
    Probe,
    /// Fails with a definitive execution error.
    Fail,
    /// Undeclared.
    Nope,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Read => "read",
            Target::Probe => "probe",
            Target::Fail => "fail",
            Target::Nope => "nope",
        }
    }
}

#[derive(Debug, Clone)]
enum Item {
    /// A text delta; empty breaks the protocol.
    Text(String),
    /// A call with a fresh id.
    Call(Target),
    /// A call to `read` with the id `dup` (a duplicate from its second use on).
    Dup,
}

#[derive(Debug, Clone, Copy)]
enum End {
    Completed,
    Failed,
    StreamError { retryable: bool },
    Premature,
    ProviderError,
}

#[derive(Debug, Clone)]
struct Turn {
    items: Vec<Item>,
    end: End,
}

fn item() -> impl Strategy<Value = Item> {
    prop_oneof![
        1 => Just(Item::Text(String::new())),
        6 => "[a-z ]{1,6}".prop_map(Item::Text),
        6 => Just(Item::Call(Target::Read)),
        2 => Just(Item::Call(Target::Probe)),
        1 => Just(Item::Call(Target::Fail)),
        1 => Just(Item::Call(Target::Nope)),
        1 => Just(Item::Dup),
    ]
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        12 => Just(End::Completed),
        1 => Just(End::Failed),
        1 => any::<bool>().prop_map(|retryable| End::StreamError { retryable }),
        1 => Just(End::Premature),
        1 => Just(End::ProviderError),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    (prop::collection::vec(item(), 0..4), end()).prop_map(|(items, end)| Turn { items, end })
}

fn scripts(turns: &[Turn]) -> Vec<Script> {
    turns
        .iter()
        .enumerate()
        .map(|(index, turn)| {
            let mut steps = Vec::new();
            for (i, item) in turn.items.iter().enumerate() {
                let event = match item {
                    Item::Text(text) => StreamEvent::TextDelta(text.clone()),
                    Item::Call(target) => {
                        StreamEvent::ToolCall(call(&format!("t{}-{i}", index + 1), target.name()))
                    }
                    Item::Dup => StreamEvent::ToolCall(call("dup", "read")),
                };
                steps.push(Step::Item(event));
            }
            let problem = ModelProblem::new("scripted", "scripted failure");
            match turn.end {
                End::Completed => steps.push(Step::Item(completed())),
                End::Failed => steps.push(Step::Item(StreamEvent::Failed(problem))),
                End::StreamError { retryable } => {
                    steps.push(Step::Error(StreamError::new(problem.retryable(retryable))));
                }
                End::Premature => steps.push(Step::End),
                End::ProviderError => {
                    return Script::steps([]).opening(Opening::Refuse(ProviderError::new(problem)));
                }
            }
            Script::steps(steps)
        })
        .collect()
}

/// What the loop must do with these scripts when nothing cancels it: `Ok(turns)` or the
/// failure code.
fn reference(turns: &[Turn], max_turns: u32) -> Result<u32, FailureCode> {
    let mut ids = BTreeSet::new();
    for (index, turn) in turns.iter().enumerate().take(max_turns as usize) {
        let number = index as u32 + 1;
        if let End::ProviderError = turn.end {
            return Err(FailureCode::ModelFailed);
        }
        let mut calls = Vec::new();
        for (i, item) in turn.items.iter().enumerate() {
            match item {
                Item::Text(text) if text.is_empty() => return Err(FailureCode::ModelProtocol),
                Item::Text(_) => {}
                Item::Call(target) => calls.push((format!("t{number}-{i}"), *target)),
                Item::Dup => calls.push(("dup".to_owned(), Target::Read)),
            }
        }
        match turn.end {
            End::Completed => {}
            End::Failed | End::StreamError { .. } | End::ProviderError => {
                return Err(FailureCode::ModelFailed);
            }
            End::Premature => return Err(FailureCode::ModelProtocol),
        }
        if calls.is_empty() {
            return Ok(number);
        }
        for (id, _) in &calls {
            if !ids.insert(id.clone()) {
                return Err(FailureCode::DuplicateCallId);
            }
        }
        for (_, target) in &calls {
            match target {
                Target::Read | Target::Probe => {}
                Target::Fail => return Err(FailureCode::ToolFailed),
                Target::Nope => return Err(FailureCode::UndeclaredTool),
            }
        }
    }
    Err(FailureCode::MaxTurnsExceeded)
}

/// Cancels the run when it publishes its `at`-th event (from 1), if it gets that far.
struct CancelAt {
    at: usize,
    seen: AtomicUsize,
    run: Arc<OnceLock<Run>>,
}

impl Observer for CancelAt {
    fn publish<'a>(&'a self, _envelope: &'a Envelope) -> BoxFuture<'a, Result<(), ObserverError>> {
        if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.at
            && let Some(run) = self.run.get()
        {
            run.cancel();
        }
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The declared tools: `read` succeeds, `probe` answers a problem, `fail` fails.
fn tools() -> Vec<Arc<dyn agent_core::tool::Tool>> {
    vec![
        ScriptTool::read(Act::Succeed).arc(),
        ScriptTool::new(
            definition("probe", Effect::ReadOnly, ReplaySafety::Safe),
            Act::Problem,
        )
        .arc(),
        ScriptTool::new(
            definition("fail", Effect::Mutating, ReplaySafety::Unsafe),
            Act::Definitive,
        )
        .arc(),
    ]
}

async fn check(turns: Vec<Turn>, max_turns: u32, cancel_at: Option<usize>) {
    let provider = FaultProvider::new(scripts(&turns), None);
    let slot = Arc::new(OnceLock::new());
    let mut setup = Setup::new(provider, plans(tools(), Vec::new()));
    if let Some(at) = cancel_at {
        setup = setup.observer(Arc::new(CancelAt {
            at,
            seen: AtomicUsize::new(0),
            run: slot.clone(),
        }));
    }
    let engine = setup.build();
    let run = engine
        .start(&agent(max_turns), input())
        .await
        .expect("started");
    slot.set(run.clone()).expect("set once");
    let outcome = within("the run", run.wait()).await;

    let log = envelopes(&run);
    let terminal = match check_log(&log, 1) {
        Ok(kind) => kind,
        Err(why) => {
            let kinds: Vec<&str> = log.iter().map(|e| e.kind().as_str()).collect();
            panic!("{why}\nlog: {kinds:?}");
        }
    };
    match &outcome {
        Ok(_) => assert_eq!(terminal, EventKind::RunCompleted),
        Err(e) if e.is_cancelled() => assert_eq!(terminal, EventKind::RunCancelled),
        Err(e) => {
            assert_eq!(terminal, EventKind::RunFailed);
            assert_eq!(
                log.last().map(|e| e.event().clone()),
                Some(agent_core::event::Event::RunFailed { code: e.code() })
            );
        }
    }
    let expected = reference(&turns, max_turns);
    let got = outcome
        .as_ref()
        .map(|output| output.turns)
        .map_err(|e| e.code());
    if cancel_at.is_some() {
        assert!(
            got == expected || got == Err(FailureCode::Cancelled),
            "got {got:?}, expected {expected:?} or cancelled"
        );
    } else {
        assert_eq!(got, expected);
    }
    let status = run.status();
    assert_eq!(
        status,
        match &outcome {
            Ok(_) => RunStatus::Completed,
            Err(e) if e.is_cancelled() => RunStatus::Cancelled,
            Err(_) => RunStatus::Failed,
        }
    );

    let snapshot = run.snapshot().expect("a finished run has a snapshot");
    let back = Snapshot::from_json(&snapshot.to_json());
    assert_eq!(
        back.as_ref(),
        Ok(&snapshot),
        "the terminal snapshot validates"
    );
    assert_eq!(
        snapshot.status(),
        match status {
            RunStatus::Completed => SnapshotStatus::Completed,
            RunStatus::Cancelled => SnapshotStatus::Cancelled,
            _ => SnapshotStatus::Failed,
        }
    );
    assert_eq!(snapshot.last_sequence(), log.last().unwrap().sequence());
    drained(&engine).await;
    if status != RunStatus::Completed {
        resume_answering(snapshot).await;
    }
}

/// Resumes a failed or cancelled snapshot on a fresh engine with the same tools whose model
/// always answers: the open calls are settled and the run ends consistently after the
/// snapshot's last event.
async fn resume_answering(snapshot: Snapshot) {
    let provider = FaultProvider::new(vec![Script::answer("done")], None);
    let engine = Setup::new(provider, plans(tools(), Vec::new())).build();
    let run = engine.resume(snapshot.clone()).await.expect("resumes");
    let outcome = within("the resumed run", run.wait()).await;
    let log = envelopes(&run);
    let terminal = match check_log(&log, snapshot.last_sequence() + 1) {
        Ok(kind) => kind,
        Err(why) => {
            let kinds: Vec<&str> = log.iter().map(|e| e.kind().as_str()).collect();
            panic!("resumed: {why}\nlog: {kinds:?}");
        }
    };
    match &outcome {
        Ok(output) => {
            assert_eq!(terminal, EventKind::RunCompleted);
            assert_eq!(output.answer, "done");
        }
        // Settling re-runs a call to `fail` that never started; no turn may be left.
        Err(e) => {
            assert_eq!(terminal, EventKind::RunFailed);
            assert!(
                matches!(
                    e.code(),
                    FailureCode::ToolFailed | FailureCode::MaxTurnsExceeded
                ),
                "resumed run failed with {e}"
            );
        }
    }
    let end = run.snapshot().expect("snapshot");
    assert_eq!(
        Snapshot::from_json(&end.to_json()).as_ref(),
        Ok(&end),
        "the resumed run's snapshot validates"
    );
    assert_eq!(end.run_id(), snapshot.run_id());
    assert!(end.history().starts_with(snapshot.history()));
    drained(&engine).await;
}

/// One host decision about a prepared run.
#[derive(Debug, Clone, Copy)]
enum Decision {
    Commit,
    Abort,
    PausedActivate { cancel_first: bool },
    PausedAbort,
    Drop,
}

fn decision() -> impl Strategy<Value = Decision> {
    prop_oneof![
        Just(Decision::Commit),
        Just(Decision::Abort),
        any::<bool>().prop_map(|cancel_first| Decision::PausedActivate { cancel_first }),
        Just(Decision::PausedAbort),
        Just(Decision::Drop),
    ]
}

async fn decide(decisions: Vec<Decision>) {
    let scripts = decisions.iter().map(|_| Script::answer("ok")).collect();
    let journal = journal();
    let engine = Setup::new(
        FaultProvider::new(scripts, None),
        plans(Vec::new(), Vec::new()),
    )
    .observer(Arc::new(TestObserver::new(journal.clone())))
    .build();
    let mut seen = BTreeSet::new();
    let mut published = 0usize;
    for decision in decisions {
        let root = tokio_util::sync::CancellationToken::new();
        let prepared = engine.prepare(&agent(1), input()).await.expect("prepared");
        let id = prepared.run_id().clone();
        assert!(seen.insert(id.clone()), "run id {id} reused");
        assert!(!engine.is_retired(&id));
        match decision {
            Decision::Commit => {
                let run = prepared.commit(&root).expect("committed");
                within("the run", run.wait()).await.expect("completes");
                published += envelopes(&run).len();
            }
            Decision::Abort => prepared.abort().await.expect("aborted"),
            Decision::Drop => drop(prepared),
            Decision::PausedAbort => {
                let paused = prepared.commit_paused(&root).expect("paused");
                paused.abort().await.expect("aborted");
            }
            Decision::PausedActivate { cancel_first } => {
                let paused = prepared.commit_paused(&root).expect("paused");
                if cancel_first {
                    root.cancel();
                }
                let run = paused.activate();
                let outcome = within("the run", run.wait()).await;
                assert_eq!(outcome.is_err(), cancel_first);
                published += envelopes(&run).len();
            }
        }
        drop_wait(&engine).await;
        assert!(engine.is_retired(&id), "{decision:?}: the id is retired");
        assert_eq!(entries(&journal).len(), published, "{decision:?}");
    }
    drained(&engine).await;
}

/// Waits until no run is live (a dropped preparation releases in the background).
async fn drop_wait(engine: &agent_core::agent::Engine) {
    within("the engine to forget the run", async {
        while engine.live_runs() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// One step of the identity-ledger state machine; `usize`s pick among the matching runs.
#[derive(Debug, Clone, Copy)]
enum LedgerOp {
    Prepare,
    CommitPaused(usize),
    Activate(usize),
    Commit(usize),
    Abort(usize),
    Drop(usize),
    End(usize),
    Retire(u8),
}

fn ledger_op() -> impl Strategy<Value = LedgerOp> {
    prop_oneof![
        2 => Just(LedgerOp::Prepare),
        1 => any::<usize>().prop_map(LedgerOp::CommitPaused),
        1 => any::<usize>().prop_map(LedgerOp::Activate),
        1 => any::<usize>().prop_map(LedgerOp::Commit),
        1 => any::<usize>().prop_map(LedgerOp::Abort),
        1 => any::<usize>().prop_map(LedgerOp::Drop),
        1 => any::<usize>().prop_map(LedgerOp::End),
        1 => (0u8..3).prop_map(LedgerOp::Retire),
    ]
}

/// A run the state machine holds, by its stage.
enum Held {
    Prepared(agent_core::agent::PreparedRun),
    Paused(agent_core::agent::PausedRun),
    Started(Run),
}

/// Drives the ledger through random host steps, runs blocking in the provider until
/// ended, and checks after every step that the engine's counts, `is_live`, `is_paused` and
/// `is_retired` agree with a model of the ledger.
async fn ledger_machine(ops: Vec<LedgerOp>) {
    use agent_core::RunId;
    use agent_core::agent::RunIdentityCounts;
    let engine = Setup::new(
        FaultProvider::new(vec![Script::steps([Step::Block])], None),
        plans(Vec::new(), Vec::new()),
    )
    .build();
    let root = tokio_util::sync::CancellationToken::new();
    let mut held: Vec<(RunId, Held)> = Vec::new();
    let mut ended: Vec<RunId> = Vec::new();
    let mut retired_by_host = BTreeSet::new();
    // The `index`-th held run (modulo) that `matches`, taken out of `held`.
    fn take(
        held: &mut Vec<(RunId, Held)>,
        index: usize,
        matches: impl Fn(&Held) -> bool,
    ) -> Option<(RunId, Held)> {
        let positions: Vec<usize> = (0..held.len()).filter(|&i| matches(&held[i].1)).collect();
        if positions.is_empty() {
            return None;
        }
        Some(held.remove(positions[index % positions.len()]))
    }
    for op in ops {
        match op {
            LedgerOp::Prepare => {
                let prepared = engine.prepare(&agent(2), input()).await.expect("prepared");
                held.push((prepared.run_id().clone(), Held::Prepared(prepared)));
            }
            LedgerOp::CommitPaused(i) => {
                if let Some((id, Held::Prepared(p))) =
                    take(&mut held, i, |h| matches!(h, Held::Prepared(_)))
                {
                    held.push((id, Held::Paused(p.commit_paused(&root).expect("paused"))));
                }
            }
            LedgerOp::Activate(i) => {
                if let Some((id, Held::Paused(p))) =
                    take(&mut held, i, |h| matches!(h, Held::Paused(_)))
                {
                    held.push((id, Held::Started(p.activate())));
                }
            }
            LedgerOp::Commit(i) => {
                if let Some((id, Held::Prepared(p))) =
                    take(&mut held, i, |h| matches!(h, Held::Prepared(_)))
                {
                    held.push((id, Held::Started(p.commit(&root).expect("committed"))));
                }
            }
            LedgerOp::Abort(i) => match take(&mut held, i, |h| !matches!(h, Held::Started(_))) {
                Some((id, Held::Prepared(p))) => {
                    p.abort().await.expect("aborted");
                    ended.push(id);
                }
                Some((id, Held::Paused(p))) => {
                    p.abort().await.expect("aborted");
                    ended.push(id);
                }
                _ => {}
            },
            LedgerOp::Drop(i) => {
                if let Some((id, h)) = take(&mut held, i, |h| !matches!(h, Held::Started(_))) {
                    // The id is released at once; only the lease goes in the background.
                    drop(h);
                    ended.push(id);
                }
            }
            LedgerOp::End(i) => {
                if let Some((id, Held::Started(run))) =
                    take(&mut held, i, |h| matches!(h, Held::Started(_)))
                {
                    run.cancel();
                    let outcome = within("the cancelled run", run.wait()).await;
                    assert!(outcome.expect_err("cancelled").is_cancelled());
                    ended.push(id);
                }
            }
            LedgerOp::Retire(n) => {
                let id = RunId::new(format!("host-{n}")).expect("valid");
                engine.retire(&id).expect("not live");
                retired_by_host.insert(id);
            }
        }
        let reserved = held
            .iter()
            .filter(|(_, h)| !matches!(h, Held::Started(_)))
            .count();
        let expected = RunIdentityCounts {
            reserved,
            live: held.len(),
            retired: (ended.len() + retired_by_host.len()) as u64,
        };
        assert_eq!(engine.identity_counts(), expected, "after {op:?}");
        assert_eq!(engine.live_runs(), held.len(), "after {op:?}");
        for (id, h) in &held {
            assert!(engine.is_live(id), "{id} after {op:?}");
            assert_eq!(engine.is_paused(id), matches!(h, Held::Paused(_)), "{id}");
            assert!(!engine.is_retired(id), "{id}");
        }
        for id in ended.iter().chain(&retired_by_host) {
            assert!(!engine.is_live(id) && !engine.is_paused(id), "{id}");
            assert!(engine.is_retired(id), "{id} after {op:?}");
        }
    }
    for (_, h) in held {
        match h {
            Held::Started(run) => {
                run.cancel();
                let _ = within("the run", run.wait()).await;
            }
            other => drop(other),
        }
    }
    drained(&engine).await;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn the_identity_ledger_counts_follow_every_host_step(
        ops in prop::collection::vec(ledger_op(), 1..24),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(ledger_machine(ops));
    }

    #[test]
    fn host_decisions_never_reuse_an_id_and_aborts_publish_nothing(
        decisions in prop::collection::vec(decision(), 1..8),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(decide(decisions));
    }

    #[test]
    fn every_run_ends_once_with_a_consistent_log(
        turns in prop::collection::vec(turn(), 4),
        max_turns in 1u32..=4,
        cancel_at in prop::option::weighted(0.3, 1usize..40),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(check(turns, max_turns, cancel_at));
    }
}
