//! The one tool dispatcher: validates every call against an immutable snapshot of
//! definitions, runs the tool with a call-scoped reporter, contains its panics, preserves
//! cancellation and checks what the tool returned.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use super::plan_id::{PlanId, is_sha256_fingerprint};
use crate::future::unless_cancelled;
use crate::interaction::{Requester, UnavailableRequester};
use crate::panic::{CatchUnwind, Panicked, contained};
use crate::run_id::{MAX_RUN_ID_BYTES, RunId};
use crate::tool::{
    BoxFuture, Call, Definition, Effect, ExecutionError, MAX_NOTE_BYTES, MAX_PAYLOAD_BYTES,
    Progress, ReplaySafety, ReportError, Reporter, RetryDisposition, Tool, ToolContext, ToolResult,
};

/// Who is dispatching: the run, its turn, the tool plan the run leased, and the run-bound
/// [`Requester`] through which guards may ask the user. Every layer of a pipeline sees the
/// same scope, requester included: an assembled pipeline keeps the scope it was called with
/// and fails the call with [`ContractViolation::ScopeSubstituted`] when another one reaches
/// its guards, so no layer can put a requester of its own before the guards; a plan lease
/// rejects a scope that names another plan id or fingerprint.
#[derive(Clone)]
pub struct DispatchScope {
    run_id: RunId,
    turn: u32,
    plan_id: PlanId,
    plan_fingerprint: Arc<str>,
    requester: Option<Arc<dyn Requester>>,
}

impl fmt::Debug for DispatchScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchScope")
            .field("run_id", &self.run_id)
            .field("turn", &self.turn)
            .field("plan_id", &self.plan_id)
            .field("plan_fingerprint", &self.plan_fingerprint)
            .field("interactive", &self.requester.is_some())
            .finish()
    }
}

/// Scopes are equal when they name the same run, turn and plan and carry the very same
/// requester (one shared object, or none on both sides). The requester is a capability, so
/// it compares by identity: another requester that answers alike is still another, which is
/// what keeps a layer from answering the guards' questions itself.
impl PartialEq for DispatchScope {
    fn eq(&self, other: &Self) -> bool {
        // A pipeline compares the scope that reaches its guards with the clone it bound,
        // which shares every string: equal pointers settle most comparisons.
        let same = crate::text::same_text;
        self.turn == other.turn
            && same_requester(self.requester.as_ref(), other.requester.as_ref())
            && same(self.run_id.as_arc(), other.run_id.as_arc())
            && same(self.plan_id.as_arc(), other.plan_id.as_arc())
            && same(&self.plan_fingerprint, &other.plan_fingerprint)
    }
}

/// Whether two scopes carry the same requester object (`Arc::ptr_eq` ignores the vtable,
/// which may differ between codegen units for one object).
fn same_requester(a: Option<&Arc<dyn Requester>>, b: Option<&Arc<dyn Requester>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl Eq for DispatchScope {}

/// Why a [`DispatchScope`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeError {
    /// The run id is empty, longer than [`MAX_RUN_ID_BYTES`] or has surrounding whitespace.
    #[error("run id {0:?} must be non-empty, trimmed and at most {MAX_RUN_ID_BYTES} bytes")]
    RunId(String),
    /// Turns count from 1.
    #[error("turn must be at least 1")]
    Turn,
    /// The plan fingerprint is not `sha256:` followed by 64 lowercase hex digits.
    #[error("plan fingerprint {0:?} must be `sha256:` followed by 64 lowercase hex digits")]
    PlanFingerprint(String),
}

