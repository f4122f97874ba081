//! Cancelling a run, answering its pending interactions, and exporting its envelope.

use agent_core::interaction::{InteractionResponse, Scope};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::mutation::acquire;
use super::{RunHost, Success, is_ended, kinds};
use crate::error::{Failure, HostError, commit};
use crate::ledger::canonical_digest;
use crate::session::Session;

impl RunHost {
    /// Requests cancellation of an owned run (or reports its terminal sequence).
    pub async fn cancel(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
    ) -> Result<Success, HostError> {
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::CANCEL,
            json!([run_id]),
            |op| async move { host.cancel_inner(&op, &session_c, &run_id_c).await },
        )
        .await
        .map(|(success, _)| success)
    }

    async fn cancel_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        if let Some((_, _, sequence)) = inner.owned_terminal(session.client_id(), run_id) {
            return if sequence == 0 {
                Err(commit(HostError::State))
            } else {
                Ok(Success::AlreadyTerminal { sequence })
            };
        }
        let hosted = inner
            .owned_active(session.client_id(), run_id)
            .map_err(commit)?;
        // Cancelling needs no transition lock: a suspend waiting for its boundary holds it,
        // and a cancel must not wait behind that.
        if is_ended(hosted.run.status()) {
            return Ok(Success::AlreadyTerminal {
                sequence: hosted.run.events().last_sequence(),
            });
        }
        let lease = acquire(inner, op, session).await?;
        hosted.run.cancel();
        drop(lease);
        Ok(Success::CancelRequested)
    }

    /// Answers a pending interaction of an owned run; the flag is true when this call repeated
    /// an operation id the ledger already held and got its committed outcome.
    pub async fn respond(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        run_id: &str,
        response: InteractionResponse,
    ) -> Result<(Success, bool), HostError> {
        let value = canonical_digest(response.value().to_string().as_bytes());
        let value: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let input = json!([run_id, response.id(), value]);
        let host = self.clone();
        let (session_c, run_id_c) = (session.clone(), run_id.to_owned());
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::RESPOND,
            input,
            |op| async move {
                let inner = &*host.inner;
                let owned = inner
                    .lock()
                    .owners
                    .get(&run_id_c)
                    .is_some_and(|owner| &**owner == session_c.client_id());
                if !owned {
                    return Err(commit(HostError::RunUnavailable));
                }
                let scope = Scope::new(run_id_c.as_str()).map_err(|_| commit(HostError::State))?;
                let lease = acquire(inner, &op, &session_c).await?;
                let result = inner
                    .pending
                    .respond(session_c.client_id(), &scope, response)
                    .map_err(|error| commit(error.into()));
                drop(lease);
                result.map(|()| Success::Responded)
            },
        )
        .await
    }

    /// The authority-issued envelope of an owned run: a suspended run's signed snapshot, or
    /// an ended run's terminal envelope. Read-only; no ledger.
    pub async fn export(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        run_id: &str,
    ) -> Result<Vec<u8>, HostError> {
        let inner = &*self.inner;
        inner.sessions.check(session)?;
        if let Some((_, envelope, _)) = inner.owned_terminal(session.client_id(), run_id) {
            return envelope.ok_or(HostError::State);
        }
        let hosted = inner.owned_active(session.client_id(), run_id)?;
        let transition = tokio::select! {
            guard = hosted.transition.lock() => guard,
            () = ctx.cancelled() => return Err(HostError::Cancelled),
        };
        inner.sessions.check(session)?;
        if let Some(envelope) = &transition.envelope {
            return Ok(envelope.to_json());
        }
        drop(transition);
        match inner.owned_terminal(session.client_id(), run_id) {
            Some((_, Some(envelope), _)) => Ok(envelope),
            _ => Err(HostError::State),
        }
    }
}
