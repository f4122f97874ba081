//! Against MCP servers no one here wrote, at the versions pinned in `tests/npm/package.json`
//! (`.ci/run` installs them with `npm ci`): `server-everything` (list_changed right after
//! initialize, long-running calls for timeouts and cancellation) and `server-memory`
//! (mutating tools that are not idempotent).
//!
//! Without node or the install they skip with one line saying so, except under `CI`, where
//! they are required. The same behaviours are tested against the workspace's own server
//! (`fault_server.rs`, `server_notifications.rs`), which needs nothing but cargo.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use agent_core::stage::DispatchError;
use agent_core::tool::{Effect, ExecutionState, ReplaySafety};
use agent_mcp::{McpConfig, McpToolPlanSource};
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;

/// The installed server's entry point, or `None` (the test is skipped) without node or the
/// install.
fn server(bin: &str) -> Option<PathBuf> {
    let has_node = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("node").is_file()));
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/.bin")
        .join(bin);
    if has_node && path.exists() {
        return Some(path);
    }
    skip_or_fail("node and `npm ci` in agent-mcp/tests/npm");
    None
}

fn config(
    key: &str,
    command: &std::path::Path,
    args: &[&str],
    extra: serde_json::Value,
) -> McpConfig {
    let mut entry = json!({"command": command.to_str().unwrap(), "args": args, "startupTimeoutMs": 60000, "shutdownTimeoutMs": 1000});
    if let (serde_json::Value::Object(entry), serde_json::Value::Object(extra)) =
        (&mut entry, extra)
    {
        entry.extend(extra);
    }
    McpConfig::parse(&json!({"mcpServers": {key: entry}}).to_string()).unwrap()
}

#[test]
fn server_everything_list_changed_timeout_and_cancellation() {
    let Some(bin) = server("mcp-server-everything") else {
        return;
    };
    run(async move {
        let config = config(
            "everything",
            &bin,
            &["stdio"],
            json!({"trusted": true, "callTimeoutMs": 500}),
        );
        let source = McpToolPlanSource::start(
            &config,
            compiled(&["read_file"]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap();
        let group = source.health().servers[0].pgid.unwrap();
        // The server announces a list change right after initialize: a second generation
        // follows without anyone asking (it may already be current when start returns).
        let sequence = |id: &agent_core::stage::PlanId| -> u64 {
            id.as_str().split(':').nth(1).unwrap().parse().unwrap()
        };
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
        let echo = tools
            .iter()
            .find(|t| t.name() == "everything.echo")
            .expect("echo");
        assert_ne!(
            echo.replay(),
            ReplaySafety::Unsafe,
            "echo is idempotent by its hints"
        );
        let long = tools
            .iter()
            .find(|t| t.name() == "everything.trigger-long-running-operation")
            .expect("long-running")
            .clone();

        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let result = call(
            &lease,
            "everything.echo",
            json!({"message": "hello"}),
            &cancel,
        )
        .await
        .unwrap();
        assert!(result.content().contains("hello"), "{}", result.content());

        // A timeout after the request was sent.
        let error = call(
            &lease,
            "everything.trigger-long-running-operation",
            json!({"duration": 5, "steps": 5}),
            &cancel,
        )
        .await
        .unwrap_err();
        let DispatchError::Execution(error) = error else {
            panic!("{error:?}")
        };
        let expected = if long.effect() == Effect::Mutating {
            ExecutionState::Uncertain
        } else {
            ExecutionState::Definitive
        };
        assert_eq!(error.state(), expected);

        // A cancellation; the session stays usable afterwards.
        let cancelled = CancellationToken::new();
        let trigger = cancelled.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            trigger.cancel();
        });
        let error = call(
            &lease,
            "everything.trigger-long-running-operation",
            json!({"duration": 3, "steps": 3}),
            &cancelled,
        )
        .await
        .unwrap_err();
        assert!(
            error.is_cancelled()
                || matches!(&error, DispatchError::Execution(e) if e.state() == ExecutionState::Uncertain),
            "{error:?}"
        );
        let again = call(
            &lease,
            "everything.echo",
            json!({"message": "still here"}),
            &cancel,
        )
        .await
        .unwrap();
        assert!(again.content().contains("still here"));
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
        assert_eq!(wait_group_empty(group).await, Vec::<i32>::new());
    });
}

