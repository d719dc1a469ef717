//! The `lttng` backend end to end, the way LTTng users work (seed 001):
//! the quickstart built with `--features lttng` registers the `runtrace:*`
//! tracepoints, a session records them with the catalog's field names and
//! the `vtid`/`procname` contexts, every event count equals what the
//! quickstart's own recording counted, and a `--filter 'local_q > 10'` on
//! `runtrace:task_poll_start` keeps exactly the matching events.
//!
//! Needs `lttng`, `lttng-sessiond`, `babeltrace2` and liblttng-ust-dev:
//! skipped (with a message) when one is missing, except under CI
//! (`CI=true`), where that is a failure.
//!
//! The test runs its own session daemon with a private `LTTNG_HOME` in a
//! temporary directory (never a system daemon), and stops it by pid at the
//! end, on failure too. As root, the daemon, the `lttng` commands and the
//! traced program run as user `nobody`: root's `lttng` always talks to the
//! system-wide daemon, whatever `LTTNG_HOME` says.
//!
//! The quickstart is built with the same cargo profile as this test (so a
//! plain `cargo test` reuses its dependencies; `cargo test --release`
//! checks the release build).

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use runtrace::format::schema::BUILTIN_EVENTS;

const TOOLS: [&str; 3] = ["lttng", "lttng-sessiond", "babeltrace2"];
/// `nobody`/`nogroup` on Debian-like systems (and the kernel's overflow id).
const NOBODY: u32 = 65534;

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Under CI a missing prerequisite fails the test; elsewhere it skips.
fn missing(what: &str) {
    if ci() {
        panic!("CI=true and {what}");
    }
    eprintln!("skipped: {what}");
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// Builds the quickstart with `--features lttng` in this test's target dir
/// and profile; `None` (after `missing`) when liblttng-ust-dev is absent.
fn build_quickstart() -> Option<PathBuf> {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/lttng-<hash>
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_string();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "--example", "quickstart", "--features", "lttng"])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile == "release" {
        cmd.arg("--release");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stderr.contains("install liblttng-ust-dev") {
            missing("liblttng-ust-dev is not installed (LTTng-UST headers)");
            return None;
        }
        panic!("cargo build --example quickstart --features lttng failed:\n{stderr}");
    }
    let bin = target.join(&profile).join("examples").join("quickstart");
    assert!(bin.exists(), "{} not built", bin.display());
    Some(bin)
}

/// A private session daemon; stopped (by pid) and its directory removed
/// on drop. The directory is kept when the test fails, for a look.
struct Lttng {
    home: PathBuf,
    daemon: Option<Child>,
    as_nobody: bool,
}

