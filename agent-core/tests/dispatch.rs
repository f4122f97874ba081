//! The canonical dispatcher under fault injection: every way a tool or reporter can misbehave
//! maps to one documented outcome, panics are contained without leaking their text, and
//! cancellation is reported only when it really happened.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_core::stage::{
    ContractViolation, DispatchError, Dispatcher, DispatcherError, ToolDispatcher,
};
use agent_core::tool::{
    BoxFuture, Call, Definition, ExecutionError, ExecutionState, NoopReporter, RetryDisposition,
    Tool, ToolContext, ToolResult,
};
use proptest::prelude::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use support::{
    Behaviour, INJECTED, Profile, Report, ReporterMode, ScriptedTool, TestReporter, call,
    definition, dispatch, dispatch_with, quiet_injected_panics, tool_map,
};

type Outcome = Result<ToolResult, DispatchError>;

/// One injected fault and the outcome it must produce.
struct Row {
    name: &'static str,
    profile: Profile,
    behaviour: Behaviour,
    report: Report,
    reporter: ReporterMode,
    expect: fn(&Outcome) -> bool,
    cancelled: bool,
}

fn fault_table() -> Vec<Row> {
    use Behaviour as B;
    use ContractViolation as CV;
    use DispatchError as E;
    use Profile as P;
    use Report as R;
    use ReporterMode as M;
    vec![
        Row {
            name: "panic inside the returned future",
            profile: P::ReadOnly,
            behaviour: B::PanicInFuture,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Contract(CV::ToolPanicked { tool })) if tool == "read"),
            cancelled: false,
        },
        Row {
            name: "panic before returning a future",
            profile: P::Unsafe,
            behaviour: B::PanicBeforeFuture,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Contract(CV::ToolPanicked { tool })) if tool == "send"),
            cancelled: false,
        },
        Row {
            name: "panic after a failed progress report is still a panic",
            profile: P::Idempotent,
            behaviour: B::PanicInFuture,
            report: R::Valid,
            reporter: M::Fail("reporter down"),
            expect: |o| matches!(o, Err(E::Contract(CV::ToolPanicked { .. }))),
            cancelled: false,
        },
        Row {
            name: "result for another call",
            profile: P::ReadOnly,
            behaviour: B::ResultForOtherCall,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| {
                matches!(o, Err(E::Contract(CV::ResultForOtherCall { tool, expected, found }))
                    if tool == "read" && expected == "c1" && found == "other-call")
            },
            cancelled: false,
        },
        Row {
            name: "result for another call is not hidden by a reporter failure",
            profile: P::ReadOnly,
            behaviour: B::ResultForOtherCall,
            report: R::Valid,
            reporter: M::Fail("reporter down"),
            expect: |o| matches!(o, Err(E::Contract(CV::ResultForOtherCall { .. }))),
            cancelled: false,
        },
        Row {
            name: "error for another call",
            profile: P::Idempotent,
            behaviour: B::ErrorForOtherCall,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| {
                matches!(o, Err(E::Contract(CV::ErrorForOtherCall { tool, expected, found }))
                    if tool == "put" && expected == "c1" && found == "other-call")
            },
            cancelled: false,
        },
        Row {
            name: "uncertain from a read-only tool",
            profile: P::ReadOnly,
            behaviour: B::Uncertain,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Contract(CV::UncertainFromReadOnly { tool })) if tool == "read"),
            cancelled: false,
        },
        Row {
            name: "uncertain from a mutating tool is an execution error",
            profile: P::Unsafe,
            behaviour: B::Uncertain,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| {
                matches!(o, Err(E::Execution(e))
                    if e.state() == ExecutionState::Uncertain && e.retry() == RetryDisposition::Never)
            },
            cancelled: false,
        },
        Row {
            name: "retryable from a replay-unsafe tool",
            profile: P::Unsafe,
            behaviour: B::Retryable,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Contract(CV::RetryFromReplayUnsafe { tool })) if tool == "send"),
            cancelled: false,
        },
        Row {
            name: "retryable from an idempotent tool is an execution error",
            profile: P::Idempotent,
            behaviour: B::Retryable,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Execution(e)) if e.retry() == RetryDisposition::Allowed),
            cancelled: false,
        },
        Row {
            name: "oversized result",
            profile: P::ReadOnly,
            behaviour: B::TooLarge,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Contract(CV::ResultTooLarge { .. }))),
            cancelled: false,
        },
        Row {
            name: "reporter fails while the tool succeeds: result discarded",
            profile: P::ReadOnly,
            behaviour: B::Succeed,
            report: R::Valid,
            reporter: M::Fail("reporter down"),
            expect: |o| matches!(o, Err(E::Reporter(r)) if r.message() == "reporter down"),
            cancelled: false,
        },
        Row {
            name: "reporter fails while the tool answers with a problem",
            profile: P::Idempotent,
            behaviour: B::Problem,
            report: R::Valid,
            reporter: M::Fail("reporter down"),
            expect: |o| matches!(o, Err(E::Reporter(_))),
            cancelled: false,
        },
        Row {
            name: "reporter panics while the tool succeeds",
            profile: P::ReadOnly,
            behaviour: B::Succeed,
            report: R::Valid,
            reporter: M::Panic,
            expect: |o| matches!(o, Err(E::Reporter(r)) if r.message() == "reporter panicked"),
            cancelled: false,
        },
        Row {
            name: "execution cancelled and reporter failed: cancelled",
            profile: P::Unsafe,
            behaviour: B::CancelledError,
            report: R::Valid,
            reporter: M::Fail("reporter down"),
            expect: |o| {
                matches!(o, Err(E::Failure(f))
                    if f.execution().is_cancelled() && f.reporter().message() == "reporter down")
            },
            cancelled: true,
        },
        Row {
            name: "execution failed and reporter failed looking cancelled: not cancelled",
            profile: P::Unsafe,
            behaviour: B::Definitive,
            report: R::Valid,
            reporter: M::Fail("cancelled"),
            expect: |o| {
                matches!(o, Err(E::Failure(f))
                    if !f.execution().is_cancelled() && f.execution().message() == "disk full")
            },
            cancelled: false,
        },
        Row {
            name: "tool returns ExecutionError::cancelled",
            profile: P::ReadOnly,
            behaviour: B::CancelledError,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Execution(e)) if e.is_cancelled() && e.call_id() == "c1"),
            cancelled: true,
        },
        Row {
            name: "definitive failure",
            profile: P::Idempotent,
            behaviour: B::Definitive,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Execution(e)) if e.message() == "disk full"),
            cancelled: false,
        },
        Row {
            name: "progress for another call is rejected and remembered",
            profile: P::ReadOnly,
            behaviour: B::Succeed,
            report: R::OtherCall,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Reporter(r)) if r.message().contains("another call")),
            cancelled: false,
        },
        Row {
            name: "empty progress message is rejected and remembered",
            profile: P::ReadOnly,
            behaviour: B::Succeed,
            report: R::EmptyMessage,
            reporter: M::Accept,
            expect: |o| matches!(o, Err(E::Reporter(r)) if r.message().contains("empty")),
            cancelled: false,
        },
        Row {
            name: "valid progress with a working reporter",
            profile: P::ReadOnly,
            behaviour: B::Succeed,
            report: R::Valid,
            reporter: M::Accept,
            expect: |o| matches!(o, Ok(r) if r.call_id() == "c1" && r.content() == "ok:c1" && !r.is_problem()),
            cancelled: false,
        },
        Row {
            name: "problem result",
            profile: P::Unsafe,
            behaviour: B::Problem,
            report: R::Nothing,
            reporter: M::Accept,
            expect: |o| matches!(o, Ok(r) if r.is_problem() && r.content() == "problem:c1"),
            cancelled: false,
        },
    ]
}

