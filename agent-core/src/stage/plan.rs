//! Tool plans: an immutable, identified set of tools that a run leases for its whole life, so
//! a run (and a resumed snapshot of it) always dispatches against the exact definitions it
//! started with.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::hash::HexDigest;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::dispatch::{
    DispatchError, DispatchRequest, Dispatcher, ToolDispatcher, dispatch_declared,
};
use super::pipeline::PipelineError;
use super::plan_id::PlanId;
use crate::future::BoxFuture;
use crate::panic::contained;
use crate::text::format_arc;
use crate::tool::{Definition, ToolFacts, ToolResult};

/// Why a plan could not be leased or released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The source does not (or no longer) offer this generation; it never substitutes one.
    #[error("tool plan `{0}` is not available")]
    UnknownGeneration(PlanId),
    /// Leasing was cancelled.
    #[error("leasing a tool plan was cancelled")]
    Cancelled,
    /// The source failed.
    #[error("tool plan source failed: {0}")]
    Source(String),
}

/// Why releasing a lease failed. Every caller of [`ToolPlanLease::release`] sees the same one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The release callback panicked; the panic was contained.
    #[error("tool plan release panicked")]
    Panicked,
    /// The release callback failed.
    #[error("tool plan release failed: {0}")]
    Failed(String),
    /// The first caller stopped waiting before the callback finished.
    #[error("tool plan release did not complete")]
    DidNotComplete,
}

/// Hands out leases on tool plans.
pub trait ToolPlanSource: Send + Sync {
    /// Leases the current generation, for a new run.
    fn lease_current<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>>;

    /// Leases exactly generation `id`, for resuming a snapshot; never a substitute.
    fn lease_generation<'a>(
        &'a self,
        id: &'a PlanId,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>>;
}

/// What a release callback may fail with (the same type as `compose::BoxError`, spelled out
/// so the kernel does not depend on the composition runtime).
type BoxError = Box<dyn std::error::Error + Send + Sync>;

type ReleaseCallback = Box<dyn FnOnce() -> BoxFuture<'static, Result<(), BoxError>> + Send>;

struct ReleaseState {
    callback: Mutex<Option<ReleaseCallback>>,
    outcome: Mutex<Option<Result<(), ReleaseError>>>,
    done: Notify,
}

