//! What a terminal shows of a run, shared by the one-shot form and the daemon client: the
//! model's streamed text, one line per tool call with its arguments and outcome, a spinner
//! while the model thinks, and the `--json` `tool_call` records.
//!
//! A tool line is `  -> NAME ARGUMENTS: OUTCOME`, for example `  -> read_file README.md:
//! 3.2 KB`, `  -> list_dir src: 12 entries`, `  -> search_text "foo": 4 matches`,
//! `  -> write_file NOTES.md: refused by you` or, for an MCP tool, `  -> lookup {"q":"x"}:
//! ok`; arguments and reasons are bounded to one short line. When only the call's events
//! are known (a daemon run: events carry no arguments or results), the line is `  -> NAME:
//! ok` or `  -> NAME: failed: CODE`. The outcome is coloured on a terminal ([`Style`]).

use std::io::{self, IsTerminal, Write};

use serde_json::{Value, json};

use super::progress::Spinner;
use crate::tool_calls::{CallResult, ToolCall};

/// The most characters of an argument or a reason on a tool line.
pub const MAX_LINE_DETAIL_CHARS: usize = 80;

/// The most characters of a `tool_call` record's `summary`.
pub const MAX_SUMMARY_CHARS: usize = 200;

/// Whether the human output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Style {
    color: bool,
}

impl Style {
    /// No colour.
    pub const PLAIN: Style = Style { color: false };

    /// Colour when stdout is a terminal, unless `NO_COLOR` is set and not empty;
    /// `CLICOLOR_FORCE` (set, not empty, not `0`) forces it when stdout is not a terminal.
    pub fn detect() -> Style {
        Style::from_env(
            std::io::stdout().is_terminal(),
            std::env::var("NO_COLOR").ok().as_deref(),
            std::env::var("CLICOLOR_FORCE").ok().as_deref(),
        )
    }

    /// [`detect`](Self::detect)'s rule over given facts.
    ///
    /// ```
    /// use coding_agent::cli::render::Style;
    ///
    /// assert!(Style::from_env(true, None, None).is_colored());
    /// assert!(!Style::from_env(true, Some("1"), None).is_colored());
    /// assert!(Style::from_env(true, Some(""), None).is_colored());
    /// assert!(!Style::from_env(false, None, None).is_colored());
    /// assert!(Style::from_env(false, None, Some("1")).is_colored());
    /// assert!(!Style::from_env(false, Some("1"), Some("1")).is_colored());
    /// ```
    pub fn from_env(
        stdout_is_terminal: bool,
        no_color: Option<&str>,
        force: Option<&str>,
    ) -> Style {
        let no_color = no_color.is_some_and(|v| !v.is_empty());
        let forced = force.is_some_and(|v| !v.is_empty() && v != "0");
        Style {
            color: !no_color && (stdout_is_terminal || forced),
        }
    }

    /// Whether it colours.
    pub fn is_colored(self) -> bool {
        self.color
    }

    fn paint(self, tone: Tone, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        let code = match tone {
            Tone::Ok => "32",
            Tone::Refused => "33",
            Tone::Failed => "31",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// How a tool call's outcome reads: green, yellow or red on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// It answered.
    Ok,
    /// It was refused (by you, by `--read-only`) or cancelled.
    Refused,
    /// It failed or reported a problem.
    Failed,
}

/// One tool call as a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLine {
    /// The tool's name.
    pub name: String,
    /// Its arguments, shortened, if known.
    pub arguments: Option<String>,
    /// The outcome's tone.
    pub tone: Tone,
    /// The outcome.
    pub outcome: String,
}

impl ToolLine {
    /// The line for an observed call (arguments and result known).
    pub fn from_call(call: &ToolCall) -> ToolLine {
        let (tone, outcome) = describe_result(&call.name, &call.arguments, &call.result);
        ToolLine {
            name: call.name.clone(),
            arguments: describe_arguments(&call.name, &call.arguments),
            tone,
            outcome,
        }
    }

