//! The authority's typed errors: five kinds (docs/snapshot-authority.md, "Errors"), each with a
//! fixed message. No error carries a path, digest, key, run id or any text from a file.

use std::fmt;

/// The public class of an [`AuthorityError`]; `docs/snapshot-authority.md` gives a fix hint
/// for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Another owner holds the run's lock, or the store still has outstanding leases.
    Busy,
    /// A snapshot envelope or lifecycle record failed structural or keyed verification.
    Verification,
    /// A durable write was attempted and its outcome is unknown: the run is fenced for the
    /// rest of the process and is never retried automatically.
    Uncertain,
    /// The operation does not fit the run's or the store's state (or the configuration).
    State,
    /// The store cannot be used: I/O failure, untrusted directory or file, OS randomness.
    Unavailable,
}

impl ErrorKind {
    /// A stable lowercase name: `busy`, `verification`, `uncertain`, `state`, `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Busy => "busy",
            ErrorKind::Verification => "verification",
            ErrorKind::Uncertain => "uncertain",
            ErrorKind::State => "state",
            ErrorKind::Unavailable => "unavailable",
        }
    }
}

/// Why an operation failed, in more detail than its [`ErrorKind`]; every reason belongs to
/// exactly one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Busy: another owner holds the run's lock.
    RunBusy,
    /// Busy: [`Store::close`](crate::Store::close) found outstanding leases; the last
    /// release completes the close.
    LeasesOutstanding,
    /// Verification: the envelope breaks a structural rule (format, bounds, digest, root
    /// fields, payload run id, size).
    Malformed,
    /// Verification: the envelope names another authority's scope.
    ForeignScope,
    /// Verification: the run's record is no longer SUSPENDED: the snapshot was already
    /// imported or resumed, or the run ended.
    NotSuspended,
    /// Verification: the envelope is not the run's current signed snapshot (no record, a
    /// different claim, or a failed MAC). One generic reason, by design.
    Rejected,
    /// Verification: a lifecycle record is unreadable or its MAC fails.
    RecordInvalid,
    /// Verification: a signer or verifier panicked or refused.
    VerifierFailed,
    /// Uncertain: a durable write was attempted and failed, or the run was fenced earlier.
    Uncertain,
    /// State: the run id already had a record; run ids are never started twice.
    RunExists,
    /// State: the run is not in a phase that allows this operation.
    WrongPhase,
    /// State: the snapshot differs from the one already issued for this suspension.
    SnapshotConflict,
    /// State: the store or handle is closed.
    Closed,
    /// State: the run id or another input breaks its rule.
    InvalidInput,
    /// State: the store directory is not an absolute path, or no default exists.
    Configuration,
    /// Unavailable: a directory or file in the store's path is not trusted (symlink, hard
    /// link, loose permissions, foreign owner, writable ancestor without sticky bit).
    Untrusted,
    /// Unavailable: the identity file is malformed.
    IdentityInvalid,
    /// Unavailable: an I/O operation failed.
    Io,
    /// Unavailable: the OS random source failed.
    Randomness,
    /// Unavailable: a signer panicked or refused.
    SignerFailed,
    /// Unavailable: the kernel refused or panicked before anything durable changed.
    Kernel,
}

impl Reason {
    /// The kind this reason belongs to.
    pub fn kind(self) -> ErrorKind {
        use Reason::*;
        match self {
            RunBusy | LeasesOutstanding => ErrorKind::Busy,
            Malformed | ForeignScope | NotSuspended | Rejected | RecordInvalid | VerifierFailed => {
                ErrorKind::Verification
            }
            Uncertain => ErrorKind::Uncertain,
            RunExists | WrongPhase | SnapshotConflict | Closed | InvalidInput | Configuration => {
                ErrorKind::State
            }
            Untrusted | IdentityInvalid | Io | Randomness | SignerFailed | Kernel => {
                ErrorKind::Unavailable
            }
        }
    }

    fn message(self) -> &'static str {
        use Reason::*;
        match self {
            RunBusy => "run authority busy: another process holds the run",
            LeasesOutstanding => "run authority busy: the store still has outstanding leases",
            Malformed => "snapshot is malformed: the envelope breaks a structural rule",
            ForeignScope => "snapshot refused: it was signed by another run authority",
            NotSuspended => "snapshot refused: it was already resumed or its run ended",
            Rejected => "snapshot refused: it is not the run's current signed snapshot",
            RecordInvalid => "run authority record failed verification",
            VerifierFailed => "snapshot verification failed",
            Uncertain => {
                "run authority uncertain: a durable write may or may not have happened; \
                 the run is fenced and will not be retried"
            }
            RunExists => "run authority state: the run id already had a record",
            WrongPhase => "run authority state: the run is not in a phase that allows this",
            SnapshotConflict => {
                "run authority state: a different snapshot was already issued for this suspension"
            }
            Closed => "run authority state: closed",
            InvalidInput => "run authority state: invalid input",
            Configuration => "run authority state: the store directory must be an absolute path",
            Untrusted => "run authority unavailable: an untrusted file or directory was refused",
            IdentityInvalid => "run authority unavailable: the identity file is malformed",
            Io => "run authority unavailable: an I/O operation failed",
            Randomness => "run authority unavailable: the OS random source failed",
            SignerFailed => "run authority unavailable: signing failed",
            Kernel => "run authority unavailable: the kernel refused the run",
        }
    }
}

/// An authority failure: a [`Reason`] (and through it an [`ErrorKind`]) and, for I/O
/// failures, the OS error kind. Messages are fixed strings.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorityError {
    reason: Reason,
    io: Option<std::io::ErrorKind>,
}

impl AuthorityError {
    pub(crate) fn new(reason: Reason) -> Self {
        AuthorityError { reason, io: None }
    }

    pub(crate) fn io(error: &std::io::Error) -> Self {
        AuthorityError {
            reason: Reason::Io,
            io: Some(error.kind()),
        }
    }

    /// The public class.
    pub fn kind(&self) -> ErrorKind {
        self.reason.kind()
    }

    /// The detailed reason.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// For [`Reason::Io`], the OS error kind.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        self.io
    }
}

impl fmt::Debug for AuthorityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthorityError")
            .field("kind", &self.kind())
            .field("reason", &self.reason)
            .field("io", &self.io)
            .finish()
    }
}

impl fmt::Display for AuthorityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason.message())?;
        if let Some(kind) = self.io {
            write!(f, " ({kind})")?;
        }
        Ok(())
    }
}

impl std::error::Error for AuthorityError {}

impl From<Reason> for AuthorityError {
    fn from(reason: Reason) -> Self {
        AuthorityError::new(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_reason_and_a_stable_name() {
        let kinds = [
            (Reason::RunBusy, "busy"),
            (Reason::Rejected, "verification"),
            (Reason::Uncertain, "uncertain"),
            (Reason::RunExists, "state"),
            (Reason::Io, "unavailable"),
        ];
        for (reason, name) in kinds {
            assert_eq!(reason.kind().as_str(), name);
            assert!(!AuthorityError::new(reason).to_string().is_empty());
        }
    }
}
