//! Why a store directory is refused, in words a user can act on.
//!
//! [`AuthorityError`](crate::AuthorityError)s carry no path by design (they reach logs and
//! peers). A command line that was given the directory can name it: after
//! [`Store::open`](crate::Store::open) fails, [`diagnose_directory`] walks the same path
//! with the same rules as the store and says which component breaks which rule, with the
//! fix. It only explains; the store's own checks (descriptor-relative, race-free) decide.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::fsdir::DIRECTORY_MODE;

/// One rule of the store directory's path that a component breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DirectoryProblem {
    /// The store directory itself is not mode 0700.
    Mode {
        /// The store directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// An ancestor others may write (and rename entries in): not sticky.
    WritableAncestor {
        /// The ancestor.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The store directory, or an ancestor, is owned by another user (an ancestor may also
    /// be root's).
    Owner {
        /// The component.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's effective user.
        user: u32,
    },
    /// A component is a symbolic link: the store follows none.
    Symlink {
        /// The component.
        path: PathBuf,
    },
    /// A component is not a directory.
    NotADirectory {
        /// The component.
        path: PathBuf,
    },
}

impl fmt::Display for DirectoryProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirectoryProblem::Mode { path, mode } => write!(
                f,
                "the run authority directory {p} is mode {mode:04o}; it must be private \
                 ({DIRECTORY_MODE:04o}): chmod 700 {p}",
                p = path.display()
            ),
            DirectoryProblem::WritableAncestor { path, mode } => write!(
                f,
                "{p}, on the path to the run authority directory, is writable by others \
                 (mode {mode:04o}) and not sticky: chmod go-w {p}, or choose another directory",
                p = path.display()
            ),
            DirectoryProblem::Owner { path, owner, user } => write!(
                f,
                "{} belongs to user {owner}, not to you (user {user}); the run authority \
                 directory must be yours, and its ancestors yours or root's",
                path.display()
            ),
            DirectoryProblem::Symlink { path } => write!(
                f,
                "{} is a symbolic link; the run authority directory must be named by a path \
                 without symbolic links",
                path.display()
            ),
            DirectoryProblem::NotADirectory { path } => write!(
                f,
                "{} is not a directory; the run authority needs a directory there",
                path.display()
            ),
        }
    }
}

impl std::error::Error for DirectoryProblem {}

fn bits(mode: u32) -> u32 {
    mode & 0o7777
}

/// The first rule the absolute `path` breaks as a store directory, if any; `None` also when
/// a component is missing (the store creates it) or cannot be inspected (then the store's
/// own error, an I/O failure, is the explanation).
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// # let dir = std::env::temp_dir().join(format!("diagnose-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
/// let problem = agent_authority::diagnose_directory(&dir).expect("a 0755 directory is refused");
/// assert!(problem.to_string().contains("is mode 0755"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn diagnose_directory(path: &Path) -> Option<DirectoryProblem> {
    if !path.is_absolute() {
        return None;
    }
    let user = rustix::process::geteuid().as_raw();
    let ancestors: Vec<&Path> = path.ancestors().collect();
    // From the root down, as the store binds it.
    for (depth, component) in ancestors.iter().rev().enumerate() {
        let leaf = depth + 1 == ancestors.len();
        let meta = match std::fs::symlink_metadata(component) {
            Ok(meta) => meta,
            Err(_) => return None,
        };
        let path = component.to_path_buf();
        if meta.file_type().is_symlink() {
            return Some(DirectoryProblem::Symlink { path });
        }
        if !meta.is_dir() {
            return Some(DirectoryProblem::NotADirectory { path });
        }
        let mode = bits(meta.mode());
        if leaf {
            if meta.uid() != user {
                return Some(DirectoryProblem::Owner {
                    path,
                    owner: meta.uid(),
                    user,
                });
            }
            if mode != DIRECTORY_MODE {
                return Some(DirectoryProblem::Mode { path, mode });
            }
        } else {
            if meta.uid() != 0 && meta.uid() != user {
                return Some(DirectoryProblem::Owner {
                    path,
                    owner: meta.uid(),
                    user,
                });
            }
            if mode & 0o022 != 0 && mode & 0o1000 == 0 {
                return Some(DirectoryProblem::WritableAncestor { path, mode });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    struct Temp(PathBuf);

    impl Temp {
        fn new(tag: &str) -> Temp {
            let dir = std::env::temp_dir().join(format!("diagnose-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            Temp(dir)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn each_broken_rule_is_named_with_its_path() {
        let temp = Temp::new("rules");
        let store = temp.0.join("store");
        std::fs::create_dir(&store).unwrap();
        mode(&store, 0o700);
        assert_eq!(
            diagnose_directory(&store),
            None,
            "a private directory is fine"
        );
        assert_eq!(diagnose_directory(&store.join("missing")), None);

        mode(&store, 0o755);
        let problem = diagnose_directory(&store).unwrap();
        assert_eq!(
            problem.to_string(),
            format!(
                "the run authority directory {p} is mode 0755; it must be private (0700): chmod 700 {p}",
                p = store.display()
            )
        );
        mode(&store, 0o700);

        mode(&temp.0, 0o777);
        assert!(matches!(
            diagnose_directory(&store),
            Some(DirectoryProblem::WritableAncestor { path, mode: 0o777 }) if path == temp.0
        ));
        mode(&temp.0, 0o1777);
        assert_eq!(
            diagnose_directory(&store),
            None,
            "a sticky ancestor is fine"
        );
        mode(&temp.0, 0o700);

        let link = temp.0.join("link");
        std::os::unix::fs::symlink(&store, &link).unwrap();
        assert!(matches!(
            diagnose_directory(&link.join("below")),
            Some(DirectoryProblem::Symlink { path }) if path == link
        ));
        let file = temp.0.join("file");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            diagnose_directory(&file),
            Some(DirectoryProblem::NotADirectory { path }) if path == file
        ));
    }
}
