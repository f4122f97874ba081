//! Agents on a Restate cluster (docs/scale-out.md).
#![forbid(unsafe_code)]
