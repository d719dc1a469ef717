//! Outputs never destroy inputs (issue 37): every command that writes a
//! file refuses an output that is one of its input traces (by inode: a
//! hard link counts) or a trace-named file beside them, and leaves the
//! input byte for byte as it was; outputs appear whole or not at all; the
//! Parquet export takes its dataset's lock and never writes through a
//! symbolic link planted in the dataset.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

fn runtrace(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

/// A copy of the quickstart recording in a fresh directory.
fn recording() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    for f in ["trace.0.bin", "trace.1.bin"] {
        std::fs::copy(golden("quickstart").join(f), rec.join(f)).unwrap();
    }
    (dir, rec)
}

#[test]
fn no_command_writes_over_its_input() {
    let (dir, rec) = recording();
    let input = rec.join("trace.0.bin");
    let before = std::fs::read(&input).unwrap();
    let link = dir.path().join("link.html");
    std::fs::hard_link(&input, &link).unwrap();
    let beside = rec.join("trace.7.bin");
    let cases: Vec<Vec<&dyn AsRef<std::ffi::OsStr>>> = vec![
        vec![&"report", &rec, &"-o", &input],
        vec![&"report", &rec, &"-o", &link],
        vec![&"report", &rec, &"-o", &beside],
        vec![&"perfetto", &rec, &"-o", &input],
        vec![&"perfetto", &rec, &"-o", &link],
        vec![&"jsonl", &rec, &"-o", &link],
        vec![&"flamegraph", &rec, &"--folded", &"-o", &input],
        vec![&"blocked", &rec, &"--folded-out", &input],
        vec![&"export", &"parquet", &rec, &"-o", &input],
    ];
    for args in cases {
        let out = runtrace(&args);
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        assert!(!out.status.success(), "{shown:?} succeeded");
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "{shown:?} changed the input"
        );
        assert!(!beside.exists(), "{shown:?} wrote beside the input");
    }
    // The refusal says why (flamegraph fails first for want of samples).
    let out = runtrace(&[&"perfetto", &rec, &"-o", &link]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to write over the input"), "{err}");
}

#[test]
fn a_failed_write_leaves_the_old_output_whole() {
    let (dir, rec) = recording();
    let out = dir.path().join("report.html");
    std::fs::write(&out, "old page").unwrap();
    // A damaged input still writes (what was readable); a missing one
    // reads nothing: neither truncates the old page first.
    let good = runtrace(&[&"report", &rec, &"-o", &out]);
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..40]);
    // An unwritable directory: the output does not appear, no leftovers.
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let target = ro.join("trace.pftrace");
    std::fs::write(&target, "old").unwrap();
    let mut perm = std::fs::metadata(&ro).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o555);
    std::fs::set_permissions(&ro, perm).unwrap();
    let r = runtrace(&[&"perfetto", &rec, &"-o", &target]);
    // Root ignores directory permissions: then it succeeds, whole.
    let now = std::fs::read(&target).unwrap();
    if r.status.success() {
        assert!(now.len() > 3);
    } else {
        assert_eq!(now, b"old");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&ro)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn parquet_exports_take_turns_and_never_follow_links() {
    let (dir, rec) = recording();
    let ds = dir.path().join("ds");
    // Two exports of the same recording at once: one lands, the other
    // waits for the lock, then refuses it as already there.
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_runtrace"))
            .args(["export", "parquet"])
            .arg(&rec)
            .arg("-o")
            .arg(&ds)
            .args(["--host", "h"])
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "{a:?}\n{b:?}");
    let loser = if a.status.success() { &b } else { &a };
    assert!(
        String::from_utf8_lossy(&loser.stderr).contains("already in the dataset"),
        "{loser:?}"
    );
    // A link planted where a partition goes: refused, nothing outside.
    let ds2 = dir.path().join("ds2");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ds2).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, ds2.join("polls")).unwrap();
    let out = runtrace(&[&"export", &"parquet", &rec, &"-o", &ds2, &"--host", &"h"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("symbolic link") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
