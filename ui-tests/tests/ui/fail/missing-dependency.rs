use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Config;

#[bean]
pub fn consume(config: Arc<Config>) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [consume] }
}

fn main() {
    let _ = App::build();
}
