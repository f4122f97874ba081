//! Tool plan leases: identity and fingerprints, plan-bound dispatch, and a release that runs
//! its callback once, contains panics, never blocks past cancellation and gives every caller
//! the same outcome.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent_core::compose::BoxError;
use agent_core::stage::{
    DispatchError, DispatchRequest, Dispatcher, PipelineError, PlanError, PlanId, ReleaseError,
    StaticToolPlanSource, ToolDispatcher, ToolPlanLease, ToolPlanSource, compose_pipeline,
};
use agent_core::tool::{BoxFuture, Definition, NoopReporter};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use support::{
    Behaviour, INJECTED, Profile, Report, ScriptedTool, call, definition, definition_described,
    quiet_injected_panics, scope_for, tool_map,
};

/// Generous bound for "returns without blocking"; a blocked release would never finish.
const PROMPTLY: Duration = Duration::from_secs(10);

fn dispatcher(definitions: &[Definition]) -> Arc<dyn ToolDispatcher> {
    let tools: Vec<_> = definitions
        .iter()
        .map(|d| ScriptedTool::new(d.clone()))
        .collect();
    Arc::new(Dispatcher::new(tool_map(&tools)).unwrap())
}

fn source(definitions: &[Definition]) -> StaticToolPlanSource {
    StaticToolPlanSource::new(dispatcher(definitions)).unwrap()
}

fn is_plan_fingerprint(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

#[tokio::test]
async fn a_lease_carries_the_plan_identity_and_definitions() {
    let definitions = [
        definition("read", Profile::ReadOnly),
        definition("send", Profile::Unsafe),
    ];
    let source = source(&definitions);
    let cancel = CancellationToken::new();
    let lease = source.lease_current(&cancel).await.unwrap();

    assert_eq!(lease.id(), source.plan_id());
    assert!(lease.id().as_str().starts_with("static:"));
    assert!(
        is_plan_fingerprint(lease.fingerprint()),
        "{}",
        lease.fingerprint()
    );
    assert_eq!(lease.definitions(), definitions);
    assert_eq!(lease.dispatcher().definitions(), definitions);

    let again = source.lease_generation(lease.id(), &cancel).await.unwrap();
    assert_eq!(
        (again.id(), again.fingerprint()),
        (lease.id(), lease.fingerprint())
    );
}

#[tokio::test]
async fn static_ids_depend_only_on_the_definitions() {
    let read = definition("read", Profile::ReadOnly);
    let send = definition("send", Profile::Unsafe);
    let reference = source(&[read.clone(), send.clone()]);
    let cancel = CancellationToken::new();
    let reference_lease = reference.lease_current(&cancel).await.unwrap();
    let table: Vec<(&str, Vec<Definition>, bool)> = vec![
        ("same tools", vec![read.clone(), send.clone()], true),
        ("a tool fewer", vec![read.clone()], false),
        (
            "a tool more",
            vec![
                read.clone(),
                send.clone(),
                definition("put", Profile::Idempotent),
            ],
            false,
        ),
        (
            "another description",
            vec![
                read.clone(),
                definition_described("send", Profile::Unsafe, "Sends."),
            ],
            false,
        ),
        (
            "another replay safety",
            vec![read.clone(), definition("send", Profile::Idempotent)],
            false,
        ),
        (
            "a renamed tool",
            vec![read.clone(), definition("send2", Profile::Unsafe)],
            false,
        ),
        ("no tools", Vec::new(), false),
    ];
    for (name, definitions, same) in table {
        let other = source(&definitions);
        assert_eq!(other.plan_id() == reference.plan_id(), same, "{name}");
        let lease = other.lease_current(&cancel).await.unwrap();
        assert_eq!(
            lease.fingerprint() == reference_lease.fingerprint(),
            same,
            "{name}"
        );
        assert!(is_plan_fingerprint(lease.fingerprint()), "{name}");
    }
}

#[tokio::test]
async fn a_composed_pipeline_keeps_its_identity() {
    let definitions = [definition("read", Profile::ReadOnly)];
    let pipeline = compose_pipeline(dispatcher(&definitions), Vec::new(), Vec::new()).unwrap();
    let from_pipeline = StaticToolPlanSource::new(pipeline).unwrap();
    assert_eq!(from_pipeline.plan_id(), source(&definitions).plan_id());
}

#[tokio::test]
async fn an_owned_dispatcher_makes_the_same_plan_as_a_shared_one() {
    for definitions in [Vec::new(), vec![definition("read", Profile::ReadOnly)]] {
        let tools: Vec<_> = definitions
            .iter()
            .map(|d| ScriptedTool::new(d.clone()))
            .collect();
        let owned =
            StaticToolPlanSource::from_dispatcher(Dispatcher::new(tool_map(&tools)).unwrap());
        let shared = source(&definitions);
        assert_eq!(owned.plan_id(), shared.plan_id());

        let cancel = CancellationToken::new();
        let (a, b) = (
            owned.lease_current(&cancel).await.unwrap(),
            shared.lease_current(&cancel).await.unwrap(),
        );
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.definitions(), b.definitions());
        assert!(
            a.dispatcher().is_composed(),
            "a lease cannot be composed again"
        );

        // The owned dispatcher is still behind the plan's checks.
        let undeclared = call("c1", "write", Behaviour::Succeed, Report::Nothing);
        let scope = scope_for(a.id().clone(), a.fingerprint());
        let error = a
            .dispatcher()
            .dispatch(DispatchRequest {
                cancel: &cancel,
                scope: &scope,
                call: &undeclared,
                reporter: &NoopReporter,
            })
            .await
            .unwrap_err();
        assert_eq!(
            error,
            DispatchError::Undeclared {
                name: "write".to_owned()
            }
        );
    }
}

