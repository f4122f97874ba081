//! Shutting the host down: fence, drain, detach suspended runs, join monitors, close.

use std::pin::pin;
use std::sync::{Arc, PoisonError};

use tokio_util::sync::CancellationToken;

use super::monitor::Monitors;
use super::{Degradation, Hosted, RunHost, is_ended};
use crate::error::HostError;

impl RunHost {
    /// Shuts the host down once; later callers get the first outcome. Admission is fenced
    /// synchronously (before the first await), then: sessions close (fencing owners and
    /// streams), the pending router closes, in-flight operations finish, suspended runs
    /// are detached (their SUSPENDED record stays importable), the engine shuts down
    /// (cancelling every other run), monitors finish, sessions drain, the authority closes.
    pub async fn shutdown(&self) -> Result<(), HostError> {
        let inner = &*self.inner;
        {
            let mut state = inner.lock();
            state.closing = true;
        }
        inner.root.cancel();
        let mut done = inner.shutdown.lock().await;
        if let Some(result) = &*done {
            return result.clone();
        }
        let mut result = Ok(());
        inner.sessions.close();
        inner.pending.close();
        loop {
            let mut notified = pin!(inner.changed.notified());
            notified.as_mut().enable();
            if inner.lock().inflight == 0 {
                break;
            }
            notified.await;
        }
        let active: Vec<Arc<Hosted>> = inner.lock().active.values().cloned().collect();
        for hosted in active {
            let mut transition = hosted.transition.lock().await;
            if transition.envelope.is_some() && !is_ended(hosted.run.status()) {
                transition.detached = true;
                if transition.authority.close().is_err() {
                    inner.degrade(Degradation::AuthorityUncertain);
                    result = Err(HostError::Uncertain);
                }
            }
        }
        inner.engine.shutdown().await;
        inner.runs_root.cancel();
        let mut monitors = Detaching(std::mem::take(
            &mut *inner
                .monitors
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        ));
        let mut failed = std::mem::take(&mut monitors.0.failed);
        while let Some(joined) = monitors.0.tasks.join_next().await {
            failed |= joined.is_err();
        }
        if failed {
            inner.degrade(Degradation::CleanupUnavailable);
            result = Err(HostError::Unavailable);
        }
        let drain = CancellationToken::new();
        let timer = {
            let drain = drain.clone();
            let timeout = inner.limits.transition_timeout;
            tokio::spawn(async move {
                tokio::time::sleep(timeout).await;
                drain.cancel();
            })
        };
        if inner.sessions.shutdown(&drain).await.is_err() {
            result = Err(HostError::Unavailable);
        }
        timer.abort();
        if inner.authority.close().is_err() {
            inner.degrade(Degradation::AuthorityUnavailable);
            result = Err(HostError::Unavailable);
        }
        *done = Some(result.clone());
        result
    }
}

/// Monitors taken by a shutdown: if the shutdown's future is dropped before it joined them
/// all, the rest keep running (dropping a `JoinSet` would abort them, cutting a run's
/// cleanup short).
struct Detaching(Monitors);

impl Drop for Detaching {
    fn drop(&mut self) {
        self.0.tasks.detach_all();
    }
}
