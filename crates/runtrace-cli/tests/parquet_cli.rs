//! `runtrace export parquet` as a command: exit codes and messages for
//! good, damaged and bad input (the dataset rules themselves are tested in
//! runtrace-parquet's tests/dataset.rs).
#![cfg(feature = "parquet")]

use runtrace_analyze::synth::{workload, Workload};
use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn export_exit_codes_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    let (bytes, _) = workload(&Workload {
        events: 50_000,
        ..Workload::default()
    });
    std::fs::write(rec.join("trace.0.bin"), &bytes).unwrap();
    let ds = dir.path().join("ds");
    let (r, ds_s) = (rec.to_str().unwrap(), ds.to_str().unwrap());

    // A bad --host: exit 1, the flag named, nothing written.
    let (code, _, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "a/b"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--host \"a/b\"") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!ds.exists());

    // A directory of trace files: exported, exit 0.
    let (code, out, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "h1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("exported 1 recording(s), 50"), "{out}");

    // The same recording again: refused, exit 1; --replace: exit 0.
    let (code, _, err) = run(&["export", "parquet", r, "-o", ds_s, "--host", "h1"]);
    assert_eq!(code, 1);
    assert!(err.contains("already in the dataset"), "{err}");
    let (code, _, err) = run(&[
        "export",
        "parquet",
        r,
        "-o",
        ds_s,
        "--host",
        "h1",
        "--replace",
    ]);
    assert_eq!(code, 0, "{err}");

    // A cut trace: what was readable is exported, the damage named, exit 1.
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    std::fs::write(cut.join("trace.0.bin"), &bytes[..bytes.len() / 2]).unwrap();
    let ds2 = dir.path().join("ds2");
    let (code, out, err) = run(&[
        "export",
        "parquet",
        cut.to_str().unwrap(),
        "-o",
        ds2.to_str().unwrap(),
        "--host",
        "h1",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("trace.0.bin") && err.contains("damaged input"),
        "{err}"
    );
    assert!(out.contains("exported 1 recording(s)"), "{out}");

    // -o is required.
    let (code, _, err) = run(&["export", "parquet", r]);
    assert_eq!(code, 2, "{err}");
}
