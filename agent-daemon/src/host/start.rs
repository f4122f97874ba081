//! Starting and importing a run, and publishing it to the active table with its monitor.

use std::sync::{Arc, PoisonError};

use agent_authority::engine::EngineImport;
use agent_authority::{ActiveRun, ErrorKind, Lifecycle, SnapshotEnvelope};
use agent_core::agent::{Run, Snapshot, SnapshotStatus, StartError};
use agent_core::message::Message;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::mutation::acquire;
use super::{Hosted, RunHost, Slot, Success, Transition, kinds};
use crate::error::{Failure, HostError, abandon, authority, commit};
use crate::ledger::canonical_digest;
use crate::pending::RunBinding;
use crate::session::Session;

/// Start a run of a served definition with one user text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// The idempotency key.
    pub operation_id: String,
    /// The definition id.
    pub definition_id: String,
    /// The definition revision.
    pub revision: String,
    /// The user's text.
    pub text: String,
}

impl RunHost {
    /// Starts a run: publishes nothing before the authority records it ACTIVE.
    pub async fn start(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        request: StartRequest,
    ) -> Result<(Success, bool), HostError> {
        let input = json!([request.definition_id, request.revision, request.text]);
        let host = self.clone();
        let client = session.client_id().to_owned();
        let session_c = session.clone();
        let operation_id = request.operation_id.clone();
        self.mutation(
            ctx,
            session,
            &operation_id,
            kinds::START,
            input,
            |op| async move { host.start_inner(&op, &session_c, &client, &request).await },
        )
        .await
    }

    async fn start_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        client: &str,
        request: &StartRequest,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let mut slot = inner.reserve_slot()?;
        let definition = inner
            .definitions
            .resolve(&request.definition_id, &request.revision)
            .map_err(|_| commit(HostError::State))?;
        let input = Message::user(request.text.clone()).map_err(|_| commit(HostError::State))?;
        let prepared = inner
            .engine
            .prepare(definition.agent(), input)
            .await
            .map_err(start_error)?;
        let run_id = prepared.run_id().to_string();
        let binding = inner.bind(&mut slot, client, &run_id)?;
        let paused = prepared
            .commit_paused(&inner.runs_root)
            .map_err(start_error)?;
        let lease = acquire(inner, op, session).await?;
        if inner.root.is_cancelled() {
            return Err(abandon(HostError::Closed));
        }
        let owner = inner
            .authority
            .start(&run_id)
            .map_err(|error| inner.durable_failure(&error))?;
        let run = paused.activate();
        let plan_id = run.plan_id().to_string();
        self.publish(&mut slot, client, run, owner, binding);
        drop(lease);
        Ok(Success::Started {
            run_id,
            sequence: 1,
            plan_id,
        })
    }

    /// Moves a run from its reservation to the active table and spawns its monitor.
    fn publish(
        &self,
        slot: &mut Slot<'_>,
        client: &str,
        run: Run,
        owner: ActiveRun,
        binding: RunBinding,
    ) {
        let inner = &*self.inner;
        let run_id = run.id().to_string();
        let owner_id: Arc<str> = client.into();
        let hosted = Arc::new(Hosted {
            owner: owner_id.clone(),
            run,
            transition: tokio::sync::Mutex::new(Transition {
                authority: owner,
                envelope: None,
                detached: false,
            }),
        });
        {
            let mut state = inner.lock();
            state.reservations.remove(&run_id);
            state.active.insert(run_id.clone(), hosted.clone());
            state.owners.insert(run_id.clone(), owner_id);
        }
        slot.published = true;
        let hold = inner.sessions.hold(client);
        let host = self.clone();
        let mut monitors = inner
            .monitors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        monitors.reap();
        monitors.tasks.spawn(async move {
            host.monitor(run_id, hosted, binding, hold).await;
        });
    }

    /// Imports a signed suspended snapshot: verify, IMPORTING, kernel commit paused, ACTIVE,
    /// activate. Nothing runs before the authority records ACTIVE.
    pub async fn import(
        &self,
        ctx: &CancellationToken,
        session: &Session,
        operation_id: &str,
        snapshot: &[u8],
    ) -> Result<(Success, bool), HostError> {
        let envelope = SnapshotEnvelope::decode(snapshot).map_err(|_| HostError::State)?;
        if envelope.lifecycle() != Lifecycle::Suspended {
            return Err(HostError::State);
        }
        let kernel = Snapshot::from_json(envelope.payload()).map_err(|_| HostError::State)?;
        if kernel.run_id() != envelope.run_id()
            || kernel.last_sequence() != envelope.last_sequence()
            || kernel.status() != SnapshotStatus::Suspended
        {
            return Err(HostError::State);
        }
        let digest: String = canonical_digest(snapshot)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let host = self.clone();
        let client = session.client_id().to_owned();
        let session_c = session.clone();
        self.mutation(
            ctx,
            session,
            operation_id,
            kinds::IMPORT,
            json!([digest]),
            |op| async move {
                host.import_inner(&op, &session_c, &client, envelope, kernel)
                    .await
            },
        )
        .await
    }

    async fn import_inner(
        &self,
        op: &CancellationToken,
        session: &Session,
        client: &str,
        envelope: SnapshotEnvelope,
        kernel: Snapshot,
    ) -> Result<Success, Failure> {
        let inner = &*self.inner;
        let mut slot = inner.reserve_slot()?;
        let run_id = envelope.run_id().to_owned();
        let sequence = envelope.last_sequence() + 1;
        let binding = inner.bind(&mut slot, client, &run_id)?;
        let import = inner
            .authority
            .prepare_import(&envelope)
            .map_err(|error| authority(&error))?;
        let prepared = match inner.engine.prepare_resume(kernel).await {
            Ok(prepared) => prepared,
            Err(error) => {
                import.abort();
                return Err(start_error(error));
            }
        };
        let lease = acquire(inner, op, session).await?;
        if inner.root.is_cancelled() {
            return Err(abandon(HostError::Closed));
        }
        let (owner, run) = import
            .complete(EngineImport::new(prepared, inner.runs_root.clone()))
            .map_err(|error| {
                // Only an uncertain completion wrote anything durable.
                if error.kind() == ErrorKind::Uncertain {
                    inner.durable_failure(&error)
                } else {
                    authority(&error)
                }
            })?;
        self.publish(&mut slot, client, run, owner, binding);
        drop(lease);
        Ok(Success::Imported { run_id, sequence })
    }
}

fn start_error(error: StartError) -> Failure {
    match error {
        StartError::IdentityCapacity => abandon(HostError::Capacity {
            resource: "run identities".into(),
            limit: agent_core::agent::MAX_RECORDED_RUN_IDS as u64,
            observed: agent_core::agent::MAX_RECORDED_RUN_IDS as u64 + 1,
        }),
        StartError::Closed | StartError::Cancelled => abandon(HostError::Closed),
        _ => commit(HostError::State),
    }
}
