//! A child's output as lines over a channel, read on a thread of their own, so a test waits
//! for a line with a timeout instead of blocking on the pipe.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;

/// Each line of `pipe` as it arrives; the channel closes at the pipe's end.
pub(crate) fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}
