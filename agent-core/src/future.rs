//! Futures every kernel module shares: the boxed future the dyn-compatible traits return, and
//! the two ways the kernel waits without blocking on a timer it may not have.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

/// A boxed, `Send` future that may borrow for `'a`.
///
/// The kernel traits return this rather than using `async fn`, which keeps
/// them dyn compatible (`Arc<dyn Tool>`, `Box<dyn EventStream>`) and their
/// futures spawnable on multi-threaded runtimes.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Polls `future` once: `Some` when it finished immediately.
pub(crate) async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Option<F::Output> {
    std::future::poll_fn(|cx| {
        Poll::Ready(match future.as_mut().poll(cx) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        })
    })
    .await
}

/// Runs `future` for at most `limit`; `None` when it did not finish. A future that is ready
/// at once never touches the timer, so engines on runtimes without a time driver work as
/// long as nothing needs to wait.
pub(crate) async fn bounded<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    tokio::pin!(future);
    if let Some(output) = poll_once(future.as_mut()).await {
        return Some(output);
    }
    tokio::time::timeout(limit, future).await.ok()
}

/// Polls `work` until it finishes (`Some`) or `cancel` fires first (`None`). The work is
/// polled before the cancellation on every wake-up, so an outcome wins over a cancellation
/// that arrives at the same time (as `select!` with `biased` would).
pub(crate) async fn unless_cancelled<F: Future + Unpin>(
    work: &mut F,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<F::Output> {
    // The wait is created only once the work is pending: work that finishes on its first
    // poll (a tool, a model stream's next item, most of the time) never needs it.
    let mut cancelled = std::pin::pin!(None);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = Pin::new(&mut *work).poll(cx) {
            return Poll::Ready(Some(output));
        }
        if cancelled.is_none() {
            cancelled.set(Some(cancel.cancelled()));
        }
        match cancelled.as_mut().as_pin_mut() {
            Some(wait) => wait.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    })
    .await
}
