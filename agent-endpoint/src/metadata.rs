//! The published endpoint metadata (docs/transport.md, "The scope and the endpoint files"): one line of compact JSON with
//! a fixed key order, decoded strictly so that only canonical bytes are accepted.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::localipc;
use crate::token::EndpointToken;
use crate::{base64url, scope::UNIX_TRANSPORT};

/// The schema value.
pub const SCHEMA: &str = "spice.agent.local-endpoint/v1";
/// The largest record in bytes, newline included.
pub const MAX_METADATA_BYTES: usize = 8 * 1024;
/// The longest address in bytes (any platform).
pub const MAX_ADDRESS_LEN: usize = 1024;
/// The instance id's size in bytes.
pub const INSTANCE_ID_BYTES: usize = 16;
/// The longest build-identity field in bytes.
pub const MAX_FIELD_BYTES: usize = 256;

/// Why metadata was refused. Fixed messages: nothing from the record leaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetadataError {
    /// The bytes are not exactly the canonical encoding of a valid record.
    Malformed,
    /// The record is valid but names another platform's transport.
    WrongPlatform,
}

impl fmt::Display for MetadataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetadataError::Malformed => "endpoint metadata is malformed",
            MetadataError::WrongPlatform => "endpoint metadata names another platform",
        })
    }
}

impl std::error::Error for MetadataError {}

/// What a daemon publishes so clients can find and authenticate to it. Debug is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `unix-socket` or `windows-named-pipe`.
    pub transport: String,
    /// The socket path or pipe name.
    pub address: String,
    /// The endpoint credential.
    pub token: EndpointToken,
    /// The server's component name.
    pub server_component: String,
    /// The server's version.
    pub server_version: String,
    /// The server's source commit.
    pub server_commit: String,
    /// The server's toolchain (key `server_go_version`; we write the rustc version there,
    /// see `docs/decisions.md`).
    pub server_toolchain: String,
    /// The server's protocol version.
    pub protocol: (u32, u32, u32),
    /// The daemon's process id (> 0).
    pub process_id: u32,
    /// When the daemon started, UTC Unix nanoseconds (> 0).
    pub started_unix_nano: i64,
    /// 16 random bytes identifying this daemon instance.
    pub instance_id: [u8; INSTANCE_ID_BYTES],
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Metadata(<redacted>)")
    }
}

/// The wire form: field order is the key order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    schema: String,
    transport: String,
    address: String,
    token: String,
    server_component: String,
    server_version: String,
    server_commit: String,
    server_go_version: String,
    protocol_major: u32,
    protocol_minor: u32,
    protocol_patch: u32,
    process_id: u32,
    started_unix_nano: i64,
    instance_id: String,
}

fn is_field(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_FIELD_BYTES
        && text.trim() == text
        && !text.chars().any(char::is_control)
}

fn valid_address(transport: &str, address: &str) -> bool {
    if address.is_empty()
        || address.len() > MAX_ADDRESS_LEN
        || address.trim() != address
        || address.chars().any(char::is_control)
    {
        return false;
    }
    match transport {
        UNIX_TRANSPORT => localipc::validate_address(std::path::Path::new(address)).is_ok(),
        "windows-named-pipe" => address
            .strip_prefix(r"\\.\pipe\spice-agent-")
            .is_some_and(|s| s.len() <= 116 && localipc::is_safe_base_name(s)),
        _ => false,
    }
}

impl Metadata {
    /// A fresh random instance id.
    pub fn new_instance_id() -> Result<[u8; INSTANCE_ID_BYTES], MetadataError> {
        let mut id = [0u8; INSTANCE_ID_BYTES];
        getrandom::fill(&mut id).map_err(|_| MetadataError::Malformed)?;
        Ok(id)
    }

    /// Checks every field rule (platform-independent).
    pub fn validate(&self) -> Result<(), MetadataError> {
        let ok = valid_address(&self.transport, &self.address)
            && is_field(&self.server_component)
            && is_field(&self.server_version)
            && is_field(&self.server_commit)
            && is_field(&self.server_toolchain)
            && self.process_id > 0
            && self.started_unix_nano > 0;
        if ok {
            Ok(())
        } else {
            Err(MetadataError::Malformed)
        }
    }

    /// Checks the record for this platform (Unix: the `unix-socket` transport).
    pub fn validate_for_platform(&self) -> Result<(), MetadataError> {
        self.validate()?;
        if self.transport != UNIX_TRANSPORT {
            return Err(MetadataError::WrongPlatform);
        }
        Ok(())
    }

    /// The canonical bytes: one compact JSON line and `\n`.
    pub fn encode(&self) -> Result<Vec<u8>, MetadataError> {
        self.validate()?;
        let wire = Wire {
            schema: SCHEMA.to_owned(),
            transport: self.transport.clone(),
            address: self.address.clone(),
            token: self.token.expose_text(),
            server_component: self.server_component.clone(),
            server_version: self.server_version.clone(),
            server_commit: self.server_commit.clone(),
            server_go_version: self.server_toolchain.clone(),
            protocol_major: self.protocol.0,
            protocol_minor: self.protocol.1,
            protocol_patch: self.protocol.2,
            process_id: self.process_id,
            started_unix_nano: self.started_unix_nano,
            instance_id: base64url::encode(&self.instance_id),
        };
        let mut bytes = serde_json::to_vec(&wire).map_err(|_| MetadataError::Malformed)?;
        bytes.push(b'\n');
        if bytes.len() > MAX_METADATA_BYTES {
            return Err(MetadataError::Malformed);
        }
        Ok(bytes)
    }

    /// Decodes strictly: the bytes must be at most [`MAX_METADATA_BYTES`], valid, and
    /// exactly what [`Metadata::encode`] produces for the decoded value.
    ///
    /// ```
    /// use agent_endpoint::metadata::{Metadata, MetadataError};
    /// assert_eq!(Metadata::decode(b"{}\n"), Err(MetadataError::Malformed));
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<Metadata, MetadataError> {
        if bytes.len() > MAX_METADATA_BYTES || bytes.last() != Some(&b'\n') {
            return Err(MetadataError::Malformed);
        }
        let line = &bytes[..bytes.len() - 1];
        let wire: Wire = serde_json::from_slice(line).map_err(|_| MetadataError::Malformed)?;
        if wire.schema != SCHEMA {
            return Err(MetadataError::Malformed);
        }
        let token = EndpointToken::parse(&wire.token).map_err(|_| MetadataError::Malformed)?;
        let instance_id = base64url::decode::<INSTANCE_ID_BYTES>(&wire.instance_id)
            .ok_or(MetadataError::Malformed)?;
        let metadata = Metadata {
            transport: wire.transport,
            address: wire.address,
            token,
            server_component: wire.server_component,
            server_version: wire.server_version,
            server_commit: wire.server_commit,
            server_toolchain: wire.server_go_version,
            protocol: (
                wire.protocol_major,
                wire.protocol_minor,
                wire.protocol_patch,
            ),
            process_id: wire.process_id,
            started_unix_nano: wire.started_unix_nano,
            instance_id,
        };
        if metadata.encode()? != bytes {
            return Err(MetadataError::Malformed);
        }
        Ok(metadata)
    }
}
