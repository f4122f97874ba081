//! The bound store directory: opened once through trusted ancestors, then every file
//! operation is relative to its descriptor (`openat`, `fstatat`, `renameat`, `unlinkat`),
//! so replacing a path component after binding has no effect.

use std::ffi::OsStr;
use std::fs::{File, TryLockError};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::error::{AuthorityError, Reason};
use crate::keys::{hex_encode, random};

/// Mode of the store directory.
pub const DIRECTORY_MODE: u32 = 0o700;
/// Mode of every file in the store.
pub const FILE_MODE: u32 = 0o600;

static FSYNCS: AtomicU64 = AtomicU64::new(0);

/// How many `fsync` calls the authority made in this process (files and directories);
/// the benchmark reports it beside the import transaction.
pub fn fsync_count() -> u64 {
    FSYNCS.load(Ordering::Relaxed)
}

fn fsync(fd: impl AsFd) -> std::io::Result<()> {
    FSYNCS.fetch_add(1, Ordering::Relaxed);
    rustix::fs::fsync(fd).map_err(std::io::Error::from)
}

/// Where an atomic write stands when it calls its observer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteStage {
    /// The temp file is written and synced; the destination is unchanged.
    TempSynced,
    /// The rename happened; the directory is not synced yet.
    Renamed,
}

fn untrusted() -> AuthorityError {
    AuthorityError::new(Reason::Untrusted)
}

fn io_error(errno: Errno) -> AuthorityError {
    match errno {
        // A symlink where a directory or file was expected (O_NOFOLLOW).
        Errno::LOOP | Errno::NOTDIR => untrusted(),
        other => AuthorityError::io(&std::io::Error::from(other)),
    }
}

/// The permission bits; `st_mode` is `u32` on Linux but narrower elsewhere.
#[allow(clippy::unnecessary_cast)]
fn mode_bits(stat: &Stat) -> u32 {
    (stat.st_mode as u32) & 0o7777
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// An ancestor is trusted when root or we own it and, if others may write it, it is
/// sticky (so they cannot rename our entries away).
fn trusted_ancestor(stat: &Stat, uid: u32) -> bool {
    let mode = mode_bits(stat);
    FileType::from_raw_mode(stat.st_mode) == FileType::Directory
        && (stat.st_uid == 0 || stat.st_uid == uid)
        && (mode & 0o022 == 0 || mode & 0o1000 != 0)
}

/// Regular, ours, exactly one link, mode 0600.
pub(crate) fn trusted_file(stat: &Stat, uid: u32) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
        && stat.st_uid == uid
        && stat.st_nlink == 1
        && mode_bits(stat) == FILE_MODE
}

/// The store directory, bound once.
#[derive(Debug)]
pub(crate) struct BoundDir {
    fd: OwnedFd,
    uid: u32,
}

