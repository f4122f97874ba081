use agent_core::tool;
use agent_core::tool::Tool;
use std::sync::Arc;

#[tool(name = "Read Tool")]
pub fn read_tool() -> Arc<dyn Tool> {
    unimplemented!()
}

fn main() {}
