//! The signed snapshot envelope: its JSON form, structural validation (no key needed, runs
//! first) and keyed signing and verification over the canonical fields (docs/snapshot-authority.md, "The envelope").

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::{AuthorityError, Reason};
use crate::keys::{
    DIGEST_BYTES, MAC_BYTES, SCOPE_ID_BYTES, ScopeId, SecretKey, ct_eq, hex_decode, hex_encode,
    sha256,
};

/// The only envelope format this crate writes and reads.
pub const SNAPSHOT_FORMAT: &str = "spice.agent.snapshot/v1alpha3";
/// The domain string that starts the canonical bytes under the envelope MAC.
pub const ENVELOPE_DOMAIN: &str = "spice.agent.run-authority/v1";
/// Longest daemon token, in bytes (docs/protocol.md, "Tokens").
pub const MAX_DAEMON_TOKEN_BYTES: usize = 128;
/// Largest payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 16 << 20;
/// What an encoded envelope may add to its payload: the root members with a run id of
/// [`MAX_DAEMON_TOKEN_BYTES`] that all need escaping, the largest numbers and the hex fields.
pub const ENVELOPE_OVERHEAD_BYTES: usize = 672;
/// Largest encoded envelope, in bytes.
pub const MAX_ENVELOPE_BYTES: usize = MAX_PAYLOAD_BYTES + ENVELOPE_OVERHEAD_BYTES;
/// The largest last sequence: `u64::MAX` is refused so that a resumed run has a next one.
pub const MAX_LAST_SEQUENCE: u64 = u64::MAX - 1;

/// How the run stood when the snapshot was taken (the protocol's enum numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lifecycle {
    /// Parked at a turn boundary; the only importable lifecycle.
    Suspended = 1,
    /// Finished.
    Completed = 2,
    /// Failed.
    Failed = 3,
    /// Cancelled.
    Cancelled = 4,
}

impl Lifecycle {
    /// The enum number.
    pub fn number(self) -> u32 {
        self as u32
    }

    /// The lifecycle with this number; `None` outside 1..=4.
    pub fn from_number(number: u32) -> Option<Lifecycle> {
        match number {
            1 => Some(Lifecycle::Suspended),
            2 => Some(Lifecycle::Completed),
            3 => Some(Lifecycle::Failed),
            4 => Some(Lifecycle::Cancelled),
            _ => None,
        }
    }
}

/// Which structural rule an envelope broke. Structural validity proves nothing about
/// authenticity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StructuralError {
    /// The encoded envelope exceeds [`MAX_ENVELOPE_BYTES`].
    TooLarge,
    /// Not one JSON object of the envelope's shape: syntax, a missing, duplicate or
    /// unknown member (at the root or in `authority`), a wrong type, or non-lowercase hex.
    Encoding,
    /// The format is not [`SNAPSHOT_FORMAT`].
    Format,
    /// The run id breaks the daemon-token rule (non-empty, trimmed, at most
    /// [`MAX_DAEMON_TOKEN_BYTES`] bytes, no control character).
    RunId,
    /// The last sequence is 0 or above [`MAX_LAST_SEQUENCE`].
    Sequence,
    /// The lifecycle number is outside 1..=4.
    Lifecycle,
    /// The payload is empty or larger than [`MAX_PAYLOAD_BYTES`].
    PayloadSize,
    /// The payload is not one JSON object without surrounding whitespace.
    PayloadJson,
    /// The payload's `run_id` member is missing or differs from the envelope's.
    PayloadRunId,
    /// `sha256` is not the payload's SHA-256.
    Digest,
    /// The authority's key generation is 0.
    Generation,
}

impl From<StructuralError> for AuthorityError {
    fn from(_: StructuralError) -> Self {
        AuthorityError::new(Reason::Malformed)
    }
}

/// Who signed an envelope: the authority's scope, its key generation and the MAC.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorityBlock {
    scope_id: ScopeId,
    generation: u64,
    mac: [u8; MAC_BYTES],
}

impl AuthorityBlock {
    /// The signing authority's scope.
    pub fn scope_id(&self) -> &ScopeId {
        &self.scope_id
    }

    /// The authority key generation (not the run generation).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// HMAC-SHA256 over the canonical fields.
    pub fn mac(&self) -> &[u8; MAC_BYTES] {
        &self.mac
    }
}

impl fmt::Debug for AuthorityBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorityBlock")
            .field("scope_id", &self.scope_id)
            .field("generation", &self.generation)
            .field("mac", &hex_encode(&self.mac))
            .finish()
    }
}

