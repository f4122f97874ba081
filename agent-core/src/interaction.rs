//! Interactions: prompts from a running agent to its user ("may I write `notes.md`?").
//!
//! An agent asks through a [`Broker`] on behalf of one run ([`Scope`]); guards receive a
//! run-bound [`Requester`] instead, so they can only ask for their own run. The engine
//! default is [`UnavailableBroker`]. A host or UI that wants to answer prompts uses a
//! [`PendingHub`]: it lists what is pending ([`PendingHub::pending`]), streams changes as a
//! complete snapshot followed by gap-free, revisioned deltas ([`PendingHub::subscribe`]) and
//! answers with run-scoped authority ([`PendingHub::respond`], [`PendingHub::decline`]).
//! [`PendingHub`] shows the whole exchange.

use std::io;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::future::BoxFuture;
use crate::run_id::RunId;
use crate::text::check_token;

/// Upper bound, in bytes, of a prompt and of the serialized JSON of a schema or answer value.
pub const MAX_PAYLOAD_BYTES: usize = 512 * 1024;

/// Upper bound, in bytes, of an interaction id and kind.
pub const MAX_TOKEN_BYTES: usize = 128;

/// Why an interaction failed or a value was rejected.
///
/// ```
/// use agent_core::interaction::{InteractionError, Scope};
///
/// let error = Scope::new(" secret run ").unwrap_err();
/// assert!(matches!(error, InteractionError::Invalid { field: "run_id", .. }));
/// assert!(!error.to_string().contains("secret")); // payload text is never echoed
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InteractionError {
    /// A value failed validation. Carries no payload text.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The rejected field, e.g. `"prompt"`.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Nothing can answer prompts (see [`UnavailableBroker`]).
    #[error("interactions are unavailable")]
    Unavailable,
    /// The request's cancellation token fired before it was answered.
    #[error("the interaction was cancelled")]
    Cancelled,
    /// An interaction with this id is already pending for this run, or (when asked through
    /// a run) the run used the id before: each id is used once per run.
    #[error("an interaction with id `{id}` is already pending or was used in this run")]
    DuplicateId {
        /// The duplicated id.
        id: String,
    },
    /// No interaction with this id is pending for the given run.
    #[error("no interaction with id `{id}` is pending for this run")]
    NotPending {
        /// The id that was answered.
        id: String,
    },
    /// The user or host declined to answer.
    #[error("the interaction `{id}` was declined")]
    Declined {
        /// The declined request's id.
        id: String,
    },
    /// The hub was closed.
    #[error("the interaction hub is closed")]
    Closed,
    /// A broker answered with a response for another id than the one asked.
    #[error("the answer to interaction `{id}` carried another id")]
    Mismatch {
        /// The id of the request that was asked.
        id: String,
    },
}

fn invalid(field: &'static str, reason: &'static str) -> InteractionError {
    InteractionError::Invalid { field, reason }
}

/// Checks that `value` is non-empty, has no surrounding whitespace and fits in `max` bytes.
fn check_text(field: &'static str, value: &str, max: usize) -> Result<(), InteractionError> {
    check_token(value, max).map_err(|problem| invalid(field, problem.reason()))
}

/// Whether `id` is a valid interaction id; a snapshot's recorded ids must be.
pub(crate) fn is_interaction_id(id: &str) -> bool {
    check_text("id", id, MAX_TOKEN_BYTES).is_ok()
}

/// Checks that the serialized JSON of `value` fits in [`MAX_PAYLOAD_BYTES`], stopping early.
fn check_json(field: &'static str, value: &Value) -> Result<(), InteractionError> {
    struct Budget(usize);
    impl io::Write for Budget {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 = self
                .0
                .checked_sub(buf.len())
                .ok_or_else(|| io::Error::other("over budget"))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Budget(MAX_PAYLOAD_BYTES), value)
        .map_err(|_| invalid(field, "is too large"))
}

/// Identifies the run that owns an interaction: a non-empty run id of at most 96 bytes
/// without surrounding whitespace.
///
/// ```
/// use agent_core::interaction::Scope;
///
/// let scope = Scope::new("run-42")?;
/// assert_eq!(scope.run_id(), "run-42");
/// assert!(Scope::new("").is_err());
/// # Ok::<(), agent_core::interaction::InteractionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    run_id: RunId,
}

impl Scope {
    /// Validates and wraps a run id.
    pub fn new(run_id: impl Into<Arc<str>>) -> Result<Scope, InteractionError> {
        let run_id = RunId::new(run_id).map_err(|e| invalid("run_id", e.reason()))?;
        Ok(Scope { run_id })
    }

    /// The run id.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }
}

