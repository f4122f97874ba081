//! Approval as a user meets it, with the real `agent` binary, answers piped into standard
//! input and a scripted OpenAI-compatible server on loopback whose model writes files: the
//! prompt shows what it approves (path, size, diff), `y` / `n` / `a` answer it, and a
//! refusal is reported as one, in the one-shot form and through the daemon
//! (`agent serve` + `agent run --daemon`). Every wait is bounded by [`DEADLINE`].
#![cfg(unix)]

#[path = "support/http.rs"]
mod http;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait of these tests is bounded by this.
const DEADLINE: Duration = Duration::from_secs(60);

static NEXT: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------------------
// The scripted model: `write_file` on notes/1.txt, notes/2.txt, ... one call per turn,
// then an answer quoting the tool results.
// ---------------------------------------------------------------------------------------

fn frame(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn body_for(request: &Value, writes: usize) -> String {
    let results: Vec<String> = request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut body = String::new();
    if results.len() < writes {
        let n = results.len() + 1;
        let arguments =
            json!({"path": format!("notes/{n}.txt"), "content": format!("new {n}\n")}).to_string();
        body.push_str(&frame(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": format!("call-{n}"), "type": "function",
                 "function": {"name": "write_file", "arguments": arguments}}
            ]}}]}),
        ));
        body.push_str(&frame(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ));
    } else {
        let text = format!("Tool said: {}", results.join(" | "));
        body.push_str(&frame(
            json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        ));
        body.push_str(&frame(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ));
    }
    body.push_str(&frame(
        json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    ));
    body.push_str("data: [DONE]\n\n");
    body
}

async fn serve_one(mut socket: TcpStream, writes: usize) {
    let Some(request) = http::read_json_request(&mut socket).await else {
        return;
    };
    let body = body_for(&request, writes);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(body.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// Serves every connection on a background thread; returns the base URL.
fn start_model(writes: usize) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        runtime.block_on(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve_one(socket, writes));
            }
        });
    });
    format!("http://{address}/v1")
}

// ---------------------------------------------------------------------------------------
// Processes.
// ---------------------------------------------------------------------------------------

/// A private temp tree (short: socket paths are bounded): `ws/` the workspace (with
/// `notes/1.txt` holding "old 1"), `auth/` the run authority, `scope/` the daemon's scope.
struct Sandbox {
    base: PathBuf,
    model: String,
}

