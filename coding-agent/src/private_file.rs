//! Small private files written whole: the daemon's state beside its endpoint record, and
//! each workspace's last conversation.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never a part:
/// a temporary file in the same directory (mode 0600, even if an earlier one was left with
/// another mode), synced, then renamed over `path`. The temporary file is removed on failure.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("private-file-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// coding_agent::private_file::write_atomically(&dir.join("state.json"), b"{}")?;
/// assert_eq!(std::fs::read(dir.join("state.json"))?, b"{}");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
