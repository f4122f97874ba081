//! Models: a provider-neutral request, the events a model streams back, and the
//! [`ModelProvider`] / [`EventStream`] traits that adapters implement.
//!
//! Adapters translate these shapes to and from each vendor's wire format. Failures before a
//! stream exists are [`ProviderError`]s; failures while reading one are [`StreamError`]s or a
//! [`StreamEvent::Failed`] item. Both carry a typed [`ModelProblem`].

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::future::BoxFuture;
use crate::message::Message;
use crate::text::{ShortText, check_token};
use crate::tool::{Call, Definition, MAX_NOTE_BYTES, bounded_note};

/// Longest model name, in bytes.
pub const MAX_MODEL_BYTES: usize = 256;
/// Longest operation id, in bytes.
pub const MAX_OPERATION_ID_BYTES: usize = 128;
/// Most messages in one request.
pub const MAX_MESSAGES: usize = 4096;
/// Most tools offered in one request.
pub const MAX_TOOLS: usize = 512;
/// Largest request: the sum of its messages' accounted sizes.
pub const MAX_REQUEST_BYTES: usize = 32 << 20;
/// Largest single text delta, in bytes.
pub const MAX_TEXT_DELTA_BYTES: usize = 256 << 10;
/// Most text one model operation may stream, in bytes.
pub const MAX_OPERATION_TEXT_BYTES: usize = 4 << 20;
/// Most tool calls one model operation may request.
pub const MAX_OPERATION_TOOL_CALLS: usize = 128;
/// Longest problem code, in bytes.
pub const MAX_PROBLEM_CODE_BYTES: usize = 128;

/// Why a [`ModelRequest`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The model name is empty, untrimmed or longer than [`MAX_MODEL_BYTES`].
    #[error("model name must be non-empty, trimmed and at most {MAX_MODEL_BYTES} bytes")]
    Model,
    /// The operation id is empty, untrimmed or longer than [`MAX_OPERATION_ID_BYTES`].
    #[error("operation id must be non-empty, trimmed and at most {MAX_OPERATION_ID_BYTES} bytes")]
    OperationId,
    /// No messages, or more than [`MAX_MESSAGES`].
    #[error("a request needs 1 to {MAX_MESSAGES} messages")]
    Messages,
    /// More than [`MAX_TOOLS`] tools.
    #[error("a request offers at most {MAX_TOOLS} tools")]
    TooManyTools,
    /// Two tools share a name.
    #[error("tool `{0}` is offered twice")]
    DuplicateTool(String),
    /// The messages exceed [`MAX_REQUEST_BYTES`].
    #[error("the request exceeds {MAX_REQUEST_BYTES} bytes")]
    TooLarge,
}

fn valid_token(value: &str, max: usize) -> bool {
    check_token(value, max).is_ok()
}

/// What to ask a model: an operation id, which model, the conversation so far and the tools
/// it may call. Cheap to clone: the parts are shared.
///
/// ```
/// use agent_core::message::Message;
/// use agent_core::model::ModelRequest;
///
/// let request = ModelRequest::new("op-1", "scripted", vec![Message::user("hi")?])?;
/// assert_eq!(request.model(), "scripted");
/// assert_eq!(request.messages().len(), 1);
/// assert!(request.tools().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    operation_id: ShortText,
    model: Arc<str>,
    messages: Arc<Vec<Message>>,
    tools: Arc<[Definition]>,
}

impl ModelRequest {
    /// A validated request offering no tools.
    pub fn new(
        operation_id: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
        messages: Vec<Message>,
    ) -> Result<Self, RequestError> {
        let request = ModelRequest {
            operation_id: ShortText::from(operation_id.into()),
            model: model.into(),
            messages: Arc::new(messages),
            tools: Arc::from([]),
        };
        request.validate()?;
        Ok(request)
    }

    /// The same request offering `tools` (unique names, at most [`MAX_TOOLS`]).
    pub fn with_tools(mut self, tools: impl Into<Arc<[Definition]>>) -> Result<Self, RequestError> {
        self.tools = tools.into();
        check_tools(&self.tools)?;
        Ok(self)
    }

    /// Builds a request from parts the engine already validated incrementally (history
    /// bounds are tracked as messages are appended; the plan's tools are unique).
    pub(crate) fn from_checked_parts(
        operation_id: ShortText,
        model: Arc<str>,
        messages: Arc<Vec<Message>>,
        tools: Arc<[Definition]>,
    ) -> Self {
        ModelRequest {
            operation_id,
            model,
            messages,
            tools,
        }
    }

