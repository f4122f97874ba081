use agent_core::{bean, compose};
use std::sync::Arc;

mod real {
    pub struct Config;
}

// `Config` here is another type than `real::Config`; the tokens cannot know, rustc does.
pub struct Config;

#[bean]
pub fn settings() -> Arc<real::Config> {
    Arc::new(real::Config)
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