impl DispatchScope {
    /// A validated scope.
    ///
    /// ```
    /// use agent_core::stage::{DispatchScope, PlanId};
    ///
    /// let plan = PlanId::new("static:demo")?;
    /// let fingerprint = format!("sha256:{}", "0".repeat(64));
    /// let scope = DispatchScope::new("run-1", 1, plan, fingerprint)?;
    /// assert_eq!(scope.turn(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(
        run_id: impl Into<Arc<str>>,
        turn: u32,
        plan_id: PlanId,
        plan_fingerprint: impl Into<Arc<str>>,
    ) -> Result<Self, ScopeError> {
        let (run_id, plan_fingerprint) = (run_id.into(), plan_fingerprint.into());
        let run_id =
            RunId::new(Arc::clone(&run_id)).map_err(|_| ScopeError::RunId(run_id.to_string()))?;
        if turn == 0 {
            return Err(ScopeError::Turn);
        }
        if !is_sha256_fingerprint(&plan_fingerprint) {
            return Err(ScopeError::PlanFingerprint(plan_fingerprint.to_string()));
        }
        Ok(DispatchScope {
            run_id,
            turn,
            plan_id,
            plan_fingerprint,
            requester: None,
        })
    }

    /// The scope of a run's call, from values the kernel already validated (the run's id,
    /// its leased plan's id and fingerprint), so the run pays no second check for them.
    pub(crate) fn of_run(
        run_id: RunId,
        turn: u32,
        plan_id: PlanId,
        plan_fingerprint: Arc<str>,
        requester: Arc<dyn Requester>,
    ) -> Result<Self, ScopeError> {
        if turn == 0 {
            return Err(ScopeError::Turn);
        }
        debug_assert!(is_sha256_fingerprint(&plan_fingerprint));
        Ok(DispatchScope {
            run_id,
            turn,
            plan_id,
            plan_fingerprint,
            requester: Some(requester),
        })
    }

    /// The same run, turn and plan, letting guards ask the user through `requester`. The
    /// result is another scope than `self` (scopes compare their requesters by identity), so
    /// a layer inside a pipeline that swaps the requester fails the call.
    pub fn with_requester(mut self, requester: Arc<dyn Requester>) -> Self {
        self.requester = Some(requester);
        self
    }

    /// Asks the run's user; [`UnavailableRequester`] when the scope has no requester.
    pub fn requester(&self) -> &dyn Requester {
        match &self.requester {
            Some(requester) => &**requester,
            None => &UnavailableRequester,
        }
    }

    /// The run.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The turn, from 1.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// The leased plan's id.
    pub fn plan_id(&self) -> &PlanId {
        &self.plan_id
    }

    /// The leased plan's fingerprint (`sha256:...`).
    pub fn plan_fingerprint(&self) -> &str {
        &self.plan_fingerprint
    }

    /// The shared fingerprint, for comparisons that a shared pointer settles.
    pub(crate) fn plan_fingerprint_arc(&self) -> &Arc<str> {
        &self.plan_fingerprint
    }
}

/// A tool broke its contract, or a pipeline layer misbehaved. The text never includes what
/// the tool or layer returned or printed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractViolation {
    /// The tool panicked; the panic was contained.
    #[error("tool `{tool}` panicked")]
    ToolPanicked {
        /// The tool.
        tool: String,
    },
    /// A guard panicked; the panic was contained.
    #[error("tool dispatch guard #{index} panicked")]
    GuardPanicked {
        /// The guard's position.
        index: usize,
    },
    /// The result answers another call.
    #[error("tool `{tool}` returned a result for call `{found}` while running call `{expected}`")]
    ResultForOtherCall {
        /// The tool.
        tool: String,
        /// The active call.
        expected: String,
        /// The call id in the result.
        found: String,
    },
    /// The execution error belongs to another call.
    #[error(
        "tool `{tool}` returned an execution error for call `{found}` while running call `{expected}`"
    )]
    ErrorForOtherCall {
        /// The tool.
        tool: String,
        /// The active call.
        expected: String,
        /// The call id in the error.
        found: String,
    },
    /// A read-only tool cannot leave an uncertain outcome.
    #[error("read-only tool `{tool}` reported an uncertain outcome")]
    UncertainFromReadOnly {
        /// The tool.
        tool: String,
    },
    /// A replay-unsafe tool may not advise a retry.
    #[error("replay-unsafe tool `{tool}` advised a retry")]
    RetryFromReplayUnsafe {
        /// The tool.
        tool: String,
    },
    /// The result content is larger than [`MAX_PAYLOAD_BYTES`].
    #[error("tool `{tool}` returned {size} bytes; at most 1 MiB is allowed")]
    ResultTooLarge {
        /// The tool.
        tool: String,
        /// Content size.
        size: usize,
    },
    /// A layer above the guards (a decorator, or the dispatcher a plan wraps) panicked while
    /// dispatching; the panic was contained and the call failed.
    #[error("a tool dispatch layer panicked")]
    LayerPanicked,
    /// The scope that reached the guards is not the one the pipeline was called with (it
    /// names another run, turn or plan, or carries another requester): a layer substituted
    /// it. No guard or tool code ran, and no question reached either requester.
    #[error("the dispatch scope was substituted inside the pipeline")]
    ScopeSubstituted,
    /// A dispatch re-entered the pipeline it is running in (a guard dispatching through its
    /// own pipeline or plan lease). The nested call ran no guard or tool code.
    #[error("a dispatch re-entered its own pipeline")]
    Reentered,
}

