//! The spinner while the model thinks: an `indicatif` bar on stderr that hides itself when
//! stderr is not a terminal, and that is cleared before any streamed text is written, so
//! the two never interleave.

use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner redraws.
pub const TICK: Duration = Duration::from_millis(100);

/// The spinner currently drawing, if any: log lines written to stderr clear it for their
/// write ([`write_stderr`]), so a log line never lands in the middle of a frame.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Writes `bytes` to stderr with the active spinner (if any) cleared for the write.
pub fn write_stderr(bytes: &[u8]) -> std::io::Result<()> {
    let active = ACTIVE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let write = || {
        let mut stderr = std::io::stderr().lock();
        stderr.write_all(bytes)?;
        stderr.flush()
    };
    match active {
        Some(bar) => bar.suspend(write),
        None => write(),
    }
}

/// A spinner shown between `model.started` and the first streamed text (or the model's
/// end).
#[derive(Debug)]
pub struct Spinner {
    bar: ProgressBar,
    spinning: bool,
}

impl Spinner {
    /// A spinner on stderr; indicatif hides it when stderr is not a terminal.
    pub fn stderr() -> Self {
        Self::with_target(ProgressDrawTarget::stderr())
    }

    /// A spinner drawing to `target` (tests use a hidden or in-memory target).
    pub fn with_target(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .tick_chars("|/-\\ "),
        );
        bar.set_message("thinking…");
        Spinner {
            bar,
            spinning: false,
        }
    }

    /// Starts spinning (idempotent).
    pub fn start(&mut self) {
        if !self.spinning {
            self.spinning = true;
            self.bar.reset();
            self.bar.enable_steady_tick(TICK);
            *ACTIVE.lock().unwrap_or_else(PoisonError::into_inner) = Some(self.bar.clone());
        }
    }

    /// Stops spinning and clears the line (idempotent).
    pub fn stop(&mut self) {
        if self.spinning {
            self.spinning = false;
            ACTIVE.lock().unwrap_or_else(PoisonError::into_inner).take();
            self.bar.disable_steady_tick();
            self.bar.finish_and_clear();
        }
    }

    /// Writes streamed text with the spinner cleared for the write (it stays stopped: the
    /// model is answering, not thinking).
    pub fn write_text(&mut self, out: &mut impl Write, text: &str) -> std::io::Result<()> {
        self.stop();
        self.bar.suspend(|| {
            out.write_all(text.as_bytes())?;
            out.flush()
        })
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_text_stops_the_spinner_and_is_written_whole() {
        let mut spinner = Spinner::with_target(ProgressDrawTarget::hidden());
        spinner.start();
        assert!(ACTIVE.lock().unwrap().is_some());
        let mut out = Vec::new();
        spinner.write_text(&mut out, "hello ").unwrap();
        spinner.write_text(&mut out, "world").unwrap();
        assert_eq!(out, b"hello world");
        assert!(ACTIVE.lock().unwrap().is_none(), "stopped by the text");
        spinner.start();
        drop(spinner);
        assert!(ACTIVE.lock().unwrap().is_none(), "stopped on drop");
    }
}
