//! The command line's shape, as clap derive types, and its parsing into a [`Parsed`]
//! invocation with the agent's own error wording.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::approval::ApprovalMode;

/// The usage lines printed after an argument error (and, without the `usage: ` prefix, at
/// the top of `--help`).
pub const USAGE: &str = "usage: agent [--workspace DIR] [--mcp-config FILE] [--yes | --read-only] [--json] \
[--max-turns N] [--suspend FILE | --resume FILE] [--authority DIR] \
[--provider NAME] [--model NAME] [--system-prompt-file FILE] [-c] \"task\"
       agent tools [--workspace DIR] [--mcp-config FILE] [--json]
       agent run [--daemon | --restate URL] [OPTIONS] \"task\"
       agent serve [--fixture] [--provider NAME] [--model NAME] [--system-prompt-file FILE]
       agent runs | attach RUN [--from SEQ] | suspend RUN [--timeout SECS] | resume RUN | cancel RUN
       agent runs | attach | cancel ... --restate URL  (a Restate cluster's runs; default $AGENT_RESTATE_URL)
       agent export RUN [-o FILE] | import FILE | daemon status | daemon stop
       every form also takes --log-format text|json, -v (repeatable) and -q; `agent --help` explains them";

/// The turn limit when `--max-turns` is not given.
pub const DEFAULT_MAX_TURNS: u32 = 8;

const ABOUT: &str = "A small coding agent: it reads, searches and (with your approval) edits the files of one workspace.";

const LONG_ABOUT: &str = "A small coding agent: it reads, searches and (with your approval) edits the \
files of one workspace, streaming the model's answer, each tool call and a summary line.

`agent \"task\"` (or `agent run \"task\"`) runs one task in this process. Mutating tool calls are \
approved on the terminal (y, n, or a for always in this run) unless --yes approves all or --read-only refuses all; Ctrl-C cancels \
the run (exit code 130). --suspend FILE stops after the first completed turn and writes a signed \
snapshot; --resume FILE continues it, exactly once, through the per-user run authority.

The model comes from configuration, highest first: --provider/--model, the variables AGENT_PROVIDER \
and AGENT_MODEL (and each provider's own, such as OPENAI_API_KEY), then config.toml in the user's \
config directory ($AGENT_CONFIG_DIR, else $XDG_CONFIG_HOME/agent, else ~/.config/agent). With \
nothing configured the offline demo model runs; it only reads. See docs/coding-agent.md.

The task may come from stdin (`agent -`, or no task with stdin not a terminal) or from \
--file FILE, at most 1 MiB. Each tool call prints one line with its arguments and outcome \
(`  -> read_file README.md: 3.2 KB`), coloured on a terminal unless NO_COLOR is set; --json \
adds a `tool_call` record (arguments and a bounded result) after each call's events. The \
summary line on stderr says how the run ended, failures with their reason, once.

Logs go to stderr, filtered by RUST_LOG (default `warn`; -v, -vv, -vvv raise it to info, debug, \
trace and -q lowers it to error); they never contain prompts, answers, tool arguments or results, \
error text, paths or secrets. Run and call ids appear only as pseudonyms.";

const AFTER_HELP: &str = "Examples:
  agent                            (on a terminal: a conversation, one turn per line)
  agent \"What is this repository?\"
  agent -c \"And the tests?\"       (continues this workspace's last conversation)
  agent --workspace ../other --json \"List the sources\"
  agent --provider openai --model gpt-4o-mini --yes \"Add a CHANGELOG.md\"  (needs OPENAI_API_KEY)
  echo \"Summarize README.md\" | agent --read-only
  agent --file task.md --json | jq -c 'select(.type == \"tool_call\")'
  agent --suspend run.json \"Refactor the parser\" && agent --resume run.json
  agent tools --mcp-config mcp.json
  agent serve                      (the local daemon, in the foreground)
  agent run --daemon \"Summarize README.md\"  (attaches to it, or starts one)
  agent daemon status              (is one running, where, with how many runs)
  RUST_LOG=agent_logging=debug agent --log-format json \"Summarize README.md\"

Exit codes: 0 done, 1 failed, 2 usage, 3-9 run-authority refusals (see docs/coding-agent.md),
10 not supported by this build, 11 --suspend found no turn boundary (nothing written),
130 cancelled (Ctrl-C); `agent daemon status|stop`: 3 no daemon; `agent suspend`: 124 no turn
boundary within --timeout.";

/// The log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Options every form takes.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// The log line format on stderr.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// More log detail (info, then debug, then trace); overrides RUST_LOG.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors in the log; overrides RUST_LOG.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

/// Which model a run uses; each one given overrides the environment and the config file
/// (see [`crate::settings`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ModelArgs {
    /// The model provider: offline, openai or anthropic (overrides AGENT_PROVIDER and the
    /// config file).
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// The model the provider is asked for (overrides AGENT_MODEL, the provider's own
    /// variable and the config file).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Replaces the built-in system prompt with the text of FILE (the workspace, tools and
    /// approval rules are still appended).
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,
}

impl ModelArgs {
    /// Whether any of the options was given.
    pub fn any(&self) -> bool {
        self.provider.is_some() || self.model.is_some() || self.system_prompt_file.is_some()
    }
}

/// The one-shot form's options and task (also `agent run`'s).
#[derive(Debug, Clone, Default, Args)]
pub struct TaskArgs {
    /// The workspace root every tool is confined to (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Adds the tools of the MCP servers in FILE (`mcpServers` JSON).
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Approves every mutating tool call.
    #[arg(long)]
    pub yes: bool,
    /// Refuses every mutating tool call.
    #[arg(long)]
    pub read_only: bool,
    /// Prints the run's events as JSON lines instead of text.
    #[arg(long)]
    pub json: bool,
    /// The most model turns the run may take (1 to 1000).
    #[arg(long, value_name = "N", value_parser = parse_max_turns, default_value_t = DEFAULT_MAX_TURNS)]
    pub max_turns: u32,
    /// Stops after the first completed turn and writes a signed snapshot to FILE.
    #[arg(long, value_name = "FILE")]
    pub suspend: Option<PathBuf>,
    /// Verifies the snapshot in FILE and continues its run (exactly once).
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// The run authority's directory (default `$AGENT_AUTHORITY_DIR`, else under the user's
    /// state directory).
    #[arg(long, value_name = "DIR")]
    pub authority: Option<PathBuf>,
    /// Which model the run uses.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Continues this workspace's last conversation (its earlier turns are sent again).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["suspend", "resume"])]
    pub continue_last: bool,
    /// Reads the task from FILE (at most 1 MiB).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The task, in words (joined by spaces); `-` reads it from stdin (at most 1 MiB), as
    /// does no task when stdin is not a terminal.
    #[arg(value_name = "TASK")]
    pub task: Vec<String>,
}

impl TaskArgs {
    /// The approval mode the flags select.
    pub fn mode(&self) -> ApprovalMode {
        if self.yes {
            ApprovalMode::ApproveAll
        } else if self.read_only {
            ApprovalMode::ReadOnly
        } else {
            ApprovalMode::Ask
        }
    }

    /// The task's words joined by spaces, if any.
    pub fn task(&self) -> Option<String> {
        (!self.task.is_empty()).then(|| self.task.join(" "))
    }

    fn validate(&self) -> Result<(), String> {
        if self.yes && self.read_only {
            return Err("--yes and --read-only exclude each other".to_owned());
        }
        if self.suspend.is_some() && self.resume.is_some() {
            return Err("--suspend and --resume exclude each other".to_owned());
        }
        if self.file.is_some() && !self.task.is_empty() {
            return Err("give the task as words, `-` or --file FILE, not several".to_owned());
        }
        // Only words given here: `-`, --file and stdin are read (and checked) by
        // `super::task::resolve`.
        if self.file.is_none()
            && !self.task.is_empty()
            && self.task != ["-"]
            && self.task.iter().all(|w| w.trim().is_empty())
        {
            return Err("the task is empty".to_owned());
        }
        Ok(())
    }

    /// Refuses a one-word task that is a typo of a subcommand (`agent serv`).
    fn refuse_near_miss(&self) -> Result<(), String> {
        if let ([word], None) = (self.task.as_slice(), &self.file)
            && let Some(subcommand) = near_miss(word)
        {
            return Err(format!(
                "`{word}` is not a subcommand; did you mean `agent {subcommand}`? (to run it \
                 as a task, give more words or use --file)"
            ));
        }
        Ok(())
    }
}

/// The subcommand `word` is a typo of, if any: an optimal-string-alignment distance (a
/// swap of two letters counts once) of 1 in a word of three letters or more, or 2 in a word
/// of seven or more, so a short real task (`fix`, `sum`, `survey`) still runs.
///
/// ```
/// use coding_agent::cli::args::near_miss;
///
/// assert_eq!(near_miss("serv"), Some("serve".to_owned()));
/// assert_eq!(near_miss("rnus"), Some("runs".to_owned()));
/// assert_eq!(near_miss("tool"), Some("tools".to_owned()));
/// assert_eq!(near_miss("refactor"), None);
/// assert_eq!(near_miss("fix"), None);
/// assert_eq!(near_miss("survey"), None);
/// ```
pub fn near_miss(word: &str) -> Option<String> {
    let word = word.trim();
    if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let length = lower.chars().count();
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .map(|name| (strsim::osa_distance(&lower, &name), name))
        // One edit in a word of three letters or more, two only in words of seven or more:
        // short real words (`fix`, `sum`, `survey`) stay tasks.
        .filter(|(distance, _)| match distance {
            1 => length >= 3,
            2 => length >= 7,
            _ => false,
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

fn parse_max_turns(value: &str) -> Result<u32, String> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=agent_core::agent::MAX_TURNS).contains(n))
        .ok_or_else(|| "needs a number from 1 to 1000".to_owned())
}

/// `agent tools`' options.
#[derive(Debug, Clone, Default, Args)]
pub struct ToolsArgs {
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Adds the tools of the MCP servers in FILE.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// One JSON object per tool.
    #[arg(long)]
    pub json: bool,
}

/// The environment variable that names a Restate cluster's ingress when `--restate` is not
/// given (`agent run`, `runs`, `attach`, `cancel`).
pub const RESTATE_URL_ENV: &str = "AGENT_RESTATE_URL";

/// `--restate URL`: the subcommand talks to the Restate cluster whose ingress is URL instead
/// of the local daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct RestateArgs {
    /// Talks to the Restate cluster whose ingress is URL (`http://host:8080`; default
    /// $AGENT_RESTATE_URL) instead of the local daemon (docs/scale-out.md).
    #[arg(long = "restate", value_name = "URL")]
    pub url: Option<String>,
}

