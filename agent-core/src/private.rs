//! Support for generated code. Not public API: reached only through the hidden, versioned
//! `agent_core::__private_v0_1` path that `compose!` and the attributes emit (or
//! `<path>::__private_v0_1` under `crate = path`).

use crate::compose::{
    BoxError, BuildError, Cleanup, CleanupFailure, Managed, Override, OverrideKind, StopError,
};
use crate::tool::BoxFuture;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

pub use agent_macros::compose_finish;

/// Beans are shared by cloning into every consumer and may cross threads.
#[diagnostic::on_unimplemented(
    message = "[wrong-output] a bean must be `Clone + Send + Sync + 'static`, but `{Self}` is not",
    label = "produced here",
    note = "share it instead: return `Arc<{Self}>`"
)]
pub trait BeanOutput: Clone + Send + Sync + 'static {}
impl<T: Clone + Send + Sync + 'static> BeanOutput for T {}

/// Only `Arc<dyn Tool>` is a tool bean.
#[diagnostic::on_unimplemented(
    message = "[wrong-output] `#[tool]` factories must produce `Arc<dyn agent_core::tool::Tool>`, but this one produces `{Self}`",
    label = "not `Arc<dyn agent_core::tool::Tool>`",
    note = "convert explicitly: `Arc::new(MyTool) as Arc<dyn agent_core::tool::Tool>`"
)]
pub trait ToolOutput {}
impl ToolOutput for Arc<dyn crate::tool::Tool> {}

/// Only `Arc<dyn ModelProvider>` is a model provider bean.
#[diagnostic::on_unimplemented(
    message = "[wrong-output] `#[model_provider]` factories must produce `Arc<dyn agent_core::model::ModelProvider>`, but this one produces `{Self}`",
    label = "not `Arc<dyn agent_core::model::ModelProvider>`",
    note = "convert explicitly: `Arc::new(MyProvider) as Arc<dyn agent_core::model::ModelProvider>`"
)]
pub trait ModelProviderOutput {}
impl ModelProviderOutput for Arc<dyn crate::model::ModelProvider> {}

/// A stage bean is an `Arc` of a trait object (checked syntactically for `dyn`).
#[diagnostic::on_unimplemented(
    message = "[wrong-output] `#[stage]` factories must produce `Arc<dyn YourStageTrait>`, but this one produces `{Self}`",
    label = "not an `Arc` of a stage trait object"
)]
pub trait StageOutput {}
impl<T: ?Sized + Send + Sync + 'static> StageOutput for Arc<T> {}

/// Compile-time assertion used by `#[bean]`.
pub const fn assert_bean_output<T: BeanOutput>() {}
/// Compile-time assertion used by `#[tool]`.
pub const fn assert_tool_output<T: ToolOutput + ?Sized>() {}
/// Compile-time assertion used by `#[model_provider]`.
pub const fn assert_model_provider_output<T: ModelProviderOutput + ?Sized>() {}
/// Compile-time assertion used by `#[stage]`.
pub const fn assert_stage_output<T: StageOutput + ?Sized>() {}

/// Adapts a factory returning `T`.
pub fn from_plain<T>(value: T) -> Result<Managed<T>, BoxError> {
    Ok(Managed::new(value))
}

/// Adapts a factory returning `Result<T, E>`.
pub fn from_result<T, E: Into<BoxError>>(result: Result<T, E>) -> Result<Managed<T>, BoxError> {
    result.map(Managed::new).map_err(Into::into)
}

/// Adapts a factory returning `Managed<T>`.
pub fn from_managed<T>(managed: Managed<T>) -> Result<Managed<T>, BoxError> {
    Ok(managed)
}

/// Adapts a factory returning `Result<Managed<T>, E>`.
pub fn from_result_managed<T, E: Into<BoxError>>(
    result: Result<Managed<T>, E>,
) -> Result<Managed<T>, BoxError> {
    result.map_err(Into::into)
}

