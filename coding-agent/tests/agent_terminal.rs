//! The agent as a person at a terminal meets it, through a real pseudo-terminal (`rexpect`):
//! the interactive session (each line a turn of one conversation, Ctrl-C cancels the turn
//! in flight, Ctrl-D ends it, `-c` continues it), approval prompts answered at the keyboard
//! (one approved and one refused write), and the spinner while the model thinks, in the
//! one-shot form and through the daemon.
//!
//! The model is a scripted OpenAI-compatible server on loopback, chosen by configuration
//! (`AGENT_PROVIDER=openai`). What it answers depends on the conversation's last message:
//!
//! | last message | answer |
//! | --- | --- |
//! | user `write PATH TEXT` | a `write_file` call (a fresh call id each time) |
//! | a tool result | `Tool said: <result>` |
//! | user `hang` | nothing: the request stays open until the client lets go |
//! | user `slow ...` | after 1.5 s, as for any other text |
//! | any other user text | `answer N: you said <text>`, N the user messages it was sent |
//!
//! Every expectation waits at most [`TIMEOUT_MS`].
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rexpect::session::{Options, PtySession, spawn_with_options};
use serde_json::{Value, json};

/// How long any one expectation may wait.
const TIMEOUT_MS: u64 = 30_000;

static NEXT: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

/// A private directory with a workspace, a config directory and a state directory.
struct Sandbox {
    base: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("agent-tty-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["workspace", "config", "state", "scope", "authority"] {
            std::fs::create_dir_all(base.join(dir)).expect("sandbox");
        }
        use std::os::unix::fs::PermissionsExt;
        for dir in ["scope", "authority"] {
            std::fs::set_permissions(base.join(dir), std::fs::Permissions::from_mode(0o700))
                .expect("private");
        }
        Sandbox { base }
    }

    fn workspace(&self) -> PathBuf {
        self.base.join("workspace")
    }

    /// The agent in the workspace, on the scripted model at `base_url`.
    fn agent(&self, base_url: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agent"));
        command
            .current_dir(self.workspace())
            .args(args)
            .env("AGENT_PROVIDER", "openai")
            .env("OPENAI_BASE_URL", base_url)
            .env("OPENAI_API_KEY", "sk-terminal-test")
            .env("OPENAI_MODEL", "scripted")
            .env("AGENT_CONFIG_DIR", self.base.join("config"))
            .env("AGENT_CONVERSATION_DIR", self.base.join("state"))
            .env("AGENT_SCOPE_DIR", self.base.join("scope"))
            .env("AGENT_AUTHORITY_DIR", self.base.join("authority"))
            .env("TERM", "xterm-256color")
            .env_remove("AGENT_MODEL")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("RUST_LOG")
            .env_remove("XDG_RUNTIME_DIR");
        command
    }

    fn read(&self, file: &str) -> Option<String> {
        std::fs::read_to_string(self.workspace().join(file)).ok()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // A daemon a test started stops with its scope's record gone; ask it to.
        let _ = Command::new(env!("CARGO_BIN_EXE_agent"))
            .args(["daemon", "stop"])
            .env("AGENT_SCOPE_DIR", self.base.join("scope"))
            .output();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn frame(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn text_body(text: &str) -> String {
    let mut body = frame(json!({"choices": [{"index": 0, "delta": {"content": text}}]}));
    body.push_str(&frame(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ));
    body.push_str("data: [DONE]\n\n");
    body
}

/// What the scripted model answers to `request` (`None`: keep the request open).
fn answer(request: &Value) -> Option<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        let result = last["content"].as_str().unwrap_or("");
        return Some(text_body(&format!("Tool said: {result}")));
    }
    let text = last["content"].as_str().unwrap_or("").to_owned();
    if text == "hang" {
        return None;
    }
    if let Some(rest) = text.strip_prefix("write ") {
        let (path, content) = rest.split_once(' ').unwrap_or((rest, ""));
        let call = format!("call-{}", CALLS.fetch_add(1, Ordering::Relaxed));
        let arguments = json!({"path": path, "content": format!("{content}\n")}).to_string();
        let mut body = frame(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": call, "type": "function", "function": {"name": "write_file", "arguments": arguments}}
        ]}}]}));
        body.push_str(&frame(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ));
        body.push_str("data: [DONE]\n\n");
        return Some(body);
    }
    if text.starts_with("slow") {
        std::thread::sleep(Duration::from_millis(1500));
    }
    let users = messages.iter().filter(|m| m["role"] == "user").count();
    Some(text_body(&format!("answer {users}: you said {text}")))
}

fn serve(mut socket: TcpStream) {
    let mut reader = BufReader::new(socket.try_clone().expect("clone"));
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    match answer(&request) {
        Some(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes());
            let _ = socket.write_all(body.as_bytes());
        }
        // Held until the client closes it (a cancelled model call drops its request).
        None => {
            let _ = socket.set_read_timeout(Some(Duration::from_secs(60)));
            let _ = reader.read_to_end(&mut Vec::new());
        }
    }
}

