use agent_core::{bean, compose};
use std::sync::Arc;

mod a {
    pub struct Limits;
}

mod b {
    pub struct Limits;
}

use a::Limits;

#[bean]
pub fn small() -> Arc<a::Limits> {
    Arc::new(a::Limits)
}

#[bean]
pub fn large() -> Arc<b::Limits> {
    Arc::new(b::Limits)
}

#[bean]
pub fn server(limits: Arc<Limits>) -> Arc<String> {
    let _ = limits;
    Arc::new(String::new())
}

compose! {
    pub struct App { beans: [small, large, server] }
}

fn main() {}
