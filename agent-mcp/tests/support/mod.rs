//! Helpers shared by the integration tests: the fault server, configurations, dispatching
//! through a lease, and counting the processes of a group.
#![allow(dead_code, unreachable_pub)]

mod examples;

pub(crate) use examples::agent_mcp_example;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_core::stage::{DispatchError, DispatchRequest, DispatchScope, ToolPlanLease};
use agent_core::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, NoopReporter, ReplaySafety, Tool,
    ToolContext, ToolResult,
};
use agent_mcp::{HostOptions, McpConfig, McpToolPlanSource, RestartPolicy};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Every test's bound.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs `future` on a multi-thread runtime, failing the test past [`TEST_TIMEOUT`].
///
/// The fault server is built first, so that a cold build does not count against the bound.
pub fn run<F: std::future::Future<Output = ()>>(future: F) {
    fault_server();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        tokio::time::timeout(TEST_TIMEOUT, future)
            .await
            .expect("the test did not finish in time");
    });
}

/// Ends a test whose tool from outside the Rust toolchain is missing (the rule of the
/// README's test command): under `CI` (set and not empty, as `.ci/run` sets it) the test is
/// required and fails; elsewhere it prints one line saying what to install, and passes.
pub fn skip_or_fail(needs: &str) {
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so this test is required: it needs {needs}");
    }
    // Written to stderr itself: the test harness captures `eprintln!` of passing tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("skipped: needs {needs}\n").as_bytes(),
    );
}

/// The fault server example (`examples/mcp_fault_server.rs`).
pub fn fault_server() -> PathBuf {
    agent_mcp_example("mcp-fault-server")
}

/// A configuration with the fault server under `key`; `extra` is merged into its entry.
pub fn fault_config(key: &str, extra: Value) -> McpConfig {
    let mut entry = json!({"command": fault_server().to_str().unwrap(), "trusted": true, "callTimeoutMs": 5000, "shutdownTimeoutMs": 1000});
    if let (Value::Object(entry), Value::Object(extra)) = (&mut entry, extra) {
        entry.extend(extra);
    }
    McpConfig::parse(&json!({"mcpServers": {key: entry}}).to_string()).expect("config")
}

/// Options with quick restarts.
pub fn quick_options() -> HostOptions {
    HostOptions {
        restart: RestartPolicy {
            max_attempts: 2,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(100),
        },
        ..HostOptions::default()
    }
}

/// A compiled read-only tool called `name`.
pub struct Compiled(pub Definition);

impl Tool for Compiled {
    fn definition(&self) -> &Definition {
        &self.0
    }
    fn execute<'a>(
        &'a self,
        call: Call,
        _ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move { Ok(ToolResult::success(call.id(), "compiled")) })
    }
}

pub fn compiled(names: &[&str]) -> BTreeMap<String, Arc<dyn Tool>> {
    names
        .iter()
        .map(|name| {
            let definition = Definition::builder(*name, "A compiled tool.")
                .effect(Effect::ReadOnly)
                .replay_safety(ReplaySafety::Safe)
                .build()
                .unwrap();
            (
                name.to_string(),
                Arc::new(Compiled(definition)) as Arc<dyn Tool>,
            )
        })
        .collect()
}

pub async fn start(config: &McpConfig, compiled_names: &[&str]) -> McpToolPlanSource {
    McpToolPlanSource::start(
        config,
        compiled(compiled_names),
        Vec::new(),
        Vec::new(),
        quick_options(),
    )
    .await
    .expect("start")
}

/// Dispatches one call through the lease's pipeline.
pub async fn call(
    lease: &ToolPlanLease,
    name: &str,
    arguments: Value,
    cancel: &CancellationToken,
) -> Result<ToolResult, DispatchError> {
    let scope = DispatchScope::new("run-1", 1, lease.id().clone(), lease.fingerprint()).unwrap();
    let call = Call::new("call-1", name, arguments).unwrap();
    lease
        .dispatcher()
        .dispatch(DispatchRequest {
            cancel,
            scope: &scope,
            call: &call,
            reporter: &NoopReporter,
        })
        .await
}

/// The processes (zombies included) whose process group is `pgid`.
pub fn processes_in_group(pgid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) {
            found.push(pid);
        }
    }
    found
}

/// Waits (bounded) until the group is empty; returns what is left.
pub async fn wait_group_empty(pgid: i32) -> Vec<i32> {
    for _ in 0..100 {
        if processes_in_group(pgid).is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processes_in_group(pgid)
}

/// Whether a process exists (a zombie counts).
pub fn process_exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Keeps every progress message it is given.
#[derive(Default)]
pub struct Recorder(pub std::sync::Mutex<Vec<String>>);

impl agent_core::tool::Reporter for Recorder {
    fn report(
        &self,
        progress: agent_core::tool::Progress,
    ) -> BoxFuture<'_, Result<(), agent_core::tool::ReportError>> {
        self.0.lock().unwrap().push(progress.message().to_owned());
        Box::pin(async { Ok(()) })
    }
}

/// Dispatches one call, reporting progress to `reporter`.
pub async fn call_reporting(
    lease: &ToolPlanLease,
    name: &str,
    arguments: Value,
    reporter: &Recorder,
) -> Result<ToolResult, DispatchError> {
    let scope = DispatchScope::new("run-1", 1, lease.id().clone(), lease.fingerprint()).unwrap();
    let call = Call::new("call-1", name, arguments).unwrap();
    let cancel = CancellationToken::new();
    lease
        .dispatcher()
        .dispatch(DispatchRequest {
            cancel: &cancel,
            scope: &scope,
            call: &call,
            reporter,
        })
        .await
}
