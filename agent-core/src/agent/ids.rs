//! Where run ids come from: the [`IdSource`] a host may plug in and the default counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::text::{Decimal, concat_arc};

/// Allocates run ids.
pub trait IdSource: Send + Sync {
    /// A fresh id starting with `prefix`; the engine refuses an id that is still in use.
    fn next_id(&self, prefix: &str) -> Arc<str>;
}

/// Ids `<prefix>-1`, `<prefix>-2`, ... from one atomic counter.
///
/// ```
/// use agent_core::agent::{AtomicIdSource, IdSource};
///
/// let ids = AtomicIdSource::new();
/// assert_eq!(&*ids.next_id("run"), "run-1");
/// assert_eq!(&*ids.next_id("run"), "run-2");
/// ```
#[derive(Debug, Default)]
pub struct AtomicIdSource(AtomicU64);

impl AtomicIdSource {
    /// A source whose first id ends in `-1`.
    pub const fn new() -> Self {
        AtomicIdSource(AtomicU64::new(0))
    }

    /// How many ids it has handed out.
    fn issued(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl IdSource for AtomicIdSource {
    fn next_id(&self, prefix: &str) -> Arc<str> {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        concat_arc(&[prefix, "-", Decimal::new(n).as_str()])
    }
}

/// Where run ids come from; the default counter lives in the engine itself.
pub(super) enum Ids {
    Counter(AtomicIdSource),
    Custom(Arc<dyn IdSource>),
}

/// The prefix of the engine's own run ids.
pub(super) const RUN_PREFIX: &str = "run";

impl Ids {
    /// Whether the engine's own counter already handed out `id` (`run-<n>`, `n` written
    /// without leading zeros, at most the counter): such an id needs no ledger entry to be
    /// known as issued.
    pub(super) fn counted(&self, id: &str) -> bool {
        let Ids::Counter(counter) = self else {
            return false;
        };
        let Some(number) = id
            .strip_prefix(RUN_PREFIX)
            .and_then(|rest| rest.strip_prefix('-'))
        else {
            return false;
        };
        let canonical = !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
            && !number.starts_with('0');
        canonical && number.parse::<u64>().is_ok_and(|n| n <= counter.issued())
    }

    /// How many ids the engine's own counter issued (none for a custom source).
    pub(super) fn issued(&self) -> u64 {
        match self {
            Ids::Counter(counter) => counter.issued(),
            Ids::Custom(_) => 0,
        }
    }

    /// A fresh run id, and whether [`counted`](Self::counted) holds for it: an id the
    /// counter just issued is counted by construction, so the caller need not parse it back.
    pub(super) fn next_run_id(&self) -> (Arc<str>, bool) {
        match self {
            Ids::Counter(counter) => (counter.next_id(RUN_PREFIX), true),
            Ids::Custom(source) => (source.next_id(RUN_PREFIX), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_the_counter_issued_are_counted() {
        let ids = Ids::Counter(AtomicIdSource::new());
        assert!(!ids.counted("run-1"));
        let (id, counted) = ids.next_run_id();
        assert_eq!(&*id, "run-1");
        assert!(counted);
        assert!(ids.counted("run-1"));
        for other in [
            "run-2", "run-01", "run-", "run1", "job-1", "run-+1", "run-1 ",
        ] {
            assert!(!ids.counted(other), "{other}");
        }
        let custom = Ids::Custom(Arc::new(AtomicIdSource::new()));
        let (id, counted) = custom.next_run_id();
        assert_eq!(&*id, "run-1");
        assert!(!counted);
        assert!(!custom.counted("run-1"));
    }
}
