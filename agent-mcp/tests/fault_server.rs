//! Faults against the in-repository rmcp server (`examples/mcp_fault_server.rs`): calls and
//! their outcome classes, bounded results, list-change bursts, annotations, collisions,
//! crashes and restarts, resume, and process cleanup.

mod support;

use std::time::Duration;

use agent_core::stage::{DispatchError, ToolPlanSource};
use agent_core::tool::{Capability, Effect, ExecutionState, ReplaySafety};
use agent_mcp::{HostState, McpError, McpToolPlanSource, ServerState};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

fn execution(error: DispatchError) -> agent_core::tool::ExecutionError {
    match error {
        DispatchError::Execution(e) => e,
        other => panic!("not an execution error: {other:?}"),
    }
}

fn pgid(source: &McpToolPlanSource) -> i32 {
    source.health().servers[0].pgid.expect("a pgid")
}

#[test]
fn tools_are_namespaced_mapped_and_called() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &["read_file"]).await;
        let tools = source.current_tools().unwrap();
        let find = |name: &str| {
            tools
                .iter()
                .find(|t| t.name() == name)
                .unwrap_or_else(|| panic!("{name} missing"))
        };
        assert_eq!(find("read_file").origin.as_str(), "compiled");
        let echo = find("fault.echo");
        assert_eq!(echo.origin.as_str(), "fault");
        assert_eq!(
            (echo.effect(), echo.replay()),
            (Effect::ReadOnly, ReplaySafety::Safe)
        );
        let note = find("fault.add_note");
        assert_eq!(
            (note.effect(), note.replay()),
            (Effect::Mutating, ReplaySafety::Unsafe)
        );
        // Contradictory hints tighten; no annotations is the worst case.
        assert_eq!(find("fault.contradictory").effect(), Effect::Mutating);
        let plain = find("fault.plain");
        assert_eq!(
            (plain.effect(), plain.replay()),
            (Effect::Mutating, ReplaySafety::Unsafe)
        );
        assert_eq!(plain.capabilities(), vec![Capability::NetworkAccess]);
        // A name outside the grammar is normalized, and still calls the server's tool.
        assert_eq!(
            find("fault.bad_name").server_tool.as_deref(),
            Some("Bad Name!")
        );

        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let result = call(&lease, "fault.echo", json!({"text": "hi"}), &cancel)
            .await
            .unwrap();
        assert_eq!((result.content(), result.is_problem()), ("hi", false));
        let result = call(&lease, "fault.bad_name", json!({}), &cancel)
            .await
            .unwrap();
        assert_eq!(result.content(), "ok");
        // isError: a model-visible problem.
        let result = call(&lease, "fault.fail", json!({}), &cancel)
            .await
            .unwrap();
        assert!(result.is_problem());
        assert_eq!(result.content(), "it failed");
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn an_untrusted_server_gets_the_worst_case_and_an_override_relaxes_one_tool() {
    run(async {
        let probe = start(&fault_config("fault", json!({})), &[]).await;
        let fingerprint = probe
            .current_tools()
            .unwrap()
            .iter()
            .find(|t| t.name() == "fault.echo")
            .unwrap()
            .fingerprint
            .clone()
            .unwrap();
        probe.shutdown().await;
        let config = fault_config(
            "fault",
            json!({"trusted": false, "overrides": {"echo": {"fingerprint": fingerprint, "effect": "read_only", "replay": "safe"},
                                                      "sleep": {"fingerprint": "1".repeat(64), "effect": "read_only", "replay": "safe"}}}),
        );
        let source = start(&config, &[]).await;
        let tools = source.current_tools().unwrap();
        let find = |name: &str| tools.iter().find(|t| t.name() == name).unwrap();
        let echo = find("fault.echo");
        assert_eq!(
            (echo.effect(), echo.basis.map(|b| b.as_str())),
            (Effect::ReadOnly, Some("operator"))
        );
        let sleep = find("fault.sleep");
        assert_eq!(
            (sleep.effect(), sleep.replay(), sleep.stale_override),
            (Effect::Mutating, ReplaySafety::Unsafe, true)
        );
        assert_eq!(sleep.capabilities(), vec![Capability::NetworkAccess]);
        source.shutdown().await;
    });
}

