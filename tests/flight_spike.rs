//! The flight recorder end to end (issue 41 item 7): a tokio service
//! recorded in memory with the slow-poll rule runs steady requests; once,
//! at a random moment, one handler blocks its worker. Exactly one snapshot
//! is written, it holds the seconds before the spike and the spike itself,
//! and `runtrace analyze` of the snapshot alone blames the planted handler
//! first. Nothing else reaches the disk.

mod common;

use runtrace_analyze::{analyze_files, Options};
use runtrace_recorder::Recorder;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A steady request: a little work, then a short wait.
async fn handler(i: u64) -> u64 {
    let mut x = i;
    for _ in 0..2_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    std::hint::black_box(x)
}

/// The planted spike: a blocking call inside async code.
async fn planted() {
    std::thread::sleep(Duration::from_millis(300));
}

/// A moment in 0.8-2.2 s, different in every run (no seeded RNG: the
/// clock's nanoseconds), printed so that a failure can be replayed.
fn random_moment() -> Duration {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    Duration::from_millis(800 + ns % 1_400)
}

#[test]
fn a_planted_spike_is_kept_once_and_its_analysis_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let spike_at = random_moment();
    eprintln!("spike at {spike_at:?}");
    let guard = Recorder::builder()
        .path(dir.path().join("svc"))
        .in_memory(64 << 20)
        .max_segment_age(Duration::from_millis(250))
        .snapshot_window(Duration::from_secs(2), Duration::from_millis(300))
        .snapshot_on_slow_poll(Duration::from_millis(150))
        .start()
        .unwrap();
    let rt = common::instrumented_runtime();
    rt.block_on(async {
        let start = Instant::now();
        let mut planted_done = false;
        let mut i = 0;
        while start.elapsed() < spike_at + Duration::from_millis(1_200) {
            if !planted_done && start.elapsed() >= spike_at {
                planted_done = true;
                tokio::spawn(planted()); // the planted spawn
            }
            tokio::spawn(handler(i));
            i += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    drop(rt);
    let stats = guard.finish().unwrap();
    eprintln!("{stats:?}");
    // Exactly one snapshot, from the rule; nothing else on disk.
    let entries: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let snap = &entries[0];
    let name = snap.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("snapshot-") && name.ends_with("-slow-poll"),
        "{name}"
    );
    assert_eq!((stats.snapshots, stats.snapshots_skipped), (1, 0));
    let mut files: Vec<PathBuf> = std::fs::read_dir(snap)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace::format::merge::sort_trace_paths(&mut files);
    assert_eq!(
        runtrace::format::check::check_files(&files).verdict(),
        "OK",
        "{files:?}"
    );
    let r = analyze_files(&files, Options::default());
    eprintln!("{r}");
    // The seconds before the spike are in it (the window's `before`,
    // less what the recording had when the spike came early).
    let dur_ns = r.duration_ns;
    assert!(
        dur_ns >= 700_000_000,
        "the snapshot holds {dur_ns} ns, not the time before the spike"
    );
    let src = include_str!("flight_spike.rs");
    let line = src
        .lines()
        .position(|l| l.contains("tokio::spawn(planted()); // the planted spawn"))
        .unwrap()
        + 1;
    // The first finding that blames a location (a loaded CI host may add
    // a host_starvation, which blames none).
    let f = r
        .findings
        .iter()
        .find(|f| f.spawn_loc.is_some())
        .unwrap_or_else(|| panic!("no finding blames a location:\n{r}"));
    assert!(
        f.kind.as_str() == "long_poll"
            && f.spawn_loc
                .as_deref()
                .is_some_and(|l| l.starts_with(&format!("tests/flight_spike.rs:{line}:"))),
        "the planted handler first:\n{r}"
    );
    assert_eq!(
        r.snapshots.len(),
        1,
        "the trigger is shown: {:?}",
        r.snapshots
    );
}
