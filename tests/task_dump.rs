//! Task dumps through `#[runtrace::main]` (feature `taskdump`, issue 36
//! item 4): with `RUNTRACE_TASK_DUMP=end,USR1` a signal takes a dump while
//! the service runs and the body's return takes another; `runtrace
//! analyze` then names the await point the leaked tasks sit at.
//!
//! One test in this file: it sets the process's environment and its
//! signal handlers. A current-thread runtime: tokio 1.54's dump of a
//! multi-thread runtime can hang it (a worker spinning in tokio's
//! `steal_all`; 2 of 6 runs of this test on 2 workers hung), which this
//! test is not about (docs/analysis.md, "Where a task waits").

use runtrace::format::files::expand;
use runtrace_analyze::{analyze_files, Options};
use std::time::Duration;

/// Where the leaked tasks sit (its line is asserted).
async fn park(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await; // the await point
}

#[test]
fn a_signal_and_the_bodys_return_dump_where_leaked_tasks_sit() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("svc");
    // SAFETY (set_var): the only test of this process, before any thread
    // of its own reads the environment.
    std::env::set_var("RUNTRACE_TASK_DUMP", "end,USR1");
    // As a service does: its own registry, with runtrace's layer (the
    // wakes of plain tokio::spawn tasks).
    use tracing_subscriber::prelude::*;
    tracing_subscriber::registry()
        .with(runtrace::tokio::layer())
        .init();
    runtrace::__entry::Entry::new(runtrace::__entry::Flavor::CurrentThread)
        .path(&prefix)
        .block_on(async {
            // A leak (analyze's rule): the tasks pile up over more than a
            // quarter of the recording (~1.5 s of ~2.6 s).
            let mut kept = Vec::new();
            for _ in 0..300 {
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                tokio::spawn(park(rx));
                kept.push(tx);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // SAFETY: raise(3) of a signal whose handler runtrace
            // installed (RUNTRACE_TASK_DUMP=USR1).
            assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
            tokio::time::sleep(Duration::from_millis(1000)).await;
            std::mem::forget(kept);
        });
    let files = expand(&[prefix]).unwrap();
    if std::env::var_os("TASK_DUMP_KEEP").is_some() {
        eprintln!("kept: {}", dir.keep().display());
    }
    // Both dumps are in the trace, each with its trigger.
    let mut stream = runtrace::format::merge::EventStream::open(&files).unwrap();
    let mut triggers = Vec::new();
    let mut dumped = 0;
    while let Some(e) = stream.next_event() {
        match e.schema.name.as_str() {
            "task_dump_start" => triggers.push(format!("{:?}", e.values)),
            "task_dump" => dumped += 1,
            _ => {}
        }
    }
    assert_eq!(triggers.len(), 2, "{triggers:?}");
    assert!(triggers[0].contains("signal USR1"), "{triggers:?}");
    assert!(triggers[1].contains("end"), "{triggers:?}");
    assert!(dumped >= 600, "{dumped} task_dump events");
    let r = analyze_files(&files, Options::default());
    let f = r
        .findings
        .iter()
        .find(|f| f.kind.as_str() == "task_leak")
        .unwrap_or_else(|| panic!("no task_leak:\n{r}"));
    let src = include_str!("task_dump.rs");
    let line = src
        .lines()
        .position(|l| l.contains("let _ = rx.await; // the await point"))
        .unwrap()
        + 1;
    let at = format!("sit at tests/task_dump.rs:{line} park -> oneshot::");
    assert!(f.detail.contains(&at), "{at:?} in:\n{r}");
    // The dumps' own wakes and polls did not hide the leak.
    assert_eq!(f.evidence["stranded_tasks"], 300, "{:#}", f.evidence);
}