impl Sandbox {
    fn new(tag: &str, writes: usize) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from(format!("/tmp/aa-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(base.join("ws/notes"))
            .expect("workspace");
        std::fs::write(base.join("ws/notes/1.txt"), "old 1\n").expect("notes");
        Sandbox {
            base,
            model: start_model(writes),
        }
    }

    fn workspace(&self) -> PathBuf {
        self.base.join("ws")
    }

    fn note(&self, n: usize) -> Option<String> {
        std::fs::read_to_string(self.workspace().join(format!("notes/{n}.txt"))).ok()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AGENT);
        command
            .args(args)
            .current_dir(self.workspace())
            .env("AGENT_PROVIDER", "openai")
            .env("OPENAI_BASE_URL", &self.model)
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_MODEL", "test-model")
            .env("AGENT_CONFIG_DIR", self.base.join("no-config"))
            .env_remove("AGENT_MODEL")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("AGENT_SCOPE_DIR", self.base.join("scope"))
            .env("AGENT_AUTHORITY_DIR", self.base.join("auth"))
            .env("RUST_LOG", "warn")
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("AGENT_OFFLINE_PACE_MS");
        command
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Runs `agent ARGS` with `stdin` piped in, to its end (bounded): status, stdout, stderr.
fn run(sandbox: &Sandbox, args: &[&str], stdin: &str) -> (ExitStatus, String, String) {
    let mut child = Killed(
        sandbox
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the agent starts"),
    );
    let mut input = child.0.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    let stdout = read_all(child.0.stdout.take().expect("stdout"));
    let stderr = read_all(child.0.stderr.take().expect("stderr"));
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the agent did not exit in time");
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (
        stdout.join().expect("stdout"),
        stderr.join().expect("stderr"),
    );
    (status, stdout, stderr)
}

/// `agent serve` in the sandbox, waited for until it serves; killed on drop.
fn serve(sandbox: &Sandbox) -> Killed {
    let mut daemon = Killed(
        sandbox
            .command(&["serve"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the daemon starts"),
    );
    let (tx, rx) = mpsc::channel();
    let stderr = daemon.0.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("serving on") => break,
            Ok(line) => seen.push(line),
            Err(_) => panic!("the daemon did not serve: {seen:?}"),
        }
    }
    // Keeps draining, so the daemon never blocks on a full pipe.
    std::thread::spawn(move || while rx.recv().is_ok() {});
    daemon
}

fn prompts(stderr: &str) -> usize {
    stderr.matches("? Allow `write_file`").count()
}

fn context(status: &ExitStatus, stdout: &str, stderr: &str) -> String {
    format!("status {status}\nstdout:\n{stdout}\nstderr:\n{stderr}")
}

/// Where the form under test runs: `agent TASK` or `agent run --daemon TASK`.
const TASK: &str = "Update the notes";

fn assert_refused(sandbox: &Sandbox, (status, stdout, stderr): (ExitStatus, String, String)) {
    let context = context(&status, &stdout, &stderr);
    assert!(status.success(), "{context}");
    assert_eq!(sandbox.note(1).as_deref(), Some("old 1\n"), "{context}");
    // One-shot lines name the path; the daemon's events carry no arguments.
    assert!(
        stdout.contains("  -> write_file notes/1.txt: refused by you")
            || stdout.contains("  -> write_file: refused by you"),
        "{context}"
    );
    assert!(!stdout.contains(" ok"), "{context}");
    // The model was told the same.
    assert!(
        stdout.contains("refused: the user did not approve this change"),
        "{context}"
    );
}

fn assert_always(sandbox: &Sandbox, (status, stdout, stderr): (ExitStatus, String, String)) {
    let context = context(&status, &stdout, &stderr);
    assert!(status.success(), "{context}");
    assert_eq!(sandbox.note(1).as_deref(), Some("new 1\n"), "{context}");
    assert_eq!(sandbox.note(2).as_deref(), Some("new 2\n"), "{context}");
    assert_eq!(prompts(&stderr), 1, "asked once for the run: {context}");
    assert!(
        stdout.contains("  -> write_file notes/2.txt: wrote 6 B")
            || stdout.contains("  -> write_file: ok"),
        "{context}"
    );
}

// ---------------------------------------------------------------------------------------
// One-shot.
// ---------------------------------------------------------------------------------------

#[test]
fn one_shot_shows_the_diff_and_writes_after_y() {
    let sandbox = Sandbox::new("y", 1);
    let (status, stdout, stderr) = run(&sandbox, &[TASK], "y\n");
    let context = context(&status, &stdout, &stderr);
    assert!(status.success(), "{context}");
    assert_eq!(sandbox.note(1).as_deref(), Some("new 1\n"), "{context}");
    assert!(
        stderr.contains(
            "? Allow `write_file` to overwrite `notes/1.txt` (6 bytes, replacing 6 bytes)?\n  \
             @@ -1 +1 @@\n  -old 1\n  +new 1\n[y]es / [N]o / [a]lways"
        ),
        "{context}"
    );
    assert!(
        stdout.contains("  -> write_file notes/1.txt: wrote 6 B"),
        "{context}"
    );
    // A piped answer is echoed after the question.
    assert!(stderr.contains("in this run: y\n"), "{context}");
}

#[test]
fn one_shot_n_leaves_the_file_and_says_refused_by_you() {
    let sandbox = Sandbox::new("n", 1);
    assert_refused(&sandbox, run(&sandbox, &[TASK], "n\n"));
}

#[test]
fn one_shot_a_approves_every_write_of_the_run_with_one_prompt() {
    let sandbox = Sandbox::new("a", 2);
    assert_always(&sandbox, run(&sandbox, &[TASK], "a\n"));
}

#[test]
fn one_shot_unknown_answers_ask_again_and_end_of_input_refuses() {
    let sandbox = Sandbox::new("eof", 1);
    let (status, stdout, stderr) = run(&sandbox, &[TASK], "perhaps\n");
    let context = context(&status, &stdout, &stderr);
    assert!(stderr.contains("please answer y, n or a"), "{context}");
    assert_refused(&sandbox, (status, stdout, stderr));
}

// ---------------------------------------------------------------------------------------
// Through the daemon.
// ---------------------------------------------------------------------------------------

#[test]
fn daemon_n_leaves_the_file_and_says_refused_by_you() {
    let sandbox = Sandbox::new("dn", 1);
    let _daemon = serve(&sandbox);
    let (status, stdout, stderr) = run(&sandbox, &["run", "--daemon", TASK], "n\n");
    let context = context(&status, &stdout, &stderr);
    assert!(
        stderr.contains("? Allow `write_file` to overwrite `notes/1.txt`"),
        "{context}"
    );
    assert!(stderr.contains("  -old 1\n  +new 1"), "{context}");
    assert!(status.success(), "{context}");
    assert_eq!(sandbox.note(1).as_deref(), Some("old 1\n"), "{context}");
    assert!(
        stdout.contains("  -> write_file: refused by you"),
        "{context}"
    );
    assert!(!stdout.contains(" ok"), "{context}");
}

#[test]
fn daemon_a_approves_every_write_of_the_run_with_one_prompt() {
    let sandbox = Sandbox::new("da", 2);
    let _daemon = serve(&sandbox);
    let (status, stdout, stderr) = run(&sandbox, &["run", "--daemon", TASK], "a\n");
    let context = context(&status, &stdout, &stderr);
    assert!(status.success(), "{context}");
    assert_eq!(sandbox.note(1).as_deref(), Some("new 1\n"), "{context}");
    assert_eq!(sandbox.note(2).as_deref(), Some("new 2\n"), "{context}");
    assert_eq!(prompts(&stderr), 1, "asked once for the run: {context}");
}
