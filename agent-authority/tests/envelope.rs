//! The envelope: the golden vector, structural bounds at and past each limit, every
//! authenticated field tampered in turn, a bit flipped in every byte, contained signer and
//! verifier failures, redaction, and property tests over the structural validator.

mod support;

use agent_authority::{
    AuthorityBlock, AuthorityError, ENVELOPE_OVERHEAD_BYTES, ErrorKind, HmacSnapshotAuthority,
    Lifecycle, MAC_BYTES, MAX_DAEMON_TOKEN_BYTES, MAX_ENVELOPE_BYTES, MAX_LAST_SEQUENCE,
    MAX_PAYLOAD_BYTES, Reason, SNAPSHOT_FORMAT, ScopeId, SecretKey, SnapshotEnvelope,
    SnapshotSigner, SnapshotVerifier, StructuralError, sha256,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::{TempDir, open, suspended};

/// An edit of an envelope's JSON.
type Edit = Box<dyn Fn(&mut Value)>;

const GOLDEN_PAYLOAD: &str = r#"{"version":"spice.agent.snapshot/v1alpha3","run_id":"run-1"}"#;
const GOLDEN_MAC: &str = "05ba8690fd9c49aab5d06fda233627ef15eb12832c97c0d26cfff9243dcb9897";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn golden_authority() -> HmacSnapshotAuthority {
    HmacSnapshotAuthority::new(
        ScopeId::from_bytes([0x11; 32]),
        7,
        SecretKey::from_bytes([0x22; 32]),
    )
    .unwrap()
}

fn golden() -> SnapshotEnvelope {
    SnapshotEnvelope::sign(
        &golden_authority(),
        "run-1",
        42,
        Lifecycle::Suspended,
        GOLDEN_PAYLOAD.as_bytes().to_vec(),
    )
    .unwrap()
}

#[test]
fn the_golden_vector_is_reproduced_byte_for_byte() {
    let envelope = golden();
    assert_eq!(hex(envelope.authority().mac()), GOLDEN_MAC);
    // The canonical bytes: eight length-prefixed fields.
    let canonical = envelope.canonical();
    let mut expected = Vec::new();
    let digest = sha256(GOLDEN_PAYLOAD.as_bytes());
    let fields: [&[u8]; 8] = [
        b"spice.agent.run-authority/v1",
        &[0x11; 32],
        &7u64.to_be_bytes(),
        SNAPSHOT_FORMAT.as_bytes(),
        b"run-1",
        &42u64.to_be_bytes(),
        &1u32.to_be_bytes(),
        &digest,
    ];
    for field in fields {
        expected.extend_from_slice(&(field.len() as u64).to_be_bytes());
        expected.extend_from_slice(field);
    }
    assert_eq!(canonical, expected);
    // The encoded form decodes to the same envelope and verifies.
    let decoded = SnapshotEnvelope::decode(&envelope.to_json()).unwrap();
    assert_eq!(decoded.to_json(), envelope.to_json());
    decoded.verify(&golden_authority()).unwrap();
}

fn envelope_json(run_id: &str, sequence: u64, lifecycle: u64, generation: u64) -> Vec<u8> {
    let payload = serde_json::to_vec(&json!({"run_id": run_id})).unwrap();
    let text = String::from_utf8(payload.clone()).unwrap();
    format!(
        r#"{{"format":"{SNAPSHOT_FORMAT}","run_id":{},"last_sequence":{sequence},"lifecycle":{lifecycle},"payload":{text},"sha256":"{}","authority":{{"scope_id":"{}","generation":{generation},"hmac_sha256":"{}"}}}}"#,
        serde_json::to_string(run_id).unwrap(),
        hex(&sha256(&payload)),
        "11".repeat(32),
        "22".repeat(32),
    )
    .into_bytes()
}

#[test]
fn run_id_bound_holds_at_and_past_it() {
    let at = "r".repeat(MAX_DAEMON_TOKEN_BYTES);
    let past = "r".repeat(MAX_DAEMON_TOKEN_BYTES + 1);
    assert!(SnapshotEnvelope::decode(&envelope_json(&at, 1, 1, 1)).is_ok());
    assert_eq!(
        SnapshotEnvelope::decode(&envelope_json(&past, 1, 1, 1)).unwrap_err(),
        StructuralError::RunId
    );
    for bad in ["", " run", "run ", "ru\u{7}n", "ru\nn"] {
        assert_eq!(
            SnapshotEnvelope::decode(&envelope_json(bad, 1, 1, 1)).unwrap_err(),
            StructuralError::RunId,
            "{bad:?}"
        );
    }
}

#[test]
fn sequence_lifecycle_and_generation_bounds_hold_at_and_past_them() {
    assert!(SnapshotEnvelope::decode(&envelope_json("r", 1, 1, 1)).is_ok());
    assert!(SnapshotEnvelope::decode(&envelope_json("r", MAX_LAST_SEQUENCE, 1, 1)).is_ok());
    for sequence in [0, MAX_LAST_SEQUENCE + 1] {
        assert_eq!(
            SnapshotEnvelope::decode(&envelope_json("r", sequence, 1, 1)).unwrap_err(),
            StructuralError::Sequence
        );
    }
    for lifecycle in [1, 4] {
        assert!(SnapshotEnvelope::decode(&envelope_json("r", 1, lifecycle, 1)).is_ok());
    }
    for lifecycle in [0, 5] {
        assert_eq!(
            SnapshotEnvelope::decode(&envelope_json("r", 1, lifecycle, 1)).unwrap_err(),
            StructuralError::Lifecycle
        );
    }
    assert!(SnapshotEnvelope::decode(&envelope_json("r", 1, 1, u64::MAX)).is_ok());
    assert_eq!(
        SnapshotEnvelope::decode(&envelope_json("r", 1, 1, 0)).unwrap_err(),
        StructuralError::Generation
    );
}

/// A payload of exactly `len` bytes whose `run_id` is `run_id`.
fn padded_payload(run_id: &str, len: usize) -> Vec<u8> {
    let head = serde_json::to_vec(&json!({"run_id": run_id, "pad": ""})).unwrap();
    let pad = len - head.len();
    let mut text = serde_json::to_string(&json!({"run_id": run_id, "pad": "x".repeat(pad)}))
        .unwrap()
        .into_bytes();
    text.truncate(len);
    assert_eq!(text.len(), len);
    text
}

#[test]
fn payload_and_envelope_size_bounds_hold_at_and_past_them() {
    let authority = golden_authority();
    // The longest run id that also needs escaping everywhere.
    let run_id = "\"".repeat(MAX_DAEMON_TOKEN_BYTES);
    let at = padded_payload(&run_id, MAX_PAYLOAD_BYTES);
    let envelope = SnapshotEnvelope::sign(
        &authority,
        &run_id,
        MAX_LAST_SEQUENCE,
        Lifecycle::Suspended,
        at,
    )
    .unwrap();
    let largest = HmacSnapshotAuthority::new(
        ScopeId::from_bytes([0x11; 32]),
        u64::MAX,
        SecretKey::from_bytes([0x22; 32]),
    )
    .unwrap();
    let big = SnapshotEnvelope::sign(
        &largest,
        &run_id,
        MAX_LAST_SEQUENCE,
        Lifecycle::Cancelled,
        envelope.payload().to_vec(),
    )
    .unwrap();
    let bytes = big.to_json();
    // The overhead constant covers the largest envelope, and not by much.
    assert!(bytes.len() <= MAX_ENVELOPE_BYTES, "{}", bytes.len());
    assert!(
        MAX_ENVELOPE_BYTES - bytes.len() < 64,
        "overhead {} is loose: {}",
        ENVELOPE_OVERHEAD_BYTES,
        bytes.len() - MAX_PAYLOAD_BYTES
    );
    assert!(SnapshotEnvelope::decode(&bytes).is_ok());

    let past = padded_payload(&run_id, MAX_PAYLOAD_BYTES + 1);
    let error =
        SnapshotEnvelope::sign(&authority, &run_id, 1, Lifecycle::Suspended, past).unwrap_err();
    assert_eq!(error.reason(), Reason::Malformed);
    let empty =
        SnapshotEnvelope::sign(&authority, "r", 1, Lifecycle::Suspended, Vec::new()).unwrap_err();
    assert_eq!(empty.reason(), Reason::Malformed);

    let mut over = bytes.clone();
    over.resize(MAX_ENVELOPE_BYTES + 1, b' ');
    assert_eq!(
        SnapshotEnvelope::decode(&over).unwrap_err(),
        StructuralError::TooLarge
    );
    let mut exactly = bytes;
    exactly.resize(MAX_ENVELOPE_BYTES, b' ');
    // Trailing whitespace is valid JSON: at the bound the envelope still decodes.
    assert!(SnapshotEnvelope::decode(&exactly).is_ok());
}

#[test]
fn structural_rules_refuse_digest_payload_and_root_mistakes() {
    let good = golden().to_json();
    let mut value: Value = serde_json::from_slice(&good).unwrap();
    let cases: Vec<(&str, Edit, StructuralError)> = vec![
        (
            "unknown root member",
            Box::new(|v| v["extra"] = json!(1)),
            StructuralError::Encoding,
        ),
        (
            "unknown authority member",
            Box::new(|v| v["authority"]["extra"] = json!(1)),
            StructuralError::Encoding,
        ),
        (
            "missing member",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("sha256");
            }),
            StructuralError::Encoding,
        ),
        (
            "format",
            Box::new(|v| v["format"] = json!("spice.agent.snapshot/v2")),
            StructuralError::Format,
        ),
        (
            "digest",
            Box::new(|v| v["sha256"] = json!("00".repeat(32))),
            StructuralError::Digest,
        ),
        (
            "uppercase hex",
            Box::new(|v| {
                let upper = v["sha256"].as_str().unwrap().to_uppercase();
                v["sha256"] = json!(upper);
            }),
            StructuralError::Encoding,
        ),
        (
            "short MAC",
            Box::new(|v| v["authority"]["hmac_sha256"] = json!("22".repeat(31))),
            StructuralError::Encoding,
        ),
        (
            "short scope",
            Box::new(|v| v["authority"]["scope_id"] = json!("11".repeat(33))),
            StructuralError::Encoding,
        ),
    ];
    for (name, edit, expected) in cases {
        let mut edited = value.clone();
        edit(&mut edited);
        let bytes = serde_json::to_vec(&edited).unwrap();
        assert_eq!(
            SnapshotEnvelope::decode(&bytes).unwrap_err(),
            expected,
            "{name}"
        );
    }
    // A payload whose run id differs (digest recomputed) is refused structurally.
    let other = br#"{"run_id":"run-2"}"#;
    value["payload"] = serde_json::from_slice(other).unwrap();
    value["sha256"] = json!(hex(&sha256(other)));
    assert_eq!(
        SnapshotEnvelope::decode(&serde_json::to_vec(&value).unwrap()).unwrap_err(),
        StructuralError::PayloadRunId
    );
    // A payload that is not an object is refused.
    let array = br#"["run-1"]"#;
    value["payload"] = serde_json::from_slice(array).unwrap();
    value["sha256"] = json!(hex(&sha256(array)));
    assert_eq!(
        SnapshotEnvelope::decode(&serde_json::to_vec(&value).unwrap()).unwrap_err(),
        StructuralError::PayloadJson
    );
    // A duplicate root member is refused.
    let text = String::from_utf8(good).unwrap();
    let duplicated = text.replacen(
        "\"last_sequence\":42",
        "\"last_sequence\":42,\"last_sequence\":42",
        1,
    );
    assert_eq!(
        SnapshotEnvelope::decode(duplicated.as_bytes()).unwrap_err(),
        StructuralError::Encoding
    );
}

