//! Immutable values of a negotiated connection and its requests and results
//! (docs/client.md, "Connecting"). Every constructor validates; fields are private
//! and read through accessors, so a value that exists is valid.

use std::fmt;

use crate::token::{is_token, token};

/// A value failed its constructor's validation. The message is fixed and
/// names the broken rule; it never holds the rejected input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueError {
    message: &'static str,
}

impl ValueError {
    /// A validation failure with a fixed message.
    pub const fn new(message: &'static str) -> Self {
        Self { message }
    }

    /// The fixed message naming the broken rule.
    pub fn message(&self) -> &'static str {
        self.message
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}

impl std::error::Error for ValueError {}

/// Longest build identity field, in bytes.
pub const MAX_BUILD_FIELD_BYTES: usize = 256;
/// Longest identifier (client, operation, run, interaction, message), in bytes.
pub const MAX_ID_BYTES: usize = 128;
/// Longest name (definition id and revision, model, capability, plan id), in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Most capabilities in one set.
pub const MAX_CAPABILITIES: usize = 1024;
/// Most degraded reasons in a health value.
pub const MAX_DEGRADED_REASONS: usize = 64;
/// Longest degraded reason, in bytes.
pub const MAX_DEGRADED_REASON_BYTES: usize = 2048;
/// Fewest turns a definition may allow.
pub const MIN_DEFINITION_TURNS: u32 = 1;
/// Most turns a definition may allow.
pub const MAX_DEFINITION_TURNS: u32 = 1000;
/// Largest expected epoch of a reconnect claim (`2^64 - 2`: the next epoch must exist).
pub const MAX_RECONNECT_EXPECTED_EPOCH: u64 = u64::MAX - 1;
/// Bytes of an initialization attempt id.
pub const INITIALIZATION_ATTEMPT_ID_BYTES: usize = 16;
/// Longest input text, in bytes (1 MiB).
pub const MAX_INPUT_TEXT_BYTES: usize = 1024 * 1024;
/// Longest cancel reason, in bytes.
pub const MAX_CANCEL_REASON_BYTES: usize = 1024;
/// Largest kernel snapshot payload (16 MiB).
pub const MAXIMUM_SNAPSHOT_PAYLOAD_BYTES: usize = 16 * 1024 * 1024;
/// Most bytes the signed envelope adds around the payload.
pub const MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES: usize = 295;
/// Largest snapshot (envelope) in bytes: payload maximum plus overhead.
pub const MAXIMUM_SNAPSHOT_BYTES: usize =
    MAXIMUM_SNAPSHOT_PAYLOAD_BYTES + MAXIMUM_SNAPSHOT_ENVELOPE_OVERHEAD_BYTES;
/// The protocol minor that introduced initialization attempt ids.
pub const INITIALIZATION_ATTEMPT_MINIMUM_MINOR: u32 = 3;
/// The last protocol minor without attempt ids.
pub const LEGACY_MAXIMUM_MINOR: u32 = 2;

/// A build identity: component, version, commit and toolchain, each a token
/// of at most [`MAX_BUILD_FIELD_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Build {
    component: String,
    version: String,
    commit: String,
    toolchain: String,
}

impl Build {
    /// Validates the four fields.
    ///
    /// ```
    /// let b = agent_client::Build::new("agent", "0.1.0", "abc123", "rustc-1.95").unwrap();
    /// assert_eq!(b.component(), "agent");
    /// ```
    pub fn new(
        component: &str,
        version: &str,
        commit: &str,
        toolchain: &str,
    ) -> Result<Self, ValueError> {
        const E: &str = "build field is not a token of at most 256 bytes";
        Ok(Self {
            component: token(component, MAX_BUILD_FIELD_BYTES, E)?,
            version: token(version, MAX_BUILD_FIELD_BYTES, E)?,
            commit: token(commit, MAX_BUILD_FIELD_BYTES, E)?,
            toolchain: token(toolchain, MAX_BUILD_FIELD_BYTES, E)?,
        })
    }
    /// The component name.
    pub fn component(&self) -> &str {
        &self.component
    }
    /// The version.
    pub fn version(&self) -> &str {
        &self.version
    }
    /// The source commit.
    pub fn commit(&self) -> &str {
        &self.commit
    }
    /// The toolchain (wire field `go_version`).
    pub fn toolchain(&self) -> &str {
        &self.toolchain
    }
}

