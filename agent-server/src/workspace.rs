//! Our one extension to StartRun: the workspace a run asks for, as gRPC metadata beside the
//! unchanged protocol message (docs/running-the-daemon.md, "One workspace per daemon").
//!
//! A daemon serves one workspace root (its tools are confined to it). A client names the
//! directory its run should work in under [`WORKSPACE_METADATA`] (the canonical path's
//! bytes); a daemon configured with a root refuses a StartRun that names another one, with
//! a CONFLICT status whose message is [`workspace_refusal`]. A request without the entry
//! (the original's clients) runs in the daemon's root, as before; a daemon that does not
//! know the entry (the original's) ignores it, as gRPC ignores unknown metadata.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use agent_protocol::pb::common::v1::{ErrorCode, Status};
use tonic::metadata::MetadataMap;

/// The metadata key (binary: a path is any bytes) naming the run's workspace.
pub const WORKSPACE_METADATA: &str = "agent-workspace-bin";

/// The most bytes a status message carries (the protocol's bound).
const MAX_MESSAGE_BYTES: usize = 2048;

/// What a daemon working in `daemon` says to a run asking for `asked`.
///
/// ```
/// use std::path::Path;
/// assert_eq!(
///     agent_server::workspace_refusal(Path::new("/a"), Path::new("/b")),
///     "this daemon works in /a; the run asks for /b — stop it with `agent daemon stop` or run from /a"
/// );
/// ```
pub fn workspace_refusal(daemon: &Path, asked: &Path) -> String {
    format!(
        "this daemon works in {}; the run asks for {} — stop it with `agent daemon stop` or run from {}",
        daemon.display(),
        asked.display(),
        daemon.display()
    )
}

/// The status message for the refusal: [`workspace_refusal`], or a fixed text when a path
/// would make it no protocol token (a control character, too long).
fn refusal_message(daemon: &Path, asked: &Path) -> String {
    let message = workspace_refusal(daemon, asked);
    if agent_protocol::token::is_token(&message, MAX_MESSAGE_BYTES) {
        message
    } else {
        "this daemon works in another directory than the run asks for — stop it with `agent daemon stop` or run from the daemon's directory".to_owned()
    }
}

/// The refusal when `metadata` names a workspace other than `root`.
pub(crate) fn refusal(metadata: &MetadataMap, root: Option<&Path>) -> Option<Status> {
    let (Some(root), Some(value)) = (root, metadata.get_bin(WORKSPACE_METADATA)) else {
        return None;
    };
    let conflict = |asked: &Path| Status {
        code: ErrorCode::Conflict as i32,
        message: refusal_message(root, asked),
        retryable: false,
        ..Status::default()
    };
    let Ok(bytes) = value.to_bytes() else {
        return Some(conflict(Path::new("an undecodable path")));
    };
    let asked = Path::new(OsStr::from_bytes(&bytes));
    (asked != root).then(|| conflict(asked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn asking(path: &[u8]) -> MetadataMap {
        let mut map = MetadataMap::new();
        map.insert_bin(WORKSPACE_METADATA, MetadataValue::from_bytes(path));
        map
    }

    #[test]
    fn only_another_named_workspace_is_refused() {
        let root = Path::new("/srv/a");
        assert!(refusal(&MetadataMap::new(), Some(root)).is_none());
        assert!(refusal(&asking(b"/srv/a"), Some(root)).is_none());
        assert!(refusal(&asking(b"/srv/b"), None).is_none());
        let refused = refusal(&asking(b"/srv/b"), Some(root)).unwrap();
        assert_eq!(refused.code, ErrorCode::Conflict as i32);
        assert!(
            refused
                .message
                .starts_with("this daemon works in /srv/a; the run asks for /srv/b"),
            "{}",
            refused.message
        );
        let odd = refusal(&asking(b"/srv/b\nx"), Some(root)).unwrap();
        assert!(agent_protocol::token::is_token(
            &odd.message,
            MAX_MESSAGE_BYTES
        ));
    }
}