/// What to ask: an id (unique among the run's pending prompts), a kind (e.g. `"confirm"`),
/// the prompt text and a JSON schema describing the expected answer.
///
/// `id` and `kind` are non-empty, at most [`MAX_TOKEN_BYTES`] and without surrounding
/// whitespace; `prompt` is non-empty, at most [`MAX_PAYLOAD_BYTES`] and without surrounding
/// whitespace; `schema` is any JSON value whose serialization fits in [`MAX_PAYLOAD_BYTES`].
/// Deserialization runs the same checks.
///
/// ```
/// use agent_core::interaction::InteractionRequest;
/// use serde_json::json;
///
/// let schema = json!({ "type": "boolean" });
/// let request = InteractionRequest::new("w1", "confirm", "Overwrite a.txt?", schema.clone())?;
/// assert_eq!((request.id(), request.kind()), ("w1", "confirm"));
/// assert_eq!((request.prompt(), request.schema()), ("Overwrite a.txt?", &schema));
/// assert!(InteractionRequest::new("w1", "confirm", "  ", json!(null)).is_err());
/// # Ok::<(), agent_core::interaction::InteractionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InteractionRequest {
    id: String,
    kind: String,
    prompt: String,
    schema: Value,
}

impl InteractionRequest {
    /// Validates and builds a request.
    pub fn new(
        id: impl Into<String>,
        kind: impl Into<String>,
        prompt: impl Into<String>,
        schema: Value,
    ) -> Result<Self, InteractionError> {
        let (id, kind, prompt) = (id.into(), kind.into(), prompt.into());
        check_text("id", &id, MAX_TOKEN_BYTES)?;
        check_text("kind", &kind, MAX_TOKEN_BYTES)?;
        check_text("prompt", &prompt, MAX_PAYLOAD_BYTES)?;
        check_json("schema", &schema)?;
        Ok(InteractionRequest {
            id,
            kind,
            prompt,
            schema,
        })
    }

    /// The id, unique among the pending prompts of one run.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The kind of prompt, e.g. `"confirm"`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The text shown to the user.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The JSON schema of the expected answer.
    pub fn schema(&self) -> &Value {
        &self.schema
    }
}

/// The wire shape of an [`InteractionRequest`], validated by [`InteractionRequest::new`].
#[derive(Deserialize)]
struct RequestParts {
    id: String,
    kind: String,
    prompt: String,
    schema: Value,
}

impl<'de> Deserialize<'de> for InteractionRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let p = RequestParts::deserialize(deserializer)?;
        Self::new(p.id, p.kind, p.prompt, p.schema).map_err(serde::de::Error::custom)
    }
}

/// The answer to an [`InteractionRequest`]: its id and a JSON value whose serialization fits
/// in [`MAX_PAYLOAD_BYTES`]. Deserialization runs the same checks.
///
/// ```
/// use agent_core::interaction::InteractionResponse;
/// use serde_json::json;
///
/// let response = InteractionResponse::new("w1", json!(true))?;
/// assert_eq!((response.id(), response.value()), ("w1", &json!(true)));
/// # Ok::<(), agent_core::interaction::InteractionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InteractionResponse {
    id: String,
    value: Value,
}

impl InteractionResponse {
    /// Validates and builds a response.
    pub fn new(id: impl Into<String>, value: Value) -> Result<Self, InteractionError> {
        let id = id.into();
        check_text("id", &id, MAX_TOKEN_BYTES)?;
        check_json("value", &value)?;
        Ok(InteractionResponse { id, value })
    }

    /// The id of the answered request.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The answer.
    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// The wire shape of an [`InteractionResponse`], validated by [`InteractionResponse::new`].
#[derive(Deserialize)]
struct ResponseParts {
    id: String,
    value: Value,
}

impl<'de> Deserialize<'de> for InteractionResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let p = ResponseParts::deserialize(deserializer)?;
        Self::new(p.id, p.value).map_err(serde::de::Error::custom)
    }
}

/// Answers prompts for runs. Injected into the engine; the default is [`UnavailableBroker`],
/// a host's is usually a [`PendingHub`], whose documentation shows the whole exchange.
///
/// Implementations must honour `cancel` (failing with [`InteractionError::Cancelled`]) and
/// answer with a response whose id is the request's.
pub trait Broker: Send + Sync {
    /// Asks `request` on behalf of `scope` and waits for the answer.
    fn request<'a>(
        &'a self,
        scope: &'a Scope,
        request: &'a InteractionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>>;
}

/// A [`Broker`] that always fails with [`InteractionError::Unavailable`] without looking at
/// the request: the engine default.
///
/// ```
/// use agent_core::interaction::*;
/// use tokio_util::sync::CancellationToken;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let (cancel, scope) = (CancellationToken::new(), Scope::new("run-1")?);
/// let request = InteractionRequest::new("w1", "confirm", "Proceed?", serde_json::json!(null))?;
/// let broker: &dyn Broker = &UnavailableBroker;
/// let answer = broker.request(&scope, &request, &cancel).await;
/// assert_eq!(answer, Err(InteractionError::Unavailable));
/// let requester: &dyn Requester = &UnavailableRequester;
/// assert_eq!(requester.request(request, &cancel).await, answer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct UnavailableBroker;

