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
