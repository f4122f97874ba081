//! Notifications a server sends on its own, against the in-repository fault server: progress
//! during a call reaches the kernel's reporter, and a list change announced right after
//! initialize publishes a new generation without anyone asking (what `npm_servers.rs` checks
//! against `server-everything`, with nothing but cargo).

mod support;

use std::time::Duration;

use agent_core::stage::PlanId;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

#[test]
fn progress_notifications_of_a_call_reach_the_kernel_reporter() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let recorder = Recorder::default();
        let result = call_reporting(&lease, "fault.progress", json!({"steps": 3}), &recorder)
            .await
            .unwrap();
        assert_eq!((result.content(), result.is_problem()), ("3 steps", false));
        // Progress is advisory (a notification racing the answer may be dropped), but what
        // arrives is forwarded in order, as `progress/total: message`.
        let progress = recorder.0.lock().unwrap().clone();
        let expected = ["1/3: step 1", "2/3: step 2", "3/3: step 3"];
        assert!(!progress.is_empty(), "no progress was reported");
        let mut rest = expected.iter();
        assert!(
            progress.iter().all(|p| rest.any(|e| e == p)),
            "{progress:?} is not an ordered part of {expected:?}"
        );
        lease.release(&CancellationToken::new()).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn a_list_change_right_after_initialize_publishes_a_second_generation_unasked() {
    run(async {
        let config = fault_config("fault", json!({"env": {"FAULT_LIST_CHANGED_ON_INIT": "1"}}));
        let source = start(&config, &[]).await;
        let sequence = |id: &PlanId| -> u64 {
            id.as_str()
                .split(':')
                .nth(1)
                .and_then(|n| n.parse().ok())
                .expect("a plan id names its sequence")
        };
        // The change may already be published when start returns.
        let mut current = source.current_plan_id();
        while current.as_ref().is_none_or(|id| sequence(id) < 2) {
            current = tokio::time::timeout(
                Duration::from_secs(20),
                source.wait_for_generation(current.as_ref()),
            )
            .await
            .expect("a list_changed refresh");
        }
        assert!(source.health().refreshes >= 1);
        let tools = source.current_tools().unwrap();
        assert!(
            tools.iter().any(|t| t.name() == "fault.extra_0"),
            "the refreshed list is published"
        );
        source.shutdown().await;
    });
}
