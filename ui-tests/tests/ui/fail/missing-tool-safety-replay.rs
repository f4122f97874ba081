use agent_core::tool;
use agent_core::tool::typed::Problem;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Args {
    pub path: String,
}

/// Reads a file.
#[tool(effect = mutating)]
pub fn read(#[args] args: Args) -> Result<String, Problem> {
    Ok(args.path)
}

fn main() {}