impl ReleaseState {
    /// Fixes the outcome if none is fixed yet, and wakes every waiter.
    fn settle(&self, outcome: Result<(), ReleaseError>) {
        let mut slot = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(outcome);
        }
        drop(slot);
        self.done.notify_waiters();
    }

    fn settled(&self) -> Option<Result<(), ReleaseError>> {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What every lease of one generation shares, computed once per generation so a static
/// plan hands out leases without hashing or allocating.
struct CoreHeader {
    id: PlanId,
    fingerprint: Arc<str>,
    facts: Box<[Arc<ToolFacts>]>,
    /// The frozen definitions, sorted by name.
    definitions: Arc<[Definition]>,
}

impl CoreHeader {
    /// Hashes the definitions once. Without an `id` the plan is static and its id derives
    /// from the hash. Plans without tools are common (text-only agents, tests): static ones
    /// share one header per process, and others its definition list and fingerprint.
    fn of(dispatcher: &dyn ToolDispatcher, id: Option<PlanId>) -> HeaderSlot {
        static EMPTY: OnceLock<CoreHeader> = OnceLock::new();
        let guards = dispatcher.guard_digest();
        if dispatcher.definitions().is_empty() && guards.is_none() {
            let empty = EMPTY.get_or_init(|| {
                let hash = crate::hash::fields_digest(std::iter::empty());
                CoreHeader {
                    id: static_plan_id(&hash),
                    fingerprint: fingerprint_of(&hash),
                    facts: Box::default(),
                    definitions: Arc::from([]),
                }
            });
            return match id {
                None => HeaderSlot::Shared(empty),
                Some(id) => HeaderSlot::Own(CoreHeader {
                    id,
                    fingerprint: empty.fingerprint.clone(),
                    facts: Box::default(),
                    definitions: empty.definitions.clone(),
                }),
            };
        }
        let definitions: Arc<[Definition]> = dispatcher.definitions().into();
        let facts: Box<[Arc<ToolFacts>]> =
            definitions.iter().map(|d| Arc::new(d.facts())).collect();
        // The guards decide which calls run, so they are part of what the plan is; a plan
        // without guards hashes exactly as before guards were covered.
        let guard_fields = guards
            .into_iter()
            .flat_map(|digest| [&b"guards"[..], digest.as_bytes()]);
        let fields = definitions
            .iter()
            .zip(&facts)
            .flat_map(|(d, f)| [d.name().as_bytes(), f.fingerprint.as_bytes()])
            .chain(guard_fields);
        let hash = crate::hash::fields_digest(fields);
        HeaderSlot::Own(CoreHeader {
            id: id.unwrap_or_else(|| static_plan_id(&hash)),
            fingerprint: fingerprint_of(&hash),
            facts,
            definitions,
        })
    }
}

/// A generation's header: the process-wide one of the static empty plan, or its own.
enum HeaderSlot {
    Shared(&'static CoreHeader),
    Own(CoreHeader),
}

impl std::ops::Deref for HeaderSlot {
    type Target = CoreHeader;

    fn deref(&self) -> &CoreHeader {
        match self {
            HeaderSlot::Shared(header) => header,
            HeaderSlot::Own(header) => header,
        }
    }
}

fn static_plan_id(hash: &HexDigest) -> PlanId {
    PlanId::from_trusted(format_arc(format_args!("static:{}", hash.as_str())))
}

fn fingerprint_of(hash: &HexDigest) -> Arc<str> {
    format_arc(format_args!("sha256:{}", hash.as_str()))
}

/// A generation's header beside the dispatcher it freezes, in one allocation when the
/// dispatcher is owned. It is also the plan's dispatcher: it rejects a scope naming another
/// plan and any call outside the frozen definitions.
struct LeaseCore<D> {
    header: HeaderSlot,
    inner: D,
}

impl<D: ToolDispatcher> LeaseCore<D> {
    fn new(inner: D, id: Option<PlanId>) -> Self {
        LeaseCore {
            header: CoreHeader::of(&inner, id),
            inner,
        }
    }
}

/// A lease core with its dispatcher type erased.
trait PlanCore: ToolDispatcher {
    fn header(&self) -> &CoreHeader;
}

impl<D: ToolDispatcher> PlanCore for LeaseCore<D> {
    fn header(&self) -> &CoreHeader {
        &self.header
    }
}

impl<D: ToolDispatcher> ToolDispatcher for LeaseCore<D> {
    fn definitions(&self) -> &[Definition] {
        &self.header.definitions
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        // A run's scope carries this header's own shared strings, so the pointers settle
        // both checks; any other scope is compared byte by byte.
        let same = crate::text::same_text;
        if !same(request.scope.plan_id().as_arc(), self.header.id.as_arc()) {
            let (expected, found) = (
                self.header.id.to_string(),
                request.scope.plan_id().to_string(),
            );
            return Box::pin(async move { Err(DispatchError::PlanMismatch { expected, found }) });
        }
        if !same(
            request.scope.plan_fingerprint_arc(),
            &self.header.fingerprint,
        ) {
            let (expected, found) = (
                self.header.fingerprint.to_string(),
                request.scope.plan_fingerprint().to_owned(),
            );
            return Box::pin(
                async move { Err(DispatchError::FingerprintMismatch { expected, found }) },
            );
        }
        dispatch_declared(&self.header.definitions, &self.inner, request)
    }

    /// A leased plan is final: it cannot be composed again.
    fn is_composed(&self) -> bool {
        true
    }
}

/// A leased tool plan: its id and fingerprint, defensive copies of its definitions, and a
/// dispatcher that rejects any dispatch whose scope names another plan.
pub struct ToolPlanLease {
    core: CoreRef,
    /// `None` for leases whose release has nothing to do (static plans).
    release: Option<Arc<ReleaseState>>,
}

impl ToolPlanLease {
    /// A lease over `dispatcher` (whose definitions are snapshotted now) that runs `release`
    /// at most once.
    pub fn new<F, Fut>(id: PlanId, dispatcher: Arc<dyn ToolDispatcher>, release: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let callback: ReleaseCallback = Box::new(move || Box::pin(release()));
        ToolPlanLease {
            core: CoreRef::Own(Arc::new(LeaseCore::new(dispatcher, Some(id)))),
            release: Some(Arc::new(ReleaseState {
                callback: Mutex::new(Some(callback)),
                outcome: Mutex::new(None),
                done: Notify::new(),
            })),
        }
    }

    /// The generation.
    pub fn id(&self) -> &PlanId {
        &self.core.header().id
    }

    /// `sha256:` over the definitions' names and fingerprints and, for a pipeline with
    /// guards, the guards' identities in order.
    pub fn fingerprint(&self) -> &str {
        &self.core.header().fingerprint
    }

    pub(crate) fn fingerprint_arc(&self) -> &Arc<str> {
        &self.core.header().fingerprint
    }

    /// Copies of the definitions, sorted by name.
    pub fn definitions(&self) -> &[Definition] {
        &self.core.header().definitions
    }

    pub(crate) fn definitions_arc(&self) -> &Arc<[Definition]> {
        &self.core.header().definitions
    }

    /// The secret-free facts of the tool called `name`, if the plan declares it.
    pub fn facts(&self, name: &str) -> Option<&Arc<ToolFacts>> {
        self.definitions()
            .binary_search_by(|d| d.name().cmp(name))
            .ok()
            .map(|i| &self.core.header().facts[i])
    }

    /// The plan's dispatcher.
    pub fn dispatcher(&self) -> Arc<dyn ToolDispatcher> {
        self.core.to_arc()
    }

    pub(crate) fn dispatcher_ref(&self) -> &dyn ToolDispatcher {
        &*self.core
    }

    /// Whether releasing has nothing to do (a static plan).
    pub(crate) fn release_is_noop(&self) -> bool {
        self.release.is_none()
    }

    /// Releases the lease: the callback starts at most once, on its own task, so a blocked
    /// callback never blocks a caller beyond `cancel`. The first of {callback finished,
    /// a caller's `cancel` fired} fixes one outcome that every caller receives; a panicking
    /// callback is contained. Must be called within a tokio runtime.
    pub async fn release(&self, cancel: &CancellationToken) -> Result<(), ReleaseError> {
        let Some(state) = &self.release else {
            return Ok(());
        };
        let callback = state
            .callback
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(callback) = callback {
            let task_state = state.clone();
            let task = tokio::spawn(async move { callback().await });
            tokio::spawn(async move {
                let outcome = match task.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(ReleaseError::Failed(crate::tool::bounded_note(
                        &e.to_string(),
                    ))),
                    Err(join) if join.is_panic() => Err(ReleaseError::Panicked),
                    Err(_) => Err(ReleaseError::DidNotComplete),
                };
                task_state.settle(outcome);
            });
        }
        loop {
            let notified = state.done.notified();
            tokio::pin!(notified);
            // Register before checking, so a settle between the check and the wait is seen.
            notified.as_mut().enable();
            if let Some(outcome) = state.settled() {
                return outcome;
            }
            tokio::select! {
                () = &mut notified => {}
                () = cancel.cancelled() => state.settle(Err(ReleaseError::DidNotComplete)),
            }
        }
    }
}

impl fmt::Debug for ToolPlanLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolPlanLease")
            .field("id", &self.core.header().id)
            .field("fingerprint", &self.core.header().fingerprint)
            .finish_non_exhaustive()
    }
}

