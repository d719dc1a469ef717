//! The screen's layout on ratatui's TestBackend: every pane where it
//! belongs at the smallest size drawn and a large one, the selected row
//! and details, the live header red while the recorder drops, and a
//! message (no panic) at any smaller size.

use ratatui::{backend::TestBackend, Terminal};
use runtrace_model::synth::TraceBuilder;
use runtrace_top::snapshot::Snapshot;
use runtrace_top::source::{Options, Replay};
use runtrace_top::ui::draw::{draw, MIN_SIZE};
use runtrace_top::ui::state::App;

fn snapshot() -> Snapshot {
    let dir = tempfile::tempdir().unwrap();
    let mut b = TraceBuilder::new();
    b.location(1, "src/slow.rs", 3, 1);
    b.location(2, "src/fast.rs", 9, 5);
    for i in 0..200u64 {
        let t = i * 10_000_000;
        b.spawn(i + 1, t, 1, 0, 1 + (i % 2), 0);
        b.poll_start(i + 1, 0, t + 1_000, 1, 0, 0);
        let len = if i % 2 == 0 { 60_000_000 } else { 5_000 };
        b.poll_end(i + 1, 0, t + 1_000 + len.min(9_000_000), 1, true);
        if i == 100 {
            b.poll_start(999, 0, t + 9_500_000, 1, 0, 0);
            b.poll_end(999, 0, t + 80_000_000, 1, true);
        }
    }
    std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
    let mut r = Replay::open(dir.path(), Options::default()).unwrap();
    r.seek(1.2);
    r.snapshot()
}

fn render(w: u16, h: u16, app: &App, s: &Snapshot) -> (String, Terminal<TestBackend>) {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(f, app, Some(s), "")).unwrap();
    let buf = t.backend().buffer().clone();
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            text.push_str(buf[(x, y)].symbol());
        }
        text.push('\n');
    }
    (text, t)
}

#[test]
fn panes_at_the_smallest_and_a_large_size() {
    let s = snapshot();
    for (w, h) in [MIN_SIZE, (200, 60)] {
        let (text, _) = render(w, h, &App::default(), &s);
        let find = text.find(" findings (").expect(&text);
        let work = text.find(" workers (").expect(&text);
        let locs = text.find(" spawn locations (").expect(&text);
        assert!(text.starts_with(" REPLAY "), "{text}");
        assert!(find < work && work < locs, "{text}");
        assert!(text.contains("long_poll"), "{text}");
        assert!(text.contains("src/slow.rs:3:1"), "{text}");
        assert!(text.lines().last().unwrap().contains("q quit"), "{text}");
    }
}

#[test]
fn details_of_the_selected_location() {
    let s = snapshot();
    let mut app = App {
        details: true,
        ..App::default()
    };
    let rows: Vec<String> = app.rows(&s).iter().map(|l| l.location.clone()).collect();
    let slow = rows.iter().position(|l| l == "src/slow.rs:3:1").unwrap();
    app.selected = slow;
    let (text, _) = render(160, 50, &app, &s);
    assert!(text.contains(" src/slow.rs:3:1 : recent polls "), "{text}");
    assert!(text.contains("cause of long_poll"), "{text}");
}

#[test]
fn smaller_than_the_minimum_is_a_message() {
    let s = snapshot();
    for (w, h) in [(1, 1), (MIN_SIZE.0 - 1, 40), (120, MIN_SIZE.1 - 1), (10, 3)] {
        let (text, _) = render(w, h, &App::default(), &s);
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("too") || w < 20, "{w}x{h}: {text}");
    }
}

#[test]
fn the_header_is_red_while_the_recorder_drops() {
    let mut s = snapshot();
    let (_, t) = render(120, 30, &App::default(), &s);
    let plain = t.backend().buffer()[(10, 0)].bg;
    s.header.dropped_recent = 5;
    let (_, t) = render(120, 30, &App::default(), &s);
    assert_eq!(t.backend().buffer()[(10, 0)].bg, ratatui::style::Color::Red);
    assert_ne!(plain, ratatui::style::Color::Red);
}