/// `agent run`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Runs the task in the local daemon (attaching to it, or starting one) instead of in
    /// this process.
    #[arg(long, conflicts_with = "url")]
    pub daemon: bool,
    /// With --daemon or --restate: the definition to start (default `coding-agent`; `agent
    /// serve --fixture` adds `00-fixture-text` and `01-fixture-pending`).
    #[arg(long, value_name = "ID")]
    pub definition: Option<String>,
    /// Runs the task on a Restate cluster's workers, followed like --daemon.
    #[command(flatten)]
    pub restate: RestateArgs,
    /// The one-shot form's options and task.
    #[command(flatten)]
    pub task: TaskArgs,
}

/// `agent serve`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// Also serves the two fixture definitions client tests use.
    #[arg(long)]
    pub fixture: bool,
    /// The run authority's directory (default `$AGENT_AUTHORITY_DIR`, else under the
    /// user's state directory). Daemons that move snapshots between them share it.
    #[arg(long, value_name = "DIR")]
    pub authority: Option<PathBuf>,
    /// Which model the daemon's runs use.
    #[command(flatten)]
    pub model: ModelArgs,
    /// The limits the daemon offers every client and reports in health.
    #[command(flatten)]
    pub limits: ServeLimitArgs,
}

/// `agent worker`'s options (docs/scale-out.md).
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The address the worker's endpoint listens on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9080")]
    pub listen: std::net::SocketAddr,
    /// The address the cluster reaches the workers at: this worker's, or a balancer in
    /// front of several (default `http://` + --listen).
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// The cluster's admin API, where the worker registers.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:9070")]
    pub admin: String,
    /// The cluster's ingress, through which the worker writes run records.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080")]
    pub ingress: String,
    /// Seconds a run waits (for an answer) before the cluster suspends it and it holds no
    /// worker.
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub suspend_after: u64,
    /// Most runs this worker executes at once; more wait for a turn (runs waiting for an
    /// answer do not count).
    #[arg(long, value_name = "N", default_value_t = agent_restate::worker::DEFAULT_MAX_EXECUTIONS, value_parser = parse_max_executions)]
    pub max_executions: usize,
    /// Which model the worker's runs use.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `--max-executions`: 1 to 65,536.
