//! Conversions between the seam's values and the wire messages. Every value
//! read from the wire goes through the seam's validating constructors; a
//! value that fails becomes a protocol error (the daemon broke the contract).

use std::time::{Duration, UNIX_EPOCH};

use agent_client as c;
use agent_protocol::event_payload as w;
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;

/// A wire value that did not fit the seam.
pub(crate) fn protocol<T>(_: T) -> c::Error {
    c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)
}

pub(crate) fn version_to_wire(v: c::ProtocolVersion) -> pbc::ProtocolVersion {
    pbc::ProtocolVersion {
        major: v.major(),
        minor: v.minor(),
        patch: v.patch(),
    }
}

pub(crate) fn version_from_wire(
    v: Option<&pbc::ProtocolVersion>,
) -> Result<c::ProtocolVersion, c::Error> {
    let v = v.ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    c::ProtocolVersion::new(v.major, v.minor, v.patch).map_err(protocol)
}

pub(crate) fn range_from_wire(
    r: Option<&pbc::ProtocolRange>,
) -> Result<c::ProtocolRange, c::Error> {
    let r = r.ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    c::ProtocolRange::new(
        version_from_wire(r.minimum.as_ref())?,
        version_from_wire(r.maximum.as_ref())?,
    )
    .map_err(protocol)
}

pub(crate) fn limits_to_wire(l: &c::Limits) -> pbc::Limits {
    pbc::Limits {
        max_message_bytes: l.message_bytes(),
        max_collection_items: l.collection_items(),
        max_replay_events: l.replay_events(),
        max_replay_bytes: l.replay_bytes(),
        max_concurrent_streams: l.concurrent_streams(),
        max_active_runs: l.active_runs(),
    }
}

/// Whether every limit fits this platform's `usize` (the adapter indexes and
/// allocates by them).
pub(crate) fn limits_fit_platform(l: &pbc::Limits) -> bool {
    usize::try_from(l.max_message_bytes).is_ok() && usize::try_from(l.max_replay_bytes).is_ok()
}

pub(crate) fn limits_from_wire(l: Option<&pbc::Limits>) -> Result<c::Limits, c::Error> {
    let l = l.ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    if !limits_fit_platform(l) {
        return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION));
    }
    c::Limits::new(
        l.max_message_bytes,
        l.max_collection_items,
        l.max_replay_events,
        l.max_replay_bytes,
        l.max_concurrent_streams,
        l.max_active_runs,
    )
    .map_err(protocol)
}

pub(crate) fn build_from_wire(b: Option<&pbc::BuildIdentity>) -> Result<c::Build, c::Error> {
    let b = b.ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    c::Build::new(&b.component, &b.version, &b.commit, &b.go_version).map_err(protocol)
}

pub(crate) fn health_from_wire(h: Option<&pbc::Health>) -> Result<c::Health, c::Error> {
    let h = h.ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    let state = match pbc::HealthState::try_from(h.state) {
        Ok(pbc::HealthState::Starting) => c::HealthState::Starting,
        Ok(pbc::HealthState::Ready) => c::HealthState::Ready,
        Ok(pbc::HealthState::Degraded) => c::HealthState::Degraded,
        Ok(pbc::HealthState::Stopping) => c::HealthState::Stopping,
        _ => return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)),
    };
    c::Health::new(
        state,
        h.degraded_reasons.clone(),
        h.active_runs,
        limits_from_wire(h.limits.as_ref())?,
    )
    .map_err(protocol)
}

pub(crate) fn initialize_to_wire(r: &c::InitializeRequest) -> pbe::InitializeRequest {
    pbe::InitializeRequest {
        protocol: Some(pbc::ProtocolRange {
            minimum: Some(version_to_wire(r.protocol().minimum())),
            maximum: Some(version_to_wire(r.protocol().maximum())),
        }),
        client: Some(pbc::BuildIdentity {
            component: r.client().component().to_owned(),
            version: r.client().version().to_owned(),
            commit: r.client().commit().to_owned(),
            go_version: r.client().toolchain().to_owned(),
        }),
        supported_capabilities: Some(pbc::CapabilitySet {
            names: r.supported_capabilities().to_vec(),
        }),
        required_capabilities: Some(pbc::CapabilitySet {
            names: r.required_capabilities().to_vec(),
        }),
        requested_limits: Some(limits_to_wire(r.limits())),
        reconnect_claim: r.reconnect_claim().map(|claim| pbe::ReconnectClaim {
            client_id: claim.client_id().to_owned(),
            expected_ownership_epoch: claim.expected_epoch(),
        }),
        initialization_attempt_id: r.attempt().map(|a| a.bytes().to_vec()).unwrap_or_default(),
    }
}

