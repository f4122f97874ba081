//! Event and interaction stream validators (docs/protocol.md, "Streams"): run events and
//! batches, replay-control arithmetic, the replay cursor, interaction
//! snapshots, deltas, the initial page and the stateful tail validator.

use std::collections::BTreeMap;

use prost::Message as _;
use prost::encoding::encoded_len_varint;

use crate::Negotiated;
use crate::limits::{MAX_ID_BYTES, MAX_INTERACTION_PAYLOAD_BYTES, MAX_JSON_BYTES};
use crate::pb::common::v1::{ErrorCode, ReplayBounds, Status, status::Detail};
use crate::pb::engine::v1::{
    EventKind, InteractionDelta, InteractionDeltaKind, InteractionSnapshot,
    InteractionStreamControl, PendingInteraction, RunEvent, StreamControl, StreamEventsResponse,
    StreamInteractionsResponse, stream_events_response::Payload as EventPayload,
    stream_interactions_response::Payload,
};
use crate::requests::fits;
use crate::status::{Violation, is_ok, validate_status};
use crate::token::{is_json, is_optional_json, is_token};

/// The fixed message of a replay cursor outside the retained window.
pub const REPLAY_OUT_OF_RANGE_MESSAGE: &str = "replay cursor lies outside the retained window";

/// Whether a kind ends its scope: every *_COMPLETED, *_FAILED and *_CANCELLED.
pub fn is_terminal_kind(kind: EventKind) -> bool {
    use EventKind as K;
    matches!(
        kind,
        K::RunCompleted
            | K::RunFailed
            | K::RunCancelled
            | K::TurnCompleted
            | K::TurnFailed
            | K::ModelCompleted
            | K::ModelFailed
            | K::ToolCompleted
            | K::ToolFailed
            | K::InteractionCompleted
            | K::InteractionFailed
            | K::InteractionCancelled
    )
}

/// One run event.
pub fn validate_run_event(e: &RunEvent) -> Result<(), Violation> {
    if !is_token(&e.run_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "event run id is not a token of at most 128 bytes",
        ));
    }
    if e.sequence == 0 {
        return Err(Violation::invalid("event sequence is zero"));
    }
    if e.unix_nano <= 0 {
        return Err(Violation::invalid("event time is not positive"));
    }
    let kind = match EventKind::try_from(e.kind) {
        Ok(EventKind::Unspecified) | Err(_) => {
            return Err(Violation::invalid("event kind is unknown"));
        }
        Ok(kind) => kind,
    };
    if e.terminal != is_terminal_kind(kind) {
        return Err(Violation::invalid(
            "event terminal flag disagrees with its kind",
        ));
    }
    if !is_optional_json(&e.payload_json, MAX_JSON_BYTES) {
        return Err(Violation::invalid(
            "event payload is not JSON of at most 1 MiB",
        ));
    }
    Ok(())
}

/// A replay page of events after cursor `after`: at most
/// `max_replay_events`, one run id, sequences exactly after+1, after+2, ...,
/// cumulative encoded size at most `max_replay_bytes`.
pub fn validate_event_batch(
    after: u64,
    events: &[RunEvent],
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    validate_events(after, events.iter(), negotiated)
}

fn validate_events<'a>(
    after: u64,
    events: impl Iterator<Item = &'a RunEvent>,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    let limits = &negotiated.limits;
    let mut expected = after;
    let mut bytes: u64 = 0;
    let mut count: u64 = 0;
    let mut run_id: Option<&str> = None;
    for e in events {
        count += 1;
        if count > u64::from(limits.max_replay_events) {
            return Err(Violation::invalid("event page exceeds max_replay_events"));
        }
        validate_run_event(e)?;
        if *run_id.get_or_insert(&e.run_id) != e.run_id {
            return Err(Violation::invalid("event page mixes run ids"));
        }
        expected = expected
            .checked_add(1)
            .ok_or_else(|| Violation::invalid("event sequence overflows"))?;
        if e.sequence != expected {
            return Err(Violation::invalid(
                "event sequences are not contiguous after the cursor",
            ));
        }
        bytes = bytes.saturating_add(e.encoded_len() as u64);
        if bytes > limits.max_replay_bytes {
            return Err(Violation::invalid("event page exceeds max_replay_bytes"));
        }
    }
    Ok(())
}