#[tokio::test]
async fn fault_injection_table() {
    quiet_injected_panics();
    for row in fault_table() {
        let name = row.profile.tool_name();
        let tool = ScriptedTool::new(definition(name, row.profile));
        let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
        let reporter = TestReporter::new(row.reporter);
        let cancel = CancellationToken::new();
        let call = call("c1", name, row.behaviour, row.report);

        let outcome = dispatch_with(&dispatcher, &call, &reporter, &cancel).await;

        assert!((row.expect)(&outcome), "{}: got {outcome:?}", row.name);
        assert_eq!(tool.calls(), 1, "{}: the tool runs once", row.name);
        if let Err(error) = &outcome {
            assert_eq!(error.is_cancelled(), row.cancelled, "{}", row.name);
            for text in [error.to_string(), format!("{error:?}")] {
                assert!(!text.contains(INJECTED), "{}: leaked {text:?}", row.name);
            }
        } else {
            assert!(!row.cancelled, "{}", row.name);
        }
        // Only valid notes reach the real reporter; invalid ones are remembered all the same.
        let forwarded = reporter.seen();
        match row.report {
            Report::Valid => {
                assert_eq!(forwarded.len(), 1, "{}", row.name);
                assert_eq!(forwarded[0].call_id(), "c1", "{}", row.name);
            }
            Report::Nothing | Report::OtherCall | Report::EmptyMessage => {
                assert!(
                    forwarded.is_empty(),
                    "{}: forwarded {forwarded:?}",
                    row.name
                );
            }
        }
        let tool_saw_failure = tool.report_outcomes().iter().any(Result::is_err);
        let reporter_should_fail = matches!(row.report, Report::OtherCall | Report::EmptyMessage)
            || (row.report == Report::Valid && row.reporter != ReporterMode::Accept);
        if row.behaviour != Behaviour::PanicBeforeFuture {
            assert_eq!(tool_saw_failure, reporter_should_fail, "{}", row.name);
        }
    }
}

