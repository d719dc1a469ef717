//! The quickstart built with `--features perf-probe,usdt,taskdump`, seen from outside
//! the process, every count checked against the quickstart's own recording:
//! (a) `readelf -n` lists an SDT probe for every built-in event (and the
//!     binary has a `runtrace_<event>` function for each);
//! (b) `perf probe` on `sdt_runtrace:task_spawn` / `task_terminate`, then
//!     `perf record`: as many spawns as the quickstart recorded, and the
//!     terminated task ids are spawned ones;
//! (c) the same, and every other event, through `setup_probes.sh`'s
//!     function probes (`runtrace:task_spawn` with `task_id=...`);
//! (d) `bpftrace -c` on `usdt:BIN:runtrace:task_spawn` counts the same;
//! (e) `perf script -s probes/perf-aggregate.py` (or, when perf has no
//!     Python, the script standalone on `perf script` output) reports those
//!     tasks and workers, for the function and the SDT recording.
//!
//! perf probe events are global: everything runs in one test, in sequence,
//! and a guard deletes exactly the events this test added, even when it
//! fails. Tools must be present in CI (`CI=true`, run as root): the test
//! fails there without them; elsewhere it skips the parts that need them and
//! names the missing tool.

mod common;
use common::{have, repo_root, root_or_skip, run, scratch_dir};
use runtrace_format::schema::BUILTIN_EVENTS;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const SECONDS: &str = "0.5";

/// Like [`run`], with stderr appended (perf probe reports there).
fn run_all(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

/// The target directory this test was built in (the one holding cargo's
/// `CACHEDIR.TAG`) and the profile, so the example is built beside it.
fn target_dir_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().unwrap();
    // .../<target>/[<triple>/]<profile>/deps/perf_probes-<hash>
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let target = profile_dir
        .ancestors()
        .find(|d| d.join("CACHEDIR.TAG").exists())
        .unwrap_or_else(|| profile_dir.parent().unwrap())
        .to_path_buf();
    (target, profile)
}

/// Builds the quickstart with the probe backends (under CI's all-features
/// build, that build's features: `common::feature_args`) and returns the
/// executable cargo reports (not the uplifted `examples/quickstart`, which
/// the featureless build of tests/quickstart.rs shares).
fn build_example(name: &str) -> PathBuf {
    let (target, profile) = target_dir_and_profile();
    let mut c = common::cargo();
    // taskdump for the quickstart: it then links runtrace-tokio's
    // optional `dump`, where the two task dump events' probe sites are
    // (it takes no dump unless QUICKSTART_TASK_DUMP is set; the other
    // example records no tokio runtime).
    let features = if name == "quickstart" {
        "perf-probe,usdt,taskdump"
    } else {
        "perf-probe,usdt"
    };
    c.current_dir(repo_root())
        .args(["build", "--quiet", "--example", name])
        .args(common::feature_args(features))
        .arg("--message-format=json")
        .arg("--target-dir")
        .arg(&target);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            c.arg("--release");
        }
        p => {
            c.args(["--profile", p]);
        }
    }
    let out = run(&mut c);
    let exe = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
        .next_back()
        .unwrap_or_else(|| panic!("cargo reported no {name} executable"));
    assert!(exe.exists(), "{} not built", exe.display());
    // `examples/quickstart` is a hard link to this feature set's
    // `examples/quickstart-<hash>`; probe the latter, which a featureless
    // build (tests/quickstart.rs) does not replace.
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(&exe).unwrap().ino();
    std::fs::read_dir(exe.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .strip_prefix(&format!("{name}-"))
                .is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()))
                && std::fs::metadata(p).is_ok_and(|m| m.ino() == ino)
        })
        .unwrap_or(exe)
        // The path perf writes into uprobe_events (see `probes_on`).
        .canonicalize()
        .unwrap()
}

/// The quickstart's own counts ("  TaskSpawn   3670"), by JSON name.
fn quickstart_counts(stdout: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut inside = false;
    for line in stdout.lines() {
        if line.starts_with("event counts:") {
            inside = true;
            continue;
        }
        if inside {
            let mut it = line.split_whitespace();
            match (it.next(), it.next().and_then(|n| n.parse().ok()), it.next()) {
                (Some(name), Some(n), None) if line.starts_with("  ") => {
                    m.insert(name.to_string(), n);
                }
                _ => inside = false,
            }
        }
    }
    assert!(m.contains_key("TaskSpawn"), "no counts in:\n{stdout}");
    m
}