impl Broker for UnavailableBroker {
    fn request<'a>(
        &'a self,
        _scope: &'a Scope,
        _request: &'a InteractionRequest,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        Box::pin(std::future::ready(Err(InteractionError::Unavailable)))
    }
}

/// A run-bound capability handed to guards: asks on behalf of one run only. The default,
/// [`UnavailableRequester`], always fails (see [`UnavailableBroker`] for an example).
pub trait Requester: Send + Sync {
    /// Asks `request` for the bound run and waits for the answer.
    fn request<'a>(
        &'a self,
        request: InteractionRequest,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>>;
}

/// A [`Requester`] that always fails with [`InteractionError::Unavailable`].
#[derive(Debug, Clone, Copy, Default)]
pub struct UnavailableRequester;

impl Requester for UnavailableRequester {
    fn request<'a>(
        &'a self,
        _request: InteractionRequest,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<InteractionResponse, InteractionError>> {
        Box::pin(std::future::ready(Err(InteractionError::Unavailable)))
    }
}

mod hub;

pub use hub::{
    CloseReason, Pending, PendingDelta, PendingHub, PendingSnapshot, PendingSubscription,
};

#[cfg(test)]
mod tests {
    use super::*;
    use CloseReason::Cancelled;
    use serde_json::json;

    fn scope(run: &str) -> Scope {
        Scope::new(run).unwrap()
    }

    fn answer(id: &str) -> InteractionResponse {
        InteractionResponse::new(id, json!(id)).unwrap()
    }

    fn field<T: std::fmt::Debug>(result: Result<T, InteractionError>) -> &'static str {
        match result {
            Err(InteractionError::Invalid { field, .. }) => field,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn validation_bounds() {
        let t = |n: usize| "t".repeat(n);
        let json = |n: usize| Value::String(t(n - 2)); // serializes to exactly n bytes
        let req = |id: &str, kind: &str, prompt: &str, schema| {
            InteractionRequest::new(id, kind, prompt, schema)
        };
        let max = MAX_PAYLOAD_BYTES;
        assert!(Scope::new(t(96)).is_ok());
        assert!(req(&t(128), &t(128), &t(max), json(max)).is_ok());
        assert!(InteractionResponse::new(t(128), json(max)).is_ok());
        for bad in [t(97), String::new(), " r".into(), "r\n".into()] {
            assert_eq!(field(Scope::new(bad)), "run_id");
        }
        for bad in [t(129), String::new(), " a".into(), "a\t".into()] {
            assert_eq!(field(req(&bad, "k", "p", json!(null))), "id");
            assert_eq!(field(req("i", &bad, "p", json!(null))), "kind");
            assert_eq!(field(InteractionResponse::new(bad, json!(null))), "id");
        }
        for bad in [t(max + 1), String::new(), " p".into()] {
            assert_eq!(field(req("i", "k", &bad, json!(null))), "prompt");
        }
        assert_eq!(field(req("i", "k", "p", json(max + 1))), "schema");
        let error = InteractionResponse::new("i", json(max + 1)).unwrap_err();
        assert_eq!(error, invalid("value", "is too large"));
        assert!(!error.to_string().contains("ttt"));
    }

    #[test]
    fn serde_round_trips_and_validates() {
        let request = InteractionRequest::new("w1", "confirm", "Write?", json!({"a": 1})).unwrap();
        let wire = serde_json::to_value(&request).unwrap();
        let expected =
            json!({"id": "w1", "kind": "confirm", "prompt": "Write?", "schema": {"a": 1}});
        assert_eq!(wire, expected);
        assert_eq!(
            serde_json::from_value::<InteractionRequest>(wire).unwrap(),
            request
        );
        let bad = json!({"id": " w1", "kind": "confirm", "prompt": "Write?", "schema": null});
        assert!(serde_json::from_value::<InteractionRequest>(bad).is_err());
        let wire = serde_json::to_value(answer("w1")).unwrap();
        assert_eq!(
            serde_json::from_value::<InteractionResponse>(wire).unwrap(),
            answer("w1")
        );
        let bad = json!({"id": "", "value": 1});
        assert!(serde_json::from_value::<InteractionResponse>(bad).is_err());
        assert_eq!(serde_json::to_value(Cancelled).unwrap(), json!("cancelled"));
    }

    #[tokio::test]
    async fn unavailable_broker_and_requester() {
        let request = InteractionRequest::new("w1", "confirm", "Write?", json!(null)).unwrap();
        let cancel = CancellationToken::new();
        let (scope, unavailable) = (scope("r"), Err(InteractionError::Unavailable));
        assert_eq!(
            UnavailableBroker.request(&scope, &request, &cancel).await,
            unavailable
        );
        assert_eq!(
            UnavailableRequester.request(request, &cancel).await,
            unavailable
        );
    }
}
