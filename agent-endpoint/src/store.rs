//! The endpoint store (docs/transport.md, "The scope and the endpoint files"): the metadata file and the three locks in the
//! scope directory.
//!
//! - `endpoint.json`: the [`Metadata`] record;
//! - `endpoint.lock`: serializes every read and write of the record;
//! - `daemon.lock`: held by the publishing daemon for its whole life (liveness);
//! - `startup.lock`: serializes attach-or-start.
//!
//! Every lock is a non-blocking `flock` retried at [`Store::poll_interval`] until the
//! caller's deadline. A lock is released with `LOCK_UN` before its descriptor closes, since
//! a forked child that inherited the descriptor would otherwise keep it held.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::localipc::{self, effective_uid};
use crate::metadata::{MAX_METADATA_BYTES, Metadata, MetadataError};

/// The metadata file.
pub const METADATA_FILE: &str = "endpoint.json";
/// The metadata coordination lock.
pub const METADATA_LOCK: &str = "endpoint.lock";
/// The daemon liveness lock.
pub const DAEMON_LOCK: &str = "daemon.lock";
/// The attach-or-start lock.
pub const STARTUP_LOCK: &str = "startup.lock";
/// The default lock poll interval.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Why a store operation failed. Fixed messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// No live daemon is published.
    NotFound,
    /// Another daemon holds the liveness lock.
    Active,
    /// A lock was not acquired before the deadline.
    Timeout,
    /// The record on disk is malformed or for another platform.
    Metadata(MetadataError),
    /// The directory is unsafe.
    Unsafe,
    /// The store was closed.
    Closed,
    /// An operating-system call failed.
    Io,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::NotFound => f.write_str("no local daemon is published"),
            StoreError::Active => f.write_str("a local daemon is already active"),
            StoreError::Timeout => f.write_str("endpoint lock was not acquired in time"),
            StoreError::Metadata(e) => fmt::Display::fmt(e, f),
            StoreError::Unsafe => f.write_str("endpoint directory is unsafe"),
            StoreError::Closed => f.write_str("endpoint store is closed"),
            StoreError::Io => f.write_str("endpoint store operation failed"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<MetadataError> for StoreError {
    fn from(e: MetadataError) -> Self {
        StoreError::Metadata(e)
    }
}

fn io<E>(_: E) -> StoreError {
    StoreError::Io
}

/// A held `flock`; released with `LOCK_UN` before the close.
#[derive(Debug)]
struct HeldLock {
    file: File,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// The endpoint store over one scope directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    poll: Duration,
    closed: Arc<AtomicBool>,
}

impl Store {
    /// A store over `dir`, which must be a private (0700, ours) directory reached through
    /// trusted ancestors.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        localipc::open_private_dir(dir, effective_uid()).map_err(|_| StoreError::Unsafe)?;
        Ok(Store {
            dir: dir.to_path_buf(),
            poll: DEFAULT_POLL_INTERVAL,
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The same store with another lock poll interval.
    pub fn with_poll_interval(mut self, poll: Duration) -> Store {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The lock poll interval.
    pub fn poll_interval(&self) -> Duration {
        self.poll
    }

    /// Rejects new operations. Held publications and leases stay valid until released.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    fn lock_file(&self, name: &str) -> Result<File, StoreError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.dir.join(name))
            .map_err(io)
    }

    fn try_lock(&self, name: &str) -> Result<Option<HeldLock>, StoreError> {
        let file = self.lock_file(name)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(HeldLock { file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(_)) => Err(StoreError::Io),
        }
    }

    fn lock_until(&self, name: &str, deadline: Instant) -> Result<HeldLock, StoreError> {
        loop {
            if let Some(lock) = self.try_lock(name)? {
                return Ok(lock);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::Timeout);
            }
            std::thread::sleep(self.poll.min(deadline - now));
        }
    }

    fn read_record(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.dir.join(METADATA_FILE));
        let file = match file {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Err(StoreError::Io),
        };
        let mut bytes = Vec::new();
        file.take(MAX_METADATA_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        Ok(Some(bytes))
    }

    fn remove_if(&self, expected: &[u8]) -> Result<(), StoreError> {
        if self.read_record()?.as_deref() == Some(expected) {
            std::fs::remove_file(self.dir.join(METADATA_FILE)).map_err(io)?;
        }
        Ok(())
    }

    /// Finds the live daemon: its metadata if the liveness lock is held, else
    /// [`StoreError::NotFound`] after removing the stale record (only if it is byte-identical
    /// to what was read).
    pub fn discover(&self, deadline: Instant) -> Result<Metadata, StoreError> {
        self.check_open()?;
        let _meta = self.lock_until(METADATA_LOCK, deadline)?;
        let bytes = self.read_record()?.ok_or(StoreError::NotFound)?;
        let metadata = Metadata::decode(&bytes)?;
        metadata.validate_for_platform()?;
        match self.try_lock(DAEMON_LOCK)? {
            None => Ok(metadata),
            Some(liveness) => {
                self.remove_if(&bytes)?;
                drop(liveness);
                Err(StoreError::NotFound)
            }
        }
    }

    /// Publishes `metadata` and holds liveness in the returned [`Publication`]. A malformed
    /// existing record is a hard error; a stale canonical one is replaced; a held liveness
    /// lock is [`StoreError::Active`].
    pub fn publish(
        &self,
        metadata: &Metadata,
        deadline: Instant,
    ) -> Result<Publication, StoreError> {
        self.check_open()?;
        metadata.validate_for_platform()?;
        let bytes = metadata.encode()?;
        let _meta = self.lock_until(METADATA_LOCK, deadline)?;
        if let Some(existing) = self.read_record()? {
            Metadata::decode(&existing)?;
        }
        let liveness = self.try_lock(DAEMON_LOCK)?.ok_or(StoreError::Active)?;
        self.write_atomically(&bytes)?;
        Ok(Publication {
            store: self.clone(),
            bytes,
            liveness: Some(liveness),
        })
    }

    fn write_atomically(&self, bytes: &[u8]) -> Result<(), StoreError> {
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(io)?;
        let temp = self.dir.join(format!(
            ".{METADATA_FILE}.{}",
            crate::base64url::encode(&suffix)
        ));
        let result = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&temp, self.dir.join(METADATA_FILE))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result.map_err(io)
    }

    /// Takes the attach-or-start lock.
    pub fn acquire_startup(&self, deadline: Instant) -> Result<StartupLease, StoreError> {
        self.check_open()?;
        Ok(StartupLease {
            lock: Some(self.lock_until(STARTUP_LOCK, deadline)?),
        })
    }
}

/// A published record and the held liveness lock.
#[derive(Debug)]
pub struct Publication {
    store: Store,
    bytes: Vec<u8>,
    liveness: Option<HeldLock>,
}

impl Publication {
    /// Withdraws the record (only if it is still byte-identical to ours) and releases
    /// liveness. A [`StoreError::Timeout`] on the metadata lock leaves the publication
    /// active, so the caller may retry.
    pub fn close(&mut self, deadline: Instant) -> Result<(), StoreError> {
        if self.liveness.is_none() {
            return Ok(());
        }
        let _meta = self.store.lock_until(METADATA_LOCK, deadline)?;
        let removed = self.store.remove_if(&self.bytes);
        self.liveness = None;
        removed
    }

    /// Whether the publication still holds liveness.
    pub fn is_active(&self) -> bool {
        self.liveness.is_some()
    }
}

/// The held attach-or-start lock.
#[derive(Debug)]
pub struct StartupLease {
    lock: Option<HeldLock>,
}

impl StartupLease {
    /// Releases the lock; idempotent.
    pub fn release(&mut self) {
        self.lock = None;
    }
}
