//! Snapshot files and the run authority's directory, shared by the one-shot form
//! (`--suspend`, `--resume`) and the daemon subcommands (`agent serve`, `export`, `import`).
//!
//! - One format: every snapshot file is the run authority's signed JSON envelope
//!   ([`agent_authority::SnapshotEnvelope`]). `agent export` converts the daemon's wire
//!   envelope to it and `agent import` converts it back, so a file from `--suspend` imports
//!   into the daemon and an export resumes with `--resume`. Files in the wire encoding (what
//!   `agent export` wrote before) are still read.
//! - One directory: `--authority DIR`, else `$AGENT_AUTHORITY_DIR`, else the default under the
//!   user's state directory, for both ([`authority_directory`]).
//! - Files that cannot be lost: a destination is checked, and a temp file reserved next to it,
//!   before anything runs ([`SnapshotFile::reserve`]); the snapshot is written to the temp
//!   file (mode 0600), synced and renamed over the destination, so a reader sees the old file
//!   or the whole new one, never a part.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use agent_authority::{AuthorityError, SnapshotEnvelope, StructuralError, diagnose_directory};

use super::daemon::AUTHORITY_DIR_ENV;

/// What `--suspend` says when the run ended before its first turn boundary (exit code
/// [`EXIT_NOTHING_SUSPENDED`](crate::cli::EXIT_NOTHING_SUSPENDED) when it completed).
pub const NOTHING_SUSPENDED: &str =
    "the run ended before a turn boundary; nothing to suspend (no snapshot was written)";

/// The mode of every snapshot file the CLI writes.
pub const SNAPSHOT_FILE_MODE: u32 = 0o600;

/// Why a snapshot destination cannot be used, checked before the run starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot write the snapshot to {}: {reason}", path.display())]
pub struct DestinationError {
    /// The destination as given.
    pub path: PathBuf,
    /// Why, in words.
    pub reason: String,
}

/// A snapshot destination, checked, with its temp file reserved in the same directory.
/// Dropping it without [`SnapshotFile::commit`] removes the temp file and leaves the
/// destination as it was.
#[derive(Debug)]
pub struct SnapshotFile {
    destination: PathBuf,
    temp: PathBuf,
    file: Option<std::fs::File>,
}

impl SnapshotFile {
    /// Checks `destination` and reserves its temp file: the parent directory must exist and
    /// be writable; the destination must not exist, or be a regular file (which the
    /// snapshot replaces). A symbolic link, a directory or any other kind of file there is
    /// refused rather than followed or replaced.
    pub fn reserve(destination: &Path) -> Result<SnapshotFile, DestinationError> {
        let fail = |reason: String| DestinationError {
            path: destination.to_owned(),
            reason,
        };
        let Some(name) = destination.file_name() else {
            return Err(fail("the path names no file".to_owned()));
        };
        let parent = match destination.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
            _ => PathBuf::from("."),
        };
        match std::fs::metadata(&parent) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(fail(format!("{} is not a directory", parent.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(fail(format!(
                    "its directory {} does not exist",
                    parent.display()
                )));
            }
            Err(e) => return Err(fail(format!("its directory {}: {e}", parent.display()))),
        }
        match std::fs::symlink_metadata(destination) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e.to_string())),
            Ok(meta) => {
                let kind = meta.file_type();
                let refused = if kind.is_symlink() {
                    Some("it is a symbolic link; name the file itself")
                } else if kind.is_dir() {
                    Some("it is a directory")
                } else if kind.is_fifo() || kind.is_socket() || !kind.is_file() {
                    Some("it is not a regular file")
                } else {
                    None
                };
                if let Some(reason) = refused {
                    return Err(fail(reason.to_owned()));
                }
            }
        }
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| fail(format!("no random temp name: {e}")))?;
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let temp = parent.join(format!(".{}.{suffix}.tmp", name.to_string_lossy()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(SNAPSHOT_FILE_MODE)
            .open(&temp)
            .map_err(|e| {
                fail(format!(
                    "its directory {} is not writable: {e}",
                    parent.display()
                ))
            })?;
        Ok(SnapshotFile {
            destination: destination.to_owned(),
            temp,
            file: Some(file),
        })
    }

    /// The destination as given.
    pub fn path(&self) -> &Path {
        &self.destination
    }

    /// Writes `bytes` to the temp file, syncs it and renames it over the destination.
    pub fn commit(mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut file = self
            .file
            .take()
            .ok_or_else(|| std::io::Error::other("the snapshot file was already written"))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.temp, &self.destination)?;
        // The rename is durable once the directory is synced; a failure here leaves the whole
        // file in place, so it is not reported.
        if let Some(parent) = self.destination.parent() {
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            if let Ok(dir) = std::fs::File::open(parent) {
                let _ = dir.sync_all();
            }
        }
        self.temp = PathBuf::new();
        Ok(())
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// The run authority's directory: `flag` (`--authority DIR`), else `$AGENT_AUTHORITY_DIR`,
/// else [`agent_authority::default_directory`]; made absolute against the current directory.
pub fn authority_directory(flag: Option<&Path>) -> Result<PathBuf, AuthorityDirectoryError> {
    let dir = match (flag, std::env::var_os(AUTHORITY_DIR_ENV)) {
        (Some(dir), _) => dir.to_owned(),
        (None, Some(dir)) if !dir.is_empty() => PathBuf::from(dir),
        _ => agent_authority::default_directory().map_err(AuthorityDirectoryError::NoDefault)?,
    };
    std::path::absolute(&dir).map_err(|e| AuthorityDirectoryError::Path {
        path: dir,
        reason: e.to_string(),
    })
}

/// Why the run authority's directory could not be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorityDirectoryError {
    /// Neither `--authority`, `$AGENT_AUTHORITY_DIR`, `$XDG_STATE_HOME` nor `$HOME` names one.
    #[error(
        "no run authority directory: give --authority DIR or set AGENT_AUTHORITY_DIR, XDG_STATE_HOME or HOME ({0})"
    )]
    NoDefault(AuthorityError),
    /// The path could not be made absolute.
    #[error("the run authority directory {}: {reason}", path.display())]
    Path {
        /// The path as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// An authority error that happened while opening the store at `directory`, with the
/// directory named and, when the directory breaks one of the store's rules, which and how
/// to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorityOpenError {
    /// The store directory.
    pub directory: PathBuf,
    /// The store's error (which names no path).
    pub error: AuthorityError,
}

