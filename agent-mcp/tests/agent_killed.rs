//! No server process or grandchild survives an agent that is killed with SIGKILL: the
//! watchdog in each server's process group sees its pipe close and kills the group.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use support::*;

#[test]
fn a_killed_agent_leaves_no_server_or_grandchild() {
    let probe = agent_mcp_example("mcp-host-probe");
    let dir = std::env::temp_dir().join(format!("agent-mcp-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("mcp.json");
    let entry = json!({"mcpServers": {"fault": {"command": fault_server().to_str().unwrap(), "trusted": true}}});
    std::fs::write(&config, entry.to_string()).unwrap();
    let mut host = Command::new(&probe)
        .arg(&config)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(host.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ids: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let pgid = ids["pgid"].as_i64().unwrap() as i32;
    let grandchild = ids["grandchild"].as_i64().unwrap() as i32;
    assert!(processes_in_group(pgid).contains(&grandchild));
    host.kill().unwrap(); // SIGKILL: no destructor, no runtime shutdown runs
    host.wait().unwrap();
    run(async move {
        assert_eq!(wait_group_empty(pgid).await, Vec::<i32>::new());
    });
    assert!(!process_exists(grandchild));
    let _ = std::fs::remove_dir_all(&dir);
}