/// Every field the MAC covers, tampered in turn (digest recomputed where the payload
/// changes, so the structure stays valid): keyed verification refuses each one.
#[test]
fn keyed_verification_refuses_every_authenticated_tamper() {
    let authority = golden_authority();
    // Sorted-key payload: re-encoding through `Value` keeps its bytes (and digest).
    let signed = SnapshotEnvelope::sign(
        &authority,
        "run-1",
        42,
        Lifecycle::Suspended,
        support::payload("run-1", 1),
    )
    .unwrap();
    let good: Value = serde_json::from_slice(&signed.to_json()).unwrap();
    let tampers: Vec<(&str, Edit)> = vec![
        (
            "scope",
            Box::new(|v| v["authority"]["scope_id"] = json!("12".repeat(32))),
        ),
        (
            "generation",
            Box::new(|v| v["authority"]["generation"] = json!(8)),
        ),
        (
            "mac",
            Box::new(|v| v["authority"]["hmac_sha256"] = json!("23".repeat(32))),
        ),
        ("sequence", Box::new(|v| v["last_sequence"] = json!(43))),
        ("lifecycle", Box::new(|v| v["lifecycle"] = json!(2))),
        (
            "payload",
            Box::new(|v| {
                let payload = br#"{"run_id":"run-1","turns":2}"#;
                v["payload"] = serde_json::from_slice(payload).unwrap();
                v["sha256"] = json!(hex(&sha256(payload)));
            }),
        ),
        (
            "run id",
            Box::new(|v| {
                let payload = br#"{"run_id":"run-2"}"#;
                v["run_id"] = json!("run-2");
                v["payload"] = serde_json::from_slice(payload).unwrap();
                v["sha256"] = json!(hex(&sha256(payload)));
            }),
        ),
    ];
    for (name, tamper) in tampers {
        let mut edited = good.clone();
        tamper(&mut edited);
        let envelope = SnapshotEnvelope::decode(&serde_json::to_vec(&edited).unwrap())
            .unwrap_or_else(|e| panic!("{name} stays structurally valid: {e:?}"));
        let error = envelope.verify(&authority).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Verification, "{name}");
        assert_eq!(
            error.reason(),
            Reason::Rejected,
            "{name}: one generic failure"
        );
    }
    SnapshotEnvelope::decode(&serde_json::to_vec(&good).unwrap())
        .unwrap()
        .verify(&authority)
        .unwrap();
}

