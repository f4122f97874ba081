//! The CLI's log subscriber: stderr, `--log-format`, `RUST_LOG` and `-v`/`-q`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use super::args::{GlobalArgs, LogFormat};
use super::error::CliError;

/// The filter when neither `RUST_LOG` nor `-v`/`-q` says otherwise.
pub const DEFAULT_FILTER: &str = "warn";

/// The filter directive the options select: `-q` is `error`, `-v` `info`, `-vv` `debug`,
/// `-vvv` (or more) `trace`; otherwise `rust_log` when set and not blank, else `warn`.
///
/// ```
/// use coding_agent::cli::args::GlobalArgs;
/// use coding_agent::cli::logs::filter_directive;
///
/// let quiet = GlobalArgs { quiet: true, ..GlobalArgs::default() };
/// assert_eq!(filter_directive(&quiet, Some("debug")), "error");
/// assert_eq!(filter_directive(&GlobalArgs::default(), Some("agent_logging=debug")), "agent_logging=debug");
/// assert_eq!(filter_directive(&GlobalArgs::default(), None), "warn");
/// ```
pub fn filter_directive(global: &GlobalArgs, rust_log: Option<&str>) -> String {
    match (global.quiet, global.verbose) {
        (true, _) => "error".to_owned(),
        (false, 1) => "info".to_owned(),
        (false, 2) => "debug".to_owned(),
        (false, 3..) => "trace".to_owned(),
        (false, 0) => match rust_log.map(str::trim) {
            Some(directive) if !directive.is_empty() => directive.to_owned(),
            _ => DEFAULT_FILTER.to_owned(),
        },
    }
}

/// Installs the process's subscriber: lines on stderr in the chosen format, colored only
/// on a terminal, filtered by [`filter_directive`] over `RUST_LOG`.
pub fn install(global: &GlobalArgs) -> Result<(), CliError> {
    let rust_log = std::env::var(EnvFilter::DEFAULT_ENV).ok();
    let directive = filter_directive(global, rust_log.as_deref());
    let filter = EnvFilter::try_new(&directive)
        .map_err(|e| CliError::Logs(format!("invalid filter `{directive}`: {e}")))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(SpinnerAwareStderr);
    let installed = match global.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
    installed.map_err(|e| CliError::Logs(e.to_string()))
}

/// Stderr for log lines: each formatted line is written in one piece with the spinner
/// cleared around it ([`progress::write_stderr`](super::progress::write_stderr)).
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinnerAwareStderr;

impl std::io::Write for SpinnerAwareStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        super::progress::write_stderr(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for SpinnerAwareStderr {
    type Writer = SpinnerAwareStderr;

    fn make_writer(&'a self) -> Self::Writer {
        SpinnerAwareStderr
    }
}
