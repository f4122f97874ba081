//! Signed run snapshots and the per-user run authority.
//!
//! Snapshots leave a process only as signed [`SnapshotEnvelope`]s. The [`Store`] is the per-user
//! durable authority: it signs envelopes under per-run keys, records every run's lifecycle
//! in HMAC-signed files, holds an OS lock per run so only one process owns it, and makes the
//! import transaction crash-safe. `docs/snapshot-authority.md` describes the envelope, the
//! store layout, the state machine and what "uncertain" means for an operator.
//!
//! The kernel crates never depend on this crate; the kernel side of an import or a local
//! resume plugs in through the small traits in [`kernel`].
#![forbid(unsafe_code)]

mod diagnose;
#[cfg(feature = "engine")]
pub mod engine;
mod envelope;
mod error;
mod fsdir;
mod identity;
pub mod kernel;
mod keys;
mod record;
mod run;
mod store;

pub use diagnose::{DirectoryProblem, diagnose_directory};
pub use envelope::{
    AuthorityBlock, ENVELOPE_DOMAIN, ENVELOPE_OVERHEAD_BYTES, HmacSnapshotAuthority, Lifecycle,
    MAX_DAEMON_TOKEN_BYTES, MAX_ENVELOPE_BYTES, MAX_LAST_SEQUENCE, MAX_PAYLOAD_BYTES,
    SNAPSHOT_FORMAT, SnapshotEnvelope, SnapshotSigner, SnapshotVerifier, StructuralError,
    is_daemon_token,
};
pub use error::{AuthorityError, ErrorKind, Reason};
pub use fsdir::{DIRECTORY_MODE, FILE_MODE, fsync_count};
pub use identity::{IDENTITY_BYTES, INITIAL_KEY_GENERATION};
pub use keys::{DIGEST_BYTES, KEY_BYTES, MAC_BYTES, SCOPE_ID_BYTES, ScopeId, SecretKey, sha256};
pub use record::{MAX_RECORD_BYTES, Phase, RECORD_VERSION};
pub use run::{ActiveRun, Import, TerminalPhase};
pub use store::{
    DEFAULT_SUBDIRECTORY, MAX_FENCED_DIRECTORIES, MAX_FENCED_RUNS, RunStatus, Step, StepHook,
    Store, StoreOptions, default_directory,
};
