//! What the HTTP model providers (`openai`, `anthropic`) share: the validated server and
//! its redacted key (`config`), the HTTP client (`client`), error bodies (`problems`), the
//! server-sent events decoder (`sse`), the event stream over a live response (`stream`)
//! and tool calls on the wire (`calls`). Each provider keeps only what its API does
//! differently: the request body, the meaning of each event and of each HTTP status.

pub(crate) mod calls;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod problems;
pub(crate) mod sse;
pub(crate) mod stream;

pub use config::ConfigError;
