//! docs/lttng.md, run: every command of its ```sh blocks, in order, on
//! `examples/backlog_pipeline` built with `--features lttng`, against a
//! private LTTng session daemon; then checks that the traces say what the
//! page says.
//!
//! The convention (also at the top of docs/lttng.md): each line of a
//! ```sh block is a command, run with `sh -c` in one scratch directory (the
//! private daemon's `LTTNG_HOME`); `\` at the end of a line continues it;
//! blank lines and `#` lines are comments; `NAME=value` sets a variable for
//! the following commands; ```text blocks are output and are not run. Every
//! command must exit 0 within a minute.
//!
//! Substitutions, and nothing else:
//! - `sudo apt-get install -y PKGS`: not run; the test checks the packages
//!   are exactly the ones whose tools it needs (`lttng-tools`,
//!   `liblttng-ust-dev`, `babeltrace2`) and that those are there.
//! - `cargo build --release --example backlog_pipeline --features lttng`:
//!   not run; the test builds the example with `--features lttng` in its
//!   own profile (like tests/lttng.rs) and copies it to
//!   `./target/release/examples/backlog_pipeline` in the scratch directory,
//!   where the page's `BIN=` points.
//! - `cargo install --path crates/runtrace-cli`: not run; the test builds
//!   the `runtrace` binary in its own profile and puts it in a directory at
//!   the front of `PATH`.
//! - `lttng`: a wrapper in that directory runs the real one with
//!   `--no-sessiond --group=<a group nobody is in>`, so every `lttng`
//!   command reaches the private daemon only.
//!
//! As root, the commands run as user `nobody` (see tests/common/lttng.rs).
//! Missing tools: skipped with a message naming them, a failure under
//! `CI=true`.
//!
//! Checks, for every session the page creates: each recorded event matches
//! one of the session's `enable-event` rules and satisfies that rule's
//! `--filter` (evaluated here on babeltrace2's text), every rule matched
//! at least one event, and every event has `cpu_id` and the added
//! contexts. Then what the page claims: `runtrace doctor` finds every
//! seed event's tracepoint registered; the basic session has as many
//! enqueue, dequeue and processing_end events as the program processed
//! items, no drops, one backlog_trigger per trigger it printed, each event
//! from the thread the page says, strings quoted and bools as 0/1; the
//! `grep -c` counts print that number; the lock summary names only lock
//! `log`; the snapshot session wrote one snapshot per trigger fired (at
//! least one), each ending within 250 ms after its trigger with history
//! from before it, and the by-hand snapshot holds the run's last trigger;
//! `lttng list -u` lists the tracepoints; `runtrace backlog` runs.

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::lttng::{
    babeltrace_with, build_bin, build_lttng_example, event_name, field_str, field_u64, Lttng,
    LTTNG_ARGS, TOOLS,
};
use common::{tools_present, which};

const DOC: &str = "docs/lttng.md";
const PACKAGES: [&str; 3] = ["lttng-tools", "liblttng-ust-dev", "babeltrace2"];
const BUILD_EXAMPLE: &str = "cargo build --release --example backlog_pipeline --features lttng";
const INSTALL_CLI: &str = "cargo install --path crates/runtrace-cli";
/// Where the page's `BIN=` points, relative to the scratch directory.
const BIN_PATH: &str = "target/release/examples/backlog_pipeline";
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// Seed 001's events, as runtrace names them.
const SEED_EVENTS: [&str; 10] = [
    "enqueue",
    "dequeue",
    "processing_end",
    "lock_wait",
    "lock_hold",
    "io",
    "queue_snapshot",
    "backlog_trigger",
    "item_dropped",
    "thread_heartbeat",
];

/// A command of the page: its first line number and text.
struct DocCmd {
    line: usize,
    text: String,
}

