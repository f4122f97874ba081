//! The run-identity ledger: which run ids an engine has issued, so none is ever reused.
//!
//! An id is *live* from its reservation (prepare) until its run ends or its preparation is
//! aborted; then it is *retired* for good. A fresh run takes only an id that is neither
//! live nor retired; an import (resuming a snapshot) names its exact id and is refused when
//! that id is live or retired here.
//!
//! Memory: ids from the engine's own counter (`run-1`, `run-2`, ...) cost nothing once
//! retired, since the counter's high-water mark already says they were issued. Every other
//! id (from a custom [`IdSource`](super::IdSource), an import, [`Engine::retire`]) is
//! recorded one by one, at most [`MAX_RECORDED_RUN_IDS`] of them (live ones included); past
//! that the engine refuses such ids (fail closed) instead of forgetting one.
//!
//! [`Engine::retire`]: super::Engine::retire

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use tokio_util::sync::CancellationToken;

use crate::run_id::RunId;

/// Most run ids an engine records one by one: retired ids that did not come from its own
/// counter, plus every live id (a run from the counter is never refused for it, since it
/// leaves no entry once retired). About 160 bytes each at most (a 96-byte id, its shared
/// allocation and the set's slot), so the retired ids stay under 11 MiB.
pub const MAX_RECORDED_RUN_IDS: usize = 65_536;

/// Why [`Engine::retire`](super::Engine::retire) refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetireError {
    /// The id belongs to a run that is prepared, paused, running or suspended here.
    #[error("run `{0}` is live")]
    Live(String),
    /// The ledger already records [`MAX_RECORDED_RUN_IDS`] ids.
    #[error("the run-identity ledger is full ({MAX_RECORDED_RUN_IDS} ids)")]
    Capacity,
}

/// Why an id cannot be reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    Live,
    Retired,
    Capacity,
}

/// What becomes of a live id when it stops being live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// The run ended, or a fresh preparation was aborted: the id is retired.
    Retire,
    /// An aborted import: the engine never ran it, so the ledger forgets the reservation.
    Forget,
}

/// The live runs (with the token shutdown cancels, once committed) and the retired ids.
#[derive(Default)]
pub(super) struct Ledger {
    pub(super) live: HashMap<RunId, Option<CancellationToken>>,
    retired: HashSet<RunId>,
}

impl Ledger {
    /// Reserves `id`; `counted` says whether the engine's own counter issued it (then it
    /// was never live or retired unless an import took it first).
    pub(super) fn reserve(&mut self, id: &RunId, counted: bool) -> Result<(), Refusal> {
        let recorded = self.recorded();
        // One lookup of the live set for both the check and the insertion.
        let Entry::Vacant(slot) = self.live.entry(id.clone()) else {
            return Err(Refusal::Live);
        };
        if self.retired.contains(id) {
            return Err(Refusal::Retired);
        }
        if !counted && recorded >= MAX_RECORDED_RUN_IDS {
            return Err(Refusal::Capacity);
        }
        slot.insert(None);
        Ok(())
    }

    /// Ends a live id; `counted` says whether the counter's high-water mark covers it.
    pub(super) fn release(&mut self, id: &RunId, release: Release, counted: bool) {
        if self.live.remove(id).is_some() && release == Release::Retire && !counted {
            self.retired.insert(id.clone());
        }
    }

    /// Retires an id that is not live; idempotent.
    pub(super) fn retire(&mut self, id: &RunId, counted: bool) -> Result<(), RetireError> {
        if self.live.contains_key(id) {
            return Err(RetireError::Live(id.to_string()));
        }
        if counted || self.retired.contains(id) {
            return Ok(());
        }
        if self.recorded() >= MAX_RECORDED_RUN_IDS {
            return Err(RetireError::Capacity);
        }
        self.retired.insert(id.clone());
        Ok(())
    }

    /// Whether `id` is retired, given whether the counter issued it.
    pub(super) fn is_retired(&self, id: &RunId, counted: bool) -> bool {
        !self.live.contains_key(id) && (counted || self.retired.contains(id))
    }

    /// Ids recorded one by one: every live id and the retired ones.
    pub(super) fn recorded(&self) -> usize {
        self.live.len() + self.retired.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: usize) -> RunId {
        RunId::new(format!("custom-{n}")).unwrap()
    }

    #[test]
    fn ids_are_live_then_retired_and_never_reserved_again() {
        let mut ledger = Ledger::default();
        ledger.reserve(&id(1), false).unwrap();
        assert_eq!(ledger.reserve(&id(1), false), Err(Refusal::Live));
        assert_eq!(
            ledger.retire(&id(1), false),
            Err(RetireError::Live("custom-1".into()))
        );
        ledger.release(&id(1), Release::Retire, false);
        assert_eq!(ledger.reserve(&id(1), false), Err(Refusal::Retired));
        assert!(ledger.is_retired(&id(1), false));
        // A forgotten import can be imported again.
        ledger.reserve(&id(2), false).unwrap();
        ledger.release(&id(2), Release::Forget, false);
        assert!(!ledger.is_retired(&id(2), false));
        ledger.reserve(&id(2), false).unwrap();
        // Counter ids cost no entry once retired.
        let counted = RunId::new("run-1").unwrap();
        ledger.reserve(&counted, true).unwrap();
        ledger.release(&counted, Release::Retire, true);
        assert_eq!(ledger.recorded(), 2);
        assert!(ledger.is_retired(&counted, true));
        assert_eq!(ledger.retire(&id(1), false), Ok(()), "idempotent");
    }

    #[test]
    fn the_ledger_records_at_most_its_bound() {
        let mut ledger = Ledger::default();
        for n in 0..MAX_RECORDED_RUN_IDS - 1 {
            ledger.retire(&id(n), false).unwrap();
        }
        // At the bound: the last one fits.
        ledger
            .reserve(&id(MAX_RECORDED_RUN_IDS - 1), false)
            .unwrap();
        assert_eq!(ledger.recorded(), MAX_RECORDED_RUN_IDS);
        // Past it: refused, never forgotten.
        let past = id(MAX_RECORDED_RUN_IDS);
        assert_eq!(ledger.reserve(&past, false), Err(Refusal::Capacity));
        assert_eq!(ledger.retire(&past, false), Err(RetireError::Capacity));
        assert!(ledger.is_retired(&id(0), false));
        // Counter ids need no entry, so they are still served.
        assert_eq!(ledger.reserve(&RunId::new("run-9").unwrap(), true), Ok(()));
        // Retiring a live id moves its entry; the live counter id is the one above the bound.
        ledger.release(&id(MAX_RECORDED_RUN_IDS - 1), Release::Retire, false);
        assert_eq!(ledger.recorded(), MAX_RECORDED_RUN_IDS + 1);
    }
}
