//! The per-user scope (docs/transport.md, "The scope and the endpoint files"): the directory, the transport and the socket
//! address, which are inseparable.

use std::fmt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode};

use crate::localipc::{self, IpcError, MAX_ADDRESS_BYTES, effective_uid};

/// The scope directory's name under `XDG_RUNTIME_DIR`.
pub const XDG_SCOPE_DIR: &str = "spice-agent";
/// The socket's base name inside the scope directory.
pub const SOCKET_NAME: &str = "agent.sock";
/// The sticky temp directory of the fallback.
pub const TEMP_ROOT: &str = "/tmp";
/// The fallback scope directory's prefix; the effective uid follows it.
pub const TEMP_SCOPE_PREFIX: &str = "spice-agent-";

/// Why no scope could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeError {
    /// Neither the runtime directory nor the temp fallback is safe.
    Unsafe,
    /// Creating or opening the scope directory failed.
    Io,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScopeError::Unsafe => "user endpoint scope is unsafe",
            ScopeError::Io => "user endpoint scope could not be prepared",
        })
    }
}

impl std::error::Error for ScopeError {}

/// The Unix transport name, as it appears in endpoint metadata.
pub const UNIX_TRANSPORT: &str = "unix-socket";

/// A current-user endpoint scope: a private 0700 directory and the socket address in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserScope {
    dir: PathBuf,
    address: PathBuf,
}

impl UserScope {
    /// The scope of the current user: `$XDG_RUNTIME_DIR/spice-agent` when that runtime
    /// directory is safe and the socket path fits, else `/tmp/spice-agent-<euid>`. The
    /// directory is created mode 0700 (or must already be so).
    pub fn current() -> Result<UserScope, ScopeError> {
        let xdg = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
        UserScope::resolve(xdg.as_deref(), Path::new(TEMP_ROOT))
    }

    /// [`UserScope::current`] with the runtime directory and the temp root given, so
    /// tests use temporary directories.
    pub fn resolve(
        xdg_runtime_dir: Option<&Path>,
        temp_root: &Path,
    ) -> Result<UserScope, ScopeError> {
        let euid = effective_uid();
        if let Some(xdg) = xdg_runtime_dir
            && let Some(scope) = xdg_scope(xdg, euid)
        {
            return scope.prepare(euid);
        }
        temp_scope(temp_root, euid)?.prepare(euid)
    }

    /// A scope at exactly `dir` (created 0700 if missing; its parent must be trusted).
    /// For isolated tests and acceptance runs; production uses [`UserScope::current`].
    pub fn at(dir: &Path) -> Result<UserScope, ScopeError> {
        let address = dir.join(SOCKET_NAME);
        localipc::validate_address(&address).map_err(|_| ScopeError::Unsafe)?;
        UserScope {
            dir: dir.to_path_buf(),
            address,
        }
        .prepare(effective_uid())
    }

    /// The scope directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The socket address.
    pub fn address(&self) -> &Path {
        &self.address
    }

    /// The transport name for endpoint metadata.
    pub fn transport(&self) -> &'static str {
        UNIX_TRANSPORT
    }

    fn prepare(self, euid: u32) -> Result<UserScope, ScopeError> {
        let parent = self.dir.parent().ok_or(ScopeError::Unsafe)?;
        let name = self.dir.file_name().ok_or(ScopeError::Unsafe)?;
        let (parent_fd, _) = localipc::open_trusted_chain(parent, euid).map_err(|e| match e {
            IpcError::Io => ScopeError::Io,
            _ => ScopeError::Unsafe,
        })?;
        match rustix::fs::mkdirat(&parent_fd, name, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return Err(ScopeError::Io),
        }
        localipc::open_private_dir(&self.dir, euid).map_err(|_| ScopeError::Unsafe)?;
        Ok(self)
    }
}

fn xdg_scope(xdg: &Path, euid: u32) -> Option<UserScope> {
    if !xdg.is_absolute() || xdg.to_str().is_none() {
        return None;
    }
    // Canonical: the path names itself (no symlink, no `..`, no trailing slash).
    if std::fs::canonicalize(xdg).ok()?.as_path() != xdg {
        return None;
    }
    let dir = xdg.join(XDG_SCOPE_DIR);
    let address = dir.join(SOCKET_NAME);
    if address.as_os_str().len() > MAX_ADDRESS_BYTES
        || localipc::validate_address(&address).is_err()
    {
        return None;
    }
    localipc::open_private_dir(xdg, euid).ok()?;
    Some(UserScope { dir, address })
}

fn temp_scope(temp_root: &Path, euid: u32) -> Result<UserScope, ScopeError> {
    let (fd, stat) =
        localipc::open_trusted_chain(temp_root, euid).map_err(|_| ScopeError::Unsafe)?;
    let mode = localipc::mode_bits(&stat);
    let writable = rustix::fs::accessat(
        &fd,
        ".",
        rustix::fs::Access::WRITE_OK,
        rustix::fs::AtFlags::empty(),
    )
    .is_ok();
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory
        || mode & 0o1000 == 0
        || !(stat.st_uid == 0 || stat.st_uid == euid)
        || !writable
    {
        return Err(ScopeError::Unsafe);
    }
    let dir = temp_root.join(format!("{TEMP_SCOPE_PREFIX}{euid}"));
    let address = dir.join(SOCKET_NAME);
    localipc::validate_address(&address).map_err(|_| ScopeError::Unsafe)?;
    Ok(UserScope { dir, address })
}
