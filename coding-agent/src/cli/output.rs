//! Every byte the CLI writes to stdout and stderr goes through here, so a closed pipe never
//! panics (`println!` and `eprintln!` do) and a closed stdout ends the program quietly.
//!
//! A reader that goes away (`agent tools | head -1`) closes stdout: the first write that
//! finds it closed (`EPIPE`) marks it closed, and the binary then ends with exit code 0 and
//! no message, as common Unix tools do. Stderr writes never fail the program: a message
//! nobody can read is dropped.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the first write that found stdout's reader gone.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether a write found stdout closed (its reader went away).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::SeqCst)
}

/// Whether `error` says the reader of a pipe went away.
pub fn is_closed_pipe(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe
}

/// Writes `bytes` to stdout and flushes. A closed stdout is remembered ([`stdout_closed`])
/// and every later write fails at once with the same error.
pub fn write_stdout(bytes: &[u8]) -> io::Result<()> {
    if stdout_closed() {
        return Err(io::ErrorKind::BrokenPipe.into());
    }
    let mut out = io::stdout().lock();
    let written = out.write_all(bytes).and_then(|()| out.flush());
    if let Err(error) = &written
        && is_closed_pipe(error)
    {
        STDOUT_CLOSED.store(true, Ordering::SeqCst);
    }
    written
}

/// Writes one line (a newline is added) to stdout, as [`write_stdout`].
pub fn println(line: &str) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    write_stdout(&bytes)
}

/// Writes one line (a newline is added) to stderr, the spinner cleared around it; a
/// failed write is dropped.
pub fn eprintln(line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    let _ = super::progress::write_stderr(&bytes);
}

/// Stdout as a [`Write`]r over [`write_stdout`] (each write is flushed: the run's text
/// streams).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write_stdout(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
