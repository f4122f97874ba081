use agent_core::stage;

#[stage(name = "trim")]
pub fn trim_stage() -> String {
    String::new()
}

fn main() {}
