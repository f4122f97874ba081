//! Suspending a run at a safe boundary and resuming it locally.

use agent_authority::engine::EngineLocalResume;
use agent_authority::{ErrorKind, Lifecycle};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::mutation::acquire;
use super::{Degradation, Hosted, RunHost, Success, Transition, kinds};
use crate::error::{Failure, HostError, abandon, commit, uncertain};
use crate::session::Session;

/// Takes the run's transition lock, or abandons with `Cancelled` if `op` (the operation's
/// token, a child of the host root) is cancelled first.
async fn lock_transition<'a>(
    hosted: &'a Hosted,
    op: &CancellationToken,
) -> Result<tokio::sync::MutexGuard<'a, Transition>, Failure> {
    tokio::select! {
        guard = hosted.transition.lock() => Ok(guard),
        () = op.cancelled() => Err(abandon(HostError::Cancelled)),
    }
}

impl RunHost {
    /// Suspends an owned run at its next safe boundary (waiting for it without the commit
    /// gate) and records the signed SUSPENDED snapshot.
    pub async fn suspend(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<(Success, bool), HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::SUSPEND,
            json!([run_id]),
            |op| async move { host.suspend_inner(&op, &session_c, &run_id_c).await },
        )
        .await
    }

    async fn suspend_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        let mut transition = lock_transition(&hosted, op).await?;
        if let Some(envelope) = &transition.envelope {
            return Ok(Success::Suspended {
                sequence: envelope.last_sequence(),
            });
        }
        tokio::select! {
            result = hosted.run.suspend() => result.map_err(|_| commit(HostError::State))?,
            () = op.cancelled() => return Err(abandon(HostError::Cancelled)),
        }
        let restore = |failure: Failure| {
            if hosted.run.resume().is_err() {
                hosted.run.cancel();
                inner.degrade(Degradation::CleanupUnavailable);
                return uncertain();
            }
            failure
        };
        let lease = match acquire(inner, op, session).await {
            Ok(lease) => lease,
            Err(failure) => return Err(restore(failure)),
        };
        let snapshot = match hosted.run.snapshot() {
            Ok(snapshot) => snapshot,
            Err(_) => return Err(restore(commit(HostError::State))),
        };
        let sequence = snapshot.last_sequence();
        match transition.authority.issue_snapshot(
            Lifecycle::Suspended,
            sequence,
            snapshot.to_json(),
        ) {
            Ok(envelope) => transition.envelope = Some(envelope),
            Err(error) if error.kind() == ErrorKind::Uncertain => {
                hosted.run.cancel();
                return Err(inner.durable_failure(&error));
            }
            Err(error) => return Err(restore(inner.durable_failure(&error))),
        }
        drop(lease);
        Ok(Success::Suspended { sequence })
    }

    /// Resumes an owned suspended run: kernel reservation, durable ACTIVE (which invalidates
    /// the signed snapshot), then kernel commit.
    pub async fn resume(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<(Success, bool), HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::RESUME,
            json!([run_id]),
            |op| async move { host.resume_inner(&op, &session_c, &run_id_c).await },
        )
        .await
    }

    async fn resume_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        let mut transition = lock_transition(&hosted, op).await?;
        let reservation = hosted
            .run
            .prepare_local_resume()
            .map_err(|_| commit(HostError::State))?;
        let next_sequence = reservation.next_sequence();
        let lease = acquire(inner, op, session).await?;
        match transition
            .authority
            .resume_local(EngineLocalResume::new(reservation))
        {
            Ok(()) => transition.envelope = None,
            Err(error) if error.kind() == ErrorKind::Uncertain => {
                hosted.run.cancel();
                return Err(inner.durable_failure(&error));
            }
            Err(error) => return Err(inner.durable_failure(&error)),
        }
        drop(lease);
        Ok(Success::Resumed { next_sequence })
    }
}
