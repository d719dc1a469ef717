//! `runtrace outliers`: statistical outliers of wake->poll delay, poll
//! duration and CPU share per spawn location and per task
//! (`runtrace_analyze::outliers`), as text or JSON.
//!
//! ```no_run
//! use runtrace_analyze::outliers::{Category, Method};
//! let r = runtrace_cli::outliers::report(&["trace.0.bin".into()], Method::Iqr, Category::All, 100);
//! # let _ = r;
//! ```

use crate::output::{print_report, with_progress};
use crate::OutliersArgs;
use runtrace_analyze::outliers::{Category, Method, Outliers};
use runtrace_model::{fmt_ns, input};
use serde_json::Value;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// The outliers of `files` as JSON, and the read's errors and damage.
pub fn report(
    files: &[PathBuf],
    method: Method,
    category: Category,
    limit: usize,
) -> (Value, Vec<String>, bool) {
    with_progress("reading", files, |progress| {
        let paths = input::sorted(files);
        let mut o = Outliers::default();
        let (model, stats) = input::read(&paths, &mut o, progress);
        (
            o.report(&model, method, category, limit),
            stats.errors,
            stats.damaged,
        )
    })
}

fn value(v: &Value, unit: &str) -> String {
    let x = v.as_f64().unwrap_or(0.0);
    if unit == "ns" {
        fmt_ns(x.max(0.0) as u64)
    } else {
        format!("{:.1}%", x * 100.0)
    }
}

/// The text form of an outliers report.
pub fn text(r: &Value) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "method: {} (groups of at least {} samples)",
        r["method"].as_str().unwrap_or(""),
        r["min_samples"]
    );
    for (cat, c) in r["categories"].as_object().into_iter().flatten() {
        let unit = c["unit"].as_str().unwrap_or("ns");
        let _ = writeln!(
            t,
            "\n=== {cat}: {} outliers in {} samples ({} groups judged, {} too small or without spread){}",
            c["outliers_total"],
            c["samples"],
            c["groups_checked"],
            c["groups_skipped"],
            if c["truncated"] == true { "; the strongest:" } else { "" }
        );
        for o in c["outliers"].as_array().into_iter().flatten() {
            let w = &o["window_ns"];
            let _ =
                writeln!(
                t,
                "  task {} at {} (pid {}): {} {} threshold {} in its {}, worker {}, {:.6}..{:.6} s",
                o["task_id"],
                o["spawn_loc"].as_str().unwrap_or(""),
                o["pid"],
                value(&o["value"], unit),
                if o["direction"] == "high" { "above" } else { "below" },
                value(&o["threshold"], unit),
                o["scope"].as_str().unwrap_or(""),
                o["worker"],
                w[0].as_f64().unwrap_or(0.0) / 1e9,
                w[1].as_f64().unwrap_or(0.0) / 1e9,
            );
        }
    }
    t
}

/// `runtrace outliers FILE... [--method M] [--category C] [--limit N] [--json]`.
pub fn run(args: &OutliersArgs) -> ExitCode {
    let (r, errors, damaged) = report(&args.files, args.method, args.category, args.limit);
    let out = if args.json { r.to_string() } else { text(&r) };
    print_report(&out, &errors, damaged)
}