#[tokio::test]
async fn an_engine_takes_plans_inline_or_shared() {
    use agent_core::stage::ToolPlans;
    let plan = source(&[definition("read", Profile::ReadOnly)]);
    let cancel = CancellationToken::new();
    let shared: Arc<dyn ToolPlanSource> = Arc::new(plan.clone());
    for plans in [
        ToolPlans::from(plan.clone()),
        ToolPlans::from(Arc::new(plan.clone())),
        ToolPlans::from(shared),
    ] {
        let lease = plans.source().lease_current(&cancel).await.unwrap();
        assert_eq!(lease.id(), plan.plan_id());
    }
}

#[tokio::test]
async fn a_static_source_never_substitutes_a_generation() {
    let source = source(&[definition("read", Profile::ReadOnly)]);
    let cancel = CancellationToken::new();
    for other in [
        "static:0000".to_owned(),
        format!("{}x", source.plan_id()),
        "dynamic:1".to_owned(),
    ] {
        let id = PlanId::new(other).unwrap();
        let error = source.lease_generation(&id, &cancel).await.unwrap_err();
        assert_eq!(error, PlanError::UnknownGeneration(id));
    }

    let cancelled = CancellationToken::new();
    cancelled.cancel();
    assert_eq!(
        source.lease_current(&cancelled).await.unwrap_err(),
        PlanError::Cancelled
    );
    assert_eq!(
        source
            .lease_generation(source.plan_id(), &cancelled)
            .await
            .unwrap_err(),
        PlanError::Cancelled
    );
}

/// Where a [`PanickingBase`] panics while a plan is built over it.
#[derive(Clone, Copy, Debug)]
enum PanicIn {
    Definitions,
    GuardDigest,
}

/// A dispatcher that panics when asked for its definitions or its guards' digest.
struct PanickingBase(PanicIn);

impl ToolDispatcher for PanickingBase {
    fn definitions(&self) -> &[Definition] {
        match self.0 {
            PanicIn::Definitions => panic!("{INJECTED}"),
            PanicIn::GuardDigest => &[],
        }
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<agent_core::tool::ToolResult, DispatchError>> {
        // Never reached: no plan is built over this dispatcher.
        let name = request.call.name().to_owned();
        Box::pin(async move { Err(DispatchError::Undeclared { name }) })
    }

    fn guard_digest(&self) -> Option<&str> {
        match self.0 {
            PanicIn::Definitions => None,
            PanicIn::GuardDigest => panic!("{INJECTED}"),
        }
    }
}

/// `StaticToolPlanSource::new` reports a panicking dispatcher as `compose_pipeline` does: a
/// typed error, no unwind into the caller.
#[test]
fn a_static_source_contains_a_panic_of_its_dispatcher() {
    quiet_injected_panics();
    for at in [PanicIn::Definitions, PanicIn::GuardDigest] {
        let base: Arc<dyn ToolDispatcher> = Arc::new(PanickingBase(at));
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            StaticToolPlanSource::new(base)
        }));
        let Ok(outcome) = built else {
            panic!("{at:?}: the panic unwound into the caller");
        };
        let error = outcome
            .err()
            .unwrap_or_else(|| panic!("{at:?}: built a plan"));
        assert_eq!(error, PipelineError::BasePanicked, "{at:?}");
        assert!(!error.to_string().contains(INJECTED), "{at:?}");
    }
}

