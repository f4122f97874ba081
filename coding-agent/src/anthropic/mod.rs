//! A native Anthropic Messages API model provider: `POST {base_url}/v1/messages` with
//! `stream: true`, read back as server-sent events and translated into [`StreamEvent`]s.
//!
//! Part of every build; the model settings choose it (`--provider anthropic`, see
//! [`crate::settings`]), and [`crate::provider::build_provider`] builds it.
//!
//! # Configuration
//!
//! [`AnthropicConfig::from_env`] reads three environment variables:
//!
//! | variable             | default                     | meaning                                   |
//! |----------------------|-----------------------------|-------------------------------------------|
//! | `ANTHROPIC_BASE_URL` | `https://api.anthropic.com` | the server's root (before `/v1/messages`) |
//! | `ANTHROPIC_API_KEY`  | required                    | sent as the `x-api-key` header            |
//! | `ANTHROPIC_MODEL`    | `claude-sonnet-4-5`         | the CLI's default model                   |
//!
//! An empty value counts as unset. [`AnthropicConfig::with_max_tokens`] sets the
//! `max_tokens` every request carries (the API requires one; default 4096), and
//! [`AnthropicConfig::with_system_prompt`] a system prompt. The model each request names
//! ([`ModelRequest::model`]) is authoritative; [`AnthropicConfig::model`] is only the
//! default a command line offers. Every request also sends `anthropic-version:
//! 2023-06-01`. As with the OpenAI-compatible provider, a loopback base URL bypasses
//! `HTTP(S)_PROXY`, redirects are never followed (the key only goes to the configured
//! host), and TLS is rustls with `ring` and the operating system's trust store.
//!
//! # Wire mapping
//!
//! The system prompt and the text of the conversation's system messages, in that order,
//! are joined by blank lines into the top-level `system` (the API has no system role in
//! `messages`). User messages send their text; an assistant's text and tool calls become
//! `text` and `tool_use` blocks (`input` is the arguments object); tool results become
//! `tool_result` blocks (`tool_use_id`, `content`, and `is_error: true` for a problem) in
//! a `user` message. Consecutive messages of one role are merged, so all results of one
//! turn's calls share the one user message the API requires; a message that is one text
//! block is sent as a plain string. Extension parts and empty text are skipped. Tools are
//! sent as `{name, description, input_schema}`; each `.` in a tool name is sent as `__`
//! (Anthropic accepts `^[a-zA-Z0-9_-]{1,64}$`) and mapped back in the calls a model makes.
//!
//! Streamed: `message_start` gives the input tokens (cache reads and writes included);
//! `content_block_start` opens a `text` block (its text, if any, is emitted) or a
//! `tool_use` block (id and name); `content_block_delta` carries `text_delta`s
//! ([`StreamEvent::TextDelta`]) and `input_json_delta`s, accumulated per block index;
//! `content_block_stop` emits the block's tool call once its JSON is complete;
//! `message_delta` gives the output tokens; `message_stop` ends the response with
//! `Completed`. `ping`, thinking blocks and unknown event types are skipped.
//!
//! # What is never logged
//!
//! This module logs nothing. The API key never appears in any `Debug` output
//! ([`AnthropicConfig`] and [`AnthropicProvider`] print `<redacted>`), nor in a
//! [`ConfigError`], [`ProviderError`], [`StreamError`] or [`StreamEvent`]: problems carry
//! at most the HTTP status, the server's host, the model name and the `error.message` of
//! the error body, cut to 200 characters with any occurrence of the key replaced by
//! `<redacted>` (the message of a `401` is never repeated at all). Request URLs, headers
//! and bodies are never included, and base URLs carrying `user:password@` are rejected.
//!
//! # Failures
//!
//! Before a stream exists ([`ProviderError`]): HTTP 401/403 → `auth`; 404 with an
//! `error.type` of `not_found_error` → `unknown_model` (naming the model), any other 404 →
//! `not_found`; 429 → `rate_limited` (retryable); 529 → `overloaded` (retryable); other
//! 5xx → `server_error` (retryable); any other non-2xx status → `bad_request`; connect
//! errors and timeouts → `unavailable` (retryable).
//!
//! While streaming: an `error` event ends the stream with [`StreamEvent::Failed`], typed by
//! its `error.type` (`overloaded_error` → `overloaded` and `rate_limit_error` →
//! `rate_limited`, both retryable; `api_error` and unknown types → `server_error`,
//! retryable; `invalid_request_error` → `bad_request`). The connection failing or closing
//! before `message_stop` is a [`StreamError`] `provider_stream`; an event that is not
//! JSON, or one larger than 4 MiB, is a [`StreamError`] `bad_frame`. A tool call whose
//! input is not JSON fails with `bad_tool_arguments` (`bad_tool_call` without an id or a
//! name). Nothing is retried here; a host may, guided by [`ModelProblem::is_retryable`].
//!
//! # Cancellation
//!
//! As with the OpenAI-compatible provider: dropping the future returned by
//! [`ModelProvider::stream`] aborts the request, and dropping the [`EventStream`] closes
//! its connection at once.
//!
//! # Files
//!
//! This file is the provider (the request and its headers); `config.rs` holds the
//! configuration, `wire.rs` the mapping to Anthropic's JSON, `errors.rs` the mapping of
//! HTTP statuses and `error` events to [`ModelProblem`]s and `events.rs` the meaning of
//! each streamed event. The HTTP client, the server-sent events decoder, error bodies and
//! the redacted key are shared with the OpenAI-compatible provider (`coding-agent/src/http/`).
//!
//! [`StreamEvent`]: agent_core::model::StreamEvent
//! [`StreamEvent::TextDelta`]: agent_core::model::StreamEvent::TextDelta
//! [`StreamEvent::Failed`]: agent_core::model::StreamEvent::Failed
//! [`StreamError`]: agent_core::model::StreamError
//! [`ModelProblem`]: agent_core::model::ModelProblem
//! [`ModelProblem::is_retryable`]: agent_core::model::ModelProblem::is_retryable

