//! The examples of `agent-mcp` that tests run as processes (the MCP fault server and the
//! killed-host probe), built on demand by the cargo that runs the tests, into its target
//! directory, once per test process. `coding-agent`'s tests include this file too.
//!
//! `cargo test` builds a package's examples only when no target is selected, and never
//! another package's: `cargo test -p agent-mcp --test fault_server` or `cargo test -p
//! coding-agent` would find none, or a stale one from an earlier build. Cargo holds no lock
//! on the target directory while tests run, and serializes concurrent builds itself, so
//! test processes started in parallel (nextest) wait for one build and reuse it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The examples one build produces.
const EXAMPLES: [&str; 2] = ["mcp-fault-server", "mcp-host-probe"];

/// How long the build may take: a cold one compiles `agent-mcp` and the dependencies whose
/// features differ from the tests' own build, on a loaded machine.
const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How often the build's exit is checked.
const POLL: Duration = Duration::from_millis(100);

/// The executable of `agent-mcp`'s example `name`, built first if needed.
pub(crate) fn agent_mcp_example(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<BTreeMap<String, PathBuf>, String>> = OnceLock::new();
    // The result, an error included, is kept: a failed build is not retried by every test.
    match BUILT.get_or_init(build) {
        Ok(paths) => paths
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("`{name}` is not one of {EXAMPLES:?}")),
        Err(error) => panic!("{error}"),
    }
}

fn build() -> Result<BTreeMap<String, PathBuf>, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--locked", "--quiet", "-p", "agent-mcp"]);
    for example in EXAMPLES {
        command.args(["--example", example]);
    }
    // The artifact messages name each executable wherever the target directory is.
    command
        .arg("--message-format=json-render-diagnostics")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TERM_COLOR", "never")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let shown = format!("{command:?}");
    let mut child = command
        .spawn()
        .map_err(|e| format!("{shown} did not start: {e}"))?;
    // Read both pipes while waiting, so a full pipe never stalls the build.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + BUILD_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                // Not joined: a compiler the build started may still hold the pipes.
                return Err(format!("{shown} took longer than {BUILD_TIMEOUT:?}"));
            }
            Err(e) => return Err(format!("{shown}: {e}")),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("{shown} failed ({status}):\n{stderr}"));
    }
    let mut paths = BTreeMap::new();
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let name = message["target"]["name"].as_str().unwrap_or_default();
        if message["reason"] == "compiler-artifact"
            && EXAMPLES.contains(&name)
            && let Some(executable) = message["executable"].as_str()
        {
            paths.insert(name.to_owned(), PathBuf::from(executable));
        }
    }
    if paths.len() != EXAMPLES.len() {
        return Err(format!(
            "{shown} named the executables {paths:?}, not all of {EXAMPLES:?}"
        ));
    }
    Ok(paths)
}