/// The same tampers through the store's import: each is refused and the untouched envelope
/// still imports afterwards.
#[test]
fn import_refuses_every_tampered_field() {
    let temp = TempDir::new("tamper-import");
    let store = open(&temp.store_dir());
    let envelope = suspended(&store, "run-t");
    let good: Value = serde_json::from_slice(&envelope.to_json()).unwrap();
    let tampers: Vec<(&str, Edit)> = vec![
        (
            "scope",
            Box::new(|v| v["authority"]["scope_id"] = json!("12".repeat(32))),
        ),
        (
            "generation",
            Box::new(|v| v["authority"]["generation"] = json!(2)),
        ),
        (
            "mac",
            Box::new(|v| v["authority"]["hmac_sha256"] = json!("23".repeat(32))),
        ),
        ("sequence", Box::new(|v| v["last_sequence"] = json!(8))),
        ("lifecycle", Box::new(|v| v["lifecycle"] = json!(2))),
        (
            "payload",
            Box::new(|v| {
                let payload = support::payload("run-t", 2);
                v["payload"] = serde_json::from_slice(&payload).unwrap();
                v["sha256"] = json!(hex(&sha256(&payload)));
            }),
        ),
        (
            "run id",
            Box::new(|v| {
                let payload = support::payload("run-u", 1);
                v["run_id"] = json!("run-u");
                v["payload"] = serde_json::from_slice(&payload).unwrap();
                v["sha256"] = json!(hex(&sha256(&payload)));
            }),
        ),
    ];
    for (name, tamper) in tampers {
        let mut edited = good.clone();
        tamper(&mut edited);
        let bytes = serde_json::to_vec(&edited).unwrap();
        let decoded = SnapshotEnvelope::decode(&bytes).expect(name);
        let error = store.prepare_import(&decoded).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Verification, "{name}: {error:?}");
    }
    let untouched = SnapshotEnvelope::decode(&serde_json::to_vec(&good).unwrap()).unwrap();
    store
        .prepare_import(&untouched)
        .expect("the original still imports");
}

