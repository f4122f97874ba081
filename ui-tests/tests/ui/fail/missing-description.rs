use agent_core::tool;
use agent_core::tool::typed::Problem;

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Args {
    pub path: String,
}

#[tool(effect = read_only, replay = safe)]
pub fn read(#[args] args: Args) -> Result<String, Problem> {
    Ok(args.path)
}

fn main() {}