fn open_dir(parent: impl AsFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

impl BoundDir {
    /// Opens (creating 0700 where missing) every component of the absolute `path` without
    /// following symlinks, checking each ancestor's trust and the leaf's owner and mode.
    pub(crate) fn bind(path: &Path) -> Result<BoundDir, AuthorityError> {
        if !path.is_absolute() {
            return Err(AuthorityError::new(Reason::Configuration));
        }
        let uid = euid();
        let mut names = Vec::new();
        for component in path.components() {
            match component {
                Component::RootDir => {}
                Component::Normal(name) => names.push(name),
                _ => return Err(AuthorityError::new(Reason::Configuration)),
            }
        }
        let Some(leaf) = names.pop() else {
            return Err(AuthorityError::new(Reason::Configuration));
        };
        let mut current = open_dir(rustix::fs::CWD, OsStr::new("/")).map_err(io_error)?;
        let check_ancestor = |fd: &OwnedFd| -> Result<(), AuthorityError> {
            let stat = rustix::fs::fstat(fd).map_err(io_error)?;
            if trusted_ancestor(&stat, uid) {
                Ok(())
            } else {
                Err(untrusted())
            }
        };
        check_ancestor(&current)?;
        for name in names {
            let next = Self::open_or_create(&current, name)?;
            check_ancestor(&next)?;
            current = next;
        }
        let fd = Self::open_or_create(&current, leaf)?;
        let stat = rustix::fs::fstat(&fd).map_err(io_error)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory
            || stat.st_uid != uid
            || mode_bits(&stat) != DIRECTORY_MODE
        {
            return Err(untrusted());
        }
        Ok(BoundDir { fd, uid })
    }

    fn open_or_create(parent: &OwnedFd, name: &OsStr) -> Result<OwnedFd, AuthorityError> {
        match open_dir(parent, name) {
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(DIRECTORY_MODE)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(errno) => return Err(io_error(errno)),
                }
                let fd = open_dir(parent, name).map_err(io_error)?;
                // The umask may have narrowed the mode further; widen it back to exactly
                // 0700 on the directory we just made (it is ours).
                let stat = rustix::fs::fstat(&fd).map_err(io_error)?;
                if stat.st_uid == euid() && mode_bits(&stat) != DIRECTORY_MODE {
                    rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIRECTORY_MODE))
                        .map_err(io_error)?;
                }
                fsync(parent).map_err(|e| AuthorityError::io(&e))?;
                Ok(fd)
            }
            other => other.map_err(io_error),
        }
    }

    /// The bound directory's device and inode: what it is, whatever path reached it.
    pub(crate) fn device_and_inode(&self) -> Result<(u64, u64), AuthorityError> {
        let stat = rustix::fs::fstat(&self.fd).map_err(io_error)?;
        Ok((stat.st_dev, stat.st_ino))
    }

    fn check(&self, fd: &OwnedFd) -> Result<(), AuthorityError> {
        let stat = rustix::fs::fstat(fd).map_err(io_error)?;
        if trusted_file(&stat, self.uid) {
            Ok(())
        } else {
            Err(untrusted())
        }
    }

    /// Opens `name` for reading; `None` when it does not exist. More than `max` bytes is
    /// `too_large`.
    pub(crate) fn read(
        &self,
        name: &str,
        max: usize,
        too_large: Reason,
    ) -> Result<Option<Vec<u8>>, AuthorityError> {
        let fd = match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(errno) => return Err(io_error(errno)),
        };
        self.check(&fd)?;
        let mut bytes = Vec::new();
        File::from(fd)
            .take(max as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| AuthorityError::io(&e))?;
        if bytes.len() > max {
            return Err(AuthorityError::new(too_large));
        }
        Ok(Some(bytes))
    }

    /// Whether `name` exists (as anything, symlinks not followed).
    pub(crate) fn exists(&self, name: &str) -> Result<bool, AuthorityError> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(errno) => Err(io_error(errno)),
        }
    }

    /// Opens (creating 0600 when absent) a stable lock file; never replaced, never removed.
    ///
    /// A new lock file is not made durable here: no lock survives a crash, so nothing
    /// depends on the file's directory entry surviving one (a lost entry is recreated by
    /// the next open), and every record written under the lock syncs the directory
    /// before the record counts, which persists the lock file's entry with it.
    pub(crate) fn open_lock(&self, name: &str) -> Result<File, AuthorityError> {
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (fd, created) = match rustix::fs::openat(
            &self.fd,
            name,
            flags | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(FILE_MODE),
        ) {
            Ok(fd) => (fd, true),
            Err(Errno::EXIST) => (
                rustix::fs::openat(&self.fd, name, flags, Mode::empty()).map_err(io_error)?,
                false,
            ),
            Err(errno) => return Err(io_error(errno)),
        };
        let mut stat = rustix::fs::fstat(&fd).map_err(io_error)?;
        // The umask may have narrowed the mode of the file we just made (it is ours):
        // widen it back to exactly 0600. An existing file is only checked.
        if created && mode_bits(&stat) != FILE_MODE {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(FILE_MODE)).map_err(io_error)?;
            stat = rustix::fs::fstat(&fd).map_err(io_error)?;
        }
        if !trusted_file(&stat, self.uid) {
            return Err(untrusted());
        }
        Ok(File::from(fd))
    }

    /// Replaces `name` with `bytes` atomically and durably: check the destination, create
    /// `.<name>.<24 hex>.tmp` exclusively 0600, write, fsync, rename, fsync the directory.
    /// The temp file is always removed on failure. `observe` runs at each [`WriteStage`];
    /// an error from it fails the write there.
    pub(crate) fn write_atomic(
        &self,
        name: &str,
        bytes: &[u8],
        observe: &mut dyn FnMut(WriteStage) -> Result<(), AuthorityError>,
    ) -> Result<(), AuthorityError> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if !trusted_file(&stat, self.uid) => return Err(untrusted()),
            Ok(_) | Err(Errno::NOENT) => {}
            Err(errno) => return Err(io_error(errno)),
        }
        self.write_absent(name, bytes, observe)
    }

    /// [`write_atomic`](Self::write_atomic) without its first step, for a destination the
    /// caller has just seen absent ([`exists`](Self::exists)) while holding the lock every
    /// writer of `name` holds: there is no existing destination to validate.
    pub(crate) fn write_absent(
        &self,
        name: &str,
        bytes: &[u8],
        observe: &mut dyn FnMut(WriteStage) -> Result<(), AuthorityError>,
    ) -> Result<(), AuthorityError> {
        let suffix: [u8; 12] = random().map_err(|_| AuthorityError::new(Reason::Randomness))?;
        let temp = format!(".{name}.{}.tmp", hex_encode(&suffix));
        let fd = rustix::fs::openat(
            &self.fd,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(FILE_MODE),
        )
        .map_err(io_error)?;
        let result = (|| {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(FILE_MODE)).map_err(io_error)?;
            let mut file = File::from(fd);
            file.write_all(bytes).map_err(|e| AuthorityError::io(&e))?;
            fsync(&file).map_err(|e| AuthorityError::io(&e))?;
            drop(file);
            observe(WriteStage::TempSynced)?;
            rustix::fs::renameat(&self.fd, temp.as_str(), &self.fd, name).map_err(io_error)?;
            observe(WriteStage::Renamed)?;
            fsync(&self.fd).map_err(|e| AuthorityError::io(&e))
        })();
        if result.is_err() {
            // After a successful rename the temp name is gone; this is then a no-op.
            let _ = rustix::fs::unlinkat(&self.fd, temp.as_str(), AtFlags::empty());
        }
        result
    }
}

