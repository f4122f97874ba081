//! The end-to-end scenario of docs/daemon.md, in process: two run hosts (two daemons of one user: two authority
//! store handles over one per-user directory) hand a run over through a signed snapshot.
//! Start on A, suspend, export; a reconnect on A fences A's old streams; A shuts down
//! cleanly (its suspended run stays SUSPENDED); B imports and finishes the run; the same
//! snapshot is then refused everywhere, and a host over another authority directory never
//! accepts it.

mod support;

use agent_authority::Phase;
use agent_core::event::{EventKind, ReplayRequest};
use agent_daemon::HostError;
use agent_daemon::host::Success;
use support::*;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_moves_from_host_a_to_host_b_exactly_once() {
    let dir = TempDir::new("scenario");
    let elsewhere = TempDir::new("scenario-other");
    let ctx = CancellationToken::new();
    let a = Harness::new(&dir.store_dir());
    let b = Harness::new(&dir.store_dir());

    // Start on A and suspend at the first boundary.
    let client_a = a.session();
    let (started, _) = a
        .host
        .start(&ctx, &client_a, start("start", TOOL))
        .await
        .unwrap();
    let Success::Started { run_id, .. } = started else {
        panic!()
    };
    let suspend = {
        let (host, s, run) = (a.host.clone(), client_a.clone(), run_id.clone());
        spawn_waiting(async move {
            host.suspend(&CancellationToken::new(), &s, "suspend", &run)
                .await
        })
        .await
    };
    a.gate.add_permits(1);
    let (suspended, _) = bounded(suspend).await.unwrap().unwrap();
    let Success::Suspended { sequence } = suspended else {
        panic!()
    };
    let snapshot = a.host.export(&ctx, &client_a, &run_id).await.unwrap();

    // While A owns the run, B cannot take it.
    let client_b = b.session();
    assert_eq!(
        b.host
            .import(&ctx, &client_b, "early", &snapshot)
            .await
            .unwrap_err(),
        HostError::State
    );

    // A reconnect on A fences A's old streams before the epoch advances.
    let mut old_stream = a
        .host
        .replay_events(
            &ctx,
            &client_a,
            &run_id,
            ReplayRequest::after(0).with_tail(),
        )
        .await
        .unwrap();
    let mut interactions = a
        .host
        .subscribe_interactions(&ctx, &client_a)
        .await
        .unwrap();
    let reconnect = {
        let sessions = a.sessions.clone();
        let id = client_a.client_id().to_owned();
        tokio::spawn(async move { sessions.reconnect(&CancellationToken::new(), &id, 1).await })
    };
    assert_eq!(bounded(old_stream.next()).await, None);
    assert!(old_stream.is_fenced());
    assert_eq!(bounded(interactions.next()).await, None);
    old_stream.close();
    interactions.close();
    let client_a2 = bounded(reconnect).await.unwrap().unwrap();
    assert_eq!(client_a2.epoch(), 2);
    assert!(matches!(
        a.host.export(&ctx, &client_a, &run_id).await.unwrap_err(),
        HostError::StaleSession(Some(_))
    ));
    // The new epoch owns the run (same stable client id).
    assert_eq!(
        a.host.export(&ctx, &client_a2, &run_id).await.unwrap(),
        snapshot
    );

    // A clean shutdown of A leaves the run SUSPENDED and importable.
    bounded(a.host.shutdown()).await.unwrap();
    assert_eq!(
        b.store.inspect(&run_id).unwrap().unwrap().phase,
        Phase::Suspended
    );

    // B imports it and the run finishes there.
    let (imported, duplicate) = b
        .host
        .import(&ctx, &client_b, "import", &snapshot)
        .await
        .unwrap();
    assert!(!duplicate);
    assert_eq!(
        imported,
        Success::Imported {
            run_id: run_id.clone(),
            sequence: sequence + 1
        }
    );
    b.gate.add_permits(1);
    let kinds = bounded(async {
        let mut tail = b
            .host
            .replay_events(
                &ctx,
                &client_b,
                &run_id,
                ReplayRequest::after(sequence).with_tail(),
            )
            .await
            .unwrap();
        let mut kinds: Vec<EventKind> = tail.events.iter().map(|e| e.kind()).collect();
        let mut last = tail.events.last().map_or(sequence, |e| e.sequence());
        while let Some(event) = tail.next().await {
            assert_eq!(event.sequence(), last + 1, "gap-free");
            last = event.sequence();
            kinds.push(event.kind());
        }
        kinds
    })
    .await;
    assert_eq!(kinds.first(), Some(&EventKind::TurnStarted));
    assert_eq!(kinds.last(), Some(&EventKind::RunCompleted));
    assert_eq!(kinds.iter().filter(|k| k.ends_run()).count(), 1);

    // The same snapshot a second time: refused by B (a replayed duplicate under the same
    // operation id, a state failure under a new one), by a third host over the same
    // directory, and by a host over another authority.
    bounded(async {
        while b.store.inspect(&run_id).unwrap().unwrap().phase != Phase::Completed {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    })
    .await;
    assert_eq!(
        b.host
            .import(&ctx, &client_b, "import-again", &snapshot)
            .await
            .unwrap_err(),
        HostError::State
    );
    let c = Harness::new(&dir.store_dir());
    let client_c = c.session();
    assert_eq!(
        c.host
            .import(&ctx, &client_c, "import", &snapshot)
            .await
            .unwrap_err(),
        HostError::State
    );
    let d = Harness::new(&elsewhere.store_dir());
    let client_d = d.session();
    assert_eq!(
        d.host
            .import(&ctx, &client_d, "import", &snapshot)
            .await
            .unwrap_err(),
        HostError::State
    );
    bounded(b.host.shutdown()).await.unwrap();
}
