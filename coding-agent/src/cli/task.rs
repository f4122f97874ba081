//! Where the task comes from: its words, `-` (stdin), `--file FILE`, or stdin when no task
//! is given and stdin is not a terminal. Stdin and files are read whole, at most
//! [`MAX_TASK_BYTES`]; a task that is empty after trimming is refused.

use std::io::Read;
use std::path::Path;

use super::args::TaskArgs;
use super::error::CliError;

/// The largest task read from stdin or a file: 1 MiB.
pub const MAX_TASK_BYTES: usize = 1024 * 1024;

/// What the task arguments resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// The task's text (not blank).
    Text(String),
    /// No task: `--resume` continues a run.
    Resume,
    /// No task and stdin is a terminal: the user is there to type (today a usage error,
    /// see the binary).
    OnTerminal,
}

/// Resolves `args`' task, reading `stdin` when the task is `-`, or when none is given and
/// `stdin_is_terminal` is false. Errors are usage errors (exit code 2).
///
/// ```
/// use coding_agent::cli::args::TaskArgs;
/// use coding_agent::cli::task::{Task, resolve};
///
/// let args = TaskArgs { task: vec!["-".into()], ..TaskArgs::default() };
/// assert_eq!(resolve(&args, &mut "fix it\n".as_bytes(), false).unwrap(), Task::Text("fix it".into()));
/// let none = TaskArgs::default();
/// assert_eq!(resolve(&none, &mut "".as_bytes(), true).unwrap(), Task::OnTerminal);
/// assert!(resolve(&none, &mut "  \n".as_bytes(), false).is_err());
/// ```
pub fn resolve(
    args: &TaskArgs,
    stdin: &mut dyn Read,
    stdin_is_terminal: bool,
) -> Result<Task, CliError> {
    if let Some(file) = &args.file {
        let blank = format!("--file {}: the task is empty", file.display());
        return text(read_file(file)?, &blank);
    }
    match args.task.as_slice() {
        [dash] if dash == "-" => text(read_bounded(stdin, "stdin")?, "the task on stdin is empty"),
        [] if args.resume.is_some() => Ok(Task::Resume),
        [] if stdin_is_terminal => Ok(Task::OnTerminal),
        [] => text(read_bounded(stdin, "stdin")?, "a task is required"),
        words => text(words.join(" "), "the task is empty"),
    }
}

fn text(task: String, if_blank: &str) -> Result<Task, CliError> {
    let task = task.trim();
    if task.is_empty() {
        return Err(CliError::Usage(if_blank.to_owned()));
    }
    Ok(Task::Text(task.to_owned()))
}

fn read_file(file: &Path) -> Result<String, CliError> {
    let opened = std::fs::File::open(file)
        .map_err(|e| CliError::Usage(format!("--file {}: {e}", file.display())))?;
    read_bounded(
        &mut std::io::BufReader::new(opened),
        &format!("--file {}", file.display()),
    )
}

fn read_bounded(input: &mut dyn Read, what: &str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_TASK_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::Usage(format!("{what}: {e}")))?;
    if bytes.len() > MAX_TASK_BYTES {
        return Err(CliError::Usage(format!(
            "{what}: the task is larger than 1 MiB"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| CliError::Usage(format!("{what}: the task is not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(words: &[&str]) -> TaskArgs {
        TaskArgs {
            task: words.iter().map(|w| (*w).to_owned()).collect(),
            ..TaskArgs::default()
        }
    }

    fn usage(result: Result<Task, CliError>) -> String {
        match result {
            Err(CliError::Usage(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn words_stdin_and_files() {
        let mut nothing = "ignored".as_bytes();
        assert_eq!(
            resolve(&words(&["a", "b"]), &mut nothing, false).unwrap(),
            Task::Text("a b".to_owned())
        );
        assert_eq!(
            resolve(&words(&[]), &mut " piped task\n".as_bytes(), false).unwrap(),
            Task::Text("piped task".to_owned())
        );
        assert_eq!(
            usage(resolve(&words(&[" "]), &mut nothing, false)),
            "the task is empty"
        );
        let resume = TaskArgs {
            resume: Some("r.json".into()),
            ..TaskArgs::default()
        };
        assert_eq!(resolve(&resume, &mut nothing, false).unwrap(), Task::Resume);
        let missing = TaskArgs {
            file: Some("/nonexistent/task.txt".into()),
            ..TaskArgs::default()
        };
        assert!(
            usage(resolve(&missing, &mut nothing, false))
                .starts_with("--file /nonexistent/task.txt: ")
        );
    }

    #[test]
    fn a_task_larger_than_1_mib_is_refused() {
        let big = vec![b'x'; MAX_TASK_BYTES + 1];
        assert_eq!(
            usage(resolve(&words(&["-"]), &mut big.as_slice(), false)),
            "stdin: the task is larger than 1 MiB"
        );
        let fits = vec![b'x'; MAX_TASK_BYTES];
        assert!(resolve(&words(&["-"]), &mut fits.as_slice(), false).is_ok());
    }
}