/// A protocol version; the major is positive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtocolVersion {
    major: u32,
    minor: u32,
    patch: u32,
}

impl ProtocolVersion {
    /// `major > 0`.
    pub fn new(major: u32, minor: u32, patch: u32) -> Result<Self, ValueError> {
        if major == 0 {
            return Err(ValueError::new("protocol major is zero"));
        }
        Ok(Self {
            major,
            minor,
            patch,
        })
    }
    /// The major.
    pub fn major(&self) -> u32 {
        self.major
    }
    /// The minor.
    pub fn minor(&self) -> u32 {
        self.minor
    }
    /// The patch.
    pub fn patch(&self) -> u32 {
        self.patch
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// An inclusive protocol range within one major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProtocolRange {
    minimum: ProtocolVersion,
    maximum: ProtocolVersion,
}

impl ProtocolRange {
    /// One major, `minimum <= maximum`.
    pub fn new(minimum: ProtocolVersion, maximum: ProtocolVersion) -> Result<Self, ValueError> {
        if minimum.major != maximum.major {
            return Err(ValueError::new("protocol range crosses a major"));
        }
        if minimum > maximum {
            return Err(ValueError::new("protocol range is inverted"));
        }
        Ok(Self { minimum, maximum })
    }
    /// The lowest version.
    pub fn minimum(&self) -> ProtocolVersion {
        self.minimum
    }
    /// The highest version.
    pub fn maximum(&self) -> ProtocolVersion {
        self.maximum
    }
    /// Whether `v` lies inside.
    pub fn contains(&self, v: ProtocolVersion) -> bool {
        self.minimum <= v && v <= self.maximum
    }
    /// Whether the two ranges share a version.
    pub fn overlaps(&self, other: &Self) -> bool {
        self.minimum <= other.maximum && other.minimum <= self.maximum
    }
}

/// The six per-connection limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    message_bytes: u64,
    collection_items: u32,
    replay_events: u32,
    replay_bytes: u64,
    concurrent_streams: u32,
    active_runs: u32,
}

impl Limits {
    /// Six positive values, `replay_events <= replay_bytes`.
    pub fn new(
        message_bytes: u64,
        collection_items: u32,
        replay_events: u32,
        replay_bytes: u64,
        concurrent_streams: u32,
        active_runs: u32,
    ) -> Result<Self, ValueError> {
        if message_bytes == 0
            || collection_items == 0
            || replay_events == 0
            || replay_bytes == 0
            || concurrent_streams == 0
            || active_runs == 0
        {
            return Err(ValueError::new("every limit must be positive"));
        }
        if u64::from(replay_events) > replay_bytes {
            return Err(ValueError::new("replay events exceed replay bytes"));
        }
        Ok(Self {
            message_bytes,
            collection_items,
            replay_events,
            replay_bytes,
            concurrent_streams,
            active_runs,
        })
    }
    /// Largest message in bytes.
    pub fn message_bytes(&self) -> u64 {
        self.message_bytes
    }
    /// Most items in one collection.
    pub fn collection_items(&self) -> u32 {
        self.collection_items
    }
    /// Most events in one replay page.
    pub fn replay_events(&self) -> u32 {
        self.replay_events
    }
    /// Most encoded bytes in one replay page.
    pub fn replay_bytes(&self) -> u64 {
        self.replay_bytes
    }
    /// Most concurrent streams.
    pub fn concurrent_streams(&self) -> u32 {
        self.concurrent_streams
    }
    /// Most active runs.
    pub fn active_runs(&self) -> u32 {
        self.active_runs
    }
}

/// The daemon's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HealthState {
    /// Starting up.
    Starting,
    /// Serving.
    Ready,
    /// Serving with degraded reasons.
    Degraded,
    /// Shutting down.
    Stopping,
}

