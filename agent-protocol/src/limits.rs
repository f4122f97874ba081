//! Named bounds of the protocol, with the original's values. Every one has a
//! test at the bound and one past it (`tests/limits.rs`).

/// The only protocol major this crate implements.
pub const PROTOCOL_MAJOR: u32 = 1;
/// The lowest implemented minor (the base protocol).
pub const PROTOCOL_MINIMUM_MINOR: u32 = 0;
/// The highest implemented minor (initialization attempt ids).
pub const PROTOCOL_MAXIMUM_MINOR: u32 = 3;
/// The minor that adds snapshot transfer (needs the snapshot capabilities).
pub const SNAPSHOT_TRANSFER_MINIMUM_MINOR: u32 = 1;
/// The minor from which interaction streams start with a complete snapshot.
pub const INTERACTION_STREAM_MINIMUM_MINOR: u32 = 2;
/// The minor from which Initialize carries an attempt id with exact replay.
pub const INITIALIZATION_ATTEMPT_MINIMUM_MINOR: u32 = 3;
/// Length of an initialization attempt id.
pub const INITIALIZATION_ATTEMPT_ID_BYTES: usize = 16;

/// Bound of every Initialize request and of every error-only Initialize
/// response, fixed before anything is negotiated.
pub const INITIALIZE_BOOTSTRAP_MAXIMUM_BYTES: usize = 1_048_576;
/// Largest snapshot payload.
pub const MAXIMUM_SNAPSHOT_BYTES: usize = 16 * 1024 * 1024;
/// Bytes an envelope may add around its payload.
pub const MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES: usize = 295;
/// Largest encoded snapshot envelope.
pub const MAXIMUM_SNAPSHOT_ENVELOPE_BYTES: usize =
    MAXIMUM_SNAPSHOT_BYTES + MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES;
/// The only snapshot format accepted.
pub const SNAPSHOT_FORMAT: &str = "spice.agent.snapshot/v1alpha3";
/// Length of a snapshot authority scope id and of its HMAC-SHA256.
pub const SNAPSHOT_AUTHORITY_DIGEST_BYTES: usize = 32;

/// Capability: snapshot export and import (minor 1).
pub const CAPABILITY_SNAPSHOTS: &str = "snapshots";
/// Capability: signed snapshot envelopes (minor 1).
pub const CAPABILITY_SNAPSHOT_AUTHORITY: &str = "snapshot-authority-v1";
/// Most names in one capability set.
pub const MAX_CAPABILITIES: usize = 1024;
/// Longest capability name.
pub const MAX_CAPABILITY_NAME_BYTES: usize = 256;

/// Longest client id, operation id, run id, interaction id, message id,
/// tool call id and tool name.
pub const MAX_ID_BYTES: usize = 128;
/// Longest build identity field, definition id/revision/model, plan id,
/// extension namespace, definition set revision, degraded reason, overload
/// resource, snapshot version and operation kind.
pub const MAX_NAME_BYTES: usize = 256;
/// Longest status message.
pub const MAX_STATUS_MESSAGE_BYTES: usize = 2048;
/// Longest cancellation reason.
pub const MAX_CANCEL_REASON_BYTES: usize = 1024;
/// Largest text part and JSON value (tool arguments, results, extensions,
/// event payloads).
pub const MAX_JSON_BYTES: usize = 1024 * 1024;
/// Largest interaction prompt, schema and response value.
pub const MAX_INTERACTION_PAYLOAD_BYTES: usize = 512 * 1024;
/// Fewest parts in a message.
pub const MIN_MESSAGE_PARTS: usize = 1;
/// Most parts in a message.
pub const MAX_MESSAGE_PARTS: usize = 128;
/// Fewest turns a definition may allow.
pub const MIN_DEFINITION_TURNS: u32 = 1;
/// Most turns a definition may allow.
pub const MAX_DEFINITION_TURNS: u32 = 1000;
/// Largest expected ownership epoch in a reconnect claim: the epoch after it
/// must still be representable and below the preview's `u64::MAX`.
pub const MAX_RECONNECT_EXPECTED_EPOCH: u64 = u64::MAX - 1;
/// Length of the client id the preflight's preview response uses, the
/// longest a server can allocate.
pub const PREVIEW_CLIENT_ID_BYTES: usize = MAX_ID_BYTES;