/// Signs canonical envelope bytes. Implementations hold a key; the envelope never does.
pub trait SnapshotSigner {
    /// The scope written into the envelope.
    fn scope_id(&self) -> ScopeId;
    /// The key generation written into the envelope.
    fn key_generation(&self) -> u64;
    /// HMAC-SHA256 of `canonical` under the signer's key.
    fn sign(&self, canonical: &[u8]) -> Result<[u8; MAC_BYTES], AuthorityError>;
}

/// Verifies an envelope's authority block against its canonical bytes.
pub trait SnapshotVerifier {
    /// `Ok` only when scope, generation and MAC all match; one generic failure otherwise.
    fn verify(&self, canonical: &[u8], authority: &AuthorityBlock) -> Result<(), AuthorityError>;
}

/// A signed snapshot: format, run id, last sequence, lifecycle, payload, the payload's
/// SHA-256 and the authority block. Every value of this type passed structural validation
/// when it was decoded or signed, and its fields are immutable; there is no unsigned
/// envelope.
#[derive(Clone)]
pub struct SnapshotEnvelope {
    run_id: String,
    last_sequence: u64,
    lifecycle: Lifecycle,
    payload: Box<RawValue>,
    sha256: [u8; DIGEST_BYTES],
    authority: AuthorityBlock,
}

impl fmt::Debug for SnapshotEnvelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotEnvelope")
            .field("run_id", &self.run_id)
            .field("last_sequence", &self.last_sequence)
            .field("lifecycle", &self.lifecycle)
            .field("payload_bytes", &self.payload.get().len())
            .field("sha256", &hex_encode(&self.sha256))
            .field("authority", &self.authority)
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAuthority {
    scope_id: String,
    generation: u64,
    hmac_sha256: String,
}

#[derive(Serialize)]
struct WireOut<'a> {
    format: &'a str,
    run_id: &'a str,
    last_sequence: u64,
    lifecycle: u32,
    payload: &'a RawValue,
    sha256: String,
    authority: WireAuthority,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireIn<'a> {
    format: String,
    run_id: String,
    last_sequence: u64,
    lifecycle: u32,
    #[serde(borrow)]
    payload: &'a RawValue,
    sha256: String,
    authority: WireAuthority,
}

/// The daemon-token rule, stated once for the authority and the daemon above it: non-empty,
/// unchanged by trimming, at most [`MAX_DAEMON_TOKEN_BYTES`] bytes and without any Unicode
/// control character.
///
/// ```
/// use agent_authority::is_daemon_token;
///
/// assert!(is_daemon_token("coding/agent-1"));
/// assert!(!is_daemon_token(" padded") && !is_daemon_token("a\u{85}b"));
/// ```
pub fn is_daemon_token(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_DAEMON_TOKEN_BYTES
        && value.trim() == value
        && !value.chars().any(char::is_control)
}

impl SnapshotEnvelope {
    /// Decodes and structurally validates an encoded envelope. The size bound is checked
    /// before parsing.
    pub fn decode(bytes: &[u8]) -> Result<SnapshotEnvelope, StructuralError> {
        if bytes.len() > MAX_ENVELOPE_BYTES {
            return Err(StructuralError::TooLarge);
        }
        let wire: WireIn<'_> =
            serde_json::from_slice(bytes).map_err(|_| StructuralError::Encoding)?;
        if wire.format != SNAPSHOT_FORMAT {
            return Err(StructuralError::Format);
        }
        let lifecycle = Lifecycle::from_number(wire.lifecycle).ok_or(StructuralError::Lifecycle)?;
        let sha256 = hex_decode::<DIGEST_BYTES>(&wire.sha256).ok_or(StructuralError::Encoding)?;
        let scope = hex_decode::<SCOPE_ID_BYTES>(&wire.authority.scope_id)
            .ok_or(StructuralError::Encoding)?;
        let mac = hex_decode::<MAC_BYTES>(&wire.authority.hmac_sha256)
            .ok_or(StructuralError::Encoding)?;
        let envelope = SnapshotEnvelope {
            run_id: wire.run_id,
            last_sequence: wire.last_sequence,
            lifecycle,
            payload: wire.payload.to_owned(),
            sha256,
            authority: AuthorityBlock {
                scope_id: ScopeId::from_bytes(scope),
                generation: wire.authority.generation,
                mac,
            },
        };
        envelope.validate_fields()?;
        Ok(envelope)
    }

