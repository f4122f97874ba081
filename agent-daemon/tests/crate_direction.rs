//! The kernel crates and the run authority never depend on the daemon seam: their manifests
//! name no `agent-daemon` dependency (in any table) and their sources never name the crate.

use std::path::{Path, PathBuf};

const LOWER_CRATES: [&str; 4] = [
    "agent-core",
    "agent-macros",
    "agent-compose",
    "agent-authority",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Dependency keys of every `[*dependencies*]` table in a manifest.
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line.contains("dependencies");
            // `[dependencies.agent-authority]` names the dependency in the header.
            if let Some(rest) = line.trim_matches(['[', ']']).split_once("dependencies.") {
                names.push(rest.1.trim().to_owned());
                in_dependencies = false;
            }
            continue;
        }
        if in_dependencies && let Some((key, _)) = line.split_once('=') {
            names.push(key.trim().trim_matches('"').to_owned());
        }
    }
    names
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_dependency_parser_sees_every_table() {
    let manifest = "[dependencies]\nserde = \"1\"\n[dev-dependencies]\nagent-daemon.workspace = true\n\
                    [target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n[dependencies.rustix]\nversion = \"1\"\n";
    assert_eq!(
        dependency_names(manifest),
        ["serde", "agent-daemon.workspace", "libc", "rustix"]
    );
}

#[test]
fn kernel_and_authority_crates_never_depend_on_the_daemon() {
    let root = workspace();
    for krate in LOWER_CRATES {
        let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap();
        let names = dependency_names(&manifest);
        assert!(!names.is_empty(), "{krate}: no dependencies parsed");
        assert!(
            names.iter().all(|n| !n.starts_with("agent-daemon")),
            "{krate} depends on agent-daemon: {names:?}"
        );
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        assert!(!files.is_empty());
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                !text.contains("agent_daemon"),
                "{} names the daemon crate",
                file.display()
            );
        }
    }
}
