//! The approval prompt: what a mutating call would do, in text a terminal can show safely.
//!
//! A `write_file` call is shown with its path, the new size, whether it creates or
//! overwrites, and a bounded unified diff against the current content (read through the
//! workspace root, so the preview is as confined as the tool). Any other mutating tool
//! (MCP tools included) is shown with its name and its arguments as compact JSON, bounded.
//! Every piece that comes from the model or a tool server has its control characters (and
//! the Unicode controls that reorder text) escaped, so a prompt can never move the cursor,
//! clear the screen or disguise what it shows.

use std::borrow::Cow;
use std::fs;
use std::io::{self, Read};
use std::time::Duration;

use serde_json::Value;
use similar::TextDiff;

use crate::workspace::{MAX_WRITE_BYTES, WorkspaceRoot};

/// Most diff lines a prompt shows.
pub const MAX_DIFF_LINES: usize = 40;
/// Most bytes of diff a prompt shows.
pub const MAX_DIFF_BYTES: usize = 4096;
/// Most bytes of one diff line (a minified file would otherwise fill the whole budget).
pub const MAX_DIFF_LINE_BYTES: usize = 240;
/// Most bytes of a tool's JSON arguments a prompt shows.
pub const MAX_ARGUMENT_BYTES: usize = 1024;
/// How long the diff may take before it settles for a coarser (still correct) result.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);

/// The prompt for a call of `name` with `arguments`; `root` confines the read of the file a
/// `write_file` would replace. Blocking (it may read a file of up to 1 MiB and diff it).
pub fn describe(root: &WorkspaceRoot, name: &str, arguments: &Value) -> String {
    let write = (name == "write_file")
        .then(|| {
            let path = arguments.get("path")?.as_str()?;
            let content = arguments.get("content")?.as_str()?;
            Some((path, content))
        })
        .flatten();
    let prompt = match write {
        Some((path, content)) => describe_write(root, path, content),
        None => describe_call(name, arguments),
    };
    // A prompt is trimmed text (the interaction contract); a diff line may end in spaces.
    prompt.trim_end().to_owned()
}

/// Any mutating call: its name and its arguments as compact JSON, bounded and escaped.
pub fn describe_call(name: &str, arguments: &Value) -> String {
    // serde_json escapes control characters inside strings; `escape` catches the rest.
    let json = serde_json::to_string(arguments).unwrap_or_else(|_| "?".to_owned());
    let shown = match json.len() <= MAX_ARGUMENT_BYTES {
        true => json,
        false => format!("{}…", &json[..char_floor(&json, MAX_ARGUMENT_BYTES)]),
    };
    format!("Allow `{}`?\narguments: {}", escape(name), escape(&shown))
}

