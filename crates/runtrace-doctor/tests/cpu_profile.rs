//! `runtrace doctor`'s CPU-profile checks on binaries built here with
//! rustc (opt-level 2), with and without `-C force-frame-pointers=yes`,
//! with and without line tables, a stripped one, and C built by gcc -O2
//! with and without `-fno-omit-frame-pointer`.

use runtrace_doctor::inspect;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `tests/fixtures/fp_app.rs` into `dir/name` with extra rustc flags.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fp_app.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let o = Command::new(rustc)
        .args(["--edition", "2021", "-C", "opt-level=2", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .output()
        .expect("cannot run rustc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn frame_pointers_symbols_and_debug_info() {
    let dir = tempfile::tempdir().unwrap();
    let fp = build(
        dir.path(),
        "fp",
        &[
            "-C",
            "force-frame-pointers=yes",
            "-C",
            "debuginfo=line-tables-only",
        ],
    );
    let nofp = build(dir.path(), "nofp", &["-C", "force-frame-pointers=no"]);

    let r = inspect(&fp).unwrap();
    let c = &r.cpu_profile;
    eprintln!("with: {}", c.share_text());
    assert!(c.functions_checked >= 5, "{c:?}");
    assert_eq!(c.frame_pointers, Some(true), "{c:?}");
    assert!(c.symtab);
    // The same id the symbolizer reads (and the recorder records).
    let id = runtrace_symbolize::build_id(&fp).unwrap().unwrap();
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(c.build_id.as_deref(), Some(hex.as_str()));
    assert!(c.own_debug_units.unwrap() > 0, "{c:?}");
    assert!(c.debug_units > c.own_debug_units.unwrap(), "{c:?}");
    assert!(c.is_ready(), "{c:?}");
    // Line tables only: ready, but async bodies would be nameless.
    assert_eq!(c.line_tables_only, Some(true), "{c:?}");
    assert_eq!(c.fix.len(), 1, "{:?}", c.fix);
    assert!(
        c.fix[0].contains("line tables only") && c.fix[0].contains("debug = \"limited\""),
        "{:?}",
        c.fix
    );
    let text = r.to_string();
    assert!(
        text.contains("  function paths in debug info: NO (line tables only"),
        "{text}"
    );
    assert!(text.contains("  frame pointers: yes ("), "{text}");
    assert!(text.contains("CPU profile verdict: ready"), "{text}");
    // Advisory: the probe verdict and exit status do not change.
    assert!(r.is_sound());
    let j = r.to_json();
    assert_eq!(j["cpu_profile"]["ready"], true);
    assert_eq!(j["cpu_profile"]["frame_pointers"], true);
    assert_eq!(j["cpu_profile"]["line_tables_only"], true);

    // Limited debug info: function paths, nothing to fix.
    let limited = build(
        dir.path(),
        "limited",
        &["-C", "force-frame-pointers=yes", "-C", "debuginfo=1"],
    );
    let r = inspect(&limited).unwrap();
    let c = &r.cpu_profile;
    assert_eq!(c.line_tables_only, Some(false), "{c:?}");
    assert!(c.is_ready(), "{c:?}");
    assert_eq!(c.fix, Vec::<String>::new());
    assert!(
        r.to_string()
            .contains("  function paths in debug info: yes"),
        "{r}"
    );

    let r = inspect(&nofp).unwrap();
    let c = &r.cpu_profile;
    eprintln!("without: {}", c.share_text());
    assert!(c.functions_checked >= 5, "{c:?}");
    assert_eq!(c.frame_pointers, Some(false), "{c:?}");
    // No -g: only the standard library's DWARF is in the file.
    assert_eq!(c.own_debug_units, Some(0), "{c:?}");
    assert!(c.debug_units > 0, "{c:?}");
    assert!(!c.is_ready());
    assert_eq!(c.fix.len(), 2, "{:?}", c.fix);
    assert!(c.fix[0].contains("force-frame-pointers=yes"), "{:?}", c.fix);
    assert!(c.fix[0].contains(".cargo/config.toml"), "{:?}", c.fix);
    assert!(c.fix[1].contains("debug = \"limited\""), "{:?}", c.fix);
    let text = r.to_string();
    assert!(text.contains("  frame pointers: NO ("), "{text}");
    assert!(
        text.contains("CPU profile verdict: NOT READY: no frame pointers"),
        "{text}"
    );
    assert!(r.is_sound(), "{text}");
    assert_eq!(r.to_json()["fix"], serde_json::json!([]));
}

#[test]
fn stripped_binary_cannot_tell_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build(
        dir.path(),
        "stripped",
        &["-C", "force-frame-pointers=yes", "-C", "strip=symbols"],
    );
    let r = inspect(&bin).unwrap();
    let c = &r.cpu_profile;
    assert!(!c.symtab);
    assert_eq!(c.frame_pointers, None);
    assert_eq!(c.functions_checked, 0);
    assert!(
        c.notes[0].starts_with("no .symtab (stripped)"),
        "{:?}",
        c.notes
    );
    assert_eq!(c.own_debug_units, Some(0), "{c:?}");
    assert!(
        c.fix.iter().any(|f| f.contains("strip = false")),
        "{:?}",
        c.fix
    );
    let text = r.to_string();
    assert!(
        text.contains("  frame pointers: unknown (see note)"),
        "{text}"
    );
    assert!(
        text.contains("  debug info of its own: NO (no DWARF)"),
        "{text}"
    );
    assert!(
        text.contains("  symbol table (.symtab): NO (stripped)"),
        "{text}"
    );
    assert!(
        text.contains("no symbol table (functions show as [unknown])"),
        "{text}"
    );
}

/// gcc (`-O2` omits frame pointers on x86-64) is needed in CI; elsewhere
/// its absence skips the test.
fn have_gcc() -> bool {
    let found = Command::new("gcc").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "gcc is needed in CI"
        );
        eprintln!("skipped: gcc not installed");
    }
    found
}

#[test]
fn c_with_and_without_frame_pointers() {
    if !have_gcc() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fp_app.c");
    let cc = |name: &str, flags: &[&str]| {
        let out = dir.path().join(name);
        let o = Command::new("gcc")
            .arg("-O2")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        inspect(&out).unwrap().cpu_profile
    };
    let with = cc("fp", &["-fno-omit-frame-pointer", "-g"]);
    eprintln!("with: {}", with.share_text());
    assert_eq!(with.frame_pointers, Some(true), "{with:?}");
    assert_eq!(with.own_debug_units, Some(1), "{with:?}");
    assert!(with.is_ready(), "{with:?}");
    let without = cc("nofp", &["-Wl,--build-id=none"]);
    eprintln!("without: {}", without.share_text());
    assert_eq!(without.frame_pointers, Some(false), "{without:?}");
    assert_eq!(without.debug_units, 0, "{without:?}");
    assert!(
        without.fix[0].contains("-fno-omit-frame-pointer"),
        "{:?}",
        without.fix
    );
    assert_eq!(without.build_id, None);
    let id_less = cc(
        "fp-noid",
        &["-fno-omit-frame-pointer", "-g", "-Wl,--build-id=none"],
    );
    assert!(id_less.is_ready(), "{id_less:?}");
    assert!(
        id_less.verdict().ends_with(
            "but no build id, so a copy of the binary on another machine cannot be verified"
        ),
        "{}",
        id_less.verdict()
    );
    assert!(
        without.fix[1].contains("-Wl,--build-id"),
        "{:?}",
        without.fix
    );
}
