//! Purpose-built tokio workloads, recorded and analysed, one per rule of
//! docs/analysis.md's "Blame": the first finding names the cause, the
//! victims are listed under it, and nothing blames a victim.
//!
//! Every task is spawned with plain `tokio::spawn`: their wakes come from
//! tokio's waker instrumentation (`runtrace_tokio::wakes::install_global`).

use runtrace_analyze::{analyze_files, Options, Report, Severity};
use runtrace_recorder::Recorder;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One recording per process at a time.
static RECORDING: Mutex<()> = Mutex::new(());

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Records `work` on an instrumented runtime and analyses the trace.
fn record(name: &str, rt: &mut tokio::runtime::Builder, work: impl std::future::Future) -> Report {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let g = Recorder::builder()
        .path(dir.path().join("trace"))
        .start()
        .unwrap();
    // This test process sets no tracing subscriber of its own: runtrace's
    // minimal global one reports tokio's wakes (`instrument` sets none).
    assert!(
        runtrace_tokio::wakes::install_global(),
        "tokio's wakes recorded"
    );
    let rt = runtrace_tokio::instrument(rt.enable_all()).build().unwrap();
    rt.block_on(work);
    drop(rt);
    g.finish().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    runtrace_format::merge::sort_trace_paths(&mut files);
    let r = analyze_files(&files, Options::default());
    eprintln!("=== {name}\n{r}");
    r
}

/// `tests/findings_workloads.rs:N:` of the line holding `needle`.
fn line_of(needle: &str) -> String {
    let src = include_str!("findings_workloads.rs");
    let n = src
        .lines()
        .position(|l| l.contains(needle) && !l.contains("line_of("))
        .unwrap_or_else(|| panic!("{needle} not in this file"))
        + 1;
    format!("tests/findings_workloads.rs:{n}:")
}

fn blames(f: &runtrace_analyze::Finding, loc: &str) -> bool {
    f.spawn_loc.as_deref().is_some_and(|l| l.starts_with(loc))
}

fn is_victim(f: &runtrace_analyze::Finding, loc: &str) -> bool {
    f.victims.iter().any(|v| v.location.starts_with(loc))
}

/// The findings that blame a location in the process (host starvation,
/// whose cause is outside, is left out: the test host is shared).
fn in_process(r: &Report) -> Vec<&runtrace_analyze::Finding> {
    r.findings
        .iter()
        .filter(|f| f.spawn_loc.is_some())
        .collect()
}

async fn ticker(period: Duration, until: Instant) {
    while Instant::now() < until {
        tokio::time::sleep(period).await;
        spin(Duration::from_micros(20));
    }
}

async fn hog(until: Instant) {
    while Instant::now() < until {
        spin(Duration::from_millis(30));
        tokio::task::yield_now().await;
    }
}

/// A CPU hog among light tickers on 2 workers: the hog comes first, and
/// no imbalance finding names the tickers.
#[test]
fn hog_among_tickers_blames_the_hog() {
    let r = record(
        "hog among tickers",
        tokio::runtime::Builder::new_multi_thread().worker_threads(2),
        async {
            let until = Instant::now() + Duration::from_millis(1200);
            let mut hs: Vec<_> = (0..20)
                .map(|_| tokio::spawn(ticker(Duration::from_millis(1), until)))
                .collect();
            hs.push(tokio::spawn(hog(until)));
            for h in hs {
                h.await.unwrap();
            }
        },
    );
    let (hog, tickers) = (
        line_of("tokio::spawn(hog("),
        line_of("tokio::spawn(ticker("),
    );
    let f = in_process(&r);
    assert!(blames(f[0], &hog), "the hog first: {:#?}", r.findings);
    assert!(
        !r.findings
            .iter()
            .flat_map(|f| std::iter::once(f).chain(&f.effects))
            .any(|f| f.kind.as_str() == "worker_imbalance" && blames(f, &tickers)),
        "no imbalance naming the tickers: {:#?}",
        r.findings
    );
    assert!(
        !f.iter()
            .any(|f| blames(f, &tickers) && f.severity == Severity::Critical),
        "the tickers are blamed for nothing critical: {:#?}",
        r.findings
    );
}

/// Blocks its thread for 40 ms every 100 ms, having just nudged the
/// tickers waiting on `nudge`.
async fn blocker(nudge: Arc<Notify>, until: Instant) {
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        nudge.notify_waiters();
        // A blocking call inside a poll.
        std::thread::sleep(Duration::from_millis(40));
    }
}

