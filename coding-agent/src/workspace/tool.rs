//! The tool behind all four factories: it checks a call's arguments against its schema,
//! runs the filesystem work on a blocking task and maps the outcome to a result.

use agent_core::tool::{
    BoxFuture, Call, Capability, Definition, DefinitionBuilder, DefinitionError, Effect,
    ExecutionError, ReplaySafety, Tool, ToolContext, ToolResult, json_kind,
};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::messages::echo;
use super::root::WorkspaceRoot;
use super::write::MAX_WRITE_BYTES;
use super::{list, read, search, write};

/// Finishes a read-only tool's definition (replay safe, `filesystem.read`) and builds it.
pub(super) fn reader(
    definition: DefinitionBuilder,
    root: Arc<WorkspaceRoot>,
    operation: Operation,
) -> Result<Arc<dyn Tool>, DefinitionError> {
    let definition = definition
        .effect(Effect::ReadOnly)
        .replay_safety(ReplaySafety::Safe)
        .capability(Capability::FilesystemRead)
        .build()?;
    Ok(WorkspaceTool::shared(definition, root, operation))
}

/// Which tool a [`WorkspaceTool`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    List,
    Read,
    Search,
    Write,
}

/// The checked arguments of one call.
#[derive(Debug)]
enum Request {
    List { path: String },
    Read { path: String },
    Search { pattern: String, path: String },
    Write { path: String, content: String },
}

impl Operation {
    /// The argument names the schema declares.
    fn arguments(self) -> &'static [&'static str] {
        match self {
            Operation::List | Operation::Read => &["path"],
            Operation::Search => &["pattern", "path"],
            Operation::Write => &["path", "content"],
        }
    }

    /// Checks `arguments` against the schema; `Err` is the problem text.
    fn parse(self, arguments: &Value) -> Result<Request, String> {
        let empty = Map::new();
        let object = match arguments {
            Value::Object(object) => object,
            Value::Null => &empty,
            other => {
                return Err(format!(
                    "arguments must be a JSON object, got {}",
                    json_kind(other)
                ));
            }
        };
        let allowed = self.arguments();
        if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
            let expected: Vec<_> = allowed.iter().map(|name| format!("`{name}`")).collect();
            return Err(format!(
                "unknown argument {}; expected {}",
                echo(unknown),
                expected.join(", ")
            ));
        }
        Ok(match self {
            Operation::List => Request::List {
                path: optional_string(object, "path", ".")?,
            },
            Operation::Read => Request::Read {
                path: required_string(object, "path")?,
            },
            Operation::Search => {
                let pattern = required_string(object, "pattern")?;
                if pattern.is_empty() {
                    return Err(String::from("argument `pattern` must not be empty"));
                }
                if pattern.contains(['\n', '\r']) {
                    return Err(String::from(
                        "argument `pattern` must be a single line; matches never span lines",
                    ));
                }
                Request::Search {
                    pattern,
                    path: optional_string(object, "path", ".")?,
                }
            }
            Operation::Write => {
                let path = required_string(object, "path")?;
                let content = required_string(object, "content")?;
                if content.len() > MAX_WRITE_BYTES {
                    return Err(format!(
                        "argument `content` is {} bytes; at most {MAX_WRITE_BYTES} are allowed",
                        content.len()
                    ));
                }
                Request::Write { path, content }
            }
        })
    }
}

fn required_string(object: &Map<String, Value>, name: &str) -> Result<String, String> {
    match object.get(name) {
        None | Some(Value::Null) => Err(format!("missing required argument `{name}` (a string)")),
        Some(Value::String(value)) => Ok(value.clone()),
        Some(other) => Err(format!(
            "argument `{name}` must be a string, got {}",
            json_kind(other)
        )),
    }
}

fn optional_string(
    object: &Map<String, Value>,
    name: &str,
    default: &str,
) -> Result<String, String> {
    match object.get(name) {
        None | Some(Value::Null) => Ok(default.to_owned()),
        Some(Value::String(value)) => Ok(value.clone()),
        Some(other) => Err(format!(
            "argument `{name}` must be a string, got {}",
            json_kind(other)
        )),
    }
}

/// One of the four workspace tools.
#[derive(Debug)]
pub(super) struct WorkspaceTool {
    definition: Definition,
    root: Arc<WorkspaceRoot>,
    operation: Operation,
}

impl WorkspaceTool {
    pub(super) fn shared(
        definition: Definition,
        root: Arc<WorkspaceRoot>,
        operation: Operation,
    ) -> Arc<dyn Tool> {
        Arc::new(WorkspaceTool {
            definition,
            root,
            operation,
        })
    }
}

/// Sets its flag when dropped, so a search stops once nobody awaits it.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Tool for WorkspaceTool {
    fn definition(&self) -> &Definition {
        &self.definition
    }

    fn execute<'a>(
        &'a self,
        call: Call,
        ctx: ToolContext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, ExecutionError>> {
        Box::pin(async move {
            if ctx.is_cancelled() {
                return Err(ExecutionError::cancelled(call.id()));
            }
            let request = match self.operation.parse(call.arguments()) {
                Ok(request) => request,
                Err(problem) => return Ok(ToolResult::problem(call.id(), problem)),
            };
            let root = Arc::clone(&self.root);
            let stop = Arc::new(AtomicBool::new(false));
            let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
            let mut task = tokio::task::spawn_blocking(move || request.run(&root, &stop));
            let joined = if self.operation == Operation::Write {
                // A started write always finishes, so its outcome is known.
                task.await
            } else {
                tokio::select! {
                    biased;
                    joined = &mut task => joined,
                    () = ctx.cancelled() => return Err(ExecutionError::cancelled(call.id())),
                }
            };
            match joined {
                Ok(Ok(content)) => Ok(ToolResult::success(call.id(), content)),
                Ok(Err(problem)) => Ok(ToolResult::problem(call.id(), problem)),
                Err(error) => {
                    let cause = if error.is_panic() {
                        "the workspace task panicked"
                    } else {
                        "the workspace task was cancelled by the runtime"
                    };
                    Err(if self.operation == Operation::Write {
                        ExecutionError::uncertain(call.id(), cause)
                    } else {
                        ExecutionError::definitive(call.id(), cause)
                    })
                }
            }
        })
    }
}

impl Request {
    /// Does the blocking work; `Ok` is the content, `Err` the problem text.
    fn run(self, root: &WorkspaceRoot, stop: &AtomicBool) -> Result<String, String> {
        match self {
            Request::List { path } => list::list(root, &path),
            Request::Read { path } => read::read(root, &path),
            Request::Search { pattern, path } => search::search(root, &pattern, &path, stop),
            Request::Write { path, content } => write::write(root, &path, &content),
        }
    }
}
