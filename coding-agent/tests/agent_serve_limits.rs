//! `agent serve`'s limit flags: a daemon started with them reports them in health (read
//! back through the client), and each impossible value is a usage error (exit code 2)
//! before anything starts.

use std::io::Read as _;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_client::{self as c, Connector as _, Session as _};
use agent_client_grpc::managed::Discovery as _;
use coding_agent::cli::daemon::{
    ACTIVE_RUNS_RANGE, COLLECTION_ITEMS_RANGE, MESSAGE_BYTES_RANGE, SESSIONS_RANGE, STREAMS_RANGE,
};

const AGENT: &str = env!("CARGO_BIN_EXE_agent");
/// Every wait here is bounded by this.
const DEADLINE: Duration = Duration::from_secs(60);

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A private temp tree (short: socket paths are bounded).
struct Sandbox(PathBuf);

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = PathBuf::from(format!("/tmp/sl-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(base.join("ws"))
            .unwrap();
        Sandbox(base)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(AGENT);
        command
            .args(args)
            .current_dir(self.0.join("ws"))
            .env("AGENT_SCOPE_DIR", self.0.join("scope"))
            .env("AGENT_AUTHORITY_DIR", self.0.join("auth"))
            .env("RUST_LOG", "warn")
            // The offline model, chosen explicitly; no config file of the user's applies.
            .env("AGENT_PROVIDER", "offline")
            .env("AGENT_CONFIG_DIR", self.0.join("config"))
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Killed on drop.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn request() -> c::InitializeRequest {
    let v = |minor| c::ProtocolVersion::new(1, minor, 0).unwrap();
    c::InitializeRequest::with_attempt(
        c::ProtocolRange::new(v(0), v(3)).unwrap(),
        c::Build::new("serve-limits-test", "0.1.0", "test", "rustc").unwrap(),
        vec![
            agent_protocol::limits::CAPABILITY_SNAPSHOT_AUTHORITY.to_owned(),
            agent_protocol::limits::CAPABILITY_SNAPSHOTS.to_owned(),
        ],
        vec![],
        // At least the daemon's sizes (protocol 1.2), and more than any limit set below, so
        // health's values are the daemon's own.
        c::Limits::new(
            MESSAGE_BYTES_RANGE.1,
            COLLECTION_ITEMS_RANGE.1,
            1 << 16,
            1 << 30,
            1 << 10,
            1 << 12,
        )
        .unwrap(),
        None,
        agent_client_grpc::new_attempt_id().unwrap(),
    )
    .unwrap()
}

/// The daemon's health, through the local client over its published endpoint.
fn health(sandbox: &Sandbox) -> c::Health {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        tokio::time::timeout(DEADLINE, async {
            let store = agent_endpoint::Store::open(&sandbox.0.join("scope")).unwrap();
            let connector = agent_client_grpc::local::LocalDiscovery::new(store)
                .discover()
                .await
                .unwrap();
            let session = connector.initialize(request()).await.unwrap();
            let health = session.health().await.unwrap();
            session.close();
            health
        })
        .await
        .expect("health answered in time")
    })
}

/// Waits (bounded) for the daemon's "serving on" line on stderr.
fn wait_serving(daemon: &mut Daemon) {
    let mut stderr = daemon.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while let Ok(1) = stderr.read(&mut byte) {
            seen.push(byte[0]);
            if String::from_utf8_lossy(&seen).contains("serving on") {
                let _ = tx.send(());
                // Keep draining so the daemon never blocks on a full pipe.
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                return;
            }
        }
    });
    rx.recv_timeout(DEADLINE)
        .expect("the daemon announced that it serves");
}

#[test]
fn serve_reports_the_limits_it_was_started_with_in_health() {
    let sandbox = Sandbox::new("set");
    let child = sandbox
        .command(&[
            "serve",
            "--fixture",
            "--max-message-bytes",
            "2097152",
            "--max-collection-items",
            "100",
            "--max-replay-events",
            "10",
            "--max-replay-bytes",
            "65536",
            "--max-streams",
            "3",
            "--max-active-runs",
            "5",
            "--max-sessions",
            "7",
        ])
        .spawn()
        .unwrap();
    let mut daemon = Daemon(child);
    wait_serving(&mut daemon);
    let limits = *health(&sandbox).limits();
    assert_eq!(
        (
            limits.message_bytes(),
            limits.collection_items(),
            limits.replay_events(),
            limits.replay_bytes(),
            limits.concurrent_streams(),
            limits.active_runs(),
        ),
        (2 << 20, 100, 10, 65536, 3, 5)
    );
}

