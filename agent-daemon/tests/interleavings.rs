//! Property: any interleaving of start, cancel, suspend, resume and reconnect from several
//! clients keeps every run's event sequence gap-free from 1 with exactly one run terminal,
//! and no run ever has two owners. Bounded case count (each case opens a real authority).

mod support;

use std::sync::{Arc, Mutex};

use agent_core::event::ReplayRequest;
use agent_daemon::HostError;
use agent_daemon::host::Success;
use agent_daemon::session::Session;
use proptest::prelude::*;
use support::*;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
enum Op {
    Start { client: usize, tool: bool },
    Cancel { client: usize, run: usize },
    Suspend { client: usize, run: usize },
    Resume { client: usize, run: usize },
    Reconnect { client: usize },
    Permit,
}

const CLIENTS: usize = 3;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..CLIENTS, any::<bool>()).prop_map(|(client, tool)| Op::Start { client, tool }),
        1 => (0..CLIENTS, 0..8usize).prop_map(|(client, run)| Op::Cancel { client, run }),
        2 => (0..CLIENTS, 0..8usize).prop_map(|(client, run)| Op::Suspend { client, run }),
        2 => (0..CLIENTS, 0..8usize).prop_map(|(client, run)| Op::Resume { client, run }),
        1 => (0..CLIENTS).prop_map(|client| Op::Reconnect { client }),
        2 => Just(Op::Permit),
    ]
}

struct World {
    h: Harness,
    sessions: Mutex<Vec<Session>>,
    runs: Mutex<Vec<String>>,
}

impl World {
    fn session(&self, client: usize) -> Session {
        self.sessions.lock().unwrap()[client].clone()
    }

    fn run(&self, index: usize) -> Option<String> {
        let runs = self.runs.lock().unwrap();
        (!runs.is_empty()).then(|| runs[index % runs.len()].clone())
    }
}

async fn apply(world: Arc<World>, index: usize, op: Op) {
    let ctx = CancellationToken::new();
    let operation = format!("op-{index}");
    match op {
        Op::Start { client, tool } => {
            let text = if tool { TOOL } else { TEXT };
            let session = world.session(client);
            if let Ok((Success::Started { run_id, .. }, _)) = world
                .h
                .host
                .start(&ctx, &session, start(&operation, text))
                .await
            {
                world.runs.lock().unwrap().push(run_id);
            }
        }
        Op::Cancel { client, run } => {
            if let Some(run) = world.run(run) {
                let _ = world
                    .h
                    .host
                    .cancel(&ctx, &world.session(client), &operation, &run)
                    .await;
            }
        }
        Op::Suspend { client, run } => {
            if let Some(run) = world.run(run) {
                let session = world.session(client);
                // A suspension waits for a boundary; give up after a while (that withdraws it).
                let wait = world.h.host.suspend(&ctx, &session, &operation, &run);
                let _ = tokio::time::timeout(std::time::Duration::from_millis(50), wait).await;
            }
        }
        Op::Resume { client, run } => {
            if let Some(run) = world.run(run) {
                let _ = world
                    .h
                    .host
                    .resume(&ctx, &world.session(client), &operation, &run)
                    .await;
            }
        }
        Op::Reconnect { client } => {
            let session = world.session(client);
            let reconnect = world
                .h
                .sessions
                .reconnect(&ctx, session.client_id(), session.epoch());
            if let Ok(Ok(new)) = tokio::time::timeout(WAIT, reconnect).await {
                let mut sessions = world.sessions.lock().unwrap();
                if sessions[client].epoch() < new.epoch() {
                    sessions[client] = new;
                }
            }
        }
        Op::Permit => world.h.gate.add_permits(1),
    }
}

async fn check(ops: Vec<Op>) {
    let dir = TempDir::new("interleavings");
    let h = Harness::new(&dir.store_dir());
    let sessions = (0..CLIENTS).map(|_| h.session()).collect();
    let world = Arc::new(World {
        h,
        sessions: Mutex::new(sessions),
        runs: Mutex::new(Vec::new()),
    });
    let mut tasks = Vec::new();
    for (index, op) in ops.into_iter().enumerate() {
        tasks.push(tokio::spawn(apply(world.clone(), index, op)));
        tokio::task::yield_now().await;
    }
    for task in tasks {
        bounded(task).await.unwrap();
    }
    // Let every run finish: open the gate for everyone, then cancel what is left (a
    // suspended run ends cancelled).
    world.h.gate.add_permits(1000);
    let runs = world.runs.lock().unwrap().clone();
    let current: Vec<Session> = world.sessions.lock().unwrap().clone();
    let ctx = CancellationToken::new();
    for (index, run) in runs.iter().enumerate() {
        let owners: Vec<&Session> = {
            let mut owners = Vec::new();
            for session in &current {
                match world
                    .h
                    .host
                    .replay_events(&ctx, session, run, ReplayRequest::after(0))
                    .await
                {
                    Ok(_) => owners.push(session),
                    Err(HostError::RunUnavailable) => {}
                    Err(other) => panic!("unexpected {other:?}"),
                }
            }
            owners
        };
        assert_eq!(owners.len(), 1, "exactly one owner of {run}");
        let owner = owners[0];
        let _ = world
            .h
            .host
            .cancel(&ctx, owner, &format!("final-{index}"), run)
            .await;
        let events = bounded(async {
            loop {
                let page = world
                    .h
                    .host
                    .replay_events(&ctx, owner, run, ReplayRequest::after(0))
                    .await
                    .unwrap();
                if page.events.last().is_some_and(|e| e.kind().ends_run()) {
                    return page.events;
                }
                drop(page);
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
        .await;
        for (n, event) in events.iter().enumerate() {
            assert_eq!(event.sequence(), n as u64 + 1, "gap-free from 1");
        }
        assert_eq!(
            events.iter().filter(|e| e.kind().ends_run()).count(),
            1,
            "one terminal"
        );
    }
    bounded(world.h.host.shutdown()).await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_keep_sequences_gap_free_with_one_terminal_and_one_owner(
        ops in proptest::collection::vec(op(), 1..14)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(check(ops));
    }
}
