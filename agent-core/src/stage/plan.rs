//! Tool plans: an immutable, identified set of tools that a run leases for its whole life, so
//! a run (and a resumed snapshot of it) always dispatches against the exact definitions it
//! started with.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::dispatch::{DispatchError, DispatchRequest, SnapshotDispatcher, ToolDispatcher};
use super::pipeline::{PipelineError, compose_pipeline};
use crate::tool::{BoxFuture, Definition, ToolResult};

/// Largest plan id, in bytes.
pub const MAX_PLAN_ID_BYTES: usize = 256;

/// The identity of one tool plan generation. A source promises that one id always denotes
/// the same definitions and the same code.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct PlanId(String);

/// Why a [`PlanId`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan id {0:?} must be 1 to 256 bytes without whitespace or control characters")]
pub struct PlanIdError(String);

impl PlanId {
    /// A validated plan id: 1 to [`MAX_PLAN_ID_BYTES`] bytes, no whitespace or control
    /// characters anywhere.
    ///
    /// ```
    /// use agent_core::stage::PlanId;
    /// assert!(PlanId::new("static:1f2e").is_ok());
    /// assert!(PlanId::new("two words").is_err());
    /// ```
    pub fn new(id: impl Into<String>) -> Result<Self, PlanIdError> {
        let id = id.into();
        let valid = !id.is_empty()
            && id.len() <= MAX_PLAN_ID_BYTES
            && !id.chars().any(|c| c.is_whitespace() || c.is_control());
        if valid {
            Ok(PlanId(id))
        } else {
            Err(PlanIdError(id))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PlanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a plan could not be leased or released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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

/// A leased tool plan: its id and fingerprint, defensive copies of its definitions, and a
/// dispatcher that rejects any dispatch whose scope names another plan.
pub struct ToolPlanLease {
    id: PlanId,
    fingerprint: String,
    dispatcher: Arc<PlanBoundDispatcher>,
    release: Arc<ReleaseState>,
}

impl ToolPlanLease {
    /// A lease over `dispatcher` (whose definitions are snapshotted now) that runs `release`
    /// at most once.
    pub fn new<F, Fut>(id: PlanId, dispatcher: Arc<dyn ToolDispatcher>, release: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let definitions: Arc<[Definition]> = dispatcher.definitions().into();
        let fingerprint = plan_fingerprint(&definitions);
        let snapshot = SnapshotDispatcher {
            inner: dispatcher,
            definitions,
        };
        let callback: ReleaseCallback = Box::new(move || Box::pin(release()));
        ToolPlanLease {
            dispatcher: Arc::new(PlanBoundDispatcher {
                plan: id.clone(),
                inner: snapshot,
            }),
            id,
            fingerprint,
            release: Arc::new(ReleaseState {
                callback: Mutex::new(Some(callback)),
                outcome: Mutex::new(None),
                done: Notify::new(),
            }),
        }
    }

    /// The generation.
    pub fn id(&self) -> &PlanId {
        &self.id
    }

    /// `sha256:` over the definitions' names and fingerprints.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Copies of the definitions, sorted by name.
    pub fn definitions(&self) -> &[Definition] {
        self.dispatcher.definitions()
    }

    /// The plan's dispatcher.
    pub fn dispatcher(&self) -> Arc<dyn ToolDispatcher> {
        self.dispatcher.clone()
    }

    /// Releases the lease: the callback starts at most once, on its own task, so a blocked
    /// callback never blocks a caller beyond `cancel`. The first of {callback finished,
    /// a caller's `cancel` fired} fixes one outcome that every caller receives; a panicking
    /// callback is contained. Must be called within a tokio runtime.
    pub async fn release(&self, cancel: &CancellationToken) -> Result<(), ReleaseError> {
        let state = &self.release;
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
                    Ok(Err(e)) => Err(ReleaseError::Failed(crate::tool::bounded_text(
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
            .field("id", &self.id)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// `sha256:` + hex over each definition's name and fingerprint.
pub(crate) fn plan_fingerprint(definitions: &[Definition]) -> String {
    format!("sha256:{}", definitions_hash(definitions))
}

fn definitions_hash(definitions: &[Definition]) -> String {
    let fingerprints: Vec<String> = definitions.iter().map(Definition::fingerprint).collect();
    let fields = definitions
        .iter()
        .zip(&fingerprints)
        .flat_map(|(d, f)| [d.name().as_bytes(), f.as_bytes()]);
    crate::hash::fields_hex(fields)
}

/// Rejects dispatches whose scope names another plan.
struct PlanBoundDispatcher {
    plan: PlanId,
    inner: SnapshotDispatcher,
}

impl ToolDispatcher for PlanBoundDispatcher {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if request.scope.plan_id() != &self.plan {
            let (expected, found) = (self.plan.to_string(), request.scope.plan_id().to_string());
            return Box::pin(async move { Err(DispatchError::PlanMismatch { expected, found }) });
        }
        self.inner.dispatch(request)
    }

    fn is_composed(&self) -> bool {
        self.inner.inner.is_composed()
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
pub struct StaticToolPlanSource {
    id: PlanId,
    dispatcher: Arc<dyn ToolDispatcher>,
}

impl StaticToolPlanSource {
    /// Adapts `dispatcher`, composing it into a pipeline if it is not one yet.
    pub fn new(dispatcher: Arc<dyn ToolDispatcher>) -> Result<Self, PipelineError> {
        let dispatcher = compose_pipeline(dispatcher, Vec::new(), Vec::new())?;
        let id = PlanId(format!(
            "static:{}",
            definitions_hash(dispatcher.definitions())
        ));
        Ok(StaticToolPlanSource { id, dispatcher })
    }

    /// The one generation's id.
    pub fn plan_id(&self) -> &PlanId {
        &self.id
    }

    fn lease(&self) -> ToolPlanLease {
        ToolPlanLease::new(self.id.clone(), self.dispatcher.clone(), || async {
            Ok(())
        })
    }
}

impl fmt::Debug for StaticToolPlanSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticToolPlanSource")
            .field("id", &self.id)
            .finish_non_exhaustive()
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
            if id != &self.id {
                return Err(PlanError::UnknownGeneration(id.clone()));
            }
            Ok(self.lease())
        })
    }
}
