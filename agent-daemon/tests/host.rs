//! Run host behaviour (docs/daemon.md, "The run host"), over a real engine and a
//! real run authority.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_authority::{Phase, Step};
use agent_core::agent::RunStatus;
use agent_core::event::{EventKind, ReplayRequest};
use agent_daemon::HostError;
use agent_daemon::host::{
    Degradation, HealthReason, HealthSource, HealthStatus, HostLimits, Success,
};
use support::*;
use tokio_util::sync::CancellationToken;

fn run_id(success: &Success) -> String {
    match success {
        Success::Started { run_id, .. } | Success::Imported { run_id, .. } => run_id.clone(),
        other => panic!("not a start: {other:?}"),
    }
}

/// Waits until the run's log holds a run terminal; returns every kind in order.
async fn finished(
    h: &Harness,
    session: &agent_daemon::session::Session,
    run: &str,
) -> Vec<EventKind> {
    bounded(async {
        let mut after = 0;
        loop {
            let page = match h
                .host
                .replay_events(
                    &CancellationToken::new(),
                    session,
                    run,
                    ReplayRequest::after(after),
                )
                .await
            {
                Ok(page) => page,
                Err(HostError::OutOfRange { earliest, .. }) => {
                    after = earliest - 1;
                    continue;
                }
                Err(error) => panic!("{error:?}"),
            };
            let kinds: Vec<EventKind> = page.events.iter().map(|e| e.kind()).collect();
            if kinds.last().is_some_and(|k| k.ends_run()) {
                return kinds;
            }
            drop(page);
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await
}

async fn in_terminal_cache(h: &Harness, session: &agent_daemon::session::Session, run: &str) {
    bounded(async {
        while h
            .host
            .export(&CancellationToken::new(), session, run)
            .await
            .is_err()
        {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_only_after_authority_and_outlives_the_request() {
    let dir = TempDir::new("start");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let request_ctx = CancellationToken::new();
    let (started, duplicate) = h
        .host
        .start(&request_ctx, &s, start("op-1", TEXT))
        .await
        .unwrap();
    assert!(!duplicate);
    let run = run_id(&started);
    assert!(matches!(started, Success::Started { sequence: 1, .. }));
    // The authority recorded ACTIVE (or already the tombstone) for the run id.
    assert!(h.store.inspect(&run).unwrap().is_some());
    // The request's context ends; the run does not.
    request_ctx.cancel();
    let kinds = finished(&h, &s, &run).await;
    assert_eq!(kinds.first(), Some(&EventKind::RunStarted));
    assert_eq!(kinds.last(), Some(&EventKind::RunCompleted));
    in_terminal_cache(&h, &s, &run).await;
    assert_eq!(
        h.store.inspect(&run).unwrap().unwrap().phase,
        Phase::Completed
    );
    // A duplicate replays the same outcome and starts nothing.
    let (again, duplicate) = h
        .host
        .start(&CancellationToken::new(), &s, start("op-1", TEXT))
        .await
        .unwrap();
    assert!(duplicate);
    assert_eq!(again, started);
    assert_eq!(h.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_failure_can_retry_the_same_operation() {
    let dir = TempDir::new("capacity");
    let limits = HostLimits {
        active_runs: 1,
        ..HostLimits::default()
    };
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            limits,
            ..Options::default()
        },
    );
    let s = h.session();
    let ctx = CancellationToken::new();
    let (first, _) = h.host.start(&ctx, &s, start("a", TOOL)).await.unwrap();
    // At the bound: the second start is refused and abandoned.
    let error = h.host.start(&ctx, &s, start("b", TEXT)).await.unwrap_err();
    assert_eq!(
        error,
        HostError::Capacity {
            resource: "active runs".into(),
            limit: 1,
            observed: 2
        }
    );
    // The first run ends; the same operation id now runs.
    h.gate.add_permits(1);
    finished(&h, &s, &run_id(&first)).await;
    in_terminal_cache(&h, &s, &run_id(&first)).await;
    let (second, duplicate) = h.host.start(&ctx, &s, start("b", TEXT)).await.unwrap();
    assert!(!duplicate);
    assert_ne!(run_id(&second), run_id(&first));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_authority_start_never_activates_the_kernel() {
    let dir = TempDir::new("uncertain");
    let armed = Arc::new(AtomicBool::new(true));
    let hook = failing_at(Step::TempSynced(Phase::Active), armed.clone());
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            hook: Some(hook),
            ..Options::default()
        },
    );
    let s = h.session();
    let ctx = CancellationToken::new();
    let error = h.host.start(&ctx, &s, start("op", TEXT)).await.unwrap_err();
    assert_eq!(error, HostError::Uncertain);
    assert_eq!(h.calls.load(Ordering::SeqCst), 0, "no provider work");
    // Committed as uncertain: the same operation is never retried.
    armed.store(false, Ordering::SeqCst);
    assert_eq!(
        h.host.start(&ctx, &s, start("op", TEXT)).await.unwrap_err(),
        HostError::Uncertain
    );
    assert_eq!(h.calls.load(Ordering::SeqCst), 0);
    let description = h.host.describe();
    assert_eq!(description.status, HealthStatus::Degraded);
    assert!(
        description
            .reasons
            .contains(&Degradation::AuthorityUncertain.as_str().to_owned())
    );
    assert_eq!(description.active_runs, 0, "the slot was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_follow_the_reservation_order() {
    let dir = TempDir::new("suspend");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("start", TOOL)).await.unwrap();
    let run = run_id(&started);
    // Suspend waits for the boundary; it does not hold the commit gate meanwhile, so a
    // cancel of another run (or any mutation) is not blocked: here, a second start.
    let suspend = {
        let host = h.host.clone();
        let (s, run) = (s.clone(), run.clone());
        spawn_waiting(async move {
            host.suspend(&CancellationToken::new(), &s, "susp", &run)
                .await
        })
        .await
    };
    let (other, _) = bounded(h.host.start(&ctx, &s, start("other", TEXT)))
        .await
        .unwrap();
    h.gate.add_permits(1);
    let (suspended, _) = bounded(suspend).await.unwrap().unwrap();
    let Success::Suspended { sequence } = suspended else {
        panic!()
    };
    assert_eq!(
        h.store.inspect(&run).unwrap().unwrap().phase,
        Phase::Suspended
    );
    let envelope = h.host.export(&ctx, &s, &run).await.unwrap();
    assert!(!envelope.is_empty());
    let calls = h.calls.load(Ordering::SeqCst);
    // Resume: durable ACTIVE at generation 2 precedes provider work.
    let (resumed, _) = h.host.resume(&ctx, &s, "res", &run).await.unwrap();
    assert_eq!(
        resumed,
        Success::Resumed {
            next_sequence: sequence + 1
        }
    );
    let kinds = finished(&h, &s, &run).await;
    assert_eq!(kinds.last(), Some(&EventKind::RunCompleted));
    assert!(h.calls.load(Ordering::SeqCst) > calls);
    in_terminal_cache(&h, &s, &run).await;
    let status = h.store.inspect(&run).unwrap().unwrap();
    assert_eq!((status.phase, status.run_generation), (Phase::Completed, 2));
    finished(&h, &s, &run_id(&other)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_does_not_wait_behind_a_suspend_waiting_for_its_boundary() {
    let dir = TempDir::new("cancel");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("start", TOOL)).await.unwrap();
    let run = run_id(&started);
    let suspend = {
        let host = h.host.clone();
        let (s, run) = (s.clone(), run.clone());
        spawn_waiting(async move {
            host.suspend(&CancellationToken::new(), &s, "susp", &run)
                .await
        })
        .await
    };
    let cancelled = bounded(h.host.cancel(&ctx, &s, "cancel", &run))
        .await
        .unwrap();
    assert_eq!(cancelled, Success::CancelRequested);
    let _ = bounded(suspend).await.unwrap();
    let kinds = finished(&h, &s, &run).await;
    assert_eq!(kinds.last(), Some(&EventKind::RunCancelled));
    in_terminal_cache(&h, &s, &run).await;
    let again = h.host.cancel(&ctx, &s, "cancel-2", &run).await.unwrap();
    assert!(matches!(again, Success::AlreadyTerminal { sequence } if sequence > 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_cache_evicts_the_oldest_completion() {
    let dir = TempDir::new("cache");
    let limits = HostLimits {
        terminal_runs: 1,
        ..HostLimits::default()
    };
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            limits,
            ..Options::default()
        },
    );
    let s = h.session();
    let ctx = CancellationToken::new();
    let (a, _) = h.host.start(&ctx, &s, start("a", TEXT)).await.unwrap();
    let (a, _) = (run_id(&a), ());
    in_terminal_cache(&h, &s, &a).await;
    let (b, _) = h.host.start(&ctx, &s, start("b", TEXT)).await.unwrap();
    let b = run_id(&b);
    in_terminal_cache(&h, &s, &b).await;
    // At the bound (one run) b stays; past it a was evicted and is now unknown.
    assert_eq!(
        h.host.export(&ctx, &s, &a).await.unwrap_err(),
        HostError::RunUnavailable
    );
    assert!(h.host.export(&ctx, &s, &b).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_owner_is_indistinguishable_from_an_unknown_run() {
    let dir = TempDir::new("owner");
    let h = Harness::new(&dir.store_dir());
    let (owner, other) = (h.session(), h.session());
    let ctx = CancellationToken::new();
    let (started, _) = h
        .host
        .start(&ctx, &owner, start("start", TOOL))
        .await
        .unwrap();
    let run = run_id(&started);
    for target in [run.as_str(), "run-unknown"] {
        let errors = [
            h.host
                .suspend(&ctx, &other, &format!("s-{target}"), target)
                .await
                .unwrap_err(),
            h.host
                .resume(&ctx, &other, &format!("r-{target}"), target)
                .await
                .unwrap_err(),
            h.host
                .cancel(&ctx, &other, &format!("c-{target}"), target)
                .await
                .unwrap_err(),
            h.host
                .respond(
                    &ctx,
                    &other,
                    &format!("p-{target}"),
                    target,
                    agent_core::interaction::InteractionResponse::new("i", serde_json::json!(1))
                        .unwrap(),
                )
                .await
                .unwrap_err(),
            h.host.export(&ctx, &other, target).await.unwrap_err(),
            h.host
                .replay_events(&ctx, &other, target, ReplayRequest::after(0))
                .await
                .unwrap_err(),
        ];
        for error in errors {
            assert_eq!(error, HostError::RunUnavailable);
            assert_eq!(error.to_string(), "hosted run unavailable");
        }
    }
    h.gate.add_permits(1);
    finished(&h, &owner, &run).await;
}

/// A respond repeated with its operation id (same run, interaction and value) gets the
/// committed outcome flagged duplicate; another value under that id conflicts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_respond_is_reported_as_a_duplicate() {
    use agent_core::interaction::{Broker as _, InteractionRequest, InteractionResponse, Scope};
    let dir = TempDir::new("respond-dup");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("op", TOOL)).await.unwrap();
    let run = run_id(&started);
    let (router, scope) = (h.router.clone(), Scope::new(run.as_str()).unwrap());
    let request = InteractionRequest::new(
        "i1",
        "confirm",
        "May I?",
        serde_json::json!({"type": "boolean"}),
    )
    .unwrap();
    let asked = tokio::spawn(async move {
        router
            .request(&scope, &request, &CancellationToken::new())
            .await
    });
    bounded(async {
        while h.router.snapshot(s.client_id()).pending().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    })
    .await;
    let answer = |value| InteractionResponse::new("i1", serde_json::json!(value)).unwrap();
    let first = h.host.respond(&ctx, &s, "answer", &run, answer(true)).await;
    assert_eq!(first, Ok((Success::Responded, false)));
    assert_eq!(
        bounded(asked).await.unwrap().unwrap().value(),
        &serde_json::json!(true)
    );
    let again = h.host.respond(&ctx, &s, "answer", &run, answer(true)).await;
    assert_eq!(again, Ok((Success::Responded, true)));
    let conflicting = h
        .host
        .respond(&ctx, &s, "answer", &run, answer(false))
        .await;
    assert_eq!(conflicting, Err(HostError::Conflict));
    h.gate.add_permits(1);
    finished(&h, &s, &run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_duplicate_does_not_start_a_second_run() {
    let dir = TempDir::new("conflict");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("op", TEXT)).await.unwrap();
    finished(&h, &s, &run_id(&started)).await;
    let error = h
        .host
        .start(&ctx, &s, start("op", "other text"))
        .await
        .unwrap_err();
    assert_eq!(error, HostError::Conflict);
    // A reconnect keeps the stable client id, so the ledger still knows the operation.
    let s2 = h
        .sessions
        .reconnect(&ctx, s.client_id(), s.epoch())
        .await
        .unwrap();
    let (_, duplicate) = h.host.start(&ctx, &s2, start("op", TEXT)).await.unwrap();
    assert!(duplicate);
    assert_eq!(h.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_vocabulary_round_trips_through_ledger_outcomes() {
    let dir = TempDir::new("vocabulary");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    // A committed state failure (unknown definition) replays the same typed error.
    let mut bad = start("op", TEXT);
    bad.revision = "r9".into();
    let first = h.host.start(&ctx, &s, bad.clone()).await.unwrap_err();
    assert_eq!(first, HostError::State);
    assert_eq!(h.host.start(&ctx, &s, bad).await.unwrap_err(), first);
    for error in [
        HostError::Closed,
        HostError::Capacity {
            resource: "active runs".into(),
            limit: 1,
            observed: 2,
        },
        HostError::RunUnavailable,
        HostError::State,
        HostError::Uncertain,
        HostError::Unavailable,
        HostError::StaleSession(None),
        HostError::SessionGateCapacity {
            resource: "stream leases".into(),
            limit: 4,
        },
        HostError::Cancelled,
        HostError::Conflict,
        HostError::OutOfRange {
            earliest: 3,
            latest: 9,
        },
    ] {
        let json = serde_json::to_string(&error).unwrap();
        assert_eq!(serde_json::from_str::<HostError>(&json).unwrap(), error);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_session_is_refused_before_the_ledger() {
    let dir = TempDir::new("stale");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let s2 = h.sessions.reconnect(&ctx, s.client_id(), 1).await.unwrap();
    let error = h.host.start(&ctx, &s, start("op", TEXT)).await.unwrap_err();
    let HostError::StaleSession(Some(facts)) = error else {
        panic!("{error:?}")
    };
    assert_eq!((facts.expected, facts.observed), (2, 1));
    // A stale response fails before its payload is looked at (1.10:
    // TestStaleInteractionResponseFailsBeforePayloadAcceptance).
    let response =
        agent_core::interaction::InteractionResponse::new("i", serde_json::json!(1)).unwrap();
    assert!(matches!(
        h.host
            .respond(&ctx, &s, "respond", "run-x", response)
            .await
            .unwrap_err(),
        HostError::StaleSession(Some(_))
    ));
    // Nothing was recorded: the new epoch runs the same operation id.
    let (_, duplicate) = h.host.start(&ctx, &s2, start("op", TEXT)).await.unwrap();
    assert!(!duplicate);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_is_owned_paged_and_epoch_bound() {
    let dir = TempDir::new("replay");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("op", TOOL)).await.unwrap();
    let run = run_id(&started);
    // Bounds: zero and past the configured limits are state errors.
    for (events, bytes) in [(0, 1), (1, 0), (257, 1 << 20), (1, (1 << 20) + 1)] {
        let request = ReplayRequest {
            after: 0,
            max_events: events,
            max_bytes: bytes,
            tail: false,
        };
        assert_eq!(
            h.host
                .replay_events(&ctx, &s, &run, request)
                .await
                .unwrap_err(),
            HostError::State
        );
    }
    let mut observation = h
        .host
        .replay_events(&ctx, &s, &run, ReplayRequest::after(0).with_tail())
        .await
        .unwrap();
    assert!(observation.is_tailing());
    assert!(observation.events.first().is_none_or(|e| e.sequence() == 1));
    // A reconnect fences the stream before the epoch advances.
    let reconnect = {
        let sessions = h.sessions.clone();
        let id = s.client_id().to_owned();
        tokio::spawn(async move { sessions.reconnect(&CancellationToken::new(), &id, 1).await })
    };
    let mut last = observation.events.last().map_or(0, |e| e.sequence());
    while let Some(event) = bounded(observation.next()).await {
        assert_eq!(event.sequence(), last + 1);
        last = event.sequence();
    }
    assert!(observation.is_fenced());
    observation.close();
    let s2 = bounded(reconnect).await.unwrap().unwrap();
    assert_eq!(s2.epoch(), 2);
    assert!(matches!(
        h.host
            .replay_events(&ctx, &s, &run, ReplayRequest::after(0))
            .await
            .unwrap_err(),
        HostError::StaleSession(Some(_))
    ));
    h.gate.add_permits(1);
    finished(&h, &s2, &run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finite_observations_enforce_the_stream_bound() {
    let dir = TempDir::new("streams");
    let limits = HostLimits {
        concurrent_streams: 2,
        ..HostLimits::default()
    };
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            limits,
            ..Options::default()
        },
    );
    let s = h.session();
    let ctx = CancellationToken::new();
    let first = h.host.subscribe_interactions(&ctx, &s).await.unwrap();
    let second = h.host.subscribe_interactions(&ctx, &s).await.unwrap();
    // At the bound: a third stream of any kind is refused.
    assert_eq!(
        h.host.snapshot_interactions(&ctx, &s).await.unwrap_err(),
        HostError::SessionGateCapacity {
            resource: "stream leases".into(),
            limit: 2
        }
    );
    first.close();
    let snapshot = h.host.snapshot_interactions(&ctx, &s).await.unwrap();
    assert_eq!((snapshot.revision(), snapshot.pending().len()), (0, 0));
    drop(second);
}

struct Fixed(Vec<HealthReason>);
impl HealthSource for Fixed {
    fn sample(&self) -> Vec<HealthReason> {
        self.0.clone()
    }
}
struct Panics;
impl HealthSource for Panics {
    fn sample(&self) -> Vec<HealthReason> {
        panic!("a source panicked")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_health_share_one_snapshot_and_contain_sources() {
    let dir = TempDir::new("health");
    let sources: Vec<Arc<dyn HealthSource>> = vec![
        Arc::new(Fixed(vec![
            HealthReason::DependencyDegraded,
            HealthReason::DependencyDegraded,
        ])),
        Arc::new(Panics),
        Arc::new(Fixed(vec![HealthReason::DependencyRecovering; 17])),
    ];
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            sources,
            ..Options::default()
        },
    );
    let s = h.session();
    let description = h.host.describe();
    assert_eq!(description.status, HealthStatus::Degraded);
    assert_eq!(
        description.reasons,
        ["dependency_degraded", "dependency_unavailable"]
    );
    assert_eq!(h.host.health(&s).unwrap(), description);
    assert_eq!(
        description.definitions,
        [("coding".to_owned(), "r1".to_owned())]
    );
    // Stopping precedes and skips the sources.
    bounded(h.host.shutdown()).await.unwrap();
    let stopping = h.host.describe();
    assert_eq!(
        (stopping.status, stopping.reasons.len()),
        (HealthStatus::Stopping, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_fences_admission_synchronously_and_keeps_suspended_runs_importable() {
    let dir = TempDir::new("shutdown");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    let (a, _) = h.host.start(&ctx, &s, start("a", TOOL)).await.unwrap();
    let a = run_id(&a);
    let suspend = {
        let host = h.host.clone();
        let (s, a) = (s.clone(), a.clone());
        spawn_waiting(async move {
            host.suspend(&CancellationToken::new(), &s, "susp", &a)
                .await
        })
        .await
    };
    // The one permit ends a's turn 1. `b` starts only once `a` is suspended: both tools wait
    // on one gate, so a `b` already waiting could take the permit first and `a` would never
    // reach its boundary.
    h.gate.add_permits(1);
    bounded(suspend).await.unwrap().unwrap();
    let (b, _) = h.host.start(&ctx, &s, start("b", TOOL)).await.unwrap();
    let b = run_id(&b);
    let envelope = h.host.export(&ctx, &s, &a).await.unwrap();
    // Admission is fenced before the first await of shutdown.
    let shutdown = h.host.shutdown();
    let mut shutdown = Box::pin(shutdown);
    let _ = futures_poll_once(&mut shutdown).await;
    assert_eq!(
        h.host
            .start(&ctx, &s, start("late", TEXT))
            .await
            .unwrap_err(),
        HostError::Closed
    );
    bounded(shutdown).await.unwrap();
    // The suspended run stays SUSPENDED; the running one became a tombstone.
    assert!(h.store.is_closed());
    let h2 = Harness::new(&dir.store_dir());
    assert_eq!(
        h2.store.inspect(&a).unwrap().unwrap().phase,
        Phase::Suspended
    );
    assert_eq!(
        h2.store.inspect(&b).unwrap().unwrap().phase,
        Phase::Cancelled
    );
    // And the envelope imports into a fresh host over the same authority directory.
    let s2 = h2.session();
    let (imported, _) = h2
        .host
        .import(&ctx, &s2, "import", &envelope)
        .await
        .unwrap();
    assert_eq!(run_id(&imported), a);
    h2.gate.add_permits(1);
    let kinds = finished(&h2, &s2, &a).await;
    assert_eq!(kinds.last(), Some(&EventKind::RunCompleted));
    assert_eq!(h2.host.describe().status, HealthStatus::Ready);
    let _ = RunStatus::Running;
}

/// Polls a future once (so a synchronous prefix runs) without completing it.
async fn futures_poll_once<F: std::future::Future + Unpin>(future: &mut F) -> Option<F::Output> {
    use std::task::Poll;
    std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *future).poll(cx) {
        Poll::Ready(value) => Poll::Ready(Some(value)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_terminal_record_is_not_exportable_and_degrades_health() {
    let dir = TempDir::new("terminal-uncertain");
    let armed = Arc::new(AtomicBool::new(true));
    let hook = failing_at(Step::TempSynced(Phase::Completed), armed);
    let h = Harness::with(
        &dir.store_dir(),
        Options {
            hook: Some(hook),
            ..Options::default()
        },
    );
    let s = h.session();
    let ctx = CancellationToken::new();
    let (started, _) = h.host.start(&ctx, &s, start("op", TEXT)).await.unwrap();
    let run = run_id(&started);
    finished(&h, &s, &run).await;
    // The monitor degrades in steps (the authority failure first, the cleanup verdict after
    // the binding drained), so wait for the last one, not for the first status change.
    let cleanup = Degradation::CleanupUnavailable.as_str().to_owned();
    bounded(async {
        while h.host.describe().status != HealthStatus::Degraded
            || !h.host.describe().reasons.contains(&cleanup)
        {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await;
    let reasons = h.host.describe().reasons;
    assert!(reasons.contains(&Degradation::AuthorityUncertain.as_str().to_owned()));
    assert!(reasons.contains(&Degradation::TerminalSnapshotUnavailable.as_str().to_owned()));
    assert!(reasons.contains(&Degradation::CleanupUnavailable.as_str().to_owned()));
    // The run is in the terminal cache (its events replay) but has no envelope to export.
    bounded(async {
        while h.host.describe().active_runs != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await;
    assert_eq!(
        h.host.export(&ctx, &s, &run).await.unwrap_err(),
        HostError::State
    );
    assert!(
        h.host
            .replay_events(&ctx, &s, &run, ReplayRequest::after(0))
            .await
            .is_ok()
    );
    // The authority fenced the run id: it is never started again in this process.
    assert!(h.store.is_uncertain(&run));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn precommit_setup_observes_the_session_and_the_host_lifetime() {
    let dir = TempDir::new("precommit");
    let h = Harness::new(&dir.store_dir());
    let s = h.session();
    let ctx = CancellationToken::new();
    // Hold the client's commit gate so the start waits in front of it, then reconnect:
    // the start abandons (stale) and nothing durable happened.
    let mut gate = h.sessions.acquire_mutation(&ctx, &s).await.unwrap();
    let waiting = {
        let (host, s) = (h.host.clone(), s.clone());
        spawn_waiting(async move {
            host.start(&CancellationToken::new(), &s, start("op", TEXT))
                .await
        })
        .await
    };
    let reconnect = {
        let (sessions, id) = (h.sessions.clone(), s.client_id().to_owned());
        spawn_waiting(async move { sessions.reconnect(&CancellationToken::new(), &id, 1).await })
            .await
    };
    // The reconnect waits out the active commit, then goes before the queued start.
    gate.close();
    let s2 = bounded(reconnect).await.unwrap().unwrap();
    let error = bounded(waiting).await.unwrap().unwrap_err();
    assert!(
        matches!(error, HostError::StaleSession(Some(_))),
        "{error:?}"
    );
    assert_eq!(h.calls.load(Ordering::SeqCst), 0);
    assert_eq!(h.host.describe().active_runs, 0);
    // Abandoned, so the same operation id runs under the new epoch.
    let (started, duplicate) = h.host.start(&ctx, &s2, start("op", TEXT)).await.unwrap();
    assert!(!duplicate);
    finished(&h, &s2, &run_id(&started)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_bounds_hold_at_and_past_them() {
    use agent_daemon::host::{
        ConfigError, MAX_HEALTH_SOURCES, MAX_SOURCE_REASONS, MAX_TERMINAL_BYTES, MAX_TERMINAL_RUNS,
        TRANSITION_TIMEOUT_RANGE,
    };
    use agent_daemon::ledger::Ledger;
    use agent_daemon::pending::{PendingLimits, PendingRouter};
    use agent_daemon::session::{MAX_SESSIONS, MAX_STREAM_LEASES, SessionStore};
    use agent_daemon::{RunHost, RunHostConfig};

    let dir = TempDir::new("config");
    let store = Arc::new(
        agent_authority::Store::open(
            agent_authority::StoreOptions::new().directory(dir.store_dir()),
        )
        .unwrap(),
    );
    let build = |limits: HostLimits, sources: Vec<Arc<dyn HealthSource>>| {
        let root = CancellationToken::new();
        let router = PendingRouter::new(PendingLimits::default()).unwrap();
        RunHost::new(RunHostConfig {
            root: root.clone(),
            engine: engine(
                router.clone(),
                Arc::new(tokio::sync::Semaphore::new(0)),
                Arc::default(),
            ),
            authority: store.clone(),
            sessions: SessionStore::new(&root, MAX_SESSIONS).unwrap(),
            ledger: Arc::new(Ledger::new(1, 1).unwrap()),
            pending: router,
            definitions: definitions(),
            limits,
            health_sources: sources,
        })
        .map(|_| ())
    };
    let base = HostLimits::default();
    let (fastest, slowest) = TRANSITION_TIMEOUT_RANGE;
    for at in [
        HostLimits {
            concurrent_streams: MAX_STREAM_LEASES,
            ..base
        },
        HostLimits {
            terminal_runs: MAX_TERMINAL_RUNS,
            ..base
        },
        HostLimits {
            terminal_bytes: MAX_TERMINAL_BYTES,
            ..base
        },
        HostLimits {
            transition_timeout: fastest,
            ..base
        },
        HostLimits {
            transition_timeout: slowest,
            ..base
        },
        HostLimits {
            replay_events: 8,
            replay_bytes: 8,
            ..base
        },
    ] {
        assert_eq!(build(at, Vec::new()), Ok(()), "{at:?}");
    }
    for past in [
        HostLimits {
            active_runs: 0,
            ..base
        },
        HostLimits {
            concurrent_streams: MAX_STREAM_LEASES + 1,
            ..base
        },
        HostLimits {
            terminal_runs: MAX_TERMINAL_RUNS + 1,
            ..base
        },
        HostLimits {
            terminal_runs: 0,
            ..base
        },
        HostLimits {
            terminal_bytes: MAX_TERMINAL_BYTES + 1,
            ..base
        },
        HostLimits {
            transition_timeout: fastest - std::time::Duration::from_nanos(1),
            ..base
        },
        HostLimits {
            transition_timeout: slowest + std::time::Duration::from_nanos(1),
            ..base
        },
        HostLimits {
            replay_events: 9,
            replay_bytes: 8,
            ..base
        },
    ] {
        assert_eq!(
            build(past, Vec::new()),
            Err(ConfigError::Limits),
            "{past:?}"
        );
    }
    let source = || Arc::new(Fixed(Vec::new())) as Arc<dyn HealthSource>;
    assert_eq!(
        build(base, (0..MAX_HEALTH_SOURCES).map(|_| source()).collect()),
        Ok(())
    );
    assert_eq!(
        build(base, (0..=MAX_HEALTH_SOURCES).map(|_| source()).collect()),
        Err(ConfigError::HealthSources)
    );
    // A source at its reason bound is counted; past it, it is a broken source.
    let reasons_dir = TempDir::new("reasons");
    let h = Harness::with(
        &reasons_dir.store_dir(),
        Options {
            sources: vec![Arc::new(Fixed(vec![
                HealthReason::DependencyRecovering;
                MAX_SOURCE_REASONS
            ]))],
            ..Options::default()
        },
    );
    assert_eq!(h.host.describe().reasons, ["dependency_recovering"]);
}
