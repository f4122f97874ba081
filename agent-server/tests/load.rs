//! Load: 64 concurrent clients, each running 16 runs of the fixture's text definition over
//! the socket. Every run has a gap-free sequence and exactly one run terminal, nothing is
//! lost, and the host's tables are bounded afterwards.

mod support;

use agent_server::fixture::{FixtureOptions, TEXT_DEFINITION_ID};
use support::*;

/// Concurrent clients.
const CLIENTS: usize = 64;
/// Runs per client.
const RUNS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_sixteen_runs_each() {
    let options = FixtureOptions {
        sessions: CLIENTS * 2,
        ledger: (CLIENTS * 2, RUNS * 4),
        ..FixtureOptions::default()
    };
    let mut fixture = Fixture::with("load", options, |config| {
        config.maximum_sessions = CLIENTS * 2
    })
    .await;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let mut client = fixture.client().await;
        tasks.push(tokio::spawn(async move {
            let s = session(&mut client).await;
            let mut runs = Vec::new();
            for r in 0..RUNS {
                let run = start(&mut client, &s, &format!("op-{c}-{r}"), TEXT_DEFINITION_ID).await;
                let (events, terminals) = collect_run(&mut client, &s, &run).await;
                assert_eq!(terminals, 1, "run {run}");
                assert!(
                    is_run_terminal(events.last().unwrap()),
                    "the terminal is last"
                );
                assert!(events.iter().all(|e| e.run_id == run));
                runs.push((run, events.len()));
            }
            runs
        }));
    }
    let mut all = std::collections::BTreeSet::new();
    for task in tasks {
        for (run, count) in bounded(task).await.unwrap() {
            assert!(count >= 3);
            assert!(all.insert(run), "run ids are unique");
        }
    }
    assert_eq!(all.len(), CLIENTS * RUNS, "nothing lost");
    // A run's slot is released by its monitor just after the terminal event is published:
    // wait for the host's signal that every slot is free.
    let never = tokio_util::sync::CancellationToken::new();
    bounded(fixture.daemon().host().wait_idle(&never))
        .await
        .unwrap();
    assert_eq!(fixture.daemon().host().describe().active_runs, 0);
    assert!(fixture.daemon().host().sessions().len() <= CLIENTS);
    let (entries, attempts) = fixture.daemon().server().registry_sizes();
    assert_eq!((entries, attempts), (CLIENTS, 0));
    fixture.shutdown().await;
    assert!(!fixture.temp.path().join("scope/agent.sock").exists());
}