    /// The line when only the call's events are known.
    pub fn from_event(name: &str, tone: Tone, outcome: impl Into<String>) -> ToolLine {
        ToolLine {
            name: name.to_owned(),
            arguments: None,
            tone,
            outcome: outcome.into(),
        }
    }

    /// `  -> NAME ARGUMENTS: OUTCOME`, the outcome painted in `style`.
    ///
    /// ```
    /// use coding_agent::cli::render::{Style, Tone, ToolLine};
    ///
    /// let line = ToolLine { name: "read_file".into(), arguments: Some("README.md".into()),
    ///                       tone: Tone::Ok, outcome: "3.2 KB".into() };
    /// assert_eq!(line.render(Style::PLAIN), "  -> read_file README.md: 3.2 KB");
    /// ```
    pub fn render(&self, style: Style) -> String {
        let arguments = self
            .arguments
            .as_deref()
            .map(|a| format!(" {a}"))
            .unwrap_or_default();
        format!(
            "  -> {}{arguments}: {}",
            self.name,
            style.paint(self.tone, &self.outcome)
        )
    }
}

/// `text` on one line (control characters and line breaks become spaces), cut to `max`
/// characters with `…` when longer.
pub fn bounded(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A byte count for people: `512 B`, `3.2 KB`, `1.5 MB`.
pub fn human_size(bytes: usize) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} B")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn string_argument<'a>(arguments: &'a Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str)
}

/// The arguments worth showing: the path of the workspace tools, the quoted pattern (and
/// path) of `search_text`, else the arguments as compact JSON; all bounded.
pub fn describe_arguments(name: &str, arguments: &Value) -> Option<String> {
    let path = |default: Option<&str>| {
        string_argument(arguments, "path")
            .or(default)
            .map(|p| bounded(p, MAX_LINE_DETAIL_CHARS))
    };
    match name {
        "read_file" | "write_file" => path(None),
        "list_dir" => path(Some(".")),
        "search_text" => {
            let pattern = string_argument(arguments, "pattern").unwrap_or("");
            let quoted = Value::from(bounded(pattern, MAX_LINE_DETAIL_CHARS)).to_string();
            match string_argument(arguments, "path") {
                Some(p) if p != "." && !p.is_empty() => {
                    Some(format!("{quoted} in {}", bounded(p, MAX_LINE_DETAIL_CHARS)))
                }
                _ => Some(quoted),
            }
        }
        _ => match arguments {
            Value::Object(map) if map.is_empty() => None,
            Value::Null => None,
            other => Some(bounded(&other.to_string(), MAX_LINE_DETAIL_CHARS)),
        },
    }
}

/// The outcome of an observed call: a size, a count, a refusal or a bounded reason.
pub fn describe_result(name: &str, arguments: &Value, result: &CallResult) -> (Tone, String) {
    match result {
        CallResult::Success(text) => (Tone::Ok, describe_success(name, arguments, text)),
        CallResult::Problem(text) => describe_problem(text),
        CallResult::Failed(text) => (
            Tone::Failed,
            format!("failed: {}", bounded(text, MAX_LINE_DETAIL_CHARS)),
        ),
        CallResult::Cancelled => (Tone::Refused, "cancelled".to_owned()),
    }
}

fn describe_success(name: &str, arguments: &Value, text: &str) -> String {
    match name {
        "read_file" => human_size(text.len()),
        "list_dir" => {
            if text.ends_with("is an empty directory") {
                return count(0, "entry", "entries");
            }
            let mut entries = 0;
            for line in text.lines() {
                match line
                    .strip_prefix("… (")
                    .and_then(|rest| rest.strip_suffix(" more)"))
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    Some(more) => entries += more,
                    None => entries += 1,
                }
            }
            count(entries, "entry", "entries")
        }
        "search_text" => {
            if text.starts_with("no matches for ") {
                return count(0, "match", "matches");
            }
            let stopped = text.lines().any(|l| l.starts_with("[stopped after"));
            let matches = text
                .lines()
                .filter(|l| !l.starts_with("[stopped after"))
                .count();
            let counted = count(matches, "match", "matches");
            if stopped {
                format!("{counted} (stopped there)")
            } else {
                counted
            }
        }
        "write_file" => match string_argument(arguments, "content") {
            Some(content) => format!("wrote {}", human_size(content.len())),
            None => "ok".to_owned(),
        },
        _ => "ok".to_owned(),
    }
}