/// Constructs beans in order, registering cleanups, and rolls back on the first failure.
#[derive(Default)]
pub struct Builder {
    cleanups: Vec<(&'static str, Cleanup)>,
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Builder::default()
    }

    /// Builds one bean: the override if one is set, else `factory`. On success the cleanup
    /// is registered; on failure every registered cleanup runs in reverse and the error
    /// names `bean`. The same steps as the generated code, [`replaced`](Self::replaced) or
    /// [`built`](Self::built), for hand-written construction.
    pub async fn bean<T, F>(
        &mut self,
        bean: &'static str,
        mut replacement: Override<T>,
        factory: F,
    ) -> Result<T, BuildError>
    where
        T: Send + 'static,
        F: Future<Output = Result<Managed<T>, BoxError>>,
    {
        if replacement.is_set() {
            return self.replaced(bean, &mut replacement).await;
        }
        match self.built(bean, factory.await) {
            Ok(value) => Ok(value),
            Err(rollback) => rollback.await,
        }
    }

    /// Builds `bean` from its override, which must be set (the cold path of a generated
    /// bean; kept out of line so the hot path stays small).
    #[cold]
    #[inline(never)]
    pub fn replaced<T: Send + 'static>(
        &mut self,
        bean: &'static str,
        replacement: &mut Override<T>,
    ) -> BoxFuture<'_, Result<T, BuildError>> {
        let replacement = std::mem::take(replacement);
        Box::pin(self.replace(bean, replacement))
    }

    /// Registers what a factory returned: `Ok` with the value, or `Err` with
    /// the rollback to await.
    #[inline]
    pub fn built<T: Send + 'static>(
        &mut self,
        bean: &'static str,
        result: Result<Managed<T>, BoxError>,
    ) -> Result<T, BoxFuture<'_, Result<T, BuildError>>> {
        match result {
            Ok(managed) => Ok(self.register(bean, managed)),
            Err(error) => Err(self.fail_later(bean, error)),
        }
    }

    /// The rollback path of [`built`](Self::built), out of line like
    /// [`replaced`](Self::replaced).
    #[cold]
    #[inline(never)]
    fn fail_later<T: Send + 'static>(
        &mut self,
        bean: &'static str,
        error: BoxError,
    ) -> BoxFuture<'_, Result<T, BuildError>> {
        Box::pin(async move { Err(self.fail(bean, error).await) })
    }

    /// Registers a built bean's cleanup and returns its value.
    #[inline]
    fn register<T>(&mut self, bean: &'static str, managed: Managed<T>) -> T {
        let (value, cleanup) = managed.into_parts();
        if let Some(cleanup) = cleanup {
            self.cleanups.push((bean, cleanup));
        }
        value
    }

    /// Builds a bean from its override (cold path: tests).
    async fn replace<T>(
        &mut self,
        bean: &'static str,
        replacement: Override<T>,
    ) -> Result<T, BuildError> {
        let built = match replacement.0 {
            OverrideKind::Keep => return Err(self.fail(bean, "no override was set".into()).await),
            OverrideKind::Value(value) => Ok(Managed::new(value)),
            OverrideKind::Factory(make) => make().await,
        };
        match built {
            Ok(managed) => Ok(self.register(bean, managed)),
            Err(error) => Err(self.fail(bean, error).await),
        }
    }

    /// Rolls back after `bean` failed: runs every registered cleanup in reverse and returns
    /// the error that names the bean and keeps `error` as its source.
    async fn fail(&mut self, bean: &'static str, error: BoxError) -> BuildError {
        let mut failures = Vec::new();
        while let Some((owner, cleanup)) = self.cleanups.pop() {
            if let Err(e) = cleanup().await {
                failures.push(CleanupFailure::new(owner, e));
            }
        }
        BuildError::new(bean, error, failures)
    }

    /// Hands the registered cleanups to the application.
    pub fn finish(self) -> Lifecycle {
        Lifecycle {
            phase: Mutex::new(Phase::Idle(Left {
                pending: self.cleanups,
                running: None,
                failures: Vec::new(),
            })),
            changed: tokio::sync::Notify::new(),
        }
    }
}

