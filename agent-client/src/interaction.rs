//! Interaction values: [`StructuredValue`] (bounded, redacted JSON) and
//! pending interactions (docs/client.md, "Streams").

use std::fmt;

use crate::json::{JsonKind, validate_json};
use crate::token::token;
use crate::values::ValueError;
use crate::values::{InteractionId, MAX_ID_BYTES, RunRef};

/// Largest structured value, in bytes (512 KiB).
pub const MAX_STRUCTURED_VALUE_BYTES: usize = 512 * 1024;
/// Largest interaction prompt, in bytes (512 KiB).
pub const MAX_PROMPT_BYTES: usize = 512 * 1024;
/// The fixed text every diagnostic surface shows for a [`StructuredValue`].
pub const REDACTED: &str = "[redacted]";

/// A JSON document of 1..=[`MAX_STRUCTURED_VALUE_BYTES`] bytes: an
/// interaction's schema or a response to one. It may hold secrets (an
/// approval answer, a token typed by the user), so Display and Debug show
/// [`REDACTED`] and the bytes are reachable only through
/// [`StructuredValue::encode_transfer`], the one explicit path that hands
/// them to a transport.
///
/// ```
/// use agent_client::StructuredValue;
/// let v = StructuredValue::parse(br#"{"password":"hunter2"}"#.to_vec()).unwrap();
/// assert_eq!(format!("{v} {v:?}"), "[redacted] StructuredValue([redacted])");
/// assert_eq!(v.encode_transfer(), br#"{"password":"hunter2"}"#);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct StructuredValue {
    bytes: Vec<u8>,
    kind: JsonKind,
}

impl StructuredValue {
    /// Validates the document (strict JSON, depth ≤ [`crate::json::MAX_JSON_DEPTH`]).
    pub fn parse(bytes: Vec<u8>) -> Result<Self, ValueError> {
        if bytes.is_empty() || bytes.len() > MAX_STRUCTURED_VALUE_BYTES {
            return Err(ValueError::new(
                "structured value size lies outside 1..=512 KiB",
            ));
        }
        let kind = validate_json(&bytes)
            .map_err(|_| ValueError::new("structured value is not valid JSON"))?;
        Ok(Self { bytes, kind })
    }
    /// The top-level kind.
    pub fn kind(&self) -> JsonKind {
        self.kind
    }
    /// Its size in bytes (a size is not a secret).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }
    /// Always false: a structured value holds at least one byte.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The raw JSON bytes, for a transport to send. The only accessor.
    pub fn encode_transfer(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Display for StructuredValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Debug for StructuredValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StructuredValue({REDACTED})")
    }
}

/// An interaction waiting for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingInteraction {
    run: RunRef,
    id: InteractionId,
    kind: String,
    prompt: String,
    schema: StructuredValue,
}

impl PendingInteraction {
    /// Kind a token ≤ 128; prompt non-empty, unchanged by trimming, ≤
    /// [`MAX_PROMPT_BYTES`].
    pub fn new(
        run: RunRef,
        id: InteractionId,
        kind: &str,
        prompt: &str,
        schema: StructuredValue,
    ) -> Result<Self, ValueError> {
        let kind = token(kind, MAX_ID_BYTES, "interaction kind is not a token")?;
        if prompt.is_empty() || prompt.trim() != prompt || prompt.len() > MAX_PROMPT_BYTES {
            return Err(ValueError::new(
                "prompt is empty, untrimmed or exceeds 512 KiB",
            ));
        }
        Ok(Self {
            run,
            id,
            kind,
            prompt: prompt.to_owned(),
            schema,
        })
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// The interaction id.
    pub fn id(&self) -> &InteractionId {
        &self.id
    }
    /// The kind, e.g. `approval`.
    pub fn kind(&self) -> &str {
        &self.kind
    }
    /// The prompt.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }
    /// The answer's JSON schema.
    pub fn schema(&self) -> &StructuredValue {
        &self.schema
    }
    fn key(&self) -> (&str, &str) {
        (self.run.as_str(), self.id.as_str())
    }
}

/// The complete pending set at a revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractionSnapshot {
    revision: u64,
    pending: Vec<PendingInteraction>,
}

impl InteractionSnapshot {
    /// Pending sorted strictly by (run, id), at most `collection_items`.
    pub fn new(
        revision: u64,
        pending: Vec<PendingInteraction>,
        collection_items: u32,
    ) -> Result<Self, ValueError> {
        if pending.len() > collection_items as usize {
            return Err(ValueError::new("pending set exceeds the collection limit"));
        }
        if !pending.windows(2).all(|w| w[0].key() < w[1].key()) {
            return Err(ValueError::new("pending set is not sorted unique"));
        }
        Ok(Self { revision, pending })
    }
    /// The revision.
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// The pending interactions, sorted.
    pub fn pending(&self) -> &[PendingInteraction] {
        &self.pending
    }
}

/// Whether an update opens or closes an interaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InteractionUpdateKind {
    /// It became pending.
    Opened,
    /// It was answered, cancelled or failed.
    Closed,
}

/// One change of the pending set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractionUpdate {
    revision: u64,
    kind: InteractionUpdateKind,
    interaction: PendingInteraction,
}

impl InteractionUpdate {
    /// Revision > 0.
    pub fn new(
        revision: u64,
        kind: InteractionUpdateKind,
        interaction: PendingInteraction,
    ) -> Result<Self, ValueError> {
        if revision == 0 {
            return Err(ValueError::new("update revision is zero"));
        }
        Ok(Self {
            revision,
            kind,
            interaction,
        })
    }
    /// The revision after this change.
    pub fn revision(&self) -> u64 {
        self.revision
    }
    /// Opened or closed.
    pub fn kind(&self) -> InteractionUpdateKind {
        self.kind
    }
    /// The interaction.
    pub fn interaction(&self) -> &PendingInteraction {
        &self.interaction
    }
}