    fn validate(&self) -> Result<(), RequestError> {
        if !valid_token(self.operation_id.as_str(), MAX_OPERATION_ID_BYTES) {
            return Err(RequestError::OperationId);
        }
        if !valid_token(&self.model, MAX_MODEL_BYTES) {
            return Err(RequestError::Model);
        }
        if self.messages.is_empty() || self.messages.len() > MAX_MESSAGES {
            return Err(RequestError::Messages);
        }
        let size: usize = self.messages.iter().map(Message::size_bytes).sum();
        if size > MAX_REQUEST_BYTES {
            return Err(RequestError::TooLarge);
        }
        check_tools(&self.tools)
    }

    /// Identifies this operation (the engine uses `<run id>/model/<turn>`).
    pub fn operation_id(&self) -> &str {
        self.operation_id.as_str()
    }

    /// The model to ask; authoritative.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The conversation, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The tools the model may call, sorted by name when the engine builds the request.
    pub fn tools(&self) -> &[Definition] {
        &self.tools
    }
}

fn check_tools(tools: &[Definition]) -> Result<(), RequestError> {
    if tools.len() > MAX_TOOLS {
        return Err(RequestError::TooManyTools);
    }
    let mut names = BTreeSet::new();
    for tool in tools {
        if !names.insert(tool.name()) {
            return Err(RequestError::DuplicateTool(tool.name().to_owned()));
        }
    }
    Ok(())
}

/// Token counts reported when a response completes; 0 means unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub input_tokens: u64,
    /// Tokens in the response.
    pub output_tokens: u64,
}

impl Usage {
    /// Counts of input and output tokens.
    pub const fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
        }
    }

    /// Both counts added, saturating instead of overflowing.
    pub const fn total_tokens(self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// A typed model failure: a machine-readable code, a bounded human-readable message, and
/// whether a retry may succeed.
///
/// Construction normalizes instead of failing, so an adapter can always report a problem:
/// the code is trimmed, cut to [`MAX_PROBLEM_CODE_BYTES`] and defaults to `"unknown"`; the
/// message has control characters replaced and is cut to 4096 bytes.
///
/// ```
/// use agent_core::model::ModelProblem;
///
/// let problem = ModelProblem::new("rate_limited", "slow down").retryable(true);
/// assert_eq!(problem.to_string(), "rate_limited: slow down");
/// assert!(problem.is_retryable());
/// assert_eq!(ModelProblem::new("  ", "x").code(), "unknown");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(from = "ProblemParts")]
#[error("{code}: {message}")]
pub struct ModelProblem {
    code: String,
    message: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    retryable: bool,
}

#[derive(Deserialize)]
struct ProblemParts {
    code: String,
    message: String,
    #[serde(default)]
    retryable: bool,
}

impl From<ProblemParts> for ModelProblem {
    fn from(parts: ProblemParts) -> Self {
        ModelProblem::new(parts.code, parts.message).retryable(parts.retryable)
    }
}

impl ModelProblem {
    /// A non-retryable problem.
    pub fn new(code: impl AsRef<str>, message: impl AsRef<str>) -> Self {
        let mut code = code.as_ref().trim();
        if code.len() > MAX_PROBLEM_CODE_BYTES {
            let mut end = MAX_PROBLEM_CODE_BYTES;
            while !code.is_char_boundary(end) {
                end -= 1;
            }
            code = code[..end].trim_end();
        }
        let code = if code.is_empty() { "unknown" } else { code };
        let mut message = bounded_note(message.as_ref().trim());
        if message.is_empty() {
            message.push_str("model operation failed");
        }
        debug_assert!(message.len() <= MAX_NOTE_BYTES);
        ModelProblem {
            code: code.to_owned(),
            message,
            retryable: false,
        }
    }

    /// The same problem, marked retryable or not.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The machine-readable code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The bounded human-readable text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether a retry may succeed (the engine never retries; hosts may).
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

/// One increment of a model's streamed response.
///
/// Serialized externally tagged in snake case, e.g. `{"text_delta": "Hi"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEvent {
    /// More response text (non-empty, at most [`MAX_TEXT_DELTA_BYTES`]).
    TextDelta(String),
    /// The model asks for a tool to be run.
    ToolCall(Call),
    /// The response finished normally. Terminal: nothing after it is read.
    Completed {
        /// Tokens consumed.
        usage: Usage,
    },
    /// The response failed part-way. Terminal.
    Failed(ModelProblem),
}

/// A failure to start a response, before any [`EventStream`] exists (bad request, unknown
/// model, unreachable provider, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct ProviderError(ModelProblem);

impl ProviderError {
    /// Wraps `problem`.
    pub fn new(problem: ModelProblem) -> Self {
        ProviderError(problem)
    }

    /// What went wrong.
    pub fn problem(&self) -> &ModelProblem {
        &self.0
    }
}

impl From<ModelProblem> for ProviderError {
    fn from(problem: ModelProblem) -> Self {
        ProviderError(problem)
    }
}

/// A failure while reading an [`EventStream`] (connection dropped, malformed frame, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct StreamError(ModelProblem);

impl StreamError {
    /// Wraps `problem`.
    pub fn new(problem: ModelProblem) -> Self {
        StreamError(problem)
    }

    /// What went wrong.
    pub fn problem(&self) -> &ModelProblem {
        &self.0
    }
}

impl From<ModelProblem> for StreamError {
    fn from(problem: ModelProblem) -> Self {
        StreamError(problem)
    }
}

/// An asynchronous sequence of [`StreamEvent`]s for one response.
///
/// A well-behaved stream yields exactly one terminal item ([`StreamEvent::Completed`] or
/// [`StreamEvent::Failed`]) and only then `Ok(None)`. The engine treats `Ok(None)` before a
/// terminal as a broken stream. Dropping the stream must abort the response: that is how
/// the engine cancels.
pub trait EventStream: Send {
    /// The next item, `Ok(None)` once exhausted, or the error that ended the stream.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>>;
}

/// An [`EventStream`] that replays a fixed list of events, for tests and offline providers.
///
/// ```
/// use agent_core::model::{EventStream, ScriptedStream, StreamEvent, Usage};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), agent_core::model::StreamError> {
/// let mut stream = ScriptedStream::new([
///     StreamEvent::TextDelta("Hi".into()),
///     StreamEvent::Completed { usage: Usage::default() },
/// ]);
/// assert_eq!(stream.next().await?, Some(StreamEvent::TextDelta("Hi".into())));
/// assert_eq!(stream.remaining(), 1);
/// assert!(matches!(stream.next().await?, Some(StreamEvent::Completed { .. })));
/// assert_eq!(stream.next().await?, None);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptedStream {
    events: VecDeque<StreamEvent>,
}

