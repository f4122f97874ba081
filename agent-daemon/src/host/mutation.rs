//! The mutation envelope every ledgered operation runs in: session check, ledger entry,
//! cancellation, the commit lease, and the recorded [`Success`] it decodes.

use std::pin::pin;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{Degradation, Inner, RunHost};
use crate::error::{Class, Failure, HostError, gate};
use crate::ledger::{Execution, LedgerError, Outcome, OutcomeKind, canonical_digest};
use crate::session::{Session, SessionHold};
use crate::token::is_daemon_token;

/// The outcome of a successful mutation (also what the ledger replays).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Success {
    /// A run started: its id, first sequence (1) and tool-plan id.
    Started {
        /// The run.
        run_id: String,
        /// Always 1.
        sequence: u64,
        /// The run's tool-plan id.
        plan_id: String,
    },
    /// A snapshot was imported: the run continues at `sequence`.
    Imported {
        /// The run.
        run_id: String,
        /// The snapshot's last sequence + 1.
        sequence: u64,
    },
    /// The run is suspended at this boundary sequence.
    Suspended {
        /// The snapshot's last sequence.
        sequence: u64,
    },
    /// The run resumed; its next event has this sequence.
    Resumed {
        /// The next sequence.
        next_sequence: u64,
    },
    /// Cancellation was requested.
    CancelRequested,
    /// The run had already ended at this sequence.
    AlreadyTerminal {
        /// The terminal sequence.
        sequence: u64,
    },
    /// The response was accepted.
    Responded,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
enum Recorded {
    Ok(Success),
    Err(HostError),
}

impl RunHost {
    /// The mutation envelope: check the session, enter the ledger under (client, operation
    /// id), run the operation under request ∧ epoch ∧ host-root cancellation, and decode the
    /// committed outcome.
    pub(super) async fn mutation<F>(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        kind: &'static str,
        input: serde_json::Value,
        execute: impl FnOnce(CancellationToken) -> F,
    ) -> Result<(Success, bool), HostError>
    where
        F: std::future::Future<Output = Result<Success, Failure>>,
    {
        let inner = &*self.inner;
        if !is_daemon_token(operation_id) {
            return Err(HostError::State);
        }
        inner.sessions.check(session)?;
        let _inflight = inner.begin()?;
        let _hold: Option<SessionHold> = inner.sessions.hold(session.client_id());
        let op = inner.root.child_token();
        let digest = canonical_digest(input.to_string().as_bytes());
        let sessions = inner.sessions.clone();
        let session_for_exec = session.clone();
        let op_for_exec = op.clone();
        let run = inner.ledger.run(
            &op,
            session.client_id(),
            operation_id,
            kind,
            digest,
            move || async move {
                if let Err(error) = sessions.check(&session_for_exec) {
                    return Execution::Abandon(HostError::from(error));
                }
                let encode = |kind, recorded: &Recorded| {
                    let bytes = serde_json::to_vec(recorded).expect("plain data serializes");
                    Outcome::new(kind, bytes)
                };
                let outcome = match execute(op_for_exec).await {
                    Ok(success) => encode(OutcomeKind::Success, &Recorded::Ok(success)),
                    Err((error, Class::Abandon)) => return Execution::Abandon(error),
                    Err((error, Class::Commit)) => {
                        encode(OutcomeKind::Failure, &Recorded::Err(error))
                    }
                    Err((_, Class::Uncertain)) => {
                        encode(OutcomeKind::Uncertain, &Recorded::Err(HostError::Uncertain))
                    }
                };
                match outcome {
                    Some(outcome) => Execution::Commit(outcome),
                    None => Execution::Fail,
                }
            },
        );
        let mut run = pin!(run);
        let result = loop {
            tokio::select! {
                biased;
                result = &mut run => break result,
                () = ctx.cancelled(), if !op.is_cancelled() => op.cancel(),
                () = session.token().cancelled(), if !op.is_cancelled() => op.cancel(),
            }
        };
        match result {
            Ok((outcome, duplicate)) => decode(inner, &outcome).map(|s| (s, duplicate)),
            Err(LedgerError::Abandoned(error)) => Err(error),
            Err(LedgerError::Executor) => {
                inner.degrade(Degradation::CleanupUnavailable);
                Err(HostError::Uncertain)
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// The client's commit lease for an operation. A wait ended by the operation's cancellation
/// reports the stale session if that is why it was cancelled (a reconnect), so the caller
/// sees the same error whichever wake-up came first.
pub(super) async fn acquire(
    inner: &Inner,
    op: &CancellationToken,
    session: &Session,
) -> Result<crate::session::MutationLease, Failure> {
    match inner.sessions.acquire_mutation(op, session).await {
        Ok(lease) => Ok(lease),
        Err(crate::session::SessionError::Cancelled) => match inner.sessions.check(session) {
            Err(stale) => Err(gate(stale)),
            Ok(()) => Err(gate(crate::session::SessionError::Cancelled)),
        },
        Err(error) => Err(gate(error)),
    }
}

fn decode(inner: &Inner, outcome: &Outcome) -> Result<Success, HostError> {
    if outcome.kind() == OutcomeKind::Uncertain {
        return Err(HostError::Uncertain);
    }
    match serde_json::from_slice::<Recorded>(outcome.payload()) {
        Ok(Recorded::Ok(success)) => Ok(success),
        Ok(Recorded::Err(error)) => Err(error),
        Err(_) => {
            inner.degrade(Degradation::CleanupUnavailable);
            Err(HostError::Unavailable)
        }
    }
}