#[tokio::test]
async fn a_lease_rejects_a_scope_naming_another_plan() {
    let tool = ScriptedTool::new(definition("read", Profile::ReadOnly));
    let base: Arc<dyn ToolDispatcher> = Arc::new(Dispatcher::new(tool_map([&tool])).unwrap());
    let source = StaticToolPlanSource::new(base).unwrap();
    let cancel = CancellationToken::new();
    let lease = source.lease_current(&cancel).await.unwrap();
    let dispatcher = lease.dispatcher();
    let call = call("c1", "read", Behaviour::Succeed, Report::Nothing);

    let foreign = scope_for(PlanId::new("static:other").unwrap(), lease.fingerprint());
    let error = dispatcher
        .dispatch(DispatchRequest {
            cancel: &cancel,
            scope: &foreign,
            call: &call,
            reporter: &NoopReporter,
        })
        .await
        .unwrap_err();
    assert_eq!(
        error,
        DispatchError::PlanMismatch {
            expected: lease.id().to_string(),
            found: "static:other".to_owned(),
        }
    );
    assert!(!error.is_cancelled());
    assert_eq!(tool.calls(), 0);

    // The same plan id with another fingerprint is not this plan either.
    let other = format!("sha256:{}", "f".repeat(64));
    let forged = scope_for(lease.id().clone(), other.clone());
    let error = dispatcher
        .dispatch(DispatchRequest {
            cancel: &cancel,
            scope: &forged,
            call: &call,
            reporter: &NoopReporter,
        })
        .await
        .unwrap_err();
    assert_eq!(
        error,
        DispatchError::FingerprintMismatch {
            expected: lease.fingerprint().to_owned(),
            found: other,
        }
    );
    assert_eq!(tool.calls(), 0);

    let own = scope_for(lease.id().clone(), lease.fingerprint());
    let result = dispatcher
        .dispatch(DispatchRequest {
            cancel: &cancel,
            scope: &own,
            call: &call,
            reporter: &NoopReporter,
        })
        .await
        .unwrap();
    assert_eq!(result.content(), "ok:c1");
    assert_eq!(tool.calls(), 1);

    // A lease's dispatcher is already a pipeline: it cannot be layered again.
    assert!(compose_pipeline(dispatcher.clone(), Vec::new(), Vec::new()).is_ok());
}

/// What a release callback does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    Succeed,
    Fail,
    PanicInFuture,
    PanicBeforeFuture,
    /// Yields a few times first, so concurrent callers overlap with it.
    SlowFail,
    /// Notifies `started`, then never completes.
    Block,
}

struct Callback {
    runs: AtomicUsize,
    started: Notify,
}

fn lease_with(release: Release) -> (ToolPlanLease, Arc<Callback>) {
    let callback = Arc::new(Callback {
        runs: AtomicUsize::new(0),
        started: Notify::new(),
    });
    let state = callback.clone();
    let lease = ToolPlanLease::new(
        PlanId::new("dynamic:7").unwrap(),
        dispatcher(&[definition("read", Profile::ReadOnly)]),
        move || -> BoxFuture<'static, Result<(), BoxError>> {
            state.runs.fetch_add(1, Ordering::SeqCst);
            if release == Release::PanicBeforeFuture {
                panic!("{INJECTED}");
            }
            Box::pin(async move {
                match release {
                    Release::Succeed => Ok(()),
                    Release::Fail => Err("registry unreachable".into()),
                    Release::PanicInFuture | Release::PanicBeforeFuture => panic!("{INJECTED}"),
                    Release::SlowFail => {
                        for _ in 0..16 {
                            tokio::task::yield_now().await;
                        }
                        Err("registry unreachable".into())
                    }
                    Release::Block => {
                        state.started.notify_one();
                        std::future::pending().await
                    }
                }
            })
        },
    );
    (lease, callback)
}

