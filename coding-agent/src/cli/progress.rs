//! The spinner while the model thinks: an `indicatif` bar on stderr that hides itself when
//! stderr is not a terminal, and that is cleared before any streamed text is written, so
//! the two never interleave. A prompt on the terminal holds it ([`hold`]): cleared and
//! still while the user reads and answers, spinning again afterwards.

use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner redraws.
pub const TICK: Duration = Duration::from_millis(100);

/// The spinner currently drawing, if any: log lines written to stderr clear it for their
/// write ([`write_stderr`]), so a log line never lands in the middle of a frame.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// How many [`Hold`]s are alive: while any is, no spinner draws.
static HELD: Mutex<usize> = Mutex::new(0);

fn held() -> bool {
    *HELD.lock().unwrap_or_else(PoisonError::into_inner) > 0
}

/// Keeps the spinner cleared and still until dropped (a prompt is on the terminal: a
/// spinner redrawing its line would overwrite the question). See [`hold`].
#[derive(Debug)]
#[must_use = "the spinner spins again when the hold is dropped"]
pub struct Hold(());

/// Clears the active spinner (if any) and keeps every spinner from drawing until the
/// returned [`Hold`] is dropped; then the spinner that is active by then spins again.
pub fn hold() -> Hold {
    *HELD.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    let active = ACTIVE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if let Some(bar) = active {
        bar.disable_steady_tick();
        bar.finish_and_clear();
    }
    Hold(())
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut count = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        *count = count.saturating_sub(1);
        if *count > 0 {
            return;
        }
        drop(count);
        let active = ACTIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(bar) = active {
            bar.reset();
            bar.enable_steady_tick(TICK);
        }
    }
}

/// Writes `bytes` to stderr with the active spinner (if any) cleared for the write.
pub fn write_stderr(bytes: &[u8]) -> std::io::Result<()> {
    // A held spinner is not drawn: suspending it would draw it again after the write.
    let active = match held() {
        true => None,
        false => ACTIVE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
    };
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

    /// Starts spinning (idempotent); while a [`Hold`] is alive it only becomes the active
    /// spinner and starts drawing when the hold ends.
    pub fn start(&mut self) {
        if !self.spinning {
            self.spinning = true;
            *ACTIVE.lock().unwrap_or_else(PoisonError::into_inner) = Some(self.bar.clone());
            if !held() {
                self.bar.reset();
                self.bar.enable_steady_tick(TICK);
            }
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

    /// Whether the spinner is drawing (started, and not held).
    pub fn is_drawing(&self) -> bool {
        self.spinning && !held() && !self.bar.is_finished()
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

    /// The spinner state is process-wide; these tests take turns.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn streamed_text_stops_the_spinner_and_is_written_whole() {
        let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
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

    /// A prompt holds the spinner: cleared and still while held (also one started during
    /// the hold), spinning again once the hold ends.
    #[test]
    fn a_hold_keeps_the_spinner_still_until_it_ends() {
        let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let mut spinner = Spinner::with_target(ProgressDrawTarget::hidden());
        spinner.start();
        assert!(spinner.is_drawing());
        let held = hold();
        assert!(!spinner.is_drawing(), "a held spinner is cleared");
        let mut later = Spinner::with_target(ProgressDrawTarget::hidden());
        later.start();
        assert!(!later.is_drawing(), "a spinner started during a hold waits");
        drop(held);
        assert!(later.is_drawing(), "the active spinner spins again");
        later.stop();
        spinner.stop();
        assert!(!spinner.is_drawing() && !later.is_drawing());
    }
}