/// What the current file is, as far as the preview is concerned.
enum Current {
    /// Nothing at the path: the write creates the file.
    Missing,
    /// A text file of at most [`MAX_WRITE_BYTES`].
    Text(String),
    /// A file the preview does not diff: too large or not UTF-8.
    Opaque { size: u64, why: &'static str },
    /// Something the tool will refuse to replace (a directory, a device...).
    NotAFile(&'static str),
    /// The file could not be inspected.
    Unreadable(&'static str),
}

fn describe_write(root: &WorkspaceRoot, path: &str, content: &str) -> String {
    let shown_path = escape(path);
    let size = human_size(content.len() as u64);
    let resolved = match root.resolve(path) {
        Ok(resolved) => resolved,
        Err(refusal) => {
            return format!(
                "Allow `write_file` on `{shown_path}` ({size})?\nthe workspace refuses this path \
                 ({}), so the tool will refuse the write",
                escape(&refusal.to_string())
            );
        }
    };
    let too_large = content.len() > MAX_WRITE_BYTES;
    let current = current(&resolved);
    let mut prompt = match &current {
        Current::Missing => format!("Allow `write_file` to create `{shown_path}` ({size})?"),
        Current::Text(old) => format!(
            "Allow `write_file` to overwrite `{shown_path}` ({size}, replacing {})?",
            human_size(old.len() as u64)
        ),
        Current::Opaque { size: old, .. } => format!(
            "Allow `write_file` to overwrite `{shown_path}` ({size}, replacing {})?",
            human_size(*old)
        ),
        Current::NotAFile(what) => {
            return format!(
                "Allow `write_file` on `{shown_path}` ({size})?\n`{shown_path}` is {what}, so \
                 the tool will refuse the write"
            );
        }
        Current::Unreadable(reason) => format!(
            "Allow `write_file` to write `{shown_path}` ({size})?\nthe current file cannot be \
             read ({reason}); no diff shown"
        ),
    };
    if too_large {
        prompt.push_str(&format!(
            "\nthe content is over {}, so the tool will refuse the write",
            human_size(MAX_WRITE_BYTES as u64)
        ));
        return prompt;
    }
    let old = match &current {
        Current::Missing => "",
        Current::Text(old) => old.as_str(),
        Current::Opaque { why, .. } => {
            prompt.push_str(&format!("\nthe current file is {why}; no diff shown"));
            return prompt;
        }
        Current::NotAFile(_) | Current::Unreadable(_) => return prompt,
    };
    if old == content {
        prompt.push_str("\n(no change: the content is the same)");
        return prompt;
    }
    prompt.push('\n');
    prompt.push_str(&diff_preview(old, content));
    prompt
}

/// Reads what the write would replace, bounded by [`MAX_WRITE_BYTES`].
fn current(path: &std::path::Path) -> Current {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Current::Missing,
        Err(error) => return Current::Unreadable(short_reason(&error)),
    };
    if meta.is_dir() {
        return Current::NotAFile("a directory");
    }
    if !meta.is_file() {
        return Current::NotAFile("not a regular file");
    }
    if meta.len() > MAX_WRITE_BYTES as u64 {
        return Current::Opaque {
            size: meta.len(),
            why: "too large to compare",
        };
    }
    let mut bytes = Vec::new();
    let read = fs::File::open(path).and_then(|file| {
        file.take(MAX_WRITE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
    });
    if let Err(error) = read {
        return Current::Unreadable(short_reason(&error));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Current::Text(text),
        Err(error) => Current::Opaque {
            size: error.as_bytes().len() as u64,
            why: "not UTF-8 text",
        },
    }
}

fn short_reason(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::NotFound => "not found",
        _ => "I/O error",
    }
}

/// A unified diff of `old` → `new` (context 3), at most [`MAX_DIFF_LINES`] lines and
/// [`MAX_DIFF_BYTES`] bytes, then `… N more lines`; every line escaped and cut at
/// [`MAX_DIFF_LINE_BYTES`].
pub fn diff_preview(old: &str, new: &str) -> String {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let text = diff.unified_diff().context_radius(3).to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut shown = String::new();
    let mut count = 0;
    for line in &lines {
        let line = escape(line);
        let line = match line.len() <= MAX_DIFF_LINE_BYTES {
            true => line,
            false => Cow::Owned(format!(
                "{}…",
                &line[..char_floor(&line, MAX_DIFF_LINE_BYTES)]
            )),
        };
        if count == MAX_DIFF_LINES || shown.len() + line.len() + 1 > MAX_DIFF_BYTES {
            break;
        }
        shown.push_str(&line);
        shown.push('\n');
        count += 1;
    }
    let rest = lines.len() - count;
    if rest > 0 {
        shown.push_str(&format!(
            "… {rest} more line{}",
            if rest == 1 { "" } else { "s" }
        ));
    }
    shown.trim_end_matches('\n').to_owned()
}

/// `text` with every control character (except tab) and every Unicode control that
/// reorders text written as a `\u{..}` escape, so it shows as what it is.
pub fn escape(text: &str) -> Cow<'_, str> {
    let hostile = |c: char| {
        (c.is_control() && c != '\t')
            || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hostile) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hostile(c) {
            escaped.extend(c.escape_unicode());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// A size for people: bytes up to 1 KiB, then KiB or MiB with one decimal.
pub fn human_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    match bytes {
        1 => "1 byte".to_owned(),
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / KIB),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB)),
    }
}

