//! Accepted connections the server can close by force (the forced stop of docs/transport.md, "The daemon: boot and shutdown").
//!
//! tonic serves every connection on its own spawned task, and a graceful stop waits for
//! each connection's streams to finish; a stream blocked on a client that stopped reading
//! never finishes. Aborting the accept loop leaves those tasks running. Every accepted
//! socket is therefore wrapped: once the server's force token fires, reads and writes fail,
//! so hyper drops the connection and every stream on it, and the handler tasks blocked on
//! them end. Each wrapper holds a [`TaskTrackerToken`], so the server can wait until every
//! connection is gone.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::task_tracker::TaskTrackerToken;
use tonic::transport::server::{Connected, UdsConnectInfo};

/// One accepted socket that fails every read and write once `force` is cancelled.
pub(crate) struct Closable {
    io: UnixStream,
    force: CancellationToken,
    forced: Pin<Box<WaitForCancellationFutureOwned>>,
    _tracked: TaskTrackerToken,
}

impl Closable {
    pub(crate) fn new(io: UnixStream, force: CancellationToken, tracked: TaskTrackerToken) -> Self {
        Closable {
            io,
            forced: Box::pin(force.clone().cancelled_owned()),
            force,
            _tracked: tracked,
        }
    }

    /// `Err` once forced; otherwise registers the waker so a later force wakes the task
    /// that is waiting on this socket.
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.force.is_cancelled() || self.forced.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "local daemon stopped the connection",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for Closable {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(error) = this.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Closable {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(error) = this.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(error) = this.check(cx) {
            return Poll::Ready(Err(error));
        }
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl Connected for Closable {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}
