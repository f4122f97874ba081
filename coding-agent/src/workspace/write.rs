//! `write_file`: creates or replaces one file atomically, through a temporary file in the
//! same directory and a rename.

use agent_core::tool;
use agent_core::tool::ToolContext;
use agent_core::tool::typed::{Failure, Problem};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::messages::{echo, io_problem};
use super::root::WorkspaceRoot;
use super::tool::{Work, blocking};

/// Largest `content` `write_file` accepts, in bytes (1 MiB).
pub const MAX_WRITE_BYTES: usize = 1 << 20;

/// The arguments of `write_file`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct WriteArgs {
    /// File relative to the workspace root.
    path: String,
    /// The complete new content of the file.
    content: String,
}

/// Create or replace a text file of the workspace with the given content (at most
/// 1 MiB), creating missing parent directories. The file is replaced atomically.
/// `path` is relative to the workspace root.
#[tool(effect = mutating, replay = idempotent, capabilities = ["filesystem.write"])]
pub async fn write_file(
    root: Arc<WorkspaceRoot>,
    #[args] args: WriteArgs,
    ctx: ToolContext<'_>,
) -> Result<String, Failure> {
    let WriteArgs { path, content } = args;
    if content.len() > MAX_WRITE_BYTES {
        return Err(Failure::Problem(Problem::new(format!(
            "argument `content` is {} bytes; at most {MAX_WRITE_BYTES} are allowed",
            content.len()
        ))));
    }
    blocking(&ctx, Work::Writes, move |_| write(&root, &path, &content)).await
}

/// Distinguishes temporary files of concurrent writes within one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

pub(super) fn write(root: &WorkspaceRoot, given: &str, content: &str) -> Result<String, String> {
    let path = root.resolve(given).map_err(|refusal| refusal.to_string())?;
    let existing = match fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("{} is a directory", echo(given)));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(format!("{} is not a regular file", echo(given)));
        }
        Ok(meta) => Some(meta),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(io_problem(given, &error)),
    };
    // `resolve` never returns the root for a path naming a file, so there is a parent.
    let Some(parent) = path.parent() else {
        return Err(format!("{} is a directory", echo(given)));
    };
    fs::create_dir_all(parent).map_err(|error| io_problem(given, &error))?;
    let temp = parent.join(format!(
        ".write_file.{}.{}.tmp",
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let written =
        write_temp(&temp, content, existing.as_ref()).and_then(|()| fs::rename(&temp, &path));
    if let Err(error) = written {
        // Best effort: the temporary file may not even exist.
        let _ = fs::remove_file(&temp);
        return Err(io_problem(given, &error));
    }
    Ok(format!("wrote {} bytes to {given}", content.len()))
}

/// Creates `temp` (never reusing a file), writes and flushes `content`, and copies the
/// permissions of the file it will replace.
fn write_temp(temp: &Path, content: &str, existing: Option<&fs::Metadata>) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(content.as_bytes())?;
    file.sync_all()?;
    if let Some(existing) = existing {
        fs::set_permissions(temp, existing.permissions())?;
    }
    Ok(())
}
