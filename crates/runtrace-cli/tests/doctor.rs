//! End-to-end tests of `runtrace doctor` on binaries built here, at test
//! time, from the C fixtures in `tests/fixtures/` with the local toolchains:
//!
//! - GNU ld (gcc): sound;
//! - lld's default layout (clang -fuse-ld=lld, and rust-lld from the Rust
//!   toolchain): unsound, with the exact fix;
//! - lld with `-z separate-loadable-segments`: sound;
//! - duplicate and `.bss` semaphores, stripped binaries, LTTng-UST pointers
//!   removed by `--gc-sections`;
//! - probe sites of functions lld's `--gc-sections` dropped: listed apart,
//!   not problems (GNU ld keeps such functions);
//! - bad inputs (missing, text, truncated, directory): exit 1, clear message.
//!
//! A missing tool (gcc, clang, lld, rust-lld, sys/sdt.h, lttng headers)
//! skips its test with a message naming it, unless the `CI` environment
//! variable is `true`: then it fails the test.
//!
//! The verdicts were checked against real tracing (perf 6.1, bpftrace 0.17,
//! kernel 6.18); set `RUNTRACE_DOCTOR_PERF=1` (as root, perf installed) to
//! re-run that comparison in `doctor_verdicts_match_perf`.

use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

const FIX_HEADER: &str = "[target.x86_64-unknown-linux-gnu]";
const FIX_LINE: &str = r#"rustflags = ["-C", "link-arg=-Wl,-z,separate-loadable-segments"]"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fresh directory for one test's build products.
fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "doctor-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `Some(())` if `ok`, else skips (prints why) or, in CI, fails.
fn need(ok: bool, what: &str) -> Option<()> {
    if ok {
        return Some(());
    }
    if in_ci() {
        panic!("required tool missing in CI: {what}");
    }
    eprintln!("SKIPPED: {what} is not available");
    None
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            let f = d.join(tool);
            f.is_file()
        })
    })
}

fn need_tool(tool: &str) -> Option<()> {
    need(on_path(tool), tool)
}

/// `cc` can compile a file including `header`.
fn has_header(header: &str) -> bool {
    let dir = scratch("hdr");
    let src = dir.join("t.c");
    std::fs::write(
        &src,
        format!("#include <{header}>\nint main(void) {{ return 0; }}\n"),
    )
    .unwrap();
    Command::new("gcc")
        .args(["-fsyntax-only"])
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn need_sdt() -> Option<()> {
    need_tool("gcc")?;
    need(
        has_header("sys/sdt.h"),
        "sys/sdt.h (apt-get install systemtap-sdt-dev)",
    )
}

/// Runs a build command, panicking with its output on failure.
fn sh(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `tests/fixtures/sdt_probes.c` with `compiler` and `flags`.
fn build_sdt(dir: &Path, name: &str, compiler: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(name);
    sh(Command::new(compiler)
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(fixtures().join("sdt_probes.c"))
        .args(flags));
    out
}

/// The directory holding the Rust toolchain's `gcc-ld/ld.lld` (rust-lld).
fn rust_lld_dir() -> Option<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let vv = Command::new(&rustc).arg("-vV").output().ok()?;
    let host = String::from_utf8_lossy(&vv.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))?;
    let dir = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/gcc-ld");
    dir.join("ld.lld").is_file().then_some(dir)
}

fn doctor(args: &[&str], binary: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .arg("doctor")
        .args(args)
        .arg(binary)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `runtrace doctor --json`: the object and the exit code.
fn doctor_json(binary: &Path) -> (Json, i32) {
    let out = doctor(&["--json"], binary);
    let j: Json = serde_json::from_str(&text(&out))
        .unwrap_or_else(|e| panic!("bad JSON ({e}):\n{}\n{}", text(&out), stderr(&out)));
    (j, out.status.code().unwrap())
}

fn problems(j: &Json, backend: &str) -> Vec<String> {
    j[backend]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

fn probes<'a>(j: &'a Json, event: &str) -> Vec<&'a Json> {
    j["usdt"]["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            format!(
                "{}:{}",
                p["provider"].as_str().unwrap(),
                p["name"].as_str().unwrap()
            ) == event
        })
        .collect()
}

