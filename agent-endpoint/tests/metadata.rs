//! Endpoint metadata strictness (docs/transport.md, "The scope and the endpoint files").

use agent_endpoint::EndpointToken;
use agent_endpoint::metadata::{MAX_METADATA_BYTES, Metadata, MetadataError, SCHEMA};
use proptest::prelude::*;

fn sample() -> Metadata {
    Metadata {
        transport: "unix-socket".into(),
        address: "/tmp/spice-agent-0/agent.sock".into(),
        token: EndpointToken::from_bytes([7; 32]).unwrap(),
        server_component: "agent-server".into(),
        server_version: "0.1.0".into(),
        server_commit: "unknown".into(),
        server_toolchain: "rustc 1.95.0".into(),
        protocol: (1, 3, 0),
        process_id: 42,
        started_unix_nano: 1_700_000_000_000_000_000,
        instance_id: [9; 16],
    }
}

#[test]
fn canonical_round_trip_key_order_and_redaction() {
    let m = sample();
    let bytes = m.encode().unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.ends_with('\n') && !text[..text.len() - 1].contains('\n'));
    let keys = [
        "schema",
        "transport",
        "address",
        "token",
        "server_component",
        "server_version",
        "server_commit",
        "server_go_version",
        "protocol_major",
        "protocol_minor",
        "protocol_patch",
        "process_id",
        "started_unix_nano",
        "instance_id",
    ];
    let mut at = 0;
    for key in keys {
        let found = text[at..].find(&format!("\"{key}\":")).expect(key) + at;
        at = found;
    }
    assert!(text.starts_with(&format!("{{\"schema\":\"{SCHEMA}\"")));
    assert_eq!(Metadata::decode(&bytes).unwrap(), m);
    assert_eq!(format!("{m:?}"), "Metadata(<redacted>)");
    assert!(!format!("{m:?}").contains(&m.token.expose_text()));
}

#[test]
fn decoder_rejects_noncanonical_and_malformed_records() {
    let good = String::from_utf8(sample().encode().unwrap()).unwrap();
    let line = good.trim_end();
    let mut bad: Vec<String> = vec![
        line.to_owned(),       // no newline
        format!("{line}\n\n"), // trailing data
        format!(" {line}\n"),  // whitespace
        line.replacen(",\"transport\"", ", \"transport\"", 1) + "\n",
        line.replacen("{", "{\"extra\":1,", 1) + "\n", // unknown key
        line.replacen("\"process_id\":42", "\"process_id\":0", 1) + "\n",
        line.replacen("\"process_id\":42", "\"process_id\":42.0", 1) + "\n",
        line.replacen(
            "\"started_unix_nano\":1700000000000000000",
            "\"started_unix_nano\":0",
            1,
        ) + "\n",
        line.replacen(SCHEMA, "spice.agent.local-endpoint/v2", 1) + "\n",
        line.replacen("agent-server", "agent\\u002dserver", 1) + "\n", // escaped spelling
        line.replacen("/tmp/spice-agent-0/agent.sock", "tmp/agent.sock", 1) + "\n",
        line.replacen("unix-socket", "tcp", 1) + "\n",
    ];
    // Keys out of order.
    bad.push(
        line.replacen(
            "\"schema\":\"spice.agent.local-endpoint/v1\",\"transport\":\"unix-socket\"",
            "\"transport\":\"unix-socket\",\"schema\":\"spice.agent.local-endpoint/v1\"",
            1,
        ) + "\n",
    );
    // Duplicate key.
    bad.push(line.replacen("{", "{\"schema\":\"spice.agent.local-endpoint/v1\",", 1) + "\n");
    for record in &bad {
        assert_eq!(
            Metadata::decode(record.as_bytes()),
            Err(MetadataError::Malformed),
            "{record}"
        );
    }
    let oversized = vec![b' '; MAX_METADATA_BYTES + 1];
    assert_eq!(Metadata::decode(&oversized), Err(MetadataError::Malformed));
    // A valid record for the other platform decodes but is not usable here.
    let mut pipe = sample();
    pipe.transport = "windows-named-pipe".into();
    pipe.address = r"\\.\pipe\spice-agent-user-ab".into();
    let bytes = pipe.encode().unwrap();
    assert_eq!(
        Metadata::decode(&bytes).unwrap().validate_for_platform(),
        Err(MetadataError::WrongPlatform)
    );
}

#[test]
fn oversized_fields_are_refused_at_encode() {
    let mut m = sample();
    m.server_commit = "c".repeat(257);
    assert_eq!(m.encode(), Err(MetadataError::Malformed));
    m.server_commit = "c".repeat(256);
    assert!(m.encode().is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Any bytes the decoder accepts re-encode identically.
    #[test]
    fn accepted_bytes_reencode_identically(
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..4),
        version in "[ -~]{1,40}",
    ) {
        let mut m = sample();
        m.server_version = version;
        let Ok(mut bytes) = m.encode() else { return Ok(()); };
        for (at, byte) in flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = byte;
            }
        }
        if let Ok(decoded) = Metadata::decode(&bytes) {
            prop_assert_eq!(decoded.encode().unwrap(), bytes);
        }
    }

    /// Arbitrary bytes never panic, and what is accepted is canonical.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(decoded) = Metadata::decode(&bytes) {
            prop_assert_eq!(decoded.encode().unwrap(), bytes);
        }
    }
}