impl ScriptedStream {
    /// A stream that yields `events` in order, then `Ok(None)`.
    pub fn new(events: impl IntoIterator<Item = StreamEvent>) -> Self {
        Self {
            events: events.into_iter().collect(),
        }
    }

    /// How many events have not been yielded yet.
    pub fn remaining(&self) -> usize {
        self.events.len()
    }
}

impl From<Vec<StreamEvent>> for ScriptedStream {
    fn from(events: Vec<StreamEvent>) -> Self {
        ScriptedStream {
            events: events.into(),
        }
    }
}

impl FromIterator<StreamEvent> for ScriptedStream {
    fn from_iter<T: IntoIterator<Item = StreamEvent>>(events: T) -> Self {
        Self::new(events)
    }
}

impl EventStream for ScriptedStream {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<StreamEvent>, StreamError>> {
        // Popping before building the future means the future borrows nothing.
        Box::pin(std::future::ready(Ok(self.events.pop_front())))
    }
}

/// A source of model responses. Dyn compatible, so hosts hold `Arc<dyn ModelProvider>`;
/// must be safe to call concurrently, and must not retry once any stream item was
/// observable.
///
/// ```
/// use std::sync::Arc;
///
/// use agent_core::message::Message;
/// use agent_core::model::{
///     EventStream, ModelProblem, ModelProvider, ModelRequest, ProviderError, ScriptedStream,
///     StreamEvent, Usage,
/// };
/// use agent_core::tool::BoxFuture;
///
/// /// Repeats the user's last words.
/// struct Parrot;
///
/// impl ModelProvider for Parrot {
///     fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
///         Box::pin(async move {
///             let Some(last) = request.messages().last() else {
///                 return Err(ModelProblem::new("empty_request", "no messages").into());
///             };
///             let stream = ScriptedStream::new([
///                 StreamEvent::TextDelta(last.text().into_owned()),
///                 StreamEvent::Completed { usage: Usage::default() },
///             ]);
///             Ok(Box::new(stream) as Box<dyn EventStream>)
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let provider: Arc<dyn ModelProvider> = Arc::new(Parrot);
/// let request = ModelRequest::new("op-1", "parrot-1", vec![Message::user("hello")?])?;
/// let mut stream = provider.stream(request).await?;
/// assert_eq!(stream.next().await?, Some(StreamEvent::TextDelta("hello".into())));
/// # Ok(())
/// # }
/// ```
pub trait ModelProvider: Send + Sync + 'static {
    /// Starts a response to `request`. Failures before any item exists are returned here.
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>>;
}

/// A provider that answers each request with events computed from it, without I/O: for
/// tests, benchmarks and offline defaults.
///
/// ```
/// use agent_core::model::{ModelProvider, ScriptedProvider, StreamEvent, Usage};
///
/// let provider = ScriptedProvider::new(|_request| vec![
///     StreamEvent::TextDelta("Hello.".into()),
///     StreamEvent::Completed { usage: Usage::new(1, 1) },
/// ]);
/// # let _: &dyn ModelProvider = &provider;
/// ```
pub struct ScriptedProvider<F> {
    script: F,
}

