//! Failures a user can act on, with the real binary: an MCP server that exits at once is
//! named with how it ended and its last stderr lines, in plain words (no dependency
//! internals, no "bean"); `agent serve` over a run authority directory others can read
//! names the directory, the rule and the fix (and does not speak of a fixture it was not
//! asked for). Every wait is bounded; every file is in a temp directory.
//! Compiled only without the `openai` feature (whose provider needs a key to assemble).
#![cfg(all(unix, not(feature = "openai")))]

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// A child that runs longer than this is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// A temp directory, removed on drop.
struct Temp(PathBuf);

impl Temp {
    fn new(tag: &str) -> Temp {
        let dir = PathBuf::from(format!("/tmp/af-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .unwrap();
        Temp(dir)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the agent to its end (killed past [`DEADLINE`]): (exit code, stdout, stderr).
fn agent(args: &[&str], env: &[(&str, &PathBuf)]) -> (Option<i32>, String, String) {
    let mut child = Command::new(AGENT)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the agent ran longer than {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (
        status.code(),
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

/// What no user-facing message may contain: dependency internals and the framework's word
/// for its parts.
fn assert_plain(text: &str) {
    for word in ["rmcp", "Transport [", "Send message error", "bean"] {
        assert!(!text.contains(word), "{word:?} in: {text}");
    }
}

/// Before: `... building bean \`mcp-source\` failed: MCP server \`x\` did not start:
/// initialize failed: Send message error Transport [rmcp::...] ...`, often without the
/// server's stderr.
#[test]
fn a_server_that_exits_at_once_is_named_with_its_stderr() {
    let temp = Temp::new("mcp");
    let config = temp.0.join("mcp.json");
    let script = "echo 'starting up' >&2; echo 'boom: missing token' >&2; exit 1";
    std::fs::write(
        &config,
        serde_json::json!({ "mcpServers": { "x": { "command": "sh", "args": ["-c", script] } } })
            .to_string(),
    )
    .unwrap();
    // The race it used to lose (the pipe closing before the exit was seen) is not timed:
    // a few runs, each of which must say the same.
    for _ in 0..3 {
        let (code, out, err) = agent(&["tools", "--mcp-config", config.to_str().unwrap()], &[]);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(out, "");
        assert!(
            err.contains("the MCP server \"x\" exited during start-up (exit status 1)"),
            "{err}"
        );
        assert!(
            err.contains("its last stderr lines:\n    starting up\n    boom: missing token"),
            "{err}"
        );
        assert_plain(&err);
    }
}

/// Before: `agent: run host: fixture run authority did not open`.
#[test]
fn serve_names_a_loose_authority_directory_and_the_fix() {
    let temp = Temp::new("serve");
    let authority = temp.0.join("auth");
    std::fs::create_dir(&authority).unwrap();
    std::fs::set_permissions(&authority, std::fs::Permissions::from_mode(0o755)).unwrap();
    let scope = temp.0.join("scope");
    let (code, _, err) = agent(
        &["serve"],
        &[
            ("AGENT_SCOPE_DIR", &scope),
            ("AGENT_AUTHORITY_DIR", &authority),
        ],
    );
    assert_eq!(code, Some(1), "{err}");
    let shown = authority.display();
    assert!(
        err.contains(&format!(
            "the run authority directory {shown} is mode 0755; it must be private (0700): chmod 700 {shown}"
        )),
        "{err}"
    );
    assert!(!err.contains("fixture"), "{err}");
    assert_plain(&err);
    // The directory was left as it was: the fix is the user's.
    let mode = std::fs::metadata(&authority).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
}

/// The one-shot CLI names the directory the same way (before: `run authority unavailable:
/// an untrusted file or directory was refused`, with no path).
#[test]
fn the_one_shot_cli_names_a_loose_authority_directory() {
    let temp = Temp::new("oneshot");
    let authority = temp.0.join("auth");
    std::fs::create_dir(&authority).unwrap();
    std::fs::set_permissions(&authority, std::fs::Permissions::from_mode(0o755)).unwrap();
    let workspace = temp.0.join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let file = temp.0.join("run.json");
    let (code, out, err) = agent(
        &[
            "--workspace",
            workspace.to_str().unwrap(),
            "--authority",
            authority.to_str().unwrap(),
            "--suspend",
            file.to_str().unwrap(),
            "survey",
        ],
        &[],
    );
    assert_eq!(code, Some(9), "authority unavailable: {err}");
    assert!(
        err.contains(&format!("{} is mode 0755", authority.display())),
        "{err}"
    );
    assert_eq!(out, "", "nothing ran");
    assert!(!file.exists());
}
