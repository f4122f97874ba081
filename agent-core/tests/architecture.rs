//! Architecture rules that the type system cannot express.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every source file of `agent-core/src`, as (path relative to `src`, text).
fn sources() -> Vec<(String, String)> {
    library_sources(Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// Every source file of a crate's library (`src/` without `main.rs` and `src/bin/`, which
/// are crate roots of their own), as (path relative to `src`, text).
fn library_sources(krate: &Path) -> Vec<(String, String)> {
    let src = krate.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files.retain(|path| {
        let relative = path.strip_prefix(&src).expect("under src");
        relative != Path::new("main.rs") && !relative.starts_with("bin")
    });
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let text = fs::read_to_string(&path).expect("readable");
            (relative, text)
        })
        .collect()
}

/// Kernel modules never depend on the composition runtime: the kernel executes graphs that
/// `compose!` built and must stay usable without it.
#[test]
fn kernel_modules_do_not_import_compose() {
    let mut checked = 0;
    for (relative, text) in sources() {
        // The starter is not kernel: it is beans (`Managed`) over the kernel, above compose.
        if matches!(
            relative.as_str(),
            "lib.rs" | "compose.rs" | "private.rs" | "starter.rs"
        ) {
            continue;
        }
        for forbidden in ["crate::compose", "crate::__private", "agent_macros"] {
            assert!(!text.contains(forbidden), "{relative} uses {forbidden}");
        }
        checked += 1;
    }
    assert!(
        checked >= 8,
        "expected every kernel module to be checked, found {checked}"
    );
}

/// Forbidden mechanisms: the graph is built by plain calls, never by registries.
#[test]
fn no_runtime_registries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for manifest in [
        "Cargo.toml",
        "agent-core/Cargo.toml",
        "agent-macros/Cargo.toml",
        "agent-compose/Cargo.toml",
    ] {
        let text = fs::read_to_string(root.join(manifest)).expect("manifest is readable");
        for forbidden in ["inventory", "linkme", "ctor"] {
            assert!(
                !text.lines().any(|l| l.trim_start().starts_with(forbidden)),
                "{manifest} depends on {forbidden}"
            );
        }
    }
}

/// The layers of `agent-core`, lowest first (docs/architecture.md, "Crates": message, tool,
/// interaction -> model -> stage -> event <- agent; compose beside, above the kernel). A
/// module may import modules of its own layer or a lower one, never a higher one; inside a
/// layer the imports must not form a loop. The first layer holds support modules that know
/// no kernel type. Submodules belong to the layer of their top module. A new top module must
/// be placed here, or the test fails.
const LAYERS: &[&[&str]] = &[
    &["future", "hash", "ident", "panic", "run_id", "text"],
    &["message", "tool", "interaction"],
    &["model"],
    &["stage"],
    &["event"],
    &["agent"],
    &["compose", "__private_v0_1"],
    // The starter's beans use the engine and the composition runtime; nothing uses them.
    &["starter"],
];

/// The pipeline of `agent-compose`, lowest first (its crate documentation): support modules,
/// then the descriptor and the chain (the format the parser writes, so below it although
/// they live in `transport/`), parse, the entry macros, resolve, plan, generate, and the
/// finisher that drives them. An entry names a module and its submodules; the longest entry
/// that matches a module decides its layer.
const COMPOSE_LAYERS: &[&[&str]] = &[
    &[
        "bean", "diag", "ident", "key", "location", "naming", "nesting", "runtime",
    ],
    &["transport::descriptor", "transport::chain"],
    &["attr"],
    &["transport"],
    &["graph"],
    &["plan"],
    &["codegen"],
    &["finish"],
];

/// The crates whose modules are also layered; every other member is checked for loops only.
const LAYERED_CRATES: &[(&str, &[&[&str]])] =
    &[("agent-core", LAYERS), ("agent-compose", COMPOSE_LAYERS)];