impl Lttng {
    fn start() -> Lttng {
        let home = std::env::temp_dir().join(format!("runtrace-lttng-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let as_nobody = is_root();
        if as_nobody {
            std::os::unix::fs::chown(&home, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        let mut l = Lttng {
            home,
            daemon: None,
            as_nobody,
        };
        let log = std::fs::File::create(l.home.join("sessiond.log")).unwrap();
        let child = l
            .command("lttng-sessiond")
            .arg("--no-kernel")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start lttng-sessiond");
        l.daemon = Some(child);
        let sock = l.home.join(".lttng/client-lttng-sessiond");
        let t0 = Instant::now();
        loop {
            if let Some(st) = l.daemon.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "lttng-sessiond exited ({st}):\n{}",
                    std::fs::read_to_string(l.home.join("sessiond.log")).unwrap_or_default()
                );
            }
            if sock.exists() && l.lttng_output(&["list"]).status.success() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "lttng-sessiond not ready after 15 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        l
    }

    /// A command in the private LTTng environment (as `nobody` under root).
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("HOME", &self.home)
            .env("LTTNG_HOME", &self.home)
            .current_dir(&self.home);
        if self.as_nobody {
            c.uid(NOBODY).gid(NOBODY);
        }
        c
    }

    fn lttng_output(&self, args: &[&str]) -> Output {
        // --no-sessiond: never spawn an unmanaged daemon. --group: a group
        // nobody is in, so a non-root user of the `tracing` group does not
        // reach the system-wide daemon.
        self.command("lttng")
            .args(["--no-sessiond", "--group=runtrace-test-no-such-group"])
            .args(args)
            .output()
            .expect("run lttng")
    }

    fn lttng(&self, args: &[&str]) {
        let out = self.lttng_output(args);
        assert!(
            out.status.success(),
            "lttng {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let pid = d.id() as libc::pid_t;
            // SAFETY: signals our own child, which has not been reaped yet
            // (so the pid cannot have been reused).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let t0 = Instant::now();
            while d.try_wait().ok().flatten().is_none() {
                if t0.elapsed() > Duration::from_secs(10) {
                    let _ = d.kill();
                    let _ = d.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.home.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

/// `event counts:` of the quickstart's report: JSON name -> count.
fn report_counts(stdout: &str) -> HashMap<String, u64> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("event counts:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// The event name (`task_spawn`) of a babeltrace2 text line.
fn event_name(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix("runtrace:"))
        .map(|t| t.trim_end_matches(':'))
}

/// An integer field of a babeltrace2 text line.
fn field_u64(line: &str, name: &str) -> Option<u64> {
    let pat = format!(" {name} = ");
    let rest = &line[line.find(&pat)? + pat.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn babeltrace(dir: &Path) -> Vec<String> {
    let out = Command::new("babeltrace2").arg(dir).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "babeltrace2 {}:\n{stderr}",
        dir.display()
    );
    // Discarded events would make the counts below differ: say so.
    assert!(
        !stderr.contains("discarded"),
        "LTTng discarded events (buffers too small for this machine?):\n{stderr}"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn lttng_sessions_see_every_event_with_fields_and_filters() {
    let t0 = Instant::now();
    let absent: Vec<&str> = TOOLS.iter().copied().filter(|t| !on_path(t)).collect();
    if !absent.is_empty() {
        return missing(&format!("not installed: {}", absent.join(", ")));
    }
    let Some(bin) = build_quickstart() else {
        return;
    };
    let built = t0.elapsed();

    let lt = Lttng::start();
    let out_dir = lt.home.join("recording");
    std::fs::create_dir(&out_dir).unwrap();
    let exe = if lt.as_nobody {
        // `nobody` may not reach the target dir: run a copy from the
        // private directory.
        let exe = lt.home.join("quickstart");
        std::fs::copy(&bin, &exe).unwrap();
        for p in [&exe, &out_dir] {
            std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        exe
    } else {
        bin
    };

    // Session 1: every runtrace event, as in seed 001. Session 2, at the
    // same time: only polls that found a long local queue.
    let pid = std::process::id();
    let all = lt.home.join("trace-all");
    let filtered = lt.home.join("trace-filtered");
    let (s_all, s_filt) = (format!("rt-all-{pid}"), format!("rt-filter-{pid}"));
    lt.lttng(&["create", &s_all, &format!("--output={}", all.display())]);
    lt.lttng(&["enable-event", "-u", "runtrace:*", "-s", &s_all]);
    lt.lttng(&[
        "add-context",
        "-u",
        "-t",
        "vtid",
        "-t",
        "procname",
        "-s",
        &s_all,
    ]);
    lt.lttng(&[
        "create",
        &s_filt,
        &format!("--output={}", filtered.display()),
    ]);
    lt.lttng(&[
        "enable-event",
        "-u",
        "runtrace:task_poll_start",
        "--filter",
        "local_q > 10",
        "-s",
        &s_filt,
    ]);
    lt.lttng(&["start", &s_all]);
    lt.lttng(&["start", &s_filt]);

    let run = lt
        .command(&exe)
        .args(["--out", out_dir.to_str().unwrap(), "--seconds", "0.5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for s in [&s_all, &s_filt] {
        lt.lttng(&["stop", s]);
        lt.lttng(&["destroy", s]);
    }

    // Every event type: the LTTng trace has exactly what the quickstart's
    // own recording counted.
    let counts = report_counts(&stdout);
    let lines = babeltrace(&all);
    let mut by_event: HashMap<&str, Vec<&str>> = HashMap::new();
    for l in &lines {
        if let Some(e) = event_name(l) {
            by_event.entry(e).or_default().push(l);
        }
    }
    let spawns = by_event.get("task_spawn").map_or(0, Vec::len) as u64;
    assert!(
        spawns > 100,
        "runtrace:task_spawn: {spawns} events\n{stdout}"
    );
    assert_eq!(
        Some(&spawns),
        counts.get("TaskSpawn"),
        "runtrace:task_spawn in LTTng vs TaskSpawn of the quickstart\n{stdout}"
    );
    for ev in BUILTIN_EVENTS {
        let lttng = by_event.get(ev.name).map_or(0, Vec::len) as u64;
        let recorded = counts.get(ev.json_name).copied().unwrap_or(0);
        assert_eq!(
            lttng, recorded,
            "runtrace:{} in LTTng vs {} recorded",
            ev.name, ev.json_name
        );
        // Field names are the catalog's; the contexts are there.
        if let Some(l) = by_event.get(ev.name).and_then(|v| v.first()) {
            for f in ev.fields {
                assert!(
                    l.contains(&format!(" {} = ", f.name)),
                    "no field {}: {l}",
                    f.name
                );
            }
            assert!(
                l.contains("{ vtid = ") && l.contains(", procname = \""),
                "{l}"
            );
        }
    }
    // Text fields carry their text (`loc`: file:line:col).
    let spawned_here = by_event["task_spawn"]
        .iter()
        .filter(|l| l.contains("spawn_loc = \"examples/quickstart.rs:"))
        .count();
    assert!(spawned_here > 0, "no spawn_loc in examples/quickstart.rs");
    let spawn = by_event["task_spawn"][0];
    assert!(
        field_u64(spawn, "task_id").is_some_and(|t| t > 0),
        "{spawn}"
    );

    // The filter kept exactly the polls with local_q > 10.
    let filt = babeltrace(&filtered);
    let expected = by_event["task_poll_start"]
        .iter()
        .filter(|l| field_u64(l, "local_q").unwrap() > 10)
        .count();
    assert!(expected > 0, "no poll with local_q > 10 in this run");
    for l in &filt {
        assert_eq!(event_name(l), Some("task_poll_start"), "{l}");
        assert!(field_u64(l, "local_q").unwrap() > 10, "{l}");
    }
    assert_eq!(
        filt.len(),
        expected,
        "filtered session vs local_q > 10 in the full one"
    );

    eprintln!(
        "lttng: {} events, {spawns} task_spawn, {} with local_q > 10; build {:.1} s, total {:.1} s",
        lines.len(),
        filt.len(),
        built.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
