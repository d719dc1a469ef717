//! `runtrace top` in a real terminal: tests/top_pty.py drives it in a
//! pseudo-terminal (pexpect) and reads the screen through a terminal
//! emulator (pyte), against (a) a service recording while the test runs
//! (its locations on screen; after its planted blocking call starts, the
//! finding naming it within 3 s; then the service is killed and the
//! screen says the data stopped) and (b) a finished recording replayed
//! (pause, step back, seek, next finding and sort change the screen).
//! Also the bad inputs' messages and exit codes, and `--once` output.
//!
//! The service is examples/top_demo.rs, run from this test binary itself
//! (`demo_service`), so no other build is needed. Without python3,
//! pexpect or pyte the pty tests skip with a message, and fail when
//! CI=true (.ci/run installs them from .ci/requirements.txt).

#[allow(dead_code)]
#[path = "../examples/top_demo.rs"]
mod demo;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RUNTRACE: &str = env!("CARGO_BIN_EXE_runtrace");

/// Not a test: the demo service, when this binary is run with
/// RUNTRACE_TOP_DEMO set (its arguments, space-separated).
#[test]
fn demo_service() {
    if let Ok(args) = std::env::var("RUNTRACE_TOP_DEMO") {
        let code = demo::run(args.split_whitespace().map(String::from).collect());
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            1
        });
    }
}

/// The command that runs the demo service with `args`.
fn demo_cmd(args: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "demo_service",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env("RUNTRACE_TOP_DEMO", args);
    c
}

fn pty_tools() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import pexpect, pyte"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let msg = "python3 with pexpect and pyte is missing (pip install -r .ci/requirements.txt)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("skipped: {msg}");
    }
    ok
}

fn line_of(marker: &str) -> usize {
    let src = include_str!("../examples/top_demo.rs");
    src.lines().position(|l| l.contains(marker)).expect(marker) + 1
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/top_pty.py")
}

fn run_script(mode: &str, dir: &Path) {
    let out = Command::new("python3")
        .arg(script())
        .args([mode, RUNTRACE, &dir.to_string_lossy()])
        .arg(std::env::current_exe().unwrap())
        .arg(line_of("tokio::spawn(handle_request(i))").to_string())
        .arg(line_of("// PLANTED").to_string())
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "top_pty.py {mode} failed\n--- stdout\n{o}\n--- stderr\n{e}"
    );
    eprintln!("{o}");
}

#[test]
fn live_view_shows_the_service_and_the_planted_blocking_call() {
    if !pty_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_script("live", dir.path());
}

#[test]
fn replay_pauses_steps_back_seeks_and_sorts() {
    if !pty_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let st = demo_cmd(&format!(
        "--out {} --seconds 8 --block-after 4 --max-file-size 262144",
        dir.path().display()
    ))
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(st.success());
    run_script("replay", dir.path());
}

fn top(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(RUNTRACE)
        .arg("top")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn bad_input_gets_a_message_and_an_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ds = d.to_string_lossy().to_string();
    // An empty directory.
    let (code, _, err) = top(&[&ds]);
    assert_eq!(code, 1);
    assert!(err.contains("without trace files"), "{err}");
    // No such directory.
    let gone = d.join("nope");
    let (code, _, err) = top(&[&gone.to_string_lossy()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nope"), "{err}");
    // A file that is not a trace, named like one.
    std::fs::write(d.join("trace.0.bin"), b"hello, this is not a trace").unwrap();
    let (code, _, err) = top(&[&ds, "--once"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a runtrace trace"), "{err}");
    // The same, live.
    std::fs::rename(d.join("trace.0.bin"), d.join("trace.0.bin.active")).unwrap();
    let (code, _, err) = top(&[&ds, "--once"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a runtrace trace"), "{err}");
    // Bad arguments.
    let (code, _, err) = top(&[&ds, "--window", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--window"), "{err}");
    let (code, _, err) = top(&[&ds, "--speed", "1000"]);
    assert_eq!(code, 2);
    assert!(err.contains("--speed"), "{err}");
    let (code, _, err) = top(&[&ds, "--once", "--at", "soon"]);
    assert_eq!(code, 2);
    assert!(err.contains("--at"), "{err}");
}

#[test]
fn a_truncated_recording_and_once_json() {
    let dir = tempfile::tempdir().unwrap();
    let st = demo_cmd(&format!(
        "--out {} --seconds 4 --block-after 0.5",
        dir.path().display()
    ))
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(st.success());
    let file = dir.path().join("trace.0.bin");
    let bytes = std::fs::read(&file).unwrap();
    // Cut inside a frame: damage, named, and the window of what was read.
    std::fs::write(&file, &bytes[..bytes.len() * 3 / 4 + 3]).unwrap();
    let ds = dir.path().to_string_lossy().to_string();
    let (code, out, err) = top(&[&ds, "--once", "--json", "--at", "2.5"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["mode"], "replay");
    // At 2.5 s, or at the end of what was readable when that is earlier
    // (how far 3/4 of the bytes go depends on the machine's load).
    let (at, len) = (v["at_s"].as_f64().unwrap(), v["length_s"].as_f64().unwrap());
    assert!(len > 1.0 && (at - len.min(2.5)).abs() < 0.01, "{v}");
    let notes = v["header"]["notes"].to_string();
    assert!(notes.contains("trace.0.bin"), "{notes}");
    let planted = format!("top_demo.rs:{}", line_of("// PLANTED"));
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "long_poll" && f["cause"].as_str().unwrap().contains(&planted)),
        "{v}"
    );
    // Without a terminal, `top` prints what --once prints.
    let (code, text, _) = top(&[&ds]);
    assert_eq!(code, 0);
    assert!(text.starts_with("runtrace top "), "{text}");
    assert!(text.contains("spawn locations:"), "{text}");
}