/// The largest char boundary of `text` at or below `index`.
fn char_floor(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::PathBuf;

    /// A fresh workspace directory, removed on drop.
    struct Workspace(PathBuf);

    impl Workspace {
        fn new(test: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("approval-prompt-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("workspace directory");
            Workspace(dir)
        }

        fn root(&self) -> WorkspaceRoot {
            WorkspaceRoot::new(&self.0).expect("root")
        }
    }

    impl Drop for Workspace {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(path: &str, content: &str) -> Value {
        json!({"path": path, "content": content})
    }

    #[test]
    fn a_new_file_is_shown_as_created_with_its_size_and_lines() {
        let workspace = Workspace::new("create");
        let prompt = describe(
            &workspace.root(),
            "write_file",
            &write("notes.md", "# Notes\nhello\n"),
        );
        assert_eq!(
            prompt,
            "Allow `write_file` to create `notes.md` (14 bytes)?\n@@ -0,0 +1,2 @@\n+# Notes\n+hello"
        );
    }

    #[test]
    fn an_existing_file_is_shown_as_overwritten_with_a_diff() {
        let workspace = Workspace::new("overwrite");
        std::fs::write(workspace.0.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let prompt = describe(
            &workspace.root(),
            "write_file",
            &write("a.txt", "one\n2\nthree\n"),
        );
        assert_eq!(
            prompt,
            "Allow `write_file` to overwrite `a.txt` (12 bytes, replacing 14 bytes)?\n\
             @@ -1,3 +1,3 @@\n one\n-two\n+2\n three"
        );
        let same = describe(
            &workspace.root(),
            "write_file",
            &write("a.txt", "one\ntwo\nthree\n"),
        );
        assert!(
            same.ends_with("(no change: the content is the same)"),
            "{same}"
        );
    }

    #[test]
    fn a_path_the_root_refuses_is_said_to_be_refused() {
        let workspace = Workspace::new("refused");
        let prompt = describe(&workspace.root(), "write_file", &write("../x", "a"));
        assert!(
            prompt.starts_with("Allow `write_file` on `../x` (1 byte)?\nthe workspace refuses"),
            "{prompt}"
        );
        assert!(prompt.contains("`..`"), "{prompt}");
        assert!(
            prompt.ends_with("so the tool will refuse the write"),
            "{prompt}"
        );
        std::fs::create_dir(workspace.0.join("dir")).unwrap();
        let prompt = describe(&workspace.root(), "write_file", &write("dir", "a"));
        assert!(prompt.contains("`dir` is a directory"), "{prompt}");
    }

    #[test]
    fn a_long_diff_is_cut_at_the_line_bound() {
        let workspace = Workspace::new("long");
        let content: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let prompt = describe(
            &workspace.root(),
            "write_file",
            &write("long.txt", &content),
        );
        let lines: Vec<&str> = prompt.lines().collect();
        // The question, MAX_DIFF_LINES diff lines (hunk header and 39 lines), the rest.
        assert_eq!(lines.len(), 1 + MAX_DIFF_LINES + 1, "{prompt}");
        assert_eq!(lines[1], "@@ -0,0 +1,100 @@");
        assert_eq!(lines[40], "+line 38");
        // 101 diff lines in all (the header and 100 added lines), 40 shown.
        assert_eq!(lines[41], "… 61 more lines");
    }

    #[test]
    fn a_wide_diff_is_cut_at_the_byte_bound() {
        let line = "x".repeat(1000);
        let content: String = (0..30).map(|_| format!("{line}\n")).collect();
        let preview = diff_preview("", &content);
        assert!(preview.len() <= MAX_DIFF_BYTES + "… 99 more lines".len() + 1);
        let lines: Vec<&str> = preview.lines().collect();
        // Each line is cut to MAX_DIFF_LINE_BYTES plus `…` (3 bytes) and a newline.
        let per_line = MAX_DIFF_LINE_BYTES + 3 + 1;
        let header = "@@ -0,0 +1,30 @@\n".len();
        let fit = 1 + (MAX_DIFF_BYTES - header) / per_line;
        assert_eq!(lines.len(), fit + 1, "{preview}");
        assert!(lines[1].ends_with('…') && lines[1].len() == MAX_DIFF_LINE_BYTES + 3);
        assert_eq!(*lines.last().unwrap(), format!("… {} more lines", 31 - fit));
    }

    #[test]
    fn control_characters_are_escaped_in_paths_content_and_arguments() {
        let workspace = Workspace::new("escape");
        let prompt = describe(
            &workspace.root(),
            "write_file",
            &write("a\x1b[2J.txt", "\x1b[2Jcleared\u{202e}evil\n"),
        );
        assert!(
            !prompt.contains('\x1b') && !prompt.contains('\u{202e}'),
            "{prompt:?}"
        );
        assert!(prompt.contains("`a\\u{1b}[2J.txt`"), "{prompt}");
        assert!(
            prompt.contains("+\\u{1b}[2Jcleared\\u{202e}evil"),
            "{prompt}"
        );

        let prompt = describe(
            &workspace.root(),
            "mcp__srv__run",
            &json!({"command": "echo \x1b[2J", "note": "\u{2066}x"}),
        );
        assert!(
            !prompt.contains('\x1b') && !prompt.contains('\u{2066}'),
            "{prompt:?}"
        );
        assert_eq!(
            prompt,
            "Allow `mcp__srv__run`?\narguments: {\"command\":\"echo \\u001b[2J\",\"note\":\"\\u{2066}x\"}"
        );
        assert_eq!(escape("tab\tkept"), "tab\tkept");
        assert_eq!(escape("a\rb\u{7f}"), "a\\u{d}b\\u{7f}");
    }

    #[test]
    fn arguments_are_bounded() {
        let workspace = Workspace::new("bounded");
        let prompt = describe(
            &workspace.root(),
            "mcp__srv__put",
            &json!({"blob": "é".repeat(2000)}),
        );
        let arguments = prompt.split_once("\narguments: ").expect("arguments").1;
        assert!(arguments.ends_with('…'), "{arguments}");
        assert!(arguments.len() <= MAX_ARGUMENT_BYTES + '…'.len_utf8());
        // A write_file call whose arguments are not a path and a content is shown as any call.
        let odd = describe(&workspace.root(), "write_file", &json!({"path": 3}));
        assert_eq!(odd, "Allow `write_file`?\narguments: {\"path\":3}");
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_size(1), "1 byte");
        assert_eq!(human_size(1023), "1023 bytes");
        assert_eq!(human_size(3277), "3.2 KiB");
        assert_eq!(human_size(2 * 1024 * 1024), "2.0 MiB");
    }
}
