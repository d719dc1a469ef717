//! What the commands share on the way in and out: the trace files a
//! command line names ([`Traces`], expanded in this one place), a progress
//! bar on standard error for large inputs, printing a report with its
//! errors and exit code, and error lines.

use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// The trace files of a command line: files in any order, or
/// directories holding them (`runtrace_format::files`).
#[derive(Debug, Clone, Args)]
pub struct Traces {
    /// Trace files (trace.0.bin trace.1.bin ...) in any order, or
    /// directories holding them.
    #[arg(required = true, value_name = "DIR|FILE")]
    pub files: Vec<PathBuf>,
}

impl Traces {
    /// The files named, a directory standing for its trace files; a path
    /// that is neither stays as given, for the reader to report.
    ///
    /// ```
    /// let t = runtrace_cli::output::Traces { files: vec!["x.0.bin".into()] };
    /// assert_eq!(t.expand(), [std::path::PathBuf::from("x.0.bin")]);
    /// ```
    pub fn expand(&self) -> Vec<PathBuf> {
        runtrace_format::files::expand_lenient(self.files.clone())
    }

    /// Ok when at least one of the files named ([`Traces::expand`]) can be
    /// read. When none can (a typo, an empty directory), the reasons are
    /// printed on standard error and the exit code to end with is returned,
    /// so that the command does not print a report of nothing above them
    /// ([`crate::run`] asks before every command that reads traces but
    /// `check` and `jsonl`, which report every path themselves).
    ///
    /// ```
    /// let t = runtrace_cli::output::Traces { files: vec!["/nonexistent/x.0.bin".into()] };
    /// assert!(t.readable().is_err());
    /// ```
    pub fn readable(&self) -> Result<(), ExitCode> {
        let files = self.expand();
        let why: Vec<String> = files
            .iter()
            .map_while(|p| runtrace_format::files::unreadable(p))
            .collect();
        if why.len() < files.len() {
            return Ok(());
        }
        let mut err = std::io::stderr().lock();
        for w in &why {
            let _ = writeln!(err, "error: {w}");
        }
        let _ = writeln!(err, "error: no trace file to read");
        Err(ExitCode::FAILURE)
    }
}

/// Inputs smaller than this get no progress bar (they take well under a
/// second).
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// Runs `read` with a progress callback that draws `LABEL [###...] 42%
/// 120 MiB/300 MiB` on standard error while it reads `files`, when they are
/// large and standard error is a terminal (with `None` otherwise); clears
/// the bar after. The bar is indicatif's: the field's crate for it, with
/// its rate limit and terminal handling.
pub(crate) fn with_progress<R>(
    label: &'static str,
    files: &[PathBuf],
    read: impl FnOnce(Option<&mut dyn FnMut(u64, u64)>) -> R,
) -> R {
    let total: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    if total < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return read(None);
    }
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {percent:>3}% {bytes}/{total_bytes}",
    )
    .map_or_else(
        |_| indicatif::ProgressStyle::default_bar(),
        |s| s.progress_chars("#>."),
    );
    let bar = indicatif::ProgressBar::new(total)
        .with_style(style)
        .with_message(label);
    let r = read(Some(&mut |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    }));
    bar.finish_and_clear();
    r
}

/// Prints `text` to standard output and, when the input was `damaged`,
/// `errors` to standard error. Exit code 0, or 1 when damaged (the report
/// still covers what was readable).
pub(crate) fn print_report(text: &str, errors: &[String], damaged: bool) -> ExitCode {
    // A closed stdout (`| head`) must not turn into a panic.
    let _ = writeln!(std::io::stdout().lock(), "{}", text.trim_end());
    print_errors(errors, damaged)
}

/// Prints `errors` on standard error when `failed`: exit code 1 then, 0
/// otherwise.
pub(crate) fn print_errors(errors: &[String], failed: bool) -> ExitCode {
    if !failed {
        return ExitCode::SUCCESS;
    }
    let mut err = std::io::stderr().lock();
    for e in errors {
        let _ = writeln!(err, "error: {e}");
    }
    ExitCode::FAILURE
}

/// Ends a command that wrote a file (`perfetto`, `report`): `written` is
/// `Err(message)` when the output could not be written, else the summary
/// line and the damage found in the input. Prints them to standard error;
/// exit code 1 on either.
pub(crate) fn wrote_file(written: Result<(String, Vec<String>), String>) -> ExitCode {
    match written {
        Err(e) => fail(&e),
        Ok((summary, errors)) => {
            let _ = writeln!(std::io::stderr().lock(), "{summary}");
            print_errors(&errors, !errors.is_empty())
        }
    }
}

/// Prints notes (symbolization problems and the like), once each, on
/// standard error.
pub(crate) fn print_notes(notes: &[String]) {
    let mut err = std::io::stderr().lock();
    for n in notes {
        let _ = writeln!(err, "note: {n}");
    }
}

/// Fails with `error: MESSAGE` on standard error.
pub(crate) fn fail(msg: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr().lock(), "error: {msg}");
    ExitCode::FAILURE
}