#[tokio::test]
async fn cancelled_before_execution_never_calls_the_tool() {
    let tool = ScriptedTool::new(definition("read", Profile::ReadOnly));
    let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let call = call("c1", "read", Behaviour::Succeed, Report::Nothing);

    let error = dispatch_with(&dispatcher, &call, &NoopReporter, &cancel)
        .await
        .unwrap_err();

    assert!(
        matches!(&error, DispatchError::Cancelled { call_id } if call_id == "c1"),
        "{error:?}"
    );
    assert!(error.is_cancelled());
    assert_eq!(tool.calls(), 0);
}

#[tokio::test]
async fn cancelled_during_execution_stops_waiting_for_the_tool() {
    let tool = ScriptedTool::new(definition("send", Profile::Unsafe));
    let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
    let cancel = CancellationToken::new();
    let call = call("c1", "send", Behaviour::Pending, Report::Nothing);

    let (outcome, ()) = tokio::join!(
        dispatch_with(&dispatcher, &call, &NoopReporter, &cancel),
        async {
            tool.started.notified().await;
            cancel.cancel();
        }
    );

    let error = outcome.unwrap_err();
    assert!(
        matches!(&error, DispatchError::Cancelled { call_id } if call_id == "c1"),
        "{error:?}"
    );
    assert!(error.is_cancelled());
    assert_eq!(tool.calls(), 1);
}

#[tokio::test]
async fn undeclared_tools_run_no_tool_code() {
    let tool = ScriptedTool::new(definition("read", Profile::ReadOnly));
    let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
    for name in ["rm", "reade", "Read", "rea"] {
        let call = call("c1", name, Behaviour::Succeed, Report::Nothing);
        let error = dispatch(&dispatcher, &call).await.unwrap_err();
        assert!(
            matches!(&error, DispatchError::Undeclared { name: n } if n == name),
            "{error:?}"
        );
        assert!(!error.is_cancelled());
    }
    assert_eq!(tool.calls(), 0);
}

#[test]
fn a_key_that_differs_from_the_tool_name_is_rejected() {
    let tool: Arc<dyn Tool> = ScriptedTool::new(definition("read", Profile::ReadOnly));
    let tools = BTreeMap::from([("reader".to_owned(), tool)]);
    assert_eq!(
        Dispatcher::new(tools).unwrap_err(),
        DispatcherError::NameMismatch {
            key: "reader".to_owned(),
            name: "read".to_owned(),
        }
    );
}

