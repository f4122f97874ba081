//! Attach-or-start.
