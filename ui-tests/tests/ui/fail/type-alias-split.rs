use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Config;
pub type SharedConfig = Arc<Config>;

#[bean]
pub fn config() -> SharedConfig {
    Arc::new(Config)
}

#[bean]
pub fn server(configs: Vec<Arc<Config>>) -> Arc<String> {
    let _ = configs;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [config, server] }
}

fn main() {}