/// Starts the scripted model; its base URL.
fn model() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            std::thread::spawn(move || serve(socket));
        }
    });
    format!("http://{address}/v1")
}

/// The agent on a pseudo-terminal; what it shows is read with colours and cursor moves
/// taken out.
fn spawn(command: Command) -> PtySession {
    let options = Options::new()
        .timeout_ms(Some(TIMEOUT_MS))
        .strip_ansi_escape_codes(true);
    spawn_with_options(command, options).expect("the agent starts on a pseudo-terminal")
}

/// Waits for the process to exit; its exit code.
fn exit_code(session: &mut PtySession) -> i32 {
    use rexpect::process::WaitStatus;
    match session.process().wait().expect("wait") {
        WaitStatus::Exited(_, code) => code,
        other => panic!("the agent did not exit normally: {other:?}"),
    }
}

/// Waits for `needle`, keeping everything shown up to and including it in `seen`.
fn expect(
    tty: &mut PtySession,
    seen: &mut String,
    needle: &str,
) -> Result<String, rexpect::error::Error> {
    let before = tty.exp_string(needle)?;
    seen.push_str(&before.replace('\r', ""));
    seen.push_str(needle);
    Ok(before)
}

/// Types `line` and Enter at the session's prompt (the line editor draws it, so it is in
/// what `seen` reads next).
fn type_line(
    tty: &mut PtySession,
    _seen: &mut String,
    line: &str,
) -> Result<usize, rexpect::error::Error> {
    tty.send_line(line)
}

/// Answers an approval prompt: `rexpect` turns the pseudo-terminal's echo off, so the
/// answer is put in `seen` as a terminal would have echoed it.
fn answer_prompt(
    tty: &mut PtySession,
    seen: &mut String,
    line: &str,
) -> Result<usize, rexpect::error::Error> {
    seen.push_str(line);
    seen.push('\n');
    tty.send_line(line)
}

#[test]
fn a_session_is_one_conversation_with_an_approved_and_a_refused_write() {
    let sandbox = Sandbox::new("session");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(&base_url, &[]));
    let mut seen = String::new();
    expect(&mut tty, &mut seen, "agent: a conversation in").expect("the banner");
    expect(&mut tty, &mut seen, "> ").expect("the prompt");

    type_line(&mut tty, &mut seen, "hello").expect("type");
    expect(&mut tty, &mut seen, "answer 1: you said hello").expect("the first answer");
    expect(&mut tty, &mut seen, "> ").expect("the prompt again");

    // The second line is a turn of the same conversation: the model sees both questions.
    type_line(&mut tty, &mut seen, "and again").expect("type");
    expect(&mut tty, &mut seen, "answer 2: you said and again").expect("the conversation goes on");
    expect(&mut tty, &mut seen, "> ").expect("the prompt");

    type_line(&mut tty, &mut seen, "write approved.txt yes please").expect("type");
    expect(
        &mut tty,
        &mut seen,
        "Allow `write_file` to create `approved.txt`",
    )
    .expect("the approval prompt shows the path");
    expect(&mut tty, &mut seen, "in this run: ").expect("the answers");
    answer_prompt(&mut tty, &mut seen, "y").expect("approve");
    expect(&mut tty, &mut seen, "write_file approved.txt").expect("the tool line");
    expect(&mut tty, &mut seen, "Tool said:").expect("the model saw the result");
    expect(&mut tty, &mut seen, "> ").expect("the prompt");

    type_line(&mut tty, &mut seen, "write refused.txt no thanks").expect("type");
    expect(
        &mut tty,
        &mut seen,
        "Allow `write_file` to create `refused.txt`",
    )
    .expect("the second prompt");
    expect(&mut tty, &mut seen, "in this run: ").expect("the answers");
    answer_prompt(&mut tty, &mut seen, "n").expect("refuse");
    expect(
        &mut tty,
        &mut seen,
        "write_file refused.txt: refused by you",
    )
    .expect("a refusal is reported as one");
    expect(&mut tty, &mut seen, "> ").expect("the prompt");

    tty.send_control('d').expect("Ctrl-D");
    seen.push_str("^D\n");
    assert_eq!(exit_code(&mut tty), 0);
    // `AGENT_TERMINAL_TRANSCRIPT=FILE` keeps what the terminal showed, as typed and read.
    if let Some(file) = std::env::var_os("AGENT_TERMINAL_TRANSCRIPT") {
        std::fs::write(file, &seen).expect("transcript");
    }
    assert_eq!(
        sandbox.read("approved.txt").as_deref(),
        Some("yes please\n")
    );
    assert_eq!(sandbox.read("refused.txt"), None);

    // `-c` continues the conversation the session kept: the model sees its earlier turns.
    let mut tty = spawn(sandbox.agent(&base_url, &["-c", "what", "now"]));
    expect(&mut tty, &mut seen, "answer 5: you said what now").expect("the continued conversation");
    assert_eq!(exit_code(&mut tty), 0);
}