/// The fixture's content, as the doctor must list it on any layout.
fn assert_fixture_listed(j: &Json) {
    assert_eq!(j["usdt"]["probes"].as_array().unwrap().len(), 4, "{j:#}");
    let spawn = probes(j, "runtrace:task_spawn");
    assert_eq!(spawn.len(), 2, "two task_spawn sites");
    assert_eq!(
        spawn[0]["semaphore"], spawn[1]["semaphore"],
        "one shared semaphore"
    );
    assert_ne!(spawn[0]["semaphore"], 0);
    assert_eq!(spawn[0]["semaphore_section"], ".probes");
    assert_eq!(spawn[0]["runtrace"], true);
    assert_eq!(probes(j, "runtrace:task_poll_start").len(), 1);
    let tick = probes(j, "myapp:tick");
    assert_eq!(tick.len(), 1);
    assert_eq!(tick[0]["runtrace"], false);
    assert_eq!(
        j["usdt"]["providers"],
        serde_json::json!(["myapp", "runtrace"])
    );

    let funcs = j["perf_probe"]["functions"].as_array().unwrap();
    let f = |name: &str| {
        funcs
            .iter()
            .find(|f| f["symbol"] == name)
            .unwrap_or_else(|| panic!("{name} not found: {funcs:?}"))
    };
    assert_eq!(f("runtrace_task_spawn")["nop5"], true);
    assert_eq!(f("runtrace_task_spawn")["table"], "symtab");
    assert_eq!(f("runtrace_task_wake")["nop5"], false);
    assert_eq!(funcs.len(), 2);
    assert_eq!(j["perf_probe"]["stripped"], false);
    assert!(
        j["perf_probe"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w
                .as_str()
                .unwrap()
                .contains("runtrace_task_wake does not start with the 5-byte nop")),
        "{j:#}"
    );
    assert_eq!(j["perf_probe"]["sound"], true);
    assert_eq!(j["lttng"]["tracepoints"], serde_json::json!([]));
}

fn assert_sound(bin: &Path) {
    let (j, code) = doctor_json(bin);
    assert_fixture_listed(&j);
    assert_eq!(j["usdt"]["sound"], true, "{j:#}");
    assert_eq!(problems(&j, "usdt"), Vec::<String>::new());
    assert_eq!(j["fix"], serde_json::json!([]));
    assert_eq!(j["ok"], true);
    for p in j["usdt"]["probes"].as_array().unwrap() {
        assert_eq!(p["pc_offset"], p["perf_pc_offset"], "{p}");
        assert_eq!(p["semaphore_offset"], p["perf_semaphore_offset"], "{p}");
        assert_eq!(p["kernel_semaphore_vaddr"], p["semaphore"], "{p}");
        assert_eq!(p["ok"], true);
    }
    assert_eq!(code, 0);
    let out = doctor(&[], bin);
    assert_eq!(out.status.code(), Some(0));
    let t = text(&out);
    assert!(t.contains("Verdict: SOUND"), "{t}");
    assert!(t.contains("* runtrace:task_spawn"), "{t}");
    assert!(t.contains("USDT verdict: sound"), "{t}");
}

