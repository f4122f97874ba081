use agent_core::tool;
use agent_core::tool::typed::Problem;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Args {
    pub path: String,
}

/// Reads a file.
#[tool(effect = read_only, replay = unsafe)]
pub fn read(#[args] args: Args) -> Result<String, Problem> {
    Ok(args.path)
}

fn main() {}