    /// Signs a new envelope. The signer runs contained: a panic is a signing failure. The
    /// result is validated again before it is returned.
    pub fn sign(
        signer: &dyn SnapshotSigner,
        run_id: &str,
        last_sequence: u64,
        lifecycle: Lifecycle,
        payload: Vec<u8>,
    ) -> Result<SnapshotEnvelope, AuthorityError> {
        if payload.is_empty() || payload.len() > MAX_PAYLOAD_BYTES {
            return Err(StructuralError::PayloadSize.into());
        }
        let text = String::from_utf8(payload).map_err(|_| StructuralError::PayloadJson)?;
        let payload = RawValue::from_string(text).map_err(|_| StructuralError::PayloadJson)?;
        let sha256 = sha256(payload.get().as_bytes());
        let (scope_id, generation) = catch_unwind(AssertUnwindSafe(|| {
            (signer.scope_id(), signer.key_generation())
        }))
        .map_err(|_| AuthorityError::new(Reason::SignerFailed))?;
        let mut envelope = SnapshotEnvelope {
            run_id: run_id.to_owned(),
            last_sequence,
            lifecycle,
            payload,
            sha256,
            authority: AuthorityBlock {
                scope_id,
                generation,
                mac: [0; MAC_BYTES],
            },
        };
        envelope.validate_fields()?;
        let canonical = envelope.canonical();
        envelope.authority.mac = match catch_unwind(AssertUnwindSafe(|| signer.sign(&canonical))) {
            Ok(Ok(mac)) => mac,
            Ok(Err(_)) | Err(_) => return Err(AuthorityError::new(Reason::SignerFailed)),
        };
        if envelope.encoded_len() > MAX_ENVELOPE_BYTES {
            return Err(StructuralError::TooLarge.into());
        }
        Ok(envelope)
    }

    /// Keyed verification. Structure was validated when this value was made; the verifier
    /// runs contained, and every failure (including a panic) is one generic verification
    /// failure.
    pub fn verify(&self, verifier: &dyn SnapshotVerifier) -> Result<(), AuthorityError> {
        let canonical = self.canonical();
        match catch_unwind(AssertUnwindSafe(|| {
            verifier.verify(&canonical, &self.authority)
        })) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(AuthorityError::new(Reason::Rejected)),
            Err(_) => Err(AuthorityError::new(Reason::VerifierFailed)),
        }
    }

    fn validate_fields(&self) -> Result<(), StructuralError> {
        if !is_daemon_token(&self.run_id) {
            return Err(StructuralError::RunId);
        }
        if self.last_sequence == 0 || self.last_sequence > MAX_LAST_SEQUENCE {
            return Err(StructuralError::Sequence);
        }
        let payload = self.payload.get().as_bytes();
        if payload.is_empty() || payload.len() > MAX_PAYLOAD_BYTES {
            return Err(StructuralError::PayloadSize);
        }
        if payload.trim_ascii().len() != payload.len() {
            return Err(StructuralError::PayloadJson);
        }
        if !ct_eq(&sha256(payload), &self.sha256) {
            return Err(StructuralError::Digest);
        }
        #[derive(Deserialize)]
        struct RunIdOnly {
            run_id: String,
        }
        if !payload.starts_with(b"{") {
            return Err(StructuralError::PayloadJson);
        }
        let member: RunIdOnly =
            serde_json::from_slice(payload).map_err(|_| StructuralError::PayloadRunId)?;
        if member.run_id != self.run_id {
            return Err(StructuralError::PayloadRunId);
        }
        if self.authority.generation == 0 {
            return Err(StructuralError::Generation);
        }
        Ok(())
    }

    /// The bytes under the MAC: `lp` of the domain, scope, u64be(key generation), format,
    /// run id, u64be(last sequence), u32be(lifecycle) and the payload's SHA-256.
    pub fn canonical(&self) -> Vec<u8> {
        canonical_bytes(
            &self.authority.scope_id,
            self.authority.generation,
            &self.run_id,
            self.last_sequence,
            self.lifecycle,
            &self.sha256,
        )
    }

    /// The compact JSON encoding (members in declaration order, lowercase hex).
    pub fn to_json(&self) -> Vec<u8> {
        self.encode_with(&self.payload)
    }

    /// `to_json().len()` without copying the payload: the payload is written raw, so the
    /// encoding with a one-byte payload in its place is shorter by exactly the rest of it.
    fn encoded_len(&self) -> usize {
        let one = RawValue::from_string("0".to_owned()).unwrap_or_else(|_| unreachable!());
        self.encode_with(&one).len() - 1 + self.payload.get().len()
    }

    fn encode_with(&self, payload: &RawValue) -> Vec<u8> {
        let wire = WireOut {
            format: SNAPSHOT_FORMAT,
            run_id: &self.run_id,
            last_sequence: self.last_sequence,
            lifecycle: self.lifecycle.number(),
            payload,
            sha256: hex_encode(&self.sha256),
            authority: WireAuthority {
                scope_id: self.authority.scope_id.to_hex(),
                generation: self.authority.generation,
                hmac_sha256: hex_encode(&self.authority.mac),
            },
        };
        // Plain strings, numbers and an already-valid raw value: serializing cannot fail.
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The sequence number of the run's last event.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The lifecycle.
    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// The payload (the kernel snapshot's JSON), exactly as signed.
    pub fn payload(&self) -> &[u8] {
        self.payload.get().as_bytes()
    }

    /// The payload's SHA-256.
    pub fn payload_sha256(&self) -> &[u8; DIGEST_BYTES] {
        &self.sha256
    }

    /// The authority block.
    pub fn authority(&self) -> &AuthorityBlock {
        &self.authority
    }
}