/// Every command of the page's ```sh blocks, in order.
fn doc_commands(doc: &str) -> Vec<DocCmd> {
    let mut cmds = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending: Option<DocCmd> = None;
    for (i, raw) in doc.lines().enumerate() {
        let line = raw.trim();
        if let Some(info) = line.strip_prefix("```") {
            match fence {
                None => fence = Some(info.trim().to_string()),
                Some(_) => {
                    assert!(info.is_empty(), "{DOC}:{}: fence inside a block", i + 1);
                    assert!(pending.is_none(), "{DOC}:{}: `\\` at block end", i + 1);
                    fence = None;
                }
            }
            continue;
        }
        if fence.as_deref() != Some("sh") {
            continue;
        }
        let (text, continued) = match line.strip_suffix('\\') {
            Some(t) => (t.trim_end(), true),
            None => (line, false),
        };
        let cmd = match pending.take() {
            Some(mut p) => {
                p.text.push(' ');
                p.text.push_str(text);
                p
            }
            None if text.is_empty() || text.starts_with('#') => continue,
            None => DocCmd {
                line: i + 1,
                text: text.to_string(),
            },
        };
        if continued {
            pending = Some(cmd);
        } else {
            cmds.push(cmd);
        }
    }
    assert!(fence.is_none(), "{DOC}: unclosed code block");
    cmds
}

/// Shell words with '...' and "..." quoting (enough for the page's
/// `lttng` lines).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '"' {
                        break;
                    }
                    cur.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// An `enable-event` rule: event name pattern and optional filter.
#[derive(Debug)]
struct Rule {
    pattern: String,
    filter: Option<String>,
    matched: usize,
}

/// A session as the page sets it up, and the output of the program run
/// while it was the current one.
#[derive(Debug, Default)]
struct Session {
    name: String,
    output: PathBuf,
    snapshot: bool,
    rules: Vec<Rule>,
    contexts: Vec<String>,
    run_stdout: Option<String>,
}

fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Evaluates an LTTng filter of the forms the page uses (`field OP int`,
/// `field == "text"`, joined by `&&`) on a babeltrace2 line.
fn filter_holds(filter: &str, line: &str) -> bool {
    filter.split("&&").all(|clause| {
        let clause = clause.trim();
        let (field, op, value) = ["==", "!=", ">=", "<=", ">", "<"]
            .iter()
            .find_map(|op| {
                let (l, r) = clause.split_once(op)?;
                Some((l.trim(), *op, r.trim()))
            })
            .unwrap_or_else(|| panic!("filter clause not understood: {clause}"));
        if let Some(text) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            let actual =
                field_str(line, field).unwrap_or_else(|| panic!("no text field {field} in {line}"));
            match op {
                "==" => actual == text,
                "!=" => actual != text,
                _ => panic!("text comparison {op} in {clause}"),
            }
        } else {
            let v: u64 = value
                .parse()
                .unwrap_or_else(|_| panic!("filter value {value} in {clause}"));
            let actual = field_u64(line, field)
                .unwrap_or_else(|| panic!("no integer field {field} in {line}"));
            match op {
                "==" => actual == v,
                "!=" => actual != v,
                ">=" => actual >= v,
                "<=" => actual <= v,
                ">" => actual > v,
                _ => actual < v,
            }
        }
    })
}

/// The seconds of a `babeltrace2 --clock-seconds` line (`[1763.123456789]`).
fn timestamp(line: &str) -> f64 {
    line.strip_prefix('[')
        .and_then(|l| l.split(']').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no timestamp: {line}"))
}

/// The number before `what` in the program's summary line
/// (`... 11991 items processed, ...`).
fn summary_count(stdout: &str, what: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("backlog_pipeline:"))
        .unwrap_or_else(|| panic!("no summary line in\n{stdout}"));
    let before = &line[..line
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} in {line}"))];
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count before {what:?} in {line}"))
}

struct Ran {
    line: usize,
    text: String,
    stdout: String,
}