fn assert_lld_unsound(bin: &Path) {
    let (j, code) = doctor_json(bin);
    assert_fixture_listed(&j);
    assert_eq!(code, 1);
    assert_eq!(j["ok"], false);
    assert_eq!(j["usdt"]["sound"], false);
    let probs = problems(&j, "usdt");
    assert!(
        probs
            .iter()
            .any(|p| p.starts_with("perf 6.1 computes wrong file offsets for 4 of 4")),
        "{probs:#?}"
    );
    assert!(
        probs
            .iter()
            .any(|p| p.starts_with("the kernel increments the wrong copy of 3 semaphores")),
        "{probs:#?}"
    );
    // Every probe is off by the text segment's vaddr - offset, and every
    // semaphore copy the kernel would touch is one page below the real one.
    let segs = j["elf"]["load_segments"].as_array().unwrap();
    let text_bias = segs.iter().find(|s| s["flags"] == "R-X").unwrap()["bias"]
        .as_i64()
        .unwrap();
    assert_eq!(text_bias, 0x1000, "{segs:?}");
    for p in j["usdt"]["probes"].as_array().unwrap() {
        let pc = p["pc"].as_u64().unwrap();
        assert_eq!(p["perf_pc_offset"].as_u64(), Some(pc));
        assert_eq!(p["pc_offset"].as_u64(), Some(pc - 0x1000));
        assert_eq!(p["semaphore_offset"], p["perf_semaphore_offset"], "{p}");
        assert_eq!(
            p["kernel_semaphore_vaddr"].as_u64(),
            Some(p["semaphore"].as_u64().unwrap() - 0x1000)
        );
        assert_eq!(p["ok"], false);
    }
    let fix = j["fix"].as_array().unwrap();
    assert_eq!(fix.len(), 1, "{fix:?}");
    let fix = fix[0].as_str().unwrap();
    assert!(fix.contains(".cargo/config.toml"), "{fix}");
    assert!(fix.contains(&format!("{FIX_HEADER}\n{FIX_LINE}")), "{fix}");
    assert!(fix.contains("linker-features=-lld"), "{fix}");

    let out = doctor(&[], bin);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out);
    assert!(t.contains("Verdict: UNSOUND: 2 problems"), "{t}");
    assert!(t.contains(FIX_HEADER) && t.contains(FIX_LINE), "{t}");
    assert!(t.contains("USDT verdict: UNSOUND"), "{t}");
}

#[test]
fn gnu_ld_is_sound() {
    if need_sdt().is_none() {
        return;
    }
    let dir = scratch("gnu");
    let bin = build_sdt(&dir, "gnu", "gcc", &["-fuse-ld=bfd"]);
    assert_sound(&bin);
    // Not a single vaddr - offset (the RW segment is one page up), yet
    // sound: only the segments that probes and semaphores resolve through
    // matter, as perf and the kernel compute them.
    let (j, _) = doctor_json(&bin);
    assert!(j["elf"]["linker"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| !l.as_str().unwrap().contains("LLD")));
}

#[test]
fn gnu_ld_non_pie_is_sound() {
    if need_sdt().is_none() {
        return;
    }
    let dir = scratch("gnu-nopie");
    let bin = build_sdt(&dir, "gnu-nopie", "gcc", &["-fuse-ld=bfd", "-no-pie"]);
    assert_sound(&bin);
}

#[test]
fn lld_default_layout_is_unsound_with_fix() {
    if need_sdt().is_none() || need_tool("clang").is_none() || need_tool("ld.lld").is_none() {
        return;
    }
    let dir = scratch("lld");
    let bin = build_sdt(&dir, "lld", "clang", &["-fuse-ld=lld"]);
    assert_lld_unsound(&bin);
}

#[test]
fn lld_separate_loadable_segments_is_sound() {
    if need_sdt().is_none() || need_tool("clang").is_none() || need_tool("ld.lld").is_none() {
        return;
    }
    let dir = scratch("lld-sep");
    let bin = build_sdt(
        &dir,
        "lld-sep",
        "clang",
        &["-fuse-ld=lld", "-Wl,-z,separate-loadable-segments"],
    );
    assert_sound(&bin);
}

