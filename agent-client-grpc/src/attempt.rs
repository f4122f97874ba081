//! Initialization attempt ids from the OS CSPRNG (the seam has no
//! randomness source of its own).

use agent_client as c;

/// The OS random source failed, or yielded only zeros every try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptIdError;

impl std::fmt::Display for AttemptIdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no initialization attempt id could be generated")
    }
}

impl std::error::Error for AttemptIdError {}

/// A fresh attempt id for [`c::InitializeRequest::with_attempt`], from the
/// OS CSPRNG (retried on an all-zero draw as the seam's
/// [`c::InitializationAttemptId::generate`] does). Keep the request that
/// carries it, to replay the same attempt after
/// [`c::Error::InitializationReplay`].
///
/// ```
/// let a = agent_client_grpc::new_attempt_id().unwrap();
/// let b = agent_client_grpc::new_attempt_id().unwrap();
/// assert_ne!(a, b);
/// ```
pub fn new_attempt_id() -> Result<c::InitializationAttemptId, AttemptIdError> {
    c::InitializationAttemptId::generate(|bytes| getrandom::fill(bytes))
        .map_err(|_| AttemptIdError)?
        .map_err(|_| AttemptIdError)
}