#[tokio::test]
async fn release_runs_once_and_every_caller_sees_the_same_outcome() {
    quiet_injected_panics();
    let failed = Err(ReleaseError::Failed("registry unreachable".to_owned()));
    let table = [
        (Release::Succeed, Ok(())),
        (Release::Fail, failed.clone()),
        (Release::SlowFail, failed),
        (Release::PanicInFuture, Err(ReleaseError::Panicked)),
        (Release::PanicBeforeFuture, Err(ReleaseError::Panicked)),
    ];
    for (release, expected) in table {
        let (lease, callback) = lease_with(release);
        let cancel = CancellationToken::new();
        let first = tokio::time::timeout(PROMPTLY, lease.release(&cancel))
            .await
            .expect("release finished");
        assert_eq!(first, expected, "{release:?}");
        assert_eq!(lease.release(&cancel).await, expected, "{release:?}");
        // Once settled, even a caller whose token is already cancelled gets the outcome.
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        assert_eq!(lease.release(&cancelled).await, expected, "{release:?}");
        assert_eq!(callback.runs.load(Ordering::SeqCst), 1, "{release:?}");
        if let Err(error) = &first {
            assert!(!error.to_string().contains(INJECTED), "{release:?}");
        }
    }
}

#[tokio::test]
async fn eight_concurrent_callers_share_one_release() {
    quiet_injected_panics();
    for (release, expected) in [
        (
            Release::SlowFail,
            Err(ReleaseError::Failed("registry unreachable".to_owned())),
        ),
        (Release::Succeed, Ok(())),
        (Release::PanicInFuture, Err(ReleaseError::Panicked)),
    ] {
        let (lease, callback) = lease_with(release);
        let lease = Arc::new(lease);
        let mut callers = JoinSet::new();
        for _ in 0..8 {
            let lease = lease.clone();
            callers.spawn(async move {
                tokio::task::yield_now().await;
                lease.release(&CancellationToken::new()).await
            });
        }
        let outcomes = tokio::time::timeout(PROMPTLY, callers.join_all())
            .await
            .expect("releases finished");
        assert_eq!(outcomes.len(), 8);
        assert!(
            outcomes.iter().all(|o| *o == expected),
            "{release:?}: {outcomes:?}"
        );
        assert_eq!(callback.runs.load(Ordering::SeqCst), 1, "{release:?}");
    }
}

#[tokio::test]
async fn a_blocked_release_does_not_block_a_cancelled_caller() {
    // Token cancelled before the call.
    let (lease, callback) = lease_with(Release::Block);
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let outcome = tokio::time::timeout(PROMPTLY, lease.release(&cancelled))
        .await
        .expect("release returned");
    assert_eq!(outcome, Err(ReleaseError::DidNotComplete));
    let later = tokio::time::timeout(PROMPTLY, lease.release(&CancellationToken::new()))
        .await
        .expect("a later release returned");
    assert_eq!(later, Err(ReleaseError::DidNotComplete));
    assert!(callback.runs.load(Ordering::SeqCst) <= 1);

    // Token cancelled while the callback is running.
    let (lease, callback) = lease_with(Release::Block);
    let cancel = CancellationToken::new();
    let (outcome, ()) = tokio::time::timeout(PROMPTLY, async {
        tokio::join!(lease.release(&cancel), async {
            callback.started.notified().await;
            cancel.cancel();
        })
    })
    .await
    .expect("release returned");
    assert_eq!(outcome, Err(ReleaseError::DidNotComplete));
    for _ in 0..3 {
        let later = tokio::time::timeout(PROMPTLY, lease.release(&CancellationToken::new()))
            .await
            .expect("a later release returned");
        assert_eq!(later, Err(ReleaseError::DidNotComplete));
    }
    assert_eq!(callback.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_waiting_caller_is_released_by_another_callers_cancellation() {
    let (lease, callback) = lease_with(Release::Block);
    let lease = Arc::new(lease);
    let waiting = {
        let lease = lease.clone();
        tokio::spawn(async move { lease.release(&CancellationToken::new()).await })
    };
    callback.started.notified().await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(
        lease.release(&cancel).await,
        Err(ReleaseError::DidNotComplete)
    );
    let first = tokio::time::timeout(PROMPTLY, waiting)
        .await
        .expect("the waiting caller returned")
        .unwrap();
    assert_eq!(first, Err(ReleaseError::DidNotComplete));
    assert_eq!(callback.runs.load(Ordering::SeqCst), 1);
}