/// The approval guard's refusals (`crate::approval`) in the user's words; any other
/// problem with its bounded reason.
fn describe_problem(text: &str) -> (Tone, String) {
    use crate::approval::{READ_ONLY_REFUSAL, REFUSED_BY_USER};
    use crate::cli::approve::{REFUSED_BY_YOU, REFUSED_READ_ONLY};
    if text == REFUSED_BY_USER {
        (Tone::Refused, REFUSED_BY_YOU.to_owned())
    } else if text == READ_ONLY_REFUSAL {
        (Tone::Refused, REFUSED_READ_ONLY.to_owned())
    } else if let Some(reason) = text.strip_prefix("refused: ") {
        (
            Tone::Refused,
            format!("refused ({})", bounded(reason, MAX_LINE_DETAIL_CHARS)),
        )
    } else {
        (
            Tone::Failed,
            format!("problem: {}", bounded(text, MAX_LINE_DETAIL_CHARS)),
        )
    }
}

/// The `--json` record of one observed call: `{"type":"tool_call","call_id":..,"name":..,
/// "arguments":{..},"result":{"outcome":..,"summary":..}}`, the outcome `success`,
/// `problem`, `failed` or `cancelled` and the summary the result's text, on one line and
/// at most [`MAX_SUMMARY_CHARS`] characters.
pub fn tool_call_json(call: &ToolCall) -> Value {
    let (outcome, text) = match &call.result {
        CallResult::Success(text) => ("success", text.as_str()),
        CallResult::Problem(text) => ("problem", text.as_str()),
        CallResult::Failed(text) => ("failed", text.as_str()),
        CallResult::Cancelled => ("cancelled", "cancelled"),
    };
    json!({
        "type": "tool_call",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "result": {"outcome": outcome, "summary": bounded(text, MAX_SUMMARY_CHARS)},
    })
}

/// Writes a run for a human: streamed text, tool lines, the spinner.
pub struct Renderer<W: Write> {
    out: W,
    spinner: Spinner,
    style: Style,
    /// Whether the last byte written ended a line (a tool line starts on a line of its own).
    at_line_start: bool,
}

impl<W: Write> Renderer<W> {
    /// A renderer writing to `out`, with `spinner` on stderr.
    pub fn new(out: W, spinner: Spinner, style: Style) -> Self {
        Renderer {
            out,
            spinner,
            style,
            at_line_start: true,
        }
    }

    /// The model was asked: spin.
    pub fn model_started(&mut self) {
        self.spinner.start();
    }

    /// The model ended (answered or failed): stop spinning. A failure is said once, by the
    /// run's summary line.
    pub fn model_ended(&mut self) {
        self.spinner.stop();
    }

    /// Streamed text.
    pub fn text(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.spinner.write_text(&mut self.out, text)?;
        self.at_line_start = text.ends_with('\n');
        Ok(())
    }

    /// One tool line, on a line of its own.
    pub fn tool(&mut self, line: &ToolLine) -> io::Result<()> {
        self.spinner.stop();
        let lead = if self.at_line_start { "" } else { "\n" };
        let text = format!("{lead}{}\n", line.render(self.style));
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        self.at_line_start = true;
        Ok(())
    }