/// A health report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    state: HealthState,
    degraded_reasons: Vec<String>,
    active_runs: u64,
    limits: Limits,
}

impl Health {
    /// Reasons sorted unique, at most [`MAX_DEGRADED_REASONS`] tokens of at
    /// most [`MAX_DEGRADED_REASON_BYTES`], present only when degraded;
    /// `active_runs <= limits.active_runs()`.
    pub fn new(
        state: HealthState,
        degraded_reasons: Vec<String>,
        active_runs: u64,
        limits: Limits,
    ) -> Result<Self, ValueError> {
        if degraded_reasons.len() > MAX_DEGRADED_REASONS {
            return Err(ValueError::new("too many degraded reasons"));
        }
        if !degraded_reasons
            .iter()
            .all(|r| is_token(r, MAX_DEGRADED_REASON_BYTES))
        {
            return Err(ValueError::new("degraded reason is not a token"));
        }
        if !degraded_reasons.windows(2).all(|w| w[0] < w[1]) {
            return Err(ValueError::new("degraded reasons are not sorted unique"));
        }
        if (state == HealthState::Degraded) == degraded_reasons.is_empty() {
            return Err(ValueError::new(
                "degraded reasons are present exactly when degraded",
            ));
        }
        if active_runs > u64::from(limits.active_runs) {
            return Err(ValueError::new("active runs exceed the limit"));
        }
        Ok(Self {
            state,
            degraded_reasons,
            active_runs,
            limits,
        })
    }
    /// The state.
    pub fn state(&self) -> HealthState {
        self.state
    }
    /// Why it is degraded, sorted.
    pub fn degraded_reasons(&self) -> &[String] {
        &self.degraded_reasons
    }
    /// Runs active now.
    pub fn active_runs(&self) -> u64 {
        self.active_runs
    }
    /// The daemon's global capacities.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// Which definition to run: id and revision, tokens of at most [`MAX_NAME_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefinitionRef {
    id: String,
    revision: String,
}

impl DefinitionRef {
    /// Validates both tokens.
    pub fn new(id: &str, revision: &str) -> Result<Self, ValueError> {
        const E: &str = "definition id or revision is not a token of at most 256 bytes";
        Ok(Self {
            id: token(id, MAX_NAME_BYTES, E)?,
            revision: token(revision, MAX_NAME_BYTES, E)?,
        })
    }
    /// The id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The revision.
    pub fn revision(&self) -> &str {
        &self.revision
    }
    fn key(&self) -> (&[u8], &[u8]) {
        (self.id.as_bytes(), self.revision.as_bytes())
    }
}

/// A definition the daemon serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    reference: DefinitionRef,
    model: String,
    max_turns: u32,
}

impl Definition {
    /// Model is a token of at most 256 bytes; max turns in
    /// [`MIN_DEFINITION_TURNS`]..=[`MAX_DEFINITION_TURNS`].
    pub fn new(reference: DefinitionRef, model: &str, max_turns: u32) -> Result<Self, ValueError> {
        let model = token(model, MAX_NAME_BYTES, "model is not a token")?;
        if !(MIN_DEFINITION_TURNS..=MAX_DEFINITION_TURNS).contains(&max_turns) {
            return Err(ValueError::new("max turns lies outside 1..=1000"));
        }
        Ok(Self {
            reference,
            model,
            max_turns,
        })
    }
    /// Id and revision.
    pub fn reference(&self) -> &DefinitionRef {
        &self.reference
    }
    /// The model.
    pub fn model(&self) -> &str {
        &self.model
    }
    /// The turn bound.
    pub fn max_turns(&self) -> u32 {
        self.max_turns
    }
}

/// The definitions a connection may start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    revision: String,
    definitions: Vec<Definition>,
}

