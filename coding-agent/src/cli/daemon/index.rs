//! The CLI's run index: which client id and ownership epoch own each daemon run this user
//! started or imported through the CLI, so a later `agent attach RUN` (another process)
//! can reconnect as the run's owner. The daemon shows an unknown run and another client's
//! run the same way, so without this record no other process could reach the run.
//!
//! The index is `cli-runs.json` (mode 0600) in the endpoint scope directory (0700, the
//! user's own), guarded by `cli-runs.lock`. Every initialize or reconnect rewrites the
//! client's epoch. A client's `cli-client-<id>.lock` is held by the process that streams
//! its run, so `agent runs` never reconnects (and so fences) a client another process is
//! attached to.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The index file's name in the scope directory.
pub const INDEX_FILE: &str = "cli-runs.json";
/// The lock that serializes every read-modify-write of the index.
pub const INDEX_LOCK: &str = "cli-runs.lock";
/// How long a command waits for the index lock.
pub const INDEX_LOCK_TIMEOUT: Duration = Duration::from_secs(10);
/// The most runs the index keeps; the oldest are forgotten first.
pub const MAX_INDEXED_RUNS: usize = 1024;
/// The largest index file read, in bytes.
pub const MAX_INDEX_BYTES: u64 = 4 << 20;
/// How often a held lock is polled for.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// One indexed run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEntry {
    /// The owning client id.
    pub client: String,
    /// The definition the run was started from (`import` for an imported run).
    pub definition: String,
    /// When the CLI recorded it (Unix seconds), for ordering.
    pub recorded: u64,
    /// The last state the CLI observed (`running`, `suspended`, `completed`, ...).
    pub state: String,
    /// The subcommand that last reconnected as the run's owner (`attach`, `suspend`, ...),
    /// so the process it fenced can say what happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_over_by: Option<String>,
}

/// The index's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// Run id -> entry.
    pub runs: BTreeMap<String, RunEntry>,
    /// Client id -> its latest ownership epoch.
    pub clients: BTreeMap<String, u64>,
}

/// Why the index could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The lock was not acquired in time.
    #[error("the CLI's run index is busy")]
    Busy,
    /// The file is not a valid index.
    #[error("the CLI's run index is malformed")]
    Malformed,
    /// An operating-system call failed.
    #[error("the CLI's run index: {0}")]
    Io(#[from] std::io::Error),
}

fn open_lock(path: &Path) -> Result<File, IndexError> {
    Ok(OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc_nofollow())
        .open(path)?)
}

/// `O_NOFOLLOW`: a planted symlink is never followed.
fn libc_nofollow() -> i32 {
    // The value std uses on Linux and the BSDs is platform-specific; rustix knows it.
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The index of one scope directory.
#[derive(Debug, Clone)]
pub struct RunIndex {
    dir: PathBuf,
}

impl RunIndex {
    /// The index in `scope_dir`.
    pub fn new(scope_dir: &Path) -> RunIndex {
        RunIndex {
            dir: scope_dir.to_path_buf(),
        }
    }

    fn lock(&self) -> Result<File, IndexError> {
        let file = open_lock(&self.dir.join(INDEX_LOCK))?;
        let deadline = Instant::now() + INDEX_LOCK_TIMEOUT;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(LOCK_POLL);
                }
                Err(TryLockError::WouldBlock) => return Err(IndexError::Busy),
                Err(TryLockError::Error(e)) => return Err(e.into()),
            }
        }
    }

    fn read_unlocked(&self) -> Result<Index, IndexError> {
        let path = self.dir.join(INDEX_FILE);
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc_nofollow())
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Index::default()),
            Err(e) => return Err(e.into()),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_INDEX_BYTES), &mut bytes)?;
        serde_json::from_slice(&bytes).map_err(|_| IndexError::Malformed)
    }

    fn write_unlocked(&self, index: &Index) -> Result<(), IndexError> {
        let bytes = serde_json::to_vec_pretty(index).map_err(|_| IndexError::Malformed)?;
        let temp = self
            .dir
            .join(format!(".{INDEX_FILE}.{}", std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(libc_nofollow())
                .open(&temp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, self.dir.join(INDEX_FILE))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        Ok(written?)
    }

    /// A copy of the index.
    pub fn read(&self) -> Result<Index, IndexError> {
        let _lock = self.lock()?;
        self.read_unlocked()
    }

    /// Applies `change` under the lock and writes the result.
    pub fn update<T>(&self, change: impl FnOnce(&mut Index) -> T) -> Result<T, IndexError> {
        let _lock = self.lock()?;
        let mut index = self.read_unlocked()?;
        let out = change(&mut index);
        while index.runs.len() > MAX_INDEXED_RUNS {
            let oldest = index
                .runs
                .iter()
                .min_by_key(|(_, e)| e.recorded)
                .map(|(run, _)| run.clone());
            if let Some(run) = oldest {
                index.runs.remove(&run);
            }
        }
        let used: std::collections::BTreeSet<String> =
            index.runs.values().map(|e| e.client.clone()).collect();
        index.clients.retain(|client, _| used.contains(client));
        self.write_unlocked(&index)?;
        Ok(out)
    }

    /// Tries to take `client`'s attachment lock without waiting; `None` when another
    /// process holds it.
    pub fn try_attach(&self, client: &str) -> Result<Option<File>, IndexError> {
        let file = open_lock(&self.dir.join(client_lock_name(client)))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e.into()),
        }
    }

    /// Takes `client`'s attachment lock, waiting at most `timeout` (a fenced process
    /// releases it when it exits).
    pub fn attach(&self, client: &str, timeout: Duration) -> Result<Option<File>, IndexError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(file) = self.try_attach(client)? {
                return Ok(Some(file));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(LOCK_POLL);
        }
    }
}

