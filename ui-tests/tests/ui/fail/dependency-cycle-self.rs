use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Node;

#[bean]
pub fn node(parent: Arc<Node>) -> Arc<Node> {
    parent
}

compose! {
    pub struct App { beans: [node] }
}

fn main() {}
