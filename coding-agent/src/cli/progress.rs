//! The spinner while the model thinks: an `indicatif` bar on stderr that hides itself when
//! stderr is not a terminal, and that is cleared before any streamed text is written, so
//! the two never interleave.

use std::io::Write;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner redraws.
pub const TICK: Duration = Duration::from_millis(100);

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
        }
    }

    /// Stops spinning and clears the line (idempotent).
    pub fn stop(&mut self) {
        if self.spinning {
            self.spinning = false;
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
