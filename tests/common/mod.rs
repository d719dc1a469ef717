//! Helpers shared by integration tests (each test crate uses a part).
#![allow(dead_code)]

pub mod lttng;

use std::path::PathBuf;
use std::process::Command;

/// Builds the example (a no-op when `cargo test` already did) and returns
/// its path, next to the test binaries.
pub fn example(name: &str) -> PathBuf {
    let st = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success(), "cargo build --example {name}");
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(p.exists(), "{} not built", p.display());
    p
}