/// An exclusive `flock` on a lock file from [`BoundDir::open_lock`]; dropping it unlocks
/// the file explicitly, then closes it.
///
/// Why not just close: a `flock` belongs to the open file description, and every
/// descriptor duplicated from it shares it. When another thread of this process spawns a
/// child, the child holds copies of all our descriptors from `fork` until `exec` closes the
/// `O_CLOEXEC` ones; closing ours in that window would leave the lock held by the
/// not-yet-exec'd child, and this process's next take of the same run would fail as busy.
/// `LOCK_UN` releases the lock on the description itself, whoever else refers to it.
#[derive(Debug)]
pub(crate) struct HeldLock {
    file: File,
}

impl HeldLock {
    /// Takes the lock without waiting: `Err(WouldBlock)` when another description holds it.
    pub(crate) fn try_take(file: File) -> Result<HeldLock, TryLockError> {
        file.try_lock()?;
        Ok(HeldLock { file })
    }

    /// Takes the lock, waiting while another description holds it.
    pub(crate) fn take(file: File) -> std::io::Result<HeldLock> {
        file.lock()?;
        Ok(HeldLock { file })
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        // A failed unlock leaves the close below as the release, as before.
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::DirBuilderExt;

    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "agent-authority-unit-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap();
        path
    }

    #[test]
    fn reads_hold_their_bound_at_and_past_it() {
        let base = temp("read-bound");
        let dir = BoundDir::bind(&base.join("store")).unwrap();
        dir.write_atomic("at", &[b'x'; 64], &mut |_| Ok(()))
            .unwrap();
        dir.write_atomic("past", &[b'x'; 65], &mut |_| Ok(()))
            .unwrap();
        assert_eq!(
            dir.read("at", 64, Reason::RecordInvalid)
                .unwrap()
                .unwrap()
                .len(),
            64
        );
        assert_eq!(
            dir.read("past", 64, Reason::RecordInvalid)
                .unwrap_err()
                .reason(),
            Reason::RecordInvalid
        );
        assert_eq!(dir.read("absent", 64, Reason::RecordInvalid).unwrap(), None);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_failed_write_leaves_the_destination_and_no_temp_file() {
        let base = temp("write-fail");
        let dir = BoundDir::bind(&base.join("store")).unwrap();
        dir.write_atomic("file", b"old", &mut |_| Ok(())).unwrap();
        let before = fsync_count();
        let error = dir
            .write_atomic("file", b"new", &mut |stage| match stage {
                WriteStage::TempSynced => Err(AuthorityError::new(Reason::Io)),
                WriteStage::Renamed => Ok(()),
            })
            .unwrap_err();
        assert_eq!(error.reason(), Reason::Io);
        assert!(
            fsync_count() > before,
            "the temp file was synced before the failure"
        );
        assert_eq!(std::fs::read(base.join("store/file")).unwrap(), b"old");
        let names: Vec<_> = std::fs::read_dir(base.join("store"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["file"]);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_dropped_lock_is_free_while_a_duplicate_descriptor_survives() {
        let base = temp("lock-dup");
        let dir = BoundDir::bind(&base.join("store")).unwrap();
        let held = HeldLock::try_take(dir.open_lock("run.lock").unwrap()).unwrap();
        // What a child forked by another thread holds until its exec.
        let duplicate = held.file.try_clone().unwrap();
        assert!(matches!(
            HeldLock::try_take(dir.open_lock("run.lock").unwrap()),
            Err(TryLockError::WouldBlock)
        ));
        drop(held);
        let again = HeldLock::try_take(dir.open_lock("run.lock").unwrap());
        assert!(again.is_ok(), "the duplicate kept the lock: {again:?}");
        drop(duplicate);
        let _ = std::fs::remove_dir_all(&base);
    }
}
