//! `runtrace top`: the live view of a recording being written, or the
//! replay of a finished one (runtrace-top); `--once` (and any run without
//! a terminal) prints one window as text or JSON instead.

use runtrace_top::source::{self, Options};
use runtrace_top::ui::{self, View};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace top`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The recording's directory (or the path prefix it was made with).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The sliding window, in seconds.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = source::parse_window)]
    pub window: f64,
    /// Replay speed, 0.1 to 100 (1: real time).
    #[arg(long, default_value_t = 1.0, value_parser = source::parse_speed)]
    pub speed: f64,
    /// Print one window and exit (also what `top` does without a terminal).
    #[arg(long)]
    pub once: bool,
    /// With --once: one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// With --once: the window ending at this time of the recording
    /// (seconds since it started, or M:SS) instead of its end.
    #[arg(long, value_name = "T", value_parser = ui::state::parse_at)]
    pub at: Option<f64>,
    /// Replay even when a file is still being written (`.active`).
    #[arg(long, conflicts_with = "follow")]
    pub replay: bool,
    /// Follow the files as they grow even when none is `.active`.
    #[arg(long)]
    pub follow: bool,
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("runtrace top: {msg}");
    ExitCode::FAILURE
}

/// `runtrace top DIR [--window S] [--speed X] [--once [--json] [--at T]]`:
/// exit code 0; 1 when DIR holds no readable trace or the terminal fails;
/// 2 for bad arguments.
pub fn run(args: &Args) -> ExitCode {
    let opts = Options {
        window_s: args.window,
        speed: args.speed,
        ..Options::default()
    };
    let live = match source::choose_live(&args.dir, args.replay || args.at.is_some(), args.follow) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let tty = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if args.once || !tty {
        let snap = match source::once(&args.dir, opts, live, args.at) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        let out = if args.json {
            snap.to_json().to_string()
        } else {
            snap.to_text()
        };
        crate::output::print_report(&out, &[], false);
        return ExitCode::SUCCESS;
    }
    match View::open(&args.dir, opts, live)
        .and_then(|v| ui::run(v).map_err(|e| format!("terminal: {e}")))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}