#[test]
fn ctrl_c_cancels_the_turn_in_flight_and_the_session_goes_on() {
    let sandbox = Sandbox::new("ctrl-c");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(&base_url, &[]));
    tty.exp_string("> ").expect("the prompt");
    tty.send_line("hang").expect("type");
    // The spinner says the model is thinking; Ctrl-C cancels this turn only.
    tty.exp_string("thinking").expect("the spinner");
    tty.send_control('c').expect("Ctrl-C");
    tty.exp_string("cancelled:").expect("the turn is cancelled");
    tty.exp_string("(this turn is not kept)")
        .expect("and not kept");
    tty.exp_string("> ").expect("the session goes on");
    // Ctrl-C at the prompt drops the line; the session is still there.
    tty.send("half a li").expect("type");
    tty.send_control('c').expect("Ctrl-C at the prompt");
    // The editor drops the line and shows a fresh prompt (typing before it would be lost
    // as the editor takes the terminal back).
    tty.exp_string("> ").expect("a fresh prompt");
    tty.send_line("hello").expect("type");
    // The cancelled turn was not kept: this is the conversation's first question.
    tty.exp_string("answer 1: you said hello")
        .expect("an answer");
    tty.exp_string("> ").expect("the prompt");
    tty.send_control('d').expect("Ctrl-D");
    assert_eq!(exit_code(&mut tty), 0);
}

#[test]
fn a_one_shot_run_shows_the_spinner_and_asks_on_the_terminal() {
    let sandbox = Sandbox::new("one-shot");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(&base_url, &["slow", "down"]));
    tty.exp_string("thinking")
        .expect("the spinner while the model thinks");
    tty.exp_string("answer 1: you said slow down")
        .expect("the answer");
    assert_eq!(exit_code(&mut tty), 0);

    let mut tty = spawn(sandbox.agent(&base_url, &["write", "one.txt", "a", "line"]));
    tty.exp_string("Allow `write_file` to create `one.txt`")
        .expect("the prompt");
    tty.send_line("y").expect("approve");
    tty.exp_string("write_file one.txt").expect("the tool line");
    assert_eq!(exit_code(&mut tty), 0);
    assert_eq!(sandbox.read("one.txt").as_deref(), Some("a line\n"));
}

#[test]
fn through_the_daemon_the_prompt_is_visible_and_a_refusal_is_reported() {
    let sandbox = Sandbox::new("daemon");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(
        &base_url,
        &[
            "run",
            "--daemon",
            "write",
            "daemon.txt",
            "from",
            "the",
            "daemon",
        ],
    ));
    tty.exp_string("Allow `write_file` to create `daemon.txt`")
        .expect("the prompt is visible through the daemon");
    tty.exp_string("[a]lways").expect("the answers");
    tty.send_line("n").expect("refuse");
    tty.exp_string("write_file: refused by you")
        .expect("reported as a refusal");
    assert_eq!(exit_code(&mut tty), 0);
    assert_eq!(sandbox.read("daemon.txt"), None);
}

#[test]
fn through_the_daemon_the_spinner_shows_and_ctrl_c_cancels_the_run() {
    let sandbox = Sandbox::new("daemon-ctrl-c");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(&base_url, &["run", "--daemon", "hang"]));
    tty.exp_string("thinking")
        .expect("the spinner while the daemon's model thinks");
    tty.send_control('c').expect("Ctrl-C");
    tty.exp_string("cancelled: run")
        .expect("the run is cancelled");
    assert_eq!(exit_code(&mut tty), 130);
}

#[test]
fn ctrl_c_at_an_approval_prompt_cancels_the_turn_and_the_next_line_is_a_task() {
    let sandbox = Sandbox::new("ctrl-c-prompt");
    let base_url = model();
    let mut tty = spawn(sandbox.agent(&base_url, &[]));
    tty.exp_string("> ").expect("the prompt");
    tty.send_line("write never.txt nothing").expect("type");
    tty.exp_string("in this run: ")
        .expect("the approval prompt");
    tty.send_control('c')
        .expect("Ctrl-C at the approval prompt");
    tty.exp_string("(the prompt was closed)")
        .expect("the prompt is given up");
    tty.exp_string("cancelled:").expect("the turn is cancelled");
    tty.exp_string("> ").expect("the session's prompt");
    // The next line is a task, not an answer to the closed prompt.
    tty.send_line("hello").expect("type");
    tty.exp_string("answer 1: you said hello")
        .expect("the line reached the model");
    tty.exp_string("> ").expect("the prompt");
    tty.send_control('d').expect("Ctrl-D");
    assert_eq!(exit_code(&mut tty), 0);
    assert_eq!(sandbox.read("never.txt"), None);
}
