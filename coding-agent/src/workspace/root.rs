//! The confinement boundary: [`WorkspaceRoot`], the one place a model-given path becomes an
//! absolute one, what it refuses ([`Refusal`]), and the root bean.

use agent_core::bean;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::messages::{echo, short_reason};

/// Why a [`WorkspaceRoot`] could not be created. Meant for the host, not the model, so it
/// names the absolute path.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The current directory, the default root, is unavailable.
    #[error("cannot determine the current directory")]
    CurrentDir(#[source] io::Error),
    /// The path does not exist or cannot be canonicalized.
    #[error("cannot canonicalize the workspace root {}", .path.display())]
    Canonicalize {
        /// The path as given.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },
    /// The path exists but is not a directory.
    #[error("the workspace root {} is not a directory", .path.display())]
    NotADirectory {
        /// The path as given.
        path: PathBuf,
    },
}

/// Why [`WorkspaceRoot::resolve`] refused a path. Its text is model-visible: it echoes (a
/// bounded, quoted form of) the relative path, never the absolute root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The path is empty.
    #[error("the path is empty; give a path relative to the workspace root, such as `.`")]
    Empty,
    /// The path contains a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The path is absolute (Unix or Windows style).
    #[error("{} is absolute; give a path relative to the workspace root", echo(.path))]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path has a `..` component.
    #[error("{} contains `..`; paths may not climb out of the workspace root", echo(.path))]
    ParentComponent {
        /// The path as given.
        path: String,
    },
    /// A symbolic link on the path leads outside the root.
    #[error("{} leads outside the workspace through a symbolic link", echo(.path))]
    OutsideWorkspace {
        /// The path as given.
        path: String,
    },
    /// A symbolic link on the path points to nothing.
    #[error("{} goes through a symbolic link whose target does not exist", echo(.path))]
    DanglingLink {
        /// The path as given.
        path: String,
    },
    /// A component could not be inspected.
    #[error("{}: {reason}", echo(.path))]
    Inaccessible {
        /// The path as given.
        path: String,
        /// A short reason, such as `permission denied`.
        reason: &'static str,
    },
}

/// A canonicalized, existing directory that confines every workspace tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoot {
    path: PathBuf,
}

impl WorkspaceRoot {
    /// Canonicalizes `path` and checks that it is a directory.
    pub fn new(path: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let given = path.as_ref();
        let canonical = fs::canonicalize(given).map_err(|source| WorkspaceError::Canonicalize {
            path: given.to_path_buf(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(WorkspaceError::NotADirectory {
                path: given.to_path_buf(),
            });
        }
        Ok(WorkspaceRoot { path: canonical })
    }

    /// The canonical absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The absolute path for `relative`, or why it is refused (see the module docs).
    ///
    /// Existing components are walked one by one with `symlink_metadata`; a link is
    /// canonicalized and must land inside the root. Once a component does not exist, the rest
    /// is appended as given, so the result may name a file that does not exist yet. The
    /// result always starts with [`path`](Self::path).
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, Refusal> {
        check_syntax(relative)?;
        let mut current = self.path.clone();
        let mut names = Path::new(relative).components().filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        });
        while let Some(name) = names.next() {
            let candidate = current.join(name);
            match fs::symlink_metadata(&candidate) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = fs::canonicalize(&candidate).map_err(|error| {
                        if error.kind() == io::ErrorKind::NotFound {
                            Refusal::DanglingLink {
                                path: relative.to_owned(),
                            }
                        } else {
                            Refusal::Inaccessible {
                                path: relative.to_owned(),
                                reason: short_reason(&error),
                            }
                        }
                    })?;
                    if !target.starts_with(&self.path) {
                        return Err(Refusal::OutsideWorkspace {
                            path: relative.to_owned(),
                        });
                    }
                    current = target;
                }
                Ok(_) => current = candidate,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    current = candidate;
                    current.extend(names.by_ref());
                }
                Err(error) => {
                    return Err(Refusal::Inaccessible {
                        path: relative.to_owned(),
                        reason: short_reason(&error),
                    });
                }
            }
        }
        // Guaranteed by the walk; checked again so a mistake there cannot leak.
        if current.starts_with(&self.path) {
            Ok(current)
        } else {
            Err(Refusal::OutsideWorkspace {
                path: relative.to_owned(),
            })
        }
    }

    /// `absolute` relative to the root, with `/` separators (`.` for the root itself).
    pub(super) fn display(&self, absolute: &Path) -> String {
        let Ok(relative) = absolute.strip_prefix(&self.path) else {
            return String::from("?");
        };
        let parts: Vec<_> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect();
        if parts.is_empty() {
            String::from(".")
        } else {
            parts.join("/")
        }
    }
}

/// The checks that need no filesystem access.
fn check_syntax(relative: &str) -> Result<(), Refusal> {
    if relative.is_empty() {
        return Err(Refusal::Empty);
    }
    if relative.contains('\0') {
        return Err(Refusal::Nul);
    }
    let bytes = relative.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    let path = Path::new(relative);
    if drive || relative.starts_with(['/', '\\']) || path.has_root() || path.is_absolute() {
        return Err(Refusal::Absolute {
            path: relative.to_owned(),
        });
    }
    if relative.split(['/', '\\']).any(|part| part == "..") {
        return Err(Refusal::ParentComponent {
            path: relative.to_owned(),
        });
    }
    for component in path.components() {
        match component {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(Refusal::ParentComponent {
                    path: relative.to_owned(),
                });
            }
            Component::Prefix(_) | Component::RootDir => {
                return Err(Refusal::Absolute {
                    path: relative.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// The root bean: the current directory. Applications override it with their own root.
#[bean(name = "workspace_root")]
pub fn workspace_root() -> Result<Arc<WorkspaceRoot>, WorkspaceError> {
    let current = std::env::current_dir().map_err(WorkspaceError::CurrentDir)?;
    WorkspaceRoot::new(current).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_refusals_need_no_filesystem() {
        assert_eq!(check_syntax(""), Err(Refusal::Empty));
        assert_eq!(check_syntax("a\0b"), Err(Refusal::Nul));
        for absolute in ["/etc", "\\x", "C:\\x", "C:/x"] {
            assert!(
                matches!(check_syntax(absolute), Err(Refusal::Absolute { .. })),
                "{absolute}"
            );
        }
        for climbing in ["..", "a/../b", "a\\..\\b"] {
            assert!(
                matches!(check_syntax(climbing), Err(Refusal::ParentComponent { .. })),
                "{climbing}"
            );
        }
        assert_eq!(check_syntax("./src/lib.rs"), Ok(()));
    }
}
