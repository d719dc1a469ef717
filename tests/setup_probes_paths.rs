//! `setup_probes.sh` refuses binary paths a uprobe definition cannot carry.
//!
//! A uprobe is defined as `p:GROUP/EVENT PATH:OFFSET ARGS`. perf 6.1 cut
//! `/d/colon:0x10/app` at its first colon and installed probes on the file
//! `/d/colon` (which `--delete` then left behind); a path with a blank
//! cannot be written at all. The script must refuse both, before anything
//! is installed, for the SDT and the function routes, and say how to go on.

use std::path::Path;
use std::process::Command;

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("setup_probes.sh")
}

/// Copies this test binary (an executable ELF file) to `path`.
fn executable_at(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(std::env::current_exe().unwrap(), path).unwrap();
}

/// Uprobe definitions currently installed that mention `dir` (none when
/// tracefs is not readable, e.g. not root: the script refuses before it
/// needs either).
fn probes_under(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string("/sys/kernel/tracing/uprobe_events").unwrap_or_default();
    let d = dir.to_str().unwrap();
    text.lines()
        .filter(|l| l.contains(d))
        .map(str::to_owned)
        .collect()
}

fn refused(args: &[&str], bad: &Path, dir: &Path) {
    let out = Command::new("bash")
        .arg(script())
        .args(args)
        .arg(bad)
        .output()
        .expect("run setup_probes.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "setup_probes.sh {args:?} {} must fail; stderr:\n{stderr}",
        bad.display()
    );
    assert!(
        stderr.contains("cannot carry") && stderr.contains(bad.to_str().unwrap()),
        "the error must name the path and the reason:\n{stderr}"
    );
    assert!(
        stderr.contains("ln '"),
        "the error must say how to go on:\n{stderr}"
    );
    assert!(
        probes_under(dir).is_empty(),
        "nothing may be installed: {:?}",
        probes_under(dir)
    );
}

#[test]
fn a_colon_in_the_path_is_refused_not_probed_on_another_file() {
    let tmp = tempfile::tempdir().unwrap();
    // The file perf 6.1 would have probed instead.
    executable_at(&tmp.path().join("colon"));
    let bad = tmp.path().join("colon:0x10/app");
    executable_at(&bad);
    refused(&["--sdt"], &bad, tmp.path());
    refused(&[], &bad, tmp.path());
}

#[test]
fn a_blank_in_the_path_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("with space/app");
    executable_at(&bad);
    // Before, the SDT route blamed the perf version for this.
    refused(&["--sdt"], &bad, tmp.path());
    refused(&[], &bad, tmp.path());
}
