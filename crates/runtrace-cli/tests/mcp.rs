//! `runtrace mcp` driven by a real MCP client written by others: the
//! official MCP Python SDK (`mcp.client.stdio`, tests/mcp_client.py) calls
//! every tool on the recorded golden traces and a damaged copy, including
//! the error paths. Without python3 and the `mcp` package the test skips
//! with a message, unless `CI=true`, where it fails (.ci/run installs
//! them).

use std::path::{Path, PathBuf};
use std::process::Command;

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[test]
fn official_python_client_calls_every_tool() {
    let has_sdk = Command::new("python3")
        .args(["-c", "import mcp.client.stdio"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_sdk {
        assert!(
            !ci(),
            "python3 with the `mcp` package is required in CI (pip install mcp)"
        );
        eprintln!("skipped: python3 with the `mcp` package (pip install mcp) is not installed");
        return;
    }
    // A damaged copy of the backlog trace: cut in the middle of a frame.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let damaged = dir.join("trace.0.bin");
    let whole = std::fs::read(golden("backlog/trace.0.bin")).unwrap();
    std::fs::write(&damaged, &whole[..whole.len() / 3]).unwrap();

    let out = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_runtrace"))
        .arg(golden("quickstart"))
        .arg(golden("backlog"))
        .arg(&damaged)
        .output()
        .expect("run python3");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