#[test]
fn server_memory_mutating_tools_map_by_their_hints_only_when_trusted() {
    let Some(bin) = server("mcp-server-memory") else {
        return;
    };
    run(async move {
        let dir = std::env::temp_dir().join(format!("agent-mcp-memory-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("memory.jsonl");
        let _ = std::fs::remove_file(&file);
        let env = json!({"env": {"MEMORY_FILE_PATH": file.to_str().unwrap()}});

        // Untrusted (the default): every tool is the worst case.
        let source = McpToolPlanSource::start(
            &config("memory", &bin, &[], env.clone()),
            compiled(&[]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap();
        let tools = source.current_tools().unwrap();
        assert!(
            tools
                .iter()
                .all(|t| t.effect() == Effect::Mutating && t.replay() == ReplaySafety::Unsafe)
        );
        source.shutdown().await;

        let mut trusted = env;
        trusted["trusted"] = json!(true);
        let source = McpToolPlanSource::start(
            &config("memory", &bin, &[], trusted),
            compiled(&[]),
            vec![],
            vec![],
            quick_options(),
        )
        .await
        .unwrap();
        let tools = source.current_tools().unwrap();
        let find = |name: &str| {
            tools
                .iter()
                .find(|t| t.name() == name)
                .unwrap_or_else(|| panic!("{name}"))
                .clone()
        };
        let create = find("memory.create_entities");
        assert_eq!(
            (create.effect(), create.replay()),
            (Effect::Mutating, ReplaySafety::Unsafe)
        );
        let delete = find("memory.delete_entities");
        assert_eq!(
            (delete.effect(), delete.replay()),
            (Effect::Mutating, ReplaySafety::Idempotent)
        );
        assert_eq!(find("memory.read_graph").effect(), Effect::ReadOnly);

        let lease = source.lease_current_typed().await.unwrap();
        let cancel = CancellationToken::new();
        let entities = json!({"entities": [{"name": "agent-mcp", "entityType": "test", "observations": ["created by a test"]}]});
        let created = call(&lease, "memory.create_entities", entities, &cancel)
            .await
            .unwrap();
        assert!(!created.is_problem(), "{}", created.content());
        let graph = call(&lease, "memory.read_graph", json!({}), &cancel)
            .await
            .unwrap();
        assert!(graph.content().contains("agent-mcp"), "{}", graph.content());
        lease.release(&cancel).await.unwrap();
        source.shutdown().await;
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn server_everything_progress_reaches_the_kernel_reporter() {
    let Some(bin) = server("mcp-server-everything") else {
        return;
    };
    run(async move {
        let config = config(
            "everything",
            &bin,
            &["stdio"],
            json!({"trusted": true, "callTimeoutMs": 20000}),
        );
        let source =
            McpToolPlanSource::start(&config, compiled(&[]), vec![], vec![], quick_options())
                .await
                .unwrap();
        let lease = source.lease_current_typed().await.unwrap();
        let recorder = Recorder::default();
        let result = call_reporting(
            &lease,
            "everything.trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
            &recorder,
        )
        .await
        .unwrap();
        assert!(!result.is_problem(), "{}", result.content());
        let progress = recorder.0.lock().unwrap().clone();
        assert!(!progress.is_empty(), "no progress was reported");
        assert!(progress.iter().any(|p| p.contains("/3")), "{progress:?}");
        lease.release(&CancellationToken::new()).await.unwrap();
        source.shutdown().await;
    });
}
