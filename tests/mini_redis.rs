//! Issue 34, on code no one here wrote: tokio's mini-redis (crates.io),
//! served by `mini_redis::server::run` under `#[runtrace::main]` with the
//! application's registry of a fmt layer and runtrace's layer
//! (tests/fixtures/mini-redis, its own workspace: mini-redis is not in
//! runtrace's dependency graph). Its log lines still reach stdout; a
//! client driving SET/GET over several connections gives a trace with
//! wakes for the plain `tokio::spawn` connection tasks, whose analysis
//! names the connection handler's spawn location.
//!
//! Building the fixture needs cargo and crates.io (or a filled cargo
//! cache): a build failure fails the test, in CI as anywhere.

mod common;
use common::{repo_root, run};
use runtrace_analyze::{analyze_files, Options};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

/// Builds the fixture in release, in the target dir under ours that
/// tests/redis_planted.rs builds its mini-redis in (same dependencies and
/// release profile, so whichever runs second reuses the other's), and
/// returns the binary.
fn build() -> std::path::PathBuf {
    let target = repo_root().join("target/fixtures/redis");
    run(common::cargo()
        .current_dir(repo_root())
        .args([
            "build",
            "--quiet",
            "--release",
            "--manifest-path",
            "tests/fixtures/mini-redis/Cargo.toml",
            "--target-dir",
        ])
        .arg(&target));
    target.join("release/mini-redis-under-runtrace")
}

/// One RESP command, and its reply (read until it is complete).
fn command(s: &mut TcpStream, args: &[&str]) -> String {
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "mini-redis closed the connection");
        reply.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&reply);
        let complete = match text.as_bytes().first() {
            Some(b'$') => text.matches("\r\n").count() >= 2 || text.starts_with("$-1\r\n"),
            _ => text.ends_with("\r\n"),
        };
        if complete {
            return text.into_owned();
        }
    }
}

#[test]
fn mini_redis_keeps_its_logs_and_its_connection_tasks_are_named() {
    let bin = build();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("redis");
    let mut child = Command::new(&bin)
        .env("RUNTRACE_PATH", &prefix)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // The rest of its stdout (its log lines), read as it comes: a full
    // pipe would stop its workers in the middle of a log write.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        rest
    });
    let port: u16 = line
        .trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("expected `port N`, got {line:?}"));
    // Several connections, each a plain tokio::spawn task woken by every
    // request it reads.
    for c in 0..8 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        for i in 0..20 {
            let key = format!("k{c}-{i}");
            assert_eq!(command(&mut s, &["SET", &key, "v"]), "+OK\r\n");
            assert_eq!(command(&mut s, &["GET", &key]), "$1\r\nv\r\n");
        }
    }
    // mini-redis's own shutdown: SIGINT (tokio::signal::ctrl_c); main
    // returns and the recording is sealed.
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let st = child.wait().unwrap();
    let rest = rest.join().unwrap();
    assert!(st.success(), "{st}");
    // Its log lines reached stdout through its fmt layer.
    assert!(rest.contains("accepting inbound connections"), "{rest}");

    let files = runtrace::format::files::expand(std::slice::from_ref(&prefix)).unwrap();
    let check = runtrace::format::check::check_files(&files);
    assert_eq!(check.verdict(), "OK", "{check}");
    let r = analyze_files(&files, Options::default());
    let handler = r
        .spawn_locations
        .iter()
        .find(|l| l.location.contains("mini-redis-0.4.1/src/server.rs:"))
        .unwrap_or_else(|| panic!("no mini-redis spawn location in {:?}", r.spawn_locations));
    assert!(handler.tasks >= 8, "{handler:?}");
    // Wakes of the connection tasks were recorded: most of their polls
    // follow a wake (each request read wakes the task).
    assert!(
        handler.wake_to_poll_ns.count > handler.tasks + 100,
        "{handler:?}"
    );
    assert!(handler.uncovered_polls * 4 < handler.polls, "{handler:?}");
    assert!(!r.wakes_missing());
    // And `runtrace analyze`'s text names the handler's spawn location.
    assert!(r.to_string().contains(&handler.location), "{r}");
}