impl Catalog {
    /// Revision is a token of at most 256 bytes; 1..=`limits.collection_items()`
    /// definitions sorted strictly by (id, revision).
    pub fn new(
        revision: &str,
        definitions: Vec<Definition>,
        limits: &Limits,
    ) -> Result<Self, ValueError> {
        let revision = token(revision, MAX_NAME_BYTES, "catalog revision is not a token")?;
        if definitions.is_empty() || definitions.len() > limits.collection_items as usize {
            return Err(ValueError::new(
                "catalog must hold 1..=collection items definitions",
            ));
        }
        if !definitions
            .windows(2)
            .all(|w| w[0].reference.key() < w[1].reference.key())
        {
            return Err(ValueError::new("catalog is not sorted unique"));
        }
        Ok(Self {
            revision,
            definitions,
        })
    }
    /// The revision.
    pub fn revision(&self) -> &str {
        &self.revision
    }
    /// The definitions, sorted.
    pub fn definitions(&self) -> &[Definition] {
        &self.definitions
    }
    /// The definition `reference` names exactly.
    pub fn get(&self, reference: &DefinitionRef) -> Option<&Definition> {
        self.definitions
            .binary_search_by(|d| d.reference.key().cmp(&reference.key()))
            .ok()
            .map(|i| &self.definitions[i])
    }
}

pub(crate) fn validate_capabilities(names: &[String]) -> Result<(), ValueError> {
    if names.len() > MAX_CAPABILITIES {
        return Err(ValueError::new("more than 1024 capabilities"));
    }
    if !names.iter().all(|n| is_token(n, MAX_NAME_BYTES)) {
        return Err(ValueError::new("capability is not a token"));
    }
    if !names.windows(2).all(|w| w[0] < w[1]) {
        return Err(ValueError::new("capabilities are not sorted unique"));
    }
    Ok(())
}

/// Everything a successful Initialize negotiated. Immutable; a session
/// keeps it for its whole life (also after close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    protocol: ProtocolVersion,
    server: Build,
    capabilities: Vec<String>,
    limits: Limits,
    health: Health,
    client_id: String,
    epoch: u64,
    catalog: Catalog,
}

/// The parts of a [`Connection`], for [`Connection::new`].
#[derive(Clone, Debug)]
pub struct ConnectionSpec {
    /// The selected protocol.
    pub protocol: ProtocolVersion,
    /// The daemon's build.
    pub server: Build,
    /// The enabled capabilities, sorted unique.
    pub capabilities: Vec<String>,
    /// The selected limits.
    pub limits: Limits,
    /// Health at initialization.
    pub health: Health,
    /// The client id the daemon assigned or confirmed.
    pub client_id: String,
    /// The ownership epoch.
    pub epoch: u64,
    /// The definitions.
    pub catalog: Catalog,
}

impl Connection {
    /// At most 1024 capabilities; client id a token of at most 128 bytes;
    /// epoch > 0; the catalog fits the limits.
    pub fn new(spec: ConnectionSpec) -> Result<Self, ValueError> {
        validate_capabilities(&spec.capabilities)?;
        let client_id = token(&spec.client_id, MAX_ID_BYTES, "client id is not a token")?;
        if spec.epoch == 0 {
            return Err(ValueError::new("ownership epoch is zero"));
        }
        if spec.catalog.definitions.len() > spec.limits.collection_items as usize {
            return Err(ValueError::new("catalog exceeds the collection limit"));
        }
        Ok(Self {
            protocol: spec.protocol,
            server: spec.server,
            capabilities: spec.capabilities,
            limits: spec.limits,
            health: spec.health,
            client_id,
            epoch: spec.epoch,
            catalog: spec.catalog,
        })
    }
    /// The selected protocol.
    pub fn protocol(&self) -> ProtocolVersion {
        self.protocol
    }
    /// The daemon's build.
    pub fn server(&self) -> &Build {
        &self.server
    }
    /// The enabled capabilities.
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }
    /// The selected limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    /// Health at initialization.
    pub fn health(&self) -> &Health {
        &self.health
    }
    /// The client id.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }
    /// The ownership epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    /// The definitions.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
    /// The claim that reconnects this connection's client after it.
    pub fn reconnect_claim(&self) -> Result<ReconnectClaim, ValueError> {
        ReconnectClaim::new(&self.client_id, self.epoch)
    }
}

