use agent_core::bean;
use std::sync::Arc;

pub struct Config;

#[bean]
pub fn server(config: &Config) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

fn main() {}
