//! What a window sees besides the runtime's events, as `runtrace
//! analyze` would: the application's named locks (`lock_convoy` live),
//! its spans (named even when created before the window, in the span
//! table, the locations' rows and the span pane), and the CPU profile
//! (each location's functions, a finding's verdict).

use ratatui::{backend::TestBackend, Terminal};
use runtrace_format::frame::ProfileInfo;
use runtrace_model::synth::{self, TraceBuilder};
use runtrace_top::snapshot::Snapshot;
use runtrace_top::source::{Options, Replay};
use runtrace_top::ui::draw::draw;
use runtrace_top::ui::state::{App, Table};
use self_maps::{inside, mapping_of};
use std::hint::black_box;

#[path = "../../runtrace-analyze/tests/self_maps/mod.rs"]
mod self_maps;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// The window of `bytes` (one trace file) ending `at` seconds in.
fn window(bytes: Vec<u8>, at: f64) -> Snapshot {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.0.bin"), bytes).unwrap();
    let mut r = Replay::open(dir.path(), Options::default()).unwrap();
    r.seek(at);
    r.snapshot()
}

fn screen(app: &App, s: &Snapshot) -> String {
    let (w, h) = (160, 50);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, app, Some(s), "")).unwrap();
    let buf = t.backend().buffer();
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(buf[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

/// A `runtrace::sync` lock "db" held 25 ms by tasks of `src/flush.rs`,
/// waited on by tasks of `src/req.rs` (`synth::named_lock_convoy`, as
/// runtrace-analyze's tests/waiting.rs): application events, which the
/// window must see.
#[test]
fn a_named_lock_convoy_is_a_live_finding() {
    let s = window(synth::named_lock_convoy(), 1.0);
    let f = s
        .findings
        .iter()
        .find(|f| f.kind == "lock_convoy")
        .unwrap_or_else(|| panic!("a lock_convoy finding:\n{}", s.to_text()));
    assert_eq!(f.cause, "src/flush.rs:7:9");
    assert!(f.detail.contains("db"), "{}", f.detail);
}

/// A long request span ("GET /report", created at 0.1 s, entered in a
/// poll every second, closed at 7 s) and short ones ("GET /item", one per
/// 100 ms, each within one poll), served by two locations. The window
/// [3 s, 8 s] begins after the long span's creation: it must still have
/// its name, and its wall time from its first enter (0.2 s) to its close.
fn spans() -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/report.rs", 5, 1);
    b.location(2, "src/item.rs", 8, 1);
    b.spawn(1, 50 * MS, 1, 0, 1, 0);
    b.span_new(1, 100 * MS, 7, 0, "request", "method=GET uri=/report");
    for k in 0..7u64 {
        let t = 200 * MS + k * S;
        if k > 0 {
            b.wake(1, 0, t - 2 * MS, 1, 0);
        }
        b.poll_start(1, 0, t, 1, 0, 0);
        b.span_enter(1, t + 10 * US, 7);
        b.span_exit(1, t + 3 * MS, 7);
        b.poll_end(1, 0, t + 3 * MS + 10 * US, 1, false);
    }
    b.span_close(1, 7 * S, 7);
    for i in 0..80u64 {
        let (t, task, id) = (i * 100 * MS + 30 * MS, 100 + i, 1_000 + i);
        b.spawn(2, t, task, 0, 2, 0);
        b.span_new(2, t + 10 * US, id, 0, "request", "method=GET uri=/item");
        b.poll_start(2, 1, t + 50 * US, task, 0, 0);
        b.span_enter(2, t + 60 * US, id);
        b.span_exit(2, t + 260 * US, id);
        b.poll_end(2, 1, t + 270 * US, task, true);
        b.span_close(2, t + 280 * US, id);
        b.terminate(2, t + 300 * US, task);
    }
    b.finish()
}

#[test]
fn spans_created_before_the_window_keep_their_names() {
    let s = window(spans(), 8.0);
    let labels: Vec<&str> = s.spans.iter().map(|x| x.label.as_str()).collect();
    assert_eq!(labels, ["GET /report", "GET /item"], "slowest first");
    let report = &s.spans[0];
    assert!(
        (6_700 * MS..=6_900 * MS).contains(&report.wall_p99_ns),
        "wall from the first enter (0.2 s) to the close (7 s): {report:?}"
    );
    assert_eq!(report.open, 0);
    assert_eq!(report.locations, ["src/report.rs:5:1"]);
    let item = &s.spans[1];
    assert!(
        (9.0..=11.0).contains(&item.closed_per_s),
        "10 a second: {item:?}"
    );
    assert_eq!(item.locations, ["src/item.rs:8:1"]);
    let loc = |l: &str| s.locations.iter().find(|x| x.location == l).unwrap();
    assert!(loc("src/report.rs:5:1").spans[0].starts_with("GET /report"));
    assert!(loc("src/item.rs:8:1").spans[0].starts_with("GET /item"));
    // --once's text and JSON.
    let text = s.to_text();
    assert!(text.contains("\nspans:\n"), "{text}");
    assert!(text.contains("serving: GET /item"), "{text}");
    let j = s.to_json();
    assert_eq!(j["spans"][0]["span"], "GET /report", "{j}");
    assert_eq!(j["spans"][1]["spawn_locations"][0], "src/item.rs:8:1");
    // The screen's span table (`t`), filtered, and a span's details.
    let mut app = App {
        table: Table::Spans,
        details: true,
        ..App::default()
    };
    let text = screen(&app, &s);
    assert!(text.contains(" spans (2 of 2) "), "{text}");
    assert!(
        text.contains("GET /report") && text.contains("GET /item"),
        "{text}"
    );
    app.filter = "item".into();
    let text = screen(&app, &s);
    assert!(text.contains(" spans (1 of 2) filter \"item\" "), "{text}");
    assert!(
        text.contains(" GET /item "),
        "the selected span's details: {text}"
    );
    assert!(text.contains("served by"), "{text}");
}

/// Before the window: a window that holds none of a span's events but
/// its close still names it; a trace without spans says so on the span
/// table.
#[test]
fn a_trace_without_spans_says_so() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(1, MS, 1, 0, 1, 0);
    b.poll_start(1, 0, 2 * MS, 1, 0, 0);
    b.poll_end(1, 0, 3 * MS, 1, true);
    let s = window(b.finish(), 1.0);
    assert!(s.spans.is_empty());
    assert!(s.to_json()["spans"].as_array().unwrap().is_empty());
    assert!(!s.to_text().contains("\nspans:"));
    let app = App {
        table: Table::Spans,
        ..App::default()
    };
    assert!(screen(&app, &s).contains(" spans: none in this window"));
}