pub(crate) fn canonical_bytes(
    scope: &ScopeId,
    generation: u64,
    run_id: &str,
    last_sequence: u64,
    lifecycle: Lifecycle,
    digest: &[u8; DIGEST_BYTES],
) -> Vec<u8> {
    let fields: [&[u8]; 8] = [
        ENVELOPE_DOMAIN.as_bytes(),
        scope.as_bytes(),
        &generation.to_be_bytes(),
        SNAPSHOT_FORMAT.as_bytes(),
        run_id.as_bytes(),
        &last_sequence.to_be_bytes(),
        &lifecycle.number().to_be_bytes(),
        digest,
    ];
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.len() + 8).sum());
    for field in fields {
        out.extend_from_slice(&(field.len() as u64).to_be_bytes());
        out.extend_from_slice(field);
    }
    out
}

/// `HMACSnapshotAuthority`: a signer and verifier for one scope, key generation and
/// 32-byte key. `Debug` never shows the key.
pub struct HmacSnapshotAuthority {
    scope_id: ScopeId,
    generation: u64,
    key: SecretKey,
}

impl fmt::Debug for HmacSnapshotAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HmacSnapshotAuthority")
            .field("scope_id", &self.scope_id)
            .field("generation", &self.generation)
            .field("key", &self.key)
            .finish()
    }
}

impl HmacSnapshotAuthority {
    /// An authority for `scope_id` at key `generation` (which must be positive).
    pub fn new(scope_id: ScopeId, generation: u64, key: SecretKey) -> Result<Self, AuthorityError> {
        if generation == 0 {
            return Err(AuthorityError::new(Reason::InvalidInput));
        }
        Ok(HmacSnapshotAuthority {
            scope_id,
            generation,
            key,
        })
    }
}

impl SnapshotSigner for HmacSnapshotAuthority {
    fn scope_id(&self) -> ScopeId {
        self.scope_id
    }

    fn key_generation(&self) -> u64 {
        self.generation
    }

    fn sign(&self, canonical: &[u8]) -> Result<[u8; MAC_BYTES], AuthorityError> {
        Ok(self.key.mac_raw(canonical))
    }
}

impl SnapshotVerifier for HmacSnapshotAuthority {
    fn verify(&self, canonical: &[u8], authority: &AuthorityBlock) -> Result<(), AuthorityError> {
        // Evaluate all three comparisons before combining them, so the time does not say
        // which one failed.
        let scope = ct_eq(authority.scope_id.as_bytes(), self.scope_id.as_bytes());
        let generation = ct_eq(
            &authority.generation.to_be_bytes(),
            &self.generation.to_be_bytes(),
        );
        let mac = self.key.verify_raw(canonical, &authority.mac);
        if scope & generation & mac {
            Ok(())
        } else {
            Err(AuthorityError::new(Reason::Rejected))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoded_length_is_the_length_of_the_encoding() {
        let authority = HmacSnapshotAuthority::new(
            ScopeId::from_bytes([1; 32]),
            u64::MAX,
            SecretKey::from_bytes([2; 32]),
        )
        .unwrap();
        for (run_id, sequence) in [
            ("run-1", 1),
            ("run \"quoted\" \\ back/slash é 💡", MAX_LAST_SEQUENCE),
        ] {
            let text = serde_json::json!({"run_id": run_id, "pad": "x".repeat(300)});
            let payload = serde_json::to_vec(&text).unwrap();
            let envelope =
                SnapshotEnvelope::sign(&authority, run_id, sequence, Lifecycle::Cancelled, payload)
                    .unwrap();
            assert_eq!(envelope.encoded_len(), envelope.to_json().len());
        }
    }
}
