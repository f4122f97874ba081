//! Current-user Unix sockets (docs/transport.md, "The socket"): a listener in a private directory
//! whose every ancestor is trusted, and a dial that checks the same before connecting.
//!
//! The directory chain is opened component by component with `O_NOFOLLOW`, so no symlink
//! anywhere in the path is followed, and every check reads the opened descriptor (no
//! check-then-use race on names).

use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

/// The longest socket address in bytes (the portable `sun_path` bound, with room to spare).
pub const MAX_ADDRESS_BYTES: usize = 100;
/// The longest socket base name in characters.
pub const MAX_BASE_NAME: usize = 128;
/// How long the probe of an existing socket waits for a live listener.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(100);

/// Why an endpoint could not be used. Fixed messages: no path or other fact leaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IpcError {
    /// The address is not clean, absolute, short enough, or its base name is unsafe.
    InvalidAddress,
    /// An ancestor, the parent directory or the node at the address fails a safety rule.
    Unsafe,
    /// A live listener already answers at the address.
    InUse,
    /// No socket is at the address, or nothing listens on it.
    NotFound,
    /// An operating-system call failed.
    Io,
}

impl fmt::Display for IpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IpcError::InvalidAddress => "local endpoint address is invalid",
            IpcError::Unsafe => "local endpoint is unsafe",
            IpcError::InUse => "local endpoint is in use",
            IpcError::NotFound => "local endpoint is not available",
            IpcError::Io => "local endpoint operation failed",
        })
    }
}

impl std::error::Error for IpcError {}

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Whether `name` is a safe base name: 1..=[`MAX_BASE_NAME`] characters of `[A-Za-z0-9._-]`,
/// and not `.` or `..`.
pub fn is_safe_base_name(name: &str) -> bool {
    (1..=MAX_BASE_NAME).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Checks the address rules: UTF-8, absolute, clean (no `.`/`..`/empty components, no
/// trailing slash), at most [`MAX_ADDRESS_BYTES`], with a safe base name.
///
/// ```
/// use agent_endpoint::localipc::{validate_address, IpcError};
/// use std::path::Path;
/// assert!(validate_address(Path::new("/run/user/0/spice-agent/agent.sock")).is_ok());
/// assert_eq!(validate_address(Path::new("relative.sock")), Err(IpcError::InvalidAddress));
/// assert_eq!(validate_address(Path::new("/tmp/../x.sock")), Err(IpcError::InvalidAddress));
/// ```
pub fn validate_address(address: &Path) -> Result<(), IpcError> {
    let text = address.to_str().ok_or(IpcError::InvalidAddress)?;
    if text.len() > MAX_ADDRESS_BYTES || !text.starts_with('/') || text.ends_with('/') {
        return Err(IpcError::InvalidAddress);
    }
    if text.bytes().any(|b| b.is_ascii_control())
        || text[1..]
            .split('/')
            .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return Err(IpcError::InvalidAddress);
    }
    for component in address.components() {
        match component {
            Component::RootDir | Component::Normal(_) => {}
            _ => return Err(IpcError::InvalidAddress),
        }
    }
    let base = address
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or(IpcError::InvalidAddress)?;
    if !is_safe_base_name(base) || address.parent().is_none_or(|p| p == Path::new("/")) {
        return Err(IpcError::InvalidAddress);
    }
    Ok(())
}

fn io<E>(_: E) -> IpcError {
    IpcError::Io
}

// The stat field types differ between platforms (`st_mode` is 16 bits on some), so these
// casts are identities only on Linux.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn mode_bits(stat: &Stat) -> u32 {
    stat.st_mode as u32 & 0o7777
}

#[allow(clippy::unnecessary_cast)]
fn identity(stat: &Stat) -> (u64, u64) {
    (stat.st_dev as u64, stat.st_ino as u64)
}

fn is_trusted_owner(uid: u32, euid: u32) -> bool {
    uid == 0 || uid == euid
}

