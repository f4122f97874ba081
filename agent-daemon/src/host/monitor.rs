//! The terminal monitor (what happens when a run ends), its task set, and `wait_idle`.

use std::pin::pin;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{Degradation, Hosted, Inner, RunHost, TerminalEntry, lifecycle_of};
use crate::error::HostError;
use crate::pending::RunBinding;
use crate::session::SessionHold;

impl RunHost {
    /// The terminal monitor: waits for the kernel run to end, records its terminal
    /// envelope, closes the authority handle, moves the run to the terminal cache, drains
    /// its binding, then forgets its owner.
    pub(super) async fn monitor(
        &self,
        run_id: String,
        hosted: Arc<Hosted>,
        mut binding: RunBinding,
        hold: Option<SessionHold>,
    ) {
        let inner = &*self.inner;
        let _ = hosted.run.wait().await;
        let mut transition = hosted.transition.lock().await;
        let mut clean = true;
        let mut envelope = None;
        let sequence = hosted.run.events().last_sequence();
        if !transition.detached {
            match hosted.run.snapshot() {
                Ok(snapshot) => {
                    match transition.authority.issue_snapshot(
                        lifecycle_of(snapshot.status()),
                        snapshot.last_sequence(),
                        snapshot.to_json(),
                    ) {
                        Ok(issued) => envelope = Some(issued.to_json()),
                        Err(error) => {
                            inner.degrade_authority(error.kind());
                            inner.degrade(Degradation::TerminalSnapshotUnavailable);
                            clean = false;
                        }
                    }
                }
                Err(_) => {
                    inner.degrade(Degradation::TerminalSnapshotUnavailable);
                    clean = false;
                }
            }
        }
        if let Err(error) = transition.authority.close() {
            inner.degrade_authority(error.kind());
            clean = false;
        }
        let evicted = {
            let mut state = inner.lock();
            state.active.remove(&run_id);
            state.reserved -= 1;
            let envelope = match envelope {
                Some(bytes) if bytes.len() > inner.limits.terminal_bytes => {
                    state
                        .degraded
                        .insert(Degradation::TerminalSnapshotUnavailable);
                    None
                }
                other => other,
            };
            state.terminal_bytes += envelope.as_ref().map_or(0, Vec::len);
            Inner::push_terminal(
                &mut state,
                run_id.clone(),
                TerminalEntry {
                    owner: hosted.owner.clone(),
                    run: hosted.run.clone(),
                    envelope,
                    sequence,
                },
            );
            inner.evict_terminal(&mut state)
        };
        drop(evicted);
        drop(transition);
        binding.wait_released().await;
        inner.lock().owners.remove(&run_id);
        if !clean {
            inner.degrade(Degradation::CleanupUnavailable);
        }
        drop(hold);
        inner.changed.notify_waiters();
    }

    /// Waits until no run slot is reserved or active (what [`Description::active_runs`](super::Description::active_runs)
    /// counts is zero), or `ctx` ends ([`HostError::Cancelled`]). A run's slot is released
    /// by its monitor just after the terminal event is published, so this is the signal for
    /// "every finished run let go of its slot".
    pub async fn wait_idle(&self, ctx: &CancellationToken) -> Result<(), HostError> {
        let inner = &*self.inner;
        loop {
            let mut notified = pin!(inner.changed.notified());
            notified.as_mut().enable();
            if inner.lock().reserved == 0 {
                return Ok(());
            }
            tokio::select! {
                () = notified => {}
                () = ctx.cancelled() => return Err(HostError::Cancelled),
            }
        }
    }
}

/// The terminal monitors' tasks, and whether one that was reaped early had panicked (shutdown
/// reports it as it reports a monitor it joins itself).
#[derive(Default)]
pub(super) struct Monitors {
    pub(super) tasks: JoinSet<()>,
    pub(super) failed: bool,
}

impl Monitors {
    /// Drops the finished tasks, remembering a panic.
    pub(super) fn reap(&mut self) {
        while let Some(joined) = self.tasks.try_join_next() {
            self.failed |= joined.is_err();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Reaps until at most `left` tasks remain; bounded.
    async fn reap_until(
        monitors: &mut Monitors,
        left: usize,
    ) -> Result<(), tokio::time::error::Elapsed> {
        let work = async {
            while monitors.tasks.len() > left {
                tokio::task::yield_now().await;
                monitors.reap();
            }
        };
        tokio::time::timeout(Duration::from_secs(10), work).await
    }

    #[tokio::test]
    async fn reaping_drops_finished_monitors_keeps_running_ones_and_remembers_a_panic() {
        let mut monitors = Monitors::default();
        let (release, running) = tokio::sync::oneshot::channel::<()>();
        monitors.tasks.spawn(async move {
            let _ = running.await;
        });
        for _ in 0..3 {
            monitors.tasks.spawn(async {});
        }
        monitors.tasks.spawn(async { panic!("a monitor panics") });
        reap_until(&mut monitors, 1)
            .await
            .expect("finished monitors are reaped");
        assert!(monitors.failed, "the panic is remembered for shutdown");
        release.send(()).unwrap();
        reap_until(&mut monitors, 0)
            .await
            .expect("the last monitor is reaped once it finished");
    }
}
