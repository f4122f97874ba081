//! The last conversation of each workspace, kept so `agent -c` (and the interactive session)
//! can continue it.
//!
//! One file per workspace under the conversations directory (`$AGENT_CONVERSATION_DIR`, else
//! `$XDG_STATE_HOME/agent-kit/conversations`, else `~/.local/state/agent-kit/conversations`),
//! named by the SHA-256 of the workspace's canonical path. It holds the whole history the
//! model saw (file contents that tools read included), so the directory is created 0700 and
//! each file is written 0600, atomically (a temporary file in the same directory, then a
//! rename), and never read past [`MAX_FILE_BYTES`].
//!
//! ```
//! use coding_agent::conversation::ConversationStore;
//! use agent_core::message::Message;
//!
//! let dir = std::env::temp_dir().join(format!("conversation-doc-{}", std::process::id()));
//! let store = ConversationStore::at(&dir);
//! let workspace = std::env::current_dir()?;
//! assert!(store.load(&workspace)?.is_none());
//! let history = vec![Message::user("hello")?, Message::assistant("hi")?];
//! store.save(&workspace, &history)?;
//! assert_eq!(store.load(&workspace)?, Some(history));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use agent_core::message::Message;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The environment variable naming the conversations directory.
pub const CONVERSATION_DIR_ENV: &str = "AGENT_CONVERSATION_DIR";

/// The format tag every conversation file carries.
pub const FORMAT: &str = "coding-agent.conversation/v1";

/// A conversation file is never read past this: the largest history a model request may
/// carry (32 MiB) and room for its JSON encoding.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Why a conversation could not be loaded or saved: the file and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("conversation {}: {reason}", path.display())]
pub struct ConversationError {
    path: PathBuf,
    reason: String,
}

impl ConversationError {
    fn new(path: &Path, reason: impl std::fmt::Display) -> Self {
        ConversationError {
            path: path.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// The file (or directory) concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: String,
    workspace: PathBuf,
    messages: Vec<Message>,
}

/// Where the conversations of every workspace are kept.
#[derive(Debug, Clone)]
pub struct ConversationStore {
    dir: PathBuf,
}

impl ConversationStore {
    /// A store in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        ConversationStore { dir: dir.into() }
    }

    /// The store the environment names (see the module docs), or `None` when neither
    /// variable gives an absolute directory.
    pub fn from_env() -> Option<Self> {
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        absolute(CONVERSATION_DIR_ENV)
            .or_else(|| absolute("XDG_STATE_HOME").map(|s| s.join("agent-kit/conversations")))
            .or_else(|| absolute("HOME").map(|h| h.join(".local/state/agent-kit/conversations")))
            .map(ConversationStore::at)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `workspace` (a canonical path).
    pub fn file(&self, workspace: &Path) -> PathBuf {
        let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// The last conversation saved for `workspace`, if any.
    pub fn load(&self, workspace: &Path) -> Result<Option<Vec<Message>>, ConversationError> {
        let path = self.file(workspace);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(ConversationError::new(&path, error)),
        };
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ConversationError::new(&path, e))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(ConversationError::new(
                &path,
                format!("larger than {MAX_FILE_BYTES} bytes"),
            ));
        }
        let file: File = serde_json::from_slice(&bytes)
            .map_err(|e| ConversationError::new(&path, format!("not a conversation: {e}")))?;
        if file.version != FORMAT {
            return Err(ConversationError::new(
                &path,
                format!("format `{}` is not `{FORMAT}`", file.version),
            ));
        }
        if file.workspace != workspace {
            return Err(ConversationError::new(
                &path,
                format!("belongs to {}", file.workspace.display()),
            ));
        }
        Ok(Some(file.messages))
    }

    /// Replaces the conversation of `workspace` with `messages`.
    pub fn save(&self, workspace: &Path, messages: &[Message]) -> Result<(), ConversationError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| ConversationError::new(&self.dir, e))?;
        let path = self.file(workspace);
        let body = serde_json::to_vec(&File {
            version: FORMAT.to_owned(),
            workspace: workspace.to_owned(),
            messages: messages.to_vec(),
        })
        .map_err(|e| ConversationError::new(&path, e))?;
        crate::private_file::write_atomically(&path, &body)
            .map_err(|e| ConversationError::new(&path, e))
    }

    /// Forgets the conversation of `workspace` (nothing to forget is fine).
    pub fn forget(&self, workspace: &Path) -> Result<(), ConversationError> {
        let path = self.file(workspace);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(ConversationError::new(&path, error))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "conversation-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn history() -> Vec<Message> {
        vec![
            Message::user("hello").unwrap(),
            Message::assistant("hi").unwrap(),
        ]
    }

    #[test]
    fn a_saved_conversation_loads_back_private_and_per_workspace() {
        let dir = temp("roundtrip");
        let store = ConversationStore::at(dir.join("nested"));
        let (a, b) = (Path::new("/srv/project-a"), Path::new("/srv/project-b"));
        store.save(a, &history()).unwrap();
        assert_eq!(store.load(a).unwrap(), Some(history()));
        assert_eq!(
            store.load(b).unwrap(),
            None,
            "another workspace has its own"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&store.file(a)), 0o600);
        assert_eq!(mode(store.dir()), 0o700);
        // Saving again replaces it, and leaves no temporary file behind.
        store.save(a, &history()[..1]).unwrap();
        assert_eq!(store.load(a).unwrap().unwrap().len(), 1);
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
        store.forget(a).unwrap();
        store.forget(a).unwrap();
        assert_eq!(store.load(a).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_foreign_or_oversized_file_is_refused_naming_it() {
        let dir = temp("refused");
        let store = ConversationStore::at(&dir);
        let workspace = Path::new("/srv/project-a");
        store.save(workspace, &history()).unwrap();
        let path = store.file(workspace);
        let body = std::fs::read_to_string(&path).unwrap();

        let cases = [
            ("not json", "{".to_owned(), "not a conversation"),
            (
                "unknown member",
                body.replacen('{', r#"{"extra":1,"#, 1),
                "not a conversation",
            ),
            (
                "another format",
                body.replace(FORMAT, "coding-agent.conversation/v0"),
                "is not",
            ),
            (
                "another workspace",
                body.replace("/srv/project-a", "/srv/project-z"),
                "belongs to /srv/project-z",
            ),
        ];
        for (name, content, expected) in cases {
            std::fs::write(&path, content).unwrap();
            let error = store.load(workspace).unwrap_err();
            assert_eq!(error.path(), path, "{name}");
            assert!(error.to_string().contains(expected), "{name}: {error}");
        }
        // At the bound it is read; past it, refused without reading it all.
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_FILE_BYTES).unwrap();
        assert!(
            store
                .load(workspace)
                .unwrap_err()
                .to_string()
                .contains("not a conversation")
        );
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert!(
            store
                .load(workspace)
                .unwrap_err()
                .to_string()
                .contains("larger than")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
