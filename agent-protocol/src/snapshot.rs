//! Structural validation of snapshot envelopes and import requests (the
//! protocol half of docs/snapshot-authority.md, "The envelope"). Keyed verification is behind
//! [`SnapshotVerifier`]; the signing key lives with the run authority.

use prost::Message as _;
use sha2::{Digest, Sha256};

use crate::Negotiated;
use crate::limits::{
    MAX_ID_BYTES, MAXIMUM_SNAPSHOT_BYTES, MAXIMUM_SNAPSHOT_ENVELOPE_BYTES,
    SNAPSHOT_AUTHORITY_DIGEST_BYTES, SNAPSHOT_FORMAT,
};
use crate::pb::engine::v1::{ImportSnapshotRequest, SnapshotEnvelope, SnapshotLifecycle};
use crate::requests::{check_snapshot_transfer, fits, validate_mutation_fields};
use crate::status::Violation;
use crate::token::is_token;
use crate::wire;

/// Field numbers of `SnapshotEnvelope`; anything else at its root falls
/// outside the MAC and is refused.
pub const ENVELOPE_FIELDS: [u32; 7] = [1, 2, 3, 4, 5, 6, 7];
/// The `snapshot` field of `ImportSnapshotRequest`.
pub const IMPORT_SNAPSHOT_FIELD: u32 = 7;

/// Equality that reads every byte, so timing tells nothing about where two
/// digests differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Structural envelope rules except the unknown-field rule, which needs the
/// raw bytes ([`validate_snapshot_envelope_bytes`]). Proves nothing about
/// authenticity.
pub fn validate_snapshot_envelope(e: &SnapshotEnvelope) -> Result<(), Violation> {
    if e.format != SNAPSHOT_FORMAT {
        return Err(Violation::invalid(
            "snapshot format is not spice.agent.snapshot/v1alpha3",
        ));
    }
    if !is_token(&e.run_id, MAX_ID_BYTES) {
        return Err(Violation::invalid(
            "snapshot run id is not a token of at most 128 bytes",
        ));
    }
    if e.last_sequence == 0 || e.last_sequence == u64::MAX {
        return Err(Violation::invalid(
            "snapshot last_sequence lies outside 1..u64::MAX",
        ));
    }
    match SnapshotLifecycle::try_from(e.lifecycle) {
        Ok(SnapshotLifecycle::Unspecified) | Err(_) => {
            return Err(Violation::invalid("snapshot lifecycle is unknown"));
        }
        Ok(_) => {}
    }
    if e.payload.is_empty() || e.payload.len() > MAXIMUM_SNAPSHOT_BYTES {
        return Err(Violation::invalid(
            "snapshot payload must hold 1 byte to 16 MiB",
        ));
    }
    if !constant_time_eq(&e.sha256, &Sha256::digest(&e.payload)) {
        return Err(Violation::invalid(
            "snapshot sha256 does not match its payload",
        ));
    }
    let run_id = serde_json::from_slice::<serde_json::Value>(&e.payload)
        .ok()
        .and_then(|v| v.get("run_id").and_then(|r| r.as_str().map(str::to_owned)));
    if run_id.as_deref() != Some(e.run_id.as_str()) {
        return Err(Violation::invalid(
            "snapshot payload's run_id differs from the envelope",
        ));
    }
    if e.encoded_len() > MAXIMUM_SNAPSHOT_ENVELOPE_BYTES {
        return Err(Violation::invalid(
            "snapshot envelope exceeds its maximum size",
        ));
    }
    let a = e
        .authority
        .as_ref()
        .ok_or_else(|| Violation::invalid("snapshot authority is missing"))?;
    if a.scope_id.len() != SNAPSHOT_AUTHORITY_DIGEST_BYTES
        || a.generation == 0
        || a.hmac_sha256.len() != SNAPSHOT_AUTHORITY_DIGEST_BYTES
    {
        return Err(Violation::invalid(
            "snapshot authority needs a 32-byte scope, a generation and a 32-byte MAC",
        ));
    }
    Ok(())
}

/// Decodes and validates an envelope from its raw bytes, refusing unknown
/// root fields and measuring the raw size.
pub fn validate_snapshot_envelope_bytes(raw: &[u8]) -> Result<SnapshotEnvelope, Violation> {
    let unknown = wire::unknown_field_numbers(raw, &ENVELOPE_FIELDS)
        .map_err(|_| Violation::invalid("snapshot envelope bytes are malformed"))?;
    if !unknown.is_empty() {
        return Err(Violation::invalid(
            "snapshot envelope carries unknown fields outside its MAC",
        ));
    }
    if raw.len() > MAXIMUM_SNAPSHOT_ENVELOPE_BYTES {
        return Err(Violation::invalid(
            "snapshot envelope exceeds its maximum size",
        ));
    }
    let e = SnapshotEnvelope::decode(raw)
        .map_err(|_| Violation::invalid("snapshot envelope bytes are malformed"))?;
    validate_snapshot_envelope(&e)?;
    Ok(e)
}

/// Keyed verification of an envelope, implemented by the run authority.
pub trait SnapshotVerifier {
    /// Ok when the envelope's MAC verifies under this authority. Failures
    /// are one generic violation, never telling which part differed.
    fn verify(&self, envelope: &SnapshotEnvelope) -> Result<(), Violation>;
}

/// Import structure from the raw request: snapshot transfer enabled,
/// mutation fields, raw size within the negotiated bound (unknown fields on
/// the request and inside the envelope count), a structurally valid envelope
/// with no unknown root fields, and lifecycle SUSPENDED.
pub fn validate_import_snapshot_request_structure(
    raw: &[u8],
    negotiated: &Negotiated,
) -> Result<ImportSnapshotRequest, Violation> {
    check_snapshot_transfer(negotiated)?;
    let fields =
        wire::fields(raw).map_err(|_| Violation::invalid("import request bytes are malformed"))?;
    let request = ImportSnapshotRequest::decode(raw)
        .map_err(|_| Violation::invalid("import request bytes are malformed"))?;
    validate_mutation_fields(
        &request.client_id,
        request.ownership_epoch,
        &request.client_operation_id,
    )?;
    if !fits(raw.len(), negotiated.limits.max_message_bytes) {
        return Err(Violation::invalid(
            "message exceeds the negotiated message size",
        ));
    }
    // Protobuf merges repeated occurrences of a message field, so the
    // envelope's raw bytes are every occurrence concatenated.
    let envelope_raw: Vec<u8> = fields
        .iter()
        .filter(|f| f.number == IMPORT_SNAPSHOT_FIELD)
        .flat_map(|f| f.value.iter().copied())
        .collect();
    if request.snapshot.is_none() {
        return Err(Violation::invalid("import request has no snapshot"));
    }
    let envelope = validate_snapshot_envelope_bytes(&envelope_raw)?;
    if envelope.lifecycle != SnapshotLifecycle::Suspended as i32 {
        return Err(Violation::invalid(
            "only a SUSPENDED snapshot can be imported",
        ));
    }
    Ok(request)
}

/// The structural checks first, then keyed verification. Without a
/// verifier the import always fails.
pub fn validate_import_snapshot_request(
    raw: &[u8],
    negotiated: &Negotiated,
    verifier: Option<&dyn SnapshotVerifier>,
) -> Result<ImportSnapshotRequest, Violation> {
    let request = validate_import_snapshot_request_structure(raw, negotiated)?;
    let verifier = verifier.ok_or_else(|| Violation::invalid("snapshot verification failed"))?;
    verifier.verify(
        request
            .snapshot
            .as_ref()
            .expect("structure checked the snapshot"),
    )?;
    Ok(request)
}
