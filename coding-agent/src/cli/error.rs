//! The CLI's typed errors and their exit codes.

use std::fmt;

/// The exit code of an argument error.
pub const EXIT_USAGE: u8 = 2;

/// The exit code of a subcommand this build cannot run yet.
pub const EXIT_UNSUPPORTED: u8 = 10;

/// The exit code of `--suspend` when the run completed before its first turn boundary, so
/// that there was nothing to suspend and no snapshot was written.
pub const EXIT_NOTHING_SUSPENDED: u8 = 11;

/// The exit code of a run cancelled by Ctrl-C.
pub const EXIT_CANCELLED: u8 = 130;

/// The exit code of `agent daemon status` and `agent daemon stop` when no daemon runs.
pub const EXIT_NO_DAEMON: u8 = 3;

/// The exit code of a wait that gave up (`agent suspend --timeout`), as `timeout(1)` uses.
pub const EXIT_TIMED_OUT: u8 = 124;

/// A subcommand that talks to the local daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DaemonCommand {
    /// `agent serve`.
    Serve,
    /// `agent run --daemon`.
    RunDaemon,
    /// `agent runs`.
    Runs,
    /// `agent attach`.
    Attach,
    /// `agent suspend`.
    Suspend,
    /// `agent resume`.
    Resume,
    /// `agent export`.
    Export,
    /// `agent import`.
    Import,
    /// `agent cancel`.
    Cancel,
    /// `agent daemon status|stop`.
    Daemon,
}

impl DaemonCommand {
    /// The subcommand as typed.
    pub const fn as_str(self) -> &'static str {
        match self {
            DaemonCommand::Serve => "serve",
            DaemonCommand::RunDaemon => "run --daemon",
            DaemonCommand::Runs => "runs",
            DaemonCommand::Attach => "attach",
            DaemonCommand::Suspend => "suspend",
            DaemonCommand::Resume => "resume",
            DaemonCommand::Export => "export",
            DaemonCommand::Import => "import",
            DaemonCommand::Cancel => "cancel",
            DaemonCommand::Daemon => "daemon",
        }
    }
}

impl fmt::Display for DaemonCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a CLI command stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The subcommand is recognised but this build cannot run it (exit code 10).
    #[error("`agent {0}` is not supported by this build: its daemon transport is not linked in")]
    Unsupported(DaemonCommand),
    /// The log subscriber could not be installed (bad `RUST_LOG`, or one is installed).
    #[error("logs: {0}")]
    Logs(String),
    /// A daemon subcommand failed: no daemon, a refused call, an unreadable file (exit
    /// code 1). The message holds no secret: endpoint tokens never reach it.
    #[error("{0}")]
    Daemon(String),
    /// An option that does not apply to the subcommand (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// No daemon runs in this scope (`agent daemon status|stop`; exit code 3).
    #[error("{0}")]
    NoDaemon(String),
    /// A bounded wait gave up and its request was withdrawn (exit code 124).
    #[error("{0}")]
    TimedOut(String),
}

impl CliError {
    /// The process exit code.
    ///
    /// ```
    /// use coding_agent::cli::{CliError, DaemonCommand};
    ///
    /// assert_eq!(CliError::Unsupported(DaemonCommand::Serve).exit_code(), 10);
    /// ```
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Unsupported(_) => EXIT_UNSUPPORTED,
            CliError::Logs(_) => EXIT_USAGE,
            CliError::Daemon(_) => 1,
            CliError::Usage(_) => EXIT_USAGE,
            CliError::NoDaemon(_) => EXIT_NO_DAEMON,
            CliError::TimedOut(_) => EXIT_TIMED_OUT,
        }
    }
}

/// The message of a graph that did not assemble: the failing part's own error, without the
/// composition's wording (which names beans, a word for the program's authors).
pub fn assembly_failure(error: &agent_core::compose::BuildError) -> String {
    match std::error::Error::source(error) {
        Some(cause) => format!("could not assemble the agent: {cause}"),
        None => format!("could not assemble the agent: {error}"),
    }
}
