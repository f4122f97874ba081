//! StreamEvents (docs/transport.md, "What the server serves"): replay, then the live tail, as framed pages.

use std::pin::Pin;

use agent_core::event::{Envelope, ReplayRequest};
use agent_daemon::HostError;
use agent_protocol::event_payload::CAPABILITY_RICH_EVENTS;
use agent_protocol::pb::common::v1::Status;
use agent_protocol::pb::engine::v1 as pb;
use agent_protocol::pb::engine::v1::stream_events_response::Payload as EventPayload;
use agent_protocol::requests::validate_stream_events_request;
use agent_protocol::status::{Violation, ok_status, overload_status};
use agent_protocol::stream::{check_replay_cursor, failed_stream_control, validate_event_page};
use tonic::{Request, Response};

use crate::status::{internal, lifecycle_failure};

use super::envelope::{check_wire_event, project_wire_event};
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
        let rich = negotiated
            .capabilities
            .iter()
            .any(|c| c == CAPABILITY_RICH_EVENTS);
        // Pre-validate the whole page before anything is disclosed.
        let Some(mut frames) = page_frames(&observation.events, rich, project_wire_event) else {
            return fail(internal());
        };
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
                    let Some(frame) = tail_frame(&envelope, last, rich, project_wire_event) else {
                        let _ = tx.send(Ok(internal_failure_frame())).await;
                        return;
                    };
                    last = envelope.sequence();
                    if tx.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
            },
        )
    }
}

/// A projector: kernel envelope to (unchecked) wire event. The stream takes it as a
/// parameter so a test can inject a projection bug.
type Project = fn(&Envelope, bool) -> Option<pb::RunEvent>;

/// One projected event that passed the strict check, as a frame; `None` is a server bug.
fn checked_frame(
    envelope: &Envelope,
    rich: bool,
    project: Project,
) -> Option<pb::StreamEventsResponse> {
    let event = project(envelope, rich).filter(|event| check_wire_event(event, rich))?;
    Some(pb::StreamEventsResponse {
        payload: Some(EventPayload::Event(event)),
    })
}

/// The event frames of a replay page, every payload checked before any is sent; `None`
/// when one fails (the stream then ends with the internal failure, never a bad event).
fn page_frames(
    envelopes: &[Envelope],
    rich: bool,
    project: Project,
) -> Option<Vec<pb::StreamEventsResponse>> {
    let mut frames = Vec::with_capacity(envelopes.len() + 1);
    for envelope in envelopes {
        frames.push(checked_frame(envelope, rich, project)?);
    }
    Some(frames)
}

/// The frame of the next tailed event after `last`; `None` for a gap or a payload the
/// strict check refuses: the stream then ends with [`internal_failure_frame`].
fn tail_frame(
    envelope: &Envelope,
    last: u64,
    rich: bool,
    project: Project,
) -> Option<pb::StreamEventsResponse> {
    checked_frame(envelope, rich, project).filter(|_| envelope.sequence() == last + 1)
}

/// The control that ends a stream on a server bug: the documented internal failure.
fn internal_failure_frame() -> pb::StreamEventsResponse {
    control_frame(failed_stream_control(internal()))
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

#[cfg(test)]
mod tests {

    use agent_core::event::{Event, Timestamp};
    use agent_protocol::pb::common::v1::ErrorCode;

    use super::*;

    fn envelope(sequence: u64) -> Envelope {
        Envelope::new(
            agent_core::RunId::new("run-1").expect("a valid run id"),
            sequence,
            Timestamp::from_unix_nanos(1),
            Event::TurnStarted { turn: 1 },
        )
    }

    /// A projection bug: the kernel's own member instead of the wire's.
    fn broken(envelope: &Envelope, rich: bool) -> Option<pb::RunEvent> {
        let mut event = project_wire_event(envelope, rich)?;
        event.payload_json = br#"{"turn":1,"agent":"coder"}"#.to_vec();
        Some(event)
    }

    #[test]
    fn a_page_with_a_malformed_payload_is_not_sent() {
        let envelopes = [envelope(1), envelope(2)];
        let good = page_frames(&envelopes, false, project_wire_event).expect("sent");
        assert_eq!(good.len(), 2);
        assert!(page_frames(&envelopes, false, broken).is_none());
    }

    #[test]
    fn a_tailed_malformed_payload_ends_the_stream_with_the_internal_failure() {
        assert!(tail_frame(&envelope(2), 1, false, project_wire_event).is_some());
        // A malformed payload is not sent, and neither is an event after a gap.
        assert!(tail_frame(&envelope(2), 1, false, broken).is_none());
        assert!(tail_frame(&envelope(3), 1, false, project_wire_event).is_none());
        let Some(EventPayload::Control(control)) = internal_failure_frame().payload else {
            panic!("not a control frame")
        };
        let status = control.status.expect("a status");
        assert_eq!(status.code, ErrorCode::Internal as i32);
    }
}
