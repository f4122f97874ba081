use agent_core::bean;
use std::sync::Arc;

#[bean]
pub fn cache<T: Default>() -> Arc<T> {
    Arc::new(T::default())
}

fn main() {}