/// No module loop and no upward import anywhere in `agent-core/src`, at module granularity
/// (`stage::dispatch`, `agent::run`, ...).
#[test]
fn modules_form_a_layered_acyclic_graph() {
    let graph = Graph::of_sources(&sources());
    assert!(
        graph.modules.len() >= 30,
        "expected every module to be found, found {:?}",
        graph.modules
    );
    // The scan must see the edges it is meant to judge; these exist by design.
    for (from, to) in [
        ("agent::engine", "agent::driver"),
        ("agent::driver", "agent::run"),
        ("stage::plan", "stage::dispatch"),
        ("stage::dispatch", "stage::plan_id"),
        ("model", "tool::call"),
    ] {
        assert!(
            graph.edges.contains(&(from.to_owned(), to.to_owned())),
            "expected the edge {from} -> {to}; found {:#?}",
            graph.edges
        );
    }
    let problems = check_placed(&graph, LAYERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The phases of `agent-compose` import only the phases before them, and the scan sees the
/// edges that exist by design.
#[test]
fn the_compiler_phases_import_only_earlier_phases() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let graph = Graph::of_sources(&library_sources(&root.join("agent-compose")));
    for (from, to) in [
        ("finish", "graph"),
        ("finish", "codegen"),
        ("attr::expand", "transport::descriptor"),
        ("transport::descriptor", "bean"),
        ("graph", "transport::descriptor"),
        ("codegen", "plan"),
    ] {
        assert!(
            graph.edges.contains(&(from.to_owned(), to.to_owned())),
            "expected the edge {from} -> {to}; found {:#?}",
            graph.edges
        );
    }
    let problems = check_placed(&graph, COMPOSE_LAYERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No crate of the workspace has a loop between its modules (a loop means neither module
/// can be read, tested or moved without the other), and the layered crates keep their
/// layers. Binaries (`main.rs`, `src/bin/`) are crate roots of their own and name the
/// library by its crate name, so they add no edge.
#[test]
fn no_crate_has_a_module_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    let mut scanned = 0;
    for member in workspace_members() {
        let graph = Graph::of_sources(&library_sources(&root.join(&member)));
        assert!(!graph.modules.is_empty(), "{member} has no library sources");
        if graph.modules.len() > 3 {
            assert!(
                !graph.edges.is_empty(),
                "{member}: the scan found no import"
            );
            scanned += 1;
        }
        let found = match LAYERED_CRATES.iter().find(|(name, _)| *name == member) {
            Some((_, layers)) => check_placed(&graph, layers),
            None => loops(&graph.edges),
        };
        problems.extend(
            found
                .into_iter()
                .map(|problem| format!("{member}: {problem}")),
        );
    }
    assert!(
        scanned >= 10,
        "expected every crate to be scanned, {scanned} were"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The workspace members, as paths relative to the workspace root, in manifest order.
fn workspace_members() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace = fs::read_to_string(root.join("Cargo.toml")).expect("workspace manifest");
    let members = workspace
        .lines()
        .find_map(|line| line.trim().strip_prefix("members"))
        .expect("a one-line members list");
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

// ---- the checker ----

/// The layer of `module`: that of the longest entry naming it or one of its parents.
fn layer_of(module: &str, layers: &[&[&str]]) -> Option<usize> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(index, layer)| layer.iter().map(move |entry| (index, *entry)))
        .filter(|(_, entry)| {
            module == *entry
                || module
                    .strip_prefix(entry)
                    .is_some_and(|rest| rest.starts_with("::"))
        })
        .max_by_key(|(_, entry)| entry.len())
        .map(|(index, _)| index)
}

/// [`check`], plus every module of the graph (not only those with edges) that is in no
/// layer.
fn check_placed(graph: &Graph, layers: &[&[&str]]) -> Vec<String> {
    let mut problems = check(&graph.edges, layers);
    for module in graph.modules.iter().filter(|m| !m.is_empty()) {
        if layer_of(module, layers).is_none() {
            problems.push(format!("module {module} is in no layer"));
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// A problem with a module graph: every loop and every upward edge, as sentences.
fn check(edges: &BTreeSet<(String, String)>, layers: &[&[&str]]) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, to) in edges {
        match (layer_of(from, layers), layer_of(to, layers)) {
            (Some(a), Some(b)) if b > a => problems.push(format!(
                "upward import: {from} (layer {a}) imports {to} (layer {b})"
            )),
            (Some(_), Some(_)) => {}
            _ => {
                for module in [from, to] {
                    if layer_of(module, layers).is_none() {
                        problems.push(format!("module {module} is in no layer"));
                    }
                }
            }
        }
    }
    problems.extend(loops(edges));
    problems.sort();
    problems.dedup();
    problems
}

/// Every loop of a module graph, as a sentence.
fn loops(edges: &BTreeSet<(String, String)>) -> Vec<String> {
    cycles(edges)
        .into_iter()
        .map(|cycle| format!("module loop: {}", cycle.join(" -> ")))
        .collect()
}

/// One loop per strongly connected component with more than one module (or a self edge),
/// written as a closed path.
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    let mut found = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for &start in next.keys() {
        if done.contains(start) {
            continue;
        }
        // Depth-first search with an explicit stack of (module, next child index).
        let mut path: Vec<&str> = vec![start];
        let mut index: Vec<usize> = vec![0];
        let mut on_path: BTreeSet<&str> = BTreeSet::from([start]);
        while let Some(&top) = path.last() {
            let i = index.last_mut().expect("same length as path");
            if let Some(&child) = next[top].get(*i) {
                *i += 1;
                if on_path.contains(child) {
                    let from = path.iter().position(|&m| m == child).expect("on path");
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|m| (*m).to_owned()).collect();
                    cycle.push(child.to_owned());
                    found.push(cycle);
                } else if !done.contains(child) {
                    path.push(child);
                    index.push(0);
                    on_path.insert(child);
                }
            } else {
                done.insert(top);
                on_path.remove(top);
                path.pop();
                index.pop();
            }
        }
    }
    found
}

/// The modules of a crate and the imports between them. An edge `a -> b` means a names
/// something of b (through `use` or an inline `crate::`/`super::`/`self::` path). A module
/// declaring and re-exporting its own submodules is containment, not an edge. A path through
/// a re-export counts as an edge to the module that defines the item, so a facade cannot
/// hide a loop. Comments (including doc links) and `#[cfg(test)]` items are not
/// dependencies and are skipped.
struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeSet<(String, String)>,
}

/// One path a module names: its absolute segments, and whether it is re-exported under a
/// name (then `alias` is that name).
struct Named {
    path: Vec<String>,
    reexported_as: Option<String>,
}

impl Graph {
    fn of_sources(files: &[(String, String)]) -> Graph {
        let mut modules = BTreeSet::new();
        let mut named: BTreeMap<String, Vec<Named>> = BTreeMap::new();
        let texts: Vec<(String, Vec<String>)> = files
            .iter()
            .map(|(file, text)| (module_of(file), tokens(&without_tests(&strip(text)))))
            .collect();
        for (module, _) in &texts {
            modules.insert(module.clone());
        }
        for (module, tokens) in &texts {
            named.insert(module.clone(), paths(module, tokens, &modules));
        }
        // Re-exports: module -> name -> absolute path of what it re-exports.
        let mut reexports: BTreeMap<&str, BTreeMap<&str, &[String]>> = BTreeMap::new();
        for (module, list) in &named {
            for item in list {
                if let Some(alias) = &item.reexported_as {
                    reexports
                        .entry(module)
                        .or_default()
                        .insert(alias, &item.path);
                }
            }
        }
        let resolve = |path: &[String]| -> Option<String> {
            let mut path = path.to_vec();
            for _ in 0..8 {
                let (module, rest) = longest_module(&path, &modules)?;
                let Some(name) = rest.first() else {
                    return Some(module);
                };
                match reexports
                    .get(module.as_str())
                    .and_then(|r| r.get(name.as_str()))
                {
                    Some(target) if target[..] != path[..] => {
                        let mut next = target.to_vec();
                        next.extend_from_slice(&rest[1..]);
                        path = next;
                    }
                    _ => return Some(module),
                }
            }
            None
        };
        let mut edges = BTreeSet::new();
        for (module, list) in &named {
            for item in list {
                let Some(target) = resolve(&item.path) else {
                    continue;
                };
                let contained = target == *module
                    || module.is_empty()
                    || target.starts_with(&format!("{module}::"));
                if !contained && !target.is_empty() {
                    edges.insert((module.clone(), target));
                }
            }
        }
        Graph { modules, edges }
    }
}

/// `stage/dispatch.rs` -> `stage::dispatch`; `lib.rs` is the crate root (`""`);
/// `private.rs` is mounted as `__private_v0_1`.
fn module_of(file: &str) -> String {
    let file = file.strip_suffix(".rs").unwrap_or(file);
    let file = file.strip_suffix("/mod").unwrap_or(file);
    match file {
        "lib" => String::new(),
        "private" => "__private_v0_1".to_owned(),
        other => other.replace('/', "::"),
    }
}

/// The longest known module that prefixes `path`, and the segments after it.
fn longest_module(path: &[String], modules: &BTreeSet<String>) -> Option<(String, Vec<String>)> {
    (0..=path.len()).rev().find_map(|n| {
        let candidate = path[..n].join("::");
        modules
            .contains(&candidate)
            .then(|| (candidate, path[n..].to_vec()))
    })
}

/// `text` with comments, string and character literals replaced by spaces.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push(' ');
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push(' ');
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push(' ');
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `text` without the items marked `#[cfg(test)]`: tests may reach anywhere.
fn without_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let brace = after.find('{');
        let semi = after.find(';');
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = after.len();
                for (k, ch) in after[b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => s + 1,
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Identifiers (with `r#` dropped) and punctuation, `::` as one token.
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if word == "r" && chars.get(i) == Some(&'#') {
                i += 1;
                continue;
            }
            out.push(word);
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_owned());
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Every path `module` names through `use` declarations (expanded, with their re-export
/// names) and through inline paths starting with `crate`, `super` or `self`, made absolute.
fn paths(module: &str, tokens: &[String], modules: &BTreeSet<String>) -> Vec<Named> {
    let here: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    let child = |name: &str| {
        let mut path = here.clone();
        path.push(name.to_owned());
        modules.contains(&path.join("::"))
    };
    // Makes a path absolute; `None` for paths into other crates.
    let absolute = |segments: &[String]| -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut path = match first.as_str() {
            "crate" => Vec::new(),
            "self" => here.clone(),
            "super" => {
                let mut base = here.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name if child(name) => {
                let mut path = here.clone();
                path.push(name.to_owned());
                path.extend(segments[1..].iter().cloned());
                return Some(path);
            }
            _ => return None,
        };
        path.extend(segments[1..].iter().cloned());
        Some(path)
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let public = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
            let end = tokens[i..]
                .iter()
                .position(|t| t == ";")
                .map_or(tokens.len(), |p| i + p);
            for (segments, alias) in expand_use(&tokens[i + 1..end]) {
                if let Some(path) = absolute(&segments) {
                    out.push(Named {
                        path,
                        reexported_as: alias.filter(|_| public),
                    });
                }
            }
            i = end + 1;
            continue;
        }
        let starts_path = matches!(tokens[i].as_str(), "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts_path {
            let mut segments = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens
                    .get(j + 1)
                    .is_some_and(|t| t.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                segments.push(tokens[j + 1].clone());
                j += 2;
            }
            if let Some(path) = absolute(&segments) {
                out.push(Named {
                    path,
                    reexported_as: None,
                });
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Expands a use tree (`a::{b, c::{self, d as e}, f::*}`) into (segments, name bound).
/// A glob binds no name; `self` stands for the path before it.
fn expand_use(tree: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(tree: &[String], prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        for part in split_top(tree, ",") {
            let mut path = prefix.to_vec();
            let mut k = 0;
            if part.first().is_some_and(|t| t == "::") {
                k = 1;
            }
            while k < part.len() {
                let t = &part[k];
                if t == "{" {
                    let close =
                        part.len() - 1 - part.iter().rev().position(|t| t == "}").unwrap_or(0);
                    walk(&part[k + 1..close], &path, out);
                    break;
                } else if t == "*" {
                    out.push((path.clone(), None));
                    break;
                } else if t == "as" {
                    let alias = part.get(k + 1).cloned();
                    out.push((path.clone(), alias.filter(|a| a != "_")));
                    break;
                } else if t == "::" {
                    k += 1;
                    continue;
                } else if t == "self" && !path.is_empty() {
                    // `a::{self}` names `a` itself.
                } else {
                    path.push(t.clone());
                }
                k += 1;
                if k == part.len() {
                    let name = path.last().cloned();
                    out.push((path.clone(), name));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &[], &mut out);
    out
}

/// Splits `tokens` at `separator` outside braces.
fn split_top<'a>(tokens: &'a [String], separator: &str) -> Vec<&'a [String]> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (k, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            s if s == separator && depth == 0 => {
                parts.push(&tokens[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    if start < tokens.len() {
        parts.push(&tokens[start..]);
    }
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

// ---- the checker is itself tested, so the rule above can fail ----

fn edge_set(edges: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    edges
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn the_checker_finds_a_loop() {
    let layers: &[&[&str]] = &[&["low"], &["high"]];
    let edges = edge_set(&[
        ("high::a", "high::b"),
        ("high::b", "high::c"),
        ("high::c", "high::a"),
        ("high::c", "low"),
    ]);
    let problems = check(&edges, layers);
    assert_eq!(
        problems,
        ["module loop: high::a -> high::b -> high::c -> high::a"]
    );
    let mutual = edge_set(&[("low::x", "low::y"), ("low::y", "low::x")]);
    assert_eq!(
        check(&mutual, layers),
        ["module loop: low::x -> low::y -> low::x"]
    );
}

#[test]
fn the_checker_finds_an_upward_edge_and_an_unplaced_module() {
    let layers: &[&[&str]] = &[&["low"], &["high"]];
    let edges = edge_set(&[("high", "low"), ("low::leaf", "high::top")]);
    assert_eq!(
        check(&edges, layers),
        ["upward import: low::leaf (layer 0) imports high::top (layer 1)"]
    );
    let unplaced = edge_set(&[("high", "nowhere")]);
    assert_eq!(check(&unplaced, layers), ["module nowhere is in no layer"]);
    assert!(check(&edge_set(&[("high", "low")]), layers).is_empty());
}

#[test]
fn the_longest_layer_entry_places_a_module() {
    let layers: &[&[&str]] = &[&["t::low"], &["a"], &["t"]];
    assert_eq!(layer_of("t::low", layers), Some(0));
    assert_eq!(layer_of("t::low::x", layers), Some(0));
    assert_eq!(layer_of("t::other", layers), Some(2));
    assert_eq!(layer_of("t", layers), Some(2));
    assert_eq!(layer_of("tx", layers), None);
    let edges = edge_set(&[("a", "t::low"), ("t::low", "a"), ("t", "a")]);
    assert_eq!(
        check(&edges, layers),
        [
            "module loop: a -> t::low -> a",
            "upward import: t::low (layer 0) imports a (layer 1)"
        ]
    );
    let graph = Graph {
        modules: ["", "a", "elsewhere"].map(String::from).into(),
        edges: BTreeSet::new(),
    };
    assert_eq!(
        check_placed(&graph, layers),
        ["module elsewhere is in no layer"]
    );
}

#[test]
fn the_scanner_resolves_uses_reexports_and_inline_paths() {
    let files = [
        ("lib.rs", "mod a; mod b; pub use a::Thing;"),
        (
            "a.rs",
            "mod inner;\npub use inner::{Thing, Other as Renamed};\n/// [`crate::b::X`] in a doc link is not an import\nfn f() { let s = \"crate::b::Y\"; }",
        ),
        ("a/inner.rs", "pub struct Thing; pub struct Other;"),
        (
            "b.rs",
            "use crate::a::{Thing, Renamed};\nfn g() -> crate::Thing { super::b::h() }\n#[cfg(test)]\nmod tests { use crate::a::inner::Other; }",
        ),
        ("b/deep.rs", "use super::super::a::inner::*;"),
    ];
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
        .collect();
    let graph = Graph::of_sources(&files);
    let edges: Vec<(String, String)> = graph.edges.into_iter().collect();
    let expected: Vec<(String, String)> = [("b", "a::inner"), ("b::deep", "a::inner")]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(edges, expected);
    // A loop through a facade is still a loop.
    let looped = [
        ("lib.rs", "mod s;"),
        ("s.rs", "mod p; mod q; pub use p::P; pub use q::Q;"),
        ("s/p.rs", "use super::Q; pub struct P;"),
        ("s/q.rs", "use crate::s::P; pub struct Q;"),
    ];
    let looped: Vec<(String, String)> = looped
        .iter()
        .map(|(f, t)| ((*f).to_owned(), (*t).to_owned()))
        .collect();
    let problems = check(&Graph::of_sources(&looped).edges, &[&["s"]]);
    assert_eq!(problems, ["module loop: s::p -> s::q -> s::p"]);
}

/// What each workspace crate is, for the crate directions of docs/architecture.md
/// ("Crates"). A new member must be placed here, so its direction is decided, not defaulted.
const KERNEL_CRATES: &[&str] = &["agent-core", "agent-macros", "agent-compose"];
const HOST_CRATES: &[&str] = &[
    "agent-authority",
    "agent-protocol",
    "agent-daemon",
    "agent-endpoint",
    "agent-server",
    "agent-client",
    "agent-client-grpc",
    "agent-restate",
    "agent-mcp",
    "agent-logging",
    "coding-agent",
];
const TOOL_CRATES: &[&str] = &[
    "fixtures",
    "renamed-dependency",
    "gen-graph",
    "ui-tests",
    "examples",
];

/// A crate's package name and the packages it depends on (normal, dev, build and target
/// dependencies alike; `package = ".."` renames resolved), from the manifest text.
fn manifest_deps(text: &str) -> (String, BTreeSet<String>) {
    let mut name = String::new();
    let mut deps = BTreeSet::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = value.trim().trim_matches('"').to_owned();
        }
        let dependency_table = section == "dependencies"
            || section.ends_with(".dependencies")
            || section.ends_with("-dependencies");
        if !dependency_table || key.starts_with('#') {
            continue;
        }
        let dep = key.split('.').next().unwrap_or(key).trim_matches('"');
        let renamed = value.split("package").nth(1).and_then(|rest| {
            let rest = rest.trim_start().strip_prefix('=')?.trim_start();
            rest.strip_prefix('"')?.split('"').next()
        });
        deps.insert(renamed.unwrap_or(dep).to_owned());
    }
    (name, deps)
}

/// Every violation of the crate directions among `crates` (name -> dependencies): a
/// kernel crate depending on a host crate, the protocol or a client crate depending on a
/// kernel crate, the client seam depending on anything at all (it is standard library
/// only), or a crate that is not placed in any of the three groups.
fn crate_direction_violations(crates: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut violations = Vec::new();
    for (name, deps) in crates {
        let placed = [KERNEL_CRATES, HOST_CRATES, TOOL_CRATES]
            .iter()
            .any(|group| group.contains(&name.as_str()));
        if !placed {
            violations.push(format!("{name} is placed in no crate group"));
        }
        for dep in deps {
            if KERNEL_CRATES.contains(&name.as_str()) && HOST_CRATES.contains(&dep.as_str()) {
                violations.push(format!("kernel crate {name} depends on host crate {dep}"));
            }
            if name == "agent-protocol" && KERNEL_CRATES.contains(&dep.as_str()) {
                violations.push(format!("agent-protocol depends on kernel crate {dep}"));
            }
            if name == "agent-client-grpc" && KERNEL_CRATES.contains(&dep.as_str()) {
                violations.push(format!("agent-client-grpc depends on kernel crate {dep}"));
            }
            if name == "agent-client" {
                violations.push(format!("agent-client depends on {dep}"));
            }
            // Clients depend on the endpoint crate: no kernel, no host seam, no transport.
            if name == "agent-endpoint"
                && (KERNEL_CRATES.contains(&dep.as_str())
                    || ["agent-daemon", "agent-server", "tonic"].contains(&dep.as_str()))
            {
                violations.push(format!("agent-endpoint depends on {dep}"));
            }
            if name == "agent-authority" && dep == "agent-daemon" {
                violations.push("agent-authority depends on agent-daemon".to_owned());
            }
        }
    }
    violations
}

/// The kernel crates never depend on a host crate, and the protocol crate never depends on
/// the kernel, read from every workspace member's manifest.
#[test]
fn crates_point_from_the_host_to_the_kernel() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates = BTreeMap::new();
    for member in workspace_members() {
        let text = fs::read_to_string(root.join(&member).join("Cargo.toml")).expect(&member);
        let (name, deps) = manifest_deps(&text);
        assert!(!name.is_empty(), "{member} names no package");
        crates.insert(name, deps);
    }
    for expected in KERNEL_CRATES.iter().chain(HOST_CRATES) {
        assert!(crates.contains_key(*expected), "{expected} is not a member");
    }
    assert_eq!(crate_direction_violations(&crates), Vec::<String>::new());
}

/// No source of a lower crate names a crate above it, not even in a path a manifest rule
/// could miss (`extern crate`, a doc example that is compiled): the kernel crates name no
/// host crate, and the run authority never names the daemon.
#[test]
fn lower_crates_never_name_the_crates_above_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let hosts: Vec<String> = HOST_CRATES.iter().map(|c| c.replace('-', "_")).collect();
    let rules: Vec<(&str, Vec<String>)> = KERNEL_CRATES
        .iter()
        .map(|krate| (*krate, hosts.clone()))
        .chain([("agent-authority", vec!["agent_daemon".to_owned()])])
        .chain([(
            "agent-client",
            KERNEL_CRATES
                .iter()
                .chain(HOST_CRATES)
                .filter(|c| **c != "agent-client")
                .map(|c| format!("{}::", c.replace('-', "_")))
                .collect(),
        )])
        .collect();
    for (krate, above) in rules {
        let mut files = Vec::new();
        rust_files(&root.join(krate).join("src"), &mut files);
        assert!(!files.is_empty(), "{krate} has no sources");
        for file in files {
            let text = fs::read_to_string(&file).expect("readable");
            for name in &above {
                assert!(
                    !text.contains(name.as_str()),
                    "{} names {name}",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_crate_checker_finds_wrong_directions_and_unplaced_crates() {
    let (name, deps) = manifest_deps(
        "[package]\nname = \"agent-core\"\n[dependencies]\nserde.workspace = true\n\
         auth = { package = \"agent-authority\", path = \"../agent-authority\" }\n\
         [target.'cfg(unix)'.dev-dependencies]\nagent-mcp = { path = \"../agent-mcp\" }\n",
    );
    assert_eq!(name, "agent-core");
    assert_eq!(
        deps,
        ["agent-authority", "agent-mcp", "serde"]
            .map(String::from)
            .into()
    );
    let mut crates = BTreeMap::from([(name, deps)]);
    crates.insert(
        "agent-protocol".into(),
        BTreeSet::from(["agent-core".to_owned()]),
    );
    crates.insert("agent-new".into(), BTreeSet::new());
    crates.insert("agent-client".into(), BTreeSet::from(["serde".to_owned()]));
    crates.insert(
        "agent-client-grpc".into(),
        BTreeSet::from(["agent-client".to_owned(), "agent-compose".to_owned()]),
    );
    crates.insert(
        "agent-authority".into(),
        BTreeSet::from(["agent-daemon".to_owned()]),
    );
    assert_eq!(
        crate_direction_violations(&crates),
        [
            "agent-authority depends on agent-daemon",
            "agent-client depends on serde",
            "agent-client-grpc depends on kernel crate agent-compose",
            "kernel crate agent-core depends on host crate agent-authority",
            "kernel crate agent-core depends on host crate agent-mcp",
            "agent-new is placed in no crate group",
            "agent-protocol depends on kernel crate agent-core",
        ]
    );
}

/// The client seam's manifest has no dependency table at all: a UI takes it without any
/// transport, runtime or serializer (docs/client.md).
#[test]
fn the_client_seam_depends_on_the_standard_library_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = fs::read_to_string(root.join("agent-client/Cargo.toml")).expect("manifest");
    let (name, deps) = manifest_deps(&text);
    assert_eq!(name, "agent-client");
    assert_eq!(deps, BTreeSet::new());
    for line in text.lines().map(str::trim) {
        assert!(
            !(line.starts_with('[') && line.contains("dependencies")),
            "agent-client declares {line}"
        );
    }
}

// ---- citations stay inside the repository ----

/// Every `.rs` and `.md` file of the repository (build output, VCS data and installed npm
/// packages aside), as (path relative to the root, text).
fn repository_texts() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("readable directory") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | ".git" | "node_modules") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("workspace root");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let relative = path
                .strip_prefix(&root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            (relative, fs::read_to_string(&path).expect("readable"))
        })
        .collect()
}

/// Every citation in `text` that leads out of the repository, as `line: why`. `headings`
/// maps each docs page to its headings, so that a citation of a page's heading (the page's
/// path, then the heading in double quotes) must name one that exists; a heading may be
/// cited by its beginning.
///
/// Out of the repository: a path into the shared design and reference notes beside the
/// checkout or the machine's work tree, a document of the original system's semantics, the
/// upper-case design files, and any numbered section (the word, `§`, or "reference" before
/// a number): no page of the repository numbers its sections, so such a number points
/// elsewhere. An RFC's numbered section is a public standard and allowed.
fn citations_leaving_the_repository(
    text: &str,
    headings: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    // Built from pieces, so that this function's own source does not match them.
    let paths = [
        ["..", "/shared"].concat(),
        ["/wo", "rk/"].concat(),
        ["refer", "ence/"].concat(),
        ["ARCHI", "TECTURE"].concat(),
        ["API", ".md"].concat(),
    ];
    let numbered = [
        ["sec", "tion "].concat(),
        ["sec", "tions "].concat(),
        ["refer", "ence "].concat(),
        ["refer", "ence sec", "tion "].concat(),
        "\u{a7}".to_owned(),
    ];
    let spice = ["spi", "ce-"].concat();
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let number = number + 1;
        for path in &paths {
            if line.contains(path.as_str()) {
                found.push(format!("{number}: cites {path}"));
            }
        }
        for (at, _) in line.match_indices(spice.as_str()) {
            let word: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .collect();
            if word.contains("semantics") || word.ends_with(".md") {
                found.push(format!("{number}: cites {word}"));
            }
        }
        for marker in &numbered {
            for (at, _) in line.match_indices(marker.as_str()) {
                let after = line[at + marker.len()..].trim_start();
                let before = &line[..at];
                let rfc = before
                    .rsplit_once("RFC ")
                    .is_some_and(|(_, rest)| rest.trim().chars().all(|c| c.is_ascii_digit()));
                if after.starts_with(|c: char| c.is_ascii_digit()) && !rfc {
                    found.push(format!(
                        "{number}: cites a numbered section ({})",
                        marker.trim()
                    ));
                }
            }
        }
        for (at, _) in line.match_indices("docs/") {
            let rest = &line[at + "docs/".len()..];
            let Some(end) = rest.find(".md") else {
                continue;
            };
            let page = &rest[..end];
            if page.is_empty() || !page.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                continue;
            }
            let after = &rest[end + ".md".len()..];
            let Some(sections) = headings.get(page) else {
                found.push(format!(
                    "{number}: cites docs/{page}.md, which does not exist"
                ));
                continue;
            };
            // The page, then a comma or parenthesis and the heading in quotes.
            let lead = after.trim_start_matches([',', ' ', '(', '`']);
            if (1..=4).contains(&(after.len() - lead.len()))
                && let Some(quoted) = lead.strip_prefix('"')
                && let Some((heading, _)) = quoted.split_once('"')
                && !sections.iter().any(|s| s.starts_with(heading))
            {
                found.push(format!(
                    "{number}: cites docs/{page}.md, \"{heading}\", which has no such heading"
                ));
            }
        }
    }
    found
}

/// Each `docs/*.md` page (by name, without `.md`) and the titles of its headings.
fn doc_headings(texts: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    texts
        .iter()
        .filter_map(|(path, text)| {
            let page = path.strip_prefix("docs/")?.strip_suffix(".md")?;
            let mut fenced = false;
            let mut titles = BTreeSet::new();
            for line in text.lines() {
                if line.starts_with("```") {
                    fenced = !fenced;
                } else if !fenced && line.starts_with('#') {
                    titles.insert(line.trim_start_matches('#').trim().to_owned());
                }
            }
            Some((page.to_owned(), titles))
        })
        .collect()
}

/// A reader finds every rule in the repository: no `.rs` or `.md` file cites a document
/// outside it, and a citation of a docs page's heading names a heading that exists.
#[test]
fn no_file_cites_outside_the_repository() {
    let texts = repository_texts();
    assert!(
        texts.len() >= 300,
        "expected every source and page, found {}",
        texts.len()
    );
    let headings = doc_headings(&texts);
    assert!(headings.contains_key("architecture") && headings.contains_key("daemon"));
    let mut problems = Vec::new();
    for (path, text) in &texts {
        for problem in citations_leaving_the_repository(text, &headings) {
            problems.push(format!("{path}:{problem}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_citation_checker_finds_each_kind_of_citation() {
    let headings = BTreeMap::from([("daemon".to_owned(), BTreeSet::from(["Sessions".to_owned()]))]);
    let text: [String; 5] = [
        [
            "//! ok: do",
            "cs/daemon.md, \"Sessions\"; RFC 4648 section 5; 1.3; spice-agent; do",
            "cs/daemon.md (\"Sess\")",
        ]
        .concat(),
        ["//! the contract is sec", "tion 2.4"].concat(),
        ["see \u{a7}", "8.5 and refer", "ence 4.1"].concat(),
        ["`../sha", "red/x` and spi", "ce-host-semantics"].concat(),
        ["do", "cs/daemon.md (\"Ledger\") and do", "cs/nowhere.md"].concat(),
    ];
    let text = text.join("\n");
    assert_eq!(
        citations_leaving_the_repository(&text, &headings),
        [
            "2: cites a numbered section (section)",
            "3: cites a numbered section (reference)",
            "3: cites a numbered section (\u{a7})",
            &["4: cites ..", "/shared"].concat(),
            &["4: cites spi", "ce-host-semantics"].concat(),
            &[
                "5: cites do",
                "cs/daemon.md, \"Ledger\", which has no such heading"
            ]
            .concat(),
            &["5: cites do", "cs/nowhere.md, which does not exist"].concat(),
        ]
    );
}

/// The workspace's layers, lowest first, by package name (docs/architecture.md, "Crates").
const CRATE_LAYERS: &[(&str, &[&str])] = &[
    ("kernel", &["agent-core"]),
    ("compiler", &["agent-macros", "agent-compose"]),
    (
        "protocol and endpoint",
        &["agent-protocol", "agent-endpoint"],
    ),
    (
        "host",
        &[
            "agent-authority",
            "agent-daemon",
            "agent-server",
            "agent-mcp",
            "agent-logging",
        ],
    ),
    (
        "clients",
        &["agent-client", "agent-client-grpc", "agent-restate"],
    ),
    ("product", &["coding-agent", "examples"]),
    (
        "tooling",
        &["fixtures", "renamed-dependency", "gen-graph", "ui-tests"],
    ),
];

/// Where each name of `names` stands in [`CRATE_LAYERS`], or why the order is wrong.
fn layer_order_problems<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut highest = (0, "");
    for name in names {
        let Some(layer) = CRATE_LAYERS.iter().position(|(_, c)| c.contains(&name)) else {
            problems.push(format!("{name} is in no layer"));
            continue;
        };
        if layer < highest.0 {
            problems.push(format!(
                "{name} ({}) comes after {} ({})",
                CRATE_LAYERS[layer].0, highest.1, CRATE_LAYERS[highest.0].0
            ));
        } else {
            highest = (layer, name);
        }
    }
    problems
}

/// `Cargo.toml`'s members and the crate list of docs/architecture.md are in layer order,
/// so a reader meets each crate after the crates it builds on.
#[test]
fn members_and_the_crate_list_are_in_layer_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let packages: Vec<String> = workspace_members()
        .iter()
        .map(|member| {
            let text = fs::read_to_string(root.join(member).join("Cargo.toml")).expect("manifest");
            manifest_deps(&text).0
        })
        .collect();
    let placed: usize = CRATE_LAYERS.iter().map(|(_, c)| c.len()).sum();
    assert_eq!(packages.len(), placed, "every member is in one layer");
    let problems = layer_order_problems(packages.iter().map(String::as_str));
    assert!(problems.is_empty(), "Cargo.toml members: {problems:?}");
    let doc = fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    let list = doc
        .split("## Crates")
        .nth(1)
        .and_then(|rest| rest.split("```").nth(1))
        .expect("a fenced crate list under \"Crates\"");
    let listed: Vec<&str> = list
        .lines()
        .filter(|line| !line.starts_with([' ', '#']))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(listed.len() >= 16, "the crate list names {listed:?}");
    let problems = layer_order_problems(listed);
    assert!(problems.is_empty(), "docs/architecture.md: {problems:?}");
    assert_eq!(
        layer_order_problems(["agent-client", "agent-core", "nowhere"]),
        [
            "agent-core (kernel) comes after agent-client (clients)",
            "nowhere is in no layer"
        ]
    );
}
