//! A host process for the "agent killed" test: starts the MCP plan source of the
//! configuration file given as the first argument, asks its first server's `spawn_grandchild`
//! tool for a grandchild, prints `{"pgid":..,"grandchild":..}` and waits to be killed.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use agent_core::stage::{DispatchRequest, DispatchScope};
use agent_core::tool::{Call, NoopReporter};
use agent_mcp::{HostOptions, McpConfig, McpToolPlanSource};
use tokio_util::sync::CancellationToken;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .ok_or("usage: mcp-host-probe CONFIG")?,
    );
    let config = McpConfig::load(&path)?;
    let source = McpToolPlanSource::start(
        &config,
        BTreeMap::new(),
        Vec::new(),
        Vec::new(),
        HostOptions::default(),
    )
    .await?;
    let health = source.health();
    let server = &health.servers[0];
    let lease = source.lease_current_typed().await?;
    let scope = DispatchScope::new("probe", 1, lease.id().clone(), lease.fingerprint())?;
    let name = format!("{}.spawn_grandchild", config.servers()[0].namespace);
    let call = Call::new("c1", name, serde_json::json!({}))?;
    let cancel = CancellationToken::new();
    let result = lease
        .dispatcher()
        .dispatch(DispatchRequest {
            cancel: &cancel,
            scope: &scope,
            call: &call,
            reporter: &NoopReporter,
        })
        .await?;
    println!(
        "{}",
        serde_json::json!({"pgid": server.pgid, "grandchild": result.content().parse::<i32>()?})
    );
    std::future::pending::<()>().await;
    Ok(())
}
