//! Answering approval prompts on the terminal, the same in the one-shot form and against
//! the daemon (`run --daemon`, `attach`).
//!
//! The prompt is the guard's text (what the call would do, see
//! [`crate::approval::prompt`]), written to stderr with the spinner held
//! ([`crate::cli::progress::hold`]) so nothing draws over it. Answers are read a line at a
//! time from standard input, a terminal or a pipe alike: `y`/`yes` approves the call,
//! `n`/`no` or an empty line refuses it, `a`/`always` approves it and every later call of
//! the same tool in the same run. Anything else asks again, at most [`MAX_REASKS`] times,
//! then refuses; the end of input refuses. The logic takes any reader and writer
//! ([`ask`], [`Approver::answer`]), so it is tested without a terminal.
//!
//! What the user refused is remembered by call ([`Refusals`]) so the tool line says
//! [`REFUSED_BY_YOU`] rather than a bare failure: the daemon's wire does not carry a
//! call's problem text, and the one-shot events do not either.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader, Stdin};

use crate::approval::{ALWAYS, ApprovalMode, call_id_of, prompt::escape};

/// What a tool line says for a call the user refused.
pub const REFUSED_BY_YOU: &str = "refused by you";
/// What a tool line says for a call refused because the session is read-only.
pub const REFUSED_READ_ONLY: &str = "refused (read-only)";
/// How many times an answer that is not understood is asked again before the call is
/// refused.
pub const MAX_REASKS: usize = 3;
/// Most refused calls remembered for their tool lines; the oldest is forgotten first.
pub const MAX_REMEMBERED_REFUSALS: usize = 4096;
/// The question under the prompt.
pub const QUESTION: &str = "[y]es / [N]o / [a]lways for this tool in this run: ";

/// An answer to an approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Approve this call.
    Yes,
    /// Refuse this call.
    No,
    /// Approve this call and every later call of the same tool in the same run.
    Always,
}

impl Answer {
    /// The answer in a typed line, if it is one (case and surrounding space ignored; an
    /// empty line is the default, no).
    pub fn parse(line: &str) -> Option<Answer> {
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Some(Answer::Yes),
            "n" | "no" | "" => Some(Answer::No),
            "a" | "always" => Some(Answer::Always),
            _ => None,
        }
    }

    /// The interaction answer: `true`, `false` or `"always"`
    /// ([`crate::approval::answer_schema`]).
    pub fn value(self) -> Value {
        match self {
            Answer::Yes => Value::Bool(true),
            Answer::No => Value::Bool(false),
            Answer::Always => Value::String(ALWAYS.to_owned()),
        }
    }
}

/// Writes `prompt` (each line escaped: the terminal shows text, never obeys it) and the
/// [`QUESTION`] to `out`, then reads lines from `input` until one is an [`Answer`]: at most
/// [`MAX_REASKS`] more tries, then no. The end of input (or unreadable input) is no. With
/// `echo` (input that is not a terminal, which echoes typing itself) each line read is
/// written after the question, so the transcript reads as it was answered.
pub async fn ask<R, W>(prompt: &str, input: &mut R, out: &mut W, echo: bool) -> Answer
where
    R: AsyncBufRead + Unpin,
    W: Write,
{
    let shown: Vec<_> = prompt.lines().map(escape).collect();
    let _ = write!(out, "\n? {}\n{QUESTION}", shown.join("\n  "));
    let _ = out.flush();
    for attempt in 0..=MAX_REASKS {
        let mut line = String::new();
        match input.read_line(&mut line).await {
            Ok(0) | Err(_) => {
                let _ = writeln!(out, "\n(no answer: refused)");
                return Answer::No;
            }
            Ok(_) => {}
        }
        if echo {
            let _ = writeln!(out, "{}", escape(line.trim()));
        }
        if let Some(answer) = Answer::parse(&line) {
            return answer;
        }
        if attempt < MAX_REASKS {
            let _ = write!(out, "please answer y, n or a: ");
            let _ = out.flush();
        }
    }
    let _ = writeln!(out, "(no answer understood: refused)");
    Answer::No
}

