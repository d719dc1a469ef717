//! `runtrace_model::waits`: the finished waits of a purpose-built trace,
//! with their waiter, resource and who let each go.

use runtrace_model::event::Ev;
use runtrace_model::lifecycle::Life;
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::synth::{mutex_held_across_await, TraceBuilder};
use runtrace_model::waits::{FinishedWait, WaitTracker};

#[derive(Default)]
struct Collect(WaitTracker, Vec<FinishedWait>);

impl Pass for Collect {
    fn wants(&self) -> Wants {
        WaitTracker::wants()
    }
    fn life(&mut self, rec: &Life<'_>, m: &Model) {
        self.0.life(rec, m);
    }
    fn event(&mut self, ev: &Ev, m: &Model) {
        if let Some(w) = self.0.event(ev, m) {
            self.1.push(w);
        }
    }
}

fn run(bytes: Vec<u8>) -> (Collect, Model) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, bytes).unwrap();
    let mut c = Collect::default();
    let (m, _) = runtrace_model::input::read(&[path], &mut c, None);
    (c, m)
}

#[test]
fn every_wait_of_the_mutex_with_who_let_it_go() {
    let (c, m) = run(mutex_held_across_await());
    let loc = |l: u32| m.locs[l as usize].text.to_string();
    assert_eq!(c.1.len(), 160);
    assert_eq!(c.0.unknown, 0);
    for (i, w) in c.1.iter().enumerate() {
        let (round, k) = (i as u64 / 8, i as u64 % 8);
        assert_eq!(w.task, 100 + i as u64);
        assert_eq!(loc(w.loc), "src/req.rs:40:9");
        assert_eq!(w.resource.label(&m), "Mutex src/state.rs:4:17");
        let at = round * 50_000_000 + 1_000_000;
        assert_eq!(w.start, at + 5_000_000 + k * 100_000 + 11_000);
        assert_eq!(w.end, at + 40_000_000 + 100_000 + k * 100_000 + 1_000);
        let by = w.released_by.expect("every wait was ended by a wake");
        assert!(!by.release, "a wake, not the release, is preferred");
        if k == 0 {
            assert_eq!((by.task, loc(by.loc).as_str()), (1, "src/sync.rs:12:5"));
            assert_eq!(by.ticks, at + 40_000_000 + 21_000);
        } else {
            assert_eq!(by.task, w.task - 1);
            assert_eq!(loc(by.loc), "src/req.rs:40:9");
        }
    }
}

#[test]
fn a_release_without_a_wake_is_who_let_it_go_and_a_task_end_forgets_a_wait() {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.location(2, "src/b.rs", 2, 2);
    b.string(7, "Semaphore");
    b.resource_new(1, 0, 9, 7, 0, true);
    b.spawn(1, 1, 10, 0, 1, 0);
    b.spawn(1, 2, 20, 0, 2, 0);
    b.spawn(1, 3, 30, 0, 2, 0);
    // 20 waits from 100; 10 releases at 500 (no wake seen); 20 gets it.
    b.poll_start(1, 0, 100, 20, 0, 0);
    b.resource_poll(1, 101, 20, 9, false);
    b.poll_end(1, 0, 102, 20, false);
    // 30 waits and ends (cancelled) without getting it.
    b.poll_start(1, 0, 150, 30, 0, 0);
    b.resource_poll(1, 151, 30, 9, false);
    b.poll_end(1, 0, 152, 30, false);
    b.terminate(1, 160, 30);
    b.poll_start(1, 0, 500, 10, 0, 0);
    b.resource_release(1, 501, 10, 9);
    b.poll_end(1, 0, 502, 10, false);
    b.poll_start(1, 0, 600, 20, 0, 0);
    b.resource_poll(1, 601, 20, 9, true);
    b.poll_end(1, 0, 602, 20, true);
    // A poll of a resource never created is counted, not a wait.
    b.poll_start(1, 0, 700, 10, 0, 0);
    b.resource_poll(1, 701, 10, 77, false);
    b.poll_end(1, 0, 702, 10, false);
    let (c, m) = run(b.finish());
    assert_eq!(c.1.len(), 1);
    let w = c.1[0];
    assert_eq!((w.task, w.start, w.end), (20, 101, 601));
    assert_eq!(w.resource.label(&m), "Semaphore (tokio-internal)");
    let by = w.released_by.unwrap();
    assert!(by.release);
    assert_eq!(
        (by.task, &*m.locs[by.loc as usize].text),
        (10, "src/a.rs:1:1")
    );
    assert_eq!(c.0.unknown, 1);
}