/// A claim to take over a client id at its next epoch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReconnectClaim {
    client_id: String,
    expected_epoch: u64,
}

impl ReconnectClaim {
    /// Client id a token of at most 128 bytes; expected epoch in
    /// `1..=`[`MAX_RECONNECT_EXPECTED_EPOCH`].
    pub fn new(client_id: &str, expected_epoch: u64) -> Result<Self, ValueError> {
        let client_id = token(client_id, MAX_ID_BYTES, "client id is not a token")?;
        if !(1..=MAX_RECONNECT_EXPECTED_EPOCH).contains(&expected_epoch) {
            return Err(ValueError::new("expected epoch lies outside [1, 2^64-2]"));
        }
        Ok(Self {
            client_id,
            expected_epoch,
        })
    }
    /// The client id.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }
    /// The epoch the client believes current.
    pub fn expected_epoch(&self) -> u64 {
        self.expected_epoch
    }
}

/// Sixteen bytes naming one Initialize attempt (protocol 1.3), not all zero.
///
/// The seam has no randomness source (it depends on the standard library
/// only): take the bytes from the OS CSPRNG in your application (for
/// example the `getrandom` crate) or from the adapter, and keep the id to
/// replay the same attempt after an [`crate::Error::InitializationReplay`].
/// [`InitializationAttemptId::generate`] retries a generator that returns
/// all zeros, at most [`ATTEMPT_ID_GENERATION_TRIES`] times.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct InitializationAttemptId([u8; INITIALIZATION_ATTEMPT_ID_BYTES]);

/// How many times [`InitializationAttemptId::generate`] calls its source.
pub const ATTEMPT_ID_GENERATION_TRIES: usize = 4;

impl InitializationAttemptId {
    /// Not all zero.
    ///
    /// ```
    /// let id = agent_client::InitializationAttemptId::new([7; 16]).unwrap();
    /// assert_eq!(id.to_string(), "07070707070707070707070707070707");
    /// ```
    pub fn new(bytes: [u8; INITIALIZATION_ATTEMPT_ID_BYTES]) -> Result<Self, ValueError> {
        if bytes == [0; INITIALIZATION_ATTEMPT_ID_BYTES] {
            return Err(ValueError::new("attempt id is all zero"));
        }
        Ok(Self(bytes))
    }

    /// From a byte slice of exactly 16 bytes, not all zero.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ValueError> {
        let array: [u8; INITIALIZATION_ATTEMPT_ID_BYTES] = bytes
            .try_into()
            .map_err(|_| ValueError::new("attempt id is not 16 bytes"))?;
        Self::new(array)
    }

    /// Calls `source` for fresh bytes up to [`ATTEMPT_ID_GENERATION_TRIES`]
    /// times until it yields a non-zero id; `source` fails with its own error.
    pub fn generate<E>(
        mut source: impl FnMut(&mut [u8; INITIALIZATION_ATTEMPT_ID_BYTES]) -> Result<(), E>,
    ) -> Result<Result<Self, ValueError>, E> {
        for _ in 0..ATTEMPT_ID_GENERATION_TRIES {
            let mut bytes = [0; INITIALIZATION_ATTEMPT_ID_BYTES];
            source(&mut bytes)?;
            if let Ok(id) = Self::new(bytes) {
                return Ok(Ok(id));
            }
        }
        Ok(Err(ValueError::new("attempt id source yielded only zeros")))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8; INITIALIZATION_ATTEMPT_ID_BYTES] {
        &self.0
    }
}

impl fmt::Display for InitializationAttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for InitializationAttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InitializationAttemptId({self})")
    }
}

/// What an Initialize asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitializeRequest {
    protocol: ProtocolRange,
    client: Build,
    supported: Vec<String>,
    required: Vec<String>,
    limits: Limits,
    reconnect: Option<ReconnectClaim>,
    attempt: Option<InitializationAttemptId>,
}

