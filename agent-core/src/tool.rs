//! Tools: the [`Tool`] trait, its validated [`Definition`], and the [`Call`] /
//! [`ToolResult`] values exchanged with a model.
//!
//! A [`Definition`] can only be obtained through [`Definition::builder`] (or
//! by deserializing one, which runs the same checks), so every definition a
//! dispatcher or provider sees already satisfies the rules listed on
//! [`DefinitionBuilder::build`].
//!
//! One idea per file: the declared strings ([`Capability`], [`Effect`], [`ReplaySafety`]) in
//! `tool/capability.rs`, the
//! [`Definition`] and its builder in `tool/definition.rs`, the [`Call`] in `tool/call.rs`,
//! what a call produced in `tool/result.rs`, and the [`Tool`] trait with its context and
//! reporter in `tool/execution.rs`, and the runtime support of typed tools (one annotated
//! function is a tool) in [`typed`].

mod call;
mod capability;
mod definition;
mod execution;
mod result;
pub mod typed;

pub use crate::future::BoxFuture;
pub(crate) use call::check_identity;
pub use call::{Call, CallError, MAX_CALL_ID_BYTES, MAX_PAYLOAD_BYTES};
pub use capability::{Capability, Effect, ParseError, ReplaySafety};
pub use definition::{Definition, DefinitionBuilder, DefinitionError, ToolFacts, json_kind};
pub(crate) use definition::{ShapeViolation, check_shape};
pub use execution::{NoopReporter, Progress, ReportError, Reporter, Tool, ToolContext};
pub(crate) use result::bounded_note;
pub use result::{
    Cancelled, ExecutionError, ExecutionState, MAX_NOTE_BYTES, RetryDisposition, ToolResult,
};
