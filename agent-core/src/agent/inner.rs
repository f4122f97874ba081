//! The engine state every run shares: provider, clock, observers, options, and the registry
//! of live runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::identity::{EngineIdentity, PlanIdentity};
use super::ids::Ids;
use super::ledger::{Ledger, LedgerKey, Release};
use super::options::EngineOptions;
use crate::event::{Clock, Observer};
use crate::interaction::{Broker, UnavailableBroker};
use crate::model::ModelProvider;
use crate::stage::{ToolPlanLease, ToolPlans};

/// The engine's registry: the run-identity ledger (live runs with the tokens shutdown
/// cancels, and retired ids) and whether new runs are refused.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) closed: bool,
    pub(super) ledger: Ledger,
}

impl Registry {
    /// Whether no run is live.
    pub(super) fn drained(&self) -> bool {
        self.ledger.live.is_empty()
    }

    /// The shutdown tokens of the committed live runs (a run [`Engine::start`] begins is
    /// filed with its reservation).
    ///
    /// [`Engine::start`]: super::Engine::start
    pub(super) fn tokens(&self) -> Vec<CancellationToken> {
        self.ledger
            .live
            .values()
            .filter_map(|slot| slot.token.clone())
            .collect()
    }
}

/// What an engine shares with each of its runs.
pub(crate) struct EngineInner {
    pub(crate) provider: Arc<dyn ModelProvider>,
    pub(super) plans: ToolPlans,
    pub(super) ids: Ids,
    pub(crate) clock: Arc<dyn Clock>,
    pub(super) broker: Option<Arc<dyn Broker>>,
    pub(crate) observers: Vec<Arc<dyn Observer>>,
    pub(crate) options: EngineOptions,
    pub(super) registry: Mutex<Registry>,
    /// Whether the registry is closed, readable without its lock: preparation checks it
    /// before leasing anything, and a run committed in its reservation checks it before
    /// its task starts. Set under the lock together with [`Registry::closed`], which stays
    /// the authority every decision taken under the lock reads.
    pub(super) closed: AtomicBool,
    /// Notified (only with `notify_waiters`) when a closed registry drained.
    pub(super) drained: Notify,
    /// Never cancelled: preparation has no deadline of its own. Created on first use.
    pub(super) setup: std::sync::OnceLock<CancellationToken>,
    /// What the application said about the code it runs; `None` for the default, which
    /// keeps an engine that states nothing as small and cheap to build as before.
    pub(super) identity: Option<Arc<EngineIdentity>>,
    /// The plan identity of the first generation leased, reused while leases are of it
    /// (always, for a static plan), so a run pays no hashing for it.
    pub(super) plan_identity: std::sync::OnceLock<Arc<PlanIdentity>>,
}

impl EngineInner {
    pub(super) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the registry to new runs; the caller goes on under the returned lock.
    pub(super) fn close_registry(&self) -> MutexGuard<'_, Registry> {
        let mut registry = self.registry();
        registry.closed = true;
        self.closed.store(true, Ordering::Release);
        registry
    }

    /// Whether the registry is closed, without taking its lock: a run that reads `false`
    /// is ordered before the close, which then waits for it (and a shutdown cancels it).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The plan identity of a run over `lease`.
    pub(super) fn plan_identity_for(&self, lease: &ToolPlanLease) -> Arc<PlanIdentity> {
        let first = self
            .plan_identity
            .get_or_init(|| Arc::new(PlanIdentity::of(self.identity(), lease)));
        if first.describes(lease) {
            first.clone()
        } else {
            Arc::new(PlanIdentity::of(self.identity(), lease))
        }
    }

    /// What the application said about the code this engine runs.
    pub(super) fn identity(&self) -> &EngineIdentity {
        static DEFAULT: std::sync::LazyLock<EngineIdentity> =
            std::sync::LazyLock::new(EngineIdentity::default);
        self.identity.as_deref().unwrap_or(&DEFAULT)
    }

    /// Who answers interactions.
    pub(crate) fn broker(&self) -> &dyn Broker {
        match &self.broker {
            Some(broker) => &**broker,
            None => &UnavailableBroker,
        }
    }

    /// Ends a live id: a run that ended or was aborted.
    pub(crate) fn unregister(&self, key: &LedgerKey, release: Release) {
        let mut registry = self.registry();
        registry.ledger.release(key, release);
        // Only `close` and `shutdown` wait for the registry to drain, and they mark it
        // closed first.
        let wake = registry.closed && registry.drained();
        drop(registry);
        if wake {
            self.drained.notify_waiters();
        }
    }
}