/// Execution and progress reporting both failed. Its cancellation status comes from the
/// execution failure only, so a reporter that was cancelled cannot make a failed call look
/// cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchFailure {
    execution: ExecutionError,
    reporter: ReportError,
}

impl DispatchFailure {
    /// The tool's execution error.
    pub fn execution(&self) -> &ExecutionError {
        &self.execution
    }

    /// The reporter's failure.
    pub fn reporter(&self) -> &ReportError {
        &self.reporter
    }
}

impl fmt::Display for DispatchFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tool execution and progress reporting both failed")
    }
}

impl std::error::Error for DispatchFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.execution)
    }
}

/// Why a dispatch did not produce a [`ToolResult`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// The dispatch was cancelled before or while the tool ran.
    #[error("dispatch of call `{call_id}` was cancelled")]
    Cancelled {
        /// The call.
        call_id: String,
    },
    /// No tool of that name is declared; no tool code ran.
    #[error("tool `{name}` is not available")]
    Undeclared {
        /// The requested name.
        name: String,
    },
    /// The tool reported an infrastructure failure.
    #[error(transparent)]
    Execution(ExecutionError),
    /// The tool and the reporter both failed.
    #[error(transparent)]
    Failure(DispatchFailure),
    /// The tool succeeded but progress reporting failed; the result was discarded.
    #[error(transparent)]
    Reporter(ReportError),
    /// A tool or layer broke its contract.
    #[error(transparent)]
    Contract(ContractViolation),
    /// A plan lease received a scope naming another plan.
    #[error("dispatch scope names plan `{found}` but the lease is plan `{expected}`")]
    PlanMismatch {
        /// The lease's plan.
        expected: String,
        /// The scope's plan.
        found: String,
    },
    /// A plan lease received a scope naming its plan id with another fingerprint.
    #[error("dispatch scope names fingerprint `{found}` but the lease has `{expected}`")]
    FingerprintMismatch {
        /// The lease's fingerprint.
        expected: String,
        /// The scope's fingerprint.
        found: String,
    },
}

impl DispatchError {
    /// Whether the dispatch was cancelled (directly, or through the execution error's
    /// cause). A reporter failure never counts.
    pub fn is_cancelled(&self) -> bool {
        match self {
            DispatchError::Cancelled { .. } => true,
            DispatchError::Execution(e) => e.is_cancelled(),
            DispatchError::Failure(f) => f.execution.is_cancelled(),
            _ => false,
        }
    }
}

/// One dispatch: the cancellation token of the run, the scope, the call and the reporter
/// that receives progress.
#[derive(Clone, Copy)]
pub struct DispatchRequest<'a> {
    /// Cancels the dispatch.
    pub cancel: &'a CancellationToken,
    /// Who is dispatching.
    pub scope: &'a DispatchScope,
    /// The call.
    pub call: &'a Call,
    /// Receives progress for this call.
    pub reporter: &'a dyn Reporter,
}

impl fmt::Debug for DispatchRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DispatchRequest")
            .field("scope", self.scope)
            .field("call", self.call)
            .finish_non_exhaustive()
    }
}