/// `tests/fixtures/sdt_unused.c` with `-ffunction-sections` and
/// `--gc-sections`: the probe of the function nothing calls.
fn build_unused(dir: &Path, name: &str, compiler: &str, linker: &[&str]) -> Json {
    let out = dir.join(name);
    sh(Command::new(compiler)
        .args(["-O2", "-ffunction-sections", "-Wl,--gc-sections", "-o"])
        .arg(&out)
        .arg(fixtures().join("sdt_unused.c"))
        .args(linker));
    let (j, code) = doctor_json(&out);
    assert_eq!(code, 0, "{j:#}");
    assert_eq!(j["ok"], true, "{j:#}");
    assert_eq!(problems(&j, "usdt"), Vec::<String>::new());
    assert_eq!(probes(&j, "runtrace:task_spawn").len(), 1, "{j:#}");
    assert_eq!(probes(&j, "runtrace:task_spawn")[0]["ok"], true);
    j
}

#[test]
fn sites_of_functions_lld_discarded_are_listed_not_problems() {
    if need_sdt().is_none() || need_tool("clang").is_none() || need_tool("ld.lld").is_none() {
        return;
    }
    let dir = scratch("lld-gc");
    // lld drops `unused` and leaves its note pointing at the nop's offset
    // in the dropped section: below any code, where nothing can fire.
    let j = build_unused(
        &dir,
        "lld-gc",
        "clang",
        &["-fuse-ld=lld", "-Wl,-z,separate-loadable-segments"],
    );
    assert!(probes(&j, "runtrace:task_wake").is_empty(), "{j:#}");
    let d = j["usdt"]["discarded"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{j:#}");
    assert_eq!(d[0]["name"], "task_wake");
    assert_eq!(d[0]["runtrace"], true);
    let first_code = j["elf"]["load_segments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["flags"].as_str().unwrap().contains('X'))
        .map(|s| s["vaddr"].as_u64().unwrap())
        .min()
        .unwrap();
    assert!(d[0]["pc"].as_u64().unwrap() < first_code, "{j:#}");
    let out = doctor(&[], &dir.join("lld-gc"));
    let t = text(&out);
    assert!(
        t.contains("discarded by the linker with their functions")
            && t.contains("runtrace:task_wake (pc 0x"),
        "{t}"
    );
    assert!(t.contains("Verdict: SOUND"), "{t}");

    // GNU ld keeps the function its note refers to: both sites have code.
    let j = build_unused(&dir, "gnu-gc", "gcc", &["-fuse-ld=bfd"]);
    assert_eq!(probes(&j, "runtrace:task_wake").len(), 1, "{j:#}");
    assert_eq!(j["usdt"]["discarded"], serde_json::json!([]));
}

#[test]
fn rust_lld_default_is_unsound_and_separate_segments_fix_it() {
    if need_sdt().is_none() {
        return;
    }
    let Some(gcc_ld) = rust_lld_dir() else {
        need(
            false,
            "rust-lld (lib/rustlib/<host>/bin/gcc-ld/ld.lld of the Rust toolchain)",
        );
        return;
    };
    let dir = scratch("rust-lld");
    let b = format!("-B{}", gcc_ld.display());
    let bin = build_sdt(&dir, "rust-lld", "gcc", &[&b, "-fuse-ld=lld"]);
    let (j, _) = doctor_json(&bin);
    assert!(
        j["elf"]["linker"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("LLD")),
        "{:?}",
        j["elf"]["linker"]
    );
    assert_lld_unsound(&bin);
    let fixed = build_sdt(
        &dir,
        "rust-lld-sep",
        "gcc",
        &[&b, "-fuse-ld=lld", "-Wl,-z,separate-loadable-segments"],
    );
    assert_sound(&fixed);
}

#[test]
fn duplicate_and_bss_semaphores_are_problems() {
    if need_sdt().is_none() {
        return;
    }
    let dir = scratch("dupsem");
    let src = fixtures().join("sdt_dupsem.c");
    for part in ["1", "2"] {
        sh(Command::new("gcc")
            .args(["-O2", "-c", &format!("-DPART={part}"), "-o"])
            .arg(dir.join(format!("part{part}.o")))
            .arg(&src));
    }
    let bin = dir.join("dupsem");
    sh(Command::new("gcc")
        .arg("-o")
        .arg(&bin)
        .arg(dir.join("part1.o"))
        .arg(dir.join("part2.o")));
    let (j, code) = doctor_json(&bin);
    assert_eq!(code, 1);
    let probs = problems(&j, "usdt");
    assert!(
        probs
            .iter()
            .any(|p| p.starts_with("runtrace:task_spawn: its sites use 2 different semaphores")),
        "{probs:#?}"
    );
    assert!(
        probs
            .iter()
            .any(|p| p.starts_with("runtrace:task_wake: semaphore")
                && p.contains("not a writable PROGBITS section")),
        "{probs:#?}"
    );
    assert_eq!(probs.len(), 2, "{probs:#?}");
    let fix = j["fix"].as_array().unwrap();
    assert!(
        fix.iter()
            .any(|f| f.as_str().unwrap().contains("exactly one semaphore")),
        "{fix:?}"
    );
    assert!(
        fix.iter().any(|f| f.as_str().unwrap().contains(".probes")),
        "{fix:?}"
    );
}

#[test]
fn stripped_binary_keeps_sdt_notes_but_loses_functions() {
    if need_sdt().is_none() || need_tool("strip").is_none() {
        return;
    }
    let dir = scratch("strip");
    let bin = build_sdt(&dir, "stripped", "gcc", &["-fuse-ld=bfd"]);
    sh(Command::new("strip").arg(&bin));
    let (j, code) = doctor_json(&bin);
    assert_eq!(code, 0, "{j:#}");
    assert_eq!(j["usdt"]["probes"].as_array().unwrap().len(), 4);
    assert_eq!(j["usdt"]["sound"], true);
    assert_eq!(j["perf_probe"]["stripped"], true);
    assert_eq!(j["perf_probe"]["functions"], serde_json::json!([]));
    let warnings = j["perf_probe"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("stripped (no .symtab)")),
        "{warnings:?}"
    );
}

#[test]
fn lttng_pointers_removed_by_gc_sections() {
    if need_tool("gcc").is_none()
        || need(
            has_header("lttng/tracepoint.h"),
            "lttng/tracepoint.h (apt-get install liblttng-ust-dev)",
        )
        .is_none()
    {
        return;
    }
    let dir = scratch("lttng");
    let src = fixtures().join("lttng_probes.c");
    let build = |name: &str, compiler: &str, flags: &[&str]| {
        let out = dir.join(name);
        sh(Command::new(compiler)
            .args(["-O2", "-ffunction-sections", "-fdata-sections", "-I"])
            .arg(fixtures())
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .args(flags)
            .args(["-llttng-ust", "-ldl"]));
        out
    };

    let gnu = build("lttng-gnu", "gcc", &["-Wl,--gc-sections"]);
    let (j, code) = doctor_json(&gnu);
    assert_eq!(code, 0, "{j:#}");
    let l = &j["lttng"];
    assert_eq!(l["abi"], "2.13");
    assert_eq!(l["needed"], serde_json::json!(["liblttng-ust.so.1"]));
    assert_eq!(l["ptrs_section"], "lttng_ust_tracepoints_ptrs");
    assert_eq!(l["ptrs"], 2);
    assert_eq!(l["providers_linked"], serde_json::json!(["runtrace"]));
    let tps = l["tracepoints"].as_array().unwrap();
    assert_eq!(tps.len(), 2);
    for (tp, name) in tps.iter().zip(["task_spawn", "task_wake"]) {
        assert_eq!(tp["provider"], "runtrace");
        assert_eq!(tp["name"], name);
        assert_eq!(
            tp["symbol"],
            format!("lttng_ust_tracepoint_runtrace___{name}").as_str()
        );
        assert_eq!(tp["registered"], true);
    }

    if need_tool("clang").is_none() || need_tool("ld.lld").is_none() {
        return;
    }
    let lld = build("lttng-lld", "clang", &["-fuse-ld=lld", "-Wl,--gc-sections"]);
    let (j, code) = doctor_json(&lld);
    assert_eq!(code, 1, "{j:#}");
    assert_eq!(j["lttng"]["ptrs_section"], Json::Null);
    let probs = problems(&j, "lttng");
    assert_eq!(probs.len(), 1, "{probs:?}");
    assert!(
        probs[0].contains("no lttng_ust_tracepoints_ptrs section"),
        "{probs:?}"
    );
    for tp in j["lttng"]["tracepoints"].as_array().unwrap() {
        assert_eq!(tp["registered"], false);
    }
    let fix = j["fix"].as_array().unwrap();
    assert!(
        fix[0]
            .as_str()
            .unwrap()
            .contains(r#"rustflags = ["-C", "link-arg=-Wl,-z,nostart-stop-gc"]"#),
        "{fix:?}"
    );

    let kept = build(
        "lttng-lld-kept",
        "clang",
        &[
            "-fuse-ld=lld",
            "-Wl,--gc-sections",
            "-Wl,-z,nostart-stop-gc",
        ],
    );
    let (j, code) = doctor_json(&kept);
    assert_eq!(code, 0, "{j:#}");
    assert!(j["lttng"]["tracepoints"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["registered"] == true));
}

#[test]
fn binary_without_probes_is_ok() {
    // The runtrace binary itself carries no probes.
    let bin = Path::new(env!("CARGO_BIN_EXE_runtrace"));
    let out = doctor(&[], bin);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out), stderr(&out));
    let t = text(&out);
    assert!(t.contains("USDT/SDT probes: none"), "{t}");
    assert!(
        t.contains("Verdict: OK: no runtrace probes found (nothing to check)"),
        "{t}"
    );
    let (j, code) = doctor_json(bin);
    assert_eq!(code, 0);
    for key in ["binary", "usdt", "perf_probe", "lttng", "fix"] {
        assert!(j.get(key).is_some(), "missing {key}: {j:#}");
    }
    assert_eq!(j["usdt"]["probes"], serde_json::json!([]));
    assert_eq!(j["usdt"]["sound"], true);
    assert_eq!(j["usdt"]["problems"], serde_json::json!([]));
    assert_eq!(j["fix"], serde_json::json!([]));
}

/// Bad input: exit 1, one clear line naming the path and the cause, no
/// panic; with --json, an object with the same message.
fn assert_rejected(path: &Path, expect: &str) {
    let out = doctor(&[], path);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{path:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&format!("runtrace doctor: {}: ", path.display())),
        "{err}"
    );
    assert!(
        err.contains(expect),
        "{path:?}: expected {expect:?} in {err:?}"
    );
    assert!(text(&out).is_empty());

    let (j, code) = doctor_json(path);
    assert_eq!(code, 1);
    assert_eq!(j["binary"], path.display().to_string().as_str());
    assert_eq!(j["ok"], false);
    assert!(j["error"].as_str().unwrap().contains(expect), "{j}");
}