/// A source with exactly one generation: a compiled dispatcher (the composed pipeline of a
/// `compose!` graph). Its id is `static:` + a hash of the definitions' names and
/// fingerprints, so the same tools always give the same id.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use agent_core::stage::{Dispatcher, StaticToolPlanSource, ToolPlanSource};
/// use tokio_util::sync::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let source = StaticToolPlanSource::new(Arc::new(Dispatcher::new(BTreeMap::new())?))?;
/// let cancel = CancellationToken::new();
/// let lease = source.lease_current(&cancel).await?;
/// assert_eq!(lease.id(), source.plan_id());
/// assert!(source.lease_generation(lease.id(), &cancel).await.is_ok());
/// lease.release(&cancel).await?;
/// lease.release(&cancel).await?; // idempotent
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct StaticToolPlanSource {
    core: CoreRef,
}

impl StaticToolPlanSource {
    /// Adapts a shared `dispatcher`, such as the pipeline a `compose!` graph assembles. A
    /// dispatcher that is not a composed pipeline is used as one without guards or
    /// decorators: the plan itself freezes its definitions. A panic of the dispatcher while
    /// it reports its definitions or guards is contained, as
    /// [`compose_pipeline`](super::compose_pipeline) contains it:
    /// [`PipelineError::BasePanicked`].
    pub fn new(dispatcher: Arc<dyn ToolDispatcher>) -> Result<Self, PipelineError> {
        let core = contained(|| LeaseCore::new(dispatcher, None))
            .map_err(|()| PipelineError::BasePanicked)?;
        Ok(StaticToolPlanSource {
            core: CoreRef::Own(Arc::new(core)),
        })
    }

