//! StreamEvents (docs/transport.md, "What the server serves"): replay, then the live tail, as framed pages.

use std::pin::Pin;

use agent_core::event::{Envelope, ReplayRequest};
use agent_daemon::HostError;
use agent_protocol::pb::common::v1::Status;
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::stream_events_response::Payload as EventPayload;
use agent_protocol::requests::validate_stream_events_request;
use agent_protocol::status::{Violation, ok_status, overload_status};
use agent_protocol::stream::{check_replay_cursor, failed_stream_control, validate_event_page};
use tonic::{Request, Response};

use crate::status::{internal, lifecycle_failure};

use super::envelope::event_to_wire;
use super::{Reply, Service};

impl Service {
    pub(super) async fn open_event_stream(
        &self,
        request: Request<pb::StreamEventsRequest>,
    ) -> Reply<BoxStream<pb::StreamEventsResponse>> {
        self.admit(&request)?;
        let r = request.into_inner();
        let fail = |status: Status| -> Reply<BoxStream<pb::StreamEventsResponse>> {
            Ok(Response::new(one_frame(control_frame(
                failed_stream_control(status),
            ))))
        };
        let entry = match self.prepare(
            &r.client_id,
            r.ownership_epoch,
            |n| validate_stream_events_request(&r, n),
            false,
        ) {
            Ok(entry) => entry,
            Err(status) => return fail(*status),
        };
        let negotiated = entry.negotiated.clone();
        let replay = ReplayRequest {
            after: r.after_sequence,
            max_events: r.replay_limit as usize,
            max_bytes: usize::try_from(negotiated.limits.max_replay_bytes).unwrap_or(usize::MAX),
            tail: r.tail,
        };
        let ctx = self.ctx();
        let observation = match self
            .host()
            .replay_events(&ctx, &entry.session, &r.run_id, replay)
            .await
        {
            Ok(observation) => observation,
            Err(HostError::OutOfRange { earliest, latest }) => {
                let violation = match check_replay_cursor(r.after_sequence, earliest, latest) {
                    Err(v) => v,
                    Ok(()) => Violation::internal("replay cursor check disagrees"),
                };
                let status = violation.into_status();
                let recovery = match &status.detail {
                    Some(agent_protocol::pb::common::v1::status::Detail::ReplayBounds(b)) => {
                        b.recovery_sequence
                    }
                    _ => 0,
                };
                return Ok(Response::new(one_frame(control_frame(pb::StreamControl {
                    status: Some(status),
                    last_delivered_sequence: recovery,
                    ..Default::default()
                }))));
            }
            Err(error) => return fail(lifecycle_failure(&error, None)?),
        };
        // Pre-validate the whole page before anything is disclosed.
        let mut frames = Vec::with_capacity(observation.events.len() + 1);
        for envelope in &observation.events {
            match event_to_wire(envelope) {
                Some(event) => frames.push(pb::StreamEventsResponse {
                    payload: Some(EventPayload::Event(event)),
                }),
                None => return fail(internal()),
            }
        }
        let page_last = observation
            .events
            .last()
            .map_or(r.after_sequence, Envelope::sequence);
        let tailing = observation.is_tailing();
        frames.push(control_frame(pb::StreamControl {
            status: Some(ok_status()),
            earliest_sequence: observation.earliest,
            latest_sequence: observation.latest,
            last_delivered_sequence: page_last,
            tailing,
            page_last_sequence: Some(page_last),
            has_more: observation.has_more,
        }));
        if validate_event_page(r.after_sequence, &frames, &negotiated).is_err() {
            return fail(internal());
        }
        self.start_stream(
            observation,
            frames,
            move |mut observation, tx, root| async move {
                if !tailing {
                    observation.close();
                    return;
                }
                let mut last = page_last;
                loop {
                    let next = tokio::select! {
                        next = observation.next_or_lag() => next,
                        () = tx.closed() => return,
                        () = root.cancelled() => return,
                    };
                    let envelope = match next {
                        Ok(Some(envelope)) => envelope,
                        // The log ended, or a fence (reconnect, shutdown): end quietly.
                        Ok(None) => return,
                        // The subscriber fell behind the bounded tail: say so, with the exact
                        // cursor to replay from, rather than end as if the run had.
                        Err(lag) => {
                            let control = pb::StreamControl {
                                status: Some(overload_status(
                                    lag.resource,
                                    lag.limit,
                                    lag.observed,
                                )),
                                last_delivered_sequence: lag.last_delivered,
                                ..Default::default()
                            };
                            let _ = tx.send(Ok(control_frame(control))).await;
                            return;
                        }
                    };
                    let Some(event) = event_to_wire(&envelope).filter(|e| e.sequence == last + 1)
                    else {
                        let _ = tx
                            .send(Ok(control_frame(failed_stream_control(internal()))))
                            .await;
                        return;
                    };
                    last = event.sequence;
                    let frame = pb::StreamEventsResponse {
                        payload: Some(EventPayload::Event(event)),
                    };
                    if tx.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
            },
        )
    }
}

pub(super) type BoxStream<T> =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<T, tonic::Status>> + Send>>;

fn control_frame(control: pb::StreamControl) -> pb::StreamEventsResponse {
    pb::StreamEventsResponse {
        payload: Some(EventPayload::Control(control)),
    }
}

pub(super) fn one_frame<T: Send + 'static>(frame: T) -> BoxStream<T> {
    Box::pin(tokio_stream::once(Ok(frame)))
}