/// [`ticker`] that a nudge also wakes.
async fn nudged_ticker(period: Duration, nudge: Arc<Notify>, until: Instant) {
    while Instant::now() < until {
        let _ = tokio::time::timeout(period, nudge.notified()).await;
        spin(Duration::from_micros(20));
    }
}

/// A blocking `std::thread::sleep` on a current-thread runtime: the
/// blocker first, the tickers it held up listed as its victims.
///
/// The blocker wakes the waiting tickers just before it blocks, so every
/// block holds some up. With timers alone a ticker was held up only when
/// its timer fired in the blocker's driver turn and it was queued behind
/// it, which the timer wheel decided run by run: 1 run in 30 saw fewer
/// than 5 such polls in a second, once none.
#[test]
fn blocking_sleep_blames_the_blocker_and_lists_its_victims() {
    let r = record(
        "blocking sleep",
        &mut tokio::runtime::Builder::new_current_thread(),
        async {
            let until = Instant::now() + Duration::from_millis(1000);
            let nudge = Arc::new(Notify::new());
            let mut hs: Vec<_> = (0..5)
                .map(|_| {
                    tokio::spawn(nudged_ticker(
                        Duration::from_millis(2),
                        nudge.clone(),
                        until,
                    ))
                })
                .collect();
            hs.push(tokio::spawn(blocker(nudge, until)));
            for h in hs {
                h.await.unwrap();
            }
        },
    );
    let (blocker, tickers) = (
        line_of("tokio::spawn(blocker("),
        line_of("tokio::spawn(nudged_ticker("),
    );
    let f = in_process(&r);
    assert!(
        blames(f[0], &blocker),
        "the blocker first: {:#?}",
        r.findings
    );
    assert_eq!(f[0].kind.as_str(), "long_poll");
    assert!(is_victim(f[0], &tickers), "its victims: {:#?}", f[0]);
    let v = f[0]
        .victims
        .iter()
        .find(|v| v.location.starts_with(&tickers));
    assert!(
        v.is_some_and(|v| v.delayed_polls >= 5 && v.worst_delay_ns > 20_000_000),
        "{v:?}"
    );
}

async fn request_loop(until: Instant) {
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(1)).await;
        spin(Duration::from_micros(50));
    }
}

async fn background_job() {
    for _ in 0..3 {
        spin(Duration::from_millis(12));
        tokio::task::yield_now().await;
    }
}

/// Bursts of CPU-heavy background tasks delay a request loop spawned with
/// plain `tokio::spawn`: the background location first, the request loop
/// among its victims (its wakes come from tokio's instrumentation).
#[test]
fn background_bursts_blame_the_background_and_name_the_request_loop() {
    let r = record(
        "background bursts",
        tokio::runtime::Builder::new_multi_thread().worker_threads(2),
        async {
            let until = Instant::now() + Duration::from_millis(1200);
            let req = tokio::spawn(request_loop(until));
            while Instant::now() < until {
                for _ in 0..6 {
                    tokio::spawn(background_job());
                }
                tokio::time::sleep(Duration::from_millis(150)).await;
            }
            req.await.unwrap();
        },
    );
    let (bg, req) = (
        line_of("tokio::spawn(background_job())"),
        line_of("tokio::spawn(request_loop("),
    );
    let f = in_process(&r);
    assert!(blames(f[0], &bg), "the background first: {:#?}", r.findings);
    assert!(is_victim(f[0], &req), "the request loop: {:#?}", f[0]);
    // The request loop's polls follow a recorded wake.
    let l = r
        .spawn_locations
        .iter()
        .find(|l| l.location.starts_with(&req))
        .unwrap();
    assert!(l.polls >= 3, "{l:?}");
    assert!(l.uncovered_polls * 10 < l.polls, "{l:?}");
}

/// A healthy workload: no critical finding in the process.
#[test]
fn healthy_workload_has_no_critical_finding() {
    let r = record(
        "healthy",
        tokio::runtime::Builder::new_multi_thread().worker_threads(2),
        async {
            let until = Instant::now() + Duration::from_millis(800);
            let hs: Vec<_> = (0..10)
                .map(|_| tokio::spawn(ticker(Duration::from_millis(2), until)))
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        },
    );
    let critical: Vec<_> = in_process(&r)
        .into_iter()
        .filter(|f| f.severity == Severity::Critical)
        .collect();
    assert!(critical.is_empty(), "{critical:#?}");
    assert!(r.spawn_locations.iter().map(|l| l.polls).sum::<u64>() > 1000);
}