impl<F> ScriptedProvider<F>
where
    F: Fn(&ModelRequest) -> Vec<StreamEvent> + Send + Sync + 'static,
{
    /// A provider that streams `script(request)` for each request.
    pub fn new(script: F) -> Self {
        ScriptedProvider { script }
    }
}

impl<F> fmt::Debug for ScriptedProvider<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedProvider").finish_non_exhaustive()
    }
}

impl<F> ModelProvider for ScriptedProvider<F>
where
    F: Fn(&ModelRequest) -> Vec<StreamEvent> + Send + Sync + 'static,
{
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let stream = ScriptedStream::from((self.script)(&request));
        Box::pin(std::future::ready(Ok(
            Box::new(stream) as Box<dyn EventStream>
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{Effect, ReplaySafety};
    use serde_json::json;

    fn definition(name: &str) -> Definition {
        Definition::builder(name, "A tool.")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap()
    }

    #[test]
    fn requests_validate_their_bounds() {
        let hi = || vec![Message::user("hi").unwrap()];
        assert!(ModelRequest::new("op", "m", hi()).is_ok());
        assert_eq!(
            ModelRequest::new("op", "m", vec![]),
            Err(RequestError::Messages)
        );
        assert_eq!(
            ModelRequest::new("op", " m", hi()),
            Err(RequestError::Model)
        );
        assert_eq!(
            ModelRequest::new("op", "m".repeat(257), hi()),
            Err(RequestError::Model)
        );
        assert!(ModelRequest::new("op", "m".repeat(256), hi()).is_ok());
        assert_eq!(
            ModelRequest::new("", "m", hi()),
            Err(RequestError::OperationId)
        );
        let too_many = vec![Message::user("hi").unwrap(); MAX_MESSAGES + 1];
        assert_eq!(
            ModelRequest::new("op", "m", too_many),
            Err(RequestError::Messages)
        );
        let request = ModelRequest::new("op", "m", hi()).unwrap();
        assert_eq!(
            request
                .clone()
                .with_tools(vec![definition("a"), definition("a")]),
            Err(RequestError::DuplicateTool("a".into()))
        );
        let request = request.with_tools(vec![definition("a")]).unwrap();
        assert_eq!(request.tools().len(), 1);
    }

    #[test]
    fn problems_normalize_instead_of_failing() {
        let long = ModelProblem::new("c".repeat(300), "line\nbreak");
        assert_eq!(long.code().len(), MAX_PROBLEM_CODE_BYTES);
        assert_eq!(long.message(), "line break");
        assert_eq!(
            ModelProblem::new("x", " ").message(),
            "model operation failed"
        );
        let json = serde_json::to_value(ModelProblem::new("a", "b").retryable(true)).unwrap();
        assert_eq!(
            json,
            json!({"code": "a", "message": "b", "retryable": true})
        );
        let back: ModelProblem =
            serde_json::from_value(json!({"code": " ", "message": "b"})).unwrap();
        assert_eq!(back.code(), "unknown");
        let error = ProviderError::from(ModelProblem::new("auth", "bad key"));
        assert_eq!(error.to_string(), "auth: bad key");
        assert_eq!(
            StreamError::new(error.problem().clone()).problem().code(),
            "auth"
        );
    }

    #[test]
    fn stream_events_serialize_in_snake_case() {
        let events = vec![
            StreamEvent::TextDelta("Hi".into()),
            StreamEvent::ToolCall(Call::new("c1", "echo", json!({})).unwrap()),
            StreamEvent::Completed {
                usage: Usage::new(3, 4),
            },
            StreamEvent::Failed(ModelProblem::new("overloaded", "try later")),
        ];
        let json = serde_json::to_value(&events).unwrap();
        assert_eq!(
            json,
            json!([
                { "text_delta": "Hi" },
                { "tool_call": { "id": "c1", "name": "echo", "arguments": {} } },
                { "completed": { "usage": { "input_tokens": 3, "output_tokens": 4 } } },
                { "failed": { "code": "overloaded", "message": "try later" } },
            ])
        );
        assert_eq!(
            serde_json::from_value::<Vec<StreamEvent>>(json).unwrap(),
            events
        );
        assert_eq!(Usage::new(u64::MAX, 1).total_tokens(), u64::MAX);
    }

    #[tokio::test]
    async fn scripted_provider_streams_its_script() {
        let provider = ScriptedProvider::new(|request: &ModelRequest| {
            vec![StreamEvent::TextDelta(request.model().to_owned())]
        });
        let request = ModelRequest::new("op", "m1", vec![Message::user("hi").unwrap()]).unwrap();
        let mut stream = provider.stream(request).await.unwrap();
        assert_eq!(
            stream.next().await.unwrap(),
            Some(StreamEvent::TextDelta("m1".into()))
        );
        assert_eq!(stream.next().await.unwrap(), None);
    }
}
