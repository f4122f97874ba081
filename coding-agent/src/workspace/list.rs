//! `list_dir`: one directory's entries, sorted and marked.

use agent_core::tool;
use agent_core::tool::ToolContext;
use agent_core::tool::typed::Failure;
use std::fs;
use std::sync::Arc;

use super::messages::{echo, io_problem};
use super::root::WorkspaceRoot;
use super::tool::{Work, blocking, dot};

/// Most entries `list_dir` shows; a `… (N more)` line follows when there are more.
pub const MAX_LIST_ENTRIES: usize = 500;

/// The arguments of `list_dir`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ListArgs {
    /// Directory relative to the workspace root.
    #[serde(default = "dot")]
    path: String,
}

/// List a directory of the workspace, sorted by name, one entry per line. Directories
/// end with `/`, symbolic links with `@`. At most 500 entries are
/// shown. `path` is relative to the workspace root and defaults to `.`.
#[tool(effect = read_only, replay = safe, capabilities = ["filesystem.read"])]
pub async fn list_dir(
    root: Arc<WorkspaceRoot>,
    #[args] args: ListArgs,
    ctx: ToolContext<'_>,
) -> Result<String, Failure> {
    blocking(&ctx, Work::Reads, move |_| list(&root, &args.path)).await
}

pub(super) fn list(root: &WorkspaceRoot, given: &str) -> Result<String, String> {
    let dir = root.resolve(given).map_err(|refusal| refusal.to_string())?;
    let meta = fs::metadata(&dir).map_err(|error| io_problem(given, &error))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", echo(given)));
    }
    let mut entries = Vec::new();
    for entry in fs::read_dir(&dir).map_err(|error| io_problem(given, &error))? {
        let entry = entry.map_err(|error| io_problem(given, &error))?;
        let file_type = entry
            .file_type()
            .map_err(|error| io_problem(given, &error))?;
        let suffix = if file_type.is_dir() {
            "/"
        } else if file_type.is_symlink() {
            "@"
        } else {
            ""
        };
        entries.push((entry.file_name().to_string_lossy().into_owned(), suffix));
    }
    if entries.is_empty() {
        return Ok(format!("{} is an empty directory", echo(given)));
    }
    entries.sort_unstable();
    let mut lines: Vec<String> = entries
        .iter()
        .take(MAX_LIST_ENTRIES)
        .map(|(name, suffix)| format!("{name}{suffix}"))
        .collect();
    if entries.len() > MAX_LIST_ENTRIES {
        lines.push(format!("… ({} more)", entries.len() - MAX_LIST_ENTRIES));
    }
    Ok(lines.join("\n"))
}