pub(crate) fn connection_from_wire(r: &pbe::InitializeResponse) -> Result<c::Connection, c::Error> {
    let limits = limits_from_wire(r.limits.as_ref())?;
    let set = r
        .definitions
        .as_ref()
        .ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    let definitions = set
        .definitions
        .iter()
        .map(|d| {
            c::Definition::new(
                c::DefinitionRef::new(&d.id, &d.revision)?,
                &d.model,
                d.max_turns,
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(protocol)?;
    c::Connection::new(c::ConnectionSpec {
        protocol: version_from_wire(r.protocol.as_ref())?,
        server: build_from_wire(r.server.as_ref())?,
        capabilities: r
            .capabilities
            .as_ref()
            .map(|s| s.names.clone())
            .unwrap_or_default(),
        limits,
        health: health_from_wire(r.health.as_ref())?,
        client_id: r.client_id.clone(),
        epoch: r.ownership_epoch,
        catalog: c::Catalog::new(&set.revision, definitions, &limits).map_err(protocol)?,
    })
    .map_err(protocol)
}

pub(crate) fn pending_from_wire(
    p: &pbe::PendingInteraction,
) -> Result<c::PendingInteraction, c::Error> {
    c::PendingInteraction::new(
        c::RunRef::new(&p.run_id).map_err(protocol)?,
        c::InteractionId::new(&p.interaction_id).map_err(protocol)?,
        &p.kind,
        &p.prompt,
        c::StructuredValue::parse(p.schema_json.clone()).map_err(protocol)?,
    )
    .map_err(protocol)
}

pub(crate) fn interaction_snapshot_from_wire(
    s: &pbe::InteractionSnapshot,
    collection_items: u32,
) -> Result<c::InteractionSnapshot, c::Error> {
    let pending = s
        .pending
        .iter()
        .map(pending_from_wire)
        .collect::<Result<Vec<_>, _>>()?;
    c::InteractionSnapshot::new(s.revision, pending, collection_items).map_err(protocol)
}

pub(crate) fn interaction_delta_from_wire(
    d: &pbe::InteractionDelta,
) -> Result<c::InteractionUpdate, c::Error> {
    let kind = match pbe::InteractionDeltaKind::try_from(d.kind) {
        Ok(pbe::InteractionDeltaKind::Opened) => c::InteractionUpdateKind::Opened,
        Ok(pbe::InteractionDeltaKind::Closed) => c::InteractionUpdateKind::Closed,
        _ => return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)),
    };
    let item = d
        .interaction
        .as_ref()
        .ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?;
    c::InteractionUpdate::new(d.revision, kind, pending_from_wire(item)?).map_err(protocol)
}

pub(crate) fn interaction_control_from_wire(
    ctl: &pbe::InteractionStreamControl,
) -> Result<c::InteractionControl, c::Error> {
    c::InteractionControl::new(
        ctl.latest_revision,
        ctl.page_last_revision,
        ctl.has_more,
        ctl.tailing,
    )
    .map_err(protocol)
}

pub(crate) fn event_control_from_wire(
    ctl: &pbe::StreamControl,
) -> Result<c::EventControl, c::Error> {
    match ctl.page_last_sequence {
        Some(page_last) => c::EventControl::new(
            ctl.earliest_sequence,
            ctl.latest_sequence,
            ctl.last_delivered_sequence,
            page_last,
            ctl.has_more,
            ctl.tailing,
        ),
        None => c::EventControl::legacy(
            ctl.earliest_sequence,
            ctl.latest_sequence,
            ctl.last_delivered_sequence,
        ),
    }
    .map_err(protocol)
}

pub(crate) fn event_kind_from_wire(kind: i32) -> Result<c::EventKind, c::Error> {
    // The wire numbers are 1..=19 in the seam's order.
    usize::try_from(kind)
        .ok()
        .and_then(|k| k.checked_sub(1))
        .and_then(|i| c::EventKind::ALL.get(i).copied())
        .ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))
}

/// The problem of an `interaction.failed` whose wire error text is empty.
pub(crate) const INTERACTION_FAILED_TEXT: &str = "failed";
/// The problem of an `interaction.cancelled` whose wire error text is empty.
pub(crate) const INTERACTION_CANCELLED_TEXT: &str = "cancelled";

