//! Conversions between the seam's values and the wire messages. Every value
//! read from the wire goes through the seam's validating constructors; a
//! value that fails becomes a protocol error (the daemon broke the contract).

use std::time::{Duration, UNIX_EPOCH};

use agent_client as c;
use agent_protocol::pb::common::v1 as pbc;
use agent_protocol::pb::engine::v1 as pbe;
use serde::Deserialize;

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

/// The status text of a `run.cancelled` that carries no data.
pub(crate) const CANCELLED_TEXT: &str = "cancelled";
/// The code of a `model.failed` that carries only a problem text.
pub(crate) const MODEL_FAILED_CODE: &str = "model_failed";
/// The problem of an `interaction.failed` that names none.
pub(crate) const INTERACTION_FAILED_TEXT: &str = "failed";
/// The problem of an `interaction.cancelled` that names none.
pub(crate) const INTERACTION_CANCELLED_TEXT: &str = "cancelled";

/// Payload shapes, one per detail (the daemon writes these JSON objects).
mod payload {
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RunStarted {
        /// The definition id (the reference daemon's shape).
        #[serde(default)]
        pub(super) definition: Option<String>,
        /// The agent definition's name (this workspace's kernel payload).
        #[serde(default)]
        pub(super) agent: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Status {
        /// The status text (the reference daemon's shape).
        #[serde(default)]
        pub(super) error: Option<String>,
        /// The failure code (this workspace's kernel: `run.failed`, `turn.failed`).
        #[serde(default)]
        pub(super) code: Option<String>,
        /// The turn (this workspace's kernel: `turn.failed`).
        #[serde(default)]
        #[allow(dead_code)]
        pub(super) turn: Option<u32>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Turn {
        pub(super) turn: u32,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ModelStarted {
        pub(super) turn: u32,
        /// Absent from this workspace's kernel payload (`{"turn":N}`).
        #[serde(default)]
        pub(super) operation_id: Option<String>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Text {
        pub(super) text: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ModelCompleted {
        pub(super) input_tokens: u64,
        pub(super) output_tokens: u64,
        #[serde(default)]
        #[allow(dead_code)]
        pub(super) metadata: Option<Vec<serde::de::IgnoredAny>>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ModelFailed {
        /// The reference daemon's shape: a code and a message.
        #[serde(default)]
        pub(super) code: Option<String>,
        #[serde(default)]
        pub(super) message: Option<String>,
        /// This workspace's kernel: one problem text.
        #[serde(default)]
        pub(super) problem: Option<String>,
        pub(super) retryable: bool,
        pub(super) before_stream: bool,
        #[serde(default)]
        #[allow(dead_code)]
        pub(super) metadata: Option<Vec<serde::de::IgnoredAny>>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ToolStarted {
        pub(super) call_id: String,
        pub(super) name: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ToolProgress {
        pub(super) call_id: String,
        pub(super) message: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct ToolTerminal {
        pub(super) call_id: String,
        pub(super) name: String,
        #[serde(default)]
        pub(super) error: String,
        #[serde(default)]
        pub(super) outcome: String,
        #[serde(default)]
        pub(super) retry: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct InteractionStarted {
        pub(super) id: String,
        pub(super) kind: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct InteractionTerminal {
        pub(super) id: String,
        #[serde(default)]
        pub(super) error: String,
        /// This workspace's kernel: the failure code of a failed interaction, if any.
        #[serde(default)]
        pub(super) code: Option<String>,
    }
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, c::Error> {
    if bytes.is_empty() {
        return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION));
    }
    serde_json::from_slice(bytes).map_err(protocol)
}

fn nonempty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

/// The detail of `kind` from its JSON payload. `run.completed` carries
/// none; every other kind requires its object.
pub(crate) fn event_detail_from_wire(
    kind: c::EventKind,
    bytes: &[u8],
) -> Result<c::EventDetail, c::Error> {
    use c::EventDetail as D;
    use c::EventKind as K;
    Ok(match kind {
        K::RunCompleted => {
            if !bytes.is_empty() {
                return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION));
            }
            D::RunCompleted
        }
        K::RunStarted => {
            let p: payload::RunStarted = decode(bytes)?;
            D::RunStarted {
                definition: p
                    .definition
                    .or(p.agent)
                    .ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?,
            }
        }
        // This workspace's kernel sends `run.cancelled` without data.
        K::RunCancelled if bytes.is_empty() => D::Status {
            text: CANCELLED_TEXT.to_owned(),
        },
        K::RunFailed | K::RunCancelled | K::TurnFailed => {
            let p: payload::Status = decode(bytes)?;
            D::Status {
                text: p
                    .error
                    .or(p.code)
                    .ok_or(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION))?,
            }
        }
        K::TurnStarted | K::TurnCompleted => D::Turn {
            turn: decode::<payload::Turn>(bytes)?.turn,
        },
        K::ModelStarted => {
            let p: payload::ModelStarted = decode(bytes)?;
            D::ModelStarted {
                turn: p.turn,
                operation: p.operation_id,
            }
        }
        K::ModelDelta => D::ModelDelta {
            text: decode::<payload::Text>(bytes)?.text,
        },
        K::ModelCompleted => {
            let p: payload::ModelCompleted = decode(bytes)?;
            D::ModelCompleted {
                usage: c::Usage {
                    input_tokens: p.input_tokens,
                    output_tokens: p.output_tokens,
                },
            }
        }
        K::ModelFailed => {
            let p: payload::ModelFailed = decode(bytes)?;
            let (code, message) = match (p.code, p.message, p.problem) {
                (Some(code), Some(message), None) => (code, message),
                (None, None, Some(problem)) => (MODEL_FAILED_CODE.to_owned(), problem),
                _ => return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)),
            };
            D::ModelFailed(
                c::ModelFailure::new(&code, &message, p.retryable, p.before_stream)
                    .map_err(protocol)?,
            )
        }
        K::ToolStarted => {
            let p: payload::ToolStarted = decode(bytes)?;
            D::ToolStarted {
                call_id: p.call_id,
                name: p.name,
            }
        }
        K::ToolProgress => {
            let p: payload::ToolProgress = decode(bytes)?;
            D::ToolProgress {
                call_id: p.call_id,
                message: p.message,
            }
        }
        K::ToolCompleted | K::ToolFailed => {
            let p: payload::ToolTerminal = decode(bytes)?;
            let outcome = match (kind, p.outcome.as_str()) {
                // "success" and "problem" are this workspace's kernel outcomes: a tool
                // that answered the model with a problem still completed.
                (K::ToolCompleted, "" | "completed" | "success" | "problem") => {
                    c::ToolOutcome::Completed
                }
                (K::ToolFailed, "" | "failed") => c::ToolOutcome::Failed,
                (K::ToolFailed, "uncertain") => c::ToolOutcome::Uncertain,
                _ => return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)),
            };
            let retry = match p.retry.as_str() {
                "" | "allowed" => c::ToolRetry::Allowed,
                "never" => c::ToolRetry::Never,
                _ => return Err(c::Error::Protocol(c::Error::PROTOCOL_VIOLATION)),
            };
            let problem = nonempty(p.error);
            D::ToolTerminal(
                c::ToolTerminal::new(&p.call_id, &p.name, problem.as_deref(), outcome, retry)
                    .map_err(protocol)?,
            )
        }
        K::InteractionStarted => {
            let p: payload::InteractionStarted = decode(bytes)?;
            D::InteractionStarted {
                id: p.id,
                kind: p.kind,
            }
        }
        K::InteractionCompleted | K::InteractionFailed | K::InteractionCancelled => {
            let p: payload::InteractionTerminal = decode(bytes)?;
            let problem = nonempty(p.error).or(p.code).or(match kind {
                // This workspace's kernel names no problem; the kind is the fact.
                K::InteractionFailed => Some(INTERACTION_FAILED_TEXT.to_owned()),
                K::InteractionCancelled => Some(INTERACTION_CANCELLED_TEXT.to_owned()),
                _ => None,
            });
            D::InteractionTerminal { id: p.id, problem }
        }
    })
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