impl fmt::Display for AuthorityOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match diagnose_directory(&self.directory) {
            Some(problem) => write!(f, "{problem}"),
            None => write!(
                f,
                "the run authority directory {} did not open: {}",
                self.directory.display(),
                self.error
            ),
        }
    }
}

impl std::error::Error for AuthorityOpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Decodes a snapshot file: the authority's JSON envelope, or the daemon's wire envelope
/// (what `agent export` wrote before both used one format).
pub fn decode_envelope(bytes: &[u8]) -> Result<SnapshotEnvelope, StructuralError> {
    match SnapshotEnvelope::decode(bytes) {
        Ok(envelope) => Ok(envelope),
        Err(error) => {
            use prost::Message as _;
            let Ok(wire) = agent_protocol::pb::engine::v1::SnapshotEnvelope::decode(bytes) else {
                return Err(error);
            };
            match agent_server::envelope_from_wire(&wire) {
                Some(json) => SnapshotEnvelope::decode(&json),
                None => Err(error),
            }
        }
    }
}

/// The daemon's wire envelope of a snapshot file, for `agent import`.
pub fn to_wire(envelope: &SnapshotEnvelope) -> Option<Vec<u8>> {
    use prost::Message as _;
    agent_server::envelope_to_wire(&envelope.to_json()).map(|wire| wire.encode_to_vec())
}

/// The snapshot file of the daemon's wire envelope, for `agent export`.
pub fn from_wire(bytes: &[u8]) -> Option<Vec<u8>> {
    use prost::Message as _;
    let wire = agent_protocol::pb::engine::v1::SnapshotEnvelope::decode(bytes).ok()?;
    agent_server::envelope_from_wire(&wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Temp(PathBuf);

    impl Temp {
        fn new(tag: &str) -> Temp {
            let dir =
                std::env::temp_dir().join(format!("cli-snapshot-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("temp dir");
            Temp(dir)
        }

        fn entries(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.0)
                .expect("listing")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_destination_is_written_whole_and_private() {
        let temp = Temp::new("write");
        let path = temp.0.join("run.json");
        std::fs::write(&path, b"old").expect("old file");
        let file = SnapshotFile::reserve(&path).expect("a regular file is replaced");
        assert_eq!(temp.entries().len(), 2, "the temp file is reserved");
        file.commit(b"new").expect("written");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(temp.entries(), ["run.json"], "no temp file is left");
        // A file that existed keeps its inode's mode only through the temp file: 0600.
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, SNAPSHOT_FILE_MODE);
    }

    #[test]
    fn an_abandoned_reservation_leaves_nothing() {
        let temp = Temp::new("abandon");
        let file = SnapshotFile::reserve(&temp.0.join("run.json")).expect("reserved");
        drop(file);
        assert!(temp.entries().is_empty());
    }

    #[test]
    fn unusable_destinations_are_refused_with_the_reason() {
        let temp = Temp::new("refuse");
        let reason = |path: &Path| {
            SnapshotFile::reserve(path)
                .expect_err("refused")
                .to_string()
        };
        let missing = temp.0.join("missing/run.json");
        let said = reason(&missing);
        assert!(said.contains(&missing.display().to_string()), "{said}");
        assert!(said.contains("does not exist"), "{said}");
        assert!(reason(&temp.0).contains("is a directory"));
        std::os::unix::fs::symlink(temp.0.join("elsewhere"), temp.0.join("link")).expect("symlink");
        assert!(reason(&temp.0.join("link")).contains("symbolic link"));
        std::fs::write(temp.0.join("file"), b"").expect("file");
        assert!(reason(&temp.0.join("file/run.json")).contains("is not a directory"));
    }
}
