use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Tool;

mod tools {
    use super::*;

    #[bean(name = "first")]
    pub fn first() -> Arc<Tool> {
        Arc::new(Tool)
    }

    #[bean(name = "second")]
    pub fn second() -> Arc<Tool> {
        Arc::new(Tool)
    }
}

#[bean]
pub fn consume(tool: Arc<Tool>) -> Arc<String> {
    let _ = tool;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [tools::first, tools::second, consume] }
}

fn main() {}
