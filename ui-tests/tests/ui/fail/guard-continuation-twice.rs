use agent_core::stage::{DispatchError, GuardRequest, Next, ToolDispatchGuard};
use agent_core::tool::{BoxFuture, ToolResult};

/// Tries to run the rest of the pipeline twice: `Next::run` takes `self`, so it cannot.
struct Twice;

impl ToolDispatchGuard for Twice {
    fn guard<'a>(
        &'a self,
        _request: GuardRequest<'a>,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, DispatchError>> {
        Box::pin(async move {
            let _first = next.run().await;
            next.run().await
        })
    }
}

fn main() {}
