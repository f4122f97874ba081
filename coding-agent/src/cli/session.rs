//! The interactive session's line editor: `agent` with no task on a terminal reads each
//! task with a line editor (rustyline: editing keys, and the lines typed earlier in the
//! session under Up/Down). Each line is a turn of the same conversation.
//!
//! The editor runs on a thread of its own (it blocks and owns the terminal while it reads);
//! [`LineEditor::read`] asks it for one line. It reads only between turns, so approval
//! prompts during a turn read standard input as in the one-shot form.

use std::sync::mpsc;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use tokio::sync::oneshot;

/// Lines kept in the editor's history (Up/Down) within one session.
pub const MAX_HISTORY_LINES: usize = 1000;

/// The prompt the session shows before each task.
pub const PROMPT: &str = "> ";

/// What one read gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line (without its newline; may be blank).
    Text(String),
    /// Ctrl-C at the prompt: the line was dropped, the session goes on.
    Interrupted,
    /// Ctrl-D (or the end of input): the session ends.
    End,
}

/// Why the editor could not read.
#[derive(Debug, thiserror::Error)]
#[error("the line editor failed: {0}")]
pub struct EditorError(String);

type Request = (String, oneshot::Sender<Result<Line, EditorError>>);

/// The line editor's thread, reading one line per [`read`](Self::read).
#[derive(Debug)]
pub struct LineEditor {
    requests: mpsc::Sender<Request>,
}

impl LineEditor {
    /// Starts the editor's thread.
    pub fn start() -> Result<Self, EditorError> {
        let config = rustyline::Config::builder()
            .max_history_size(MAX_HISTORY_LINES)
            .map_err(|e| EditorError(e.to_string()))?
            .auto_add_history(false)
            .build();
        let mut editor =
            DefaultEditor::with_config(config).map_err(|e| EditorError(e.to_string()))?;
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("agent-line-editor".into())
            .spawn(move || {
                // Ends when the session drops its sender.
                for (prompt, reply) in incoming {
                    let line = match editor.readline(&prompt) {
                        Ok(text) => {
                            if !text.trim().is_empty() {
                                let _ = editor.add_history_entry(text.as_str());
                            }
                            Ok(Line::Text(text))
                        }
                        Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
                        Err(ReadlineError::Eof) => Ok(Line::End),
                        Err(other) => Err(EditorError(other.to_string())),
                    };
                    let _ = reply.send(line);
                }
            })
            .map_err(|e| EditorError(e.to_string()))?;
        Ok(LineEditor { requests })
    }

    /// Reads one line after showing `prompt`.
    pub async fn read(&self, prompt: &str) -> Result<Line, EditorError> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send((prompt.to_owned(), reply))
            .map_err(|_| EditorError("its thread ended".into()))?;
        answer
            .await
            .map_err(|_| EditorError("its thread ended".into()))?
    }
}

/// How long a prompt's read waits before it looks at standard input again.
pub const INPUT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Standard input read without blocking, for an approval prompt during a session's turn: a
/// read in flight is simply dropped when the turn is cancelled, so no line typed later is
/// taken by a prompt that no longer exists (a blocking read on a thread would keep it). The
/// descriptor is non-blocking only while this lives (the line editor reads it blocking),
/// and an empty read waits [`INPUT_POLL`] before the next try.
#[derive(Debug)]
pub struct TerminalInput {
    stdin: std::io::Stdin,
    /// The file status flags to restore.
    flags: rustix::fs::OFlags,
    /// The wait before the next try, after a read found nothing.
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl TerminalInput {
    /// Standard input, switched to non-blocking reads until this is dropped.
    pub fn open() -> std::io::Result<Self> {
        use std::os::fd::AsFd;
        let stdin = std::io::stdin();
        let flags = rustix::fs::fcntl_getfl(stdin.as_fd())?;
        rustix::fs::fcntl_setfl(stdin.as_fd(), flags | rustix::fs::OFlags::NONBLOCK)?;
        Ok(TerminalInput {
            stdin,
            flags,
            pause: None,
        })
    }
}

impl Drop for TerminalInput {
    fn drop(&mut self) {
        use std::os::fd::AsFd;
        let _ = rustix::fs::fcntl_setfl(self.stdin.as_fd(), self.flags);
    }
}

impl tokio::io::AsyncRead for TerminalInput {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::future::Future;
        use std::os::fd::AsFd;
        use std::task::Poll;
        loop {
            if let Some(pause) = self.pause.as_mut() {
                if pause.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.pause = None;
            }
            let this = &mut *self;
            match rustix::io::read(this.stdin.as_fd(), buf.initialize_unfilled()) {
                Ok(read) => {
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {
                    this.pause = Some(Box::pin(tokio::time::sleep(INPUT_POLL)));
                }
                Err(error) => return Poll::Ready(Err(error.into())),
            }
        }
    }
}
