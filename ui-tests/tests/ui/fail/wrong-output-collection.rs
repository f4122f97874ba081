use agent_core::bean;

#[bean]
pub fn bytes() -> Vec<u8> {
    Vec::new()
}

fn main() {}
