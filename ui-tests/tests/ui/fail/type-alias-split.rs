use agent_core::{bean, compose};
use std::sync::Arc;

#[derive(Clone)]
pub struct Config;
pub type Settings = Config;

#[bean]
pub fn config() -> Settings {
    Config
}

#[bean]
pub fn server(configs: Vec<Config>) -> Arc<String> {
    let _ = configs;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [config, server] }
}

fn main() {}
