//! The unary lifecycle handlers (contract section 3.7): Health, StartRun, CancelRun,
//! RespondInteraction, SuspendRun, ResumeRun, ExportSnapshot, ImportSnapshot.

use agent_core::interaction::InteractionResponse;
use agent_daemon::host::{StartRequest, Success};
use agent_protocol::pb::common::v1::{ErrorCode, Status};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::requests::{
    validate_cancel_run_request, validate_health_request, validate_respond_interaction_request,
    validate_resume_run_request, validate_start_run_request, validate_suspend_run_request,
};
use agent_protocol::responses::{
    validate_cancel_run_response, validate_health_response, validate_respond_interaction_response,
    validate_resume_run_response, validate_start_run_response, validate_suspend_run_response,
};
use agent_protocol::status::{Violation, ok_status};
use prost::Message as _;
use tonic::Request;

use crate::status::{MutationKind, START_INPUT_MESSAGE, internal, lifecycle_failure};

use super::*;

/// A response carrying only `status`.
pub(super) trait Failed: Default {
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
pub(super) fn single_text(message: Option<&pb::Message>) -> Option<String> {
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

impl Service {
    pub(super) async fn health_call(
        &self,
        request: Request<pb::HealthRequest>,
    ) -> Reply<pb::HealthResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_health_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(pb::HealthResponse::failed(*status)),
        };
        if let Err(error) = self.host().health(&entry.session) {
            return reply(pb::HealthResponse::failed(lifecycle_failure(&error, None)?));
        }
        let inputs = self.inputs();
        let response = pb::HealthResponse {
            status: Some(ok_status()),
            server: Some(inputs.build),
            protocol: Some(entry.negotiated.protocol),
            health: Some(inputs.health),
        };
        if validate_health_response(&response, &entry.negotiated).is_err() {
            return reply(pb::HealthResponse::failed(internal()));
        }
        reply(response)
    }

