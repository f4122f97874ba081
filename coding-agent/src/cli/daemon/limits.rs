//! `agent serve`'s limits: the flags checked against what the daemon can serve.
//!
//! Every value is an inclusive range whose bounds are named here; a value outside its
//! range, or a pair that contradicts itself, is a usage error (exit code 2) before
//! anything starts.

use agent_daemon::host::HostLimits;

use crate::cli::args::ServeLimitArgs;
use crate::cli::error::CliError;

use super::DAEMON_SESSIONS;

/// Message bytes: at least the initialization bootstrap (every call must fit the
/// first frame a client sends), at most 64 MiB — the CLI's own client requests exactly
/// this maximum, so any accepted size negotiates with it (from protocol 1.2 a client must
/// request at least the server's size).
pub const MESSAGE_BYTES_RANGE: (u64, u64) = (
    agent_protocol::limits::INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES as u64,
    64 << 20,
);
/// Collection items: the largest collection holds the served definitions or the pending
/// interactions, each bounded by 4096 in the daemon; the CLI's client requests the maximum.
pub const COLLECTION_ITEMS_RANGE: (u32, u32) = (1, 4096);
/// Events in one replay page: the host builds a whole page in memory before sending it.
pub const REPLAY_EVENTS_RANGE: (u64, u64) = (1, 1 << 16);
/// Accounted bytes in one replay page (at least the page's events; bounded like them).
pub const REPLAY_BYTES_RANGE: (u64, u64) = (1, 1 << 30);
/// Open streams per client: the session table's lease bound.
pub const STREAMS_RANGE: (u64, u64) = (1, agent_daemon::session::MAX_STREAM_LEASES as u64);
/// Active runs: the pending router of `agent serve` binds at most 4096 runs (its default
/// budget), and every active run is bound.
pub const ACTIVE_RUNS_RANGE: (u64, u64) = (1, 4096);
/// Sessions held at once: the server's bound.
pub const SESSIONS_RANGE: (u64, u64) = (
    agent_server::server::MAXIMUM_SESSIONS_RANGE.0 as u64,
    agent_server::server::MAXIMUM_SESSIONS_RANGE.1 as u64,
);

/// The checked limits `agent serve` runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeLimits {
    /// Largest message in bytes.
    pub message_bytes: u64,
    /// Most items in one collection.
    pub collection_items: u32,
    /// The run host's budgets (streams, active runs, replay pages).
    pub host: HostLimits,
    /// Sessions held at once.
    pub sessions: usize,
}

fn within<T: PartialOrd + std::fmt::Display + Copy>(
    flag: &str,
    value: Option<T>,
    default: T,
    (low, high): (T, T),
) -> Result<T, CliError> {
    let value = value.unwrap_or(default);
    if value < low || value > high {
        return Err(CliError::Usage(format!(
            "{flag} {value} is outside {low}..={high}"
        )));
    }
    Ok(value)
}

