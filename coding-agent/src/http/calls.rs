//! Tool calls on the wire: names both APIs accept, and calls assembled from streamed
//! fragments of JSON.

use agent_core::model::{MAX_OPERATION_TOOL_CALLS, ModelProblem};
use agent_core::tool::{Call, MAX_PAYLOAD_BYTES};
use serde_json::Value;

/// A tool name as both APIs accept it (`^[a-zA-Z0-9_-]+$`): each `.` becomes `__`.
/// Reversible, because a valid tool name never has two separators in a row.
pub(crate) fn wire_name(name: &str) -> String {
    name.replace('.', "__")
}

/// The tool name a model wrote, undoing [`wire_name`].
pub(crate) fn tool_name(wire: &str) -> String {
    wire.replace("__", ".")
}

/// The problem of a response asking for more calls than one operation may make.
pub(crate) fn too_many_calls() -> ModelProblem {
    ModelProblem::new(
        "bad_tool_call",
        format!("more than {MAX_OPERATION_TOOL_CALLS} tool calls in one response"),
    )
}

/// A tool call being assembled from streamed fragments.
pub(crate) struct PartialCall {
    pub(crate) id: String,
    pub(crate) name: String,
    arguments: String,
}

impl PartialCall {
    /// A call whose `id` and wire `name` are known, before any of its arguments.
    pub(crate) fn new(id: &str, name: &str) -> Self {
        PartialCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: String::new(),
        }
    }

    /// Appends a fragment of the arguments' JSON; fails past [`MAX_PAYLOAD_BYTES`].
    pub(crate) fn push_arguments(
        &mut self,
        fragment: &str,
        index: u64,
    ) -> Result<(), ModelProblem> {
        self.arguments.push_str(fragment);
        if self.arguments.len() > MAX_PAYLOAD_BYTES {
            return Err(ModelProblem::new(
                "bad_tool_arguments",
                format!("the arguments of tool call {index} exceed {MAX_PAYLOAD_BYTES} bytes"),
            ));
        }
        Ok(())
    }

    /// The finished call: `id` and wire name present, arguments valid JSON (none at all
    /// means `{}`), the name mapped back from its wire form.
    pub(crate) fn finish(self, index: u64) -> Result<Call, ModelProblem> {
        if self.id.is_empty() || self.name.is_empty() {
            return Err(ModelProblem::new(
                "bad_tool_call",
                format!("tool call {index} has no id or no name"),
            ));
        }
        let arguments = if self.arguments.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(&self.arguments).map_err(|_| {
                ModelProblem::new(
                    "bad_tool_arguments",
                    format!(
                        "the arguments of tool call {index} (`{}`) are not valid JSON",
                        self.name
                    ),
                )
            })?
        };
        Call::new(self.id, tool_name(&self.name), arguments)
            .map_err(|error| ModelProblem::new("bad_tool_call", error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dotted_tool_names_round_trip() {
        assert_eq!(wire_name("fs.read_file"), "fs__read_file");
        assert_eq!(tool_name(&wire_name("fs.read_file")), "fs.read_file");
        assert_eq!(tool_name("list_dir"), "list_dir");
    }

    #[test]
    fn fragments_assemble_and_bad_json_is_a_problem() {
        let mut call = PartialCall::new("c", "fs__read");
        call.push_arguments("{\"path\":", 0).unwrap();
        call.push_arguments(" \"a\"}", 0).unwrap();
        assert_eq!(
            call.finish(0).unwrap(),
            Call::new("c", "fs.read", json!({"path": "a"})).unwrap()
        );
        let mut cut = PartialCall::new("c", "x");
        cut.push_arguments("{\"path\":", 3).unwrap();
        assert_eq!(cut.finish(3).unwrap_err().code(), "bad_tool_arguments");
        assert_eq!(
            PartialCall::new("", "").finish(1).unwrap_err().code(),
            "bad_tool_call"
        );
    }
}
