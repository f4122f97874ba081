//! The `agent` binary's logs, progress and subcommand surface, at process level: with
//! stderr not a terminal no progress bytes appear, `--log-format json` writes JSON records
//! without the task, answer or paths, and the daemon subcommands parse and fail typed.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const AGENT: &str = env!("CARGO_BIN_EXE_agent");

/// A child that runs longer than this is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

/// Words planted in the task and the workspace that must never reach a log line.
const TASK_SECRET: &str = "task-secret-5ee1";
const FILE_SECRET: &str = "readme-secret-0b7a";

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: Vec<u8>,
}

impl Output {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A temporary workspace with a README holding [`FILE_SECRET`]; removed on drop.
struct Workspace(PathBuf);

impl Workspace {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("agent-cli-logs-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("README.md"),
            format!("# Secret\n\n{FILE_SECRET}\n"),
        )
        .unwrap();
        Workspace(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `agent args` with stdin closed and stdout/stderr piped (so neither is a terminal),
/// `RUST_LOG` removed unless `rust_log` sets it, and the offline model chosen explicitly
/// (so it prints no notice) with no config file of the user's.
fn run(args: &[&str], rust_log: Option<&str>) -> Output {
    run_env(args, rust_log, &[])
}

fn run_env(args: &[&str], rust_log: Option<&str>, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(AGENT);
    command
        .args(args)
        .env("AGENT_PROVIDER", "offline")
        .env(
            "AGENT_CONFIG_DIR",
            std::env::temp_dir().join("agent-cli-logs-no-config-dir"),
        )
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .env("TERM", "xterm-256color");
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    let mut child = command.spawn().expect("spawn agent");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("agent {args:?} ran past {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

#[test]
fn no_progress_bytes_reach_a_stderr_that_is_not_a_terminal() {
    let workspace = Workspace::new("progress");
    let task = format!("What is this repository? {TASK_SECRET}");
    let out = run(&["--workspace", workspace.path(), &task], None);
    let stderr = out.stderr();
    assert_eq!(out.code, Some(0), "{}\n{stderr}", out.stdout);
    // The model streamed text, so the spinner was started and stopped around it.
    assert!(out.stdout.contains("-> read_file"), "{}", out.stdout);
    // No carriage returns, escape sequences or spinner frames: only the summary line.
    assert!(
        !out.stderr.iter().any(|b| *b == b'\r' || *b == 0x1b),
        "{stderr:?}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr:?}");
    assert!(lines[0].starts_with("done: "), "{stderr:?}");
    assert!(!stderr.contains("thinking"), "{stderr:?}");
}

/// The JSON records on stderr (other lines are the summary).
fn records(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn json_logs_are_records_without_the_task_the_answer_or_paths() {
    let workspace = Workspace::new("json");
    let task = format!("What is this repository? {TASK_SECRET}");
    for (args, rust_log) in [
        (vec!["--log-format", "json", "-vvv"], None),
        (vec!["--log-format", "json"], Some("trace")),
    ] {
        let mut args = args;
        args.extend(["--workspace", workspace.path(), &task]);
        let out = run(&args, rust_log);
        let stderr = out.stderr();
        assert_eq!(out.code, Some(0), "{stderr}");
        // The answer on stdout quotes the task and the README...
        assert!(out.stdout.contains(TASK_SECRET), "{}", out.stdout);
        assert!(out.stdout.contains(FILE_SECRET), "{}", out.stdout);
        // ...the log never does, nor the workspace path.
        for secret in [TASK_SECRET, FILE_SECRET, workspace.path()] {
            assert!(!stderr.contains(secret), "{secret}:\n{stderr}");
        }
        let records = records(&stderr);
        let messages: Vec<&str> = records
            .iter()
            .filter(|r| r["target"] == "agent_logging")
            .filter_map(|r| r["fields"]["message"].as_str())
            .collect();
        for expected in [
            "run started",
            "turn started",
            "tool started",
            "tool completed",
            "run completed",
        ] {
            assert!(messages.contains(&expected), "{expected}: {messages:?}");
        }
        let started = records
            .iter()
            .find(|r| r["fields"]["message"] == "tool started")
            .unwrap();
        assert_eq!(started["level"], "DEBUG");
        assert_eq!(started["fields"]["effect"], "read_only");
        assert_eq!(
            started["fields"]["tool_call_correlation"]
                .as_str()
                .map(str::len),
            Some(32)
        );
        // Records sit in their run's span.
        assert!(
            started["spans"]
                .as_array()
                .is_some_and(|spans| spans.iter().any(|s| s["name"] == "agent.run")),
            "{started}"
        );
        assert!(stderr.lines().any(|l| l.starts_with("done: ")), "{stderr}");
    }
}

#[test]
fn text_logs_follow_rust_log_and_quiet_wins() {
    let workspace = Workspace::new("text");
    let out = run(
        &["--workspace", workspace.path(), "hello"],
        Some("agent_logging=info"),
    );
    let stderr = out.stderr();
    assert_eq!(out.code, Some(0), "{stderr}");
    assert!(stderr.contains("run started"), "{stderr}");
    assert!(stderr.contains("run completed"), "{stderr}");
    assert!(
        !stderr.contains("tool started"),
        "DEBUG is filtered out: {stderr}"
    );
    assert!(!stderr.contains(workspace.path()), "{stderr}");
    let quiet = run(
        &["-q", "--workspace", workspace.path(), "hello"],
        Some("trace"),
    );
    let stderr = quiet.stderr();
    assert_eq!(quiet.code, Some(0), "{stderr}");
    assert!(!stderr.contains("run started"), "{stderr}");
    let bad = run(
        &["--workspace", workspace.path(), "hello"],
        Some("agent_logging=loud"),
    );
    assert_eq!(bad.code, Some(2), "{}", bad.stderr());
    assert!(
        bad.stderr().starts_with("agent: logs: invalid filter"),
        "{}",
        bad.stderr()
    );
}

#[test]
fn daemon_subcommands_parse_and_fail_typed() {
    // An isolated, empty endpoint scope: no daemon answers there and the run index is
    // empty. (`serve` and `run --daemon` start daemons: tests/agent_daemon.rs runs them.)
    let home = Workspace::new("daemon-scope");
    let scope = format!("{}/scope", home.path());
    let env = [("AGENT_SCOPE_DIR", scope.as_str())];
    for args in [
        &["attach", "run-1", "--from", "3"][..],
        &["suspend", "run-1"][..],
        &["resume", "run-1"][..],
        &["export", "run-1", "-o", "out.json"][..],
    ] {
        let out = run_env(args, None, &env);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stderr());
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            out.stderr(),
            "agent: run run-1 is not in this user's run index (see `agent runs`)\n",
            "{args:?}"
        );
    }
    let out = run_env(&["import", "in.json"], None, &env);
    assert_eq!(out.code, Some(1), "{}", out.stderr());
    assert!(
        out.stderr().starts_with("agent: in.json: "),
        "{}",
        out.stderr()
    );
    let out = run_env(&["runs"], None, &env);
    assert_eq!(out.code, Some(0), "{}", out.stderr());
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    // One-shot options do not apply to a daemon run: a usage error before anything starts.
    for flag in [&["--mcp-config", "mcp.json"][..], &["--max-turns", "3"][..]] {
        let mut args = vec!["run", "--daemon"];
        args.extend_from_slice(flag);
        args.push("task");
        let out = run_env(&args, None, &env);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr());
        assert!(
            out.stderr().contains("does not apply to --daemon"),
            "{}",
            out.stderr()
        );
    }
    assert!(
        !std::path::Path::new(&scope).join("daemon.log").exists(),
        "nothing started"
    );
    assert!(!std::path::Path::new("out.json").exists());
    // Their argument errors are usage errors.
    for args in [
        &["attach"][..],
        &["attach", "r", "--from", "x"][..],
        &["import"][..],
        &["runs", "extra"][..],
    ] {
        let out = run(args, None);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr());
        assert!(out.stderr().contains("usage: agent"), "{}", out.stderr());
    }
}

#[test]
fn run_without_daemon_is_the_one_shot_form() {
    let workspace = Workspace::new("run");
    let out = run(
        &[
            "run",
            "--workspace",
            workspace.path(),
            "--json",
            "What is this?",
        ],
        None,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr());
    // Every line is one JSON value: the run's events and, per tool call, a `tool_call`
    // record.
    let kinds: Vec<String> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] != "tool_call")
        .map(|v| v["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run.started"));
    assert_eq!(kinds.last().map(String::as_str), Some("run.completed"));
}

