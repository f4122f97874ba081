//! The engine's tunables and why they can be rejected.

use std::time::Duration;

use crate::event::LogLimits;

/// Tunables, validated when the engine is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineOptions {
    /// Limits of each run's event log.
    pub log_limits: LogLimits,
    /// How long finalization may wait for the lease release and for observers to accept a
    /// terminal event (0 < t <= 30 s; default 2 s).
    pub finalization_timeout: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            log_limits: LogLimits::default(),
            finalization_timeout: Duration::from_secs(2),
        }
    }
}

impl EngineOptions {
    /// The defaults with other log limits.
    pub fn with_log_limits(mut self, limits: LogLimits) -> Self {
        self.log_limits = limits;
        self
    }

    /// The defaults with another finalization timeout.
    pub fn with_finalization_timeout(mut self, timeout: Duration) -> Self {
        self.finalization_timeout = timeout;
        self
    }

    pub(super) fn validate(&self) -> Result<(), EngineError> {
        self.log_limits
            .validate()
            .map_err(|_| EngineError::InvalidOptions("log limits are invalid"))?;
        if self.finalization_timeout.is_zero()
            || self.finalization_timeout > Duration::from_secs(30)
        {
            return Err(EngineError::InvalidOptions(
                "finalization timeout must be between 0 (exclusive) and 30 seconds",
            ));
        }
        Ok(())
    }
}

/// Why an [`Engine`](super::Engine) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// An option is out of range.
    #[error("invalid engine options: {0}")]
    InvalidOptions(&'static str),
    /// The engine identity is invalid.
    #[error(transparent)]
    Identity(#[from] super::IdentityError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_bounded() {
        assert!(EngineOptions::default().validate().is_ok());
        let zero = EngineOptions::default().with_finalization_timeout(Duration::ZERO);
        assert!(zero.validate().is_err());
        let long = EngineOptions::default().with_finalization_timeout(Duration::from_secs(31));
        assert!(long.validate().is_err());
    }
}
