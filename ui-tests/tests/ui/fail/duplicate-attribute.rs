use agent_core::{bean, order};
use std::sync::Arc;

pub struct Step;

#[bean(order = 1)]
#[order(2)]
pub fn step() -> Arc<Step> {
    Arc::new(Step)
}

fn main() {}
