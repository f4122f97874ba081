use agent_core::tool;

#[tool(name = "read")]
pub fn read_tool() -> String {
    String::new()
}

fn main() {}
