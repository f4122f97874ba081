//! The cost of an MCP tool call through our dispatcher, side by side with the same call made
//! directly with rmcp, and the time from `tools/list_changed` to a leasable generation.
//!
//! Both calls go to their own process of the in-repository fault server (`echo`), on one
//! current-thread runtime:
//!
//! - `mcp_call/rmcp_direct`: `Peer::call_tool` on a plain rmcp client session;
//! - `mcp_call/dispatcher`: a lease of `McpToolPlanSource` (the pipeline with no guards),
//!   `ToolDispatcher::dispatch` of `fault.echo`, with its call timeout and result bound;
//! - `list_changed/toggle_to_leasable`: one `tools/call` of `toggle` (the server changes its
//!   list and sends `tools/list_changed` before answering), then waiting until a new
//!   generation is current: one call round trip plus the refresh and the publish.
//!
//! Build the server first, then run:
//! `cargo build --release -p agent-mcp --example mcp-fault-server &&
//!  cargo bench -p agent-mcp --bench mcp_call`. Results are in `docs/performance.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_core::stage::{DispatchRequest, DispatchScope};
use agent_core::tool::{Call, NoopReporter};
use agent_mcp::{HostOptions, McpConfig, McpToolPlanSource};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn server() -> PathBuf {
    let exe = std::env::current_exe().expect("bench exe");
    let target = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = target.join("examples/mcp-fault-server");
    assert!(
        path.exists(),
        "{} is missing: cargo build --release -p agent-mcp --example mcp-fault-server",
        path.display()
    );
    path
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let path = server();
    let arguments = json!({"text": "hello"});

    // Direct rmcp session.
    let direct = runtime.block_on(async {
        let mut command = tokio::process::Command::new(&path);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let service = ().serve((stdout, stdin)).await.unwrap();
        (service, child)
    });

    // Our source, dispatcher and lease.
    let config = McpConfig::parse(
        &json!({"mcpServers": {"fault": {"command": path.to_str().unwrap(), "trusted": true}}})
            .to_string(),
    )
    .unwrap();
    let source = runtime
        .block_on(McpToolPlanSource::start(
            &config,
            BTreeMap::new(),
            vec![],
            vec![],
            HostOptions::default(),
        ))
        .unwrap();
    let lease = runtime.block_on(source.lease_current_typed()).unwrap();
    let scope = DispatchScope::new("bench", 1, lease.id().clone(), lease.fingerprint()).unwrap();
    let call = Call::new("c1", "fault.echo", arguments.clone()).unwrap();
    let dispatcher = lease.dispatcher();
    let cancel = CancellationToken::new();

    let mut group = c.benchmark_group("mcp_call");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("rmcp_direct", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = arguments.as_object().cloned();
            let result = direct.0.call_tool(params).await.unwrap();
            assert_eq!(result.content.len(), 1);
        })
    });
    group.bench_function("dispatcher", |b| {
        b.to_async(&runtime).iter(|| async {
            let request = DispatchRequest {
                cancel: &cancel,
                scope: &scope,
                call: &call,
                reporter: &NoopReporter,
            };
            let result = dispatcher.dispatch(request).await.unwrap();
            assert_eq!(result.content(), "hello");
        })
    });
    group.finish();

    let mut group = c.benchmark_group("list_changed");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("toggle_to_leasable", |b| {
        b.to_async(&runtime).iter_custom(|iterations| {
            let (source, lease) = (&source, &lease);
            async move {
                let mut total = Duration::ZERO;
                for i in 0..iterations {
                    let before = source.current_plan_id();
                    let toggle = Call::new(format!("t{i}"), "fault.toggle", json!({})).unwrap();
                    let scope =
                        DispatchScope::new("bench", 1, lease.id().clone(), lease.fingerprint())
                            .unwrap();
                    let cancel = CancellationToken::new();
                    let started = Instant::now();
                    let request = DispatchRequest {
                        cancel: &cancel,
                        scope: &scope,
                        call: &toggle,
                        reporter: &NoopReporter,
                    };
                    lease.dispatcher().dispatch(request).await.unwrap();
                    let after = source.wait_for_generation(before.as_ref()).await;
                    total += started.elapsed();
                    assert!(after.is_some());
                    assert!(source.lease_current_typed().await.is_ok());
                }
                total
            }
        })
    });
    group.finish();

    runtime.block_on(async {
        lease.release(&CancellationToken::new()).await.unwrap();
        source.shutdown().await;
        let (service, mut child) = direct;
        drop(service);
        let _ = child.kill().await;
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
