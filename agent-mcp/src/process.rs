//! Launching one server process: command resolution, digest verification, a cleared
//! environment, its own process group with a watchdog, bounded stderr capture, and a
//! bounded shutdown that kills the whole group.
//!
//! The watchdog is `/bin/sh -c 'read -r _; kill -KILL 0'` in the server's group, reading a
//! pipe whose only writer is this process. When the agent exits for any reason, SIGKILL
//! included, the kernel closes that pipe, `read` returns and the watchdog kills the group it
//! is in: the server and every grandchild that did not leave the group.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use crate::config::{ENV_ALLOW_LIST, ServerConfig};

/// Bytes of a server's stderr kept for error messages and health (the newest ones).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// Longest stderr line forwarded to the log; the rest of the line is dropped with a note.
pub const STDERR_LINE_BYTES: usize = 4096;
/// Chunk size when hashing an executable.
const HASH_CHUNK_BYTES: usize = 64 * 1024;
/// How long a kill of the group waits for the server to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a server could not be launched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The command was not found, or is not an executable regular file.
    #[error("command `{command}`: {reason}")]
    Resolve {
        /// The command as configured.
        command: String,
        /// Why.
        reason: String,
    },
    /// The executable's SHA-256 differs from the configured one.
    #[error("executable {path} has SHA-256 {found}, but the configuration pins {expected}")]
    DigestMismatch {
        /// The resolved executable.
        path: PathBuf,
        /// The configured digest.
        expected: String,
        /// The digest of the file.
        found: String,
    },
    /// The executable changed between verification and launch.
    #[error("executable {path} was replaced while it was being launched")]
    Replaced {
        /// The resolved executable.
        path: PathBuf,
    },
    /// Spawning failed.
    #[error("spawning {path}: {reason}")]
    Spawn {
        /// The resolved executable.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
}

/// Most stderr lines an error message quotes (the newest ones).
pub const STDERR_QUOTED_LINES: usize = 20;
/// Most stderr bytes an error message quotes (the newest ones, cut at a line start where
/// one is in reach).
pub const STDERR_QUOTED_BYTES: usize = 4096;

/// The newest [`STDERR_TAIL_BYTES`] of a server's stderr: a bounded ring buffer, filled by
/// the task that also forwards each line to the log.
#[derive(Debug)]
pub struct StderrTail {
    bytes: Mutex<VecDeque<u8>>,
    /// Becomes `true` when the server's stderr reached its end (every line is in `bytes`).
    ended: watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail {
            bytes: Mutex::default(),
            ended: watch::Sender::new(false),
        }
    }
}

impl StderrTail {
    fn push(&self, line: &[u8]) {
        let mut bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        bytes.extend(line);
        bytes.push_back(b'\n');
        let excess = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        bytes.drain(..excess);
    }

    /// The kept text (lossy UTF-8).
    pub fn text(&self) -> String {
        let bytes = self.bytes.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = bytes.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }

    /// What an error message quotes: the last [`STDERR_QUOTED_LINES`] non-empty lines,
    /// at most [`STDERR_QUOTED_BYTES`] in all, oldest first.
    pub fn last_lines(&self) -> Vec<String> {
        let text = self.text();
        let mut lines = Vec::new();
        let mut budget = STDERR_QUOTED_BYTES;
        for line in text.lines().rev().map(str::trim_end) {
            if line.is_empty() {
                continue;
            }
            if lines.len() == STDERR_QUOTED_LINES || budget == 0 {
                break;
            }
            let mut start = line.len().saturating_sub(budget);
            while !line.is_char_boundary(start) {
                start += 1;
            }
            budget -= line.len() - start;
            lines.push(line[start..].to_owned());
        }
        lines.reverse();
        lines
    }

    fn end(&self) {
        self.ended.send_replace(true);
    }

    /// Completes when the server's stderr has ended (it exited, or closed the pipe), so
    /// that every line it wrote is kept.
    pub async fn ended(&self) {
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|ended| *ended).await;
    }
}