    pub(super) async fn start_run_call(
        &self,
        request: Request<pb::StartRunRequest>,
    ) -> Reply<pb::StartRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::StartRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_start_run_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let Some(text) = single_text(r.input.as_ref()) else {
            return reply(echo(Violation::invalid(START_INPUT_MESSAGE).into_status()));
        };
        let definition = r.definition.clone().unwrap_or_default();
        let start = StartRequest {
            operation_id: op.clone(),
            definition_id: definition.id,
            revision: definition.revision,
            text,
        };
        let response = match self.host().start(&self.ctx(), &entry.session, start).await {
            Ok((
                Success::Started {
                    run_id,
                    sequence,
                    plan_id,
                },
                duplicate,
            )) => pb::StartRunResponse {
                status: Some(ok_status()),
                run_id,
                initial_sequence: sequence,
                duplicate_operation: duplicate,
                plan_id,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::StartRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Start)),
            )?),
        };
        if validate_start_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    pub(super) async fn cancel_run_call(
        &self,
        request: Request<pb::CancelRunRequest>,
    ) -> Reply<pb::CancelRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::CancelRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_cancel_run_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .cancel(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok(Success::CancelRequested) => pb::CancelRunResponse {
                status: Some(ok_status()),
                cancellation_requested: true,
                ..Default::default()
            },
            Ok(Success::AlreadyTerminal { sequence }) => pb::CancelRunResponse {
                status: Some(ok_status()),
                already_terminal: true,
                terminal_sequence: sequence,
                ..Default::default()
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::CancelRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Cancel)),
            )?),
        };
        if validate_cancel_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    pub(super) async fn respond_interaction_call(
        &self,
        request: Request<pb::RespondInteractionRequest>,
    ) -> Reply<pb::RespondInteractionResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::RespondInteractionResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_respond_interaction_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let value = serde_json::from_slice::<serde_json::Value>(&r.value_json).ok();
        let Some(response) =
            value.and_then(|v| InteractionResponse::new(r.interaction_id.clone(), v).ok())
        else {
            return reply(echo(crate::status::invalid()));
        };
        let response = match self
            .host()
            .respond(&self.ctx(), &entry.session, &op, &r.run_id, response)
            .await
        {
            Ok(Success::Responded) => pb::RespondInteractionResponse {
                status: Some(ok_status()),
                accepted: true,
                ..Default::default()
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::RespondInteractionResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Respond)),
            )?),
        };
        if validate_respond_interaction_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    pub(super) async fn suspend_run_call(
        &self,
        request: Request<pb::SuspendRunRequest>,
    ) -> Reply<pb::SuspendRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::SuspendRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_suspend_run_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .suspend(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok((Success::Suspended { sequence }, duplicate)) => pb::SuspendRunResponse {
                status: Some(ok_status()),
                suspended: true,
                boundary_sequence: sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::SuspendRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Suspend)),
            )?),
        };
        if validate_suspend_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    pub(super) async fn resume_run_call(
        &self,
        request: Request<pb::ResumeRunRequest>,
    ) -> Reply<pb::ResumeRunResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::ResumeRunResponse::failed(status)
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_resume_run_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let response = match self
            .host()
            .resume(&self.ctx(), &entry.session, &op, &r.run_id)
            .await
        {
            Ok((Success::Resumed { next_sequence }, duplicate)) => pb::ResumeRunResponse {
                status: Some(ok_status()),
                resumed: true,
                next_sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::ResumeRunResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Resume)),
            )?),
        };
        if validate_resume_run_response(&response, &entry.negotiated).is_err() {
            return reply(echo(internal()));
        }
        reply(response)
    }

    pub(super) async fn export_snapshot_call(
        &self,
        request: Request<pb::ExportSnapshotRequest>,
    ) -> Reply<pb::ExportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| agent_protocol::requests::validate_export_snapshot_request(&r, n),
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(pb::ExportSnapshotResponse::failed(*status)),
        };
        let bytes = match self
            .host()
            .export(&self.ctx(), &entry.session, &r.run_id)
            .await
        {
            Ok(bytes) => bytes,
            Err(error) => {
                return reply(pb::ExportSnapshotResponse::failed(lifecycle_failure(
                    &error, None,
                )?));
            }
        };
        let Some(snapshot) = envelope_to_wire(&bytes) else {
            return reply(pb::ExportSnapshotResponse::failed(internal()));
        };
        let response = pb::ExportSnapshotResponse {
            status: Some(ok_status()),
            snapshot: Some(snapshot),
        };
        if agent_protocol::responses::validate_export_snapshot_response(
            &response,
            &entry.negotiated,
        )
        .is_err()
        {
            return reply(pb::ExportSnapshotResponse::failed(internal()));
        }
        reply(response)
    }

    pub(super) async fn import_snapshot_call(
        &self,
        request: Request<pb::ImportSnapshotRequest>,
    ) -> Reply<pb::ImportSnapshotResponse> {
        self.admit(&request)?;
        let r = request.into_inner();
        let op = r.client_operation_id.clone();
        let echo = |mut status: Status| {
            status.operation_id = op.clone();
            pb::ImportSnapshotResponse::failed(status)
        };
        // The structural validator only: keyed verification is the run host's.
        let raw = r.encode_to_vec();
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| {
                agent_protocol::snapshot::validate_import_snapshot_request_structure(&raw, n)
                    .map(drop)
            },
            true,
        ) {
            Ok(entry) => entry,
            Err(status) => return reply(echo(*status)),
        };
        let Some(bytes) = r.snapshot.as_ref().and_then(envelope_from_wire) else {
            return reply(echo(crate::status::invalid()));
        };
        let response = match self
            .host()
            .import(&self.ctx(), &entry.session, &op, &bytes)
            .await
        {
            Ok((Success::Imported { run_id, sequence }, duplicate)) => pb::ImportSnapshotResponse {
                status: Some(ok_status()),
                run_id,
                next_sequence: sequence,
                duplicate_operation: duplicate,
            },
            Ok(_) => echo(internal()),
            Err(error) => pb::ImportSnapshotResponse::failed(lifecycle_failure(
                &error,
                Some((&op, MutationKind::Import)),
            )?),
        };
        if agent_protocol::responses::validate_import_snapshot_response(
            &response,
            &entry.negotiated,
        )
        .is_err()
        {
            return reply(echo(internal()));
        }
        reply(response)
    }
}