/// Runs tool calls. The canonical implementation is [`Dispatcher`]; decorators wrap one
/// another; [`compose_pipeline`](super::compose_pipeline) assembles them.
pub trait ToolDispatcher: Send + Sync {
    /// Every declared tool, sorted by name.
    fn definitions(&self) -> &[Definition];

    /// Runs one call.
    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>>;

    /// The definition of `name`, if declared.
    fn definition(&self, name: &str) -> Option<&Definition> {
        let definitions = self.definitions();
        definitions
            .binary_search_by(|d| d.name().cmp(name))
            .ok()
            .map(|i| &definitions[i])
    }

    /// Whether this is an assembled pipeline (which cannot be composed again).
    #[doc(hidden)]
    fn is_composed(&self) -> bool {
        false
    }

    /// The digest of the guards an assembled pipeline runs (`None` when it runs none), which
    /// a plan's fingerprint covers.
    #[doc(hidden)]
    fn guard_digest(&self) -> Option<&str> {
        None
    }
}

/// Why a [`Dispatcher`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DispatcherError {
    /// The map key and the tool's own name differ.
    #[error("tool bean `{key}` declares model name `{name}`")]
    NameMismatch {
        /// The map key (bean name).
        key: String,
        /// The definition's name.
        name: String,
    },
}

/// The canonical in-process dispatcher over the tools `compose!` injects as
/// `BTreeMap<String, Arc<dyn Tool>>`.
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use agent_core::stage::{Dispatcher, DispatchRequest, DispatchScope, PlanId, ToolDispatcher};
/// use agent_core::tool::*;
/// use serde_json::json;
/// use tokio_util::sync::CancellationToken;
///
/// struct Echo(Definition);
/// impl Tool for Echo {
///     fn definition(&self) -> &Definition { &self.0 }
///     fn execute<'a>(&'a self, call: Call, _ctx: ToolContext<'a>) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
///         Box::pin(async move { Ok(ToolResult::success(call.id(), call.arguments().to_string())) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let echo = Definition::builder("echo", "Echoes.").effect(Effect::ReadOnly).replay_safety(ReplaySafety::Safe).build()?;
/// let tools = BTreeMap::from([("echo".to_owned(), Arc::new(Echo(echo)) as Arc<dyn Tool>)]);
/// let dispatcher = Dispatcher::new(tools)?;
///
/// let scope = DispatchScope::new("run-1", 1, PlanId::new("static:x")?, format!("sha256:{}", "0".repeat(64)))?;
/// let call = Call::new("c1", "echo", json!({ "x": 1 }))?;
/// let cancel = CancellationToken::new();
/// let request = DispatchRequest { cancel: &cancel, scope: &scope, call: &call, reporter: &NoopReporter };
/// assert_eq!(dispatcher.dispatch(request).await?.content(), r#"{"x":1}"#);
///
/// let unknown = Call::new("c2", "rm", json!({}))?;
/// let request = DispatchRequest { call: &unknown, ..request };
/// assert!(dispatcher.dispatch(request).await.is_err());
/// # Ok(())
/// # }
/// ```
pub struct Dispatcher {
    definitions: Vec<Definition>,
    tools: Vec<Arc<dyn Tool>>,
}

impl Dispatcher {
    /// Snapshots every tool's definition once; a key that differs from its definition's name
    /// is rejected. Later changes to what a tool reports are ignored.
    pub fn new(tools: BTreeMap<String, Arc<dyn Tool>>) -> Result<Self, DispatcherError> {
        if tools.is_empty() {
            // Text-only agents build this with every engine: nothing to snapshot.
            return Ok(Dispatcher::empty());
        }
        let mut definitions = Vec::with_capacity(tools.len());
        let mut ordered = Vec::with_capacity(tools.len());
        for (key, tool) in tools {
            let definition = tool.definition().clone();
            if definition.name() != key {
                return Err(DispatcherError::NameMismatch {
                    key,
                    name: definition.name().to_owned(),
                });
            }
            definitions.push(definition);
            ordered.push(tool);
        }
        Ok(Dispatcher {
            definitions,
            tools: ordered,
        })
    }
}

