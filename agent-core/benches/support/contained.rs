//! The shape every call into user code has in the kernel, for the floors: a boxed future,
//! polled inside `catch_unwind`. Shared by the kernel's floors and the dispatch floors.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls `future` inside `catch_unwind`, as the kernel contains every call into user code.
pub(crate) struct Contained<F>(pub(crate) F);

impl<F: Future + Unpin> Future for Contained<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Some(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(None),
        }
    }
}