impl InitializeRequest {
    fn build(
        protocol: ProtocolRange,
        client: Build,
        supported: Vec<String>,
        required: Vec<String>,
        limits: Limits,
        reconnect: Option<ReconnectClaim>,
        attempt: Option<InitializationAttemptId>,
    ) -> Result<Self, ValueError> {
        validate_capabilities(&supported)?;
        validate_capabilities(&required)?;
        if !required.iter().all(|r| supported.binary_search(r).is_ok()) {
            return Err(ValueError::new("required capabilities are not supported"));
        }
        let protocol = match attempt {
            Some(_) => {
                let exact = ProtocolVersion::new(
                    protocol.maximum.major,
                    INITIALIZATION_ATTEMPT_MINIMUM_MINOR,
                    0,
                )?;
                if !protocol.contains(exact) {
                    return Err(ValueError::new(
                        "an attempt id needs a range containing 1.3",
                    ));
                }
                ProtocolRange::new(exact, exact)?
            }
            None => {
                if protocol.minimum.minor >= INITIALIZATION_ATTEMPT_MINIMUM_MINOR {
                    return Err(ValueError::new(
                        "a range from 1.3 needs an initialization attempt id",
                    ));
                }
                if protocol.maximum.minor >= INITIALIZATION_ATTEMPT_MINIMUM_MINOR {
                    // Clamp to the last minor without attempt ids.
                    ProtocolRange::new(
                        protocol.minimum,
                        ProtocolVersion::new(protocol.maximum.major, LEGACY_MAXIMUM_MINOR, 0)?,
                    )?
                } else {
                    protocol
                }
            }
        };
        Ok(Self {
            protocol,
            client,
            supported,
            required,
            limits,
            reconnect,
            attempt,
        })
    }

    /// A fresh legacy (≤ 1.2) request; a range reaching 1.3 is clamped to
    /// end at 1.2, one starting at 1.3 is an error.
    pub fn new(
        protocol: ProtocolRange,
        client: Build,
        supported: Vec<String>,
        required: Vec<String>,
        limits: Limits,
    ) -> Result<Self, ValueError> {
        Self::build(protocol, client, supported, required, limits, None, None)
    }

    /// A legacy reconnect request (clamped like [`InitializeRequest::new`]).
    pub fn reconnect(
        protocol: ProtocolRange,
        client: Build,
        supported: Vec<String>,
        required: Vec<String>,
        limits: Limits,
        claim: ReconnectClaim,
    ) -> Result<Self, ValueError> {
        Self::build(
            protocol,
            client,
            supported,
            required,
            limits,
            Some(claim),
            None,
        )
    }

    /// A 1.3 request with an attempt id: the range must contain 1.3 and is
    /// rewritten to exactly [1.3.0, 1.3.0]. `claim` makes it a reconnect.
    ///
    /// ```
    /// use agent_client::*;
    /// let v = |m| ProtocolVersion::new(1, m, 0).unwrap();
    /// let r = InitializeRequest::with_attempt(
    ///     ProtocolRange::new(v(0), v(3)).unwrap(),
    ///     Build::new("ui", "1", "c", "rustc").unwrap(),
    ///     vec![], vec![],
    ///     Limits::new(1 << 20, 64, 64, 1 << 20, 4, 4).unwrap(),
    ///     None,
    ///     InitializationAttemptId::new([1; 16]).unwrap(),
    /// ).unwrap();
    /// assert_eq!(r.protocol().minimum(), v(3));
    /// assert_eq!(r.protocol().maximum(), v(3));
    /// ```
    pub fn with_attempt(
        protocol: ProtocolRange,
        client: Build,
        supported: Vec<String>,
        required: Vec<String>,
        limits: Limits,
        claim: Option<ReconnectClaim>,
        attempt: InitializationAttemptId,
    ) -> Result<Self, ValueError> {
        Self::build(
            protocol,
            client,
            supported,
            required,
            limits,
            claim,
            Some(attempt),
        )
    }

