//! `read_file`: one UTF-8 text file, binary files refused, long files truncated.

use agent_core::tool;
use agent_core::tool::ToolContext;
use agent_core::tool::typed::Failure;
use std::fs::{self, File};
use std::io::Read;
use std::sync::Arc;

use super::messages::{echo, io_problem};
use super::root::WorkspaceRoot;
use super::tool::{Work, blocking};

/// Most bytes of a file `read_file` returns; longer files end with a `[truncated: …]` line.
pub const MAX_READ_BYTES: usize = 64 * 1024;
/// A file with a NUL byte among its first this many bytes is binary.
pub const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// File relative to the workspace root.
    path: String,
}

/// Read a UTF-8 text file of the workspace. Binary files are refused. Content above
/// 65536 bytes is cut and followed by a
/// `[truncated: showing the first N of M bytes]` line. `path` is relative to the
/// workspace root.
#[tool(effect = read_only, replay = safe, capabilities = ["filesystem.read"])]
pub async fn read_file(
    root: Arc<WorkspaceRoot>,
    #[args] args: ReadArgs,
    ctx: ToolContext<'_>,
) -> Result<String, Failure> {
    blocking(&ctx, Work::Reads, move |_| read(&root, &args.path)).await
}

pub(super) fn read(root: &WorkspaceRoot, given: &str) -> Result<String, String> {
    let path = root.resolve(given).map_err(|refusal| refusal.to_string())?;
    let meta = fs::metadata(&path).map_err(|error| io_problem(given, &error))?;
    if meta.is_dir() {
        return Err(format!(
            "{} is a directory; use list_dir to see its entries",
            echo(given)
        ));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", echo(given)));
    }
    let file = File::open(&path).map_err(|error| io_problem(given, &error))?;
    let total = file.metadata().map_or(meta.len(), |m| m.len());
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| io_problem(given, &error))?;
    let binary = || {
        format!(
            "{} is not a UTF-8 text file; read_file only returns text",
            echo(given)
        )
    };
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return Err(binary());
    }
    let truncated = bytes.len() > MAX_READ_BYTES;
    let kept = &bytes[..bytes.len().min(MAX_READ_BYTES)];
    let text = match std::str::from_utf8(kept) {
        Ok(text) => text,
        // A character cut by the limit, not invalid data: keep what precedes it.
        Err(error) if truncated && error.error_len().is_none() => {
            std::str::from_utf8(&kept[..error.valid_up_to()]).map_err(|_| binary())?
        }
        Err(_) => return Err(binary()),
    };
    if !truncated {
        return Ok(text.to_owned());
    }
    let total = total.max(bytes.len() as u64);
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(text);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&format!(
        "[truncated: showing the first {} of {total} bytes]",
        text.len()
    ));
    Ok(out)
}