/// Runs one command with `sh -c` in the private environment; panics with
/// its output when it fails or outlives `COMMAND_TIMEOUT`.
fn run(lt: &Lttng, path: &std::ffi::OsStr, vars: &[(String, String)], cmd: &DocCmd) -> Ran {
    let mut c = lt.command("sh");
    c.arg("-c")
        .arg(&cmd.text)
        .env("PATH", path)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout can stop all of it.
        .process_group(0);
    for (k, v) in vars {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("spawn sh");
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = pipe(Box::new(child.stdout.take().unwrap()));
    let err = pipe(Box::new(child.stderr.take().unwrap()));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > COMMAND_TIMEOUT {
            // SAFETY: signals the process group led by our own child, not
            // reaped yet (so its pid, the group id, cannot have been reused).
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    let ok = status.is_some_and(|s| s.success());
    assert!(
        ok,
        "{DOC}:{}: `{}` {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        cmd.line,
        cmd.text,
        match status {
            Some(s) => format!("failed ({s})"),
            None => format!("did not finish in {COMMAND_TIMEOUT:?}"),
        }
    );
    eprintln!(
        "{DOC}:{}: ok ({:.1} s): {}",
        cmd.line,
        t0.elapsed().as_secs_f64(),
        cmd.text
    );
    Ran {
        line: cmd.line,
        text: cmd.text.clone(),
        stdout,
    }
}

/// Tracks `lttng create/enable-event/add-context` and the program runs.
fn track(sessions: &mut Vec<Session>, home: &Path, cmd: &str, stdout: &str) {
    let w = words(cmd);
    if w.first().map(String::as_str) != Some("lttng") {
        if cmd.starts_with("$BIN ") {
            if let Some(s) = sessions.last_mut() {
                if s.run_stdout.is_none() {
                    s.run_stdout = Some(stdout.to_string());
                }
            }
        }
        return;
    }
    match w.get(1).map(String::as_str) {
        Some("create") => {
            let mut s = Session {
                name: w[2].clone(),
                ..Session::default()
            };
            for a in &w[3..] {
                if let Some(o) = a.strip_prefix("--output=") {
                    s.output = home.join(o);
                } else if a == "--snapshot" {
                    s.snapshot = true;
                }
            }
            assert!(!s.output.as_os_str().is_empty(), "no --output= in `{cmd}`");
            sessions.push(s);
        }
        Some("enable-event") => {
            let s = sessions.last_mut().expect("enable-event before create");
            assert_eq!(w[2], "-u", "`{cmd}`");
            let mut rule = Rule {
                pattern: w[3].clone(),
                filter: None,
                matched: 0,
            };
            if let Some(i) = w.iter().position(|a| a == "--filter") {
                rule.filter = Some(w[i + 1].clone());
            }
            assert!(
                w.len() == 4 || rule.filter.is_some() && w.len() == 6,
                "`{cmd}`"
            );
            s.rules.push(rule);
        }
        Some("add-context") => {
            let s = sessions.last_mut().expect("add-context before create");
            s.contexts
                .extend(w.windows(2).filter(|p| p[0] == "-t").map(|p| p[1].clone()));
        }
        _ => {}
    }
}

/// The trace directories of a session: its output, or each snapshot in it.
fn trace_dirs(s: &Session) -> Vec<PathBuf> {
    if !s.snapshot {
        return vec![s.output.clone()];
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&s.output)
        .unwrap_or_else(|e| panic!("{}: {e}", s.output.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Which threads (procname) fire each event in backlog_pipeline, as the
/// page's table says. The main thread's name is the program's, cut to 15
/// characters.
fn expected_threads(event: &str, line: &str) -> &'static [&'static str] {
    match event {
        "enqueue" | "backlog_trigger" | "item_dropped" => &["producer"],
        "queue_snapshot" => &["producer", "consumer", "runtrace-snaps"],
        "dequeue" | "processing_end" => &["consumer"],
        "io" => &["logger"],
        "thread_heartbeat" => match field_str(line, "role") {
            Some("producer") => &["producer"],
            Some("consumer") => &["consumer"],
            Some("logging") => &["logger"],
            other => panic!("heartbeat role {other:?}: {line}"),
        },
        "lock_wait" | "lock_hold" => &["consumer", "logger", "backlog_pipelin"],
        other => panic!("unexpected event {other}: {line}"),
    }
}

/// Checks every session's traces against its rules and contexts; returns
/// the lines of each trace directory.
fn check_sessions(sessions: &mut [Session]) -> HashMap<PathBuf, Vec<String>> {
    let mut traces = HashMap::new();
    for s in sessions.iter_mut() {
        let dirs = trace_dirs(s);
        assert!(
            !dirs.is_empty(),
            "session {}: no trace in {}",
            s.name,
            s.output.display()
        );
        for dir in dirs {
            let (lines, stderr) = babeltrace_with(&dir, &["--clock-seconds"]);
            // Snapshot sessions overwrite their oldest events by design.
            assert!(
                s.snapshot || !stderr.contains("discarded"),
                "session {}: LTTng discarded events:\n{stderr}",
                s.name
            );
            assert!(!lines.is_empty(), "{}: empty trace", dir.display());
            for l in &lines {
                let e = event_name(l).unwrap_or_else(|| panic!("not a runtrace event: {l}"));
                let name = format!("runtrace:{e}");
                let rule = s
                    .rules
                    .iter_mut()
                    .filter(|r| glob_match(&r.pattern, &name))
                    .find(|r| r.filter.as_deref().is_none_or(|f| filter_holds(f, l)))
                    .unwrap_or_else(|| panic!("session {}: no rule or filter admits {l}", s.name));
                rule.matched += 1;
                assert!(l.contains("{ cpu_id = "), "no cpu_id: {l}");
                for ctx in &s.contexts {
                    let pat = match ctx.as_str() {
                        "vtid" => "{ vtid = ".to_string(),
                        other => format!(" {other} = "),
                    };
                    assert!(l.contains(&pat), "no context {ctx}: {l}");
                }
            }
            traces.insert(dir, lines);
        }
        for r in &s.rules {
            assert!(
                r.matched > 0,
                "session {}: no event for rule {} {:?}",
                s.name,
                r.pattern,
                r.filter
            );
        }
    }
    traces
}

fn count(lines: &[String], event: &str) -> u64 {
    lines
        .iter()
        .filter(|l| event_name(l) == Some(event))
        .count() as u64
}

#[test]
fn every_command_of_docs_lttng_md_runs_and_means_what_it_says() {
    let t0 = Instant::now();
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC)).unwrap();
    let cmds = doc_commands(&doc);
    assert!(cmds.len() > 30, "{} commands in {DOC}?", cmds.len());
    if !tools_present(&TOOLS) {
        return;
    }
    let lt = Lttng::start("lttng-doc");
    let bin_dir = lt.home.join("bin");
    let example_dir = lt.home.join(BIN_PATH).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::create_dir_all(&example_dir).unwrap();
    let Some(example) = build_lttng_example("backlog_pipeline", &lt.home.join(BIN_PATH)) else {
        return;
    };
    let cli = build_bin("runtrace-cli", "runtrace", &bin_dir.join("runtrace"));
    let lttng_real = which("lttng").unwrap();
    let wrapper = bin_dir.join("lttng");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} {} \"$@\"\n",
            lttng_real.display(),
            LTTNG_ARGS.join(" ")
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    for p in [&bin_dir, &example, &cli, &wrapper] {
        lt.give(p);
    }
    let mut dir = example_dir.as_path();
    while dir != lt.home {
        lt.give(dir);
        dir = dir.parent().unwrap();
    }
    let built = t0.elapsed();
    let mut path = std::ffi::OsString::from(&bin_dir);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());

    // Run the page.
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut sessions: Vec<Session> = Vec::new();
    let mut ran: Vec<Ran> = Vec::new();
    let (mut apt, mut build_line, mut install_line) = (false, false, false);
    for cmd in &cmds {
        let t = cmd.text.as_str();
        if let Some(pkgs) = t.strip_prefix("sudo apt-get install -y ") {
            let mut got: Vec<&str> = pkgs.split_whitespace().collect();
            let mut want = PACKAGES.to_vec();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(
                got, want,
                "{DOC}:{}: the packages the test checks for",
                cmd.line
            );
            apt = true; // tools checked above, headers by the build
            continue;
        }
        if t.starts_with("cargo ") {
            match t {
                BUILD_EXAMPLE => build_line = true,
                INSTALL_CLI => install_line = true,
                _ => panic!(
                    "{DOC}:{}: a cargo line the test does not replace: {t}",
                    cmd.line
                ),
            }
            continue;
        }
        if let Some((k, v)) = t.split_once('=').filter(|(k, v)| {
            !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !v.contains(char::is_whitespace)
        }) {
            if k == "BIN" {
                assert_eq!(v, format!("./{BIN_PATH}"), "{DOC}:{}", cmd.line);
            }
            vars.push((k.to_string(), v.to_string()));
            continue;
        }
        let r = run(&lt, &path, &vars, cmd);
        track(&mut sessions, &lt.home, t, &r.stdout);
        ran.push(r);
    }
    assert!(
        apt && build_line && install_line,
        "{DOC}: install/build lines missing"
    );
    let ran_at = t0.elapsed();
    let find = |needle: &str| -> &Ran {
        ran.iter()
            .find(|r| r.text.contains(needle))
            .unwrap_or_else(|| panic!("{DOC}: no command containing {needle:?}"))
    };

    // runtrace doctor: the tracepoints are there and register.
    let doctor = &find("runtrace doctor").stdout;
    for e in SEED_EVENTS {
        let name = format!("runtrace:{e} ");
        assert!(
            doctor
                .lines()
                .any(|l| l.contains(&name) && l.ends_with("registered: yes")),
            "runtrace doctor: {name}not registered:\n{doctor}"
        );
    }
    assert!(doctor.contains("Verdict: SOUND"), "{doctor}");

    // Every session: rules, filters, contexts.
    let traces = check_sessions(&mut sessions);
    let session = |name: &str| -> &Session {
        sessions
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{DOC}: no session {name}"))
    };

    // The basic session: counts match the program's, threads and formats
    // as the page says.
    let basic = session("rt-basic");
    let run_out = basic.run_stdout.as_deref().expect("no run in rt-basic");
    let items = summary_count(run_out, "items processed");
    let triggers = summary_count(run_out, "backlog triggers");
    assert!(items > 1000, "{run_out}");
    assert!(triggers > 0, "no backlog trigger in 3 s:\n{run_out}");
    let lines = &traces[&basic.output];
    for e in ["enqueue", "dequeue", "processing_end"] {
        assert_eq!(count(lines, e), items, "runtrace:{e} vs items processed");
    }
    assert_eq!(count(lines, "item_dropped"), 0, "the page says no drops");
    assert_eq!(count(lines, "backlog_trigger"), triggers);
    for e in SEED_EVENTS.iter().filter(|e| **e != "item_dropped") {
        assert!(count(lines, e) > 0, "no runtrace:{e} in the basic session");
    }
    for l in lines {
        let e = event_name(l).unwrap();
        let threads = expected_threads(e, l);
        assert!(
            threads
                .iter()
                .any(|t| l.contains(&format!("procname = \"{t}\" }}"))),
            "expected thread {threads:?}: {l}"
        );
    }
    let wait = lines
        .iter()
        .find(|l| event_name(l) == Some("lock_wait"))
        .unwrap();
    assert!(
        wait.contains("lock_name = \"log\", ") && wait.ends_with(", write = 1 }"),
        "{wait}"
    );
    let end = lines
        .iter()
        .find(|l| event_name(l) == Some("processing_end"))
        .unwrap();
    assert!(end.ends_with(", success = 1 }"), "{end}");
    for needle in [
        "grep -c 'runtrace:enqueue:'",
        "grep -c 'runtrace:processing_end:'",
    ] {
        assert_eq!(find(needle).stdout.trim(), items.to_string(), "{needle}");
    }
    // The first event of each type.
    let firsts = find("babeltrace2 traces/basic | awk '!seen[$4]++'");
    let types: std::collections::HashSet<&str> =
        lines.iter().filter_map(|l| event_name(l)).collect();
    assert_eq!(
        firsts.stdout.lines().count(),
        types.len(),
        "line {}: {types:?}",
        firsts.line
    );
    assert_eq!(types.len(), SEED_EVENTS.len() - 1, "{types:?}");
    // The lock summary: one lock, "log", with every wait of the trace.
    let summary = find("printf \"%s: %d waits").stdout.trim().to_string();
    let waits = count(lines, "lock_wait");
    assert!(
        summary.starts_with(&format!("log: {waits} waits, ")) && summary.lines().count() == 1,
        "lock summary {summary:?} vs {waits} lock_wait events"
    );

    // Filters: checked by check_sessions (every event passes its filter,
    // every filter kept some); the string filters kept only their text.
    let filtered = session("rt-filtered");
    for l in &traces[&filtered.output] {
        match event_name(l) {
            Some("lock_hold") => assert_eq!(field_str(l, "lock_name"), Some("log"), "{l}"),
            Some("thread_heartbeat") => assert_eq!(field_str(l, "role"), Some("consumer"), "{l}"),
            _ => {}
        }
    }

    // Snapshots: one per trigger (the last may be cut by the end of the
    // run), each right after its trigger and with the time before it.
    let snap = session("rt-backlog");
    let snap_run = snap.run_stdout.as_deref().expect("no run in rt-backlog");
    let snap_triggers = summary_count(snap_run, "backlog triggers");
    let dirs = trace_dirs(snap);
    let name_of = |d: &PathBuf| d.file_name().unwrap().to_string_lossy().into_owned();
    let triggered: Vec<&PathBuf> = dirs
        .iter()
        .filter(|d| name_of(d).starts_with("snapshot-1-"))
        .collect();
    assert!(
        !triggered.is_empty() && triggered.len() as u64 <= snap_triggers,
        "{} trigger snapshots for {snap_triggers} triggers: {dirs:?}",
        triggered.len()
    );
    assert!(name_of(triggered[0]).ends_with("-0"), "{dirs:?}");
    let (mut delays, mut history) = (Vec::new(), Vec::new());
    for d in &triggered {
        let lines = &traces[*d];
        let trig = lines
            .iter()
            .rfind(|l| event_name(l) == Some("backlog_trigger"))
            .unwrap_or_else(|| panic!("{}: no backlog_trigger", d.display()));
        let t_trig = timestamp(trig);
        let t_last = lines.iter().map(|l| timestamp(l)).fold(f64::MIN, f64::max);
        let t_first = lines.iter().map(|l| timestamp(l)).fold(f64::MAX, f64::min);
        let after = t_last - t_trig;
        assert!(
            (0.0..0.25).contains(&after),
            "{}: ends {after:.3} s after its trigger",
            d.display()
        );
        assert!(
            t_trig - t_first > 0.5,
            "{}: little history before the trigger",
            d.display()
        );
        delays.push(after);
        history.push(t_trig - t_first);
    }
    let after_run = dirs
        .iter()
        .find(|d| name_of(d).starts_with("after-run-"))
        .expect("no after-run snapshot");
    // Taken after the run, it holds (at least) the run's last trigger.
    let last_printed = snap_run
        .lines()
        .rfind(|l| l.trim_start().starts_with("backlog on "))
        .expect("no trigger printed");
    let last = traces[after_run]
        .iter()
        .rfind(|l| event_name(l) == Some("backlog_trigger"))
        .unwrap_or_else(|| panic!("{}: no backlog_trigger", after_run.display()));
    let (size, rate) = (
        field_u64(last, "queue_size").unwrap(),
        last.split(" growth_rate_per_sec = ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap(),
    );
    assert!(
        last_printed.contains(&format!(": {size} items, growing {rate}/s")),
        "after-run's last trigger {last}\nvs the program's {last_printed}"
    );
    let listed = &find("ls traces/backlog").stdout;
    assert_eq!(listed.lines().count(), dirs.len(), "{listed}");
    let tail = find("snapshot-1-*-0 | grep -v").stdout.clone();
    assert!(!tail.is_empty() && !tail.contains("\"producer\""), "{tail}");

    // Troubleshooting: lttng list -u sees the running program.
    let listed: u64 = find("lttng list -u | grep -c")
        .stdout
        .trim()
        .parse()
        .unwrap();
    assert!(
        listed >= SEED_EVENTS.len() as u64,
        "lttng list -u: {listed} runtrace events"
    );

    // runtrace backlog: runs on the recording (its output is
    // docs/analysis.md's business).
    let backlog = find("runtrace backlog rec");
    assert!(
        !backlog.stdout.trim().is_empty(),
        "runtrace backlog printed nothing"
    );

    eprintln!(
        "lttng_doc: {} commands ({} run), {} sessions, {items} items and {triggers} triggers in the basic run, \
         {} trigger snapshots (taken {:.1}-{:.1} ms after the trigger's event, \
         with {:.2}-{:.2} s before it); \
         build {:.1} s, commands {:.1} s, total {:.1} s",
        cmds.len(),
        ran.len(),
        sessions.len(),
        triggered.len(),
        delays.iter().copied().fold(f64::MAX, f64::min) * 1e3,
        delays.iter().copied().fold(f64::MIN, f64::max) * 1e3,
        history.iter().copied().fold(f64::MAX, f64::min),
        history.iter().copied().fold(f64::MIN, f64::max),
        built.as_secs_f64(),
        (ran_at - built).as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
