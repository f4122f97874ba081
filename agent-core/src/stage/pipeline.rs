//! Decorators and guards around the one dispatcher, assembled once into a pipeline:
//!
//! ```text
//! composed( decorators[0]( ... decorators[n]( guarded(base, guards[0], ..., guards[m]) ) ) )
//! ```
//!
//! Guards (the permission seam) sit innermost, right above the base dispatcher; trusted
//! decorators wrap them. Every layer is frozen to the base's definition snapshot, so no
//! wrapper can dispatch an undeclared tool, and no decorator may change the definition set.
//!
//! The trust boundary: the composed layer binds the scope it was called with to the call
//! (a task-local binding that lives exactly as long as the call's future), and the guarded
//! layer refuses the call unless the scope that reaches it is that one (the same run id,
//! turn, plan id and plan fingerprint, and the very same requester object) and bound by this
//! very pipeline. So a decorator cannot hand its guards a forged scope, nor a requester of its
//! own that would see and answer the questions the guards ask the user; a dispatch that a
//! decorator moves to another task finds no binding and fails closed; and a guard that
//! dispatches through its own pipeline (or a plan lease over it) while it evaluates finds its
//! own binding and is refused before anything runs. Panics of decorators are contained here
//! too and fail the call.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::dispatch::{
    ContractViolation, DispatchError, DispatchRequest, DispatchScope, SnapshotDispatcher,
    ToolDispatcher,
};
use crate::future::BoxFuture;
use crate::panic::{CatchUnwind, Panicked, contained};
use crate::tool::{Call, Definition, ToolResult};
use tokio_util::sync::CancellationToken;

/// Wraps a dispatcher in another (logging, metrics, caching, ...). Applied once, at
/// composition; `decorators[0]` is outermost.
pub trait ToolDispatchDecorator: Send + Sync {
    /// Wraps `inner`. `None` means the decorator could not wrap it, which fails composition.
    fn wrap(&self, inner: Arc<dyn ToolDispatcher>) -> Option<Arc<dyn ToolDispatcher>>;
}

/// What a guard sees about one dispatch.
#[derive(Clone, Copy)]
pub struct GuardRequest<'a> {
    /// Cancels the dispatch.
    pub cancel: &'a CancellationToken,
    /// Who is dispatching.
    pub scope: &'a DispatchScope,
    /// The declared definition of the called tool.
    pub definition: &'a Definition,
    /// The call.
    pub call: &'a Call,
}

impl fmt::Debug for GuardRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuardRequest")
            .field("scope", self.scope)
            .field("tool", &self.definition.name())
            .field("call", self.call)
            .finish_non_exhaustive()
    }
}

/// The permission seam: decides whether a call may run. A guard either calls
/// [`Next::run`] (once: it takes `self`, so a second call does not compile) or answers
/// without running the tool, typically with a model-visible [`ToolResult::problem`]. A guard
/// that dispatches through its own pipeline while it evaluates gets
/// [`ContractViolation::Reentered`] and nothing runs.
///
/// ```
/// use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
/// use agent_core::tool::{BoxFuture, Effect, ToolResult};
///
/// /// Refuses every mutating call.
/// struct ReadOnly;
///
/// impl ToolDispatchGuard for ReadOnly {
///     fn guard<'a>(&'a self, request: GuardRequest<'a>, next: Next<'a>) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
///         if request.definition.effect() == Effect::Mutating {
///             let refusal = ToolResult::problem(request.call.id(), "refused: this session is read-only");
///             return Box::pin(async move { Ok(refusal) });
///         }
///         next.run()
///     }
/// }
/// ```
pub trait ToolDispatchGuard: Send + Sync {
    /// Guards one dispatch.
    fn guard<'a>(
        &'a self,
        request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>>;

    /// What this guard is, for the plan fingerprint (a plan's fingerprint covers its guards
    /// in order). The default is the implementing type's name, which is fixed for one build;
    /// override it to name a configuration too (two guards of one type that decide
    /// differently should say so).
    fn identity(&self) -> &str {
        std::any::type_name::<Self>()
    }
}

/// The rest of the pipeline below a guard: the remaining guards, then the base dispatcher.
/// Single use by construction.
pub struct Next<'a> {
    guards: &'a [Arc<dyn ToolDispatchGuard>],
    first_index: usize,
    base: &'a dyn ToolDispatcher,
    request: DispatchRequest<'a>,
    definition: &'a Definition,
}