type RunningCleanup = (&'static str, BoxFuture<'static, Result<(), BoxError>>);

/// What a `stop` has not finished: the cleanups not started, the one it was running when
/// its caller was cancelled, and the failures so far.
#[derive(Default)]
struct Left {
    pending: Vec<(&'static str, Cleanup)>,
    running: Option<RunningCleanup>,
    failures: Vec<CleanupFailure>,
}

/// The cleanups of a built application; `stop` runs them once.
pub struct Lifecycle {
    phase: Mutex<Phase>,
    /// Wakes callers waiting for a running stop, when it finished or was cancelled.
    changed: tokio::sync::Notify,
}

/// Where stopping stands. A plain lock and a notification instead of an async once-cell:
/// the usual single `stop` then costs one lock to start and one to finish.
enum Phase {
    /// Not stopped yet, or the last stopping caller was cancelled: what is left to do.
    Idle(Left),
    /// One caller is running the cleanups; `waiting` when another caller waits for it.
    Running { waiting: bool },
    /// Every cleanup ran; every later caller gets this outcome.
    Stopped(Result<(), StopError>),
}

/// The work a `stop` call took over; if that call is dropped mid-way, whatever is left goes
/// back for the next caller, so no cleanup runs twice and no failure is lost.
struct Stopping<'a> {
    lifecycle: &'a Lifecycle,
    left: Left,
    finished: bool,
}

impl Drop for Stopping<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let left = std::mem::take(&mut self.left);
            self.lifecycle.settle(Phase::Idle(left));
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these plain collections half-updated.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Lifecycle {
    /// Runs every pending cleanup in reverse registration order, once. Concurrent callers
    /// wait for the same run; later callers get its outcome. If a caller is cancelled
    /// midway, the next caller finishes the interrupted cleanup and continues with the rest;
    /// no cleanup runs twice and no failure is lost.
    pub async fn stop(&self) -> Result<(), StopError> {
        loop {
            let taken = {
                let mut phase = lock(&self.phase);
                match &mut *phase {
                    Phase::Stopped(outcome) => return outcome.clone(),
                    Phase::Idle(left) => {
                        let left = std::mem::take(left);
                        *phase = Phase::Running { waiting: false };
                        Some(left)
                    }
                    Phase::Running { waiting } => {
                        *waiting = true;
                        None
                    }
                }
            };
            if let Some(left) = taken {
                return self.run(left).await;
            }
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Register, then look again: a change in between is then never missed.
            changed.as_mut().enable();
            if matches!(*lock(&self.phase), Phase::Running { .. }) {
                changed.await;
            }
        }
    }

    /// Runs what `left` holds, then records the outcome for every later caller.
    async fn run(&self, left: Left) -> Result<(), StopError> {
        let mut stopping = Stopping {
            lifecycle: self,
            left,
            finished: false,
        };
        loop {
            let left = &mut stopping.left;
            if left.running.is_none() {
                left.running = left.pending.pop().map(|(bean, cleanup)| (bean, cleanup()));
            }
            let Some((bean, future)) = left.running.as_mut() else {
                break;
            };
            let (bean, result) = (*bean, future.as_mut().await);
            let left = &mut stopping.left;
            left.running = None;
            if let Err(e) = result {
                left.failures.push(CleanupFailure::new(bean, e));
            }
        }
        let failures = std::mem::take(&mut stopping.left.failures);
        let outcome = if failures.is_empty() {
            Ok(())
        } else {
            Err(StopError::new(failures))
        };
        stopping.finished = true;
        self.settle(Phase::Stopped(outcome.clone()));
        outcome
    }

    /// Leaves the running phase for `next`, waking waiters if there are any.
    fn settle(&self, next: Phase) {
        let previous = std::mem::replace(&mut *lock(&self.phase), next);
        if matches!(previous, Phase::Running { waiting: true }) {
            self.changed.notify_waiters();
        }
    }
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = lock(&self.phase);
        let (pending, stopped) = match &*phase {
            Phase::Idle(left) => (left.pending.len(), false),
            Phase::Running { .. } => (0, false),
            Phase::Stopped(_) => (0, true),
        };
        drop(phase);
        f.debug_struct("Lifecycle")
            .field("pending_cleanups", &pending)
            .field("stopped", &stopped)
            .finish()
    }
}