/// An opened, verified directory: its descriptor and identity.
#[derive(Debug)]
pub(crate) struct SecureDir {
    pub(crate) fd: OwnedFd,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens `dir` (absolute) component by component with no-follow, checking every ancestor:
/// owned by root or `euid`; group- or other-writable only with the sticky bit, and then the
/// child must be owned by a trusted user. Returns the last directory, not yet checked for
/// privacy.
pub(crate) fn open_trusted_chain(dir: &Path, euid: u32) -> Result<(OwnedFd, Stat), IpcError> {
    let mut fd = rustix::fs::open("/", DIR_FLAGS, Mode::empty()).map_err(io)?;
    let mut stat = rustix::fs::fstat(&fd).map_err(io)?;
    if !is_trusted_owner(stat.st_uid, euid) {
        return Err(IpcError::Unsafe);
    }
    for component in dir.components() {
        let name = match component {
            Component::RootDir => continue,
            Component::Normal(name) => name,
            _ => return Err(IpcError::InvalidAddress),
        };
        let shared = mode_bits(&stat) & 0o022 != 0;
        let sticky = mode_bits(&stat) & 0o1000 != 0;
        if shared && !sticky {
            return Err(IpcError::Unsafe);
        }
        let child = match rustix::fs::openat(&fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(child) => child,
            Err(rustix::io::Errno::NOENT) => return Err(IpcError::NotFound),
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
                return Err(IpcError::Unsafe);
            }
            Err(_) => return Err(IpcError::Io),
        };
        let child_stat = rustix::fs::fstat(&child).map_err(io)?;
        if !is_trusted_owner(child_stat.st_uid, euid) {
            return Err(IpcError::Unsafe);
        }
        fd = child;
        stat = child_stat;
    }
    Ok((fd, stat))
}

/// Opens `dir` through a trusted chain and requires it to be a directory owned by `euid`
/// with mode exactly 0700.
pub(crate) fn open_private_dir(dir: &Path, euid: u32) -> Result<SecureDir, IpcError> {
    let (fd, stat) = open_trusted_chain(dir, euid)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory
        || stat.st_uid != euid
        || mode_bits(&stat) != 0o700
    {
        return Err(IpcError::Unsafe);
    }
    let (dev, ino) = identity(&stat);
    Ok(SecureDir { fd, dev, ino })
}

fn split(address: &Path) -> Result<(&Path, &str), IpcError> {
    validate_address(address)?;
    let parent = address.parent().ok_or(IpcError::InvalidAddress)?;
    let base = address
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or(IpcError::InvalidAddress)?;
    Ok((parent, base))
}

/// Whether `stat` is a private socket owned by `euid` (`S_IFSOCK`, no group or other bits).
fn is_private_socket(stat: &Stat, euid: u32) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Socket
        && stat.st_uid == euid
        && mode_bits(stat) & 0o077 == 0
}

fn node_stat(dir: &SecureDir, base: &str) -> Result<Option<Stat>, IpcError> {
    match rustix::fs::statat(&dir.fd, base, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(_) => Err(IpcError::Io),
    }
}

enum Probe {
    Live,
    Refused,
    Other,
}

/// Connects to `address` with a [`PROBE_TIMEOUT`] bound. A Unix connect can block when
/// the listener's backlog is full, so it runs on a helper thread the probe stops waiting for.
fn probe(address: &Path) -> Probe {
    let (tx, rx) = mpsc::channel();
    let path = address.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("localipc-probe".into())
        .spawn(move || {
            let result = UnixStream::connect(&path).map(drop);
            let _ = tx.send(result);
        });
    if spawned.is_err() {
        return Probe::Other;
    }
    match rx.recv_timeout(PROBE_TIMEOUT) {
        Ok(Ok(())) => Probe::Live,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::Refused,
        _ => Probe::Other,
    }
}

/// A listening socket this process bound. Closing (or dropping) unlinks the socket only
/// if the node at the address is still the one bound here (same device and inode).
#[derive(Debug)]
pub struct Listener {
    listener: Option<UnixListener>,
    address: PathBuf,
    dir: SecureDir,
    dev: u64,
    ino: u64,
}

impl Listener {
    /// The socket address.
    pub fn address(&self) -> &Path {
        &self.address
    }

    /// A non-blocking clone of the listening socket (for an async runtime's listener).
    pub fn try_clone_nonblocking(&self) -> Result<UnixListener, IpcError> {
        let listener = self.listener.as_ref().ok_or(IpcError::Io)?;
        let clone = listener.try_clone().map_err(io)?;
        clone.set_nonblocking(true).map_err(io)?;
        Ok(clone)
    }