#[test]
fn serve_without_limit_flags_keeps_the_defaults() {
    let sandbox = Sandbox::new("default");
    let mut daemon = Daemon(sandbox.command(&["serve", "--fixture"]).spawn().unwrap());
    wait_serving(&mut daemon);
    let limits = *health(&sandbox).limits();
    let host = agent_daemon::host::HostLimits::default();
    assert_eq!(
        (
            limits.message_bytes(),
            limits.collection_items(),
            limits.replay_events(),
            limits.replay_bytes(),
            limits.concurrent_streams(),
            limits.active_runs(),
        ),
        (
            agent_server::server::DEFAULT_MESSAGE_BYTES,
            agent_server::server::DEFAULT_COLLECTION_ITEMS,
            host.replay_events as u32,
            host.replay_bytes as u64,
            host.concurrent_streams as u32,
            host.active_runs as u32,
        )
    );
}

/// Runs `agent serve ARGS` to its (bounded) end: (exit code, stderr).
fn refused(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Daemon(sandbox.command(args).spawn().unwrap());
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "agent serve {args:?} kept running"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

#[test]
fn each_impossible_limit_is_a_usage_error_before_the_daemon_starts() {
    let past = |high: u64| (high + 1).to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--max-message-bytes".into(), "0".into()],
            "--max-message-bytes",
        ),
        (
            vec!["--max-message-bytes".into(), past(MESSAGE_BYTES_RANGE.1)],
            "--max-message-bytes",
        ),
        (
            vec!["--max-collection-items".into(), "0".into()],
            "--max-collection-items",
        ),
        (
            vec![
                "--max-collection-items".into(),
                past(u64::from(COLLECTION_ITEMS_RANGE.1)),
            ],
            "--max-collection-items",
        ),
        // Below the three definitions `--fixture` serves.
        (
            vec!["--max-collection-items".into(), "2".into()],
            "served definitions",
        ),
        (
            vec!["--max-replay-events".into(), "0".into()],
            "--max-replay-events",
        ),
        (
            vec!["--max-replay-bytes".into(), "0".into()],
            "--max-replay-bytes",
        ),
        (
            vec![
                "--max-replay-events".into(),
                "100".into(),
                "--max-replay-bytes".into(),
                "99".into(),
            ],
            "exceeds --max-replay-bytes",
        ),
        (vec!["--max-streams".into(), "0".into()], "--max-streams"),
        (
            vec!["--max-streams".into(), past(STREAMS_RANGE.1)],
            "--max-streams",
        ),
        (
            vec!["--max-active-runs".into(), "0".into()],
            "--max-active-runs",
        ),
        (
            vec!["--max-active-runs".into(), past(ACTIVE_RUNS_RANGE.1)],
            "--max-active-runs",
        ),
        (vec!["--max-sessions".into(), "0".into()], "--max-sessions"),
        (
            vec!["--max-sessions".into(), past(SESSIONS_RANGE.1)],
            "--max-sessions",
        ),
        // Not a number at all: clap's own usage error.
        (vec!["--max-streams".into(), "many".into()], "--max-streams"),
    ];
    let sandbox = Sandbox::new("bad");
    for (flags, needle) in cases {
        let mut args = vec!["serve", "--fixture"];
        args.extend(flags.iter().map(String::as_str));
        let (code, stderr) = refused(&sandbox, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("serving on"), "{args:?}: {stderr}");
    }
    // Nothing was published: no daemon ever served.
    assert!(!sandbox.0.join("scope/endpoint.json").exists());
}

#[test]
fn serve_help_lists_the_limit_flags() {
    let sandbox = Sandbox::new("help");
    let output = sandbox.command(&["serve", "--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in [
        "--max-message-bytes",
        "--max-collection-items",
        "--max-replay-events",
        "--max-replay-bytes",
        "--max-streams",
        "--max-active-runs",
        "--max-sessions",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}