/// The detail of `kind` from its JSON payload, decoded strictly in the wire's shape (the
/// original client's rules, `agent_protocol::event_payload`): `run.completed` carries
/// none; every other kind requires its object and nothing else.
pub(crate) fn event_detail_from_wire(
    kind: c::EventKind,
    bytes: &[u8],
) -> Result<c::EventDetail, c::Error> {
    use c::EventDetail as D;
    use w::WirePayload as W;
    let wire_kind = pbe::EventKind::try_from(event_kind_to_wire(kind)).map_err(protocol)?;
    Ok(
        match w::decode_event_payload(wire_kind, bytes).map_err(protocol)? {
            W::RunCompleted => D::RunCompleted,
            W::RunStarted(p) => D::RunStarted {
                definition: p.definition,
            },
            W::RunFailed(p) | W::RunCancelled(p) | W::TurnFailed(p) => D::Status { text: p.error },
            W::TurnStarted(p) | W::TurnCompleted(p) => D::Turn { turn: p.turn },
            W::ModelStarted(p) => D::ModelStarted {
                turn: p.turn,
                operation: Some(p.operation_id),
            },
            W::ModelDelta(p) => D::ModelDelta { text: p.text },
            W::ModelCompleted(p) => D::ModelCompleted {
                usage: c::Usage {
                    input_tokens: p.input_tokens,
                    output_tokens: p.output_tokens,
                },
            },
            W::ModelFailed(p) => D::ModelFailed(
                c::ModelFailure::new(&p.code, &p.message, p.retryable, p.before_stream)
                    .map_err(protocol)?,
            ),
            W::ToolStarted(p) => D::ToolStarted {
                call_id: p.call_id,
                name: p.name,
            },
            W::ToolProgress(p) => D::ToolProgress {
                call_id: p.call_id,
                message: p.message,
            },
            W::ToolCompleted(p) => tool_terminal(p, c::ToolOutcome::Completed)?,
            W::ToolFailed(p) => {
                let outcome = match p.outcome {
                    Some(w::ToolExecution::Uncertain) => c::ToolOutcome::Uncertain,
                    Some(w::ToolExecution::Definitive) | None => c::ToolOutcome::Failed,
                };
                tool_terminal(p, outcome)?
            }
            W::InteractionStarted(p) => D::InteractionStarted {
                id: p.id,
                kind: p.kind,
            },
            W::InteractionCompleted(p) => D::InteractionTerminal {
                id: p.id,
                problem: nonempty(p.error),
            },
            W::InteractionFailed(p) => D::InteractionTerminal {
                id: p.id,
                problem: Some(nonempty(p.error).unwrap_or_else(|| INTERACTION_FAILED_TEXT.into())),
            },
            W::InteractionCancelled(p) => D::InteractionTerminal {
                id: p.id,
                problem: Some(
                    nonempty(p.error).unwrap_or_else(|| INTERACTION_CANCELLED_TEXT.into()),
                ),
            },
        },
    )
}

fn nonempty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// A wire tool terminal as the seam's; absent execution facts allow a retry.
fn tool_terminal(p: w::ToolTerminal, outcome: c::ToolOutcome) -> Result<c::EventDetail, c::Error> {
    let retry = match p.retry {
        Some(w::ToolRetry::Never) => c::ToolRetry::Never,
        Some(w::ToolRetry::Allowed) | None => c::ToolRetry::Allowed,
    };
    let problem = nonempty(p.error);
    Ok(c::EventDetail::ToolTerminal(
        c::ToolTerminal::new(&p.call_id, &p.name, problem.as_deref(), outcome, retry)
            .map_err(protocol)?,
    ))
}

/// The wire number of a seam kind (1..=19 in the seam's order).
fn event_kind_to_wire(kind: c::EventKind) -> i32 {
    c::EventKind::ALL
        .iter()
        .position(|k| *k == kind)
        .and_then(|i| i32::try_from(i + 1).ok())
        .unwrap_or(0)
}

/// Decodes one engine-protocol event into the seam's [`c::Event`], as strictly as this
/// adapter reads its own streams: the event must pass `agent_protocol`'s
/// [`validate_run_event`](agent_protocol::stream::validate_run_event) (a token run id, a
/// positive sequence and time, a known kind whose `terminal` flag agrees with it), and its
/// payload must have exactly its kind's wire shape (no unknown member, no trailing JSON).
/// Anything else is [`c::Error::Protocol`]. For another transport that carries the same
/// events, such as `agent-restate`'s adapter.
///
/// ```
/// use agent_protocol::pb::engine::v1::{EventKind, RunEvent};
///
/// let wire = RunEvent {
///     run_id: "run-1".to_owned(),
///     sequence: 1,
///     unix_nano: 1_700_000_000_000_000_000,
///     kind: EventKind::RunStarted as i32,
///     payload_json: br#"{"definition":"coding-agent"}"#.to_vec(),
///     terminal: false,
/// };
/// let event = agent_client_grpc::decode_event(&wire).unwrap();
/// assert_eq!(event.kind(), agent_client::EventKind::RunStarted);
/// assert_eq!((event.run().as_str(), event.sequence()), ("run-1", 1));
///
/// let unknown_member = RunEvent { payload_json: br#"{"definition":"x","extra":1}"#.to_vec(), ..wire };
/// assert!(matches!(agent_client_grpc::decode_event(&unknown_member), Err(agent_client::Error::Protocol(_))));
/// ```
pub fn decode_event(event: &pbe::RunEvent) -> Result<c::Event, c::Error> {
    agent_protocol::stream::validate_run_event(event).map_err(protocol)?;
    event_from_wire(event)
}

/// A validated wire event as a seam event.
pub(crate) fn event_from_wire(e: &pbe::RunEvent) -> Result<c::Event, c::Error> {
    let kind = event_kind_from_wire(e.kind)?;
    let detail = event_detail_from_wire(kind, &e.payload_json)?;
    let nanos = u64::try_from(e.unix_nano).map_err(protocol)?;
    c::Event::new(
        c::RunRef::new(&e.run_id).map_err(protocol)?,
        e.sequence,
        UNIX_EPOCH + Duration::from_nanos(nanos),
        kind,
        detail,
    )
    .map_err(protocol)
}