/// The attachment lock's file name: the client id with every byte outside `[A-Za-z0-9_-]`
/// replaced, so no id can name a path.
fn client_lock_name(client: &str) -> String {
    let safe: String = client
        .chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("cli-client-{safe}.lock")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ca-index-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entry(client: &str, recorded: u64) -> RunEntry {
        RunEntry {
            client: client.into(),
            definition: "d".into(),
            recorded,
            state: "running".into(),
            taken_over_by: None,
        }
    }

    #[test]
    fn updates_persist_privately_and_forget_unused_clients() {
        let dir = temp("persist");
        let index = RunIndex::new(&dir);
        index
            .update(|i| {
                i.runs.insert("run-1".into(), entry("c1", 1));
                i.clients.insert("c1".into(), 1);
                i.clients.insert("c2".into(), 4);
            })
            .unwrap();
        let read = index.read().unwrap();
        assert_eq!(read.clients.get("c1"), Some(&1));
        assert_eq!(
            read.clients.get("c2"),
            None,
            "a client with no run is dropped"
        );
        let mode = std::fs::metadata(dir.join(INDEX_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_index_keeps_at_most_the_bound_and_drops_the_oldest() {
        let dir = temp("bound");
        let index = RunIndex::new(&dir);
        index
            .update(|i| {
                for n in 0..=MAX_INDEXED_RUNS as u64 {
                    i.runs.insert(format!("run-{n}"), entry("c", n));
                }
            })
            .unwrap();
        let read = index.read().unwrap();
        assert_eq!(read.runs.len(), MAX_INDEXED_RUNS);
        assert!(!read.runs.contains_key("run-0"), "the oldest went first");
        assert!(read.runs.contains_key(&format!("run-{MAX_INDEXED_RUNS}")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_malformed_index_is_an_error_not_an_empty_one() {
        let dir = temp("malformed");
        std::fs::write(dir.join(INDEX_FILE), b"{not json").unwrap();
        assert!(matches!(
            RunIndex::new(&dir).read(),
            Err(IndexError::Malformed)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_attachment_lock_is_exclusive_and_its_name_is_safe() {
        let dir = temp("attach");
        let index = RunIndex::new(&dir);
        let held = index.try_attach("../evil/id").unwrap().expect("free");
        assert!(index.try_attach("../evil/id").unwrap().is_none());
        assert_eq!(client_lock_name("../evil/id"), "cli-client-___evil_id.lock");
        drop(held);
        assert!(index.try_attach("../evil/id").unwrap().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
