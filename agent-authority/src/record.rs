//! The signed per-run lifecycle record: compact JSON `{"record":{…},"hmac_sha256":"…"}`
//! plus a newline, MAC'd under the root key, decoded strictly.

use serde::{Deserialize, Serialize};

use crate::envelope::{SNAPSHOT_FORMAT, SnapshotEnvelope, is_daemon_token};
use crate::error::{AuthorityError, Reason};
use crate::keys::{MAC_BYTES, ScopeId, SecretKey, hex_decode, hex_encode};

/// Largest record file, in bytes.
pub const MAX_RECORD_BYTES: usize = 16 << 10;
/// The record format version.
pub const RECORD_VERSION: u32 = 1;
/// Domain of the record MAC.
pub(crate) const RECORD_DOMAIN: &str = "spice.agent.run-authority-record/v1";

/// A run's durable phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// Owned and running (or about to); never importable.
    Active,
    /// Parked with a signed snapshot; importable by whoever holds the lock next.
    Suspended,
    /// An import consumed the snapshot and has not recorded ACTIVE yet; never importable.
    Importing,
    /// Tombstone: finished.
    Completed,
    /// Tombstone: failed.
    Failed,
    /// Tombstone: cancelled.
    Cancelled,
}

impl Phase {
    /// COMPLETED, FAILED or CANCELLED.
    pub fn is_tombstone(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed | Phase::Cancelled)
    }
}

/// The suspended snapshot a SUSPENDED record vouches for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SnapshotClaim {
    pub(crate) format: String,
    pub(crate) last_sequence: u64,
    pub(crate) lifecycle: u32,
    pub(crate) payload_sha256: String,
    pub(crate) authority_hmac_sha256: String,
}

