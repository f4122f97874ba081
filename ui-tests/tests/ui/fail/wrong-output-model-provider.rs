use agent_core::model_provider;

#[model_provider(name = "echo")]
pub fn echo_provider() -> String {
    String::new()
}

fn main() {}
