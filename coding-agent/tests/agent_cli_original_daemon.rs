//! The CLI against a daemon of the original system: the real `agent` binary, as a child
//! process, runs `agent run --daemon`, `agent runs` and `agent attach` against a scripted
//! daemon ([`support::ScriptedDaemon`]) that sends exactly the original's event payloads,
//! written below as literal JSON (docs/protocol.md, "Event payloads"), not our server's
//! projection of them.
//!
//! What it proves: the CLI finds that daemon through the endpoint files (and starts none of
//! its own), prints the model's text and the tool lines from the original's payloads, prints
//! one JSON value per stdout line with `--json`, says a failed run's reason once and exits 1,
//! lists the runs and their states, replays a run after a sequence and follows it to its
//! end, and on Ctrl-C cancels a daemon run (the daemon receives the CancelRun; the CLI exits
//! 130 on the original's `run.cancelled`) or detaches from an attached one without
//! cancelling it. Exit codes are the ones docs/coding-agent.md lists ("Exit codes").
//!
//! Every child is killed when its test ends; every wait is bounded by [`DEADLINE`].
#![cfg(unix)]

#[path = "support/lines.rs"]
mod lines;
use lines::lines;

#[path = "support/daemon.rs"]
mod support;

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent_protocol::pb::engine::v1::EventKind as K;
use support::ScriptedDaemon;

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait of these tests is bounded by this.
const DEADLINE: Duration = Duration::from_secs(20);
/// The exit code of a cancelled run (docs/coding-agent.md, "Exit codes").
const EXIT_CANCELLED: i32 = 130;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The original's payloads of a run that streams text, calls two tools (one succeeds, one
/// fails definitively) and completes: twelve events, so it is read over three pages.
const COMPLETED_RUN: &[(K, &str)] = &[
    (K::RunStarted, r#"{"definition":"echo"}"#),
    (K::TurnStarted, r#"{"turn":1}"#),
    (
        K::ModelStarted,
        r#"{"turn":1,"operation_id":"run-1/model/1"}"#,
    ),
    (K::ModelDelta, r#"{"text":"Hello from "}"#),
    (K::ModelDelta, r#"{"text":"the original."}"#),
    (K::ModelCompleted, r#"{"input_tokens":1,"output_tokens":2}"#),
    (K::ToolStarted, r#"{"call_id":"call-1","name":"read_file"}"#),
    (
        K::ToolCompleted,
        r#"{"call_id":"call-1","name":"read_file","error":""}"#,
    ),
    (
        K::ToolStarted,
        r#"{"call_id":"call-2","name":"write_file"}"#,
    ),
    (
        K::ToolFailed,
        r#"{"call_id":"call-2","name":"write_file","error":"tool execution failed","outcome":"definitive","retry":"never"}"#,
    ),
    (K::TurnCompleted, r#"{"turn":1}"#),
    (K::RunCompleted, ""),
];

/// The event kind names of [`COMPLETED_RUN`], in order.
const COMPLETED_KINDS: &[&str] = &[
    "run.started",
    "turn.started",
    "model.started",
    "model.delta",
    "model.delta",
    "model.completed",
    "tool.started",
    "tool.completed",
    "tool.started",
    "tool.failed",
    "turn.completed",
    "run.completed",
];

/// The first events of a run the script keeps open: started, thinking, two deltas.
const OPEN_RUN: &[(K, &str)] = &[
    (K::RunStarted, r#"{"definition":"echo"}"#),
    (K::TurnStarted, r#"{"turn":1}"#),
    (
        K::ModelStarted,
        r#"{"turn":1,"operation_id":"run-1/model/1"}"#,
    ),
    (K::ModelDelta, r#"{"text":"alpha "}"#),
    (K::ModelDelta, r#"{"text":"beta "}"#),
];

/// What the script appends to [`OPEN_RUN`] to complete it.
const OPEN_RUN_END: &[(K, &str)] = &[
    (K::ModelDelta, r#"{"text":"gamma"}"#),
    (
        K::ModelCompleted,
        r#"{"input_tokens":3,"output_tokens":4,"metadata":[]}"#,
    ),
    (K::TurnCompleted, r#"{"turn":1}"#),
    (K::RunCompleted, ""),
];

/// A private temp tree (short: socket paths are bounded): `ws/` (the CLI's working
/// directory) and `scope/` (the endpoint scope the scripted daemon publishes in).
struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from(format!("/tmp/ao-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(base.join("ws"))
            .unwrap();
        Sandbox { base }
    }

    fn scope(&self) -> PathBuf {
        self.base.join("scope")
    }

    /// The scripted daemon, serving in this sandbox's scope.
    fn daemon(&self) -> ScriptedDaemon {
        ScriptedDaemon::start(&self.scope())
    }

    fn spawn(&self, args: &[&str]) -> Proc {
        let mut child = Command::new(AGENT)
            .args(args)
            .current_dir(self.base.join("ws"))
            .env("AGENT_SCOPE_DIR", self.scope())
            .env("AGENT_AUTHORITY_DIR", self.base.join("auth"))
            .env("RUST_LOG", "warn")
            // The offline model, chosen explicitly; no config file of the user's applies.
            .env("AGENT_PROVIDER", "offline")
            .env("AGENT_CONFIG_DIR", self.base.join("config"))
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        let stdout = lines(child.stdout.take().unwrap());
        let stderr = lines(child.stderr.take().unwrap());
        Proc {
            child,
            stdout,
            stderr,
            seen_out: Vec::new(),
            seen_err: Vec::new(),
        }
    }

    /// Runs an `agent` command to its end: (exit code, stdout, stderr).
    fn agent(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let (status, out, err) = self.spawn(args).finish();
        (status.code(), out, err)
    }

    /// The CLI connected to the scripted daemon: it never launched `agent serve` (which
    /// would have created the daemon log in the scope).
    fn assert_no_daemon_started(&self) {
        let log = self.scope().join("daemon.log");
        assert!(!log.exists(), "the CLI started a daemon of its own");
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A child process with its output lines forwarded over channels; killed on drop.
struct Proc {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
    seen_out: Vec<String>,
    seen_err: Vec<String>,
}

impl Proc {
    /// Waits for a stdout line containing `needle`.
    fn stdout_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    self.seen_out.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no stdout line with {needle:?}: {:?} (stderr so far: {:?})",
                    self.seen_out,
                    self.stderr.try_iter().collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Whether it is still running.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits for the exit (bounded) and drains both pipes.
    fn finish(&mut self) -> (ExitStatus, String, String) {
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not exit in time: {:?} {:?}",
                self.seen_out,
                self.stderr.try_iter().collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // The pipes close at exit: drain what is left.
        while let Ok(line) = self.stdout.recv_timeout(DEADLINE) {
            self.seen_out.push(line);
        }
        while let Ok(line) = self.stderr.recv_timeout(DEADLINE) {
            self.seen_err.push(line);
        }
        // Each line as written, newline included: a blank line stays visible.
        let whole = |lines: &[String]| lines.iter().map(|l| format!("{l}\n")).collect();
        (status, whole(&self.seen_out), whole(&self.seen_err))
    }

    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The kinds of `--json` output, asserting that every stdout line is one JSON object of
/// `run` and that the sequences count up from `first`.
fn json_kinds(stdout: &str, run: &str, first: u64) -> Vec<String> {
    let mut kinds = Vec::new();
    for (i, line) in stdout.lines().enumerate() {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line {i} is not one JSON value ({e}): {line:?}"));
        assert_eq!(value["run"], run, "{line}");
        assert_eq!(value["sequence"], first + i as u64, "{line}");
        kinds.push(value["kind"].as_str().expect("a kind").to_owned());
    }
    kinds
}

/// `agent run --daemon` prints the original's streamed text and both tool lines, says the
/// run is done and exits 0; the daemon got the task under the chosen definition.
#[test]
fn a_daemon_run_prints_the_originals_text_and_tool_lines() {
    let sandbox = Sandbox::new("text");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", COMPLETED_RUN);
    let (code, out, err) = sandbox.agent(&["run", "--daemon", "--definition", "echo", "say", "hi"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("Hello from the original."), "{out}");
    // One line per tool call, with its outcome (the daemon's events carry no arguments).
    assert!(out.contains("\n  -> read_file: ok\n"), "{out}");
    assert!(
        out.contains("  -> write_file: failed: tool execution failed\n"),
        "{out}"
    );
    assert!(err.contains("agent: run run-1 in the daemon"), "{err}");
    assert!(err.contains("done: run run-1"), "{err}");
    let started = daemon.started();
    assert_eq!(started.len(), 1);
    assert_eq!(
        (started[0].definition.as_str(), started[0].task.as_str()),
        ("echo", "say hi")
    );
    sandbox.assert_no_daemon_started();
    assert_eq!(daemon.scope(), sandbox.scope());
}

/// With `--json` every stdout line is one JSON value, and the lines carry the original's
/// event kinds in order, across the three pages the daemon serves them in.
#[test]
fn json_lines_carry_the_originals_event_kinds_in_order() {
    let sandbox = Sandbox::new("json");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", COMPLETED_RUN);
    let (code, out, err) =
        sandbox.agent(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(json_kinds(&out, "run-1", 1), COMPLETED_KINDS, "{out}");
    // `model.delta` lines carry their text; the last line ends the output (no blank line).
    let text: String = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "model.delta")
        .filter_map(|v| v["data"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "Hello from the original.", "{out}");
    assert!(out.ends_with("}\n"), "{out:?}");
    assert!(err.contains("done: run run-1"), "{err}");
    sandbox.assert_no_daemon_started();
}

/// A run that ends in the original's `run.failed` exits 1 and says why exactly once, on
/// stderr; the original's `model.failed` prints no line of its own.
#[test]
fn a_failed_run_exits_1_and_says_why_once() {
    let sandbox = Sandbox::new("failed");
    let daemon = sandbox.daemon();
    daemon.expect_run(
        "run-1",
        &[
            (K::RunStarted, r#"{"definition":"echo"}"#),
            (K::TurnStarted, r#"{"turn":1}"#),
            (K::ModelStarted, r#"{"turn":1,"operation_id":"run-1/model/1"}"#),
            (
                K::ModelFailed,
                r#"{"code":"unavailable","message":"upstream closed","retryable":true,"before_stream":true}"#,
            ),
            (K::TurnFailed, r#"{"error":"context canceled"}"#),
            (K::RunFailed, r#"{"error":"model provider failed"}"#),
        ],
    );
    let (code, out, err) = sandbox.agent(&["run", "--daemon", "--definition", "echo", "x"]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(!out.contains("model failed"), "{out}");
    assert!(!out.contains("unavailable"), "{out}");
    let said = format!("{out}\n{err}");
    assert_eq!(
        said.matches("model provider failed").count(),
        1,
        "the failure is said once: {said}"
    );
    assert!(
        err.contains("failed (model provider failed): run run-1"),
        "{err}"
    );
    assert!(!err.contains("done:"), "{err}");
    sandbox.assert_no_daemon_started();
}

/// `agent runs` lists the scripted runs with their states: the ones that ended from the
/// run index, the one whose client is gone by asking the daemon (a reconnect and two event
/// pages), before and after the script ends it.
#[test]
fn agent_runs_lists_the_scripted_runs() {
    let sandbox = Sandbox::new("runs");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", COMPLETED_RUN);
    let (code, _, err) = sandbox.agent(&["run", "--daemon", "--definition", "echo", "x"]);
    assert_eq!(code, Some(0), "{err}");
    daemon.expect_run(
        "run-2",
        &[
            (K::RunStarted, r#"{"definition":"coding-agent"}"#),
            (K::RunFailed, r#"{"error":"model provider failed"}"#),
        ],
    );
    let (code, _, err) = sandbox.agent(&["run", "--daemon", "x"]);
    assert_eq!(code, Some(1), "{err}");
    // A third run stays open; its client is killed while it follows it.
    daemon.expect_run("run-3", OPEN_RUN);
    let mut client = sandbox.spawn(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    client.stdout_line("\"model.delta\"");
    client.signal("-KILL");
    client.finish();

    let (code, out, err) = sandbox.agent(&["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "run-1\tcompleted\techo",
            "run-2\tfailed\tcoding-agent",
            "run-3\trunning\techo"
        ],
        "{out}"
    );
    assert_eq!(daemon.reconnects(), 1, "only the open run is asked");

    daemon.push("run-3", OPEN_RUN_END);
    let (code, out, err) = sandbox.agent(&["runs"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("run-3\tcompleted\techo"), "{out}");
    assert!(daemon.cancels().is_empty());
    sandbox.assert_no_daemon_started();
}

/// `agent attach RUN --from SEQ` reconnects as the run's owner (the streaming `agent run
/// --daemon` is fenced and exits 1), prints only what follows SEQ, follows the live tail
/// and exits 0 on the original's `run.completed`.
#[test]
fn attach_replays_after_the_sequence_and_follows_to_the_end() {
    let sandbox = Sandbox::new("attach");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", OPEN_RUN);
    let mut first = sandbox.spawn(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    first.stdout_line("\"model.delta\"");
    daemon.wait_tailing("run-1", DEADLINE);

    // Event 4 is the delta "alpha ", event 5 "beta ": only what follows 4 is replayed.
    let mut attached = sandbox.spawn(&["attach", "run-1", "--from", "4"]);
    let (status, _, err) = first.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("agent: another attach took over run run-1 (this one detached)"),
        "{err}"
    );
    daemon.wait_tailing("run-1", DEADLINE);
    assert!(attached.running(), "it follows the open run");
    daemon.push("run-1", OPEN_RUN_END);
    let (status, out, err) = attached.finish();
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("beta gamma"), "{out}");
    assert!(!out.contains("alpha"), "{out}");
    assert!(err.contains("done: run run-1"), "{err}");
    assert!(daemon.cancels().is_empty());
    sandbox.assert_no_daemon_started();
}

/// `agent attach RUN --from N` where N is the run's terminal event: nothing follows, so it
/// says how the run ended and exits with that ending's code instead of waiting forever.
#[test]
fn attach_past_the_end_of_an_ended_run_exits_with_its_ending() {
    let sandbox = Sandbox::new("attach-end");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", OPEN_RUN);
    let mut first = sandbox.spawn(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    first.stdout_line("\"model.delta\"");
    daemon.push("run-1", OPEN_RUN_END);
    let (status, out, err) = first.finish();
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    let last = json_kinds(&out, "run-1", 1).len();

    let mut attached = sandbox.spawn(&["attach", "run-1", "--from", &last.to_string()]);
    let (status, out, err) = attached.finish();
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(err.contains("done: run run-1"), "{err}");
    assert!(
        !out.contains("gamma"),
        "nothing at or before the cursor is printed: {out}"
    );
    assert!(daemon.cancels().is_empty());
}

/// Ctrl-C during `agent run --daemon`: the daemon receives a CancelRun for the run (the
/// CLI keeps following), and the CLI exits 130 once the original's `run.cancelled` arrives.
#[test]
fn ctrl_c_cancels_a_daemon_run_and_exits_130_on_the_originals_run_cancelled() {
    let sandbox = Sandbox::new("ctrlc");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", OPEN_RUN);
    let mut client = sandbox.spawn(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    client.stdout_line("\"model.delta\"");
    client.signal("-INT");
    let cancel = daemon.wait_cancel("run-1", DEADLINE);
    assert_eq!(cancel.reason, "interrupted");
    assert_eq!(cancel.client, daemon.started()[0].client);
    assert!(client.running(), "it waits for the run's terminal event");
    daemon.push(
        "run-1",
        &[
            (K::TurnFailed, r#"{"error":"context canceled"}"#),
            (K::RunCancelled, r#"{"error":"cancelled by client"}"#),
        ],
    );
    let (status, out, err) = client.finish();
    assert_eq!(status.code(), Some(EXIT_CANCELLED), "{out}\n{err}");
    let kinds = json_kinds(&out, "run-1", 1);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("run.cancelled"),
        "{out}"
    );
    assert_eq!(kinds.len(), OPEN_RUN.len() + 2, "{out}");
    assert!(err.contains("cancelled: run run-1"), "{err}");
    assert_eq!(daemon.cancels().len(), 1, "one Ctrl-C, one cancel");
    sandbox.assert_no_daemon_started();
}

/// Ctrl-C during `agent attach` detaches (exit 130) and sends no CancelRun: the run stays
/// the daemon's.
#[test]
fn ctrl_c_detaches_an_attached_run_without_cancelling_it() {
    let sandbox = Sandbox::new("detach");
    let daemon = sandbox.daemon();
    daemon.expect_run("run-1", OPEN_RUN);
    let mut first = sandbox.spawn(&["run", "--daemon", "--json", "--definition", "echo", "x"]);
    first.stdout_line("\"model.delta\"");
    first.signal("-KILL");
    first.finish();

    let mut attached = sandbox.spawn(&["attach", "run-1"]);
    daemon.wait_tailing("run-1", DEADLINE);
    // A tool line ends with a newline: once it is out, everything before it was printed.
    daemon.push(
        "run-1",
        &[
            (K::ToolStarted, r#"{"call_id":"call-1","name":"read_file"}"#),
            (
                K::ToolCompleted,
                r#"{"call_id":"call-1","name":"read_file","error":""}"#,
            ),
        ],
    );
    attached.stdout_line("read_file");
    attached.signal("-INT");
    let (status, out, err) = attached.finish();
    assert_eq!(status.code(), Some(EXIT_CANCELLED), "{out}\n{err}");
    assert!(out.contains("alpha beta"), "{out}");
    assert!(err.contains("detached from run run-1"), "{err}");
    assert!(daemon.cancels().is_empty(), "{:?}", daemon.cancels());
    sandbox.assert_no_daemon_started();
}