    /// Ends the output on a line boundary (the summary follows on stderr).
    pub fn finish(&mut self) -> io::Result<()> {
        self.spinner.stop();
        if !self.at_line_start {
            self.out.write_all(b"\n")?;
            self.out.flush()?;
            self.at_line_start = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indicatif::ProgressDrawTarget;

    fn call(name: &str, arguments: Value, result: CallResult) -> ToolCall {
        ToolCall {
            call_id: "c1".to_owned(),
            name: name.to_owned(),
            arguments,
            result,
        }
    }

    fn line(name: &str, arguments: Value, result: CallResult) -> String {
        ToolLine::from_call(&call(name, arguments, result)).render(Style::PLAIN)
    }

    #[test]
    fn tool_lines_show_arguments_and_outcome() {
        let ok = |s: &str| CallResult::Success(s.to_owned());
        assert_eq!(
            line(
                "read_file",
                json!({"path": "README.md"}),
                ok(&"x".repeat(3277))
            ),
            "  -> read_file README.md: 3.2 KB"
        );
        assert_eq!(
            line(
                "list_dir",
                json!({"path": "src"}),
                ok("a\nb/\nc\n… (9 more)")
            ),
            "  -> list_dir src: 12 entries"
        );
        assert_eq!(
            line("list_dir", json!({}), ok(". is an empty directory")),
            "  -> list_dir .: 0 entries"
        );
        assert_eq!(
            line(
                "search_text",
                json!({"pattern": "foo"}),
                ok("a:1: foo\nb:2: foo\nc:3: foo\nd:4: foo")
            ),
            "  -> search_text \"foo\": 4 matches"
        );
        assert_eq!(
            line(
                "search_text",
                json!({"pattern": "x", "path": "src"}),
                ok("no matches for x under src")
            ),
            "  -> search_text \"x\" in src: 0 matches"
        );
        assert_eq!(
            line(
                "write_file",
                json!({"path": "NOTES.md", "content": "hi"}),
                CallResult::Problem("refused: the user did not approve this change".to_owned())
            ),
            "  -> write_file NOTES.md: refused by you"
        );
        assert_eq!(
            line(
                "write_file",
                json!({"path": "NOTES.md", "content": "hi"}),
                ok("wrote 2 bytes to NOTES.md")
            ),
            "  -> write_file NOTES.md: wrote 2 B"
        );
        assert_eq!(
            line(
                "read_file",
                json!({"path": "gone"}),
                CallResult::Problem("gone: not found\nmore".to_owned())
            ),
            "  -> read_file gone: problem: gone: not found more"
        );
        assert_eq!(
            line("lookup", json!({"q": "x"}), ok("anything")),
            "  -> lookup {\"q\":\"x\"}: ok"
        );
        assert_eq!(
            line(
                "lookup",
                json!({}),
                CallResult::Failed("server went away".to_owned())
            ),
            "  -> lookup: failed: server went away"
        );
    }

    #[test]
    fn details_are_bounded_to_one_line() {
        let long = json!({"q": "y".repeat(500)});
        let shown = describe_arguments("mcp_tool", &long).unwrap();
        assert_eq!(shown.chars().count(), MAX_LINE_DETAIL_CHARS);
        assert!(shown.ends_with('…'));
        assert_eq!(bounded("a\nb\tc", 10), "a b c");
        let record = tool_call_json(&call(
            "read_file",
            json!({"path": "x"}),
            CallResult::Success("z".repeat(1000)),
        ));
        let summary = record["result"]["summary"].as_str().unwrap();
        assert_eq!(summary.chars().count(), MAX_SUMMARY_CHARS);
        assert_eq!(record["type"], "tool_call");
        assert_eq!(record["result"]["outcome"], "success");
        assert_eq!(record["arguments"]["path"], "x");
    }

    #[test]
    fn colour_paints_only_the_outcome() {
        let line = ToolLine::from_event("read_file", Tone::Failed, "failed: tool_failed");
        let colored = line.render(Style::from_env(true, None, None));
        assert_eq!(
            colored,
            "  -> read_file: \x1b[31mfailed: tool_failed\x1b[0m"
        );
    }

    #[test]
    fn tool_lines_start_on_a_line_of_their_own() {
        let mut out = Vec::new();
        {
            let spinner = Spinner::with_target(ProgressDrawTarget::hidden());
            let mut renderer = Renderer::new(&mut out, spinner, Style::PLAIN);
            renderer.text("Looking").unwrap();
            renderer
                .tool(&ToolLine::from_event("list_dir", Tone::Ok, "ok"))
                .unwrap();
            renderer.text("Done.").unwrap();
            renderer.finish().unwrap();
            renderer.finish().unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Looking\n  -> list_dir: ok\nDone.\n"
        );
    }
}
