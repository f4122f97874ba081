use agent_core::{bean, compose};
use std::sync::Arc;

mod a {
    pub struct Config;
}

mod b {
    pub struct Config;
}

#[bean]
pub fn settings() -> Arc<b::Config> {
    Arc::new(b::Config)
}

#[bean]
pub fn server(config: Arc<a::Config>) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [settings, server] }
}

fn main() {}