fn json_name(event: &str) -> &'static str {
    BUILTIN_EVENTS
        .iter()
        .find(|e| e.name == event)
        .unwrap()
        .json_name
}

/// `perf script` lines of one event `group:name`, as their `key=value`
/// text after the event name.
fn script_events<'a>(script: &'a str, event: &str) -> Vec<&'a str> {
    let tag = format!(" {event}: ");
    script
        .lines()
        .filter_map(|l| l.find(&tag).map(|i| &l[i + tag.len()..]))
        .collect()
}

/// The integer value of `key=` in a `perf script` event text.
fn field(text: &str, key: &str) -> u64 {
    let pat = format!(" {key}=");
    let i = text
        .find(&pat)
        .unwrap_or_else(|| panic!("no {key} in {text:?}"))
        + pat.len();
    let v: String = text[i..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => v.parse(),
    }
    .unwrap_or_else(|e| panic!("{key}={v}: {e} in {text:?}"))
}

/// Spawned and terminated task ids: spawn ids unique, every terminated
/// task spawned.
fn check_ids(spawn: &[u64], term: &[u64], what: &str) {
    let spawned: BTreeSet<u64> = spawn.iter().copied().collect();
    assert_eq!(spawned.len(), spawn.len(), "{what}: duplicate spawn ids");
    let terminated: BTreeSet<u64> = term.iter().copied().collect();
    assert_eq!(
        terminated.len(),
        term.len(),
        "{what}: a task terminated twice"
    );
    // tokio calls its terminate hook, but no spawn hook, for blocking
    // tasks: the multi-thread runtime launches each of the quickstart's 2
    // workers as one (runtrace-tokio docs). Nothing else may be a stray.
    let strays: Vec<_> = terminated.difference(&spawned).collect();
    assert!(
        strays.len() <= 2,
        "{what}: terminated but never spawned: {strays:?}"
    );
    // Tasks still alive when the quickstart stops are the only difference.
    assert!(
        spawned.len().saturating_sub(terminated.len()) <= 64,
        "{what}: {} spawned, {} terminated",
        spawned.len(),
        terminated.len()
    );
}

/// The uprobe events (`group:event`) placed on `bin`, from tracefs.
fn probes_on(bin: &Path) -> Vec<String> {
    for d in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let Ok(text) = std::fs::read_to_string(format!("{d}/uprobe_events")) else {
            continue;
        };
        // p:GROUP/EVENT PATH:0xOFFSET[(0xSEMAPHORE)] ARGS...
        let set: BTreeSet<String> = text
            .lines()
            .filter_map(|l| {
                let (head, rest) = l.split_once(' ')?;
                let path = rest.split(' ').next()?.rsplit_once(':')?.0;
                (Path::new(path) == bin)
                    .then(|| head.split_once(':').map(|x| x.1.replace('/', ":")))?
            })
            .collect();
        return set.into_iter().collect();
    }
    Vec::new()
}

/// Deletes the perf probe events this test added (every event placed on
/// its binary, whatever perf named it), also when the test fails; other
/// binaries' events of the same names are left alone.
struct Cleanup {
    bin: PathBuf,
}

impl Cleanup {
    fn now(&self) {
        let events = probes_on(&self.bin);
        if !events.is_empty() {
            let mut c = Command::new("perf");
            c.args(["probe", "-q"]);
            for e in &events {
                c.args(["-d", e]);
            }
            let _ = c.output();
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.now();
    }
}

/// perf probe's "Added new event(s):" names (`sdt_runtrace:task_spawn`, or
/// `..._1` when another binary's event already has the name).
fn added_events(perf_out: &str) -> Vec<String> {
    let mut v: Vec<String> = perf_out
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let name = t.split_whitespace().next()?;
            (l.starts_with("  ") && name.contains(':') && t.contains("(on "))
                .then(|| name.to_string())
        })
        .collect();
    v.dedup();
    v
}

