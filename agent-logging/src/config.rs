//! The projection's configuration and its correlation key.

use std::fmt;
use std::sync::OnceLock;

/// The smallest mailbox: one envelope.
pub const MIN_MAILBOX_CAPACITY: usize = 1;

/// The largest mailbox: 65,536 envelopes.
pub const MAX_MAILBOX_CAPACITY: usize = 65_536;

/// The mailbox capacity when the configuration sets none.
pub const DEFAULT_MAILBOX_CAPACITY: usize = 1024;

/// The length of a [`CorrelationKey`] in bytes.
pub const CORRELATION_KEY_BYTES: usize = 32;

/// Why a [`Config`] or [`CorrelationKey`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The mailbox capacity is outside `1..=65,536`.
    #[error(
        "mailbox capacity {capacity} is outside {MIN_MAILBOX_CAPACITY}..={MAX_MAILBOX_CAPACITY}"
    )]
    Capacity {
        /// The refused capacity.
        capacity: usize,
    },
    /// Every byte of the correlation key is zero.
    #[error("the correlation key is all zero bytes")]
    ZeroKey,
    /// The operating system could not supply random bytes for a fresh key.
    #[error("no random bytes for the correlation key: {0}")]
    Random(String),
}

/// The HMAC key behind every correlation pseudonym: 32 bytes, not all zero. It is never
/// exposed; `Debug` prints a placeholder.
///
/// ```
/// use agent_logging::CorrelationKey;
///
/// let key = CorrelationKey::new([7; 32])?;
/// assert_eq!(format!("{key:?}"), "CorrelationKey(<redacted>)");
/// assert!(CorrelationKey::new([0; 32]).is_err());
/// # Ok::<(), agent_logging::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct CorrelationKey([u8; CORRELATION_KEY_BYTES]);

impl CorrelationKey {
    /// The key `bytes`; all-zero bytes are refused.
    pub fn new(bytes: [u8; CORRELATION_KEY_BYTES]) -> Result<Self, ConfigError> {
        if bytes.iter().all(|b| *b == 0) {
            return Err(ConfigError::ZeroKey);
        }
        Ok(CorrelationKey(bytes))
    }

    /// This process's key: 32 fresh random bytes drawn once per process, so every logger
    /// of the process that sets no key agrees on the pseudonyms.
    pub fn process() -> Result<Self, ConfigError> {
        static PROCESS_KEY: OnceLock<CorrelationKey> = OnceLock::new();
        if let Some(key) = PROCESS_KEY.get() {
            return Ok(key.clone());
        }
        let key = Self::random()?;
        Ok(PROCESS_KEY.get_or_init(|| key).clone())
    }

    /// A fresh random key.
    pub fn random() -> Result<Self, ConfigError> {
        let mut bytes = [0u8; CORRELATION_KEY_BYTES];
        // 32 random bytes are all zero with probability 2^-256; draw again rather than fail.
        for _ in 0..4 {
            getrandom::fill(&mut bytes).map_err(|e| ConfigError::Random(e.to_string()))?;
            if let Ok(key) = Self::new(bytes) {
                return Ok(key);
            }
        }
        Err(ConfigError::ZeroKey)
    }

    pub(crate) fn bytes(&self) -> &[u8; CORRELATION_KEY_BYTES] {
        &self.0
    }
}

impl fmt::Debug for CorrelationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CorrelationKey(<redacted>)")
    }
}

/// How the projection runs: the mailbox bound, whether `tool.progress` is logged, whether
/// its health counts toward readiness, and the correlation key (`None`: the process key).
///
/// ```
/// use agent_logging::{Config, DEFAULT_MAILBOX_CAPACITY};
///
/// let config = Config::default();
/// assert_eq!(config.mailbox_capacity(), DEFAULT_MAILBOX_CAPACITY);
/// assert!(!config.include_progress() && !config.readiness_impact());
/// assert!(Config::default().with_mailbox_capacity(0).is_err());
/// let config = config.with_mailbox_capacity(65_536)?.with_progress(true);
/// assert!(config.include_progress());
/// # Ok::<(), agent_logging::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    mailbox_capacity: usize,
    include_progress: bool,
    readiness_impact: bool,
    correlation_key: Option<CorrelationKey>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
            include_progress: false,
            readiness_impact: false,
            correlation_key: None,
        }
    }
}

impl Config {
    /// The defaults: 1024 envelopes, no progress, no readiness impact, the process key.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bounds the mailbox at `capacity` envelopes (`1..=65,536`).
    pub fn with_mailbox_capacity(mut self, capacity: usize) -> Result<Self, ConfigError> {
        if !(MIN_MAILBOX_CAPACITY..=MAX_MAILBOX_CAPACITY).contains(&capacity) {
            return Err(ConfigError::Capacity { capacity });
        }
        self.mailbox_capacity = capacity;
        Ok(self)
    }

    /// Logs `tool.progress` (at TRACE) instead of filtering it out.
    pub fn with_progress(mut self, include: bool) -> Self {
        self.include_progress = include;
        self
    }

    /// Lets the projection's health count toward readiness (see [`LogHealth`](crate::LogHealth)).
    pub fn with_readiness_impact(mut self, impact: bool) -> Self {
        self.readiness_impact = impact;
        self
    }

    /// Derives pseudonyms under `key` instead of the process key.
    pub fn with_correlation_key(mut self, key: CorrelationKey) -> Self {
        self.correlation_key = Some(key);
        self
    }

    /// The mailbox bound, in envelopes.
    pub fn mailbox_capacity(&self) -> usize {
        self.mailbox_capacity
    }

    /// Whether `tool.progress` is logged.
    pub fn include_progress(&self) -> bool {
        self.include_progress
    }

    /// Whether the health contribution is enabled.
    pub fn readiness_impact(&self) -> bool {
        self.readiness_impact
    }

    /// The configured key, if any (`None`: the process key).
    pub fn correlation_key(&self) -> Option<&CorrelationKey> {
        self.correlation_key.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_bounds_are_inclusive() {
        for ok in [
            MIN_MAILBOX_CAPACITY,
            DEFAULT_MAILBOX_CAPACITY,
            MAX_MAILBOX_CAPACITY,
        ] {
            assert_eq!(
                Config::new()
                    .with_mailbox_capacity(ok)
                    .map(|c| c.mailbox_capacity()),
                Ok(ok)
            );
        }
        for bad in [0, MAX_MAILBOX_CAPACITY + 1] {
            assert_eq!(
                Config::new().with_mailbox_capacity(bad),
                Err(ConfigError::Capacity { capacity: bad })
            );
        }
    }

    #[test]
    fn keys_refuse_zero_and_never_print() {
        assert_eq!(CorrelationKey::new([0; 32]), Err(ConfigError::ZeroKey));
        let mut one = [0u8; 32];
        one[31] = 1;
        assert!(CorrelationKey::new(one).is_ok());
        let config = Config::new().with_correlation_key(CorrelationKey::new([0xab; 32]).unwrap());
        let printed = format!("{config:?}");
        assert!(printed.contains("<redacted>"), "{printed}");
        assert!(
            !printed.contains("171") && !printed.contains("ab, ab"),
            "{printed}"
        );
        assert_eq!(CorrelationKey::process(), CorrelationKey::process());
        assert_ne!(CorrelationKey::random(), CorrelationKey::random());
    }
}
