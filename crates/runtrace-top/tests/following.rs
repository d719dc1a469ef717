//! Following a recording (`source::Live`): its first refresh is already
//! a window joined to the one lifecycle (opened over the events kept,
//! `Following::warm`) and says what a replay of the same window says,
//! with one window open per refresh over the window (from 15 s on, one
//! every `window / 5 - 1` seconds).

use runtrace_model::synth::TraceBuilder;
use runtrace_top::source::{Live, Options, Replay};

const MS: u64 = 1_000_000;

/// `secs` seconds of one worker: a task of `src/tick.rs` polled 0.1 ms
/// every ~10 ms (a 37 us drift, so no event sits on a window's edge), and
/// every 7 s a 200 ms poll of a task of `src/slow.rs`.
fn recording(secs: u64) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/tick.rs", 1, 1);
    b.location(2, "src/slow.rs", 2, 1);
    b.spawn(1, MS, 1, 0, 1, 0);
    let mut t = 2 * MS;
    let mut next_slow = 7_000 * MS;
    let mut task = 2;
    while t < secs * 1_000 * MS {
        b.wake(1, 0, t - MS / 2, 1, 0);
        b.poll_start(1, 0, t, 1, 0, 0);
        b.poll_end(1, 0, t + MS / 10, 1, false);
        t += 10 * MS + 37_000;
        if t > next_slow {
            b.spawn(1, t, task, 0, 2, 0);
            b.poll_start(1, 0, t + 1_000, task, 0, 0);
            b.poll_end(1, 0, t + 200 * MS, task, true);
            b.terminate(1, t + 200 * MS, task);
            task += 1;
            t += 201 * MS;
            next_slow += 7_000 * MS;
        }
    }
    b.finish()
}

#[test]
fn the_first_refresh_is_joined_and_says_what_the_replay_says() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.0.bin"), recording(40)).unwrap();
    for (window_s, most) in [(5.0, 6), (30.0, 8)] {
        let opts = Options {
            window_s,
            ..Options::default()
        };
        let mut live = Live::open(dir.path(), opts).unwrap();
        let s = live.snapshot_now().unwrap();
        let open = live.windows_open();
        assert!(
            (2..=most).contains(&open),
            "{open} windows open following with a {window_s} s window"
        );
        // The window shown is the one opened at its start: exactly as long
        // as asked.
        let held = s.window_ns as f64 / 1e9;
        assert!(
            (held - window_s).abs() < 0.01,
            "a {held} s window shown for {window_s} s"
        );
        let mut r = Replay::open(dir.path(), opts).unwrap();
        r.seek(r.length_s());
        let w = r.snapshot();
        let said = |s: &runtrace_top::snapshot::Snapshot| {
            let mut f: Vec<(String, String)> = s
                .findings
                .iter()
                .map(|f| (f.kind.to_string(), f.cause.clone()))
                .collect();
            f.sort();
            let mut l: Vec<(String, u64, u64)> = s
                .locations
                .iter()
                .map(|l| (l.location.clone(), l.max_poll_ns, l.long_polls))
                .collect();
            l.sort();
            (f, l)
        };
        let (live_said, replay_said) = (said(&s), said(&w));
        assert!(
            live_said
                .0
                .iter()
                .any(|(k, c)| k == "long_poll" && c == "src/slow.rs:2:1"),
            "{window_s} s: {:?}",
            live_said.0
        );
        assert_eq!(live_said, replay_said, "{window_s} s window");
    }
}

/// The stages `follow_stages` measures: fewer than all show nothing and
/// open no window, but keep what following keeps (the window's events
/// and lives), as `top` does.
#[test]
fn fewer_stages_keep_what_following_keeps_and_show_nothing() {
    use runtrace_top::source::Stages;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("trace.0.bin"), recording(20)).unwrap();
    let mut kept = Vec::new();
    for stages in [Stages::Read, Stages::Lifecycle, Stages::All] {
        let opts = Options {
            stages,
            ..Options::default()
        };
        let mut live = Live::open(dir.path(), opts).unwrap();
        let shown = live.refresh();
        assert_eq!(shown.is_some(), stages == Stages::All, "{stages:?}");
        let open = live.windows_open();
        if stages == Stages::All {
            assert!(open > 0, "following opened no window");
        } else {
            assert_eq!(open, 0, "{stages:?} opened windows");
        }
        kept.push(live.held());
    }
    // Of 20 s recorded (~5,900 events, three per tick), the 5 s window
    // and 0.75 s more: ~1,720 events.
    assert!((1_500..2_000).contains(&kept[0].0), "{kept:?}");
    assert!(kept.iter().all(|k| *k == kept[0]), "{kept:?}");
}
