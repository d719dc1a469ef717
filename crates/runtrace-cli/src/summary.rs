//! `runtrace summary`: recordings, duration, event counts, and which
//! analyses apply to the trace (and why not), as text or JSON
//! (`runtrace_analyze::summary`).
//!
//! ```no_run
//! let code = runtrace_cli::summary::summary(&["trace.0.bin".into()], true);
//! # let _ = code;
//! ```

use crate::output::{print_report, with_progress};
use crate::SummaryArgs;
use runtrace_analyze::summary::{summary as build, Counts};
use runtrace_analyze::{runtime::Engine, Thresholds};
use runtrace_model::{fmt_ns, input};
use serde_json::Value;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The summary of `files` as JSON (one read: the runtime analysis and the
/// event counts).
pub fn report(files: &[PathBuf]) -> Value {
    with_progress("reading", files, |progress| {
        let paths = input::sorted(files);
        let mut passes = (Engine::new(Thresholds::default()), Counts::default());
        let (model, stats) = input::read(&paths, &mut passes, progress);
        let rt = passes.0.report(&model, stats.clone());
        build(&model, &stats, &passes.1, &rt)
    })
}

/// The text form of a summary.
pub fn text(s: &Value) -> String {
    let mut t = String::new();
    let files: Vec<&str> = s["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = writeln!(t, "files:        {}", files.join(" "));
    for r in s["recordings"].as_array().into_iter().flatten() {
        let _ = writeln!(
            t,
            "recording:    pid {} ({}), {} events, {}",
            r["pid"],
            r["process_name"].as_str().unwrap_or(""),
            r["events"],
            fmt_ns(r["duration_ns"].as_u64().unwrap_or(0))
        );
    }
    let _ = writeln!(
        t,
        "duration:     {}",
        fmt_ns(s["duration_ns"].as_u64().unwrap_or(0))
    );
    let _ = writeln!(
        t,
        "events:       {} ({} of other types, {} dropped)",
        s["events"], s["other_events"], s["dropped_events"]
    );
    let _ = writeln!(
        t,
        "tasks:        {} spawned, {} terminated; {} workers, {} spawn locations",
        s["tasks_spawned"], s["tasks_terminated"], s["workers"], s["spawn_locations"]
    );
    let _ = writeln!(t, "\n=== Events");
    if let Some(m) = s["event_counts"].as_object() {
        for (name, n) in m {
            let _ = writeln!(t, "  {name:<18} {n}");
        }
    }
    let _ = writeln!(t, "\n=== Analyzers");
    for a in s["capabilities"]["analyzers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = a["name"].as_str().unwrap_or("");
        if a["applicable"] == true {
            let _ = writeln!(t, "  {name:<24} applies");
        } else {
            let _ = writeln!(
                t,
                "  {name:<24} does not apply: {}",
                a["reason"].as_str().unwrap_or("")
            );
        }
    }
    t
}

/// Prints the summary of `files` (text, or JSON with `json`); exit code 1
/// when a file was damaged (the summary covers what was readable).
pub fn summary(files: &[PathBuf], json: bool) -> ExitCode {
    let s = report(files);
    let out = if json { s.to_string() } else { text(&s) };
    let errors: Vec<String> = s["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect();
    print_report(&out, &errors, s["damaged"] == true)
}

/// `runtrace summary FILE... [--json]`.
pub fn run(args: &SummaryArgs) -> ExitCode {
    summary(&args.files, args.json)
}
