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

use std::collections::hash_map::{Entry, RandomState};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::OnceLock;

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
    Live(RunId),
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

/// A run id as the ledger files it: hashed once, with a keyed hasher (ids also arrive from
/// custom sources and imports, so the hash stays keyed), and whether the engine's own
/// counter issued it. A run keeps its key, so committing and ending it look the
/// id up without hashing or parsing it again.
#[derive(Debug, Clone)]
pub(crate) struct LedgerKey {
    hash: u64,
    counted: bool,
    id: RunId,
}

impl LedgerKey {
    /// The key of `id`; `counted` says whether the engine's own counter issued it (then it
    /// was never live or retired unless an import took it first).
    pub(crate) fn new(id: RunId, counted: bool) -> Self {
        LedgerKey {
            hash: keyed().hash_one(id.as_str()),
            counted,
            id,
        }
    }

    pub(crate) fn id(&self) -> &RunId {
        &self.id
    }
}

impl PartialEq for LedgerKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.id == other.id
    }
}

impl Eq for LedgerKey {}

impl Hash for LedgerKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Hands the ledger's maps the hash a [`LedgerKey`] already carries.
#[derive(Default)]
pub(super) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Keys only ever write their `u64`; any other input still hashes (FNV-1a).
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

pub(super) type Filed = BuildHasherDefault<Prehashed>;

/// The keyed hasher of every ledger key in the process: made once, from std's random keys,
/// so an engine's construction pays nothing for it.
fn keyed() -> &'static RandomState {
    static KEYED: OnceLock<RandomState> = OnceLock::new();
    KEYED.get_or_init(RandomState::new)
}

/// How far the run of a live id got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Prepared: the id is reserved, nothing is committed.
    Prepared,
    /// Committed paused: registered, waiting for the host's activation.
    Paused,
    /// Started (running or suspended) until it ends.
    Started,
}

/// A live id's entry: the token shutdown cancels (once committed) and the run's stage.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) token: Option<CancellationToken>,
    pub(super) stage: Stage,
}

/// The live runs and the retired ids.
#[derive(Default)]
pub(super) struct Ledger {
    pub(super) live: HashMap<LedgerKey, Slot, Filed>,
    retired: HashSet<LedgerKey, Filed>,
}

impl Ledger {
    /// Reserves `key`'s id, with the token a shutdown cancels when the run is committed
    /// and started in the same step (`None` until it is).
    pub(super) fn reserve(
        &mut self,
        key: &LedgerKey,
        shutdown: Option<CancellationToken>,
    ) -> Result<(), Refusal> {
        let recorded = self.recorded();
        // One lookup of the live set for both the check and the insertion.
        let Entry::Vacant(slot) = self.live.entry(key.clone()) else {
            return Err(Refusal::Live);
        };
        if self.retired.contains(key) {
            return Err(Refusal::Retired);
        }
        if !key.counted && recorded >= MAX_RECORDED_RUN_IDS {
            return Err(Refusal::Capacity);
        }
        let stage = if shutdown.is_some() {
            Stage::Started
        } else {
            Stage::Prepared
        };
        slot.insert(Slot {
            token: shutdown,
            stage,
        });
        Ok(())
    }

    /// Why an import of `key`'s id would be refused, without reserving it: the id is live,
    /// used here already (retired, or issued by the engine's counter), or needs an entry
    /// the ledger has no room for.
    pub(super) fn refuse_import(&self, key: &LedgerKey) -> Option<Refusal> {
        if self.live.contains_key(key) {
            Some(Refusal::Live)
        } else if key.counted || self.retired.contains(key) {
            Some(Refusal::Retired)
        } else if self.recorded() >= MAX_RECORDED_RUN_IDS {
            Some(Refusal::Capacity)
        } else {
            None
        }
    }

    /// Moves a live id's run to `stage`, filing `token` when given.
    pub(super) fn advance(
        &mut self,
        key: &LedgerKey,
        stage: Stage,
        token: Option<&CancellationToken>,
    ) {
        if let Some(slot) = self.live.get_mut(key) {
            slot.stage = stage;
            if let Some(token) = token {
                slot.token = Some(token.clone());
            }
        }
    }

    /// The retired ids recorded one by one that `counted` does not cover.
    pub(super) fn retired_uncounted(&self, counted: impl Fn(&str) -> bool) -> usize {
        self.retired
            .iter()
            .filter(|key| !counted(key.id.as_str()))
            .count()
    }

    /// Ends a live id; one the counter issued needs no record, its high-water mark covers it.
    pub(super) fn release(&mut self, key: &LedgerKey, release: Release) {
        if self.live.remove(key).is_some() && release == Release::Retire && !key.counted {
            self.retired.insert(key.clone());
        }
    }

    /// Retires an id that is not live; idempotent.
    pub(super) fn retire(&mut self, key: &LedgerKey) -> Result<(), RetireError> {
        if self.live.contains_key(key) {
            return Err(RetireError::Live(key.id.clone()));
        }
        if key.counted || self.retired.contains(key) {
            return Ok(());
        }
        if self.recorded() >= MAX_RECORDED_RUN_IDS {
            return Err(RetireError::Capacity);
        }
        self.retired.insert(key.clone());
        Ok(())
    }