    /// The requested range (after clamping).
    pub fn protocol(&self) -> &ProtocolRange {
        &self.protocol
    }
    /// The client's build.
    pub fn client(&self) -> &Build {
        &self.client
    }
    /// Supported capabilities.
    pub fn supported_capabilities(&self) -> &[String] {
        &self.supported
    }
    /// Required capabilities.
    pub fn required_capabilities(&self) -> &[String] {
        &self.required
    }
    /// Requested limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    /// The reconnect claim, if this is a reconnect.
    pub fn reconnect_claim(&self) -> Option<&ReconnectClaim> {
        self.reconnect.as_ref()
    }
    /// The attempt id, for a 1.3 request.
    pub fn attempt(&self) -> Option<&InitializationAttemptId> {
        self.attempt.as_ref()
    }
}

macro_rules! id_token {
    ($(#[$m:meta])* $name:ident, $max:expr, $err:literal) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates the token.
            pub fn new(value: &str) -> Result<Self, ValueError> {
                token(value, $max, $err).map(Self)
            }
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_token!(
    /// A client-chosen operation id (token ≤ 128) that makes a mutation
    /// idempotent: the daemon answers a repeat with the first outcome.
    OperationId, MAX_ID_BYTES, "operation id is not a token of at most 128 bytes"
);
id_token!(
    /// A run id (token ≤ 128).
    RunRef, MAX_ID_BYTES, "run id is not a token of at most 128 bytes"
);
id_token!(
    /// An interaction id (token ≤ 128).
    InteractionId, MAX_ID_BYTES, "interaction id is not a token of at most 128 bytes"
);

/// A user message that starts a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    message_id: String,
    text: String,
}

impl Input {
    /// Message id a token ≤ 128; text not blank, at most [`MAX_INPUT_TEXT_BYTES`].
    pub fn new(message_id: &str, text: &str) -> Result<Self, ValueError> {
        let message_id = token(message_id, MAX_ID_BYTES, "message id is not a token")?;
        if text.trim().is_empty() || text.len() > MAX_INPUT_TEXT_BYTES {
            return Err(ValueError::new("input text is blank or exceeds 1 MiB"));
        }
        Ok(Self {
            message_id,
            text: text.to_owned(),
        })
    }
    /// The message id.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// What to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartRequest {
    /// Idempotency key.
    pub operation: OperationId,
    /// The definition.
    pub definition: DefinitionRef,
    /// The first user message.
    pub input: Input,
}

/// A cancel reason: a token of at most [`MAX_CANCEL_REASON_BYTES`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelReason(String);

impl CancelReason {
    /// Validates the token.
    pub fn new(reason: &str) -> Result<Self, ValueError> {
        token(
            reason,
            MAX_CANCEL_REASON_BYTES,
            "cancel reason is not a token",
        )
        .map(Self)
    }
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Where to read a run's events from: events after `after` (0 = from the start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    run: RunRef,
    after: u64,
}

impl Cursor {
    /// Any `after`, 0 included.
    pub fn new(run: RunRef, after: u64) -> Self {
        Self { run, after }
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// The last sequence already seen.
    pub fn after(&self) -> u64 {
        self.after
    }
}

/// How to read events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventStreamOptions {
    limit: u32,
    tail: bool,
}

impl EventStreamOptions {
    /// Page limit in `1..=limits.replay_events()`; `tail` follows live events
    /// after the page.
    pub fn new(limit: u32, tail: bool, limits: &Limits) -> Result<Self, ValueError> {
        if limit == 0 || limit > limits.replay_events {
            return Err(ValueError::new("page limit lies outside 1..=replay events"));
        }
        Ok(Self { limit, tail })
    }
    /// The page limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }
    /// Whether the stream tails.
    pub fn tail(&self) -> bool {
        self.tail
    }
}

/// How to read interactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct InteractionStreamOptions {
    /// Follow deltas after the snapshot.
    pub tail: bool,
}

/// A started run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartResult {
    run: RunRef,
    initial_sequence: u64,
    duplicate: bool,
    plan_id: String,
}

