//! The `agent` command line: its clap definition ([`args`]), the log subscriber
//! ([`logs`]), the spinner ([`progress`]), approval prompts on the terminal ([`approve`]),
//! the daemon subcommands ([`daemon`]), snapshot files and the authority's directory
//! ([`snapshot`]) and the typed errors ([`error`]). The one-shot run itself lives in the
//! binary.

pub mod approve;
pub mod args;
pub mod daemon;
pub mod error;
pub mod logs;
pub mod output;
pub mod progress;
pub mod render;
pub mod session;
pub mod snapshot;
pub mod task;

pub use args::{
    Command, DaemonRequest, Invocation, ParseOutcome, Parsed, RestateRequest, USAGE, parse,
};
pub use error::{
    CliError, DaemonCommand, EXIT_CANCELLED, EXIT_NO_DAEMON, EXIT_NOTHING_SUSPENDED,
    EXIT_TIMED_OUT, EXIT_UNSUPPORTED, EXIT_USAGE,
};

use std::process::ExitCode;

/// Runs a daemon subcommand through [`daemon`].
pub async fn run_daemon_request(request: &DaemonRequest) -> Result<ExitCode, CliError> {
    match request {
        DaemonRequest::Serve(args) => daemon::serve(args).await,
        DaemonRequest::Run(args) => daemon::run(args).await,
        DaemonRequest::Runs => daemon::runs().await,
        DaemonRequest::Attach(args) => daemon::attach(args).await,
        DaemonRequest::Suspend(args) => daemon::suspend(args).await,
        DaemonRequest::Resume(args) => daemon::resume(args).await,
        DaemonRequest::Export(args) => daemon::export(args).await,
        DaemonRequest::Import(args) => daemon::import(args).await,
        DaemonRequest::Cancel(args) => daemon::cancel(args).await,
        DaemonRequest::Daemon(args::DaemonAction::Status) => daemon::status().await,
        DaemonRequest::Daemon(args::DaemonAction::Stop) => daemon::stop().await,
    }
}

/// Runs a subcommand against a Restate cluster through [`daemon::restate`].
pub async fn run_restate_request(request: &RestateRequest) -> Result<ExitCode, CliError> {
    match request {
        RestateRequest::Run { args, url } => daemon::restate::run(args, url).await,
        RestateRequest::Runs { url } => daemon::restate::runs(url).await,
        RestateRequest::Attach { args, url } => daemon::restate::attach(args, url).await,
        RestateRequest::Cancel { run, url } => daemon::restate::cancel(run, url).await,
    }
}