impl Dispatcher {
    /// The dispatcher without tools.
    pub(crate) const fn empty() -> Self {
        Dispatcher {
            definitions: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// Whether it has no tools.
    pub(crate) fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.definitions.iter().map(Definition::name).collect();
        f.debug_struct("Dispatcher").field("tools", &names).finish()
    }
}

impl Dispatcher {
    /// One dispatch, the future [`ToolDispatcher::dispatch`] boxes. Unlike a `select!`, it
    /// registers on the cancellation token only once the tool is pending, so a tool that
    /// finishes on its first poll (most do) never takes the token's lock for the wait.
    pub(crate) async fn run(
        &self,
        request: DispatchRequest<'_>,
    ) -> Result<ToolResult, DispatchError> {
        let call = request.call;
        if request.cancel.is_cancelled() {
            return Err(DispatchError::Cancelled {
                call_id: call.id().to_owned(),
            });
        }
        let Ok(index) = self
            .definitions
            .binary_search_by(|d| d.name().cmp(call.name()))
        else {
            return Err(DispatchError::Undeclared {
                name: call.name().to_owned(),
            });
        };
        let definition = &self.definitions[index];
        let mut reporter = ScopedReporter {
            inner: request.reporter,
            call_id: call.id(),
            first_failure: Mutex::new(None),
        };
        let ctx = ToolContext::new(&reporter, request.cancel);
        let Ok(future) = contained(|| self.tools[index].execute(call.clone(), ctx)) else {
            return check_outcome(definition, call, Err(Panicked), None);
        };
        let mut execution = CatchUnwind::new(future);
        let Some(outcome) = unless_cancelled(&mut execution, request.cancel).await else {
            return Err(DispatchError::Cancelled {
                call_id: call.id().to_owned(),
            });
        };
        // The tool's future (already discarded) was the last borrower of the reporter, so
        // its first failure is read without taking the lock.
        drop(execution);
        let reporter_failure = reporter
            .first_failure
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        check_outcome(definition, call, outcome, reporter_failure)
    }
}

impl ToolDispatcher for Dispatcher {
    fn definitions(&self) -> &[Definition] {
        &self.definitions
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        Box::pin(self.run(request))
    }
}

/// Applies the contract checks to what a tool returned.
fn check_outcome(
    definition: &Definition,
    call: &Call,
    outcome: Result<Result<ToolResult, ExecutionError>, Panicked>,
    reporter_failure: Option<ReportError>,
) -> Result<ToolResult, DispatchError> {
    let tool = || definition.name().to_owned();
    let contract = |violation| Err(DispatchError::Contract(violation));
    match outcome {
        Err(Panicked) => contract(ContractViolation::ToolPanicked { tool: tool() }),
        Ok(Err(error)) => {
            if error.call_id() != call.id() {
                return contract(ContractViolation::ErrorForOtherCall {
                    tool: tool(),
                    expected: call.id().to_owned(),
                    found: error.call_id().to_owned(),
                });
            }
            if error.state() == crate::tool::ExecutionState::Uncertain
                && definition.effect() == Effect::ReadOnly
            {
                return contract(ContractViolation::UncertainFromReadOnly { tool: tool() });
            }
            if error.retry() == RetryDisposition::Allowed
                && definition.replay_safety() == ReplaySafety::Unsafe
            {
                return contract(ContractViolation::RetryFromReplayUnsafe { tool: tool() });
            }
            Err(match reporter_failure {
                Some(reporter) => DispatchError::Failure(DispatchFailure {
                    execution: error,
                    reporter,
                }),
                None => DispatchError::Execution(error),
            })
        }
        Ok(Ok(result)) => {
            // Contract checks come first, as for errors: a reporter failure must not hide a
            // broken contract.
            if result.call_id() != call.id() {
                return contract(ContractViolation::ResultForOtherCall {
                    tool: tool(),
                    expected: call.id().to_owned(),
                    found: result.call_id().to_owned(),
                });
            }
            if result.content().len() > MAX_PAYLOAD_BYTES {
                return contract(ContractViolation::ResultTooLarge {
                    tool: tool(),
                    size: result.content().len(),
                });
            }
            if let Some(reporter) = reporter_failure {
                return Err(DispatchError::Reporter(reporter));
            }
            Ok(result)
        }
    }
}

/// The reporter a tool sees: forwards valid notes for its own call and remembers the first
/// failure, even if the tool ignored it.
struct ScopedReporter<'a> {
    inner: &'a dyn Reporter,
    call_id: &'a str,
    first_failure: Mutex<Option<ReportError>>,
}

