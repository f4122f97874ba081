use agent_core::bean;

#[bean]
pub struct Config;

fn main() {}