#[test]
fn a_timeout_after_send_is_uncertain_for_a_mutating_tool_and_definitive_for_a_read_only_one() {
    run(async {
        let source = start(&fault_config("fault", json!({"callTimeoutMs": 300})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let write = execution(
            call(&lease, "fault.slow_write", json!({"ms": 3000}), &cancel)
                .await
                .unwrap_err(),
        );
        assert_eq!(write.state(), ExecutionState::Uncertain);
        let read = execution(
            call(&lease, "fault.sleep", json!({"ms": 3000}), &cancel)
                .await
                .unwrap_err(),
        );
        assert_eq!(read.state(), ExecutionState::Definitive);
        // The server was told, and the session still works.
        let stats = call(&lease, "fault.stats", json!({}), &cancel)
            .await
            .unwrap();
        let stats: serde_json::Value = serde_json::from_str(stats.content()).unwrap();
        assert_eq!(stats["cancelled"], 2, "{stats}");
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn cancellation_sends_notifications_cancelled_and_a_late_response_is_ignored() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let fresh = CancellationToken::new();
        // Cancel once the server has the request, not after a fixed delay: on a loaded
        // machine the request may not be sent within any fixed time. Every `stats` call
        // counts itself, so the k-th poll sees more than k calls once the slow one arrived.
        let cancel_when_sent = async {
            for polls in 1..=1000_u64 {
                let stats = call(&lease, "fault.stats", json!({}), &fresh)
                    .await
                    .unwrap();
                let stats: serde_json::Value = serde_json::from_str(stats.content()).unwrap();
                if stats["calls"].as_u64().unwrap() > polls {
                    cancel.cancel();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the slow call never reached the server");
        };
        // The server ignores the cancellation and answers late: nobody is waiting for it.
        let (outcome, ()) = tokio::join!(
            call(&lease, "fault.slow_write", json!({"ms": 2000}), &cancel),
            cancel_when_sent
        );
        let error = outcome.unwrap_err();
        // Whichever of the tool and the dispatcher sees the cancellation first, a sent
        // mutating call is never reported as not run.
        match error {
            DispatchError::Cancelled { .. } => {}
            DispatchError::Execution(e) => assert_eq!(e.state(), ExecutionState::Uncertain),
            other => panic!("{other:?}"),
        }
        // Past the late answer: the session still works, and the server saw one cancellation.
        tokio::time::sleep(Duration::from_millis(2200)).await;
        let stats = call(&lease, "fault.stats", json!({}), &fresh)
            .await
            .unwrap();
        let stats: serde_json::Value = serde_json::from_str(stats.content()).unwrap();
        assert_eq!(stats["cancelled"], 1, "{stats}");
        lease.release(&fresh).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn a_giant_result_is_a_head_and_tail_preview() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let bytes = 2 * 1024 * 1024;
        let result = call(&lease, "fault.giant", json!({"bytes": bytes}), &cancel)
            .await
            .unwrap();
        let content = result.content();
        assert!(content.len() <= agent_mcp::result::DEFAULT_RESULT_BYTES);
        assert!(content.starts_with("HEAD") && content.ends_with("TAIL"));
        assert!(
            content.contains(&format!("bytes omitted of {bytes}"))
                || content.contains(&format!("of {bytes} bytes omitted")),
            "{}",
            &content[..200]
        );
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn a_crash_mid_call_is_uncertain_then_leases_fail_closed_until_a_restart_publishes_a_new_generation()
 {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let first = source.lease_current_typed().await.unwrap();
        let first_id = first.id().clone();
        let old_pgid = pgid(&source);
        let cancel = CancellationToken::new();
        let error = execution(
            call(&first, "fault.crash", json!({}), &cancel)
                .await
                .unwrap_err(),
        );
        assert_eq!(error.state(), ExecutionState::Uncertain);
        // Until the restart publishes, or after it: never the compiled tools alone.
        let next = source
            .wait_for_generation(Some(&first_id))
            .await
            .expect("a new generation");
        assert_ne!(next, first_id);
        let health = source.health();
        assert_eq!(health.state, HostState::Ready);
        assert_eq!(health.servers[0].restarts, 1);
        assert_ne!(health.servers[0].pgid, Some(old_pgid));
        // The old lease keeps its generation; its calls fail (definitively: nothing sent).
        let stale = execution(
            call(&first, "fault.echo", json!({"text": "x"}), &cancel)
                .await
                .unwrap_err(),
        );
        assert_eq!(stale.state(), ExecutionState::Definitive);
        // Resuming the crashed generation fails closed.
        assert!(source.lease_generation(&first_id, &cancel).await.is_err());
        let second = source.lease_current_typed().await.unwrap();
        assert_eq!(second.id(), &next);
        assert_eq!(
            call(&second, "fault.echo", json!({"text": "back"}), &cancel)
                .await
                .unwrap()
                .content(),
            "back"
        );
        // Releasing the last lease of the crashed generation retires its launch.
        first.release(&cancel).await.unwrap();
        assert!(wait_group_empty(old_pgid).await.is_empty());
        second.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn without_restarts_a_crash_fails_new_leases_closed_with_a_typed_error() {
    run(async {
        let options = agent_mcp::HostOptions {
            restart: agent_mcp::RestartPolicy {
                max_attempts: 0,
                ..Default::default()
            },
            ..Default::default()
        };
        let source = McpToolPlanSource::start(
            &fault_config("fault", json!({})),
            compiled(&["tool"]),
            vec![],
            vec![],
            options,
        )
        .await
        .unwrap();
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let _ = call(&lease, "fault.crash", json!({}), &cancel).await;
        for _ in 0..100 {
            if source.health().servers[0].state == ServerState::Failed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let error = source.lease_current_typed().await.unwrap_err();
        assert!(
            matches!(&error, McpError::ServerDown { server, .. } if server == "fault"),
            "{error}"
        );
        assert!(source.lease_current(&cancel).await.is_err());
        let health = source.health();
        assert_eq!(
            (health.state, health.plan_id),
            (HostState::Unavailable, None)
        );
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
        assert_eq!(source.health().state, HostState::Stopped);
    });
}

#[test]
fn a_list_change_burst_is_coalesced_and_running_leases_keep_their_generation() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let lease = source.lease_current_typed().await.unwrap();
        let before = lease.definitions().to_vec();
        let cancel = CancellationToken::new();
        call(&lease, "fault.burst", json!({"count": 20}), &cancel)
            .await
            .unwrap();
        // Wait until the final list (20 extra tools) is current.
        let mut current = source.current_plan_id();
        loop {
            let tools = source.current_tools().unwrap();
            if tools
                .iter()
                .filter(|t| t.name().starts_with("fault.extra_"))
                .count()
                == 20
            {
                break;
            }
            current = source.wait_for_generation(current.as_ref()).await;
        }
        let health = source.health();
        assert!(
            health.refreshes < 20,
            "{} refreshes for 20 notifications",
            health.refreshes
        );
        assert_eq!(
            lease.definitions(),
            &before[..],
            "a lease never sees a changed definition"
        );
        // The old generation is still leasable for resume while leased.
        let again = source.lease_generation(lease.id(), &cancel).await.unwrap();
        assert_eq!(again.definitions(), &before[..]);
        again.release(&cancel).await.unwrap();
        lease.release(&cancel).await.unwrap();
        // Released and superseded: gone, and resume fails closed.
        assert!(matches!(
            source.lease_generation(lease.id(), &cancel).await,
            Err(agent_core::stage::PlanError::UnknownGeneration(_))
        ));
        source.shutdown().await;
    });
}

#[test]
fn a_name_colliding_with_a_compiled_tool_fails_the_generation_with_both_named() {
    run(async {
        let config = fault_config("fault", json!({}));
        let error = McpToolPlanSource::start(
            &config,
            compiled(&["fault.echo"]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap_err();
        match error {
            McpError::Collision {
                name,
                first,
                second,
            } => {
                assert_eq!(name, "fault.echo");
                assert!(first.contains("compiled tool `fault.echo`"), "{first}");
                assert!(
                    second.contains("MCP server `fault` tool `echo`"),
                    "{second}"
                );
            }
            other => panic!("{other}"),
        }
    });
}

#[test]
fn a_schema_past_the_kernel_bound_fails_the_generation_closed() {
    run(async {
        let config = fault_config("fault", json!({"env": {"FAULT_BIG_SCHEMA": "1"}}));
        let error =
            McpToolPlanSource::start(&config, compiled(&[]), vec![], vec![], quick_options())
                .await
                .unwrap_err();
        assert!(
            matches!(&error, McpError::Definition { server, tool, .. } if server == "fault" && tool == "big_schema"),
            "{error}"
        );
    });
}

#[test]
fn a_list_of_max_pages_is_followed_to_its_end_and_one_page_more_fails_the_start() {
    use agent_mcp::client::MAX_LIST_PAGES;
    run(async {
        let single = start(&fault_config("fault", json!({})), &[]).await;
        let all = single.current_tools().unwrap().len();
        single.shutdown().await;
        // The server has fewer tools than pages, so each page past the tools is empty but
        // still chains a cursor: the count of pages, not of tools, meets the bound.
        let paged = |pages: usize| {
            fault_config(
                "fault",
                json!({"env": {"FAULT_LIST_PAGES": pages.to_string()}}),
            )
        };
        let at_bound = start(&paged(MAX_LIST_PAGES), &[]).await;
        assert_eq!(at_bound.current_tools().unwrap().len(), all);
        at_bound.shutdown().await;
        let error = McpToolPlanSource::start(
            &paged(MAX_LIST_PAGES + 1),
            compiled(&[]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains(&format!("more than {MAX_LIST_PAGES} pages")),
            "{error}"
        );
    });
}

#[test]
fn a_digest_mismatch_stops_the_launch_and_a_match_allows_it() {
    run(async {
        let error = McpToolPlanSource::start(
            &fault_config("fault", json!({"sha256": "1".repeat(64)})),
            compiled(&[]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&error, McpError::Launch { server, source: agent_mcp::process::LaunchError::DigestMismatch { .. } } if server == "fault"),
            "{error}"
        );
        let digest = agent_mcp::process::sha256_file(&fault_server()).unwrap();
        let source = start(&fault_config("fault", json!({"sha256": digest})), &[]).await;
        source.shutdown().await;
    });
}

#[test]
fn shutdown_and_drop_leave_no_process_grandchild_or_zombie() {
    run(async {
        // Shutdown.
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let group = pgid(&source);
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let grandchild: i32 = call(&lease, "fault.spawn_grandchild", json!({}), &cancel)
            .await
            .unwrap()
            .content()
            .parse()
            .unwrap();
        assert!(processes_in_group(group).contains(&grandchild));
        // Server, watchdog and grandchild.
        assert_eq!(
            processes_in_group(group).len(),
            3,
            "{:?}",
            processes_in_group(group)
        );
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
        assert_eq!(wait_group_empty(group).await, Vec::<i32>::new());

        // Drop without shutdown: the group is killed synchronously.
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let group = pgid(&source);
        let lease = source.lease_current_typed().await.unwrap();
        let grandchild: i32 = call(&lease, "fault.spawn_grandchild", json!({}), &cancel)
            .await
            .unwrap()
            .content()
            .parse()
            .unwrap();
        lease.release(&cancel).await.unwrap();
        drop(lease);
        drop(source);
        assert_eq!(wait_group_empty(group).await, Vec::<i32>::new());
        assert!(!process_exists(grandchild));
    });
}

#[test]
fn a_lease_dropped_without_release_does_not_retain_its_generation() {
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let cancel = CancellationToken::new();
        let worker = source.lease_current_typed().await.unwrap();
        let forgotten = source.lease_current_typed().await.unwrap();
        let old = forgotten.id().clone();
        assert_eq!(source.health().active_leases, 2);
        drop(forgotten);
        assert_eq!(source.health().active_leases, 1);
        call(&worker, "fault.toggle", json!({}), &cancel)
            .await
            .unwrap();
        source.wait_for_generation(Some(&old)).await.unwrap();
        worker.release(&cancel).await.unwrap();
        assert_eq!(source.health().active_leases, 0);
        assert_eq!(source.health().retained_generations, 1);
        assert!(matches!(
            source.lease_generation(&old, &cancel).await,
            Err(agent_core::stage::PlanError::UnknownGeneration(_))
        ));
        source.shutdown().await;
    });
}

#[test]
fn a_server_may_list_up_to_max_tools_and_one_more_fails_the_refresh() {
    use agent_mcp::client::MAX_TOOLS_PER_SERVER;
    run(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let base = source.current_tools().unwrap().len();
        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let first = source.current_plan_id();
        call(
            &lease,
            "fault.burst",
            json!({"count": MAX_TOOLS_PER_SERVER - base}),
            &cancel,
        )
        .await
        .unwrap();
        let mut current = first;
        while source.current_tools().unwrap().len() < MAX_TOOLS_PER_SERVER {
            current = source.wait_for_generation(current.as_ref()).await;
        }
        assert_eq!(source.current_tools().unwrap().len(), MAX_TOOLS_PER_SERVER);
        call(&lease, "fault.burst", json!({"count": 1}), &cancel)
            .await
            .unwrap();
        while source.health().servers[0].last_error.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The list past the bound is refused; the last good generation stays current.
        let health = source.health();
        assert!(
            health.servers[0]
                .last_error
                .as_deref()
                .unwrap_or("")
                .contains(&format!("more than {MAX_TOOLS_PER_SERVER} tools")),
            "{health:?}"
        );
        assert_eq!(source.current_tools().unwrap().len(), MAX_TOOLS_PER_SERVER);
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
    });
}

#[test]
fn a_source_dropped_after_its_runtime_leaves_no_process_or_zombie() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (source, group) = runtime.block_on(async {
        let source = start(&fault_config("fault", json!({})), &[]).await;
        let group = pgid(&source);
        (source, group)
    });
    assert_eq!(
        processes_in_group(group).len(),
        2,
        "the server and its watchdog"
    );
    runtime.shutdown_timeout(Duration::from_secs(2));
    drop(source); // no runtime any more: the kill and the reaping are synchronous
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_in_group(group).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(processes_in_group(group), Vec::<i32>::new());
}