fn parse_max_executions(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err("expected a whole number from 1 to 65536".to_owned()),
    }
}

/// `agent serve`'s limits; each unset one keeps its default. Checked before the daemon
/// starts (exit code 2 for a value it cannot serve; docs/running-the-daemon.md lists the
/// ranges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
pub struct ServeLimitArgs {
    /// Largest message in bytes, either direction (default 16 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_message_bytes: Option<u64>,
    /// Most items in one collection: served definitions, pending interactions (default
    /// 1024).
    #[arg(long, value_name = "N")]
    pub max_collection_items: Option<u32>,
    /// Most events in one replay page (default 256; at most --max-replay-bytes).
    #[arg(long, value_name = "N")]
    pub max_replay_events: Option<u64>,
    /// Most accounted bytes in one replay page (default 1 MiB).
    #[arg(long, value_name = "BYTES")]
    pub max_replay_bytes: Option<u64>,
    /// Most open streams per client (default 16).
    #[arg(long, value_name = "N")]
    pub max_streams: Option<u64>,
    /// Most active runs (default 64).
    #[arg(long, value_name = "N")]
    pub max_active_runs: Option<u64>,
    /// Most client sessions held at once (default 4096).
    #[arg(long, value_name = "N")]
    pub max_sessions: Option<u64>,
}

/// A daemon run, named by its id.
#[derive(Debug, Clone, Default, Args)]
pub struct RunRef {
    /// The run's id (as `agent runs` lists it).
    #[arg(value_name = "RUN")]
    pub run: String,
}

/// `agent attach`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct AttachArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunRef,
    /// Replays the events after sequence SEQ, then follows (0: from the start).
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    pub from: u64,
    /// A run of a Restate cluster instead of the local daemon.
    #[command(flatten)]
    pub restate: RestateArgs,
}

/// `agent runs`' options.
#[derive(Debug, Clone, Default, Args)]
pub struct RunsArgs {
    /// A Restate cluster's runs instead of the local daemon's.
    #[command(flatten)]
    pub restate: RestateArgs,
}

/// `agent cancel`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct CancelArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunRef,
    /// A run of a Restate cluster instead of the local daemon.
    #[command(flatten)]
    pub restate: RestateArgs,
}

/// `agent export`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct ExportArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunRef,
    /// Writes the snapshot envelope to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `agent import`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct ImportArgs {
    /// The snapshot envelope to import.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `agent suspend`'s options.
#[derive(Debug, Clone, Default, Args)]
pub struct SuspendArgs {
    /// The run.
    #[command(flatten)]
    pub run: RunRef,
    /// Gives up after SECS seconds if the run reaches no turn boundary (a run waiting on its
    /// model or a tool reaches one only when that answers); the request is withdrawn and
    /// the exit code is 124.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_SUSPEND_TIMEOUT_SECS, value_parser = parse_timeout)]
    pub timeout: u64,
}

/// How long `agent suspend` waits for a turn boundary when `--timeout` is not given.
pub const DEFAULT_SUSPEND_TIMEOUT_SECS: u64 = 30;

fn parse_timeout(value: &str) -> Result<u64, String> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=86_400).contains(n))
        .ok_or_else(|| "needs a number of seconds from 1 to 86400".to_owned())
}

