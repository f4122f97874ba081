//! StreamInteractions (docs/transport.md, "What the server serves"): the pending snapshot, then its deltas, and
//! the failure frame that fits the message bound.

use agent_core::interaction::PendingSnapshot;
use agent_protocol::limits::INTERACTION_STREAM_MINIMUM_MINOR;
use agent_protocol::negotiate::version;
use agent_protocol::pb::common::v1::{ErrorCode, ProtocolRange, Status};
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::status::{ok_status, overload_status};
use agent_protocol::stream::{InteractionTailValidator, validate_interaction_stream_page};
use prost::Message as _;
use tonic::{Request, Response};

use crate::status::{internal, lifecycle_failure};

use super::envelope::{delta_to_wire, pending_to_wire};
use super::events::{BoxStream, one_frame};
use super::lifecycle::invalid_status;
use super::{Reply, Service};

impl Service {
    pub(super) async fn open_interaction_stream(
        &self,
        request: Request<pb::StreamInteractionsRequest>,
    ) -> Reply<BoxStream<pb::StreamInteractionsResponse>> {
        self.admit(&request)?;
        let r = request.into_inner();
        let server_bound = self.shared.limits.max_message_bytes;
        let fail = |status: Status| -> Reply<BoxStream<pb::StreamInteractionsResponse>> {
            let frame = interaction_failure_frame(failure_control(status), server_bound)?;
            Ok(Response::new(one_frame(frame)))
        };
        if let Err(v) =
            agent_protocol::requests::validate_client_fields(&r.client_id, r.ownership_epoch)
        {
            return fail(invalid_status(v));
        }
        let entry = match self.session(&r.client_id, r.ownership_epoch) {
            Ok(entry) => entry,
            Err(status) => return fail(*status),
        };
        if entry.negotiated.protocol.minor < INTERACTION_STREAM_MINIMUM_MINOR {
            let server = ProtocolRange {
                minimum: Some(version(1, 2, 0)),
                maximum: Some(version(1, 2, 0)),
            };
            let client = ProtocolRange {
                minimum: Some(entry.negotiated.protocol),
                maximum: Some(entry.negotiated.protocol),
            };
            return fail(Status {
                code: ErrorCode::IncompatibleVersion as i32,
                message: agent_protocol::negotiate::INCOMPATIBLE_VERSION_MESSAGE.to_owned(),
                detail: Some(
                    agent_protocol::pb::common::v1::status::Detail::VersionMismatch(
                        agent_protocol::pb::common::v1::VersionMismatch {
                            client: Some(client),
                            server: Some(server),
                        },
                    ),
                ),
                ..Status::default()
            });
        }
        let negotiated = entry.negotiated.clone();
        // From here on a failure control must fit the negotiated bound.
        let bound = negotiated.limits.max_message_bytes;
        let fail = |status: Status| -> Reply<BoxStream<pb::StreamInteractionsResponse>> {
            let frame = interaction_failure_frame(failure_control(status), bound)?;
            Ok(Response::new(one_frame(frame)))
        };
        let ctx = self.ctx();
        let control = |revision: u64, tailing: bool| pb::StreamInteractionsResponse {
            payload: Some(pb::stream_interactions_response::Payload::Control(
                pb::InteractionStreamControl {
                    status: Some(ok_status()),
                    latest_revision: revision,
                    page_last_revision: revision,
                    has_more: false,
                    tailing,
                },
            )),
        };
        let snapshot_frame =
            |snapshot: &PendingSnapshot| -> Option<pb::StreamInteractionsResponse> {
                let pending = snapshot
                    .pending()
                    .iter()
                    .map(pending_to_wire)
                    .collect::<Option<Vec<_>>>()?;
                Some(pb::StreamInteractionsResponse {
                    payload: Some(pb::stream_interactions_response::Payload::Snapshot(
                        pb::InteractionSnapshot {
                            revision: snapshot.revision(),
                            pending,
                        },
                    )),
                })
            };
        if !r.tail {
            let snapshot = match self
                .host()
                .snapshot_interactions(&ctx, &entry.session)
                .await
            {
                Ok(snapshot) => snapshot,
                Err(error) => return fail(lifecycle_failure(&error, None)?),
            };
            let Some(first) = snapshot_frame(&snapshot) else {
                return fail(internal());
            };
            let frames = vec![first, control(snapshot.revision(), false)];
            if validate_interaction_stream_page(false, &frames, &negotiated).is_err() {
                return fail(internal());
            }
            return Ok(Response::new(Box::pin(tokio_stream::iter(
                frames.into_iter().map(Ok),
            ))));
        }
        let mut observation = match self
            .host()
            .subscribe_interactions(&ctx, &entry.session)
            .await
        {
            Ok(observation) => observation,
            Err(error) => return fail(lifecycle_failure(&error, None)?),
        };
        let Some(snapshot) = observation.take_snapshot() else {
            return fail(internal());
        };
        let Some(first) = snapshot_frame(&snapshot) else {
            return fail(internal());
        };
        // Both initial frames are built and validated before either is sent, so a fence
        // can never fall between them.
        let frames = vec![first, control(snapshot.revision(), true)];
        let Ok(mut validator) = InteractionTailValidator::new(&frames, &negotiated) else {
            return fail(internal());
        };
        self.start_stream(
            observation,
            frames,
            move |mut observation, tx, root| async move {
                loop {
                    let next = tokio::select! {
                        next = observation.next() => next,
                        () = tx.closed() => return,
                        () = root.cancelled() => return,
                    };
                    let Some(delta) = next else {
                        // Cut off for a queue bound: say so with the exact facts. Otherwise
                        // fenced (reconnect, shutdown) or closed: end quietly.
                        if let Some(exhausted) = observation.exhausted() {
                            let control = pb::InteractionStreamControl {
                                status: Some(overload_status(
                                    exhausted.resource,
                                    exhausted.limit as u64,
                                    exhausted.observed as u64,
                                )),
                                latest_revision: exhausted.last_delivered,
                                page_last_revision: exhausted.last_delivered,
                                ..Default::default()
                            };
                            let _ = tx.send(interaction_failure_frame(control, bound)).await;
                        }
                        return;
                    };
                    let frame = delta_to_wire(&delta, &validator);
                    let accepted = frame
                        .as_ref()
                        .is_some_and(|frame| validator.accept(frame).is_ok());
                    let Some(frame) = frame.filter(|_| accepted) else {
                        let failure = interaction_failure_frame(failure_control(internal()), bound);
                        let _ = tx.send(failure).await;
                        return;
                    };
                    if tx.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
            },
        )
    }
}

/// An interaction control carrying only `status`.
fn failure_control(status: Status) -> pb::InteractionStreamControl {
    pb::InteractionStreamControl {
        status: Some(status),
        ..Default::default()
    }
}

/// A failure control as a frame that fits `max_message_bytes` (docs/transport.md, "What the server serves"): the
/// control itself; if it does not fit, an `INTERNAL` control; if that does not fit either,
/// gRPC `ResourceExhausted` instead of a frame.
pub(crate) fn interaction_failure_frame(
    control: pb::InteractionStreamControl,
    max_message_bytes: u64,
) -> Result<pb::StreamInteractionsResponse, tonic::Status> {
    let frame = |control| pb::StreamInteractionsResponse {
        payload: Some(pb::stream_interactions_response::Payload::Control(control)),
    };
    let fits = |frame: &pb::StreamInteractionsResponse| {
        u64::try_from(frame.encoded_len()).is_ok_and(|len| len <= max_message_bytes)
    };
    let first = frame(control);
    if fits(&first) {
        return Ok(first);
    }
    let fallback = frame(failure_control(internal()));
    if fits(&fallback) {
        return Ok(fallback);
    }
    Err(tonic::Status::resource_exhausted(
        "interaction stream failure exceeds the message size",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_control_falls_back_to_internal_then_to_a_grpc_status() {
        let overload = failure_control(overload_status("pending_observer_queue_entries", 8, 9));
        let len = |control: &pb::InteractionStreamControl| {
            pb::StreamInteractionsResponse {
                payload: Some(pb::stream_interactions_response::Payload::Control(
                    control.clone(),
                )),
            }
            .encoded_len() as u64
        };
        let full = len(&overload);
        let internal_len = len(&failure_control(internal()));
        assert!(internal_len < full, "the fallback is the smaller frame");
        // Exactly at the bound the control itself is sent.
        let sent = interaction_failure_frame(overload.clone(), full).unwrap();
        assert_eq!(sent.encoded_len() as u64, full);
        // One byte short: the INTERNAL control.
        let sent = interaction_failure_frame(overload.clone(), full - 1).unwrap();
        let Some(pb::stream_interactions_response::Payload::Control(control)) = sent.payload else {
            panic!("a control");
        };
        assert_eq!(control.status, Some(internal()));
        // The fallback exactly fits; one byte less and no frame fits.
        assert!(interaction_failure_frame(overload.clone(), internal_len).is_ok());
        let status = interaction_failure_frame(overload, internal_len - 1).unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    }
}
