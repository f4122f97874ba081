use agent_core::tool::Tool;
use agent_core::{bean, tool};
use std::sync::Arc;

#[bean]
#[tool]
pub fn read_tool() -> Arc<dyn Tool> {
    unimplemented!()
}

fn main() {}