#[test]
fn help_and_version_go_to_stdout_and_exit_0() {
    let help = run(&["--help"], None);
    assert_eq!(help.code, Some(0));
    for expected in [
        "Usage: agent [--workspace DIR]",
        "Commands:",
        "serve",
        "attach",
        "export",
        "--log-format",
        "RUST_LOG",
        "Examples:",
        "Exit codes:",
    ] {
        assert!(
            help.stdout.contains(expected),
            "{expected}:\n{}",
            help.stdout
        );
    }
    let short = run(&["attach", "--help"], None);
    assert_eq!(short.code, Some(0));
    assert!(short.stdout.contains("--from <SEQ>"), "{}", short.stdout);
    let version = run(&["--version"], None);
    assert_eq!(version.code, Some(0));
    assert_eq!(
        version.stdout,
        format!("agent {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn the_agent_composes_the_log_observer_and_the_dispatch_spans() {
    let m = coding_agent::app::CodingAgent::manifest();
    assert_eq!(
        m.selection("engine", "observers")
            .expect("engine.observers")
            .chosen,
        ["event-log-observer"]
    );
    for plan in ["agent-tool-plan", "mcp-source"] {
        assert_eq!(
            m.selection(plan, "decorators")
                .unwrap_or_else(|| panic!("{plan}.decorators"))
                .chosen,
            // The CLI's tool lines and `tool_call` records observe each call
            // (`coding_agent::tool_calls`).
            ["dispatch-spans", "tool-call-observer"]
        );
    }
    assert_eq!(
        m.selection("event-logger", "log_config")
            .expect("event-logger.log_config")
            .chosen,
        ["log-config"]
    );
}