#[test]
fn bad_inputs_exit_1_with_a_clear_message() {
    let dir = scratch("bad");
    assert_rejected(&dir.join("no-such-binary"), "cannot open: No such file");
    assert_rejected(&dir, "is a directory");

    let txt = dir.join("notes.txt");
    std::fs::write(&txt, "just some text\n").unwrap();
    assert_rejected(&txt, "not an ELF file");
    let empty = dir.join("empty");
    std::fs::write(&empty, "").unwrap();
    assert_rejected(&empty, "empty file");

    let elf = std::fs::read(env!("CARGO_BIN_EXE_runtrace")).unwrap();
    for (len, expect) in [
        (4, "damaged ELF header"),
        (40, "damaged ELF header"),
        (100, "truncated ELF file: the program header table"),
        (4096, "truncated ELF file"),
        (elf.len() / 2, "truncated ELF file"),
        (elf.len() - 1, "truncated ELF file"),
    ] {
        let cut = dir.join(format!("truncated-{len}"));
        std::fs::write(&cut, &elf[..len]).unwrap();
        assert_rejected(&cut, expect);
    }
}

/// Every possible truncation point of a small probed ELF: never a panic,
/// always exit 1 (or a report, should the cut leave a readable file).
#[test]
fn every_truncation_of_a_probed_binary_is_handled() {
    if need_sdt().is_none() {
        return;
    }
    let dir = scratch("cuts");
    let bin = build_sdt(&dir, "probed", "gcc", &["-fuse-ld=bfd"]);
    let elf = std::fs::read(&bin).unwrap();
    for len in (0..elf.len()).step_by(61) {
        let r = runtrace_doctor::inspect_bytes(Path::new("cut"), &elf[..len]);
        let e = r.expect_err("a cut ELF must be rejected");
        assert!(e.to_string().starts_with("cut: "), "{e}");
    }
}

