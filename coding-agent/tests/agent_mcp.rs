//! The coding agent with an MCP server (agent-mcp's fault server example): the approval
//! guard applies to MCP tools as to compiled ones, and `agent tools` lists every tool with
//! its origin, effect, replay safety and capabilities.
//!
//! The test builds the fault server itself (an example of agent-mcp, see
//! `agent-mcp/tests/support/examples.rs`), so `cargo test -p coding-agent` needs nothing else.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_core::agent::{AgentDefinition, Engine};
use agent_core::compose::Override;
use agent_core::message::{Message, Part};
use agent_core::model::{ModelProvider, ModelRequest, ScriptedProvider, StreamEvent, Usage};
use agent_core::tool::Call;
use agent_mcp::McpConfig;
use coding_agent::app::{CodingAgent, CodingAgentOverrides};
use coding_agent::approval::ApprovalMode;
use coding_agent::workspace::WorkspaceRoot;
use serde_json::{Value, json};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
const PATIENCE: Duration = Duration::from_secs(30);

#[path = "../../agent-mcp/tests/support/examples.rs"]
mod agent_mcp_examples;

fn fault_server() -> PathBuf {
    agent_mcp_examples::agent_mcp_example("mcp-fault-server")
}

fn config_text() -> String {
    json!({"mcpServers": {"fault": {"command": fault_server().to_str().unwrap(), "trusted": true, "shutdownTimeoutMs": 500}}}).to_string()
}

fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("coding-agent-mcp-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A model that calls `calls` in its first turn, then answers with `name: ok|problem: content` lines.
fn scripted(calls: Vec<(&'static str, Value)>) -> Arc<dyn ModelProvider> {
    Arc::new(ScriptedProvider::new(move |request: &ModelRequest| {
        let results: Vec<String> = request
            .messages()
            .iter()
            .flat_map(Message::parts)
            .filter_map(|part| match part {
                Part::ToolResult(r) => Some(format!(
                    "{}: {}: {}\n",
                    r.name,
                    if r.problem { "problem" } else { "ok" },
                    r.content
                )),
                _ => None,
            })
            .collect();
        if results.is_empty() {
            let mut events: Vec<StreamEvent> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    StreamEvent::ToolCall(
                        Call::new(format!("call-{i}"), *name, arguments.clone()).unwrap(),
                    )
                })
                .collect();
            events.push(StreamEvent::Completed {
                usage: Usage::new(1, 1),
            });
            events
        } else {
            vec![
                StreamEvent::TextDelta(results.concat()),
                StreamEvent::Completed {
                    usage: Usage::new(1, 1),
                },
            ]
        }
    }))
}

#[tokio::test]
async fn the_approval_guard_refuses_a_mutating_mcp_tool_in_read_only_mode() {
    let dir = temp_dir("guard");
    let overrides = CodingAgentOverrides {
        workspace_root: Override::value(Arc::new(WorkspaceRoot::new(&dir).unwrap())),
        approval_mode: Override::value(Arc::new(ApprovalMode::ReadOnly)),
        mcp_config: Override::value(Arc::new(McpConfig::parse(&config_text()).unwrap())),
        ..Default::default()
    };
    let app = tokio::time::timeout(PATIENCE, CodingAgent::build_with(overrides))
        .await
        .unwrap()
        .expect("the agent assembles");
    let plans = app.components().mcp_tool_plan.clone();
    let engine = Engine::builder(
        scripted(vec![
            ("fault.echo", json!({"text": "hi"})),
            ("fault.add_note", json!({"text": "x"})),
        ]),
        plans,
    )
    .build()
    .unwrap();
    let agent = AgentDefinition::new("coding-agent", "scripted", 4).unwrap();
    let run = engine
        .start(&agent, Message::user("go").unwrap())
        .await
        .unwrap();
    let output = tokio::time::timeout(PATIENCE, run.wait())
        .await
        .unwrap()
        .expect("the run completes");
    assert!(
        output.answer.contains("fault.echo: ok: hi"),
        "{}",
        output.answer
    );
    assert!(
        output
            .answer
            .contains("fault.add_note: problem: refused: this session is read-only"),
        "{}",
        output.answer
    );
    engine.close().await;
    app.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

fn agent_tools(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(AGENT)
        .arg("tools")
        .args(args)
        // The offline model, chosen explicitly; no config file of the user's applies.
        .env("AGENT_PROVIDER", "offline")
        .env(
            "AGENT_CONFIG_DIR",
            std::env::temp_dir().join("agent-test-no-config-dir"),
        )
        .output()
        .expect("agent runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn agent_tools_lists_compiled_and_server_tools_as_json_lines() {
    let dir = temp_dir("tools");
    let (ok, stdout, stderr) = agent_tools(&["--workspace", dir.to_str().unwrap(), "--json"]);
    assert!(ok, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    assert!(lines.iter().all(|l| l["origin"] == "compiled"));
    let write = lines.iter().find(|l| l["name"] == "write_file").unwrap();
    assert_eq!(
        (write["effect"].as_str(), write["replay"].is_string()),
        (Some("mutating"), true)
    );

    let config = dir.join("mcp.json");
    std::fs::write(&config, config_text()).unwrap();
    let (ok, stdout, stderr) = agent_tools(&[
        "--workspace",
        dir.to_str().unwrap(),
        "--mcp-config",
        config.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let echo = lines
        .iter()
        .find(|l| l["name"] == "fault.echo")
        .expect("fault.echo");
    assert_eq!(echo["origin"], "fault");
    assert_eq!(echo["effect"], "read_only");
    assert_eq!(echo["replay"], "safe");
    assert_eq!(echo["capabilities"], json!([]));
    let plain = lines
        .iter()
        .find(|l| l["name"] == "fault.plain")
        .expect("fault.plain");
    assert_eq!(
        (plain["effect"].as_str(), plain["replay"].as_str()),
        (Some("mutating"), Some("unsafe"))
    );
    assert_eq!(plain["capabilities"], json!(["network.access"]));
    assert_eq!(plain["fingerprint"].as_str().map(str::len), Some(64));

    let (ok, stdout, _) = agent_tools(&[
        "--workspace",
        dir.to_str().unwrap(),
        "--mcp-config",
        config.to_str().unwrap(),
    ]);
    assert!(ok);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("fault.echo") && l.contains("read_only")),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_mcp_config_names_the_server_and_the_field() {
    let dir = temp_dir("bad");
    let config = dir.join("mcp.json");
    std::fs::write(
        &config,
        r#"{"mcpServers":{"memory":{"command":"x","trusted":"yes"}}}"#,
    )
    .unwrap();
    let (ok, _, stderr) = agent_tools(&["--mcp-config", config.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains("MCP server `memory`, field `trusted`"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_task_runs_with_an_mcp_config() {
    let dir = temp_dir("task");
    std::fs::write(dir.join("README.md"), "# Demo\n").unwrap();
    let config = dir.join("mcp.json");
    std::fs::write(&config, config_text()).unwrap();
    let output = Command::new(AGENT)
        .env("AGENT_PROVIDER", "offline")
        .env(
            "AGENT_CONFIG_DIR",
            std::env::temp_dir().join("agent-test-no-config-dir"),
        )
        .args([
            "--workspace",
            dir.to_str().unwrap(),
            "--mcp-config",
            config.to_str().unwrap(),
            "--read-only",
            "What is this repository?",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("done:"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