#[test]
fn a_bit_flipped_in_any_byte_of_a_real_envelope_is_refused() {
    let temp = TempDir::new("bit-flip");
    let store = open(&temp.store_dir());
    let envelope = suspended(&store, "run-f");
    let bytes = envelope.to_json();
    let mut decoded_but_refused = 0;
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[i] ^= 1 << bit;
            if let Ok(decoded) = SnapshotEnvelope::decode(&flipped) {
                decoded_but_refused += 1;
                let error = store
                    .prepare_import(&decoded)
                    .expect_err("a flipped envelope never imports");
                assert_eq!(error.kind(), ErrorKind::Verification, "byte {i} bit {bit}");
            }
        }
    }
    // Some flips survive the structure (digits, hex, run id letters) and reach keyed
    // verification: both layers were exercised.
    assert!(decoded_but_refused > 0);
    let import = store
        .prepare_import(&envelope)
        .expect("the original imports");
    import.abort();
}

struct PanickingSigner;

impl SnapshotSigner for PanickingSigner {
    fn scope_id(&self) -> ScopeId {
        ScopeId::from_bytes([1; 32])
    }
    fn key_generation(&self) -> u64 {
        1
    }
    fn sign(&self, _: &[u8]) -> Result<[u8; MAC_BYTES], AuthorityError> {
        panic!("signer bug")
    }
}