impl ScopedReporter<'_> {
    fn remember(&self, error: &ReportError) {
        let mut slot = self
            .first_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(error.clone());
        }
    }
}

impl Reporter for ScopedReporter<'_> {
    fn report(&self, progress: Progress) -> BoxFuture<'_, Result<(), ReportError>> {
        Box::pin(async move {
            let invalid = if progress.call_id() != self.call_id {
                Some("progress names another call")
            } else if progress.message().trim().is_empty() {
                Some("progress message is empty")
            } else if progress.message().len() > MAX_NOTE_BYTES {
                Some("progress message is longer than 4096 bytes")
            } else {
                None
            };
            let result = match invalid {
                Some(why) => Err(ReportError::new(why)),
                None => match CatchUnwind::new(self.inner.report(progress)).await {
                    Ok(result) => result,
                    Err(Panicked) => Err(ReportError::new("reporter panicked")),
                },
            };
            if let Err(error) = &result {
                self.remember(error);
            }
            result
        })
    }
}

/// Freezes a definition set: rejects undeclared calls before delegating, so no wrapper can
/// dispatch a tool outside the snapshot.
pub(crate) struct SnapshotDispatcher {
    pub(crate) inner: Arc<dyn ToolDispatcher>,
    pub(crate) definitions: Arc<[Definition]>,
}

impl ToolDispatcher for SnapshotDispatcher {
    fn definitions(&self) -> &[Definition] {
        &self.definitions
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        dispatch_declared(&self.definitions, &*self.inner, request)
    }
}

/// Dispatches `request` through `inner` only if `definitions` (sorted by name) declare it.
pub(crate) fn dispatch_declared<'a, D: ToolDispatcher + ?Sized>(
    definitions: &[Definition],
    inner: &'a D,
    request: DispatchRequest<'a>,
) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
    let declared = definitions
        .binary_search_by(|d| d.name().cmp(request.call.name()))
        .is_ok();
    if !declared {
        let name = request.call.name().to_owned();
        return Box::pin(async move { Err(DispatchError::Undeclared { name }) });
    }
    inner.dispatch(request)
}

/// A shared dispatcher dispatches like the one it points at.
impl<T: ToolDispatcher + ?Sized> ToolDispatcher for Arc<T> {
    fn definitions(&self) -> &[Definition] {
        (**self).definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        (**self).dispatch(request)
    }

    fn definition(&self, name: &str) -> Option<&Definition> {
        (**self).definition(name)
    }

    fn is_composed(&self) -> bool {
        (**self).is_composed()
    }

    fn guard_digest(&self) -> Option<&str> {
        (**self).guard_digest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> DispatchScope {
        let plan = PlanId::new("static:test").expect("valid plan id");
        DispatchScope::new("run-1", 1, plan, format!("sha256:{}", "0".repeat(64)))
            .expect("valid scope")
    }

    /// The requester is compared as the capability it is: by identity, never by what it
    /// answers, and a scope without one differs from a scope with one.
    #[test]
    fn scopes_compare_their_requesters_by_identity() {
        let user: Arc<dyn Requester> = Arc::new(UnavailableRequester);
        let other: Arc<dyn Requester> = Arc::new(UnavailableRequester);
        let bound = scope().with_requester(user.clone());

        assert_eq!(bound, bound.clone(), "a clone shares the requester");
        assert_eq!(bound, scope().with_requester(user), "the same object");
        assert_ne!(bound, scope().with_requester(other), "an alike object");
        assert_ne!(bound, scope(), "a requester removed");
        assert_ne!(scope(), bound, "a requester added");
        assert_eq!(scope(), scope(), "no requester on either side");
    }
}