#[inline(never)]
fn hot_parse(x: u64) -> u64 {
    black_box(x).wrapping_mul(31).rotate_left(7)
}

#[inline(never)]
fn run_handler(x: u64) -> u64 {
    hot_parse(x) + 1
}

/// A 40 ms poll of `src/hot.rs` with 39 on-CPU samples in `hot_parse`
/// (this test binary's own function: symbolization is real).
#[test]
fn a_location_shows_the_functions_its_polls_ran() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/hot.rs", 10, 5);
    b.location(2, "src/idle.rs", 20, 5);
    let handler = inside(run_handler);
    b.profile(&ProfileInfo {
        mode: 1,
        hz: 1000,
        flags: 1,
        message: String::new(),
    });
    b.mappings(&[mapping_of(handler)]);
    b.stacks(&[(1, &[inside(hot_parse), handler][..])]);
    b.spawn(100, 500 * US, 1, 0, 1, 0);
    b.poll_start(100, 0, MS, 1, 0, 0);
    for ms in 2..=40u64 {
        b.cpu_sample(999, ms * MS, 100, 1);
    }
    b.poll_end(100, 0, 41 * MS, 1, false);
    b.spawn(100, 42 * MS, 2, 0, 2, 0);
    b.poll_start(100, 0, 43 * MS, 2, 0, 0);
    b.poll_end(100, 0, 44 * MS, 2, true);
    let s = window(b.finish(), 1.0);
    let hot = s
        .locations
        .iter()
        .find(|l| l.location == "src/hot.rs:10:5")
        .unwrap();
    let top = hot.functions.first().expect("functions of src/hot.rs");
    assert!(top.function.contains("hot_parse"), "{top:?}");
    assert_eq!(top.share, 1.0);
    assert!(!top.off_cpu);
    let idle = s
        .locations
        .iter()
        .find(|l| l.location == "src/idle.rs:20:5");
    assert!(idle.is_none_or(|l| l.functions.is_empty()));
    // The long poll's finding, judged from its samples as analyze does.
    let long = s.findings.iter().find(|f| f.kind == "long_poll").unwrap();
    assert!(
        long.detail.contains("burning CPU in") && long.detail.contains("hot_parse"),
        "{}",
        long.detail
    );
    assert!(s.to_text().contains("functions: "), "{}", s.to_text());
    let j = s.to_json();
    let f = &j["spawn_locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["location"] == "src/hot.rs:10:5")
        .unwrap()["functions"][0];
    assert!(f["function"].as_str().unwrap().contains("hot_parse"), "{j}");
    // The selected location's details.
    let app = App {
        details: true,
        selected: 0,
        ..App::default()
    };
    let text = screen(&app, &s);
    assert!(text.contains("functions: "), "{text}");
}

/// 100 tasks of `src/watch.rs`, one every 20 ms, each polled once
/// (Pending) and never woken: a `task_leak`. With `dropped`, the recorder
/// also reports that many events lost.
fn unwoken(dropped: u64) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/watch.rs", 4, 2);
    for i in 0..100u64 {
        let at = i * 20 * MS + MS;
        b.spawn(1, at, i + 1, 0, 1, 0);
        b.poll_start(1, 0, at + 50 * US, i + 1, 0, 0);
        b.poll_end(1, 0, at + 60 * US, i + 1, false);
    }
    if dropped > 0 {
        b.dropped(1, dropped, MS, 2 * MS);
    }
    b.finish()
}

/// A window judges wakes that never came as `runtrace analyze` does: on a
/// recording that lost events, `task_leak` is a warning saying so.
#[test]
fn a_leak_in_a_window_of_a_recording_that_lost_events_says_so() {
    let leak = |s: &Snapshot| {
        s.findings
            .iter()
            .find(|f| f.kind == "task_leak")
            .cloned()
            .unwrap_or_else(|| panic!("a task_leak:\n{}", s.to_text()))
    };
    let clean = leak(&window(unwoken(0), 2.5));
    assert_eq!(clean.severity, "critical", "{}", clean.detail);
    assert!(!clean.detail.contains("lost events"), "{}", clean.detail);
    let lossy = leak(&window(unwoken(5), 2.5));
    assert_eq!(lossy.severity, "warning", "{}", lossy.detail);
    assert!(
        lossy.detail.contains("the recorder dropped 5 events"),
        "{}",
        lossy.detail
    );
}