    /// Adapts an owned `dispatcher`, keeping it in the same allocation as the plan.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use agent_core::stage::{Dispatcher, StaticToolPlanSource};
    ///
    /// let source = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
    /// assert!(source.plan_id().as_str().starts_with("static:"));
    /// # Ok::<(), agent_core::stage::DispatcherError>(())
    /// ```
    pub fn from_dispatcher<D: ToolDispatcher + 'static>(dispatcher: D) -> Self {
        if let Some(core) = shared_empty_core(&dispatcher) {
            return StaticToolPlanSource {
                core: CoreRef::Empty(core),
            };
        }
        StaticToolPlanSource {
            core: CoreRef::Own(Arc::new(LeaseCore::new(dispatcher, None))),
        }
    }

    /// The one generation's id.
    pub fn plan_id(&self) -> &PlanId {
        &self.core.header().id
    }

    /// A lease of the one generation, what [`lease_current`](ToolPlanSource::lease_current)
    /// resolves to: every lease shares the generation's core, and releasing one has
    /// nothing to do.
    pub(crate) fn lease(&self) -> ToolPlanLease {
        ToolPlanLease {
            core: self.core.clone(),
            release: None,
        }
    }
}

/// The one core of every static plan over a [`Dispatcher`] without tools, when `dispatcher`
/// is one. Such a plan has the same id, fingerprint and (empty) definitions wherever it is
/// built, and dispatches nothing, so engines of text-only agents share it instead of
/// allocating their own.
fn shared_empty_core(dispatcher: &dyn std::any::Any) -> Option<&'static Arc<dyn PlanCore>> {
    static EMPTY: OnceLock<Arc<dyn PlanCore>> = OnceLock::new();
    let dispatcher = dispatcher.downcast_ref::<Dispatcher>()?;
    if !dispatcher.is_empty() {
        return None;
    }
    Some(EMPTY.get_or_init(|| Arc::new(LeaseCore::new(Dispatcher::empty(), None))))
}

/// Where a plan's core lives: the process-wide empty one, shared without touching a
/// reference count (a text-only engine and each of its runs would otherwise pay two atomic
/// operations), or the plan's own.
#[derive(Clone)]
enum CoreRef {
    Empty(&'static Arc<dyn PlanCore>),
    Own(Arc<dyn PlanCore>),
}

impl CoreRef {
    /// A counted handle, for callers that keep the dispatcher.
    fn to_arc(&self) -> Arc<dyn PlanCore> {
        match self {
            CoreRef::Empty(core) => Arc::clone(core),
            CoreRef::Own(core) => Arc::clone(core),
        }
    }
}

impl std::ops::Deref for CoreRef {
    type Target = dyn PlanCore;

