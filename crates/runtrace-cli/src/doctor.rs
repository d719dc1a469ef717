//! `runtrace doctor`: the report of [`runtrace_doctor::inspect`] as text or
//! as one JSON object.

use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `runtrace doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The executable or shared library to inspect.
    #[arg(value_name = "BINARY")]
    pub binary: PathBuf,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

/// Runs `runtrace doctor`: prints the report (text or JSON) and returns 0 if
/// everything found is sound, 1 on any problem or unreadable input.
pub fn run(args: &Args) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match runtrace_doctor::inspect(&args.binary) {
        Ok(report) => {
            let text = if args.json {
                report.to_json().to_string()
            } else {
                report.to_string()
            };
            // A closed stdout (`| head`) must not turn into a panic.
            let _ = writeln!(out, "{text}");
            if report.is_sound() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            if args.json {
                let j = json!({
                    "binary": args.binary.display().to_string(),
                    "ok": false,
                    "error": e.message,
                });
                let _ = writeln!(out, "{j}");
            }
            eprintln!("runtrace doctor: {e}");
            ExitCode::FAILURE
        }
    }
}
