//! What the LTTng end-to-end tests (`tests/lttng.rs`, `tests/lttng_doc.rs`)
//! share, besides the skip-or-fail rule for missing tools (`common`):
//! building an example with `--features lttng`, a private session daemon,
//! and reading babeltrace2's text output.
//!
//! The private daemon has its own `LTTNG_HOME` in a temporary directory
//! (never a system daemon) and is stopped by pid at the end, on failure
//! too. As root, the daemon, the `lttng` commands and the traced programs
//! run as user `nobody`: root's `lttng` always talks to the system-wide
//! daemon, whatever `LTTNG_HOME` says.

use super::{all_features_build, feature_args, missing};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The programs every LTTng test needs.
pub const TOOLS: [&str; 3] = ["lttng", "lttng-sessiond", "babeltrace2"];
/// `nobody`/`nogroup` on Debian-like systems (and the kernel's overflow id).
pub const NOBODY: u32 = 65534;
/// `lttng` options for the private daemon: `--no-sessiond` never spawns an
/// unmanaged daemon; `--group` names a group nobody is in, so a non-root
/// user of the `tracing` group does not reach the system-wide daemon.
pub const LTTNG_ARGS: [&str; 2] = ["--no-sessiond", "--group=runtrace-test-no-such-group"];

pub fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// The cargo profile this test binary was built with (`debug`, `release`).
pub fn profile() -> String {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_string()
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `cargo build ARGS` in this test's target dir and profile; `Err(stderr)`
/// on failure.
fn cargo_build(args: &[&str]) -> Result<(), String> {
    let mut a = vec!["build"];
    a.extend_from_slice(args);
    cargo(&a)
}

/// `cargo ARGS` in this test's target dir and profile.
fn cargo(args: &[&str]) -> Result<(), String> {
    let mut cmd = super::cargo();
    cmd.args(args)
        .env("CARGO_TARGET_DIR", target_dir())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile() == "release" {
        cmd.arg("--release");
    }
    let out = cmd.output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Builds example `name` with `--features lttng` (under CI's all-features
/// build, that build's features, which include it: `feature_args`) in this
/// test's target dir and profile (so a plain `cargo test` reuses its
/// dependencies; `cargo test --release` checks the release build), and
/// copies it to `dest`.
/// `None` (after `missing`) when liblttng-ust-dev is absent.
///
/// Others may build the same example without the feature in the same
/// target dir at the same time (the uplifted `examples/NAME` is shared by
/// every feature set): the copy is checked to link liblttng-ust, and the
/// build repeated when it does not.
pub fn build_lttng_example(name: &str, dest: &Path) -> Option<PathBuf> {
    let bin = target_dir().join(profile()).join("examples").join(name);
    for _ in 0..5 {
        let mut args = vec!["--example", name];
        args.extend(feature_args("lttng"));
        if let Err(stderr) = cargo_build(&args) {
            if stderr.contains("install liblttng-ust-dev") {
                missing("liblttng-ust-dev is not installed (LTTng-UST headers)");
                return None;
            }
            panic!("cargo build --example {name} --features lttng failed:\n{stderr}");
        }
        std::fs::copy(&bin, dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", bin.display(), dest.display()));
        let bytes = std::fs::read(dest).unwrap();
        if bytes.windows(15).any(|w| w == b"liblttng-ust.so") {
            return Some(dest.to_path_buf());
        }
        eprintln!(
            "{} was rebuilt without --features lttng meanwhile; building again",
            bin.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!(
        "{} keeps being replaced by a build without --features lttng",
        bin.display()
    );
}

/// Builds binary `bin` of `package` in this test's target dir and profile
/// and copies it to `dest`.
pub fn build_bin(package: &str, bin: &str, dest: &Path) -> PathBuf {
    // The uplifted `target/PROFILE/BIN` is shared by every feature set:
    // under `cargo test --workspace --all-features` (CI) a plain `-p`
    // build replaced the binary the other packages' tests run
    // (`CARGO_BIN_EXE_*`) with one lacking their features (`runtrace
    // fetch` is behind `object-store`). Then ask that same run's build
    // again: it is fresh, and the same binary is linked back in place.
    let built = if all_features_build() {
        cargo(&["test", "--workspace", "--all-features", "--no-run"])
    } else {
        cargo_build(&["-p", package, "--bin", bin])
    };
    if let Err(stderr) = built {
        panic!("cargo build -p {package} --bin {bin} failed:\n{stderr}");
    }
    let built = target_dir().join(profile()).join(bin);
    std::fs::copy(&built, dest)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), dest.display()));
    dest.to_path_buf()
}

/// A private session daemon in its own directory (`home`, also the
/// working directory of every command); its sessions destroyed, the daemon
/// stopped (by pid) and the directory removed on drop. The directory is
/// kept when the test fails, for a look.
pub struct Lttng {
    pub home: PathBuf,
    daemon: Option<Child>,
    pub as_nobody: bool,
}

impl Lttng {
    /// `tag` names the directory (`runtrace-<tag>-<pid>` in the temp dir).
    pub fn start(tag: &str) -> Lttng {
        let home = std::env::temp_dir().join(format!("runtrace-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let as_nobody = is_root();
        let mut l = Lttng {
            home,
            daemon: None,
            as_nobody,
        };
        l.give(&l.home.clone());
        let log = std::fs::File::create(l.home.join("sessiond.log")).unwrap();
        let child = l
            .command("lttng-sessiond")
            .arg("--no-kernel")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start lttng-sessiond");
        l.daemon = Some(child);
        let sock = l.home.join(".lttng/client-lttng-sessiond");
        let t0 = Instant::now();
        loop {
            if let Some(st) = l.daemon.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "lttng-sessiond exited ({st}):\n{}",
                    std::fs::read_to_string(l.home.join("sessiond.log")).unwrap_or_default()
                );
            }
            if sock.exists() && l.lttng_output(&["list"]).status.success() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "lttng-sessiond not ready after 15 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        l
    }

    /// Makes `path` (created by this test) usable by the commands: owned
    /// by `nobody` when they run as `nobody`.
    pub fn give(&self, path: &Path) {
        if self.as_nobody {
            std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }

    /// A command in the private LTTng environment (as `nobody` under root).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("HOME", &self.home)
            .env("LTTNG_HOME", &self.home)
            .current_dir(&self.home);
        if self.as_nobody {
            c.uid(NOBODY).gid(NOBODY);
        }
        c
    }

    pub fn lttng_output(&self, args: &[&str]) -> Output {
        self.command("lttng")
            .args(LTTNG_ARGS)
            .args(args)
            .output()
            .expect("run lttng")
    }

    pub fn lttng(&self, args: &[&str]) {
        let out = self.lttng_output(args);
        assert!(
            out.status.success(),
            "lttng {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Lttng {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            if d.try_wait().ok().flatten().is_none() {
                // Whatever a failed test left behind.
                let _ = self.lttng_output(&["destroy", "--all"]);
            }
            let pid = d.id() as libc::pid_t;
            // SAFETY: signals our own child, which has not been reaped yet
            // (so the pid cannot have been reused).
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let t0 = Instant::now();
            while d.try_wait().ok().flatten().is_none() {
                if t0.elapsed() > Duration::from_secs(10) {
                    let _ = d.kill();
                    let _ = d.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if std::thread::panicking() {
            eprintln!("kept {} for inspection", self.home.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

/// The event name (`task_spawn`) of a babeltrace2 text line.
pub fn event_name(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|t| t.strip_prefix("runtrace:"))
        .map(|t| t.trim_end_matches(':'))
}

/// An integer field of a babeltrace2 text line.
pub fn field_u64(line: &str, name: &str) -> Option<u64> {
    let pat = format!(" {name} = ");
    let rest = &line[line.find(&pat)? + pat.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A string field of a babeltrace2 text line (printed in double quotes).
pub fn field_str<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let pat = format!(" {name} = \"");
    let rest = &line[line.find(&pat)? + pat.len()..];
    rest.split('"').next()
}

/// babeltrace2's text output for a trace directory (`args` before it);
/// `(lines, stderr)`. Fails when babeltrace2 does.
pub fn babeltrace_with(dir: &Path, args: &[&str]) -> (Vec<String>, String) {
    let out = Command::new("babeltrace2")
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "babeltrace2 {}:\n{stderr}",
        dir.display()
    );
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    (lines, stderr)
}

/// babeltrace2's text output for a trace directory that must be complete:
/// fails when LTTng discarded events.
pub fn babeltrace(dir: &Path) -> Vec<String> {
    let (lines, stderr) = babeltrace_with(dir, &[]);
    // Discarded events would make counts differ: say so.
    assert!(
        !stderr.contains("discarded"),
        "LTTng discarded events (buffers too small for this machine?):\n{stderr}"
    );
    lines
}
