use agent_core::{bean, compose};
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct Handler;

mod http {
    use super::*;

    #[bean]
    pub fn handler() -> Arc<Handler> {
        Arc::new(Handler)
    }
}

mod grpc {
    use super::*;

    #[bean]
    pub fn handler() -> Arc<Handler> {
        Arc::new(Handler)
    }
}

#[bean]
pub fn router(handlers: BTreeMap<String, Arc<Handler>>) -> Arc<String> {
    let _ = handlers;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [http::handler, grpc::handler, router] }
}

fn main() {}
