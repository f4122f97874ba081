//! `search_text`: a literal, case-sensitive substring search over the text files under a
//! path, walked in name order and stopped when the caller goes away.

use agent_core::tool;
use agent_core::tool::ToolContext;
use agent_core::tool::typed::{Failure, Problem};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::messages::{char_floor, echo, io_problem};
use super::read::BINARY_PROBE_BYTES;
use super::root::WorkspaceRoot;
use super::tool::{Work, blocking, dot};

/// Most matches `search_text` returns; a marker line follows when there are more.
pub const MAX_SEARCH_MATCHES: usize = 200;
/// `search_text` skips files larger than this (4 MiB).
pub const MAX_SEARCH_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Longest matching line `search_text` shows, in bytes; longer lines end with `…`.
pub const MAX_MATCH_LINE_BYTES: usize = 300;

/// The arguments of `search_text`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// Text to find; matched literally and case-sensitively within one line.
    pattern: String,
    /// Directory or file relative to the workspace root.
    #[serde(default = "dot")]
    path: String,
}

/// Search the text files under a path of the workspace for a plain, case-sensitive
/// substring. Prints `path:line: text` per match (paths relative to the workspace root),
/// at most 200 matches. Skips binary files, files above 4 MiB, hidden directories,
/// `target/` and linked directories. `path` defaults to `.`.
#[tool(effect = read_only, replay = safe, capabilities = ["filesystem.read"])]
pub async fn search_text(
    root: Arc<WorkspaceRoot>,
    #[args] args: SearchArgs,
    ctx: ToolContext<'_>,
) -> Result<String, Failure> {
    let SearchArgs { pattern, path } = args;
    if pattern.is_empty() {
        return Err(Problem::new("argument `pattern` must not be empty").into());
    }
    if pattern.contains(['\n', '\r']) {
        return Err(Problem::new(
            "argument `pattern` must be a single line; matches never span lines",
        )
        .into());
    }
    blocking(&ctx, Work::Reads, move |stop| {
        search(&root, &pattern, &path, stop)
    })
    .await
}

/// What a directory entry is, without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    Dir,
    File,
    Link,
    Other,
}

/// The entries of `dir`, sorted by name; entries that cannot be inspected are dropped.
fn sorted_entries(dir: &Path) -> io::Result<Vec<(String, PathBuf, EntryKind)>> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir)?.flatten() {
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let kind = if file_type.is_symlink() {
            EntryKind::Link
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else if file_type.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            kind,
        ));
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// The state of one search.
struct Search<'a> {
    root: &'a WorkspaceRoot,
    pattern: &'a str,
    matches: Vec<String>,
    limited: bool,
}

impl Search<'_> {
    /// Searches one file shown as `shown`; `false` once the match limit is exceeded.
    fn file(&mut self, shown: &str, path: &Path) -> bool {
        let Ok(meta) = fs::metadata(path) else {
            return true;
        };
        if !meta.is_file() || meta.len() > MAX_SEARCH_FILE_BYTES {
            return true;
        }
        let Ok(bytes) = fs::read(path) else {
            return true;
        };
        if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
            return true;
        }
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return true;
        };
        for (index, line) in text.lines().enumerate() {
            if !line.contains(self.pattern) {
                continue;
            }
            if self.matches.len() == MAX_SEARCH_MATCHES {
                self.limited = true;
                return false;
            }
            let clipped = if line.len() > MAX_MATCH_LINE_BYTES {
                format!("{}…", &line[..char_floor(line, MAX_MATCH_LINE_BYTES)])
            } else {
                line.to_owned()
            };
            self.matches
                .push(format!("{shown}:{}: {clipped}", index + 1));
        }
        true
    }

    /// Walks `start` depth first in name order, checking `stop` before every entry.
    fn tree(&mut self, start: &Path, stop: &AtomicBool) -> io::Result<()> {
        let mut stack = vec![sorted_entries(start)?.into_iter()];
        while let Some(top) = stack.last_mut() {
            let Some((name, path, kind)) = top.next() else {
                stack.pop();
                continue;
            };
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let more = match kind {
                EntryKind::Dir => {
                    if !name.starts_with('.')
                        && name != "target"
                        && let Ok(entries) = sorted_entries(&path)
                    {
                        stack.push(entries.into_iter());
                    }
                    true
                }
                EntryKind::File => {
                    let shown = self.root.display(&path);
                    self.file(&shown, &path)
                }
                // Linked directories are never entered; a linked file only inside the root.
                EntryKind::Link => match fs::canonicalize(&path) {
                    Ok(target) if target.starts_with(self.root.path()) && target.is_file() => {
                        let shown = self.root.display(&path);
                        self.file(&shown, &target)
                    }
                    _ => true,
                },
                EntryKind::Other => true,
            };
            if !more {
                break;
            }
        }
        Ok(())
    }
}

pub(super) fn search(
    root: &WorkspaceRoot,
    pattern: &str,
    given: &str,
    stop: &AtomicBool,
) -> Result<String, String> {
    let start = root.resolve(given).map_err(|refusal| refusal.to_string())?;
    let meta = fs::metadata(&start).map_err(|error| io_problem(given, &error))?;
    let mut search = Search {
        root,
        pattern,
        matches: Vec::new(),
        limited: false,
    };
    if meta.is_dir() {
        search
            .tree(&start, stop)
            .map_err(|error| io_problem(given, &error))?;
    } else if meta.is_file() {
        let shown = root.display(&start);
        search.file(&shown, &start);
    } else {
        return Err(format!(
            "{} is neither a directory nor a regular file",
            echo(given)
        ));
    }
    if search.matches.is_empty() {
        return Ok(format!(
            "no matches for {} under {}",
            echo(pattern),
            echo(given)
        ));
    }
    let mut out = search.matches.join("\n");
    if search.limited {
        out.push_str(&format!(
            "\n[stopped after {MAX_SEARCH_MATCHES} matches; narrow the pattern or the path]"
        ));
    }
    Ok(out)
}
