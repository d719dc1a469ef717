//! Issue 17 item 5: a full disk. On a small tmpfs that the test mounts (as
//! root) and always unmounts, the writer keeps draining while writes fail,
//! counts what it could not write as dropped, resumes when space frees (a
//! `DROPPED` frame carries the loss), and `finish()` fails with the stats:
//! `events + dropped` is exactly what was emitted, and the files hold
//! exactly `events` events and `dropped` drops.

use runtrace_format::check::check_files;
use runtrace_format::files::expand;
use runtrace_recorder::{RecordError, Recorder};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted and removed
/// on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("runtrace-fulldisk-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = Tmpfs(dir);
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&t.0)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", t.0.display());
        t
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Fills `dir`'s file system but `leave` bytes with a file, returns it.
fn fill(dir: &Path, leave: u64) -> PathBuf {
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0xAAu8; 4096];
    use std::io::Write;
    while free(dir) > leave {
        if f.write_all(&chunk).is_err() {
            break;
        }
    }
    f.sync_all().unwrap();
    filler
}

fn free(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap()
}

/// Emits `n` events in bursts the writer can keep up with.
fn emit(n: u64, base: u64) {
    for i in 0..n {
        runtrace_recorder::task_terminate(base + i);
        if i % 2000 == 1999 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Events and DROPPED totals as the files tell them.
fn in_files(dir: &Path) -> (u64, u64, String) {
    let files: Vec<PathBuf> = expand(&[dir.to_path_buf()])
        .unwrap()
        .into_iter()
        .filter(|p| !p.ends_with("filler"))
        .collect();
    let r = check_files(&files);
    (r.events, r.dropped_events, r.to_string())
}

/// A recording into `dir` with small buffers and a short interval, so
/// that a small tmpfs fills within a test.
fn start(dir: &Path) -> runtrace_recorder::RecordingGuard {
    Recorder::builder()
        .path(dir.join("trace"))
        .buffer_size(64 << 10)
        .flush_interval(Duration::from_millis(5))
        .start()
        .unwrap()
}

#[test]
fn full_disk_drains_counts_resumes_and_reports() {
    if !is_root() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI=true and not root: cannot mount a tmpfs");
        }
        eprintln!("skipped: not root (mounting a tmpfs needs root)");
        return;
    }
    let fs = Tmpfs::mount("512k");
    let dir = fs.0.join("rec");
    std::fs::create_dir_all(&dir).unwrap();
    let filler = fill(&fs.0, 96 << 10);

    // Phase 1: the disk fills, then frees: recording resumes.
    let g = start(&dir);
    let mut emitted = 0;
    emit(200_000, 0); // ~1 MB of events: far more than 96 KiB.
    emitted += 200_000;
    std::thread::sleep(Duration::from_millis(50));
    std::fs::remove_file(&filler).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    emit(1_000, 1 << 40);
    emitted += 1_000;
    let e = g.finish().unwrap_err();
    let stats = *e.stats().expect("the error carries the stats");
    assert!(matches!(e, RecordError::Incomplete { .. }), "{e}");
    assert!(e.to_string().contains("could not be written"), "{e}");
    assert_eq!(stats.events + stats.dropped, emitted, "{stats:?}");
    assert!(stats.dropped > 0, "{stats:?}");
    let (events, dropped, report) = in_files(&dir);
    assert_eq!((events, dropped), (stats.events, stats.dropped), "{report}");
    // Every file sealed, but the recording lost events to the full disk:
    // INCOMPLETE, saying how many and why (issue 37).
    assert!(
        report.contains("result:          INCOMPLETE") && report.contains("to failed writes"),
        "resumed and sealed, losses told: {report}"
    );
    assert!(!report.contains("errors ("), "{report}");
    // The events after the space freed are there: recording resumed.
    assert!(events >= 1_000, "{report}");
    for f in std::fs::read_dir(&dir).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }

    // Phase 2: the disk stays (nearly) full to the end: small rounds may
    // still fit between failures, the final END frame may or may not.
    let filler = fill(&fs.0, 64 << 10);
    let g = start(&dir);
    emit(200_000, 0);
    let e = g.finish().unwrap_err();
    let stats = *e.stats().expect("the error carries the stats");
    assert_eq!(stats.events + stats.dropped, 200_000, "{stats:?}");
    let (events, dropped, report) = in_files(&dir);
    // What was written is readable up to its last complete round.
    assert_eq!(events, stats.events, "{report}");
    assert!(dropped <= stats.dropped, "{report}");
    // Failed writes are cut back to the last complete round: never a
    // truncated or damaged file, whether or not the END frame fit.
    assert!(
        !report.contains("TRUNCATED") && !report.contains("DAMAGED"),
        "{report}"
    );
    if report.contains("UNSEALED") {
        assert!(report.contains("INCOMPLETE"), "{report}");
    } else {
        assert_eq!(dropped, stats.dropped, "sealed: every loss told: {report}");
    }
    drop(filler);
}