    /// Whether `key`'s id is retired.
    pub(super) fn is_retired(&self, key: &LedgerKey) -> bool {
        !self.live.contains_key(key) && (key.counted || self.retired.contains(key))
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

    /// The key of a custom id (not from the counter).
    fn custom(n: usize) -> LedgerKey {
        LedgerKey::new(id(n), false)
    }

    #[test]
    fn ids_are_live_then_retired_and_never_reserved_again() {
        let mut ledger = Ledger::default();
        ledger.reserve(&custom(1), None).unwrap();
        assert_eq!(ledger.reserve(&custom(1), None), Err(Refusal::Live));
        assert_eq!(ledger.retire(&custom(1)), Err(RetireError::Live(id(1))));
        ledger.release(&custom(1), Release::Retire);
        assert_eq!(ledger.reserve(&custom(1), None), Err(Refusal::Retired));
        assert!(ledger.is_retired(&custom(1)));
        // A forgotten import can be imported again.
        ledger.reserve(&custom(2), None).unwrap();
        ledger.release(&custom(2), Release::Forget);
        assert!(!ledger.is_retired(&custom(2)));
        ledger.reserve(&custom(2), None).unwrap();
        // Counter ids cost no entry once retired.
        let counted = LedgerKey::new(RunId::new("run-1").unwrap(), true);
        ledger.reserve(&counted, None).unwrap();
        ledger.release(&counted, Release::Retire);
        assert_eq!(ledger.recorded(), 2);
        assert!(ledger.is_retired(&counted));
        assert_eq!(ledger.retire(&custom(1)), Ok(()), "idempotent");
    }

    #[test]
    fn an_import_is_refused_on_the_grounds_a_reservation_would_be() {
        let mut ledger = Ledger::default();
        assert_eq!(ledger.refuse_import(&custom(1)), None);
        ledger.reserve(&custom(1), None).unwrap();
        assert_eq!(ledger.refuse_import(&custom(1)), Some(Refusal::Live));
        ledger.release(&custom(1), Release::Retire);
        assert_eq!(ledger.refuse_import(&custom(1)), Some(Refusal::Retired));
        // An id the counter issued is used, though the ledger keeps no entry for it.
        let counted = LedgerKey::new(RunId::new("run-1").unwrap(), true);
        assert_eq!(ledger.refuse_import(&counted), Some(Refusal::Retired));
    }

    #[test]
    fn a_live_id_advances_through_its_stages() {
        let mut ledger = Ledger::default();
        ledger.reserve(&custom(1), None).unwrap();
        assert_eq!(ledger.live[&custom(1)].stage, Stage::Prepared);
        let token = CancellationToken::new();
        ledger.advance(&custom(1), Stage::Paused, Some(&token));
        assert_eq!(ledger.live[&custom(1)].stage, Stage::Paused);
        assert!(ledger.live[&custom(1)].token.is_some());
        ledger.advance(&custom(1), Stage::Started, None);
        assert_eq!(ledger.live[&custom(1)].stage, Stage::Started);
        assert!(
            ledger.live[&custom(1)].token.is_some(),
            "the token stays filed"
        );
        // Committed and started in one step.
        ledger.reserve(&custom(2), Some(token)).unwrap();
        assert_eq!(ledger.live[&custom(2)].stage, Stage::Started);
        // Advancing an id that is not live does nothing.
        ledger.advance(&custom(3), Stage::Started, None);
        assert!(!ledger.live.contains_key(&custom(3)));
    }

    #[test]
    fn retired_ids_the_counter_covers_are_not_counted_twice() {
        let mut ledger = Ledger::default();
        ledger.retire(&custom(1)).unwrap();
        ledger
            .retire(&LedgerKey::new(RunId::new("run-7").unwrap(), false))
            .unwrap();
        assert_eq!(ledger.retired_uncounted(|_| false), 2);
        assert_eq!(ledger.retired_uncounted(|id| id == "run-7"), 1);
    }

    #[test]
    fn the_ledger_records_at_most_its_bound() {
        let mut ledger = Ledger::default();
        for n in 0..MAX_RECORDED_RUN_IDS - 1 {
            ledger.retire(&custom(n)).unwrap();
        }
        // At the bound: the last one fits.
        ledger
            .reserve(&custom(MAX_RECORDED_RUN_IDS - 1), None)
            .unwrap();
        assert_eq!(ledger.recorded(), MAX_RECORDED_RUN_IDS);
        // Past it: refused, never forgotten.
        let past = custom(MAX_RECORDED_RUN_IDS);
        assert_eq!(ledger.reserve(&past, None), Err(Refusal::Capacity));
        assert_eq!(ledger.retire(&past), Err(RetireError::Capacity));
        assert!(ledger.is_retired(&custom(0)));
        // Counter ids need no entry, so they are still served.
        let counted = LedgerKey::new(RunId::new("run-9").unwrap(), true);
        assert_eq!(ledger.reserve(&counted, None), Ok(()));
        // Retiring a live id moves its entry; the live counter id is the one above the bound.
        ledger.release(&custom(MAX_RECORDED_RUN_IDS - 1), Release::Retire);
        assert_eq!(ledger.recorded(), MAX_RECORDED_RUN_IDS + 1);
    }
}