/// The calls the user (or the read-only mode) refused, by call id, with what their tool
/// line says; bounded by [`MAX_REMEMBERED_REFUSALS`]. Shared by the answering task and the
/// renderer.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<VecDeque<(String, &'static str)>>>);

impl Refusals {
    fn record(&self, call_id: &str, note: &'static str) {
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        refused.push_back((call_id.to_owned(), note));
        while refused.len() > MAX_REMEMBERED_REFUSALS {
            refused.pop_front();
        }
    }

    /// What the tool line of `call_id` says if it was refused here (forgotten once taken).
    pub fn take(&self, call_id: &str) -> Option<&'static str> {
        let mut refused = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let index = refused.iter().rposition(|(id, _)| id == call_id)?;
        refused.remove(index).map(|(_, note)| note)
    }
}

/// Answers approval interactions by the session's mode: asks on `input`/`out` in
/// [`ApprovalMode::Ask`], approves all with `--yes`, refuses all with `--read-only`.
#[derive(Debug)]
pub struct Approver<R> {
    mode: ApprovalMode,
    input: R,
    echo: bool,
    refusals: Refusals,
}

impl<R: AsyncBufRead + Unpin> Approver<R> {
    /// An approver reading answers from `input`, recording refusals in `refusals`.
    pub fn new(mode: ApprovalMode, input: R, refusals: Refusals) -> Self {
        Approver {
            mode,
            input,
            echo: false,
            refusals,
        }
    }

    /// Writes each answer read after the question (for input that is not a terminal).
    pub fn echoing(mut self, echo: bool) -> Self {
        self.echo = echo;
        self
    }

    /// The answer value to interaction `interaction_id`, asking with `prompt` on `out` if
    /// the mode asks.
    pub async fn answer(
        &mut self,
        interaction_id: &str,
        prompt: &str,
        out: &mut impl Write,
    ) -> Value {
        let answer = match self.mode {
            ApprovalMode::ApproveAll => Answer::Yes,
            ApprovalMode::ReadOnly => Answer::No,
            ApprovalMode::Ask => ask(prompt, &mut self.input, out, self.echo).await,
        };
        if answer == Answer::No
            && let Some(call_id) = call_id_of(interaction_id)
        {
            let note = match self.mode {
                ApprovalMode::ReadOnly => REFUSED_READ_ONLY,
                _ => REFUSED_BY_YOU,
            };
            // Recorded before the answer is sent, so it is there when the call ends.
            self.refusals.record(call_id, note);
        }
        answer.value()
    }
}

/// An [`Approver`] on the process's standard input.
pub type StdinApprover = Approver<BufReader<Stdin>>;

impl StdinApprover {
    /// An approver on the process's standard input (echoing answers when it is a pipe).
    pub fn stdin(mode: ApprovalMode, refusals: Refusals) -> Self {
        use std::io::IsTerminal;
        let echo = !std::io::stdin().is_terminal();
        Approver::new(mode, BufReader::new(tokio::io::stdin()), refusals).echoing(echo)
    }