/// A replay page as it travels: event frames, then exactly one closing
/// control. The events form a valid batch after `after`; the control is
/// valid. Returns the control.
pub fn validate_event_page<'a>(
    after: u64,
    frames: &'a [StreamEventsResponse],
    negotiated: &Negotiated,
) -> Result<&'a StreamControl, Violation> {
    let Some((last, events)) = frames.split_last() else {
        return Err(Violation::invalid("an event page ends with a control"));
    };
    let Some(EventPayload::Control(control)) = &last.payload else {
        return Err(Violation::invalid("an event page ends with a control"));
    };
    let events = events.iter().map(|f| match &f.payload {
        Some(EventPayload::Event(e)) => Ok(e),
        _ => Err(Violation::invalid(
            "only events precede the closing control",
        )),
    });
    let mut failed = None;
    let events = events.map_while(|e| e.map_err(|v| failed = Some(v)).ok());
    validate_events(after, events, negotiated)?;
    if let Some(v) = failed {
        return Err(v);
    }
    validate_stream_control(control)?;
    Ok(control)
}

/// A retained window `[earliest, latest]`: valid (`earliest > 0`,
/// `latest >= earliest`) or empty (`earliest == latest + 1`, as `[1, 0]`
/// before any event and `[N+1, N]` after an import at N).
fn window_is_valid(earliest: u64, latest: u64) -> bool {
    earliest > 0 && latest >= earliest
}

fn window_is_empty(earliest: u64, latest: u64) -> bool {
    earliest > 0 && latest < u64::MAX && earliest == latest + 1
}

/// A page-closing stream control (docs/protocol.md, "Streams").
pub fn validate_stream_control(c: &StreamControl) -> Result<(), Violation> {
    let status = c
        .status
        .as_ref()
        .ok_or_else(|| Violation::invalid("stream control has no status"))?;
    validate_status(status)?;
    if !is_ok(Some(status)) {
        return Ok(());
    }
    let (earliest, latest) = (c.earliest_sequence, c.latest_sequence);
    if !window_is_valid(earliest, latest) && !window_is_empty(earliest, latest) {
        return Err(Violation::invalid(
            "stream control window is neither valid nor empty",
        ));
    }
    let floor = earliest - 1;
    match c.page_last_sequence {
        Some(page_last) => {
            if !(floor..=latest).contains(&page_last) {
                return Err(Violation::invalid(
                    "page_last_sequence lies outside the window",
                ));
            }
            if !(floor..=page_last).contains(&c.last_delivered_sequence) {
                return Err(Violation::invalid(
                    "last_delivered_sequence lies outside the page",
                ));
            }
            if c.has_more != (page_last < latest) {
                return Err(Violation::invalid(
                    "has_more disagrees with page_last_sequence",
                ));
            }
            if c.has_more && c.tailing {
                return Err(Violation::invalid("a page cannot both have more and tail"));
            }
            if c.tailing && page_last != latest {
                return Err(Violation::invalid("tailing needs the page to reach latest"));
            }
        }
        None => {
            if c.has_more || c.tailing {
                return Err(Violation::invalid(
                    "a legacy control neither has more nor tails",
                ));
            }
            if !(floor..=latest).contains(&c.last_delivered_sequence) {
                return Err(Violation::invalid(
                    "last_delivered_sequence lies outside the window",
                ));
            }
        }
    }
    Ok(())
}

/// Ok when the cursor can be served: the window is empty and `after ==
/// latest`, or the window is valid and `earliest-1 <= after <= latest`.
/// Otherwise `OUT_OF_RANGE` with [`ReplayBounds`]; recovery is earliest-1
/// below the window, latest above it.
pub fn check_replay_cursor(after: u64, earliest: u64, latest: u64) -> Result<(), Violation> {
    if window_is_empty(earliest, latest) && after == latest {
        return Ok(());
    }
    if window_is_valid(earliest, latest) && (earliest - 1..=latest).contains(&after) {
        return Ok(());
    }
    let recovery = if after < earliest {
        earliest.saturating_sub(1)
    } else {
        latest
    };
    Err(
        Violation::new(ErrorCode::OutOfRange, REPLAY_OUT_OF_RANGE_MESSAGE).with_detail(
            Detail::ReplayBounds(ReplayBounds {
                requested_after_sequence: after,
                earliest_sequence: earliest,
                latest_sequence: latest,
                recovery_sequence: recovery,
            }),
        ),
    )
}

/// One pending interaction.
pub fn validate_pending_interaction(p: &PendingInteraction) -> Result<(), Violation> {
    if !is_token(&p.run_id, MAX_ID_BYTES)
        || !is_token(&p.interaction_id, MAX_ID_BYTES)
        || !is_token(&p.kind, MAX_ID_BYTES)
    {
        return Err(Violation::invalid(
            "pending run, interaction and kind are tokens of at most 128 bytes",
        ));
    }
    if p.prompt.is_empty()
        || p.prompt.trim() != p.prompt
        || p.prompt.len() > MAX_INTERACTION_PAYLOAD_BYTES
    {
        return Err(Violation::invalid(
            "pending prompt must be non-empty, trimmed and at most 512 KiB",
        ));
    }
    if !is_json(&p.schema_json, MAX_INTERACTION_PAYLOAD_BYTES) {
        return Err(Violation::invalid(
            "pending schema is not JSON of at most 512 KiB",
        ));
    }
    Ok(())
}

