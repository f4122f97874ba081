//! Models: a provider-neutral request, the events a model streams back, and
//! the [`ModelProvider`] / [`EventStream`] traits that adapters implement.
//!
//! The shapes are deliberately minimal; provider adapters translate them to
//! and from each vendor's wire format.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::tool::{BoxFuture, Call, Definition};

/// Who authored a [`Message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the host application.
    System,
    /// Input from the user.
    User,
    /// Output of the model.
    Assistant,
    /// Output of a tool, fed back to the model.
    Tool,
}

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub content: String,
}

impl Message {
    /// Creates a message with the given role.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }

    /// Creates a [`Role::System`] message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// Creates a [`Role::User`] message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// Creates a [`Role::Assistant`] message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

/// What to ask a model: which model, the conversation so far, and the tools
/// it may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Provider-specific model identifier.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call; empty for none.
    pub tools: Vec<Definition>,
}

impl ModelRequest {
    /// Creates a request offering no tools.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            tools: Vec::new(),
        }
    }
}

/// Token counts reported when a response completes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the request.
    pub input_tokens: u64,
    /// Tokens in the response.
    pub output_tokens: u64,
}

/// A failure reported by the model or provider after streaming began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ModelProblem {
    /// Machine-readable category, e.g. `"rate_limited"`; provider-defined.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

impl ModelProblem {
    /// Creates a problem.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// One increment of a model's streamed response.
///
/// Serialized externally tagged in snake case, e.g. `{"text_delta": "Hi"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamEvent {
    /// More response text, to be appended to what came before.
    TextDelta(String),
    /// The model asks for a tool to be run.
    ToolCall(Call),
    /// The response finished normally. Terminal.
    Completed {
        /// Tokens consumed.
        usage: Usage,
    },
    /// The response failed part-way. Terminal.
    Failed(ModelProblem),
}

/// A failure to start a response, before any [`EventStream`] exists (bad
/// request, unknown model, unreachable provider, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model provider error: {message}")]
pub struct ProviderError {
    message: String,
}