impl<'a> Next<'a> {
    /// Runs the rest of the pipeline.
    pub fn run(self) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        let Next {
            guards,
            first_index,
            base,
            request,
            definition,
        } = self;
        match guards.split_first() {
            None => base.dispatch(request),
            Some((guard, rest)) => Box::pin(async move {
                if request.cancel.is_cancelled() {
                    return Err(DispatchError::Cancelled {
                        call_id: request.call.id().to_owned(),
                    });
                }
                let next = Next {
                    guards: rest,
                    first_index: first_index + 1,
                    base,
                    request,
                    definition,
                };
                let guard_request = GuardRequest {
                    cancel: request.cancel,
                    scope: request.scope,
                    definition,
                    call: request.call,
                };
                let panicked = || {
                    DispatchError::Contract(ContractViolation::GuardPanicked { index: first_index })
                };
                let started = contained(|| guard.guard(guard_request, next));
                let Ok(future) = started else {
                    return Err(panicked());
                };
                let outcome = match CatchUnwind::new(future).await {
                    Ok(outcome) => outcome?,
                    Err(Panicked) => return Err(panicked()),
                };
                if outcome.call_id() != request.call.id() {
                    return Err(DispatchError::Contract(
                        ContractViolation::ResultForOtherCall {
                            tool: definition.name().to_owned(),
                            expected: request.call.id().to_owned(),
                            found: outcome.call_id().to_owned(),
                        },
                    ));
                }
                Ok(outcome)
            }),
        }
    }

    /// The definition of the called tool.
    pub fn definition(&self) -> &'a Definition {
        self.definition
    }
}

impl fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("remaining_guards", &self.guards.len())
            .finish_non_exhaustive()
    }
}

/// Which pipeline bound a call, and the scope it was called with.
struct Binding {
    pipeline: u64,
    scope: DispatchScope,
}

tokio::task_local! {
    /// The binding of the call whose future is being polled on this task.
    static BOUND: Binding;
}

/// Tells pipelines apart; never reused within a process.
static NEXT_PIPELINE: AtomicU64 = AtomicU64::new(1);

/// Whether the call being polled on this task was bound by `pipeline`, and with which
/// scope. `None`: no binding at all.
fn bound_scope_matches(pipeline: u64, scope: &DispatchScope) -> Option<bool> {
    BOUND
        .try_with(|binding| binding.pipeline == pipeline && binding.scope == *scope)
        .ok()
}

/// Runs the guards in order above the base dispatcher. Guards see the snapshot taken at
/// composition, never what the base reports later, and only the scope the pipeline bound.
struct GuardedDispatcher {
    pipeline: u64,
    base: Arc<dyn ToolDispatcher>,
    definitions: Arc<[Definition]>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
}

impl ToolDispatcher for GuardedDispatcher {
    fn definitions(&self) -> &[Definition] {
        &self.definitions
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        if bound_scope_matches(self.pipeline, request.scope) != Some(true) {
            return Box::pin(async {
                Err(DispatchError::Contract(ContractViolation::ScopeSubstituted))
            });
        }
        let Some(definition) = self.definition(request.call.name()) else {
            let name = request.call.name().to_owned();
            return Box::pin(async move { Err(DispatchError::Undeclared { name }) });
        };
        Next {
            guards: &self.guards,
            first_index: 0,
            base: &*self.base,
            request,
            definition,
        }
        .run()
    }
}

/// The outermost layer; marks the pipeline as composed, binds each call's scope, refuses
/// re-entry and contains the panics of the decorators below it.
struct ComposedDispatcher {
    pipeline: u64,
    inner: Arc<dyn ToolDispatcher>,
    /// `sha256` hex over the guards' identities, in order; `None` without guards.
    guard_digest: Option<Box<str>>,
}

impl ToolDispatcher for ComposedDispatcher {
    fn definitions(&self) -> &[Definition] {
        self.inner.definitions()
    }

    fn dispatch<'a>(
        &'a self,
        request: DispatchRequest<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        // Checked where the call is made: a guard's nested call is made while the guard is
        // polled, inside the outer call's binding.
        let reentered = BOUND
            .try_with(|binding| binding.pipeline == self.pipeline)
            .unwrap_or(false);
        if reentered {
            return Box::pin(async { Err(DispatchError::Contract(ContractViolation::Reentered)) });
        }
        let binding = Binding {
            pipeline: self.pipeline,
            // The whole scope, requester included: the guards ask the user through it.
            scope: request.scope.clone(),
        };
        let panicked = || DispatchError::Contract(ContractViolation::LayerPanicked);
        Box::pin(BOUND.scope(binding, async move {
            let Ok(future) = contained(|| self.inner.dispatch(request)) else {
                return Err(panicked());
            };
            match CatchUnwind::new(future).await {
                Ok(outcome) => outcome,
                Err(Panicked) => Err(panicked()),
            }
        }))
    }

    fn is_composed(&self) -> bool {
        true
    }

    fn guard_digest(&self) -> Option<&str> {
        self.guard_digest.as_deref()
    }
}