/// What `compose!` knows of one bean's compiled identity, and the one fact it cannot know:
/// where the factory is.
pub struct BeanIdentity {
    /// `<kind>:<canonical name>`.
    head: &'static str,
    /// The digest of the version tag, kind, canonical name and signature.
    signature: &'static str,
    /// The factory's canonical path: `module_path!()` inside the factory's types module
    /// (`<crate>::<modules>::<factory>`), written by the attribute at the factory's site, so
    /// whatever path `compose!` reached it by gives the same text.
    factory: &'static str,
}

impl BeanIdentity {
    /// One bean's facts.
    pub const fn new(head: &'static str, signature: &'static str, factory: &'static str) -> Self {
        BeanIdentity {
            head,
            signature,
            factory,
        }
    }

    /// `<kind>:<name>@<hex>`, the hex the SHA-256 of the length-prefixed signature digest and
    /// factory path.
    fn identity(&self) -> String {
        let digest =
            crate::hash::fields_digest([self.signature.as_bytes(), self.factory.as_bytes()]);
        format!("{}@{}", self.head, digest.as_str())
    }
}

/// The compiled identities of a graph (`App::compiled_identities()`): computed on the first
/// call from constants the compiler fixed, then the same slice for the rest of the process.
pub struct CompiledIdentities {
    beans: &'static [BeanIdentity],
    owned: std::sync::OnceLock<Vec<String>>,
    borrowed: std::sync::OnceLock<Vec<&'static str>>,
}

impl CompiledIdentities {
    /// The identities of `beans`, not yet computed.
    pub const fn new(beans: &'static [BeanIdentity]) -> Self {
        CompiledIdentities {
            beans,
            owned: std::sync::OnceLock::new(),
            borrowed: std::sync::OnceLock::new(),
        }
    }

    /// Every bean's identity, sorted.
    pub fn get(&'static self) -> &'static [&'static str] {
        let owned = self.owned.get_or_init(|| {
            let mut all: Vec<String> = self.beans.iter().map(BeanIdentity::identity).collect();
            all.sort();
            all.dedup();
            all
        });
        self.borrowed
            .get_or_init(|| owned.iter().map(String::as_str).collect())
    }
}

#[cfg(test)]
mod identity_tests {
    use super::*;

    static TWO: CompiledIdentities = CompiledIdentities::new(&[
        BeanIdentity::new("tool:read", "00", "app::tools::read"),
        BeanIdentity::new("bean:alpha", "00", "app::graph::alpha"),
    ]);

    #[test]
    fn identities_are_sorted_hex_and_computed_once() {
        let first = TWO.get();
        assert_eq!(first.len(), 2);
        assert!(first[0].starts_with("bean:alpha@"), "{first:?}");
        assert!(first[1].starts_with("tool:read@"), "{first:?}");
        let (_, hex) = first[0].split_once('@').unwrap_or_default();
        assert_eq!(hex.len(), 64);
        assert!(std::ptr::eq(first, TWO.get()));
    }

    #[test]
    fn the_factory_path_is_part_of_the_identity() {
        let a = BeanIdentity::new("bean:alpha", "00", "app::graph::alpha").identity();
        let b = BeanIdentity::new("bean:alpha", "00", "app::other::alpha").identity();
        let c = BeanIdentity::new("bean:alpha", "01", "app::graph::alpha").identity();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            a,
            BeanIdentity::new("bean:alpha", "00", "app::graph::alpha").identity()
        );
    }
}
