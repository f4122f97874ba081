//! The subcommands the local daemon answers (`docs/running-the-daemon.md`).
//!
//! - `agent serve` runs [`agent_server::Daemon`] in the foreground over the coding agent's
//!   composed definitions (plus the fixture's with `--fixture`) until SIGINT or SIGTERM.
//! - Every other subcommand is a client: it finds the daemon through the endpoint store
//!   ([`agent_client_grpc::local`]); `agent run --daemon` starts one when none answers
//!   ([`agent_client_grpc::managed`] with a [`ProcessStarter`] that launches `agent serve`
//!   from this executable as a background process in its own process group, working in the
//!   run's directory, and announced on stderr). A daemon the CLI started keeps running after
//!   the CLI exits: it is the user's local service, stopped with `agent daemon stop`.
//! - A daemon works in one directory: a run names its own (`--workspace` or the current
//!   directory) beside the StartRun message, and the daemon refuses another one; the CLI
//!   refuses first when the daemon's [`state`] file names its root.
//! - Runs are owned by a client id and an ownership epoch. Each `agent run --daemon` and
//!   `agent import` is a fresh client; the run, its client and the client's latest epoch go
//!   into the CLI's [`index`], and `attach`, `suspend`, `resume`, `export` and `runs`
//!   reconnect as that client (as does `cancel`). A reconnect fences the earlier session of
//!   that client, so an `agent run --daemon` still streaming the run stops (exit 1) when
//!   another process attaches to it, and says which command took the run over.
//! - Starting, following, attaching to, cancelling and listing runs is written against the
//!   client seam (`follow.rs`, `cancel_run`, `RunLister`), generic over any
//!   [`agent_client::Session`]; the local daemon's specifics (the workspace, the run index,
//!   the attachment locks) reach it through `AdapterHooks`, so another adapter's session is
//!   followed the same way: [`restate`] does so for `--restate URL` (a Restate cluster's
//!   runs, through `agent_restate::client`).
//!
//! Where files live: the endpoint scope (`$AGENT_SCOPE_DIR`, else
//! `$XDG_RUNTIME_DIR/spice-agent`, else `/tmp/spice-agent-<uid>`) holds the socket, the
//! endpoint files, the run index and `daemon.log` (the stderr of a daemon the CLI started);
//! the run authority is `--authority DIR`, else `$AGENT_AUTHORITY_DIR`, else the default
//! under the user's state directory.

mod admin;
mod client;
mod control;
mod follow;
pub mod index;
mod limits;
pub mod restate;
mod run;
mod runs;
mod serve;
pub mod state;
mod worker;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_client as c;
use agent_endpoint::UserScope;

use super::error::CliError;

pub use self::admin::{STOP_WAIT, status, stop};
pub use self::client::{ProcessStarter, ServeProcess};
pub use self::control::{cancel, export, import, resume, suspend};
pub use self::limits::{
    ACTIVE_RUNS_RANGE, COLLECTION_ITEMS_RANGE, MESSAGE_BYTES_RANGE, REPLAY_BYTES_RANGE,
    REPLAY_EVENTS_RANGE, SESSIONS_RANGE, STREAMS_RANGE, ServeLimits,
};
pub use self::run::{attach, run};
pub use self::runs::runs;
pub use self::serve::serve;
pub use self::worker::worker;

/// The environment variable that overrides the endpoint scope directory.
pub const SCOPE_DIR_ENV: &str = "AGENT_SCOPE_DIR";
/// The environment variable that overrides the run authority's directory.
pub const AUTHORITY_DIR_ENV: &str = "AGENT_AUTHORITY_DIR";
/// The id the coding agent's own definition is served under.
pub const CODING_AGENT_DEFINITION: &str = "coding-agent";
/// The revision the coding agent's own definition is served at.
pub const CODING_AGENT_REVISION: &str = "coding-agent-v1";
/// How long `agent serve` waits for open streams and calls after a signal.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);
/// How long `agent run --daemon` waits for a daemon it started to answer.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often it polls a starting daemon.
pub const STARTUP_RETRY: Duration = Duration::from_millis(50);
/// How long a command waits for a fenced process to let go of a run it reconnects to.
pub const ATTACH_LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// The sessions the daemon keeps at once: one per CLI run, so more than the server default
/// (ended and idle sessions make room; see docs/decisions.md).
pub const DAEMON_SESSIONS: usize = 4096;
/// The daemon log of a daemon the CLI started, in the scope directory.
pub const DAEMON_LOG: &str = "daemon.log";
/// The client's build component.
const CLIENT_COMPONENT: &str = "agent-cli";
/// The cancel reason sent on Ctrl-C.
const INTERRUPT_REASON: &str = "interrupted";

fn io_error(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Daemon(format!("{what}: {e}"))
}

fn client_error(what: &str, e: &c::Error) -> CliError {
    CliError::Daemon(format!("{what}: {e}"))
}

/// The endpoint scope: `$AGENT_SCOPE_DIR` (created 0700; its parent must be trusted), else
/// the user's default scope.
pub fn scope() -> Result<UserScope, CliError> {
    match std::env::var_os(SCOPE_DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = std::path::absolute(PathBuf::from(dir))
                .map_err(|e| io_error("endpoint scope", e))?;
            UserScope::at(&dir).map_err(|e| io_error("endpoint scope", e))
        }
        None => UserScope::current().map_err(|e| io_error("endpoint scope", e)),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 12];
    // A failing CSPRNG leaves zeros; the time and pid still make the id unique enough for
    // an idempotency key, which the daemon only compares.
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{:x}-{}-{hex}", now_secs(), std::process::id())
}

fn operation() -> Result<c::OperationId, CliError> {
    c::OperationId::new(&random_token("op")).map_err(|e| io_error("operation id", e))
}
