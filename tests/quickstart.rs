//! The README's main job, end to end: the quickstart example records a
//! trace, `runtrace check` passes on it, `runtrace jsonl` converts it, and
//! the user guide's (seed 000) "Check Worker Balance" Python snippet runs
//! unchanged on the output.

mod common;
use common::example;
use std::path::Path;
use std::process::Command;

/// The snippet, verbatim, from the seed when it is there (CI has
/// `../shared` beside the clone), else the copy below.
fn worker_balance_snippet() -> String {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/seeds");
    let from_seed = std::fs::read_dir(&seeds).ok().and_then(|rd| {
        let f = rd
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("000_"))?;
        let text = std::fs::read_to_string(f.path()).ok()?;
        let after = &text[text.find("### Check Worker Balance")?..];
        let start = after.find("```python\n")? + "```python\n".len();
        let len = after[start..].find("```")?;
        Some(after[start..start + len].to_string())
    });
    from_seed.unwrap_or_else(|| {
        "# Count polls per worker\nimport json\nfrom collections import Counter\n\n\
         worker_polls = Counter()\nwith open('trace.jsonl') as f:\n    for line in f:\n        \
         e = json.loads(line)\n        if e['event'] == 'PollStart':\n            \
         worker_polls[e['worker']] += 1\n\n# Should be roughly equal (within 10%)\n"
            .to_string()
    })
}

#[test]
fn quickstart_check_jsonl_and_seed_snippet() {
    let dir = std::env::temp_dir().join(format!("runtrace-quickstart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(example("quickstart"))
        .args(["--out", dir.to_str().unwrap(), "--seconds", "0.5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("result:          OK"), "{stdout}");
    assert!(stdout.contains("PollStart"), "{stdout}");
    // The timeline and the report, written and their paths printed.
    for name in ["trace.pftrace", "report.html"] {
        let p = dir.join(name);
        assert!(
            stdout.contains(&p.display().to_string()),
            "{name}: {stdout}"
        );
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 1000),
            "{name}"
        );
    }

    let files = vec![dir.join("trace.0.bin")];
    let report = runtrace_format::check::check_files(&files);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.dropped_events, 0);
    let polls = report.event_counts["PollStart"];
    assert!(polls > 100);

    let jsonl = dir.join("trace.jsonl");
    assert_eq!(
        runtrace_export::jsonl::convert(&files, Some(&jsonl)),
        std::process::ExitCode::SUCCESS
    );

    let script = worker_balance_snippet() + "\nprint(sorted(worker_polls.items()))\n";
    let py = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .current_dir(&dir)
        .output()
        .expect("python3 must be installed");
    let printed = String::from_utf8_lossy(&py.stdout);
    assert!(
        py.status.success(),
        "snippet failed: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    // Both workers polled, and the snippet's counts add up to the trace's.
    let counts: Vec<u64> = printed
        .trim()
        .trim_matches(|c| c == '[' || c == ']')
        .split("), (")
        .map(|p| {
            p.trim_matches(|c| c == '(' || c == ')')
                .split(", ")
                .nth(1)
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(counts.len(), 2, "{printed}");
    assert_eq!(counts.iter().sum::<u64>(), polls, "{printed}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The quickstart's planted problems are what the analysis finds: the
/// blocking sleep is a critical long poll, the CPU-heavy reports are
/// CPU-bound, and the fan-out builds a local queue; each finding names the
/// spawn location (the line of the `tokio::spawn` call in the example).
#[test]
fn quickstart_findings_name_the_planted_problems() {
    let dir = std::env::temp_dir().join(format!(
        "runtrace-quickstart-findings-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(example("quickstart"))
        .args(["--out", dir.to_str().unwrap(), "--seconds", "1.5"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let src = include_str!("../examples/quickstart.rs");
    let line_of = |needle: &str| -> String {
        let n = src
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in the example"))
            + 1;
        format!("examples/quickstart.rs:{n}:")
    };
    let blocking = line_of("tokio::spawn(blocking_audit_log())");
    let cpu = line_of("tokio::spawn(cpu_heavy_report(r))");
    let fanout_child = line_of("runtrace_tokio::spawn(async move {");

    let files = vec![dir.join("trace.0.bin")];
    let report = runtrace_analyze::analyze_files(&files, runtrace_analyze::Options::default());
    let json = report.to_json();
    let findings = json["findings"].as_array().unwrap();
    let has = |kind: &str, severity: &str, loc: &str| {
        findings.iter().any(|f| {
            f["kind"] == kind
                && f["severity"] == severity
                && (f["spawn_loc"].as_str().is_some_and(|l| l.starts_with(loc))
                    || f["spawn_locs"].as_array().is_some_and(|a| {
                        a.iter()
                            .any(|l| l.as_str().is_some_and(|l| l.starts_with(loc)))
                    }))
        })
    };
    assert!(
        has("long_poll", "critical", &blocking),
        "blocking sleep: {findings:#?}"
    );
    assert!(
        has("cpu_bound", "critical", &cpu) || has("cpu_bound", "warning", &cpu),
        "cpu heavy: {findings:#?}"
    );
    let buildup: Vec<_> = findings
        .iter()
        .filter(|f| f["kind"] == "local_queue_buildup")
        .collect();
    assert!(!buildup.is_empty(), "fan-out local queue: {findings:#?}");
    assert!(
        buildup.iter().any(|f| f["detail"]
            .as_str()
            .is_some_and(|d| d.contains(fanout_child.trim_end_matches(':')))),
        "the buildup names the fan-out's children ({fanout_child}): {buildup:#?}"
    );
    assert!(
        json["workers"].as_array().unwrap().len() >= 3,
        "2 tokio workers + the executor"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
