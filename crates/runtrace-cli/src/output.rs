//! What the commands share on the way in and out: the trace files a
//! command line names ([`Traces`], expanded in this one place), a progress
//! bar on standard error for large inputs, printing a report with its
//! errors and exit code, and error lines.

use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

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

    /// The files named ([`Traces::expand`]) when at least one of them can
    /// be read. When none can (a typo, an empty directory), the reasons
    /// are printed on standard error and the command ends with exit code
    /// 1 at once, rather than printing a report of nothing above them.
    /// (`check` lists every path's state and does not use this.)
    ///
    /// ```
    /// let t = runtrace_cli::output::Traces { files: vec!["/nonexistent/x.0.bin".into()] };
    /// assert!(t.readable().is_err());
    /// ```
    pub fn readable(&self) -> Result<Vec<PathBuf>, ExitCode> {
        let files = self.expand();
        let why: Vec<String> = files
            .iter()
            .map_while(|p| runtrace_format::files::unreadable(p))
            .collect();
        if why.len() < files.len() {
            return Ok(files);
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

/// Draws `LABEL [#####.....] 42% 120/300 MB` on standard error, at most
/// ten times a second.
pub(crate) struct ProgressBar {
    label: &'static str,
    last: Option<Instant>,
    drawn: bool,
}

impl ProgressBar {
    /// A bar for reading `files`, when they are large and standard error is
    /// a terminal (None otherwise).
    pub(crate) fn for_files(label: &'static str, files: &[PathBuf]) -> Option<ProgressBar> {
        let total: u64 = files
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        (total >= PROGRESS_MIN_BYTES && std::io::stderr().is_terminal()).then_some(ProgressBar {
            label,
            last: None,
            drawn: false,
        })
    }

    pub(crate) fn draw(&mut self, done: u64, total: u64) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
            && done < total
        {
            return;
        }
        self.last = Some(Instant::now());
        let frac = done as f64 / total.max(1) as f64;
        let width = 30;
        let full = ((frac * width as f64) as usize).min(width);
        let bar: String = "#".repeat(full) + &".".repeat(width - full);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{} [{bar}] {:>3.0}% {}/{} MB",
            self.label,
            frac * 100.0,
            done >> 20,
            total >> 20
        );
        let _ = err.flush();
        self.drawn = true;
    }

    pub(crate) fn clear(&self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r{:70}\r", "");
            let _ = err.flush();
        }
    }
}

/// Runs `read` with a progress callback that draws a bar labelled `label`
/// while it reads `files`, when they are large and standard error is a
/// terminal (with `None` otherwise); clears the bar after.
pub(crate) fn with_progress<R>(
    label: &'static str,
    files: &[PathBuf],
    read: impl FnOnce(Option<&mut dyn FnMut(u64, u64)>) -> R,
) -> R {
    let Some(mut bar) = ProgressBar::for_files(label, files) else {
        return read(None);
    };
    let r = read(Some(&mut |done: u64, total: u64| bar.draw(done, total)));
    bar.clear();
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