#[test]
fn definitions_are_sorted_by_name() {
    let tools: Vec<_> = ["zeta", "alpha", "mid.tool", "beta"]
        .into_iter()
        .map(|name| ScriptedTool::new(definition(name, Profile::ReadOnly)))
        .collect();
    let dispatcher = Dispatcher::new(tool_map(&tools)).unwrap();
    let names: Vec<&str> = dispatcher
        .definitions()
        .iter()
        .map(Definition::name)
        .collect();
    assert_eq!(names, ["alpha", "beta", "mid.tool", "zeta"]);
    assert_eq!(
        dispatcher.definition("mid.tool"),
        Some(tools[2].definition())
    );
    assert_eq!(dispatcher.definition("gamma"), None);
}

/// A tool whose reported definition changes once `shifted` is set: a read-only `lookup`
/// becomes a mutating, replay-unsafe `lookup.v2`.
struct ShiftingTool {
    before: Definition,
    after: Definition,
    shifted: AtomicBool,
}

impl Tool for ShiftingTool {
    fn definition(&self) -> &Definition {
        if self.shifted.load(Ordering::SeqCst) {
            &self.after
        } else {
            &self.before
        }
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            match call.arguments()["fail"].as_str() {
                Some("uncertain") => Err(ExecutionError::uncertain(call.id(), "lost")),
                Some("retry") => Err(ExecutionError::retryable(call.id(), "timed out")),
                _ => Ok(ToolResult::success(call.id(), "ok")),
            }
        })
    }
}

#[tokio::test]
async fn definitions_are_snapshotted_at_construction() {
    let tool = Arc::new(ShiftingTool {
        before: definition("lookup", Profile::ReadOnly),
        after: definition("lookup.v2", Profile::Unsafe),
        shifted: AtomicBool::new(false),
    });
    let tools = BTreeMap::from([("lookup".to_owned(), tool.clone() as Arc<dyn Tool>)]);
    let dispatcher = Dispatcher::new(tools).unwrap();
    tool.shift();

    assert_eq!(tool.definition().name(), "lookup.v2");
    assert_eq!(dispatcher.definitions(), std::slice::from_ref(&tool.before));
    let ok = Call::new("c1", "lookup", json!({})).unwrap();
    assert_eq!(dispatch(&dispatcher, &ok).await.unwrap().content(), "ok");
    // Checked against the read-only snapshot, not the mutating definition reported now.
    let uncertain = Call::new("c2", "lookup", json!({ "fail": "uncertain" })).unwrap();
    assert!(matches!(
        dispatch(&dispatcher, &uncertain).await,
        Err(DispatchError::Contract(
            ContractViolation::UncertainFromReadOnly { .. }
        ))
    ));
    // ...and retry advice is fine for the snapshot's replay-safe tool.
    let retry = Call::new("c3", "lookup", json!({ "fail": "retry" })).unwrap();
    assert!(matches!(
        dispatch(&dispatcher, &retry).await,
        Err(DispatchError::Execution(e)) if e.retry() == RetryDisposition::Allowed
    ));
    let renamed = Call::new("c4", "lookup.v2", json!({})).unwrap();
    assert!(matches!(
        dispatch(&dispatcher, &renamed).await,
        Err(DispatchError::Undeclared { .. })
    ));
}

