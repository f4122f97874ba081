//! The system prompt a real model is sent first: who it is, where it works, what it can
//! use and which rules bind it.
//!
//! The prompt is two parts. The first is the role: [`BUILT_IN_ROLE`], or the text of a
//! `system_prompt` in `config.toml` / `--system-prompt-file`, which replaces it. The second
//! is always appended, whatever the first: the workspace root (absolute), each tool with
//! the first line of its description, and the approval rule of the session's mode (asked,
//! approved in advance by `--yes`, or refused by `--read-only`).

use std::path::Path;

use agent_core::tool::Definition;

use crate::approval::ApprovalMode;

/// The built-in role, used when no system prompt is configured.
pub const BUILT_IN_ROLE: &str = "You are a coding agent. You work in one workspace on the \
user's machine: you read and search its files and, when the task asks for it, change them \
through your tools. You cannot reach anything outside the workspace. Look before you \
change, keep changes to what the task needs, and end with a short account of what you did \
and what is left.";

/// The longest tool description line the prompt quotes, in characters.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// The system prompt for a session: `role` (none: [`BUILT_IN_ROLE`]), then the facts of
/// the workspace at `root`, the `tools` and the approval `mode`.
///
/// ```
/// use std::path::Path;
/// use coding_agent::approval::ApprovalMode;
/// use coding_agent::prompt::system_prompt;
///
/// let prompt = system_prompt(Some("Be terse."), Path::new("/home/dev/demo"), &[], ApprovalMode::ReadOnly);
/// assert!(prompt.starts_with("Be terse.\n\n"));
/// assert!(prompt.contains("Workspace root: /home/dev/demo"));
/// assert!(prompt.contains("read-only"));
/// ```
pub fn system_prompt(
    role: Option<&str>,
    root: &Path,
    tools: &[Definition],
    mode: ApprovalMode,
) -> String {
    let mut text = role.map_or(BUILT_IN_ROLE, str::trim).to_owned();
    text.push_str("\n\n");
    text.push_str(&format!(
        "Workspace root: {} (every path you give a tool is relative to it).\n\n",
        root.display()
    ));
    if tools.is_empty() {
        text.push_str("You have no tools in this session.\n\n");
    } else {
        text.push_str("Your tools:\n");
        for tool in tools {
            let first = tool.description().lines().next().unwrap_or("").trim();
            let mut line: String = first.chars().take(MAX_DESCRIPTION_CHARS).collect();
            if line.len() < first.len() {
                line.push('…');
            }
            text.push_str(&format!("- {}: {line}\n", tool.name()));
        }
        text.push('\n');
    }
    text.push_str(match mode {
        ApprovalMode::Ask => {
            "Rules: every tool call that changes something (a write) needs the user's approval, \
             asked for each call. A refusal is a refusal: do not repeat the call; try \
             something else or ask the user."
        }
        ApprovalMode::ApproveAll => {
            "Rules: the user approved every tool call that changes something in advance \
             (--yes), so your changes are applied without asking; make only the changes the \
             task needs."
        }
        ApprovalMode::ReadOnly => {
            "Rules: this session is read-only (--read-only): every tool call that changes \
             something is refused without asking. Do not try to change files; say what you \
             would change instead."
        }
    });
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::tool::{Effect, ReplaySafety};

    fn tool(name: &str, description: &str, effect: Effect) -> Definition {
        let replay = match effect {
            Effect::ReadOnly => ReplaySafety::Safe,
            _ => ReplaySafety::Idempotent,
        };
        Definition::builder(name, description)
            .effect(effect)
            .replay_safety(replay)
            .build()
            .unwrap()
    }

    fn tools() -> Vec<Definition> {
        vec![
            tool(
                "read_file",
                "Reads a file.\nMore detail the prompt leaves out.",
                Effect::ReadOnly,
            ),
            tool("write_file", "Writes a file.", Effect::Mutating),
        ]
    }

    const ROOT: &str = "/home/dev/demo";

    #[test]
    fn asking_states_the_role_root_tools_and_the_approval_rule() {
        let prompt = system_prompt(None, Path::new(ROOT), &tools(), ApprovalMode::Ask);
        assert_eq!(
            prompt,
            format!(
                "{BUILT_IN_ROLE}\n\n\
                 Workspace root: /home/dev/demo (every path you give a tool is relative to it).\n\n\
                 Your tools:\n\
                 - read_file: Reads a file.\n\
                 - write_file: Writes a file.\n\n\
                 Rules: every tool call that changes something (a write) needs the user's \
                 approval, asked for each call. A refusal is a refusal: do not repeat the \
                 call; try something else or ask the user.\n"
            )
        );
    }

    #[test]
    fn read_only_and_approve_all_state_their_rules() {
        let read_only = system_prompt(None, Path::new(ROOT), &tools(), ApprovalMode::ReadOnly);
        assert!(
            read_only.ends_with(
                "Rules: this session is read-only (--read-only): every tool call that changes \
                 something is refused without asking. Do not try to change files; say what you \
                 would change instead.\n"
            ),
            "{read_only}"
        );
        let approve_all = system_prompt(None, Path::new(ROOT), &tools(), ApprovalMode::ApproveAll);
        assert!(
            approve_all.ends_with(
                "Rules: the user approved every tool call that changes something in advance \
                 (--yes), so your changes are applied without asking; make only the changes \
                 the task needs.\n"
            ),
            "{approve_all}"
        );
        assert!(!approve_all.contains("refusal"), "{approve_all}");
    }

    #[test]
    fn a_configured_role_replaces_the_built_in_text_and_keeps_the_facts() {
        let prompt = system_prompt(
            Some("  You review code.\n"),
            Path::new(ROOT),
            &[],
            ApprovalMode::Ask,
        );
        assert!(prompt.starts_with("You review code.\n\nWorkspace root: /home/dev/demo"));
        assert!(!prompt.contains(BUILT_IN_ROLE));
        assert!(prompt.contains("You have no tools in this session."));
        assert!(prompt.contains("needs the user's approval"));
    }
}
