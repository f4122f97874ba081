//! The unary lifecycle handlers (docs/transport.md, "What the server serves"): Health, StartRun, CancelRun,
//! RespondInteraction, SuspendRun, ResumeRun, ExportSnapshot, ImportSnapshot.

use agent_core::interaction::InteractionResponse;
use agent_daemon::host::{StartRequest, Success};
use agent_protocol::pb::common::v1::{ErrorCode, Status};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::requests::{
    validate_cancel_run_request, validate_export_snapshot_request, validate_health_request,
    validate_respond_interaction_request, validate_resume_run_request, validate_start_run_request,
    validate_suspend_run_request,
};
use agent_protocol::responses::{
    validate_cancel_run_response, validate_export_snapshot_response, validate_health_response,
    validate_import_snapshot_response, validate_respond_interaction_response,
    validate_resume_run_response, validate_start_run_response, validate_suspend_run_response,
};
use agent_protocol::status::{Violation, ok_status};
use prost::Message as _;
use tonic::Request;

use crate::status::{MutationKind, START_INPUT_MESSAGE, internal, lifecycle_failure};

use super::envelope::{envelope_from_wire, envelope_to_wire};
use super::{Reply, Service, reply};
use crate::registry::Entry;
use agent_daemon::HostError;
use agent_protocol::Negotiated;

/// A response carrying only `status`.
trait Failed: Default {
    fn failed(status: Status) -> Self;
}

macro_rules! failed {
    ($($t:ty),*) => {$(
        impl Failed for $t {
            fn failed(status: Status) -> Self {
                Self { status: Some(status), ..Default::default() }
            }
        }
    )*};
}

failed!(
    pb::HealthResponse,
    pb::StartRunResponse,
    pb::CancelRunResponse,
    pb::RespondInteractionResponse,
    pb::SuspendRunResponse,
    pb::ResumeRunResponse,
    pb::ExportSnapshotResponse,
    pb::ImportSnapshotResponse
);

pub(super) fn invalid_status(v: Violation) -> Status {
    v.recode(ErrorCode::InvalidArgument).into_status()
}

