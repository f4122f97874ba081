//! `daemon.json`: what `agent serve` tells its clients beside the endpoint record (which
//! keeps the original's exact schema): the one workspace root its runs work in. Written
//! (mode 0600, atomically) once the daemon serves, removed when it stops; a client trusts
//! it only while its `process_id` is the live endpoint record's.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The state file's name in the scope directory.
pub const DAEMON_STATE: &str = "daemon.json";
/// The largest state file read, in bytes.
const MAX_STATE_BYTES: u64 = 64 << 10;

/// What a serving daemon publishes for the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonState {
    /// The daemon's process id (the endpoint record's `process_id`).
    pub process_id: u32,
    /// The canonical workspace root its runs work in (`None`: not UTF-8, so not recorded;
    /// the daemon still checks each start request itself).
    pub workspace: Option<String>,
}

impl DaemonState {
    /// The state of `scope_dir`, if a readable one is there.
    pub fn read(scope_dir: &Path) -> Option<DaemonState> {
        use std::io::Read;
        let file = std::fs::File::open(scope_dir.join(DAEMON_STATE)).ok()?;
        let mut bytes = Vec::new();
        file.take(MAX_STATE_BYTES).read_to_end(&mut bytes).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The workspace as a path.
    pub fn workspace_path(&self) -> Option<PathBuf> {
        self.workspace.as_ref().map(PathBuf::from)
    }

    /// Writes the state into `scope_dir` (a temp file renamed over it, mode 0600).
    pub fn write(&self, scope_dir: &Path) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::private_file::write_atomically(&scope_dir.join(DAEMON_STATE), &bytes)
    }

    /// Removes the state of `scope_dir` if it is still the one of `process_id` (a daemon
    /// started after this one may have replaced it).
    pub fn remove(scope_dir: &Path, process_id: u32) {
        if DaemonState::read(scope_dir).is_some_and(|s| s.process_id == process_id) {
            let _ = std::fs::remove_file(scope_dir.join(DAEMON_STATE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_privately_and_is_removed_only_by_its_daemon() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("agent-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = DaemonState {
            process_id: 42,
            workspace: Some("/srv/a".to_owned()),
        };
        state.write(&dir).unwrap();
        assert_eq!(DaemonState::read(&dir), Some(state));
        let mode = std::fs::metadata(dir.join(DAEMON_STATE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        DaemonState::remove(&dir, 7);
        assert!(
            DaemonState::read(&dir).is_some(),
            "another daemon's state stays"
        );
        DaemonState::remove(&dir, 42);
        assert_eq!(DaemonState::read(&dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_client_and_the_daemon_name_the_workspace_under_one_key() {
        assert_eq!(
            agent_server::WORKSPACE_METADATA,
            agent_client_grpc::WORKSPACE_METADATA
        );
    }
}
