use agent_core::{bean, model_provider, stage, tool};

#[bean]
pub struct Config;

#[tool]
pub enum Mode {
    Fast,
}

pub struct Reader;

#[stage]
impl Reader {}

#[model_provider]
pub trait Provider {}

#[bean]
pub const LIMIT: u8 = 1;

#[bean]
pub mod tools {}

macro_rules! make {
    () => {};
}

#[bean]
make!();

fn main() {}