/// `agent daemon`'s actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum DaemonAction {
    /// Says whether a daemon runs in this scope: its pid, scope, workspace, protocol and
    /// active runs (exit code 0), or that none does (exit code 3).
    #[command(after_help = "Example:\n  agent daemon status")]
    Status,
    /// Stops the daemon of this scope (SIGTERM to its pid; its runs stop, suspended ones
    /// stay importable) and waits until it has exited (exit code 0; 3 when none runs).
    #[command(after_help = "Example:\n  agent daemon stop")]
    Stop,
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Lists every tool with its origin, effect, replay safety and capabilities.
    #[command(after_help = "Example:\n  agent tools --json")]
    Tools(ToolsArgs),
    /// Runs one task: in this process, or in the local daemon with --daemon.
    #[command(
        after_help = "Examples:\n  agent run --daemon --read-only \"Summarize README.md\"\n  agent run --restate http://127.0.0.1:8080 --read-only \"Summarize README.md\"  (on a Restate cluster's workers)"
    )]
    Run(RunArgs),
    /// Runs the local daemon in the foreground (logs to stderr).
    #[command(
        after_help = "Example (stop it with Ctrl-C or `agent daemon stop`):\n  agent serve --max-active-runs 8"
    )]
    Serve(ServeArgs),
    /// Serves the coding agent's runs as a worker of a Restate cluster (docs/scale-out.md).
    #[command(
        after_help = "Example (a local engine's default ports; start as many workers as you like behind one address):\n  agent worker --listen 127.0.0.1:9080 --admin http://127.0.0.1:9070 --ingress http://127.0.0.1:8080"
    )]
    Worker(WorkerArgs),
    /// Lists the daemon's runs (or a Restate cluster's, with --restate).
    #[command(
        after_help = "Examples (each line: run, state, definition):\n  agent runs\n  agent runs --restate http://127.0.0.1:8080"
    )]
    Runs(RunsArgs),
    /// Replays a daemon run's events from a sequence and follows it.
    #[command(
        after_help = "Examples (the latest run of `agent runs`, from its start; the latest on a Restate cluster):\n  agent attach \"$(agent runs | tail -n 1 | cut -f 1)\"\n  agent attach --restate http://127.0.0.1:8080 \"$(agent runs --restate http://127.0.0.1:8080 | tail -n 1 | cut -f 1)\""
    )]
    Attach(AttachArgs),
    /// Suspends a daemon run at its next turn boundary.
    #[command(
        after_help = "Example (the latest run of `agent runs`):\n  agent suspend --timeout 60 \"$(agent runs | tail -n 1 | cut -f 1)\"\n\nExit codes: 0 suspended, 1 failed, 124 no turn boundary within --timeout (the request is withdrawn)."
    )]
    Suspend(SuspendArgs),
    /// Resumes a suspended daemon run.
    #[command(
        after_help = "Example (the latest run of `agent runs`):\n  agent resume \"$(agent runs | tail -n 1 | cut -f 1)\""
    )]
    Resume(RunRef),
    /// Exports a daemon run's signed snapshot.
    #[command(
        after_help = "Example (the latest run of `agent runs`):\n  agent export \"$(agent runs | tail -n 1 | cut -f 1)\" -o run.json"
    )]
    Export(ExportArgs),
    /// Imports a signed snapshot into the daemon.
    #[command(
        after_help = "Example (a file `agent export -o` or `agent --suspend` wrote):\n  agent import run.json"
    )]
    Import(ImportArgs),
    /// Cancels a daemon run and waits for its end.
    #[command(
        after_help = "Examples (the latest run of `agent runs`; the latest on a Restate cluster):\n  agent cancel \"$(agent runs | tail -n 1 | cut -f 1)\"\n  agent cancel --restate http://127.0.0.1:8080 \"$(agent runs --restate http://127.0.0.1:8080 | tail -n 1 | cut -f 1)\"\n\nPrints `cancelled: run RUN`, or `run RUN already ended (STATE)`; exit code 0 either way."
    )]
    Cancel(CancelArgs),
    /// The local daemon itself: `status` or `stop`.
    #[command(
        subcommand,
        after_help = "Examples:\n  agent daemon status\n  agent daemon stop"
    )]
    Daemon(DaemonAction),
}

/// The whole command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "agent",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    override_usage = USAGE.strip_prefix("usage: ").unwrap_or(USAGE),
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Options every form takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The one-shot form (no subcommand).
    #[command(flatten)]
    pub task: TaskArgs,
    /// The subcommand, if any.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// A subcommand the local daemon answers, with its arguments.
#[derive(Debug, Clone)]
pub enum DaemonRequest {
    /// `agent serve`.
    Serve(ServeArgs),
    /// `agent run --daemon`.
    Run(RunArgs),
    /// `agent runs`.
    Runs,
    /// `agent attach`.
    Attach(AttachArgs),
    /// `agent suspend`.
    Suspend(SuspendArgs),
    /// `agent resume`.
    Resume(RunRef),
    /// `agent export`.
    Export(ExportArgs),
    /// `agent import`.
    Import(ImportArgs),
    /// `agent cancel`.
    Cancel(RunRef),
    /// `agent daemon status|stop`.
    Daemon(DaemonAction),
}

/// A subcommand a Restate cluster answers (`--restate URL` or `AGENT_RESTATE_URL`), with
/// its arguments and the cluster's ingress.
#[derive(Debug, Clone)]
pub enum RestateRequest {
    /// `agent run --restate URL`.
    Run {
        /// The run's options and task (boxed: the other requests are small).
        args: Box<RunArgs>,
        /// The ingress.
        url: String,
    },
    /// `agent runs --restate URL`.
    Runs {
        /// The ingress.
        url: String,
    },
    /// `agent attach --restate URL`.
    Attach {
        /// The run and where to replay from.
        args: AttachArgs,
        /// The ingress.
        url: String,
    },
    /// `agent cancel --restate URL`.
    Cancel {
        /// The run.
        run: RunRef,
        /// The ingress.
        url: String,
    },
}

/// What to do, after parsing and validation.
#[derive(Debug, Clone)]
pub enum Invocation {
    /// Run a task in this process (`agent "task"`, `agent run "task"`).
    Task(TaskArgs),
    /// `agent tools`.
    Tools(ToolsArgs),
    /// A subcommand the local daemon answers (`serve`, `run --daemon`, `runs`, ...).
    Daemon(DaemonRequest),
    /// A subcommand a Restate cluster answers (`run`, `runs`, `attach`, `cancel` with
    /// `--restate URL` or `AGENT_RESTATE_URL`).
    Restate(RestateRequest),
    /// `agent worker`: a worker of a Restate cluster.
    Worker(WorkerArgs),
}

/// A parsed command line.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// Options every form takes.
    pub global: GlobalArgs,
    /// What to do.
    pub invocation: Invocation,
}

/// Why the command line was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseOutcome {
    /// `--help` or `--version`: print `text` to stdout and exit 0.
    Info(String),
    /// An argument error, worded for `agent: {0}`; exit 2 after the usage lines.
    Usage(String),
}

