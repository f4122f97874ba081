//! What all four typed tools share: the filesystem work runs on a blocking task, a read
//! stops when its caller goes away, and a failed task becomes an execution error.

use agent_core::tool::ToolContext;
use agent_core::tool::typed::{Failure, Problem};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a call may be abandoned once started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Work {
    /// A read: cancellation abandons it and its stop flag is set.
    Reads,
    /// A write: a started write always finishes, so its outcome is known.
    Writes,
}

/// Sets its flag when dropped, so a search stops once nobody awaits it.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on a blocking task; `Ok` is the content, `Err(text)` a problem.
pub(super) async fn blocking(
    ctx: &ToolContext<'_>,
    kind: Work,
    work: impl FnOnce(&AtomicBool) -> Result<String, String> + Send + 'static,
) -> Result<String, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    let mut task = tokio::task::spawn_blocking(move || work(&stop));
    let joined = if kind == Work::Writes {
        task.await
    } else {
        tokio::select! {
            biased;
            joined = &mut task => joined,
            () = ctx.cancelled() => return Err(Failure::Cancelled),
        }
    };
    match joined {
        Ok(Ok(content)) => Ok(content),
        Ok(Err(problem)) => Err(Failure::Problem(Problem::new(problem))),
        Err(error) => {
            let cause = if error.is_panic() {
                "the workspace task panicked"
            } else {
                "the workspace task was cancelled by the runtime"
            };
            Err(if kind == Work::Writes {
                Failure::Uncertain(cause.into())
            } else {
                Failure::Definitive(cause.into())
            })
        }
    }
}

/// The default of a `path` argument: the workspace root.
pub(super) fn dot() -> String {
    String::from(".")
}
