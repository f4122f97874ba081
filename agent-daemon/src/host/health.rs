//! Health: the degradation reasons, health sources, and `describe`/`health` (one snapshot of
//! the host's state plus the sources' samples).

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use super::{HostLimits, MAX_SOURCE_REASONS, RunHost};
use crate::error::HostError;
use crate::session::Session;

/// One of the four fixed degradation reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Degradation {
    /// `run authority outcome uncertain`
    AuthorityUncertain,
    /// `run authority unavailable`
    AuthorityUnavailable,
    /// `terminal snapshot unavailable`
    TerminalSnapshotUnavailable,
    /// `run lifecycle cleanup unavailable`
    CleanupUnavailable,
}

impl Degradation {
    /// The fixed text.
    pub fn as_str(self) -> &'static str {
        match self {
            Degradation::AuthorityUncertain => "run authority outcome uncertain",
            Degradation::AuthorityUnavailable => "run authority unavailable",
            Degradation::TerminalSnapshotUnavailable => "terminal snapshot unavailable",
            Degradation::CleanupUnavailable => "run lifecycle cleanup unavailable",
        }
    }
}

/// A reason a health source reports (a closed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthReason {
    /// `dependency_degraded`
    DependencyDegraded,
    /// `dependency_recovering`
    DependencyRecovering,
    /// `dependency_unavailable`
    DependencyUnavailable,
}

impl HealthReason {
    /// The fixed code.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthReason::DependencyDegraded => "dependency_degraded",
            HealthReason::DependencyRecovering => "dependency_recovering",
            HealthReason::DependencyUnavailable => "dependency_unavailable",
        }
    }
}

/// A dependency whose health the host reports. Sampled outside the host's lock; a panic,
/// or more than [`MAX_SOURCE_REASONS`] reasons, counts as `dependency_unavailable`.
pub trait HealthSource: Send + Sync {
    /// The current reasons (empty: healthy).
    fn sample(&self) -> Vec<HealthReason>;
}

/// The host's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthStatus {
    /// Nothing to report.
    Ready,
    /// Some reasons are reported.
    Degraded,
    /// The host is shutting down.
    Stopping,
}

/// Describe and health, from one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    /// The status.
    pub status: HealthStatus,
    /// Sorted, de-duplicated reasons (empty while stopping).
    pub reasons: Vec<String>,
    /// Reserved plus active run slots.
    pub active_runs: usize,
    /// The configured limits.
    pub limits: HostLimits,
    /// The definition set's revision fingerprint.
    pub definitions_revision: String,
    /// `(id, revision)` of every served definition, canonical order.
    pub definitions: Vec<(String, String)>,
}

impl RunHost {
    /// The host's description, from one snapshot of its state; needs no session.
    pub fn describe(&self) -> Description {
        let inner = &*self.inner;
        let (stopping, mut reasons, active_runs) = {
            let state = inner.lock();
            let reasons: BTreeSet<String> = state
                .degraded
                .iter()
                .map(|d| d.as_str().to_owned())
                .collect();
            (state.closing, reasons, state.reserved)
        };
        let definitions = inner
            .definitions
            .definitions()
            .iter()
            .map(|d| (d.id().to_owned(), d.revision().to_owned()))
            .collect();
        let status = if stopping {
            reasons.clear();
            HealthStatus::Stopping
        } else {
            for source in &inner.sources {
                let sampled = catch_unwind(AssertUnwindSafe(|| source.sample()));
                match sampled {
                    Ok(list) if list.len() <= MAX_SOURCE_REASONS => {
                        reasons.extend(list.iter().map(|r| r.as_str().to_owned()));
                    }
                    _ => {
                        reasons.insert(HealthReason::DependencyUnavailable.as_str().to_owned());
                    }
                }
            }
            if reasons.is_empty() {
                HealthStatus::Ready
            } else {
                HealthStatus::Degraded
            }
        };
        Description {
            status,
            reasons: reasons.into_iter().collect(),
            active_runs,
            limits: inner.limits,
            definitions_revision: inner.definitions.revision().to_owned(),
            definitions,
        }
    }

    /// [`RunHost::describe`] for a session that still owns its client.
    pub fn health(&self, session: &Session) -> Result<Description, HostError> {
        self.inner.sessions.check(session)?;
        Ok(self.describe())
    }
}