/// Parses `args` (without the program name).
///
/// ```
/// use coding_agent::cli::args::{Invocation, ParseOutcome, parse};
///
/// let parsed = parse(["--yes", "fix", "the", "bug"]).unwrap();
/// let Invocation::Task(task) = parsed.invocation else { panic!("a task") };
/// assert_eq!(task.task().as_deref(), Some("fix the bug"));
/// assert_eq!(parse(["--frobnicate"]).unwrap_err(),
///            ParseOutcome::Usage("unknown option --frobnicate".into()));
/// ```
pub fn parse<I, T>(args: I) -> Result<Parsed, ParseOutcome>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    parse_with_env(args, |name| std::env::var(name).ok())
}

/// [`parse`] with the environment variables it reads (only [`RESTATE_URL_ENV`]) taken from
/// `env`, so that tests do not share the process's environment.
///
/// ```
/// use coding_agent::cli::args::{Invocation, RestateRequest, parse_with_env};
///
/// let cluster = |_: &str| Some("http://127.0.0.1:8080".to_owned());
/// let parsed = parse_with_env(["runs"], cluster).unwrap();
/// assert!(matches!(parsed.invocation,
///     Invocation::Restate(RestateRequest::Runs { url }) if url == "http://127.0.0.1:8080"));
/// ```
pub fn parse_with_env<I, T>(
    args: I,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Parsed, ParseOutcome>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // The flag wins; the variable is its default (an empty one is unset).
    let restate_url = |given: &RestateArgs| -> Result<Option<String>, ParseOutcome> {
        let url = given
            .url
            .clone()
            .or_else(|| env(RESTATE_URL_ENV).filter(|v| !v.trim().is_empty()));
        match url {
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                Err(ParseOutcome::Usage(format!(
                    "--restate needs an http:// or https:// URL, not `{url}`"
                )))
            }
            url => Ok(url),
        }
    };
    let argv = std::iter::once(OsString::from("agent")).chain(args.into_iter().map(Into::into));
    let matches = Cli::command().try_get_matches_from(argv).map_err(outcome)?;
    let cli = Cli::from_arg_matches(&matches).map_err(outcome)?;
    let invocation = match cli.command {
        None => {
            cli.task.validate().map_err(ParseOutcome::Usage)?;
            cli.task.refuse_near_miss().map_err(ParseOutcome::Usage)?;
            Invocation::Task(cli.task)
        }
        Some(Command::Run(run)) if !run.daemon => {
            run.task.validate().map_err(ParseOutcome::Usage)?;
            match restate_url(&run.restate)? {
                Some(url) => {
                    refuse_local_options(&run.task, "--restate", "the workers")?;
                    Invocation::Restate(RestateRequest::Run {
                        args: Box::new(run),
                        url,
                    })
                }
                None if run.definition.is_some() => {
                    return Err(ParseOutcome::Usage(
                        "--definition needs --daemon or --restate URL".to_owned(),
                    ));
                }
                None => Invocation::Task(run.task),
            }
        }
        Some(Command::Run(run)) => {
            run.task.validate().map_err(ParseOutcome::Usage)?;
            if run.task.model.any() {
                // The daemon's model was chosen when it started; a client cannot change it.
                return Err(ParseOutcome::Usage(
                    "--provider, --model and --system-prompt-file choose the daemon's model: \
                     give them to `agent serve`"
                        .to_owned(),
                ));
            }
            Invocation::Daemon(DaemonRequest::Run(run))
        }
        Some(Command::Tools(tools)) => Invocation::Tools(tools),
        Some(Command::Worker(args)) => Invocation::Worker(args),
        Some(Command::Serve(args)) => Invocation::Daemon(DaemonRequest::Serve(args)),
        Some(Command::Runs(args)) => match restate_url(&args.restate)? {
            Some(url) => Invocation::Restate(RestateRequest::Runs { url }),
            None => Invocation::Daemon(DaemonRequest::Runs),
        },
        Some(Command::Attach(args)) => match restate_url(&args.restate)? {
            Some(url) => Invocation::Restate(RestateRequest::Attach { args, url }),
            None => Invocation::Daemon(DaemonRequest::Attach(args)),
        },
        Some(Command::Suspend(args)) => Invocation::Daemon(DaemonRequest::Suspend(args)),
        Some(Command::Resume(args)) => Invocation::Daemon(DaemonRequest::Resume(args)),
        Some(Command::Export(args)) => Invocation::Daemon(DaemonRequest::Export(args)),
        Some(Command::Import(args)) => Invocation::Daemon(DaemonRequest::Import(args)),
        Some(Command::Cancel(args)) => match restate_url(&args.restate)? {
            Some(url) => Invocation::Restate(RestateRequest::Cancel { run: args.run, url }),
            None => Invocation::Daemon(DaemonRequest::Cancel(args.run)),
        },
        Some(Command::Daemon(action)) => Invocation::Daemon(DaemonRequest::Daemon(action)),
    };
    Ok(Parsed {
        global: cli.global,
        invocation,
    })
}

/// Refuses the one-shot form's options that a remote run (`--daemon`, `--restate`) does not
/// take: what it runs with is decided where it runs (`place`).
fn refuse_local_options(task: &TaskArgs, flag: &str, place: &str) -> Result<(), ParseOutcome> {
    for (given, option) in [
        (task.workspace.is_some(), "--workspace"),
        (task.mcp_config.is_some(), "--mcp-config"),
        (task.suspend.is_some(), "--suspend"),
        (task.resume.is_some(), "--resume"),
        (task.authority.is_some(), "--authority"),
        (task.continue_last, "--continue"),
        (task.max_turns != DEFAULT_MAX_TURNS, "--max-turns"),
        (task.model.provider.is_some(), "--provider"),
        (task.model.model.is_some(), "--model"),
        (
            task.model.system_prompt_file.is_some(),
            "--system-prompt-file",
        ),
    ] {
        if given {
            return Err(ParseOutcome::Usage(format!(
                "{option} does not apply to {flag}: {place} decide it"
            )));
        }
    }
    Ok(())
}

