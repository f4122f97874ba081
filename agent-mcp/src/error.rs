//! The typed errors of the MCP plan source. Each names the server (and the tool or field
//! where there is one); none carries an `env` value or call arguments.

use crate::process::LaunchError;

/// Why a server, a generation, a lease or a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The server could not be launched (command, digest, spawn).
    #[error("MCP server `{server}`: {source}")]
    Launch {
        /// The server's key.
        server: String,
        /// Why.
        #[source]
        source: LaunchError,
    },
    /// The server started but did not complete `initialize` and `tools/list` in time.
    #[error("the MCP server \"{server}\" did not start: {reason}{}", stderr_note(.stderr))]
    Startup {
        /// The server's key.
        server: String,
        /// Why, in plain words.
        reason: String,
        /// Its last stderr lines (at most
        /// [`STDERR_QUOTED_LINES`](crate::process::STDERR_QUOTED_LINES) lines and
        /// [`STDERR_QUOTED_BYTES`](crate::process::STDERR_QUOTED_BYTES)), one per line.
        stderr: String,
    },
    /// The server exited before it completed `initialize` and `tools/list`.
    #[error("the MCP server \"{server}\" exited during start-up ({status}){}", stderr_note(.stderr))]
    Exited {
        /// The server's key.
        server: String,
        /// How it ended: `exit status N` or `killed by signal N`.
        status: String,
        /// Its last stderr lines, as in [`McpError::Startup`].
        stderr: String,
    },
    /// The server answered `initialize` with a protocol version this client does not
    /// support; as the specification asks, the client disconnected.
    #[error(
        "MCP server `{server}` answered with protocol version `{version}`, which this client does not support"
    )]
    UnsupportedProtocol {
        /// The server's key.
        server: String,
        /// The version it named (at most 64 characters of it).
        version: String,
    },
    /// `tools/list` failed.
    #[error("MCP server `{server}`: listing tools failed: {reason}")]
    List {
        /// The server's key.
        server: String,
        /// Why.
        reason: String,
    },
    /// A server tool does not make a valid kernel definition (its schema is not an object
    /// schema or is larger than the kernel's bound, ...). The generation fails closed.
    #[error("MCP server `{server}`, tool `{tool}`: {reason}")]
    Definition {
        /// The server's key.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The kernel's rule.
        reason: String,
    },
    /// Two tools got the same model-facing name. The generation fails closed.
    #[error("tool name `{name}` is claimed by both {first} and {second}")]
    Collision {
        /// The model-facing name.
        name: String,
        /// The first claimant: `compiled tool `x`` or `MCP server `s` tool `t``.
        first: String,
        /// The second claimant.
        second: String,
    },
    /// A server of the current generation is not running; new leases fail closed until a
    /// restart publishes a new generation.
    #[error("MCP server `{server}` is down: {reason}")]
    ServerDown {
        /// The server's key.
        server: String,
        /// What happened.
        reason: String,
    },
    /// Too many generations are still leased to publish another one.
    #[error("{retained} tool plan generations are still leased; at most {max} are kept")]
    RetentionExhausted {
        /// Generations retained.
        retained: usize,
        /// The bound.
        max: usize,
    },
    /// The source is shutting down or stopped.
    #[error("the MCP tool plan source is closed")]
    Closed,
    /// A `tools/call` could not be sent: the tool did not run.
    #[error("MCP server `{server}`, tool `{tool}`: the call was not sent: {reason}")]
    CallNotSent {
        /// The server's key.
        server: String,
        /// The server's tool name.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The server rejected the request (unknown tool, invalid parameters): it did not run.
    #[error("MCP server `{server}`, tool `{tool}`: the server refused the call: {reason}")]
    CallRefused {
        /// The server's key.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The server's message.
        reason: String,
    },
    /// The server answered the call with a message over
    /// [`MAX_MESSAGE_BYTES`](crate::transport::MAX_MESSAGE_BYTES): the call ended, and its
    /// result was not read. Reported as soon as the message passes the bound.
    #[error(
        "MCP server `{server}`, tool `{tool}`: the answer is larger than {limit} bytes and was not read"
    )]
    AnswerTooLarge {
        /// The server's key.
        server: String,
        /// The server's tool name.
        tool: String,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The call was sent, then no result arrived (timeout, cancellation, crash, transport
    /// loss, a protocol error): for a mutating tool its outcome is uncertain.
    #[error("MCP server `{server}`, tool `{tool}`: {reason}")]
    CallInterrupted {
        /// The server's key.
        server: String,
        /// The server's tool name.
        tool: String,
        /// What happened.
        reason: String,
    },
}

/// The quoted stderr lines, indented under the message; or that there were none.
fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() {
        return "; it wrote nothing to stderr".to_owned();
    }
    let mut note = "; its last stderr lines:".to_owned();
    for line in stderr.lines() {
        note.push_str("\n    ");
        note.push_str(line);
    }
    note
}