impl StartResult {
    /// Initial sequence > 0; plan id a token ≤ 256.
    pub fn new(
        run: RunRef,
        initial_sequence: u64,
        duplicate: bool,
        plan_id: &str,
    ) -> Result<Self, ValueError> {
        if initial_sequence == 0 {
            return Err(ValueError::new("initial sequence is zero"));
        }
        let plan_id = token(plan_id, MAX_NAME_BYTES, "plan id is not a token")?;
        Ok(Self {
            run,
            initial_sequence,
            duplicate,
            plan_id,
        })
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// Its first event's sequence.
    pub fn initial_sequence(&self) -> u64 {
        self.initial_sequence
    }
    /// Whether the operation id was already used (this is the first outcome).
    pub fn duplicate(&self) -> bool {
        self.duplicate
    }
    /// The compiled plan's id.
    pub fn plan_id(&self) -> &str {
        &self.plan_id
    }
}

/// A cancel's outcome: exactly one of requested or already terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelResult {
    /// Cancellation was requested; the terminal event follows on the stream.
    Requested,
    /// The run had already ended with this terminal sequence (> 0).
    AlreadyTerminal(u64),
}

impl CancelResult {
    /// Exactly one outcome; terminal ⇔ sequence > 0.
    pub fn new(requested: bool, already_terminal: bool, sequence: u64) -> Result<Self, ValueError> {
        match (requested, already_terminal, sequence) {
            (true, false, 0) => Ok(Self::Requested),
            (false, true, s) if s > 0 => Ok(Self::AlreadyTerminal(s)),
            _ => Err(ValueError::new("cancel result is not exactly one outcome")),
        }
    }
}

macro_rules! sequence_result {
    ($(#[$m:meta])* $name:ident, $field:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            $field: u64,
            duplicate: bool,
        }

        impl $name {
            /// The sequence lies in `1..u64::MAX`.
            pub fn new($field: u64, duplicate: bool) -> Result<Self, ValueError> {
                if $field == 0 || $field == u64::MAX {
                    return Err(ValueError::new("result sequence lies outside 1..2^64-1"));
                }
                Ok(Self { $field, duplicate })
            }
            /// The sequence.
            pub fn $field(&self) -> u64 {
                self.$field
            }
            /// Whether the operation id was already used.
            pub fn duplicate(&self) -> bool {
                self.duplicate
            }
        }
    };
}

sequence_result!(
    /// A suspended run: the boundary sequence of its last event.
    SuspendResult, boundary_sequence
);
sequence_result!(
    /// A resumed run: the next sequence it will emit.
    ResumeResult, next_sequence
);

/// An imported run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportResult {
    run: RunRef,
    next_sequence: u64,
    duplicate: bool,
}

impl ImportResult {
    /// Next sequence in `1..u64::MAX`.
    pub fn new(run: RunRef, next_sequence: u64, duplicate: bool) -> Result<Self, ValueError> {
        if next_sequence == 0 || next_sequence == u64::MAX {
            return Err(ValueError::new("next sequence lies outside 1..2^64-1"));
        }
        Ok(Self {
            run,
            next_sequence,
            duplicate,
        })
    }
    /// The run.
    pub fn run(&self) -> &RunRef {
        &self.run
    }
    /// The next sequence.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }
    /// Whether the operation id was already used.
    pub fn duplicate(&self) -> bool {
        self.duplicate
    }
}

/// A respond's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RespondResult {
    /// The answer was accepted now.
    Accepted,
    /// The operation id was used before; the first answer stands.
    Duplicate,
}

/// An exported run: the signed envelope's bytes, opaque to the client,
/// 1..=[`MAXIMUM_SNAPSHOT_BYTES`].
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot(Vec<u8>);

impl Snapshot {
    /// 1..=[`MAXIMUM_SNAPSHOT_BYTES`] bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, ValueError> {
        if bytes.is_empty() || bytes.len() > MAXIMUM_SNAPSHOT_BYTES {
            return Err(ValueError::new(
                "snapshot size lies outside 1..=16 MiB + 295",
            ));
        }
        Ok(Self(bytes))
    }
    /// The envelope bytes, to store or import.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Snapshot({} bytes)", self.0.len())
    }
}
