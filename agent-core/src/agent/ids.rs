//! Where run ids come from: the [`IdSource`] a host may plug in and the default counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::text::format_arc;

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
}

impl IdSource for AtomicIdSource {
    fn next_id(&self, prefix: &str) -> Arc<str> {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        format_arc(format_args!("{prefix}-{n}"))
    }
}

/// Where run ids come from; the default counter lives in the engine itself.
pub(super) enum Ids {
    Counter(AtomicIdSource),
    Custom(Arc<dyn IdSource>),
}

impl Ids {
    pub(super) fn next_id(&self, prefix: &str) -> Arc<str> {
        match self {
            Ids::Counter(counter) => counter.next_id(prefix),
            Ids::Custom(source) => source.next_id(prefix),
        }
    }
}