    /// [`answer`](Self::answer) on stderr, with the spinner held while the prompt is open.
    pub async fn answer_on_terminal(&mut self, interaction_id: &str, prompt: &str) -> Value {
        let _held = crate::cli::progress::hold();
        self.answer(interaction_id, prompt, &mut std::io::stderr())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn asked(typed: &str) -> (Answer, String) {
        let mut input = typed.as_bytes();
        let mut out = Vec::new();
        let answer = ask("Allow `write_file`?\n+new", &mut input, &mut out, false).await;
        (answer, String::from_utf8(out).expect("text"))
    }

    #[tokio::test]
    async fn y_n_and_a_answer_and_the_prompt_is_shown_first() {
        let (answer, out) = asked("y\n").await;
        assert_eq!(answer, Answer::Yes);
        assert_eq!(out, format!("\n? Allow `write_file`?\n  +new\n{QUESTION}"));
        assert_eq!(asked("n\n").await.0, Answer::No);
        assert_eq!(asked(" Always \n").await.0, Answer::Always);
        assert_eq!(asked("a").await.0, Answer::Always, "no newline before EOF");
        assert_eq!(asked("\n").await.0, Answer::No, "empty is the default");
        assert_eq!(Answer::Always.value(), json!("always"));
        assert_eq!(Answer::Yes.value(), json!(true));
        assert_eq!(Answer::No.value(), json!(false));
    }

    #[tokio::test]
    async fn unknown_input_asks_again_then_refuses() {
        let (answer, out) = asked("maybe\nsure\ny\n").await;
        assert_eq!(answer, Answer::Yes);
        assert_eq!(out.matches("please answer y, n or a").count(), 2);
        let (answer, out) = asked("1\n2\n3\n4\ny\n").await;
        assert_eq!(answer, Answer::No, "four tries, then no");
        assert_eq!(out.matches("please answer").count(), MAX_REASKS);
        assert!(out.ends_with("(no answer understood: refused)\n"), "{out}");
    }

    #[tokio::test]
    async fn the_end_of_input_refuses() {
        let (answer, out) = asked("").await;
        assert_eq!(answer, Answer::No);
        assert!(out.ends_with("(no answer: refused)\n"), "{out}");
        assert_eq!(asked("what\n").await.0, Answer::No);
    }

    #[tokio::test]
    async fn the_terminal_never_obeys_the_prompt() {
        let mut out = Vec::new();
        let answer = ask(
            "clear\x1b[2J\nline\u{202e}",
            &mut "n\x1b[2J\n".as_bytes(),
            &mut out,
            true,
        )
        .await;
        assert_eq!(answer, Answer::No);
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.contains('\x1b') && !out.contains('\u{202e}'),
            "{out:?}"
        );
        assert!(out.contains("clear\\u{1b}[2J\n  line\\u{202e}"), "{out}");
        // Piped answers are echoed, escaped too; this one is not understood.
        assert!(out.contains(&format!("{QUESTION}n\\u{{1b}}[2J\n")), "{out}");
    }

    #[tokio::test]
    async fn refusals_are_remembered_for_the_tool_line() {
        let refusals = Refusals::default();
        let mut approver = Approver::new(ApprovalMode::Ask, "n\ny\n".as_bytes(), refusals.clone());
        let mut out = Vec::new();
        assert_eq!(
            approver.answer("approve-c1", "Allow?", &mut out).await,
            json!(false)
        );
        assert_eq!(
            approver.answer("approve-c2", "Allow?", &mut out).await,
            json!(true)
        );
        assert_eq!(refusals.take("c1"), Some(REFUSED_BY_YOU));
        assert_eq!(refusals.take("c1"), None, "taken once");
        assert_eq!(refusals.take("c2"), None, "approved");

        let mut read_only = Approver::new(ApprovalMode::ReadOnly, "".as_bytes(), refusals.clone());
        let mut out = Vec::new();
        assert_eq!(
            read_only.answer("approve-c3", "Allow?", &mut out).await,
            json!(false)
        );
        assert!(out.is_empty(), "not asked");
        assert_eq!(refusals.take("c3"), Some(REFUSED_READ_ONLY));
        let mut yes = Approver::new(ApprovalMode::ApproveAll, "".as_bytes(), refusals.clone());
        assert_eq!(
            yes.answer("approve-c4", "Allow?", &mut out).await,
            json!(true)
        );

        for n in 0..=MAX_REMEMBERED_REFUSALS {
            refusals.record(&format!("c{n}"), REFUSED_BY_YOU);
        }
        assert_eq!(refusals.take("c0"), None, "the oldest is forgotten");
        assert_eq!(refusals.take("c1"), Some(REFUSED_BY_YOU));
    }
}
