use agent_core::{bean, compose, qualifier};
use std::sync::Arc;

pub struct Store;

#[bean(name = "memory", qualifiers = ["fast"])]
pub fn memory() -> Arc<Store> {
    Arc::new(Store)
}

#[bean]
pub fn cache(#[qualifier("durable")] store: Arc<Store>) -> Arc<String> {
    let _ = store;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [memory, cache] }
}

fn main() {}