/// Why a pipeline could not be composed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The base is already a composed pipeline and more layers were given.
    #[error("the tool dispatch pipeline is already composed")]
    AlreadyComposed,
    /// A decorator panicked while wrapping; the panic was contained.
    #[error("tool dispatch decorator #{index} panicked while wrapping")]
    DecoratorPanicked {
        /// The decorator's position.
        index: usize,
    },
    /// A decorator returned nothing.
    #[error("tool dispatch decorator #{index} returned no dispatcher")]
    DecoratorReturnedNothing {
        /// The decorator's position.
        index: usize,
    },
    /// A decorator's dispatcher declares other tools (or other definitions) than the base.
    #[error("tool dispatch decorator #{index} changed the definition set")]
    DefinitionSetChanged {
        /// The decorator's position.
        index: usize,
    },
    /// The base dispatcher panicked while reporting its definitions; the panic was
    /// contained.
    #[error("the base tool dispatcher panicked while reporting its definitions")]
    BasePanicked,
    /// A guard panicked while reporting its identity; the panic was contained.
    #[error("tool dispatch guard #{index} panicked while reporting its identity")]
    GuardIdentityPanicked {
        /// The guard's position.
        index: usize,
    },
}

/// Assembles the pipeline once: guards innermost (in order, `guards[0]` first), then the
/// decorators (`decorators[0]` outermost), every layer frozen to the base's definitions.
/// Composing an already composed pipeline again is an error unless both lists are empty.
/// Every call into a layer made here (the base's and each decorator's definitions, each
/// wrap, each guard's identity) is panic-contained and fails with a [`PipelineError`].
///
/// ```
/// use std::collections::BTreeMap;
/// use std::sync::Arc;
/// use agent_core::stage::{compose_pipeline, Dispatcher, ToolDispatcher};
///
/// let base: Arc<dyn ToolDispatcher> = Arc::new(Dispatcher::new(BTreeMap::new())?);
/// let pipeline = compose_pipeline(base, Vec::new(), Vec::new())?;
/// assert!(compose_pipeline(pipeline.clone(), Vec::new(), Vec::new()).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn compose_pipeline(
    base: Arc<dyn ToolDispatcher>,
    guards: Vec<Arc<dyn ToolDispatchGuard>>,
    decorators: Vec<Arc<dyn ToolDispatchDecorator>>,
) -> Result<Arc<dyn ToolDispatcher>, PipelineError> {
    // Everything the wrapped layers are asked here runs inside panic containment: a
    // panicking layer fails composition with a typed error instead of unwinding into the
    // caller.
    let composed = contained(|| base.is_composed()).map_err(|()| PipelineError::BasePanicked)?;
    if composed {
        return if guards.is_empty() && decorators.is_empty() {
            Ok(base)
        } else {
            Err(PipelineError::AlreadyComposed)
        };
    }
    let snapshot: Arc<[Definition]> =
        contained(|| base.definitions().into()).map_err(|()| PipelineError::BasePanicked)?;
    let fingerprints: Vec<(String, String)> = snapshot
        .iter()
        .map(|d| (d.name().to_owned(), d.fingerprint()))
        .collect();
    let guard_digest = if guards.is_empty() {
        None
    } else {
        let mut identities = Vec::with_capacity(guards.len());
        for (index, guard) in guards.iter().enumerate() {
            let identity = contained(|| guard.identity().to_owned())
                .map_err(|()| PipelineError::GuardIdentityPanicked { index })?;
            identities.push(identity);
        }
        let digest = crate::hash::fields_digest(identities.iter().map(String::as_bytes));
        Some(Box::from(digest.as_str()))
    };
    let pipeline = NEXT_PIPELINE.fetch_add(1, Ordering::Relaxed);
    let guarded: Arc<dyn ToolDispatcher> = Arc::new(GuardedDispatcher {
        pipeline,
        base,
        definitions: snapshot.clone(),
        guards,
    });
    let mut current: Arc<dyn ToolDispatcher> = Arc::new(SnapshotDispatcher {
        inner: guarded,
        definitions: snapshot.clone(),
    });
    for (index, decorator) in decorators.iter().enumerate().rev() {
        let inner = current.clone();
        let wrapped = match contained(|| decorator.wrap(inner)) {
            Ok(Some(wrapped)) => wrapped,
            Ok(None) => return Err(PipelineError::DecoratorReturnedNothing { index }),
            Err(()) => return Err(PipelineError::DecoratorPanicked { index }),
        };
        let declared: Vec<(String, String)> = contained(|| {
            wrapped
                .definitions()
                .iter()
                .map(|d| (d.name().to_owned(), d.fingerprint()))
                .collect()
        })
        .map_err(|()| PipelineError::DecoratorPanicked { index })?;
        if declared != fingerprints {
            return Err(PipelineError::DefinitionSetChanged { index });
        }
        current = Arc::new(SnapshotDispatcher {
            inner: wrapped,
            definitions: snapshot.clone(),
        });
    }
    Ok(Arc::new(ComposedDispatcher {
        pipeline,
        inner: current,
        guard_digest,
    }))
}
