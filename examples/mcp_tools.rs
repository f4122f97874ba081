//! Tools from an MCP server in your own agent: list `agent_mcp::beans::mcp` beside the
//! starter and its plan source replaces the starter's static plan, so the model sees the
//! compiled tools and the server's (named `<server>.<tool>`) behind the same guards.
//!
//! The server is the workspace's test server (`agent-mcp/examples/mcp_fault_server.rs`,
//! built here as the example `mcp_test_server`). Give another MCP server's command as the
//! first argument or in `MCP_SERVER`; otherwise the example uses the test server beside its
//! own binary, building it first with the `cargo` that runs it if it is missing.
//!
//! ```sh
//! cargo run -p examples --example mcp_tools
//! ```

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_core::agent::AgentDefinition;
use agent_core::compose::Override;
use agent_core::message::{Message, Part};
use agent_core::model::{ModelProvider, ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::tool::Call;
use agent_core::tool::typed::Problem;
use agent_core::{compose, model_provider, tool};
use agent_mcp::McpConfig;
use serde_json::json;

/// How long starting the server and the run may take.
const PATIENCE: Duration = Duration::from_secs(60);

/// The test server's example name in this package.
const TEST_SERVER: &str = "mcp_test_server";

/// Turn 1 calls a compiled tool and an MCP one; turn 2 answers with both results.
#[model_provider(name = "scripted")]
pub fn scripted() -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(|request: &ModelRequest| {
        let results: Vec<String> = request
            .messages()
            .iter()
            .flat_map(Message::parts)
            .filter_map(|part| match part {
                Part::ToolResult(r) => Some(format!("{}: {}", r.name, r.content)),
                _ => None,
            })
            .collect();
        let done = StreamEvent::Completed {
            usage: Usage::new(1, 1),
        };
        if !results.is_empty() {
            return vec![StreamEvent::TextDelta(results.join("; ")), done];
        }
        let calls = [
            Call::new("c1", "shout", json!({"text": "compiled"})),
            Call::new("c2", "fault.echo", json!({"text": "from mcp"})),
        ];
        calls
            .into_iter()
            .map(|call| {
                call.map_or_else(
                    |e| StreamEvent::TextDelta(e.to_string()),
                    StreamEvent::ToolCall,
                )
            })
            .chain([done])
            .collect()
    }))
}

/// What `shout` takes.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ShoutArgs {
    /// The text to shout.
    pub text: String,
}

/// Upper-cases a text: a compiled tool beside the server's.
#[tool(effect = read_only, replay = safe)]
pub fn shout(#[args] args: ShoutArgs) -> Result<String, Problem> {
    Ok(args.text.to_uppercase())
}

compose! {
    /// A compiled tool, the MCP plan source and the starter.
    pub struct McpAgent {
        beans: [scripted, shout, agent_mcp::beans::mcp, agent_core::starter::beans],
    }
}

/// The server to start: `given` (the program's first argument), `MCP_SERVER`, or the test
/// server (built when missing and `build` allows it).
fn server_command(
    given: Option<std::ffi::OsString>,
    build: bool,
) -> Result<PathBuf, Box<dyn std::error::Error>> {
    if let Some(given) = given.or_else(|| std::env::var_os("MCP_SERVER")) {
        return Ok(PathBuf::from(given));
    }
    // Examples are built into `<target>/<profile>/examples/`, all of this package together.
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or("the example has no directory")?;
    let named = |name: &str| dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    // agent-mcp's own build of the same server, which `cargo test --workspace` makes.
    let theirs = named("mcp-fault-server");
    let server = named(TEST_SERVER);
    if !server.exists() && theirs.exists() {
        return Ok(theirs);
    }
    if !server.exists() && build {
        // `cargo run` sets `CARGO` for the program it runs, and has released its lock.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "examples", "--example", TEST_SERVER])
            .status()?;
        if !status.success() || !server.exists() {
            return Err(format!(
                "could not build {}; pass an MCP server's command instead",
                server.display()
            )
            .into());
        }
    }
    Ok(server)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run(server_command(std::env::args_os().nth(1), true)?)
}

#[tokio::main(flavor = "current_thread")]
async fn run(command: PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let config = json!({"mcpServers": {"fault": {"command": command, "trusted": true}}});
    let overrides = McpAgentOverrides {
        mcp_config: Override::value(Arc::new(McpConfig::parse(&config.to_string())?)),
        ..Default::default()
    };
    let app = tokio::time::timeout(PATIENCE, McpAgent::build_with(overrides)).await??;

    let agent = AgentDefinition::new("mcp-agent", "scripted", 4)?;
    let run = app
        .components()
        .engine
        .start(&agent, Message::user("use both tools")?)
        .await?;
    let output = tokio::time::timeout(PATIENCE, run.wait()).await??;
    println!("answer: {}", output.answer);
    assert_eq!(output.answer, "shout: COMPILED; fault.echo: from mcp");
    app.stop().await?; // shuts the server down
    Ok(())
}

/// `cargo test -p examples` builds the test server with the other examples; a test never
/// runs cargo itself (the running `cargo test` holds the build lock).
#[test]
fn the_example_runs() {
    // A test binary's arguments are the harness's (`--exact`, a filter), never a server.
    let command = server_command(None, false).expect("the test server");
    assert!(
        command.exists(),
        "{} is missing: run `cargo test -p examples` or `cargo build -p examples --example {TEST_SERVER}`",
        command.display()
    );
    run(command).expect("the example runs");
}
