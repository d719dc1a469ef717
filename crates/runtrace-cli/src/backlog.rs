//! `runtrace backlog`: queues, locks, I/O, heartbeats and the ranked root
//! causes of every backlog trigger, from the application-instrumentation
//! events (`runtrace_analyze::backlog`), as text or JSON.

use crate::output::{print_report, with_progress, Traces};
use runtrace_analyze::backlog::{analyze_files_with_progress, BacklogOptions};
use std::process::ExitCode;

/// Arguments of `runtrace backlog`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The trace files.
    #[command(flatten)]
    pub traces: Traces,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Width of the producer/consumer rate windows (e.g. 1s, 500ms).
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_duration)]
    pub window: u64,
    /// How far before each trigger to look for its causes (e.g. 2s).
    #[arg(long, value_name = "DUR", default_value = "2s", value_parser = parse_duration)]
    pub lookback: u64,
}

/// Parses a duration: a number with a unit (`ns`, `us`, `µs`, `ms`, `s`,
/// `m`), or a bare number of seconds; must be positive. For `--window` and
/// `--lookback`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("\"{s}\" is not a duration (like 500ms, 2s)"));
    }
    let scale = match unit.trim() {
        "" | "s" => 1e9,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "m" | "min" => 60e9,
        u => {
            return Err(format!(
                "unknown unit \"{u}\" in \"{s}\" (use ns, us, ms, s or m)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{s}\" is not a duration (like 500ms, 2s)"))?;
    let ns = v * scale;
    if !ns.is_finite() || !(1.0..=1e18).contains(&ns) {
        return Err(format!("\"{s}\" is out of range (1 ns to 31 years)"));
    }
    Ok(ns.round() as u64)
}

/// `runtrace backlog FILE... [--json] [--window DUR] [--lookback DUR]`:
/// prints the report to standard output, damage to standard error. Exit
/// code 0, or 1 when a file was damaged, cut short or missing (the report
/// still covers what was readable).
pub fn run(args: &Args) -> ExitCode {
    let opts = BacklogOptions {
        window_ns: args.window,
        lookback_ns: args.lookback,
        ..BacklogOptions::default()
    };
    let files = match args.traces.readable() {
        Ok(f) => f,
        Err(code) => return code,
    };
    let r = with_progress("backlog", &files, |progress| {
        analyze_files_with_progress(&files, &opts, progress)
    });
    let text = if args.json {
        r.to_json().to_string()
    } else {
        r.to_string()
    };
    print_report(&text, &r.errors, r.is_damaged())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration("2"), Ok(2_000_000_000));
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert_eq!(parse_duration("250µs"), Ok(250_000));
        assert_eq!(parse_duration("1m"), Ok(60_000_000_000));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