impl ShiftingTool {
    fn shift(&self) {
        self.shifted.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_panicking_tool_does_not_poison_the_dispatcher() {
    quiet_injected_panics();
    let tool = ScriptedTool::new(definition("read", Profile::ReadOnly));
    let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
    for (i, behaviour) in [
        Behaviour::PanicBeforeFuture,
        Behaviour::Succeed,
        Behaviour::PanicInFuture,
        Behaviour::Succeed,
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("c{i}");
        let outcome = dispatch(&dispatcher, &call(&id, "read", behaviour, Report::Nothing)).await;
        match behaviour {
            Behaviour::Succeed => assert_eq!(outcome.unwrap().content(), format!("ok:{id}")),
            _ => assert!(matches!(
                outcome,
                Err(DispatchError::Contract(
                    ContractViolation::ToolPanicked { .. }
                ))
            )),
        }
    }
    assert_eq!(tool.calls(), 4);
}

/// What kind of outcome a dispatch had, for the property test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Success,
    Problem,
    Cancelled,
    Undeclared,
    Execution { cancelled: bool },
    Failure { cancelled: bool },
    Reporter,
    ToolPanicked,
    ResultForOtherCall,
    ErrorForOtherCall,
    UncertainFromReadOnly,
    RetryFromReplayUnsafe,
    ResultTooLarge,
    Other,
}

fn kind(outcome: &Outcome) -> Kind {
    use ContractViolation as CV;
    match outcome {
        Ok(r) if r.is_problem() => Kind::Problem,
        Ok(_) => Kind::Success,
        Err(DispatchError::Cancelled { .. }) => Kind::Cancelled,
        Err(DispatchError::Undeclared { .. }) => Kind::Undeclared,
        Err(DispatchError::Execution(e)) => Kind::Execution {
            cancelled: e.is_cancelled(),
        },
        Err(DispatchError::Failure(f)) => Kind::Failure {
            cancelled: f.execution().is_cancelled(),
        },
        Err(DispatchError::Reporter(_)) => Kind::Reporter,
        Err(DispatchError::Contract(CV::ToolPanicked { .. })) => Kind::ToolPanicked,
        Err(DispatchError::Contract(CV::ResultForOtherCall { .. })) => Kind::ResultForOtherCall,
        Err(DispatchError::Contract(CV::ErrorForOtherCall { .. })) => Kind::ErrorForOtherCall,
        Err(DispatchError::Contract(CV::UncertainFromReadOnly { .. })) => {
            Kind::UncertainFromReadOnly
        }
        Err(DispatchError::Contract(CV::RetryFromReplayUnsafe { .. })) => {
            Kind::RetryFromReplayUnsafe
        }
        Err(DispatchError::Contract(CV::ResultTooLarge { .. })) => Kind::ResultTooLarge,
        Err(_) => Kind::Other,
    }
}

/// One step of the property test.
#[derive(Debug, Clone, Copy)]
struct Step {
    profile: Profile,
    behaviour: Behaviour,
    report: Report,
    reporter: ReporterMode,
    cancelled_first: bool,
    undeclared: bool,
}

/// The documented outcome of `step`.
fn expected(step: &Step) -> Kind {
    use Behaviour as B;
    if step.cancelled_first {
        return Kind::Cancelled;
    }
    if step.undeclared {
        return Kind::Undeclared;
    }
    let reporter_failed = match step.report {
        Report::Nothing => false,
        Report::OtherCall | Report::EmptyMessage => true,
        Report::Valid => step.reporter != ReporterMode::Accept,
    };
    let failed = |cancelled| {
        if reporter_failed {
            Kind::Failure { cancelled }
        } else {
            Kind::Execution { cancelled }
        }
    };
    let answered = |kind| {
        if reporter_failed {
            Kind::Reporter
        } else {
            kind
        }
    };
    match step.behaviour {
        B::PanicInFuture | B::PanicBeforeFuture => Kind::ToolPanicked,
        B::ResultForOtherCall => Kind::ResultForOtherCall,
        B::ErrorForOtherCall => Kind::ErrorForOtherCall,
        B::TooLarge => Kind::ResultTooLarge,
        B::Succeed => answered(Kind::Success),
        B::Problem => answered(Kind::Problem),
        B::Definitive => failed(false),
        B::CancelledError => failed(true),
        B::Retryable if step.profile == Profile::Unsafe => Kind::RetryFromReplayUnsafe,
        B::Retryable => failed(false),
        B::Uncertain if step.profile == Profile::ReadOnly => Kind::UncertainFromReadOnly,
        B::Uncertain => failed(false),
        B::Pending => unreachable!("not generated"),
    }
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::sample::select(Profile::ALL.to_vec()),
        prop::sample::select(Behaviour::COMPLETING.to_vec()),
        prop::sample::select(Report::ALL.to_vec()),
        prop::sample::select(vec![
            ReporterMode::Accept,
            ReporterMode::Fail("cancelled"),
            ReporterMode::Panic,
        ]),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(profile, behaviour, report, reporter, cancelled_first, undeclared)| Step {
                profile,
                behaviour,
                report,
                reporter,
                cancelled_first,
                undeclared,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any sequence of tool behaviours against one dispatcher: dispatch never panics, each
    /// outcome is the documented one, and only declared, uncancelled calls reach a tool.
    #[test]
    fn dispatch_outcome_matches_the_behaviour(steps in prop::collection::vec(step(), 1..24)) {
        quiet_injected_panics();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let tools: Vec<_> = Profile::ALL
            .into_iter()
            .map(|p| ScriptedTool::new(definition(p.tool_name(), p)))
            .collect();
        let dispatcher = Dispatcher::new(tool_map(&tools)).unwrap();
        let mut expected_calls = [0usize; 3];
        for (i, step) in steps.iter().enumerate() {
            let id = format!("call-{i}");
            let name = if step.undeclared { "missing" } else { step.profile.tool_name() };
            let call = call(&id, name, step.behaviour, step.report);
            let reporter = TestReporter::new(step.reporter);
            let cancel = CancellationToken::new();
            if step.cancelled_first {
                cancel.cancel();
            }
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                runtime.block_on(dispatch_with(&dispatcher, &call, &reporter, &cancel))
            }));
            prop_assert!(outcome.is_ok(), "dispatch panicked on {:?}", step);
            let outcome = outcome.unwrap();
            prop_assert_eq!(kind(&outcome), expected(step), "{:?} gave {:?}", step, outcome);
            if let Ok(result) = &outcome {
                prop_assert_eq!(result.call_id(), id.as_str());
            }
            if let Err(error) = &outcome {
                prop_assert!(!error.to_string().contains(INJECTED));
            }
            if !step.cancelled_first && !step.undeclared {
                let index = Profile::ALL.iter().position(|p| *p == step.profile).unwrap();
                expected_calls[index] += 1;
            }
        }
        let calls: Vec<usize> = tools.iter().map(|t| t.calls()).collect();
        prop_assert_eq!(calls, expected_calls.to_vec());
    }
}