/// A clap error in the agent's own words (`unknown option --x`, `--x needs a value`, ...).
fn outcome(error: clap::Error) -> ParseOutcome {
    let arg = || match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg.split_whitespace().next().unwrap_or("").to_owned(),
        _ => String::new(),
    };
    let message = match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            return ParseOutcome::Info(error.render().to_string());
        }
        ErrorKind::UnknownArgument => {
            let arg = arg();
            if arg.starts_with('-') {
                format!("unknown option {arg}")
            } else {
                format!("unexpected argument {arg}")
            }
        }
        ErrorKind::InvalidValue if matches!(error.get(ContextKind::InvalidValue), Some(ContextValue::String(v)) if v.is_empty()) =>
        {
            format!("{} needs a value", arg())
        }
        ErrorKind::ValueValidation => match std::error::Error::source(&error) {
            Some(reason) => format!("{} {reason}", arg()),
            None => first_line(&error),
        },
        ErrorKind::MissingRequiredArgument => match error.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(args)) => {
                let names: Vec<&str> = args
                    .iter()
                    .map(|a| a.trim_matches(|c| c == '<' || c == '>'))
                    .collect();
                format!("{} is required", names.join(", "))
            }
            _ => first_line(&error),
        },
        ErrorKind::InvalidSubcommand => format!("unknown subcommand {}", arg()),
        // `agent daemon` without its action.
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            match error.get(ContextKind::ValidSubcommand) {
                Some(ContextValue::Strings(names)) => {
                    format!("a subcommand is required: {}", names.join(" or "))
                }
                _ => "a subcommand is required: status or stop".to_owned(),
            }
        }
        _ => first_line(&error),
    };
    ParseOutcome::Usage(message)
}