/// The resolved command and the environment it runs with.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) path: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    identity: Option<(u64, u64)>,
}

/// The environment of a server: the allow-listed variables of the agent, then its `env`.
pub(crate) fn server_env(config: &ServerConfig) -> Vec<(OsString, OsString)> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = ENV_ALLOW_LIST
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|v| (OsString::from(name), v)))
        .collect();
    for (name, value) in &config.env {
        env.insert(name.into(), value.into());
    }
    env.into_iter().collect()
}

/// Resolves the command (a name is looked up in the server's own `PATH`) and, when the
/// configuration pins one, verifies the executable's digest.
pub(crate) fn resolve(config: &ServerConfig) -> Result<Resolved, LaunchError> {
    let env = server_env(config);
    let fail = |reason: String| LaunchError::Resolve {
        command: config.command.clone(),
        reason,
    };
    let command = Path::new(&config.command);
    let path = if config.command.contains('/') {
        let base = config.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
        let path = if command.is_absolute() {
            command.to_owned()
        } else {
            base.join(command)
        };
        std::fs::canonicalize(&path).map_err(|e| fail(e.to_string()))?
    } else {
        let search = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        std::env::split_paths(&search)
            .map(|dir| dir.join(command))
            .find(|candidate| is_executable_file(candidate))
            .ok_or_else(|| fail("not found in the server's PATH".to_owned()))?
    };
    if !is_executable_file(&path) {
        return Err(fail(format!(
            "{} is not an executable regular file",
            path.display()
        )));
    }
    let identity = match &config.sha256 {
        None => None,
        Some(expected) => {
            let (found, identity) = hash_file(&path).map_err(|e| fail(e.to_string()))?;
            if &found != expected {
                return Err(LaunchError::DigestMismatch {
                    path,
                    expected: expected.clone(),
                    found,
                });
            }
            Some(identity)
        }
    };
    Ok(Resolved {
        path,
        env,
        identity,
    })
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The lowercase hex SHA-256 of a file: the value to pin in a server's `sha256`.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    hash_file(path).map(|(hex, _)| hex)
}

/// Hex SHA-256 of a file and its (device, inode), hashed in chunks.
pub(crate) fn hash_file(path: &Path) -> std::io::Result<(String, (u64, u64))> {
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; HASH_CHUNK_BYTES];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    let hex = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok((hex, (meta.dev(), meta.ino())))
}

/// A launched server: its protocol pipes, its process group and what it wrote to stderr.
pub(crate) struct Launched {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) group: ProcessGroup,
}

/// Spawns the server in a new process group, with its watchdog, and starts forwarding its
/// stderr to `tracing` (target `agent_mcp::server`, field `server`).
pub(crate) fn spawn(config: &ServerConfig, resolved: &Resolved) -> Result<Launched, LaunchError> {
    let spawn_error = |e: std::io::Error| LaunchError::Spawn {
        path: resolved.path.clone(),
        reason: e.to_string(),
    };
    let mut command = Command::new(&resolved.path);
    command
        .args(&config.args)
        .env_clear()
        .envs(resolved.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(spawn_error)?;
    let Some(pid) = child.id() else {
        return Err(spawn_error(std::io::Error::other(
            "the server exited at once",
        )));
    };
    let pgid = pid as i32;
    // From here on, dropping `group` kills whatever was started.
    let (exit_tx, exit_rx) = watch::channel(None);
    let mut group = ProcessGroup {
        pgid,
        exited: exit_rx,
        watchdog: None,
        stderr: Arc::new(StderrTail::default()),
        done: false,
    };
    if let Some(identity) = resolved.identity {
        let now = std::fs::metadata(&resolved.path).map(|m| (m.dev(), m.ino()));
        if now.ok() != Some(identity) {
            return Err(LaunchError::Replaced {
                path: resolved.path.clone(),
            });
        }
    }
    let watchdog = Command::new("/bin/sh")
        .args(["-c", "read -r _; kill -KILL 0"])
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(pgid)
        .kill_on_drop(true)
        .spawn()
        .map_err(spawn_error)?;
    group.watchdog = Some(Watchdog::new(watchdog));
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(spawn_error(std::io::Error::other("stdio was not piped")));
    };
    tokio::spawn(forward_stderr(
        config.key.clone(),
        stderr,
        group.stderr.clone(),
    ));
    tokio::spawn(async move {
        let status = child.wait().await.ok();
        let _ = exit_tx.send(Some(status));
    });
    Ok(Launched {
        stdin,
        stdout,
        group,
    })
}

