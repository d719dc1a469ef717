//! `#[runtrace::main]` and `#[runtrace::test]` (issue 34): the attributes
//! build the runtime tokio's would, a service recorded from `RUNTRACE_PATH`
//! and stopped with SIGTERM leaves a sealed recording that `check` calls
//! OK, a recorder setting that does not parse is reported as
//! `RecordError::Config` while the application runs on unrecorded, and
//! the guide's hand-built runtime is the compiled example's.

mod common;
use runtrace::format::check::check_files;
use runtrace::format::files::expand;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[runtrace::test]
async fn a_test_runs_on_a_current_thread_runtime() {
    let h = tokio::runtime::Handle::current();
    assert_eq!(
        h.runtime_flavor(),
        tokio::runtime::RuntimeFlavor::CurrentThread
    );
    assert_eq!(tokio::spawn(async { 7 }).await.unwrap(), 7);
}

#[runtrace::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_test_takes_tokios_arguments() {
    let h = tokio::runtime::Handle::current();
    assert_eq!(
        h.runtime_flavor(),
        tokio::runtime::RuntimeFlavor::MultiThread
    );
    assert_eq!(h.metrics().num_workers(), 3);
}

#[runtrace::test]
async fn a_test_returns_a_result() -> Result<(), std::num::ParseIntError> {
    let n: u32 = "12".parse()?;
    assert_eq!(n, 12);
    Ok(())
}

/// `examples/NAME`, built with the features it needs.
fn example(name: &str) -> PathBuf {
    common::example_with(name, "tokio,record")
}

/// The trace files of the recording made with prefix `prefix`.
fn trace_files(prefix: &Path) -> Vec<PathBuf> {
    expand(&[prefix.to_path_buf()]).unwrap_or_else(|e| panic!("{}: {e}", prefix.display()))
}

#[test]
fn sigterm_seals_the_recording_of_a_service() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("service");
    let mut child = Command::new(example("service"))
        .env("RUNTRACE_PATH", &prefix)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its own log line reaches stdout through its fmt layer.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("serving"), "{line:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let st = child.wait().unwrap();
    // The process ends as SIGTERM ends it, after the recording is sealed.
    assert_eq!(st.signal(), Some(libc::SIGTERM), "{st}");
    let files = trace_files(&prefix);
    let report = check_files(&files);
    assert_eq!(
        report.verdict(),
        "OK",
        "runtrace check {}:\n{report}",
        prefix.display()
    );
    // Its plain tokio::spawn tasks' wakes were recorded (runtrace's layer).
    let mut stream = runtrace::format::merge::EventStream::open(&files).unwrap();
    let mut wakes = 0;
    while let Some(e) = stream.next_event() {
        wakes += usize::from(e.schema.name == "task_wake");
    }
    assert!(wakes > 0, "no task_wake in the recording");
}

#[test]
fn a_bad_recorder_setting_is_a_config_error_and_the_app_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(example("service"))
        .arg("200")
        .env("RUNTRACE_PATH", dir.path().join("service"))
        .env("RUNTRACE_MAX_FILE_SIZE", "lots")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(
        stderr.contains("runtrace: not recording: invalid recorder configuration")
            && stderr.contains("RUNTRACE_MAX_FILE_SIZE"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn unset_runtrace_path_records_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(example("service"))
        .arg("100")
        .env_remove("RUNTRACE_PATH")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty() || !String::from_utf8_lossy(&out.stderr).contains("runtrace"));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn the_guides_hand_built_runtime_is_the_compiled_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let example_src = std::fs::read_to_string(root.join("examples/manual_runtime.rs")).unwrap();
    let guide = std::fs::read_to_string(root.join("docs/recorder.md")).unwrap();
    let code = example_src
        .split("// guide: begin\n")
        .nth(1)
        .and_then(|s| s.split("// guide: end").next())
        .expect("markers in examples/manual_runtime.rs");
    assert!(
        guide.contains(&format!("```rust\n{code}```")),
        "docs/recorder.md must show examples/manual_runtime.rs's code between its markers"
    );
    // And it runs, recording.
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("app");
    let out = Command::new(example("manual_runtime"))
        .env("RUNTRACE_PATH", &prefix)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
    assert_eq!(check_files(&trace_files(&prefix)).verdict(), "OK");
}