/// The single text of a Start input, if it is exactly one user text part.
fn single_text(message: Option<&pb::Message>) -> Option<String> {
    let message = message?;
    if message.role != pb::MessageRole::User as i32 {
        return None;
    }
    match message.parts.as_slice() {
        [part] => match &part.value {
            Some(pb::content_part::Value::Text(text)) => Some(text.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// What one unary lifecycle call carries through the common order of docs/transport.md ("What the server serves"):
/// the client operation id its failures echo and the mutation an uncertain outcome names
/// (none for Health and ExportSnapshot). Each handler states its own steps 6 and 7 (the
/// client values and the host call); this type holds the failure mapping and step 8.
struct Call<'a> {
    operation: Option<(&'a str, MutationKind)>,
}

impl<'a> Call<'a> {
    /// A mutation: its failures echo `operation_id`; an uncertain outcome names `kind`.
    fn mutation(operation_id: &'a str, kind: MutationKind) -> Call<'a> {
        Call {
            operation: Some((operation_id, kind)),
        }
    }

    /// Health or ExportSnapshot: nothing to echo, nothing an uncertain outcome names.
    fn read() -> Call<'static> {
        Call { operation: None }
    }

    /// A failed response whose status carries the operation id.
    fn echo<R: Failed>(&self, mut status: Status) -> R {
        if let Some((operation_id, _)) = self.operation {
            status.operation_id = operation_id.to_owned();
        }
        R::failed(status)
    }

    /// Steps 2-5 (see [`Service::prepare`]); a failure is the echoed response.
    fn prepare<R: Failed>(
        &self,
        service: &Service,
        (client_id, epoch): (&str, u64),
        validate: impl Fn(&Negotiated) -> Result<(), Violation>,
        snapshots: bool,
    ) -> Result<Entry, R> {
        service
            .prepare(client_id, epoch, validate, snapshots)
            .map_err(|status| self.echo(*status))
    }

    /// A host failure as the response (`lifecycle_failure`); a cancelled or expired RPC is
    /// the gRPC error instead.
    fn failure<R: Failed>(&self, error: &HostError) -> Result<R, tonic::Status> {
        Ok(R::failed(lifecycle_failure(error, self.operation)?))
    }

    /// Step 8: the response if it is valid under the negotiated limits, else `INTERNAL`.
    fn checked<R: Failed>(
        &self,
        response: R,
        negotiated: &Negotiated,
        check: fn(&R, &Negotiated) -> Result<(), Violation>,
    ) -> Reply<R> {
        if check(&response, negotiated).is_err() {
            return reply(self.echo(internal()));
        }
        reply(response)
    }

    /// The host's outcome through step 8: a success the handler did not expect (`None`) is
    /// `INTERNAL`, a failure is mapped, and either is validated like a success.
    fn finish<R: Failed>(
        &self,
        outcome: Result<Option<R>, HostError>,
        negotiated: &Negotiated,
        check: fn(&R, &Negotiated) -> Result<(), Violation>,
    ) -> Reply<R> {
        let response = match outcome {
            Ok(Some(response)) => response,
            Ok(None) => self.echo(internal()),
            Err(error) => self.failure(&error)?,
        };
        self.checked(response, negotiated, check)
    }
}

impl Service {
    pub(super) async fn health_call(
        &self,
        request: Request<pb::HealthRequest>,
    ) -> Reply<pb::HealthResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let call = Call::read();
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let entry = match call.prepare(self, client, |n| validate_health_request(&r, n), false) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        if let Err(error) = self.host().health(&entry.session) {
            return reply(call.failure(&error)?);
        }
        let inputs = self.inputs();
        let response = pb::HealthResponse {
            status: Some(ok_status()),
            server: Some(inputs.build),
            protocol: Some(entry.negotiated.protocol),
            health: Some(inputs.health),
        };
        call.checked(response, &entry.negotiated, validate_health_response)
    }

    pub(super) async fn start_run_call(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Reply<pb::StartRunResponse> {
        self.admit(&request)?;
        let workspace =
            crate::workspace::refusal(request.metadata(), self.shared.workspace.as_deref());
        let r = request.into_inner();
        let call = Call::mutation(&r.client_operation_id, MutationKind::Start);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let entry = match call.prepare(self, client, |n| validate_start_run_request(&r, n), false) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        // Refused before the ledger: nothing starts, and the same operation id may run
        // again from the right directory.
        if let Some(refused) = workspace {
            return reply(call.echo(refused));
        }
        let Some(text) = single_text(r.input.as_ref()) else {
            return reply(call.echo(Violation::invalid(START_INPUT_MESSAGE).into_status()));
        };
        let definition = r.definition.clone().unwrap_or_default();
        let start = StartRequest {
            operation_id: r.client_operation_id.clone(),
            definition_id: definition.id,
            revision: definition.revision,
            text,
        };
        let outcome = self.host().start(&self.ctx(), &entry.session, start).await;
        let outcome = outcome.map(|(success, duplicate)| match success {
            Success::Started {
                run_id,
                sequence,
                plan_id,
            } => Some(pb::StartRunResponse {
                status: Some(ok_status()),
                run_id,
                initial_sequence: sequence,
                duplicate_operation: duplicate,
                plan_id,
            }),
            _ => None,
        });
        call.finish(outcome, &entry.negotiated, validate_start_run_response)
    }

    pub(super) async fn cancel_run_call(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Reply<pb::CancelRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = &r.client_operation_id;
        let call = Call::mutation(op, MutationKind::Cancel);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let entry = match call.prepare(self, client, |n| validate_cancel_run_request(&r, n), false)
        {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let outcome = self
            .host()
            .cancel(&self.ctx(), &entry.session, op, &r.run_id)
            .await;
        let outcome = outcome.map(|success| match success {
            Success::CancelRequested => Some(pb::CancelRunResponse {
                status: Some(ok_status()),
                cancellation_requested: true,
                ..Default::default()
            }),
            Success::AlreadyTerminal { sequence } => Some(pb::CancelRunResponse {
                status: Some(ok_status()),
                already_terminal: true,
                terminal_sequence: sequence,
                ..Default::default()
            }),
            _ => None,
        });
        call.finish(outcome, &entry.negotiated, validate_cancel_run_response)
    }

    pub(super) async fn respond_interaction_call(
        &self,
        request: Request<pb::RespondInteractionRequest>,
    ) -> Reply<pb::RespondInteractionResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = &r.client_operation_id;
        let call = Call::mutation(op, MutationKind::Respond);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let validate = |n: &Negotiated| validate_respond_interaction_request(&r, n);
        let entry = match call.prepare(self, client, validate, false) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let value = serde_json::from_slice::<serde_json::Value>(&r.value_json).ok();
        let Some(response) =
            value.and_then(|v| InteractionResponse::new(r.interaction_id.clone(), v).ok())
        else {
            return reply(call.echo(crate::status::invalid()));
        };
        let outcome = self
            .host()
            .respond(&self.ctx(), &entry.session, op, &r.run_id, response)
            .await;
        let outcome = outcome.map(|(success, duplicate)| match success {
            Success::Responded => Some(pb::RespondInteractionResponse {
                status: Some(ok_status()),
                accepted: true,
                duplicate_operation: duplicate,
            }),
            _ => None,
        });
        call.finish(
            outcome,
            &entry.negotiated,
            validate_respond_interaction_response,
        )
    }

    pub(super) async fn suspend_run_call(
        &self,
        request: Request<pb::SuspendRunRequest>,
    ) -> Reply<pb::SuspendRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = &r.client_operation_id;
        let call = Call::mutation(op, MutationKind::Suspend);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let entry = match call.prepare(self, client, |n| validate_suspend_run_request(&r, n), true)
        {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let outcome = self
            .host()
            .suspend(&self.ctx(), &entry.session, op, &r.run_id)
            .await;
        let outcome = outcome.map(|(success, duplicate)| match success {
            Success::Suspended { sequence } => Some(pb::SuspendRunResponse {
                status: Some(ok_status()),
                suspended: true,
                boundary_sequence: sequence,
                duplicate_operation: duplicate,
            }),
            _ => None,
        });
        call.finish(outcome, &entry.negotiated, validate_suspend_run_response)
    }

    pub(super) async fn resume_run_call(
        &self,
        request: Request<pb::ResumeRunRequest>,
    ) -> Reply<pb::ResumeRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = &r.client_operation_id;
        let call = Call::mutation(op, MutationKind::Resume);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let entry = match call.prepare(self, client, |n| validate_resume_run_request(&r, n), true) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let outcome = self
            .host()
            .resume(&self.ctx(), &entry.session, op, &r.run_id)
            .await;
        let outcome = outcome.map(|(success, duplicate)| match success {
            Success::Resumed { next_sequence } => Some(pb::ResumeRunResponse {
                status: Some(ok_status()),
                resumed: true,
                next_sequence,
                duplicate_operation: duplicate,
            }),
            _ => None,
        });
        call.finish(outcome, &entry.negotiated, validate_resume_run_response)
    }

    pub(super) async fn export_snapshot_call(
        &self,
        request: Request<pb::ExportSnapshotRequest>,
    ) -> Reply<pb::ExportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let call = Call::read();
        let client = (r.client_id.as_str(), r.ownership_epoch);
        let validate = |n: &Negotiated| validate_export_snapshot_request(&r, n);
        let entry = match call.prepare(self, client, validate, true) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let bytes = match self
            .host()
            .export(&self.ctx(), &entry.session, &r.run_id)
            .await
        {
            Ok(bytes) => bytes,
            Err(error) => return reply(call.failure(&error)?),
        };
        let Some(snapshot) = envelope_to_wire(&bytes) else {
            return reply(call.echo(internal()));
        };
        let response = pb::ExportSnapshotResponse {
            status: Some(ok_status()),
            snapshot: Some(snapshot),
        };
        call.checked(
            response,
            &entry.negotiated,
            validate_export_snapshot_response,
        )
    }

    pub(super) async fn import_snapshot_call(
        &self,
        request: Request<pb::ImportSnapshotRequest>,
    ) -> Reply<pb::ImportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = &r.client_operation_id;
        let call = Call::mutation(op, MutationKind::Import);
        let client = (r.client_id.as_str(), r.ownership_epoch);
        // The structural validator only: keyed verification is the run host's.
        let raw = r.encode_to_vec();
        let validate = |n: &Negotiated| {
            agent_protocol::snapshot::validate_import_snapshot_request_structure(&raw, n).map(drop)
        };
        let entry = match call.prepare(self, client, validate, true) {
            Ok(entry) => entry,
            Err(failed) => return reply(failed),
        };
        let Some(bytes) = r.snapshot.as_ref().and_then(envelope_from_wire) else {
            return reply(call.echo(crate::status::invalid()));
        };
        let outcome = self
            .host()
            .import(&self.ctx(), &entry.session, op, &bytes)
            .await;
        let outcome = outcome.map(|(success, duplicate)| match success {
            Success::Imported { run_id, sequence } => Some(pb::ImportSnapshotResponse {
                status: Some(ok_status()),
                run_id,
                next_sequence: sequence,
                duplicate_operation: duplicate,
            }),
            _ => None,
        });
        call.finish(
            outcome,
            &entry.negotiated,
            validate_import_snapshot_response,
        )
    }
}