fn pending_key(p: &PendingInteraction) -> (&str, &str) {
    (&p.run_id, &p.interaction_id)
}

fn frame_fits(
    frame: &StreamInteractionsResponse,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    if fits(frame.encoded_len(), negotiated.limits.max_message_bytes) {
        Ok(())
    } else {
        Err(Violation::invalid(
            "interaction frame exceeds the message size",
        ))
    }
}

/// A complete pending snapshot: at most `max_collection_items` valid items,
/// sorted strictly by (run_id, interaction_id), and its frame within the
/// message size.
pub fn validate_interaction_snapshot(
    s: &InteractionSnapshot,
    negotiated: &Negotiated,
) -> Result<(), Violation> {
    if s.pending.len() as u64 > u64::from(negotiated.limits.max_collection_items) {
        return Err(Violation::invalid(
            "interaction snapshot exceeds max_collection_items",
        ));
    }
    s.pending
        .iter()
        .try_for_each(validate_pending_interaction)?;
    if s.pending
        .windows(2)
        .any(|w| pending_key(&w[0]) >= pending_key(&w[1]))
    {
        return Err(Violation::invalid(
            "interaction snapshot is not sorted strictly",
        ));
    }
    frame_fits(
        &StreamInteractionsResponse {
            payload: Some(Payload::Snapshot(s.clone())),
        },
        negotiated,
    )
}

/// One delta: revision > 0, OPENED or CLOSED, a valid item.
pub fn validate_interaction_delta(d: &InteractionDelta) -> Result<(), Violation> {
    if d.revision == 0 {
        return Err(Violation::invalid("delta revision is zero"));
    }
    match InteractionDeltaKind::try_from(d.kind) {
        Ok(InteractionDeltaKind::Opened | InteractionDeltaKind::Closed) => {}
        _ => return Err(Violation::invalid("delta kind is unknown")),
    }
    let item = d
        .interaction
        .as_ref()
        .ok_or_else(|| Violation::invalid("delta has no interaction"))?;
    validate_pending_interaction(item)
}

/// An interaction stream control.
pub fn validate_interaction_control(c: &InteractionStreamControl) -> Result<(), Violation> {
    let status = c
        .status
        .as_ref()
        .ok_or_else(|| Violation::invalid("interaction control has no status"))?;
    validate_status(status)?;
    if !is_ok(Some(status)) {
        return Ok(());
    }
    if c.page_last_revision > c.latest_revision {
        return Err(Violation::invalid(
            "page_last_revision exceeds latest_revision",
        ));
    }
    if c.has_more != (c.page_last_revision < c.latest_revision) {
        return Err(Violation::invalid(
            "has_more disagrees with page_last_revision",
        ));
    }
    if c.has_more && c.tailing {
        return Err(Violation::invalid("a page cannot both have more and tail"));
    }
    if c.tailing && c.page_last_revision != c.latest_revision {
        return Err(Violation::invalid("tailing needs the page to reach latest"));
    }
    Ok(())
}

/// The initial interaction page: exactly a snapshot then an OK control, each
/// within the size bound; latest == page_last == snapshot revision, no more
/// pages, and tailing equal to the request's `tail`.
pub fn validate_interaction_stream_page<'a>(
    request_tail: bool,
    frames: &'a [StreamInteractionsResponse],
    negotiated: &Negotiated,
) -> Result<(&'a InteractionSnapshot, &'a InteractionStreamControl), Violation> {
    let [first, second] = frames else {
        return Err(Violation::invalid(
            "an interaction page is exactly a snapshot and a control",
        ));
    };
    frame_fits(first, negotiated)?;
    frame_fits(second, negotiated)?;
    let (Some(Payload::Snapshot(snapshot)), Some(Payload::Control(control))) =
        (&first.payload, &second.payload)
    else {
        return Err(Violation::invalid(
            "an interaction page is exactly a snapshot and a control",
        ));
    };
    validate_interaction_snapshot(snapshot, negotiated)?;
    validate_interaction_control(control)?;
    if !is_ok(control.status.as_ref()) {
        return Err(Violation::invalid(
            "the initial interaction control must be OK",
        ));
    }
    if control.latest_revision != snapshot.revision
        || control.page_last_revision != snapshot.revision
        || control.has_more
    {
        return Err(Violation::invalid(
            "the initial control must close exactly at the snapshot revision",
        ));
    }
    if control.tailing != request_tail {
        return Err(Violation::invalid(
            "the initial control's tailing differs from the request",
        ));
    }
    Ok((snapshot, control))
}

