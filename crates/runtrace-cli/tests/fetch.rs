//! `runtrace fetch` (feature `object-store`): a recording shipped by the
//! recorder's object-store sink to a local-filesystem store, fetched back
//! into a directory that `runtrace check` reads as a complete recording;
//! the filters; bad arguments named.
#![cfg(feature = "object-store")]

use runtrace_recorder::sink::ObjectStoreSink;
use runtrace_recorder::{Istr, Loc, Recorder};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn runtrace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Records `n` spawns to files under `rec`, shipping every sealed file to
/// `url` as service `svc`, host `host`; returns how many files.
fn record_and_ship(rec: &Path, url: &str, host: &str, n: u64) -> u64 {
    let guard = Recorder::builder()
        .path(rec.join("trace"))
        .max_file_size(16 << 10)
        .flush_interval(Duration::from_millis(5))
        .service("svc")
        .host(host)
        .sink(ObjectStoreSink::from_url(url).unwrap())
        .start()
        .unwrap();
    let q = Istr::new("fetch");
    let loc = Loc::caller();
    for t in 0..n {
        runtrace_recorder::task_spawn(t + 1, 0, loc, q);
        if t % 500 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let stats = guard.finish().unwrap();
    assert_eq!(stats.sink_sent, stats.files, "{stats:?}");
    stats.files
}

#[test]
fn fetch_round_trip_and_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let url = format!("file://{}", store.display());
    let files = record_and_ship(&tmp.path().join("rec1"), &url, "h1", 20_000);
    assert!(files >= 3, "{files}");
    // A second recording, another host (recordings run one at a time).
    let files2 = record_and_ship(&tmp.path().join("rec2"), &url, "h2", 5_000);

    // One host: exactly its recording, which `check` finds complete.
    let out = tmp.path().join("fetched-h1");
    let o = runtrace(&["fetch", &url, out.to_str().unwrap(), "--host", "h1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("fetched {files} segments")),
        "{}",
        text(&o)
    );
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len() as u64, files, "{names:?}");
    assert!(
        names.iter().all(|n| n.starts_with("trace-svc-h1-")),
        "{names:?}"
    );
    let o = runtrace(&["check", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let report = text(&o);
    let line = |name: &str| {
        report
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l[name.len()..].trim().to_string())
    };
    assert_eq!(line("result:").as_deref(), Some("OK"), "{report}");
    assert_eq!(line("events:").as_deref(), Some("20000"), "{report}");

    // Everything, today: both recordings.
    let all = tmp.path().join("fetched-all");
    let today = runtrace_format::partition::date_of(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    let o = runtrace(&[
        "fetch",
        &url,
        all.to_str().unwrap(),
        "--service",
        "svc",
        "--from",
        &today,
        "--to",
        &today,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_dir(&all).unwrap().count() as u64,
        files + files2
    );
    let o = runtrace(&["check", all.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));

    // Filters that match nothing: exit 1, said.
    for args in [
        vec!["--host", "h3"],
        vec!["--service", "other"],
        vec!["--to", "2001-01-01"],
        vec!["--from", "2500-01-01T00:00:00Z"],
    ] {
        let none = tmp.path().join("none");
        let mut a = vec!["fetch", url.as_str(), none.to_str().unwrap()];
        a.extend(args.iter().copied());
        let o = runtrace(&a);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("no segment"), "{args:?}: {}", text(&o));
    }
}

#[test]
fn bad_arguments_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let d = dir.to_str().unwrap();
    let o = runtrace(&["fetch", "no-scheme/dir", d]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("URL \"no-scheme/dir\""), "{}", text(&o));
    let o = runtrace(&["fetch", "ftp://example/x", d]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("URL \"ftp://example/x\""), "{}", text(&o));
    let o = runtrace(&["fetch", "file:///tmp/x", d, "--from", "last tuesday"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--from \"last tuesday\""), "{}", text(&o));
    let o = runtrace(&["fetch", "file:///tmp/x", d, "--host", "../etc"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--host \"../etc\""), "{}", text(&o));
    assert!(!dir.exists());
}