async fn forward_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<StderrTail>,
) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while let Some(cut) = next_stderr_line(&mut reader, &mut line).await {
        let text = String::from_utf8_lossy(&line);
        tail.push(&line);
        if cut {
            tracing::info!(target: "agent_mcp::server", server = %server, "{text} [line cut at {STDERR_LINE_BYTES} bytes]");
        } else {
            tracing::info!(target: "agent_mcp::server", server = %server, "{text}");
        }
    }
    tail.end();
}

/// Reads the next stderr line into `line` (without its newline), keeping at most
/// [`STDERR_LINE_BYTES`] and skipping the rest of a longer one: `Some(true)` when the line
/// was cut, `None` at the end of the stream. At most `STDERR_LINE_BYTES + 1` bytes are
/// buffered, however long the line.
async fn next_stderr_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> Option<bool> {
    line.clear();
    let mut limited = (&mut *reader).take(STDERR_LINE_BYTES as u64 + 1);
    match limited.read_until(b'\n', line).await {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    if line.ends_with(b"\n") {
        line.pop();
    }
    if line.len() <= STDERR_LINE_BYTES {
        return Some(false);
    }
    line.truncate(STDERR_LINE_BYTES);
    // Skip the rest of the over-long line, a bounded chunk at a time.
    let mut rest = Vec::new();
    loop {
        rest.clear();
        let mut limited = (&mut *reader).take(STDERR_LINE_BYTES as u64);
        match limited.read_until(b'\n', &mut rest).await {
            Ok(0) | Err(_) => return Some(true),
            Ok(_) if rest.ends_with(b"\n") => return Some(true),
            Ok(_) => {}
        }
    }
}

struct Watchdog {
    /// Held open: its closing (by us, or by the kernel when we die) fires the watchdog.
    _pipe: Option<ChildStdin>,
    pid: Option<i32>,
}

impl Watchdog {
    fn new(mut child: Child) -> Self {
        let pipe = child.stdin.take();
        let pid = child.id().map(|p| p as i32);
        // Reaps the watchdog when the group is killed.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Watchdog { _pipe: pipe, pid }
    }
}

/// A server's process group. Dropping it kills the group at once (a synchronous signal, so
/// it works while the runtime shuts down).
pub struct ProcessGroup {
    pgid: i32,
    exited: watch::Receiver<Option<Option<ExitStatus>>>,
    watchdog: Option<Watchdog>,
    stderr: Arc<StderrTail>,
    /// Set once the group was killed and waited for: its id may be reused after that, so
    /// nothing signals it again.
    done: bool,
}

impl ProcessGroup {
    /// The process group id (the server's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The server's stderr tail.
    pub fn stderr(&self) -> &Arc<StderrTail> {
        &self.stderr
    }

    /// A receiver that holds `Some` once the server has exited.
    pub(crate) fn exit_watch(&self) -> watch::Receiver<Option<Option<ExitStatus>>> {
        self.exited.clone()
    }

    /// Whether the server (the group leader) has exited.
    pub fn has_exited(&self) -> bool {
        self.exited.borrow().is_some()
    }

    /// Completes when the server has exited (and was reaped).
    pub async fn exited(&self) {
        let mut exited = self.exited.clone();
        let _ = exited.wait_for(Option::is_some).await;
    }

    /// Sends SIGKILL to every process of the group (while the watchdog, a member, still
    /// holds the group id).
    pub fn kill(&self) {
        if self.done {
            return;
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.pgid) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }

    /// Waits up to `grace` for the server to exit by itself (its stdin is closed by then),
    /// then kills the group and waits (bounded) for the server to be reaped.
    pub async fn shutdown(&mut self, grace: Duration) {
        let _ = tokio::time::timeout(grace, self.exited()).await;
        self.kill();
        self.watchdog = None;
        let _ = tokio::time::timeout(REAP_TIMEOUT, self.exited()).await;
        self.done = true;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.kill();
        // Without a runtime (it shut down first) no task is left to reap the server and the
        // watchdog; reap them here, bounded, so no zombie stays until the agent exits.
        if tokio::runtime::Handle::try_current().is_err() {
            let watchdog = self.watchdog.as_ref().and_then(|w| w.pid);
            for pid in [Some(self.pgid), watchdog].into_iter().flatten() {
                reap_blocking(pid);
            }
        }
    }
}

/// Waits up to [`REAP_TIMEOUT`] for a killed child to be reaped, polling without blocking.
fn reap_blocking(pid: i32) {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    let deadline = std::time::Instant::now() + REAP_TIMEOUT;
    while std::time::Instant::now() < deadline {
        match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            // Reaped, or not ours to reap any more (tokio's reaper got there first).
            Ok(Some(_)) | Err(_) => return,
        }
    }
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("pgid", &self.pgid)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn stderr_lines(input: Vec<u8>) -> Vec<(usize, bool)> {
        let mut reader = BufReader::new(&input[..]);
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while let Some(cut) = next_stderr_line(&mut reader, &mut line).await {
            assert!(line.iter().all(|&b| b == b'x'), "only the line's own bytes");
            lines.push((line.len(), cut));
        }
        lines
    }

    #[tokio::test]
    async fn stderr_lines_are_kept_at_the_bound_and_cut_past_it() {
        let line = |n: usize| {
            let mut bytes = vec![b'x'; n];
            bytes.push(b'\n');
            bytes
        };
        let at = STDERR_LINE_BYTES;
        let input = [line(at), line(at + 1), line(3 * at + 7), line(0), line(5)].concat();
        assert_eq!(
            stderr_lines(input).await,
            [(at, false), (at, true), (at, true), (0, false), (5, false)]
        );
        // A last line without a newline, at and past the bound.
        assert_eq!(stderr_lines(vec![b'x'; at]).await, [(at, false)]);
        assert_eq!(stderr_lines(vec![b'x'; at + 1]).await, [(at, true)]);
    }

    #[test]
    fn the_stderr_tail_keeps_the_newest_bytes() {
        let tail = StderrTail::default();
        tail.push(&vec![b'a'; STDERR_TAIL_BYTES]);
        assert_eq!(tail.text().len(), STDERR_TAIL_BYTES);
        tail.push(b"end");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("end\n"));
    }

    #[test]
    fn an_error_quotes_the_last_lines_within_its_bounds() {
        let tail = StderrTail::default();
        for n in 0..30 {
            tail.push(format!("line {n}").as_bytes());
        }
        tail.push(b"");
        let lines = tail.last_lines();
        assert_eq!(lines.len(), STDERR_QUOTED_LINES);
        assert_eq!(lines.first().map(String::as_str), Some("line 10"));
        assert_eq!(lines.last().map(String::as_str), Some("line 29"));

        let tail = StderrTail::default();
        tail.push(b"first");
        tail.push(&vec![b'x'; 2 * STDERR_QUOTED_BYTES]);
        let lines = tail.last_lines();
        assert_eq!(
            lines,
            [String::from_utf8(vec![b'x'; STDERR_QUOTED_BYTES]).unwrap()]
        );
    }
}
