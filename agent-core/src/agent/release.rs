//! Releasing a run's tool plan lease within a bounded time.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::future::poll_once;
use crate::stage::{ReleaseError, ToolPlanLease};

/// Releases a lease, bounded by `timeout`; used on paths that already report another error.
pub(super) async fn release_quietly(lease: &ToolPlanLease, timeout: Duration) {
    let _ = release_bounded(lease, timeout).await;
}

/// Releases a lease; a release that does not finish within `timeout` counts as failed.
pub(crate) async fn release_bounded(
    lease: &ToolPlanLease,
    timeout: Duration,
) -> Result<(), ReleaseError> {
    if lease.release_is_noop() {
        return Ok(());
    }
    let stop = CancellationToken::new();
    let release = lease.release(&stop);
    tokio::pin!(release);
    match poll_once(release.as_mut()).await {
        Some(outcome) => outcome,
        None => match tokio::time::timeout(timeout, release).await {
            Ok(outcome) => outcome,
            Err(_) => {
                stop.cancel();
                Err(ReleaseError::DidNotComplete)
            }
        },
    }
}

/// Releases a lease from a synchronous path: inline when there is nothing to do, else on a
/// task of the current runtime (every caller is inside one).
pub(super) fn release_in_background(lease: ToolPlanLease, timeout: Duration) {
    if lease.release_is_noop() {
        return;
    }
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        handle.spawn(async move { release_quietly(&lease, timeout).await });
    }
}