impl ProviderError {
    /// Creates an error.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An asynchronous sequence of [`StreamEvent`]s for one response.
///
/// A well-behaved stream yields at most one terminal event
/// ([`StreamEvent::Completed`] or [`StreamEvent::Failed`]), after which
/// [`next`](Self::next) returns `None` on every call. Consumers should still
/// treat `None` without a terminal event as an interrupted response.
pub trait EventStream: Send {
    /// The next event, or `None` once the stream is exhausted.
    fn next(&mut self) -> BoxFuture<'_, Option<StreamEvent>>;
}

/// An [`EventStream`] that replays a fixed list of events, for tests and for
/// offline providers.
///
/// ```
/// use agent_core::model::{EventStream, ScriptedStream, StreamEvent, Usage};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut stream = ScriptedStream::new([
///     StreamEvent::TextDelta("Hi".into()),
///     StreamEvent::Completed { usage: Usage::default() },
/// ]);
/// assert_eq!(stream.next().await, Some(StreamEvent::TextDelta("Hi".into())));
/// assert_eq!(stream.remaining(), 1);
/// assert!(matches!(stream.next().await, Some(StreamEvent::Completed { .. })));
/// assert_eq!(stream.next().await, None);
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptedStream {
    events: VecDeque<StreamEvent>,
}

impl ScriptedStream {
    /// Creates a stream that yields `events` in order, then `None`.
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

impl FromIterator<StreamEvent> for ScriptedStream {
    fn from_iter<T: IntoIterator<Item = StreamEvent>>(events: T) -> Self {
        Self::new(events)
    }
}

impl EventStream for ScriptedStream {
    fn next(&mut self) -> BoxFuture<'_, Option<StreamEvent>> {
        // Popping before building the future means the future borrows nothing.
        Box::pin(std::future::ready(self.events.pop_front()))
    }
}

/// A source of model responses.
///
/// Dyn compatible, so hosts can hold `Arc<dyn ModelProvider>`. An offline
/// provider built on [`ScriptedStream`]:
///
/// ```
/// use std::sync::Arc;
///
/// use agent_core::model::{
///     EventStream, Message, ModelProvider, ModelRequest, ProviderError, ScriptedStream,
///     StreamEvent, Usage,
/// };
/// use agent_core::tool::BoxFuture;
///
/// struct Parrot;
///
/// impl ModelProvider for Parrot {
///     fn stream(
///         &self,
///         request: ModelRequest,
///     ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
///         Box::pin(async move {
///             let Some(last) = request.messages.last() else {
///                 return Err(ProviderError::new("no messages"));
///             };
///             let stream = ScriptedStream::new([
///                 StreamEvent::TextDelta(last.content.clone()),
///                 StreamEvent::Completed { usage: Usage::default() },
///             ]);
///             Ok(Box::new(stream) as Box<dyn EventStream>)
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ProviderError> {
/// let provider: Arc<dyn ModelProvider> = Arc::new(Parrot);
/// let request = ModelRequest::new("parrot-1", vec![Message::user("hello")]);
/// let mut stream = provider.stream(request).await?;
/// assert_eq!(stream.next().await, Some(StreamEvent::TextDelta("hello".into())));
/// # Ok(())
/// # }
/// ```
pub trait ModelProvider: Send + Sync + 'static {
    /// Starts a response to `request`. Errors that happen before any event is
    /// available are returned here; later ones arrive as
    /// [`StreamEvent::Failed`].
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{
        Effect, ExecutionError, NoopReporter, ReplaySafety, Tool, ToolContext, ToolResult,
    };
    use serde_json::{Value, json};
    use std::sync::{Arc, Mutex};
    use tokio_util::sync::CancellationToken;

    #[test]
    fn message_constructors_set_the_role() {
        assert_eq!(
            Message::system("s"),
            Message {
                role: Role::System,
                content: "s".into()
            }
        );
        assert_eq!(Message::user("u").role, Role::User);
        assert_eq!(Message::assistant("a").role, Role::Assistant);
        assert_eq!(Message::new(Role::Tool, "t").role, Role::Tool);
    }

    #[test]
    fn value_types_serialize_in_snake_case() {
        let roles: Vec<_> = [Role::System, Role::User, Role::Assistant, Role::Tool]
            .iter()
            .map(|role| serde_json::to_value(role).unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                json!("system"),
                json!("user"),
                json!("assistant"),
                json!("tool")
            ]
        );

        let events = vec![
            StreamEvent::TextDelta("Hi".into()),
            StreamEvent::ToolCall(Call::new("c1", "echo", json!({})).unwrap()),
            StreamEvent::Completed {
                usage: Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                },
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
    }

    #[test]
    fn request_round_trips_through_json() {
        let tool = Definition::builder("echo", "Echo.")
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap();
        let mut request =
            ModelRequest::new("m", vec![Message::system("be brief"), Message::user("hi")]);
        assert!(request.tools.is_empty());
        request.tools.push(tool);
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(
            serde_json::from_str::<ModelRequest>(&json).unwrap(),
            request
        );
    }

    #[test]
    fn errors_display_their_message() {
        assert_eq!(
            ModelProblem::new("rate_limited", "slow down").to_string(),
            "rate_limited: slow down"
        );
        let error = ProviderError::new("unknown model `x`");
        assert_eq!(error.message(), "unknown model `x`");
        assert_eq!(error.to_string(), "model provider error: unknown model `x`");
    }

    #[tokio::test]
    async fn scripted_stream_yields_in_order_then_none() {
        let mut stream: ScriptedStream = [
            StreamEvent::TextDelta("a".into()),
            StreamEvent::TextDelta("b".into()),
        ]
        .into_iter()
        .collect();
        assert_eq!(stream.remaining(), 2);
        assert_eq!(
            stream.next().await,
            Some(StreamEvent::TextDelta("a".into()))
        );
        assert_eq!(
            stream.next().await,
            Some(StreamEvent::TextDelta("b".into()))
        );
        assert_eq!(stream.next().await, None);
        assert_eq!(stream.next().await, None);
        assert_eq!(ScriptedStream::default().next().await, None);
    }

    /// Answers each request with the next scripted response and records the
    /// requests it saw.
    struct ScriptedProvider {
        responses: Mutex<VecDeque<Vec<StreamEvent>>>,
        requests: Mutex<Vec<ModelRequest>>,
    }

    impl ModelProvider for ScriptedProvider {
        fn stream(
            &self,
            request: ModelRequest,
        ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
            self.requests.lock().unwrap().push(request);
            let next = self.responses.lock().unwrap().pop_front();
            Box::pin(async move {
                let events = next.ok_or_else(|| ProviderError::new("script exhausted"))?;
                Ok(Box::new(ScriptedStream::new(events)) as Box<dyn EventStream>)
            })
        }
    }

    struct Add(Definition);

    impl Tool for Add {
        fn definition(&self) -> &Definition {
            &self.0
        }

        fn execute<'a>(
            &'a self,
            call: Call,
            _ctx: ToolContext<'a>,
        ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
            Box::pin(async move {
                let operand = |key: &str| call.arguments().get(key).and_then(Value::as_i64);
                Ok(match (operand("a"), operand("b")) {
                    (Some(a), Some(b)) => ToolResult::success(call.id(), (a + b).to_string()),
                    _ => ToolResult::problem(call.id(), "`a` and `b` must be integers"),
                })
            })
        }
    }

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn dyn_tool_and_dyn_provider_work_end_to_end() {
        let add = Definition::builder("math.add", "Add two integers.")
            .input_schema(json!({
                "type": "object",
                "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } },
                "required": ["a", "b"],
            }))
            .effect(Effect::ReadOnly)
            .replay_safety(ReplaySafety::Safe)
            .build()
            .unwrap();
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Add(add))];

        let provider = Arc::new(ScriptedProvider {
            responses: Mutex::new(VecDeque::from([
                vec![
                    StreamEvent::TextDelta("Let me add.".into()),
                    StreamEvent::ToolCall(
                        Call::new("c1", "math.add", json!({ "a": 2, "b": 3 })).unwrap(),
                    ),
                    StreamEvent::Completed {
                        usage: Usage {
                            input_tokens: 10,
                            output_tokens: 5,
                        },
                    },
                ],
                vec![
                    StreamEvent::TextDelta("2 + 3 = ".into()),
                    StreamEvent::TextDelta("5".into()),
                    StreamEvent::Completed {
                        usage: Usage {
                            input_tokens: 20,
                            output_tokens: 3,
                        },
                    },
                ],
            ])),
            requests: Mutex::new(Vec::new()),
        });
        let dyn_provider: Arc<dyn ModelProvider> = provider.clone();

        let mut messages = vec![Message::user("What is 2 + 3?")];
        let mut total = Usage::default();
        let mut answer = String::new();
        // A minimal agent loop: stream, run requested tools, feed results back.
        for _turn in 0..2 {
            let mut request = ModelRequest::new("scripted", messages.clone());
            request.tools = tools.iter().map(|tool| tool.definition().clone()).collect();
            let future = dyn_provider.stream(request);
            assert_send(&future);
            let mut stream = future.await.unwrap();

            let mut text = String::new();
            let mut results = Vec::new();
            while let Some(event) = stream.next().await {
                match event {
                    StreamEvent::TextDelta(delta) => text.push_str(&delta),
                    StreamEvent::ToolCall(call) => {
                        let tool = tools
                            .iter()
                            .find(|t| t.definition().name() == call.name())
                            .unwrap();
                        let cancel = CancellationToken::new();
                        let ctx = ToolContext::new(&NoopReporter, &cancel);
                        results.push(tool.execute(call, ctx).await.unwrap());
                    }
                    StreamEvent::Completed { usage } => {
                        total.input_tokens += usage.input_tokens;
                        total.output_tokens += usage.output_tokens;
                    }
                    StreamEvent::Failed(problem) => panic!("unexpected failure: {problem}"),
                }
            }
            messages.push(Message::assistant(text.clone()));
            answer = text;
            for result in results {
                assert_eq!(result, ToolResult::success("c1", "5"));
                messages.push(Message::new(Role::Tool, result.content()));
            }
        }

        assert_eq!(answer, "2 + 3 = 5");
        assert_eq!(
            total,
            Usage {
                input_tokens: 30,
                output_tokens: 8
            }
        );
        {
            let requests = provider.requests.lock().unwrap();
            assert_eq!(requests.len(), 2);
            assert_eq!(requests[0].tools[0].name(), "math.add");
            assert_eq!(
                requests[1].messages.last(),
                Some(&Message::new(Role::Tool, "5"))
            );
        }

        // Once the script runs out, the provider fails before any stream exists.
        let error = dyn_provider
            .stream(ModelRequest::new("scripted", vec![]))
            .await
            .err()
            .unwrap();
        assert_eq!(error, ProviderError::new("script exhausted"));
    }
}