    fn deref(&self) -> &Self::Target {
        match self {
            CoreRef::Empty(core) => &***core,
            CoreRef::Own(core) => &**core,
        }
    }
}

/// The tool plans an engine leases from: a [`StaticToolPlanSource`], held directly, or any
/// shared [`ToolPlanSource`]. [`Engine::builder`](crate::agent::Engine::builder) takes
/// anything that converts into it, so callers pass either kind as they have it.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use agent_core::stage::{Dispatcher, StaticToolPlanSource, ToolPlanSource, ToolPlans};
///
/// let source = StaticToolPlanSource::from_dispatcher(Dispatcher::new(BTreeMap::new())?);
/// let direct = ToolPlans::from(source.clone());
/// let shared = ToolPlans::from(Arc::new(source) as Arc<dyn ToolPlanSource>);
/// # let _ = (direct, shared);
/// # Ok::<(), agent_core::stage::DispatcherError>(())
/// ```
#[derive(Clone)]
pub struct ToolPlans(Plans);

#[derive(Clone)]
enum Plans {
    /// Kept inline so a static plan costs the engine no allocation of its own.
    Static(StaticToolPlanSource),
    Shared(Arc<dyn ToolPlanSource>),
}

impl ToolPlans {
    /// The source to lease from.
    pub fn source(&self) -> &dyn ToolPlanSource {
        match &self.0 {
            Plans::Static(source) => source,
            Plans::Shared(source) => &**source,
        }
    }

    /// The static source, when that is what this holds: the engine then leases without
    /// the boxed future of [`ToolPlanSource::lease_current`], with the same outcome.
    pub(crate) fn as_static(&self) -> Option<&StaticToolPlanSource> {
        match &self.0 {
            Plans::Static(source) => Some(source),
            Plans::Shared(_) => None,
        }
    }
}

impl fmt::Debug for ToolPlans {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Plans::Static(source) => f.debug_tuple("ToolPlans").field(source).finish(),
            Plans::Shared(_) => f.debug_tuple("ToolPlans").finish_non_exhaustive(),
        }
    }
}

impl From<StaticToolPlanSource> for ToolPlans {
    fn from(source: StaticToolPlanSource) -> Self {
        ToolPlans(Plans::Static(source))
    }
}

impl From<Arc<dyn ToolPlanSource>> for ToolPlans {
    fn from(source: Arc<dyn ToolPlanSource>) -> Self {
        ToolPlans(Plans::Shared(source))
    }
}

impl<T: ToolPlanSource + 'static> From<Arc<T>> for ToolPlans {
    fn from(source: Arc<T>) -> Self {
        ToolPlans(Plans::Shared(source))
    }
}

impl fmt::Debug for StaticToolPlanSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticToolPlanSource")
            .field("id", &self.core.header().id)
            .finish_non_exhaustive()
    }
}

impl StaticToolPlanSource {
    /// What [`lease_generation`](ToolPlanSource::lease_generation) resolves to, without a
    /// future, for a caller whose token cannot be cancelled (the engine's own preparation).
    pub(crate) fn lease_generation_now(&self, id: &PlanId) -> Result<ToolPlanLease, PlanError> {
        if id != &self.core.header().id {
            return Err(PlanError::UnknownGeneration(id.clone()));
        }
        Ok(self.lease())
    }
}

impl ToolPlanSource for StaticToolPlanSource {
    fn lease_current<'a>(
        &'a self,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(PlanError::Cancelled);
            }
            Ok(self.lease())
        })
    }

    fn lease_generation<'a>(
        &'a self,
        id: &'a PlanId,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<ToolPlanLease, PlanError>> {
        Box::pin(async move {
            if cancel.is_cancelled() {
                return Err(PlanError::Cancelled);
            }
            self.lease_generation_now(id)
        })
    }
}
