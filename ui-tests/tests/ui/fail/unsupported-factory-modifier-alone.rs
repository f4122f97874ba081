use agent_core::order;
use std::sync::Arc;

#[order(1)]
pub fn step() -> Arc<String> {
    Arc::new(String::new())
}

fn main() {}