/// Runs the aggregation script on `data`: through `perf script -s` when
/// this perf has Python, else standalone. Returns its report.
fn aggregate(data: &Path, python_in_perf: bool) -> String {
    let script = repo_root().join("probes/perf-aggregate.py");
    if python_in_perf {
        run(Command::new("perf")
            .args(["script", "-i"])
            .arg(data)
            .arg("-s")
            .arg(&script))
    } else {
        run(Command::new("python3").arg(&script).arg(data))
    }
}

#[test]
fn perf_sdt_function_probes_bpftrace_and_aggregation() {
    let started = Instant::now();
    let bin = build_example("quickstart");
    // The application events (runtrace::sync) have their sites here.
    let app_bin = build_example("backlog_pipeline");
    let b = bin.to_str().unwrap().to_string();
    eprintln!("perf_probes: built {b} in {:.1?}", started.elapsed());

    // (a) Every built-in event has an SDT note and a perf-probe function in
    // the binary whose code fires it: the runtime's events in the
    // quickstart, the application events (runtrace::sync) in
    // backlog_pipeline; in each binary, a function exactly where a note is.
    if !have("readelf") {
        return;
    }
    let probes_of = |bin: &Path| -> (BTreeSet<String>, BTreeSet<String>, String) {
        let notes = run(Command::new("readelf").arg("-n").arg(bin));
        // The notes of sites with code: rust-lld's --gc-sections drops
        // unused functions (under CI's all-features build, the executor's
        // and runtrace::sync's in the quickstart) but keeps their notes,
        // which `runtrace doctor` lists apart (tests/doctor.rs checks that
        // on C fixtures).
        let report = runtrace_doctor::inspect(bin).unwrap();
        let in_notes: BTreeSet<String> = report
            .usdt
            .probes
            .iter()
            .filter(|p| p.provider == "runtrace")
            .map(|p| p.name.clone())
            .collect();
        let syms = run(Command::new("readelf").args(["-W", "--syms"]).arg(bin));
        let funcs = BUILTIN_EVENTS
            .iter()
            .filter(|e| syms.contains(&format!(" runtrace_{}\n", e.name)))
            .map(|e| e.name.to_string())
            .collect();
        (in_notes, funcs, notes)
    };
    let (in_notes, funcs, notes) = probes_of(&bin);
    let (app_notes, app_funcs, app_notes_text) = probes_of(&app_bin);
    // Profile events (CPU samples) have no probe site: the recorder writes them.
    for e in BUILTIN_EVENTS.iter().filter(|e| e.has_probe_site()) {
        assert!(
            in_notes.contains(e.name) || app_notes.contains(e.name),
            "no SDT note for runtrace:{}:\n{notes}\n{app_notes_text}",
            e.name
        );
    }
    let with_function = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter()
            .filter(|n| {
                BUILTIN_EVENTS
                    .iter()
                    .any(|e| e.name == n.as_str() && e.fields.len() <= 6)
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        funcs,
        with_function(&in_notes),
        "quickstart: functions vs notes"
    );
    assert_eq!(
        app_funcs,
        with_function(&app_notes),
        "backlog_pipeline: functions vs notes"
    );
    assert!(
        app_notes.contains("lock_wait") && app_notes.contains("backlog_trigger"),
        "{app_notes:?}"
    );

    if !root_or_skip("probe attachment (perf probe, perf record, bpftrace)") || !have("perf") {
        return;
    }
    let python3 = have("python3");
    let python_in_perf = run(Command::new("perf").args(["version", "--build-options"]))
        .lines()
        .any(|l| l.contains("libpython: [ on"));
    if !python_in_perf {
        eprintln!("perf_probes: this perf has no Python: running perf-aggregate.py standalone");
    }
    let scratch = scratch_dir("perf-probes");
    let dir = scratch.path();
    let cleanup = Cleanup { bin: bin.clone() };
    cleanup.now(); // leftovers of an interrupted run
    let record = |events: &[&str], data: &Path, run_dir: &str| -> (BTreeMap<String, u64>, String) {
        let mut c = Command::new("perf");
        // Counts are compared exactly: a 16 MiB ring per CPU so that perf,
        // starved on a loaded machine, loses no samples.
        c.args(["record", "-q", "-N", "-m", "16M", "-o"]).arg(data);
        // The quickstart's own CPU profiler is not what this test is
        // about, and a sample it lost under CI's load would fail the
        // quickstart's check (so its exit status) all the same.
        c.env("RUNTRACE_CPU_HZ", "0");
        for e in events {
            c.args(["-e", e]);
        }
        let out = run(c
            .arg("--")
            .arg(&bin)
            .arg("--out")
            .arg(dir.join(run_dir))
            .args(["--seconds", SECONDS]));
        let counts = quickstart_counts(&out);
        let script = run(Command::new("perf").args(["script", "-i"]).arg(data));
        (counts, script)
    };

    // (b) SDT through perf probe. -f: should another binary's event hold a
    // name (perf probe checks names across groups), ours becomes `..._1`;
    // the guard deletes only the events placed on our binary.
    let t = Instant::now();
    // perf probe reads SDT notes from its build-id cache; perf 6.1 keeps an
    // empty list for a path whose build was first cached under another
    // path (examples/quickstart is a hard link of this file): rescan.
    run_all(Command::new("perf").args(["buildid-cache", "--update", &b]));
    let out = run_all(Command::new("perf").args(["probe", "-f", "-x", &b]).args([
        "-a",
        "sdt_runtrace:task_spawn",
        "-a",
        "sdt_runtrace:task_terminate",
    ]));
    let added = added_events(&out);
    let spawn_ev = added
        .iter()
        .find(|e| e.starts_with("sdt_runtrace:task_spawn"))
        .cloned();
    let term_ev = added
        .iter()
        .find(|e| e.starts_with("sdt_runtrace:task_terminate"))
        .cloned();
    let (Some(spawn_ev), Some(term_ev)) = (spawn_ev, term_ev) else {
        panic!("perf probe added {added:?}:\n{out}");
    };
    let sdt_data = dir.join("sdt.data");
    let (counts, script) = record(&[&spawn_ev, &term_ev], &sdt_data, "sdt");
    cleanup.now();
    let spawn: Vec<u64> = script_events(&script, &spawn_ev)
        .iter()
        .map(|l| field(l, "arg1"))
        .collect();
    let term: Vec<u64> = script_events(&script, &term_ev)
        .iter()
        .map(|l| field(l, "arg1"))
        .collect();
    assert_eq!(
        spawn.len() as u64,
        counts["TaskSpawn"],
        "SDT task_spawn hits vs the quickstart's count"
    );
    assert_eq!(
        term.len() as u64,
        counts["TaskTerminate"],
        "SDT task_terminate hits"
    );
    check_ids(&spawn, &term, "SDT");
    eprintln!(
        "perf_probes: (b) SDT: {} task_spawn, {} task_terminate ({:.1?})",
        spawn.len(),
        term.len(),
        t.elapsed()
    );

    // (c) Function probes for every event through setup_probes.sh.
    let t = Instant::now();
    let setup = run(Command::new(repo_root().join("setup_probes.sh")).arg(&bin));
    // Installed: every event the binary has a function for, and no other.
    for e in BUILTIN_EVENTS
        .iter()
        .filter(|e| e.fields.len() <= 6 && e.has_probe_site())
    {
        assert_eq!(
            setup.contains(&format!("runtrace:{} ", e.name)),
            funcs.contains(e.name),
            "{} installed or not:\n{setup}",
            e.name
        );
    }
    let func_data = dir.join("func.data");
    let (fcounts, fscript) = record(&["runtrace:*"], &func_data, "func");
    cleanup.now();
    for e in BUILTIN_EVENTS
        .iter()
        .filter(|e| e.fields.len() <= 6 && e.has_probe_site())
    {
        let hits = script_events(&fscript, &format!("runtrace:{}", e.name)).len() as u64;
        let want = fcounts.get(json_name(e.name)).copied().unwrap_or(0);
        assert_eq!(
            hits, want,
            "runtrace:{} hits vs the quickstart's {}",
            e.name, e.json_name
        );
    }
    let spawns = script_events(&fscript, "runtrace:task_spawn");
    let fspawn: Vec<u64> = spawns.iter().map(|l| field(l, "task_id")).collect();
    let fterm: Vec<u64> = script_events(&fscript, "runtrace:task_terminate")
        .iter()
        .map(|l| field(l, "task_id"))
        .collect();
    check_ids(&fspawn, &fterm, "function probes");
    // Named, typed arguments: decimal ids, the spawn location string, and
    // the wakes' task ids and worker.
    assert!(spawns[0].contains("parent_task_id=0 "), "{}", spawns[0]);
    assert!(
        spawns
            .iter()
            .all(|l| l.contains("spawn_loc=\"examples/quickstart.rs:")),
        "{}",
        spawns[0]
    );
    let wakes = script_events(&fscript, "runtrace:task_wake");
    assert!(
        !wakes.is_empty()
            && wakes.iter().all(|l| l.contains("woken_task_id=")
                && l.contains("waker_task_id=")
                && l.contains("worker=")),
        "wakes carry named, typed arguments: {:?}",
        wakes.first()
    );
    assert!(script_events(&fscript, "runtrace:task_poll_end")
        .iter()
        .any(|l| l.ends_with("ready=1")));
    eprintln!(
        "perf_probes: (c) function probes: {} task_spawn, {} task_terminate, {} events ({:.1?})",
        fspawn.len(),
        fterm.len(),
        fscript.lines().count(),
        t.elapsed()
    );

    // (e) The aggregation script, on both recordings.
    let t = Instant::now();
    if python_in_perf || python3 {
        let report = aggregate(&func_data, python_in_perf);
        let want = format!(
            "tasks: {} spawned, {} terminated",
            fcounts["TaskSpawn"], fcounts["TaskTerminate"]
        );
        assert!(
            report.contains("group runtrace (function probes)"),
            "{report}"
        );
        assert!(report.contains(&want), "want {want:?} in:\n{report}");
        assert!(report.contains("wake -> poll delay:   p50"), "{report}");
        assert!(report.contains("workers: 2"), "{report}");
        let polls: u64 = report
            .lines()
            .skip_while(|l| !l.starts_with("workers: "))
            .skip(2)
            .take(2)
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(
            polls, fcounts["PollStart"],
            "per-worker polls add up:\n{report}"
        );
        let report = aggregate(&sdt_data, python_in_perf);
        let want = format!(
            "tasks: {} spawned, {} terminated",
            counts["TaskSpawn"], counts["TaskTerminate"]
        );
        assert!(
            report.contains("group sdt_runtrace (SDT probes"),
            "{report}"
        );
        assert!(report.contains(&want), "want {want:?} in:\n{report}");
        if python_in_perf && python3 {
            // The standalone route, on perf script's text, agrees.
            let text = dir.join("func.txt");
            std::fs::write(&text, &fscript).unwrap();
            let standalone = run(Command::new("python3")
                .arg(repo_root().join("probes/perf-aggregate.py"))
                .arg(&text));
            let want = format!(
                "tasks: {} spawned, {} terminated",
                fcounts["TaskSpawn"], fcounts["TaskTerminate"]
            );
            assert!(standalone.contains(&want), "{standalone}");
        }
        eprintln!("perf_probes: (e) perf-aggregate.py ({:.1?})", t.elapsed());
    }

    // (d) bpftrace on the SDT probe.
    if have("bpftrace") {
        let t = Instant::now();
        let out = run(Command::new("bpftrace")
            .env("RUNTRACE_CPU_HZ", "0")
            .arg("-e")
            .arg(format!(
                "usdt:{b}:runtrace:task_spawn {{ @spawn = count(); }} \
                 usdt:{b}:runtrace:task_terminate {{ @term = count(); }}"
            ))
            .arg("-c")
            .arg(format!(
                "{b} --out {} --seconds {SECONDS}",
                dir.join("bpftrace").display()
            )));
        let counts = quickstart_counts(&out);
        let map = |name: &str| -> u64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("@{name}: ")))
                .unwrap_or_else(|| panic!("no @{name} in:\n{out}"))
                .trim()
                .parse()
                .unwrap()
        };
        assert_eq!(
            map("spawn"),
            counts["TaskSpawn"],
            "bpftrace task_spawn:\n{out}"
        );
        assert_eq!(
            map("term"),
            counts["TaskTerminate"],
            "bpftrace task_terminate:\n{out}"
        );
        eprintln!(
            "perf_probes: (d) bpftrace: {} task_spawn ({:.1?})",
            map("spawn"),
            t.elapsed()
        );
    }

    drop(cleanup);
    let left = probes_on(&bin);
    assert!(left.is_empty(), "probe events left on {b}: {left:?}");
    eprintln!("perf_probes: done in {:.1?}", started.elapsed());
}