/// A checked value of a range whose bounds fit `usize` (each `_RANGE` above does).
fn index(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

impl ServeLimits {
    /// The defaults overridden by the set flags, each checked against its range and the
    /// replay pair against each other.
    ///
    /// ```
    /// use coding_agent::cli::args::ServeLimitArgs;
    /// use coding_agent::cli::daemon::ServeLimits;
    ///
    /// let limits = ServeLimits::from_args(&ServeLimitArgs {
    ///     max_active_runs: Some(3),
    ///     ..Default::default()
    /// })?;
    /// assert_eq!(limits.host.active_runs, 3);
    /// assert!(ServeLimits::from_args(&ServeLimitArgs {
    ///     max_streams: Some(0),
    ///     ..Default::default()
    /// })
    /// .is_err());
    /// # Ok::<(), coding_agent::cli::CliError>(())
    /// ```
    pub fn from_args(args: &ServeLimitArgs) -> Result<ServeLimits, CliError> {
        let defaults = HostLimits::default();
        let message_bytes = within(
            "--max-message-bytes",
            args.max_message_bytes,
            agent_server::server::DEFAULT_MESSAGE_BYTES,
            MESSAGE_BYTES_RANGE,
        )?;
        let collection_items = within(
            "--max-collection-items",
            args.max_collection_items,
            agent_server::server::DEFAULT_COLLECTION_ITEMS,
            COLLECTION_ITEMS_RANGE,
        )?;
        let replay_events = within(
            "--max-replay-events",
            args.max_replay_events,
            defaults.replay_events as u64,
            REPLAY_EVENTS_RANGE,
        )?;
        let replay_bytes = within(
            "--max-replay-bytes",
            args.max_replay_bytes,
            defaults.replay_bytes as u64,
            REPLAY_BYTES_RANGE,
        )?;
        if replay_events > replay_bytes {
            return Err(CliError::Usage(format!(
                "--max-replay-events {replay_events} exceeds --max-replay-bytes \
                 {replay_bytes} (every event accounts at least one byte)"
            )));
        }
        let streams = within(
            "--max-streams",
            args.max_streams,
            defaults.concurrent_streams as u64,
            STREAMS_RANGE,
        )?;
        let active_runs = within(
            "--max-active-runs",
            args.max_active_runs,
            defaults.active_runs as u64,
            ACTIVE_RUNS_RANGE,
        )?;
        let sessions = within(
            "--max-sessions",
            args.max_sessions,
            DAEMON_SESSIONS as u64,
            SESSIONS_RANGE,
        )?;
        Ok(ServeLimits {
            message_bytes,
            collection_items,
            host: HostLimits {
                active_runs: index(active_runs),
                concurrent_streams: index(streams),
                replay_events: index(replay_events),
                replay_bytes: index(replay_bytes),
                ..defaults
            },
            sessions: index(sessions),
        })
    }

    /// Whether the served catalog of `definitions` fits one collection.
    pub(super) fn check_catalog(&self, definitions: usize) -> Result<(), CliError> {
        if definitions > self.collection_items as usize {
            return Err(CliError::Usage(format!(
                "--max-collection-items {} is below the {definitions} served \
                 definitions",
                self.collection_items
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(args: ServeLimitArgs) -> Result<ServeLimits, CliError> {
        ServeLimits::from_args(&args)
    }

    #[test]
    fn no_flag_keeps_every_default() {
        let l = limits(ServeLimitArgs::default()).unwrap();
        assert_eq!(l.message_bytes, agent_server::server::DEFAULT_MESSAGE_BYTES);
        assert_eq!(
            l.collection_items,
            agent_server::server::DEFAULT_COLLECTION_ITEMS
        );
        assert_eq!(l.host, HostLimits::default());
        assert_eq!(l.sessions, DAEMON_SESSIONS);
    }

    #[test]
    fn each_bound_is_accepted_at_and_refused_past_it() {
        type Set = fn(&mut ServeLimitArgs, u64);
        let cases: [(&str, (u64, u64), Set); 7] = [
            ("--max-message-bytes", MESSAGE_BYTES_RANGE, |a, v| {
                a.max_message_bytes = Some(v)
            }),
            (
                "--max-collection-items",
                (
                    u64::from(COLLECTION_ITEMS_RANGE.0),
                    u64::from(COLLECTION_ITEMS_RANGE.1),
                ),
                |a, v| a.max_collection_items = u32::try_from(v).ok(),
            ),
            ("--max-replay-events", REPLAY_EVENTS_RANGE, |a, v| {
                a.max_replay_events = Some(v);
                // Keep the pair consistent so only the range is under test.
                a.max_replay_bytes = Some(REPLAY_BYTES_RANGE.1);
            }),
            ("--max-replay-bytes", REPLAY_BYTES_RANGE, |a, v| {
                a.max_replay_bytes = Some(v);
                a.max_replay_events = Some(1);
            }),
            ("--max-streams", STREAMS_RANGE, |a, v| {
                a.max_streams = Some(v)
            }),
            ("--max-active-runs", ACTIVE_RUNS_RANGE, |a, v| {
                a.max_active_runs = Some(v)
            }),
            ("--max-sessions", SESSIONS_RANGE, |a, v| {
                a.max_sessions = Some(v)
            }),
        ];
        for (flag, (low, high), set) in cases {
            for (value, ok) in [
                (low, true),
                (high, true),
                (low - 1, false),
                (high + 1, false),
            ] {
                let mut args = ServeLimitArgs::default();
                set(&mut args, value);
                match limits(args) {
                    Ok(_) => assert!(ok, "{flag} {value} was accepted"),
                    Err(e) => {
                        assert!(!ok, "{flag} {value}: {e}");
                        assert_eq!(e.exit_code(), 2);
                        assert!(e.to_string().contains(flag), "{e}");
                    }
                }
            }
        }
    }

    #[test]
    fn more_replay_events_than_bytes_is_refused() {
        let err = limits(ServeLimitArgs {
            max_replay_events: Some(100),
            max_replay_bytes: Some(99),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().contains("exceeds --max-replay-bytes"),
            "{err}"
        );
        let at = limits(ServeLimitArgs {
            max_replay_events: Some(100),
            max_replay_bytes: Some(100),
            ..Default::default()
        })
        .unwrap();
        assert_eq!((at.host.replay_events, at.host.replay_bytes), (100, 100));
    }

    #[test]
    fn the_catalog_must_fit_one_collection() {
        let l = limits(ServeLimitArgs {
            max_collection_items: Some(2),
            ..Default::default()
        })
        .unwrap();
        assert!(l.check_catalog(2).is_ok());
        assert_eq!(l.check_catalog(3).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn the_active_run_bound_is_the_pending_routers() {
        assert_eq!(
            ACTIVE_RUNS_RANGE.1 as usize,
            agent_daemon::pending::PendingLimits::default().runs
        );
        assert_eq!(
            COLLECTION_ITEMS_RANGE.1 as usize,
            agent_daemon::definition::MAX_DEFINITIONS
        );
        assert_eq!(
            COLLECTION_ITEMS_RANGE.1 as usize,
            agent_daemon::pending::hard::PENDING
        );
    }
}