    /// Accepts one connection (blocking; tests and simple servers).
    pub fn accept(&self) -> Result<UnixStream, IpcError> {
        let listener = self.listener.as_ref().ok_or(IpcError::Io)?;
        listener.accept().map(|(s, _)| s).map_err(io)
    }

    /// Stops listening and unlinks the socket if it is still ours.
    pub fn close(mut self) {
        self.release();
    }

    fn release(&mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        drop(listener);
        let Some(base) = self.address.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if let Ok(Some(stat)) = node_stat(&self.dir, base)
            && identity(&stat) == (self.dev, self.ino)
        {
            let _ = rustix::fs::unlinkat(&self.dir.fd, base, AtFlags::empty());
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.release();
    }
}

/// Binds a private listening socket at `address` (docs/transport.md, "The socket").
///
/// The parent must be a directory owned by the effective user with mode exactly 0700,
/// reached through trusted ancestors. An existing private socket of ours is probed: a live
/// listener is [`IpcError::InUse`]; a refused connection marks it stale and it is removed
/// after its identity is re-checked; anything else is [`IpcError::Unsafe`]. After binding
/// the directory identity is re-verified and the socket is made 0600 and re-validated.
pub fn listen(address: &Path) -> Result<Listener, IpcError> {
    listen_as(address, effective_uid())
}

fn listen_as(address: &Path, euid: u32) -> Result<Listener, IpcError> {
    let (parent, base) = split(address)?;
    let dir = open_private_dir(parent, euid)?;
    if let Some(existing) = node_stat(&dir, base)? {
        if !is_private_socket(&existing, euid) {
            return Err(IpcError::Unsafe);
        }
        match probe(address) {
            Probe::Live => return Err(IpcError::InUse),
            Probe::Refused => {
                let again = node_stat(&dir, base)?.ok_or(IpcError::Unsafe)?;
                if identity(&again) != identity(&existing) {
                    return Err(IpcError::Unsafe);
                }
                rustix::fs::unlinkat(&dir.fd, base, AtFlags::empty()).map_err(io)?;
            }
            Probe::Other => return Err(IpcError::Unsafe),
        }
    }
    let listener = UnixListener::bind(address).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => IpcError::InUse,
        _ => IpcError::Io,
    })?;
    let bound = match verify_bound(&dir, parent, base, euid) {
        Ok(stat) => stat,
        Err(error) => {
            // Do not leave a socket we cannot vouch for; unlink only what we just bound.
            drop(listener);
            return Err(error);
        }
    };
    let (dev, ino) = identity(&bound);
    Ok(Listener {
        listener: Some(listener),
        address: address.to_path_buf(),
        dev,
        ino,
        dir,
    })
}

fn verify_bound(dir: &SecureDir, parent: &Path, base: &str, euid: u32) -> Result<Stat, IpcError> {
    let again = open_private_dir(parent, euid)?;
    if again.dev != dir.dev || again.ino != dir.ino {
        return Err(IpcError::Unsafe);
    }
    rustix::fs::chmodat(&dir.fd, base, Mode::from_raw_mode(0o600), AtFlags::empty()).map_err(io)?;
    let stat = node_stat(dir, base)?.ok_or(IpcError::Unsafe)?;
    if !is_private_socket(&stat, euid) {
        return Err(IpcError::Unsafe);
    }
    Ok(stat)
}

/// Checks that `address` names a private socket of ours in a private directory reached
/// through trusted ancestors, without connecting.
pub fn validate_endpoint(address: &Path) -> Result<(), IpcError> {
    let euid = effective_uid();
    let (parent, base) = split(address)?;
    let dir = open_private_dir(parent, euid)?;
    let stat = node_stat(&dir, base)?.ok_or(IpcError::NotFound)?;
    if !is_private_socket(&stat, euid) {
        return Err(IpcError::Unsafe);
    }
    Ok(())
}

/// Validates the endpoint ([`validate_endpoint`]), then connects.
pub fn dial(address: &Path) -> Result<UnixStream, IpcError> {
    validate_endpoint(address)?;
    UnixStream::connect(address).map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => IpcError::NotFound,
        _ => IpcError::Io,
    })
}