/// Compares the verdicts with real tracing. Opt-in (root, perf, global
/// uprobe state): RUNTRACE_DOCTOR_PERF=1.
#[test]
fn doctor_verdicts_match_perf() {
    if std::env::var("RUNTRACE_DOCTOR_PERF").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED: set RUNTRACE_DOCTOR_PERF=1 (root, perf, clang, lld) to compare with perf"
        );
        return;
    }
    let dir = scratch("perf");
    let mut bins = vec![build_sdt(&dir, "gnu", "gcc", &["-fuse-ld=bfd"])];
    if on_path("clang") && on_path("ld.lld") {
        bins.push(build_sdt(&dir, "lld", "clang", &["-fuse-ld=lld"]));
        bins.push(build_sdt(
            &dir,
            "lld-sep",
            "clang",
            &["-fuse-ld=lld", "-Wl,-z,separate-loadable-segments"],
        ));
    }
    if let Some(gcc_ld) = rust_lld_dir() {
        let b = format!("-B{}", gcc_ld.display());
        bins.push(build_sdt(&dir, "rust-lld", "gcc", &[&b, "-fuse-ld=lld"]));
        bins.push(build_sdt(
            &dir,
            "rust-lld-sep",
            "gcc",
            &[&b, "-fuse-ld=lld", "-Wl,-z,separate-loadable-segments"],
        ));
    }
    for bin in bins {
        let (j, _) = doctor_json(&bin);
        let sound = j["usdt"]["sound"] == true;
        let _ = Command::new("perf")
            .args(["probe", "-q", "-d", "sdt_runtrace:*"])
            .output();
        // perf looks SDT events up in its build-id cache: an identical
        // earlier build (same build id, other path) would shadow this one.
        let _ = Command::new("perf")
            .args(["buildid-cache", "--remove"])
            .arg(&bin)
            .output();
        sh(Command::new("perf")
            .args(["buildid-cache", "--add"])
            .arg(&bin));
        sh(Command::new("perf")
            .args(["probe", "-q", "-x"])
            .arg(&bin)
            .args(["-a", "sdt_runtrace:task_spawn"]));
        let data = dir.join("perf.data");
        sh(Command::new("perf")
            .args(["record", "-q", "-e", "sdt_runtrace:task_spawn", "-o"])
            .arg(&data)
            .arg("--")
            .arg(&bin)
            .arg("5"));
        let script = Command::new("perf")
            .args(["script", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        let _ = Command::new("perf")
            .args(["probe", "-q", "-d", "sdt_runtrace:*"])
            .output();
        let _ = Command::new("perf")
            .args(["buildid-cache", "--remove"])
            .arg(&bin)
            .output();
        let hits = text(&script).lines().count();
        eprintln!(
            "{}: perf hits {hits}, doctor sound = {sound}",
            bin.display()
        );
        // 5 iterations x 2 task_spawn sites when the probes work.
        assert_eq!(
            hits == 10,
            sound,
            "{bin:?}: {hits} perf hits, doctor sound = {sound}"
        );
    }
}
