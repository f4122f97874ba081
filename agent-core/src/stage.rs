//! Stages: asynchronous steps that turn one value into another ([`Stage`], [`run_pipeline`]),
//! and the tool half of the kernel that sits at the same level: the one [`Dispatcher`], its
//! [`ToolDispatchDecorator`]s and [`ToolDispatchGuard`]s assembled by [`compose_pipeline`],
//! and leased tool plans ([`ToolPlanSource`], [`ToolPlanLease`], [`StaticToolPlanSource`]).

mod dispatch;
mod pipeline;
mod plan;
mod plan_id;

pub(crate) use plan_id::{is_plan_id, is_sha256_fingerprint};

/// The bound a [`DispatchScope`] run id must respect; the whole rule is [`RunId`].
///
/// [`RunId`]: crate::RunId
pub use crate::run_id::MAX_RUN_ID_BYTES;
pub use dispatch::{
    ContractViolation, DispatchError, DispatchFailure, DispatchRequest, DispatchScope, Dispatcher,
    DispatcherError, ScopeError, ToolDispatcher,
};
pub use pipeline::{
    GuardRequest, Next, PipelineError, ToolDispatchDecorator, ToolDispatchGuard, compose_pipeline,
};
pub use plan::{
    PlanError, ReleaseError, StaticToolPlanSource, ToolPlanLease, ToolPlanSource, ToolPlans,
};
pub use plan_id::{MAX_PLAN_ID_BYTES, PlanId, PlanIdError};

use std::error::Error;
use std::sync::Arc;

use crate::future::BoxFuture;

/// One asynchronous processing step from `I` to `O`.
///
/// Dyn compatible, so pipelines can hold `Arc<dyn Stage<I, O>>`:
///
/// ```
/// use std::sync::Arc;
///
/// use agent_core::stage::{Stage, StageError, run_pipeline};
/// use agent_core::tool::BoxFuture;
///
/// struct Shout;
///
/// impl Stage<String, String> for Shout {
///     fn process(&self, input: String) -> BoxFuture<'_, Result<String, StageError>> {
///         Box::pin(async move { Ok(input.to_uppercase()) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), StageError> {
/// let stages: Vec<Arc<dyn Stage<String, String>>> = vec![Arc::new(Shout)];
/// assert_eq!(run_pipeline(&stages, "hey".to_owned()).await?, "HEY");
/// # Ok(())
/// # }
/// ```
pub trait Stage<I, O>: Send + Sync + 'static {
    /// Transforms `input`, or explains why it cannot.
    fn process(&self, input: I) -> BoxFuture<'_, Result<O, StageError>>;
}

/// Why a [`Stage`] failed: a message, and optionally the underlying error,
/// which is exposed through [`Error::source`] rather than repeated in the
/// message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct StageError {
    message: String,
    #[source]
    source: Option<Box<dyn Error + Send + Sync + 'static>>,
}

impl StageError {
    /// Creates an error with no underlying cause.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// Creates an error caused by `source`.
    ///
    /// ```
    /// use std::error::Error;
    ///
    /// use agent_core::stage::StageError;
    ///
    /// let parse = "x".parse::<u32>().unwrap_err();
    /// let error = StageError::with_source("bad count", parse);
    /// assert_eq!(error.to_string(), "bad count");
    /// assert!(error.source().is_some());
    /// ```
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// The message, without the source's.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Runs `stages` in slice order, feeding each one's output to the next, and
/// returns the last output (or `input` itself if `stages` is empty).
///
/// Stops at the first error and returns it unchanged; later stages do not run.
pub async fn run_pipeline<T: Send + 'static>(
    stages: &[Arc<dyn Stage<T, T>>],
    input: T,
) -> Result<T, StageError> {
    let mut value = input;
    for stage in stages {
        value = stage.process(value).await?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Trim;

    impl Stage<String, String> for Trim {
        fn process(&self, input: String) -> BoxFuture<'_, Result<String, StageError>> {
            Box::pin(async move { Ok(input.trim().to_owned()) })
        }
    }

    struct Exclaim;

    impl Stage<String, String> for Exclaim {
        fn process(&self, input: String) -> BoxFuture<'_, Result<String, StageError>> {
            Box::pin(async move { Ok(input + "!") })
        }
    }

    /// Fails, wrapping a parse error, and counts how often it ran.
    #[derive(Default)]
    struct FailParse(Mutex<usize>);

    impl Stage<String, String> for FailParse {
        fn process(&self, input: String) -> BoxFuture<'_, Result<String, StageError>> {
            *self.0.lock().unwrap() += 1;
            Box::pin(async move {
                let parsed: u32 = input.parse().map_err(|error| {
                    StageError::with_source(format!("not a number: {input:?}"), error)
                })?;
                Ok(parsed.to_string())
            })
        }
    }

    /// A stage whose input and output types differ.
    struct Length;

    impl Stage<String, usize> for Length {
        fn process(&self, input: String) -> BoxFuture<'_, Result<usize, StageError>> {
            Box::pin(async move { Ok(input.len()) })
        }
    }

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn trims_then_exclaims() {
        let stages: Vec<Arc<dyn Stage<String, String>>> = vec![Arc::new(Trim), Arc::new(Exclaim)];
        let future = run_pipeline(&stages, "  hello  ".to_owned());
        assert_send(&future);
        assert_eq!(future.await.unwrap(), "hello!");
    }

    #[tokio::test]
    async fn runs_in_slice_order() {
        let stages: Vec<Arc<dyn Stage<String, String>>> = vec![Arc::new(Exclaim), Arc::new(Trim)];
        assert_eq!(
            run_pipeline(&stages, "  hello  ".to_owned()).await.unwrap(),
            "hello  !"
        );
    }

    #[tokio::test]
    async fn empty_pipeline_returns_input() {
        assert_eq!(
            run_pipeline::<String>(&[], "same".to_owned())
                .await
                .unwrap(),
            "same"
        );
    }

    #[tokio::test]
    async fn stops_at_first_error_and_keeps_its_source() {
        let failing = Arc::new(FailParse::default());
        let after = Arc::new(FailParse::default());
        let stages: Vec<Arc<dyn Stage<String, String>>> =
            vec![Arc::new(Trim), failing.clone(), after.clone()];
        let error = run_pipeline(&stages, " x ".to_owned()).await.unwrap_err();
        assert_eq!(error.to_string(), "not a number: \"x\"");
        assert_eq!(error.message(), "not a number: \"x\"");
        let source = error.source().expect("source is kept");
        assert!(source.downcast_ref::<std::num::ParseIntError>().is_some());
        assert_eq!(*failing.0.lock().unwrap(), 1);
        assert_eq!(*after.0.lock().unwrap(), 0, "later stages must not run");
    }

    #[tokio::test]
    async fn stages_may_change_type() {
        let stage: Arc<dyn Stage<String, usize>> = Arc::new(Length);
        assert_eq!(stage.process("four".to_owned()).await.unwrap(), 4);
    }

    #[test]
    fn error_without_source() {
        let error = StageError::new("nope");
        assert_eq!(error.to_string(), "nope");
        assert!(error.source().is_none());
        // Plain strings convert into a boxed error too.
        assert_eq!(
            StageError::with_source("outer", "inner")
                .source()
                .unwrap()
                .to_string(),
            "inner"
        );
    }
}
