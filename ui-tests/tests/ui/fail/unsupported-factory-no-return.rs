use agent_core::bean;

#[bean]
pub fn setup() {}

fn main() {}