/// Panics when dropped: a tool future holding one panics when it is abandoned.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("{INJECTED}");
    }
}

/// Starts, then waits forever while holding a [`PanicOnDrop`].
struct AbandonPanics {
    definition: Definition,
    started: tokio::sync::Notify,
}

impl Tool for AbandonPanics {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        _call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            let _guard = PanicOnDrop;
            self.started.notify_one();
            std::future::pending().await
        })
    }
}

#[tokio::test]
async fn a_tool_future_that_panics_when_abandoned_is_contained() {
    quiet_injected_panics();
    let tool = Arc::new(AbandonPanics {
        definition: definition("send", Profile::Unsafe),
        started: tokio::sync::Notify::new(),
    });
    let dispatcher = Dispatcher::new(tool_map([&tool])).unwrap();
    let call = Call::new("c1", "send", json!({})).unwrap();

    // Cancelled through the token: the dispatcher abandons the tool's future.
    let cancel = CancellationToken::new();
    let (outcome, ()) = tokio::join!(
        dispatch_with(&dispatcher, &call, &NoopReporter, &cancel),
        async {
            tool.started.notified().await;
            cancel.cancel();
        }
    );
    assert!(
        matches!(&outcome, Err(DispatchError::Cancelled { call_id }) if call_id == "c1"),
        "{outcome:?}"
    );

    // Abandoned by the caller: dropping the dispatch future drops the tool's future.
    let cancel = CancellationToken::new();
    let dispatch = dispatch_with(&dispatcher, &call, &NoopReporter, &cancel);
    tokio::select! {
        _ = dispatch => panic!("the tool never completes"),
        () = tool.started.notified() => {}
    }
}
