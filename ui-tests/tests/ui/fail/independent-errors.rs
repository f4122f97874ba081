use agent_core::{bean, compose};
use std::sync::Arc;

pub struct Config;
pub struct Secrets;

#[bean]
pub fn server(config: Arc<Config>) -> Arc<String> {
    let _ = config;
    Arc::new(String::new())
}

#[bean]
pub fn vault(secrets: Arc<Secrets>) -> Arc<u64> {
    let _ = secrets;
    Arc::new(0)
}

compose! {
    pub struct App { beans: [server, vault] }
}

fn main() {}
