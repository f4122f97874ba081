use agent_core::{bean, compose};
use std::sync::Arc;

pub struct A;
pub struct B;

#[bean]
pub fn a(b: Option<Arc<B>>) -> Arc<A> {
    let _ = b;
    Arc::new(A)
}

#[bean]
pub fn b(a: Arc<A>) -> Arc<B> {
    let _ = a;
    Arc::new(B)
}

compose! {
    pub struct App { beans: [a, b] }
}

fn main() {}
