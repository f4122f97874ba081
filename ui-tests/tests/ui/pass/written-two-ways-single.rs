//! A bean written `Arc<config::Config>` feeds a parameter written `Arc<Config>`.

use agent_core::{bean, compose};
use std::sync::Arc;

mod config {
    pub struct Config;
}
use config::Config;

#[bean]
pub fn settings() -> Arc<config::Config> {
    Arc::new(Config)
}

#[bean]
pub fn server(config: Arc<Config>) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [settings, server] }
}

fn main() {}
