//! Run events projected onto [`tracing`]: an opt-in, best-effort observer.
//!
//! [`EventLogger`] is an engine [`Observer`](agent_core::event::Observer) with a bounded
//! mailbox: `model.delta` is never enqueued, `tool.progress` only when
//! [`Config::with_progress`] asks for it, and a full mailbox drops the incoming envelope
//! and counts it, so logging never blocks or fails a run. One consumer thread emits one
//! `tracing` event per envelope, named `agent.<kind>` (`agent.run.started`, ...), at a fixed
//! level with a fixed message, carrying `run_correlation`, `sequence` and `at_unix_nanos`
//! plus a few safe, typed facts of the kind (turn numbers, token counts, failure codes and
//! the tool occurrences' declared facts). Run and call ids appear only as HMAC pseudonyms
//! ([`Pseudonyms`]); prompts, model text, tool arguments and results, error text, paths and
//! provider problem strings never reach a record. `docs/logging.md` lists every record.
//!
//! Compose it with [`beans::logging`]; spans are described in [`spans`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use agent_core::RunId;
//! use agent_core::event::{Envelope, Event, Observer, Timestamp};
//! use agent_logging::{Config, EventLogger};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
//! let logger = EventLogger::start(Config::default())?;
//! let started = Envelope::new(RunId::new("run-1")?, 1, Timestamp::from_unix_nanos(1),
//!     Event::RunStarted { agent: Arc::from("demo") });
//! logger.publish(&started).await?;
//! let delta = Envelope::new(RunId::new("run-1")?, 2, Timestamp::from_unix_nanos(2),
//!     Event::ModelDelta { text: "never logged".into() });
//! logger.publish(&delta).await?;
//! logger.close(Duration::from_secs(5)).await?;
//! let snapshot = logger.snapshot();
//! assert_eq!((snapshot.processed, snapshot.filtered, snapshot.closed), (1, 1, true));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).map_err(|e| e as Box<dyn std::error::Error>)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod beans;
mod config;
mod processor;
mod pseudonym;
pub mod spans;

pub use config::{
    CORRELATION_KEY_BYTES, Config, ConfigError, CorrelationKey, DEFAULT_MAILBOX_CAPACITY,
    MAX_MAILBOX_CAPACITY, MIN_MAILBOX_CAPACITY,
};
pub use processor::{
    CloseError, DECODE_FAILED, DEPENDENCY_DEGRADED, DEPENDENCY_UNAVAILABLE, EVENTS_DROPPED,
    EventLogger, LogHealth, MAX_OPEN_RUN_SPANS, Snapshot, StartError,
};
pub use pseudonym::{CALL_DOMAIN, PSEUDONYM_BYTES, Pseudonyms, RUN_DOMAIN};
pub use spans::DispatchSpans;
