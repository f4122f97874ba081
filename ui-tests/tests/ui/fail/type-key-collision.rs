use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Config;

mod other {
    use std::sync::Arc;

    pub struct Config;

    #[agent_core::bean]
    pub fn config() -> Arc<Config> {
        Arc::new(Config)
    }
}

#[bean]
pub fn server(config: Arc<Config>) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [other::config, server] }
}

fn main() {}
