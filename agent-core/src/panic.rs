//! Panic containment: user code (tools, providers, observers, plan sources, brokers) may
//! panic, and the kernel turns each panic into an outcome without letting it unwind into the
//! caller or carry its payload further.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Calls `f`, containing a panic (whose payload is dropped unread).
pub(crate) fn contained<R>(f: impl FnOnce() -> R) -> Result<R, ()> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|_| ())
}

/// A contained panic; its payload is dropped so no panic text travels further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Panicked;

/// Polls a future, turning a panic into [`Panicked`]. Dropping the future is contained too:
/// an abandoned (e.g. cancelled) tool whose state panics on drop must not unwind into the
/// caller.
pub(crate) struct CatchUnwind<F>(Option<F>);

impl<F> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind(Some(future))
    }

    /// Drops the inner future, containing any panic.
    fn discard(&mut self) {
        let inner = self.0.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(inner)));
    }
}

impl<F> Drop for CatchUnwind<F> {
    fn drop(&mut self) {
        self.discard();
    }
}

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.0.as_mut() else {
            panic!("CatchUnwind polled after completion");
        };
        let output = match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(output)) => Ok(output),
            Err(_payload) => Err(Panicked),
        };
        self.discard();
        Poll::Ready(output)
    }
}