/// Encoded length of one `repeated PendingInteraction pending = 2` entry.
fn pending_entry_len(p: &PendingInteraction) -> usize {
    let len = p.encoded_len();
    1 + encoded_len_varint(len as u64) + len
}

/// Follows a tailing interaction stream after its validated initial page,
/// one delta at a time. Single consumer; a rejected frame changes no state.
#[derive(Clone, Debug)]
pub struct InteractionTailValidator {
    negotiated: Negotiated,
    revision: u64,
    pending: BTreeMap<(String, String), PendingInteraction>,
    /// Sum of [`pending_entry_len`] over `pending`.
    entries_len: usize,
}

impl InteractionTailValidator {
    /// Starts from an initial page that must validate with `tail = true`.
    pub fn new(
        frames: &[StreamInteractionsResponse],
        negotiated: &Negotiated,
    ) -> Result<Self, Violation> {
        let (snapshot, _) = validate_interaction_stream_page(true, frames, negotiated)?;
        let pending: BTreeMap<_, _> = snapshot
            .pending
            .iter()
            .map(|p| ((p.run_id.clone(), p.interaction_id.clone()), p.clone()))
            .collect();
        let entries_len = snapshot.pending.iter().map(pending_entry_len).sum();
        Ok(Self {
            negotiated: negotiated.clone(),
            revision: snapshot.revision,
            pending,
            entries_len,
        })
    }

    /// The revision of the last accepted frame.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The pending set after the last accepted frame, sorted.
    pub fn pending(&self) -> impl Iterator<Item = &PendingInteraction> {
        self.pending.values()
    }

    /// The pending set as the snapshot a reconnect would receive now.
    pub fn snapshot(&self) -> InteractionSnapshot {
        InteractionSnapshot {
            revision: self.revision,
            pending: self.pending.values().cloned().collect(),
        }
    }

    /// Accepts the next delta frame or rejects it without changing state.
    pub fn accept(&mut self, frame: &StreamInteractionsResponse) -> Result<(), Violation> {
        frame_fits(frame, &self.negotiated)?;
        let Some(Payload::Delta(delta)) = &frame.payload else {
            return Err(Violation::invalid(
                "an interaction tail carries only deltas",
            ));
        };
        validate_interaction_delta(delta)?;
        let next = self
            .revision
            .checked_add(1)
            .ok_or_else(|| Violation::invalid("interaction revision overflows"))?;
        if delta.revision != next {
            return Err(Violation::invalid(
                "delta revision is not the previous revision plus one",
            ));
        }
        let item = delta
            .interaction
            .as_ref()
            .expect("validated delta has an interaction");
        let key = (item.run_id.clone(), item.interaction_id.clone());
        let opened = delta.kind == InteractionDeltaKind::Opened as i32;
        let entries_len = if opened {
            if self.pending.contains_key(&key) {
                return Err(Violation::invalid(
                    "OPENED names an interaction already pending",
                ));
            }
            if self.pending.len() as u64 >= u64::from(self.negotiated.limits.max_collection_items) {
                return Err(Violation::invalid("OPENED exceeds max_collection_items"));
            }
            self.entries_len + pending_entry_len(item)
        } else {
            match self.pending.get(&key) {
                Some(existing) if existing == item => self.entries_len - pending_entry_len(item),
                Some(_) => {
                    return Err(Violation::invalid(
                        "CLOSED does not match the pending interaction",
                    ));
                }
                None => {
                    return Err(Violation::invalid(
                        "CLOSED names an interaction that is not pending",
                    ));
                }
            }
        };
        // The frame a reconnect would get now: Response{snapshot{revision, pending...}}.
        let revision_len = if next == 0 {
            0
        } else {
            1 + encoded_len_varint(next)
        };
        let snapshot_len = revision_len + entries_len;
        let frame_len = 1 + encoded_len_varint(snapshot_len as u64) + snapshot_len;
        if !fits(frame_len, self.negotiated.limits.max_message_bytes) {
            return Err(Violation::invalid(
                "the pending set would not fit one snapshot frame",
            ));
        }
        if opened {
            self.pending.insert(key, item.clone());
        } else {
            self.pending.remove(&key);
        }
        self.revision = next;
        self.entries_len = entries_len;
        Ok(())
    }
}

/// A non-OK status as a page-closing stream control (nothing else set).
pub fn failed_stream_control(status: Status) -> StreamControl {
    StreamControl {
        status: Some(status),
        ..StreamControl::default()
    }
}