mod config;
mod errors;
mod events;
mod wire;

pub use config::{
    API_KEY_VAR, AnthropicConfig, BASE_URL_VAR, ConfigError, DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL, MODEL_VAR,
};

use agent_core::model::{EventStream, ModelProvider, ModelRequest, ProviderError};
use agent_core::tool::BoxFuture;

use crate::http::client::Transport;
use errors::status_problem;
use events::Events;
use wire::request_body;

/// The Messages API version every request states.
pub const API_VERSION: &str = "2023-06-01";

/// A [`ModelProvider`] for the Anthropic Messages API. Cheap to share; safe to call
/// concurrently. `Debug` prints the key as `<redacted>`.
///
/// ```
/// use coding_agent::anthropic::{AnthropicConfig, AnthropicProvider};
///
/// let config = AnthropicConfig::new("http://127.0.0.1:8080", "sk-ant-secret", "claude-test")?;
/// let provider = AnthropicProvider::new(config)?;
/// assert_eq!(provider.config().model(), "claude-test");
/// assert!(!format!("{provider:?}").contains("sk-ant-secret"));
/// # Ok::<(), coding_agent::anthropic::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    transport: Transport,
}

impl AnthropicProvider {
    /// A provider for `config`, with its own HTTP client (connection pool, TLS setup).
    pub fn new(config: AnthropicConfig) -> Result<Self, ConfigError> {
        Ok(AnthropicProvider {
            transport: Transport::new(config.server(), "v1/messages")?,
            config,
        })
    }

    /// The configuration this provider was built from.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

impl ModelProvider for AnthropicProvider {
    fn stream(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'_, Result<Box<dyn EventStream>, ProviderError>> {
        let (config, key) = (&self.config, self.config.api_key());
        let max_tokens = config.max_tokens().get();
        let body = request_body(&request, config.system_prompt(), max_tokens);
        let post = self.transport.post(&body).map(|post| {
            post.header("x-api-key", key.expose())
                .header("anthropic-version", API_VERSION)
        });
        let model = request.model().to_owned();
        let failure = move |status, body| status_problem(status, body, &model);
        let events = Events::new(key.clone());
        Box::pin(self.transport.open(post, key, failure, events))
    }
}
