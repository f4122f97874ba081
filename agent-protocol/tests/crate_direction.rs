//! The protocol crate is the process boundary only: it never depends on the
//! kernel crates, in any dependency table of its manifest.

const KERNEL: [&str; 3] = ["agent-core", "agent-compose", "agent-macros"];

/// Dependency names declared in `manifest`: every key of a `[*dependencies]`
/// table (including target-specific ones), plus `package = "..."` renames.
fn declared_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            let header = line.trim_matches(|c| c == '[' || c == ']');
            in_deps = header.ends_with("dependencies") || header.contains("dependencies.");
            if let Some((_, name)) = header.rsplit_once("dependencies.") {
                names.push(name.trim().trim_matches('"').to_owned());
            }
            continue;
        }
        if !in_deps || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            names.push(key.trim().trim_matches('"').to_owned());
            if let Some(pkg) = value
                .split("package")
                .nth(1)
                .and_then(|rest| rest.split('"').nth(1))
            {
                names.push(pkg.to_owned());
            }
        }
    }
    names
}

#[test]
fn the_protocol_crate_never_depends_on_the_kernel() {
    let manifest = include_str!("../Cargo.toml");
    let deps = declared_dependencies(manifest);
    assert!(
        deps.contains(&"prost".to_owned()),
        "the parser reads the manifest: {deps:?}"
    );
    for kernel in KERNEL {
        assert!(
            !deps.iter().any(|d| d == kernel),
            "agent-protocol must not depend on {kernel}"
        );
    }
}

#[test]
fn the_parser_catches_every_spelling() {
    let spellings = [
        "[dependencies]\nagent-core = { workspace = true }\n",
        "[dev-dependencies]\nagent-core = \"0.1\"\n",
        "[build-dependencies]\ncore = { package = \"agent-core\", path = \"../agent-core\" }\n",
        "[target.'cfg(unix)'.dependencies]\nagent-compose = { workspace = true }\n",
        "[dependencies.agent-macros]\nworkspace = true\n",
    ];
    for manifest in spellings {
        let deps = declared_dependencies(manifest);
        assert!(
            KERNEL.iter().any(|k| deps.iter().any(|d| d == k)),
            "{manifest}"
        );
    }
}