impl SnapshotClaim {
    pub(crate) fn of(envelope: &SnapshotEnvelope) -> SnapshotClaim {
        SnapshotClaim {
            format: SNAPSHOT_FORMAT.to_owned(),
            last_sequence: envelope.last_sequence(),
            lifecycle: envelope.lifecycle().number(),
            payload_sha256: hex_encode(envelope.payload_sha256()),
            authority_hmac_sha256: hex_encode(envelope.authority().mac()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Record {
    pub(crate) version: u32,
    pub(crate) scope_id: String,
    pub(crate) authority_key_generation: u64,
    pub(crate) run_id: String,
    pub(crate) run_generation: u64,
    pub(crate) phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot: Option<SnapshotClaim>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignedRecord {
    record: Record,
    hmac_sha256: String,
}

/// What a record is checked against: the store's scope and key generation, and the run.
pub(crate) struct Expect<'a> {
    pub(crate) scope: &'a ScopeId,
    pub(crate) key_generation: u64,
    pub(crate) run_id: &'a str,
}

impl Record {
    pub(crate) fn new(
        expect: &Expect<'_>,
        run_generation: u64,
        phase: Phase,
        snapshot: Option<SnapshotClaim>,
    ) -> Record {
        Record {
            version: RECORD_VERSION,
            scope_id: expect.scope.to_hex(),
            authority_key_generation: expect.key_generation,
            run_id: expect.run_id.to_owned(),
            run_generation,
            phase,
            snapshot,
        }
    }

    #[cfg(test)]
    fn mac(&self, root: &SecretKey) -> [u8; MAC_BYTES] {
        root.mac_lp(&[RECORD_DOMAIN.as_bytes(), &self.json()])
    }

    fn json(&self) -> Vec<u8> {
        // Plain strings and numbers: serializing cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The file bytes: the signed record and a newline.
    pub(crate) fn encode(&self, root: &SecretKey) -> Vec<u8> {
        let json = self.json();
        let mac = root.mac_lp(&[RECORD_DOMAIN.as_bytes(), &json]);
        signed_bytes(&json, &mac)
    }
    /// Strict decoding: exactly the canonical encoding (so one record has one spelling),
    /// a valid MAC, then the field rules against `expect`.
    pub(crate) fn decode(
        bytes: &[u8],
        root: &SecretKey,
        expect: &Expect<'_>,
    ) -> Result<Record, AuthorityError> {
        let invalid = || AuthorityError::new(Reason::RecordInvalid);
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(invalid());
        }
        let signed: SignedRecord = serde_json::from_slice(bytes).map_err(|_| invalid())?;
        let mac = hex_decode::<MAC_BYTES>(&signed.hmac_sha256).ok_or_else(invalid)?;
        let json = signed.record.json();
        if !root.verify_lp(&[RECORD_DOMAIN.as_bytes(), &json], &mac) {
            return Err(invalid());
        }
        // The canonical spelling of this record under this (verified) MAC.
        if signed_bytes(&json, &mac) != bytes {
            return Err(invalid());
        }
        let record = signed.record;
        let snapshot_ok = match (&record.snapshot, record.phase) {
            (Some(claim), Phase::Suspended) => {
                claim.format == SNAPSHOT_FORMAT
                    && claim.lifecycle == 1
                    && claim.last_sequence > 0
                    && hex_decode::<32>(&claim.payload_sha256).is_some()
                    && hex_decode::<32>(&claim.authority_hmac_sha256).is_some()
            }
            (None, Phase::Suspended) | (Some(_), _) => false,
            (None, _) => true,
        };
        if record.version != RECORD_VERSION
            || record.scope_id != expect.scope.to_hex()
            || record.authority_key_generation != expect.key_generation
            || record.run_id != expect.run_id
            || record.run_generation == 0
            || !is_daemon_token(&record.run_id)
            || !snapshot_ok
        {
            return Err(invalid());
        }
        Ok(record)
    }
}

/// The compact JSON of `{"record": <json>, "hmac_sha256": "<hex of mac>"}` and a newline:
/// byte for byte what serializing the signed record gives, without serializing the record
/// a second time (the MAC was computed over `json`).
fn signed_bytes(json: &[u8], mac: &[u8; MAC_BYTES]) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"record\":";
    const MIDDLE: &[u8] = b",\"hmac_sha256\":\"";
    const TAIL: &[u8] = b"\"}\n";
    let hex = hex_encode(mac);
    let mut bytes =
        Vec::with_capacity(HEAD.len() + json.len() + MIDDLE.len() + hex.len() + TAIL.len());
    bytes.extend_from_slice(HEAD);
    bytes.extend_from_slice(json);
    bytes.extend_from_slice(MIDDLE);
    bytes.extend_from_slice(hex.as_bytes());
    bytes.extend_from_slice(TAIL);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(scope: &ScopeId) -> Expect<'_> {
        Expect {
            scope,
            key_generation: 1,
            run_id: "run-1",
        }
    }

    #[test]
    fn records_round_trip_and_refuse_every_alteration() {
        let root = SecretKey::from_bytes([9; 32]);
        let scope = ScopeId::from_bytes([3; 32]);
        let record = Record::new(&expect(&scope), 2, Phase::Active, None);
        let bytes = record.encode(&root);
        assert!(bytes.ends_with(b"\n"));
        assert_eq!(Record::decode(&bytes, &root, &expect(&scope)), Ok(record));
        for i in 0..bytes.len() {
            let mut altered = bytes.clone();
            altered[i] ^= 0x01;
            assert!(
                Record::decode(&altered, &root, &expect(&scope)).is_err(),
                "byte {i}"
            );
        }
        let other = SecretKey::from_bytes([8; 32]);
        assert!(Record::decode(&bytes, &other, &expect(&scope)).is_err());
        let wrong_run = Expect {
            run_id: "run-2",
            ..expect(&scope)
        };
        assert!(Record::decode(&bytes, &root, &wrong_run).is_err());
        let wrong_generation = Expect {
            key_generation: 2,
            ..expect(&scope)
        };
        assert!(Record::decode(&bytes, &root, &wrong_generation).is_err());
    }

    #[test]
    fn the_file_bytes_are_the_serialized_signed_record() {
        let root = SecretKey::from_bytes([9; 32]);
        let scope = ScopeId::from_bytes([3; 32]);
        let claim = SnapshotClaim {
            format: SNAPSHOT_FORMAT.to_owned(),
            last_sequence: 4,
            lifecycle: 1,
            payload_sha256: "00".repeat(32),
            authority_hmac_sha256: "11".repeat(32),
        };
        let quoted = Expect {
            run_id: "run \"quoted\" \\ é",
            ..expect(&scope)
        };
        for record in [
            Record::new(&expect(&scope), 7, Phase::Active, None),
            Record::new(&quoted, 1, Phase::Suspended, Some(claim)),
        ] {
            let signed = SignedRecord {
                record: record.clone(),
                hmac_sha256: hex_encode(&record.mac(&root)),
            };
            let mut serialized = serde_json::to_vec(&signed).unwrap();
            serialized.push(b'\n');
            assert_eq!(record.encode(&root), serialized);
        }
    }

    #[test]
    fn a_snapshot_claim_belongs_exactly_to_suspended() {
        let root = SecretKey::from_bytes([9; 32]);
        let scope = ScopeId::from_bytes([3; 32]);
        let claim = SnapshotClaim {
            format: SNAPSHOT_FORMAT.to_owned(),
            last_sequence: 4,
            lifecycle: 1,
            payload_sha256: "00".repeat(32),
            authority_hmac_sha256: "11".repeat(32),
        };
        let good = Record::new(&expect(&scope), 1, Phase::Suspended, Some(claim.clone()));
        assert!(Record::decode(&good.encode(&root), &root, &expect(&scope)).is_ok());
        let without = Record::new(&expect(&scope), 1, Phase::Suspended, None);
        assert!(Record::decode(&without.encode(&root), &root, &expect(&scope)).is_err());
        let active = Record::new(&expect(&scope), 1, Phase::Active, Some(claim));
        assert!(Record::decode(&active.encode(&root), &root, &expect(&scope)).is_err());
        let zero = Record::new(&expect(&scope), 0, Phase::Active, None);
        assert!(Record::decode(&zero.encode(&root), &root, &expect(&scope)).is_err());
    }
}