/// clap's own message, without its `error: ` prefix and the usage it appends.
fn first_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let line = rendered.lines().next().unwrap_or("invalid arguments");
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`super::parse`] without the process's environment: the tests run in parallel, and
    /// a developer's `AGENT_RESTATE_URL` must not change what they see.
    fn parse<I, T>(args: I) -> Result<Parsed, ParseOutcome>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        parse_with_env(args, |_| None)
    }

    fn usage(args: &[&str]) -> String {
        match parse(args.iter().copied()) {
            Err(ParseOutcome::Usage(message)) => message,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn a_worker_takes_its_cluster_and_its_bounds() {
        let Ok(Parsed {
            invocation: Invocation::Worker(worker),
            ..
        }) = parse([
            "worker",
            "--admin",
            "http://a:9070",
            "--max-executions",
            "8",
        ])
        else {
            panic!("a worker");
        };
        assert_eq!(
            (
                worker.admin.as_str(),
                worker.max_executions,
                worker.suspend_after
            ),
            ("http://a:9070", 8, 60)
        );
        assert_eq!(worker.listen.to_string(), "127.0.0.1:9080");
        let Ok(Parsed {
            invocation: Invocation::Worker(defaults),
            ..
        }) = parse(["worker"])
        else {
            panic!("a worker");
        };
        assert_eq!(
            defaults.max_executions,
            agent_restate::worker::DEFAULT_MAX_EXECUTIONS
        );
        for refused in [
            &["worker", "--max-executions", "0"][..],
            &["worker", "--suspend-after", "0"][..],
            &["worker", "--listen", "nowhere"][..],
        ] {
            assert!(parse(refused.iter().copied()).is_err(), "{refused:?}");
        }
    }

    #[test]
    fn the_clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn errors_keep_the_agents_wording() {
        assert_eq!(usage(&["--frobnicate", "t"]), "unknown option --frobnicate");
        assert_eq!(usage(&["t", "--workspace"]), "--workspace needs a value");
        assert_eq!(
            usage(&["--max-turns", "0", "t"]),
            "--max-turns needs a number from 1 to 1000"
        );
        assert_eq!(
            usage(&["--read-only", "--yes", "t"]),
            "--yes and --read-only exclude each other"
        );
        // No task parses: it may come from stdin (`super::task::resolve` decides).
        assert!(parse(Vec::<&str>::new()).is_ok());
        assert!(parse(["run"]).is_ok());
        assert_eq!(usage(&[""]), "the task is empty");
        assert_eq!(usage(&["  ", "\t"]), "the task is empty");
        assert_eq!(
            usage(&["--file", "t.txt", "more"]),
            "give the task as words, `-` or --file FILE, not several"
        );
        for (typo, subcommand) in [("serv", "serve"), ("tool", "tools"), ("rnus", "runs")] {
            assert!(
                usage(&[typo]).contains(&format!("did you mean `agent {subcommand}`?")),
                "{typo}: {}",
                usage(&[typo])
            );
        }
        // A real one-word task, and several words, still run.
        for task in [
            &["refactor"][..],
            &["fix"][..],
            &["survey"][..],
            &["serv", "static", "files"][..],
        ] {
            assert!(parse(task.iter().copied()).is_ok(), "{task:?}");
        }
        assert!(usage(&["attach"]).contains("RUN"), "{}", usage(&["attach"]));
        assert_eq!(usage(&["tools", "--yes"]), "unknown option --yes");
        assert_eq!(
            usage(&["daemon"]),
            "a subcommand is required: status or stop"
        );
    }

    #[test]
    fn the_one_shot_form_and_run_agree() {
        for args in [&["--json", "a", "b"][..], &["run", "--json", "a", "b"][..]] {
            let parsed = parse(args.iter().copied()).unwrap();
            let Invocation::Task(task) = parsed.invocation else {
                panic!("{args:?}")
            };
            assert_eq!(task.task().as_deref(), Some("a b"));
            assert!(task.json);
            assert_eq!(task.max_turns, DEFAULT_MAX_TURNS);
        }
        let parsed = parse(["--log-format", "json", "-vv", "task"]).unwrap();
        assert_eq!(parsed.global.log_format, LogFormat::Json);
        assert_eq!(parsed.global.verbose, 2);
        let parsed = parse(["runs", "-q"]).unwrap();
        assert!(parsed.global.quiet);
    }

    #[test]
    fn daemon_subcommands_parse_their_arguments() {
        let daemon = |args: &[&str]| match parse(args.iter().copied()).unwrap().invocation {
            Invocation::Daemon(command) => command,
            other => panic!("{args:?}: {other:?}"),
        };
        assert!(matches!(
            daemon(&["serve", "--fixture"]),
            DaemonRequest::Serve(ServeArgs {
                fixture: true,
                authority: None,
                ..
            })
        ));
        assert!(matches!(
            daemon(&["serve", "--authority", "/tmp/a"]),
            DaemonRequest::Serve(ServeArgs { fixture: false, authority: Some(dir), .. })
                if dir == std::path::Path::new("/tmp/a")
        ));
        assert!(matches!(
            daemon(&["run", "--daemon", "--definition", "00-fixture-text", "t"]),
            DaemonRequest::Run(RunArgs { definition: Some(d), .. }) if d == "00-fixture-text"
        ));
        assert!(matches!(
            daemon(&["run", "--daemon", "task"]),
            DaemonRequest::Run(RunArgs { daemon: true, .. })
        ));
        assert!(matches!(daemon(&["runs"]), DaemonRequest::Runs));
        let DaemonRequest::Attach(attach) = daemon(&["attach", "r1", "--from", "7"]) else {
            panic!("attach")
        };
        assert_eq!((attach.run.run.as_str(), attach.from), ("r1", 7));
        assert!(
            matches!(daemon(&["suspend", "r1"]), DaemonRequest::Suspend(SuspendArgs { run: RunRef { run }, timeout }) if run == "r1" && timeout == DEFAULT_SUSPEND_TIMEOUT_SECS)
        );
        assert!(matches!(
            daemon(&["suspend", "--timeout", "5", "r1"]),
            DaemonRequest::Suspend(SuspendArgs { timeout: 5, .. })
        ));
        assert!(usage(&["suspend", "--timeout", "0", "r1"]).contains("--timeout"));
        assert!(
            matches!(daemon(&["cancel", "r1"]), DaemonRequest::Cancel(RunRef { run }) if run == "r1")
        );
        assert!(matches!(
            daemon(&["daemon", "status"]),
            DaemonRequest::Daemon(DaemonAction::Status)
        ));
        assert!(matches!(
            daemon(&["daemon", "stop"]),
            DaemonRequest::Daemon(DaemonAction::Stop)
        ));
        assert!(
            matches!(daemon(&["resume", "r1"]), DaemonRequest::Resume(RunRef { run }) if run == "r1")
        );
        let DaemonRequest::Export(export) = daemon(&["export", "r1", "-o", "out.json"]) else {
            panic!("export")
        };
        assert_eq!(export.output, Some(PathBuf::from("out.json")));
        assert!(
            matches!(daemon(&["import", "in.json"]), DaemonRequest::Import(ImportArgs { file }) if file == std::path::Path::new("in.json"))
        );
        assert!(usage(&["attach", "r1", "--from", "x"]).contains("--from"));
    }

    #[test]
    fn restate_flags_and_their_variable_route_run_runs_attach_and_cancel_to_a_cluster() {
        const URL: &str = "http://127.0.0.1:8080";
        let restate = |args: &[&str], env: Option<&str>| {
            let env = env.map(str::to_owned);
            match parse_with_env(args.iter().copied(), |name| {
                (name == RESTATE_URL_ENV).then(|| env.clone()).flatten()
            }) {
                Ok(Parsed {
                    invocation: Invocation::Restate(request),
                    ..
                }) => request,
                other => panic!("{args:?} {env:?}: {other:?}"),
            }
        };
        let RestateRequest::Run { args, url } = restate(&["run", "--restate", URL, "a", "b"], None)
        else {
            panic!("run")
        };
        assert_eq!(
            (url.as_str(), args.task.task().as_deref()),
            (URL, Some("a b"))
        );
        assert_eq!(args.definition, None);
        let RestateRequest::Run { args, .. } = restate(
            &[
                "run",
                "--restate",
                URL,
                "--definition",
                "fixture",
                "--yes",
                "--json",
                "t",
            ],
            None,
        ) else {
            panic!("run")
        };
        assert_eq!(args.definition.as_deref(), Some("fixture"));
        assert!(args.task.yes && args.task.json);
        // The variable is the flag's default; the flag wins over it.
        assert!(matches!(
            restate(&["run", "t"], Some(URL)),
            RestateRequest::Run { url, .. } if url == URL
        ));
        assert!(matches!(
            restate(&["run", "--restate", "https://cluster:8080", "t"], Some(URL)),
            RestateRequest::Run { url, .. } if url == "https://cluster:8080"
        ));
        assert!(matches!(
            restate(&["runs", "--restate", URL], None),
            RestateRequest::Runs { url } if url == URL
        ));
        assert!(matches!(
            restate(&["runs"], Some(URL)),
            RestateRequest::Runs { .. }
        ));
        let RestateRequest::Attach { args, url } =
            restate(&["attach", "--restate", URL, "run-1", "--from", "4"], None)
        else {
            panic!("attach")
        };
        assert_eq!(
            (args.run.run.as_str(), args.from, url.as_str()),
            ("run-1", 4, URL)
        );
        assert!(matches!(
            restate(&["cancel", "run-1"], Some(URL)),
            RestateRequest::Cancel { run: RunRef { run }, url } if run == "run-1" && url == URL
        ));

        // Without either, the local daemon or this process, as before; an empty variable
        // is unset; --daemon wins over the variable.
        let local = |args: &[&str], env: Option<&str>| {
            let env = env.map(str::to_owned);
            parse_with_env(args.iter().copied(), |_| env.clone())
                .unwrap()
                .invocation
        };
        assert!(matches!(local(&["run", "t"], None), Invocation::Task(_)));
        assert!(matches!(
            local(&["run", "t"], Some(" ")),
            Invocation::Task(_)
        ));
        assert!(matches!(
            local(&["run", "--daemon", "t"], Some(URL)),
            Invocation::Daemon(DaemonRequest::Run(_))
        ));
        assert!(matches!(
            local(&["runs"], None),
            Invocation::Daemon(DaemonRequest::Runs)
        ));
        // The one-shot form does not read the variable.
        assert!(matches!(local(&["t"], Some(URL)), Invocation::Task(_)));

        assert!(usage(&["run", "--daemon", "--restate", URL, "t"]).contains("--daemon"));
        assert_eq!(
            usage(&["run", "--restate", "127.0.0.1:8080", "t"]),
            "--restate needs an http:// or https:// URL, not `127.0.0.1:8080`"
        );
        assert_eq!(
            usage(&["run", "--definition", "x", "t"]),
            "--definition needs --daemon or --restate URL"
        );
        for option in [
            &["--workspace", "."][..],
            &["--max-turns", "3"][..],
            &["--model", "m"][..],
            &["--suspend", "s.json"][..],
            &["-c"][..],
        ] {
            let mut args = vec!["run", "--restate", URL];
            args.extend_from_slice(option);
            args.push("t");
            assert!(
                usage(&args).contains("does not apply to --restate"),
                "{option:?}: {}",
                usage(&args)
            );
        }
        assert_eq!(usage(&["runs", "--restate"]), "--restate needs a value");
        assert_eq!(
            usage(&["suspend", "--restate", URL, "r"]),
            "unknown option --restate"
        );
    }

    #[test]
    fn model_options_parse_on_the_one_shot_form_run_and_serve_only() {
        for args in [
            &["--provider", "openai", "--model", "m", "t"][..],
            &["run", "--provider", "openai", "--model", "m", "t"][..],
        ] {
            let Invocation::Task(task) = parse(args.iter().copied()).unwrap().invocation else {
                panic!("{args:?}")
            };
            assert_eq!(task.model.provider.as_deref(), Some("openai"));
            assert_eq!(task.model.model.as_deref(), Some("m"));
        }
        let parsed = parse(["serve", "--system-prompt-file", "p.txt"]).unwrap();
        let Invocation::Daemon(DaemonRequest::Serve(serve)) = parsed.invocation else {
            panic!("serve")
        };
        assert_eq!(serve.model.system_prompt_file, Some(PathBuf::from("p.txt")));
        assert!(usage(&["run", "--daemon", "--provider", "openai", "t"]).contains("`agent serve`"));
        assert_eq!(usage(&["tools", "--model", "m"]), "unknown option --model");
    }

    #[test]
    fn help_and_version_are_information() {
        for args in [
            &["--help"][..],
            &["-h"][..],
            &["--version"][..],
            &["attach", "--help"][..],
        ] {
            assert!(
                matches!(parse(args.iter().copied()), Err(ParseOutcome::Info(_))),
                "{args:?}"
            );
        }
        // Each daemon subcommand's help shows one example that works as written.
        for (args, example) in [
            (&["cancel", "--help"][..], "agent cancel \"$(agent runs"),
            (
                &["suspend", "--help"][..],
                "agent suspend --timeout 60 \"$(agent runs",
            ),
            (&["daemon", "--help"][..], "agent daemon status"),
            (&["daemon", "status", "--help"][..], "agent daemon status"),
            (&["daemon", "stop", "--help"][..], "agent daemon stop"),
        ] {
            let Err(ParseOutcome::Info(help)) = parse(args.iter().copied()) else {
                panic!("{args:?}")
            };
            assert!(help.contains(example), "{args:?}:\n{help}");
        }
        // Every subcommand's help has an example, and every example parses as written (a
        // run named by `$(agent runs …)` stands for a run id; a note in parentheses after
        // two spaces is not part of it).
        for subcommand in [
            "tools", "run", "serve", "worker", "runs", "attach", "suspend", "resume", "export",
            "import", "cancel", "daemon",
        ] {
            let Err(ParseOutcome::Info(help)) = parse([subcommand, "--help"]) else {
                panic!("{subcommand} --help")
            };
            let examples: Vec<&str> = help
                .lines()
                .filter_map(|line| line.strip_prefix("  agent "))
                .collect();
            assert!(!examples.is_empty(), "{subcommand}: no example in\n{help}");
            for example in examples {
                let example = example.split("  (").next().unwrap_or(example);
                let mut words = Vec::new();
                let mut rest = example.trim();
                while !rest.is_empty() {
                    let (word, tail) = match rest.strip_prefix('"') {
                        Some(quoted) => quoted.split_once('"').unwrap_or((quoted, "")),
                        None => rest.split_once(' ').unwrap_or((rest, "")),
                    };
                    words.push(if word.starts_with("$(agent runs") {
                        "run-1".to_owned()
                    } else {
                        word.to_owned()
                    });
                    rest = tail.trim_start();
                }
                assert!(
                    parse(words.iter().map(String::as_str)).is_ok(),
                    "{subcommand}: `agent {example}` does not parse"
                );
            }
        }
        let Err(ParseOutcome::Info(help)) = parse(["--help"]) else {
            panic!("help")
        };
        for expected in [
            "Usage: agent [--workspace DIR]",
            "serve",
            "attach",
            "--log-format",
            "Examples:",
            "RUST_LOG",
        ] {
            assert!(help.contains(expected), "{expected}:\n{help}");
        }
    }
}