struct PanickingVerifier;

impl SnapshotVerifier for PanickingVerifier {
    fn verify(&self, _: &[u8], _: &AuthorityBlock) -> Result<(), AuthorityError> {
        panic!("verifier bug")
    }
}

#[test]
fn panicking_signers_and_verifiers_are_contained() {
    let error = SnapshotEnvelope::sign(
        &PanickingSigner,
        "run-1",
        1,
        Lifecycle::Suspended,
        GOLDEN_PAYLOAD.as_bytes().to_vec(),
    )
    .unwrap_err();
    assert_eq!(error.reason(), Reason::SignerFailed);
    let error = golden().verify(&PanickingVerifier).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Verification);
    assert_eq!(error.reason(), Reason::VerifierFailed);
    assert!(
        HmacSnapshotAuthority::new(
            ScopeId::from_bytes([1; 32]),
            0,
            SecretKey::from_bytes([2; 32])
        )
        .is_err()
    );
}

#[test]
fn debug_output_never_shows_the_key() {
    let shown = format!("{:?} {:?}", golden_authority(), golden());
    assert!(!shown.contains(&"22".repeat(32)), "{shown}");
    assert!(shown.contains("<redacted>"));
}

fn structure_oracle(run_id: &str, sequence: u64, lifecycle: u64, generation: u64) -> bool {
    agent_authority::is_daemon_token(run_id)
        && (1..=MAX_LAST_SEQUENCE).contains(&sequence)
        && (1..=4).contains(&lifecycle)
        && generation > 0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The validator accepts exactly the envelopes the rules describe.
    #[test]
    fn the_structural_validator_matches_its_rules(
        run_id in prop_oneof![
            "[a-z0-9-]{1,130}",
            "[ \\t]?[a-z]{1,8}[ \\n]?",
            "\\PC{0,140}",
        ],
        sequence in prop_oneof![Just(0u64), Just(u64::MAX), Just(MAX_LAST_SEQUENCE), any::<u64>()],
        lifecycle in 0u64..7,
        generation in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let bytes = envelope_json(&run_id, sequence, lifecycle, generation);
        let decoded = SnapshotEnvelope::decode(&bytes);
        prop_assert_eq!(
            decoded.is_ok(),
            structure_oracle(&run_id, sequence, lifecycle, generation),
            "{:?}", decoded.err()
        );
    }

    /// Arbitrary bytes never panic the validator.
    #[test]
    fn arbitrary_bytes_never_panic_the_validator(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = SnapshotEnvelope::decode(&bytes);
    }

    /// A changed byte that still decodes never verifies.
    #[test]
    fn a_changed_byte_never_verifies(index in any::<prop::sample::Index>(), delta in 1u8..=255) {
        let bytes = golden().to_json();
        let mut changed = bytes.clone();
        let i = index.index(bytes.len());
        changed[i] = changed[i].wrapping_add(delta);
        if let Ok(envelope) = SnapshotEnvelope::decode(&changed) {
            prop_assert!(envelope.verify(&golden_authority()).is_err());
        }
    }

    /// Signed envelopes round-trip through their encoding.
    #[test]
    fn signed_envelopes_round_trip(
        run_id in "[a-zA-Z0-9._-]{1,128}",
        sequence in 1..=MAX_LAST_SEQUENCE,
        turns in any::<u32>(),
    ) {
        let payload = support::payload(&run_id, turns);
        let envelope = SnapshotEnvelope::sign(&golden_authority(), &run_id, sequence, Lifecycle::Suspended, payload).unwrap();
        let decoded = SnapshotEnvelope::decode(&envelope.to_json()).unwrap();
        prop_assert_eq!(decoded.to_json(), envelope.to_json());
        prop_assert!(decoded.verify(&golden_authority()).is_ok());
    }
}
