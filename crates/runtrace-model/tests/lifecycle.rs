//! The lifecycle layer's rules (crates/runtrace-model/src/lifecycle.rs),
//! one test per rule, on traces built by hand: every consumer reads these
//! records instead of pairing raw events itself.

use runtrace_model::event::Ev;
use runtrace_model::input;
use runtrace_model::lifecycle::{Life, MAX_OPEN, MAX_ORPHAN_WAKES};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::synth::TraceBuilder;

/// Every record, as a line naming what matters for the rules.
#[derive(Default)]
struct Log(Vec<String>);

impl Pass for Log {
    fn wants(&self) -> Wants {
        Wants::LIFECYCLE
    }
    fn event(&mut self, _: &Ev, _: &Model) {}
    fn life(&mut self, rec: &Life<'_>, _: &Model) {
        self.0.push(match *rec {
            Life::Spawn(t) => format!("spawn {} loc {} parent {}", t.task, t.loc, t.parent),
            Life::Seen(t) => format!("seen {} loc {}", t.task, t.loc),
            Life::Wake(w) => format!("wake {} first {}", w.task, w.first()),
            Life::PollStart(p) => format!(
                "start {} loc {} wake {:?} depth {}",
                p.task, p.loc, p.wake, p.depth
            ),
            Life::PollEnd(p) => format!(
                "end {} {}..{} ready {} depth {}",
                p.task, p.start, p.end, p.ready, p.depth
            ),
            Life::PollLost(p) => format!("lost {} at {}", p.task, p.start),
            Life::EndUnmatched(ev) => format!("unmatched end {}", ev.x),
            Life::WakesForgotten(n) => format!("forgot {n}"),
            Life::End(t) => format!(
                "over {} spawn {:?} first_poll {:?} end {:?}",
                t.task, t.spawn, t.first_poll, t.end
            ),
            Life::Alive(t) => format!("alive {} first_poll {:?}", t.task, t.first_poll),
            Life::SpanNew(s) => format!("span new {} parent {}", s.id, s.parent),
            Life::SpanEnter(e) => format!(
                "span enter {} task {} worker {} depth {}",
                e.span, e.task, e.worker, e.depth
            ),
            Life::SpanExit(e) => format!("span exit {} {}..{}", e.span, e.start, e.end),
            Life::SpanClose(s) | Life::SpanAlive(s) => format!(
                "span {} {} close {:?} busy {} delay {} enters {} task {}",
                if s.close.is_some() { "closed" } else { "alive" },
                s.id,
                s.close,
                s.busy_ticks,
                s.delay_ticks,
                s.enters,
                s.task
            ),
        });
    }
}

fn run(b: TraceBuilder) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    let mut log = Log::default();
    input::read(&[path], &mut log, None);
    log.0
}

/// A builder with spawn location 1 defined.
fn builder() -> TraceBuilder {
    let mut b = TraceBuilder::new();
    b.location(1, "src/main.rs", 10, 5);
    b
}

#[test]
fn rule_1_a_task_is_at_its_spawn_location_or_unknown_once() {
    let mut b = builder();
    b.spawn(7, 1_000, 1, 9, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 3_000, 1, true);
    b.terminate(7, 3_000, 1);
    // Task 2 is never spawned in the trace: seen once, at UNKNOWN_LOC (0).
    b.poll_start(7, 0, 4_000, 2, 0, 0);
    b.poll_end(7, 0, 5_000, 2, false);
    b.poll_start(7, 0, 6_000, 2, 0, 0);
    b.poll_end(7, 0, 7_000, 2, false);
    let log = run(b);
    assert_eq!(log[0], "spawn 1 loc 1 parent 9");
    assert_eq!(log[1], "start 1 loc 1 wake Some(1000) depth 0");
    assert_eq!(log[2], "end 1 2000..3000 ready true depth 0");
    assert_eq!(
        log[3],
        "over 1 spawn Some(1000) first_poll Some(2000) end Some(3000)"
    );
    assert_eq!(log.iter().filter(|l| l.starts_with("seen 2")).count(), 1);
    assert!(log.contains(&"seen 2 loc 0".to_string()));
    assert_eq!(log.last().unwrap(), "alive 2 first_poll Some(4000)");
}

#[test]
fn rule_2_a_poll_answers_the_first_wake_since_its_last_poll() {
    let mut b = builder();
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.poll_start(7, 0, 2_000, 1, 0, 0);
    b.poll_end(7, 0, 2_500, 1, false);
    b.wake(8, 1, 3_000, 1, 0);
    b.wake(8, 1, 3_500, 1, 0); // a second wake before the poll: not its answer
    b.poll_start(7, 0, 4_000, 1, 0, 0);
    b.poll_end(7, 0, 4_100, 1, false);
    b.poll_start(7, 0, 5_000, 1, 0, 0); // no wake since the last poll
    let log = run(b);
    let starts: Vec<&String> = log.iter().filter(|l| l.starts_with("start")).collect();
    assert_eq!(starts[0], "start 1 loc 1 wake Some(1000) depth 0");
    assert_eq!(starts[1], "start 1 loc 1 wake Some(3000) depth 0");
    assert_eq!(starts[2], "start 1 loc 1 wake None depth 0");
    let wakes: Vec<&String> = log.iter().filter(|l| l.starts_with("wake")).collect();
    assert_eq!(wakes, ["wake 1 first true", "wake 1 first false"]);
}

#[test]
fn rule_3_wakes_of_unseen_tasks_wait_for_them_bounded() {
    let mut b = builder();
    b.wake(8, 1, 1_000, 5, 0);
    b.poll_start(7, 0, 2_000, 5, 0, 0);
    // A wake, then the spawn: the spawn is what the poll answers.
    b.wake(8, 1, 3_000, 6, 0);
    b.spawn(7, 3_500, 6, 0, 1, 0);
    b.poll_start(9, 1, 4_000, 6, 0, 0);
    let log = run(b);
    assert!(log.contains(&"start 5 loc 0 wake Some(1000) depth 0".to_string()));
    assert!(log.contains(&"start 6 loc 1 wake Some(3500) depth 0".to_string()));

    // Over the bound: the wakes kept are forgotten at once, and counted.
    let mut b = builder();
    for i in 0..=MAX_ORPHAN_WAKES as u64 {
        b.wake(8, 1, 1_000 + i, 100 + i, 0);
    }
    let log = run(b);
    assert!(
        log.contains(&format!("forgot {MAX_ORPHAN_WAKES}")),
        "{:?}",
        &log[..3]
    );
}

#[test]
fn rule_4_a_poll_after_terminate_keeps_the_location() {
    let mut b = builder();
    b.spawn(7, 1_000, 1, 0, 1, 0);
    b.terminate(7, 2_000, 1);
    b.poll_start(8, 1, 3_000, 1, 0, 0);
    b.poll_end(8, 1, 3_100, 1, true);
    let log = run(b);
    assert!(log.contains(&"start 1 loc 1 wake None depth 0".to_string()));
    assert!(!log.iter().any(|l| l.starts_with("seen")), "{log:?}");
}

#[test]
fn rule_5_polls_pair_per_thread_and_lost_ends_are_said() {
    let mut b = builder();
    // An executor polls inside a tokio poll on the same thread.
    b.poll_start(7, 0, 1_000, 1, 0, 0);
    b.poll_start(7, 5, 1_100, 2, 0, 0);
    b.poll_end(7, 5, 1_200, 2, true);
    b.poll_end(7, 0, 1_300, 1, false);
    // A poll start on the same worker while one is open: the first lost
    // its end.
    b.poll_start(7, 0, 2_000, 3, 0, 0);
    b.poll_start(7, 0, 2_500, 4, 0, 0);
    b.poll_end(7, 0, 2_600, 4, false);
    // An end with nothing open.
    b.poll_end(7, 0, 2_700, 9, false);
    let log = run(b);
    assert!(log.contains(&"start 2 loc 0 wake None depth 1".to_string()));
    assert!(log.contains(&"end 2 1100..1200 ready true depth 1".to_string()));
    assert!(log.contains(&"end 1 1000..1300 ready false depth 0".to_string()));
    assert!(log.contains(&"lost 3 at 2000".to_string()));
    assert!(log.contains(&"end 4 2500..2600 ready false depth 0".to_string()));
    assert!(log.contains(&"unmatched end 9".to_string()));

    // Open polls are bounded: a stack MAX_OPEN deep loses its innermost.
    let mut b = builder();
    for i in 0..=MAX_OPEN as u64 {
        b.poll_start(7, i as u32, 1_000 + i, 10 + i, 0, 0);
    }
    let log = run(b);
    assert_eq!(log.iter().filter(|l| l.starts_with("lost")).count(), 1);
}

#[test]
fn rule_6_every_task_ends_once_respawns_and_survivors_included() {
    let mut b = builder();
    b.spawn(7, 1_000, 3, 0, 1, 0);
    b.spawn(7, 1_100, 2, 0, 1, 0);
    b.spawn(7, 1_200, 3, 0, 1, 0); // id 3 again: the first one is over
    b.terminate(7, 2_000, 8); // never seen: still its end
    let log = run(b);
    let ends: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("over") || l.starts_with("alive"))
        .collect();
    assert_eq!(
        ends,
        [
            "over 3 spawn Some(1000) first_poll None end None",
            "over 8 spawn None first_poll None end Some(2000)",
            "alive 2 first_poll None",
            "alive 3 first_poll None",
        ]
    );
}

struct SpanLog(Vec<String>);

impl Pass for SpanLog {
    fn wants(&self) -> Wants {
        Wants::SPANS
    }
    fn event(&mut self, _: &Ev, _: &Model) {}
    fn life(&mut self, rec: &Life<'_>, m: &Model) {
        let mut l = Log(Vec::new());
        l.life(rec, m);
        if matches!(
            rec,
            Life::SpanNew(_)
                | Life::SpanEnter(_)
                | Life::SpanExit(_)
                | Life::SpanClose(_)
                | Life::SpanAlive(_)
        ) {
            self.0.extend(l.0);
        }
    }
}

/// A request span entered in two polls of its task: tied to the task and
/// worker of each poll, busy for its two stretches, and delayed by the
/// second poll's wake (the first poll's wake came before the span).
#[test]
fn spans_pair_with_the_polls_they_ran_in() {
    let mut b = TraceBuilder::new();
    b.spawn(1, 100, 7, 0, 0, 0);
    b.poll_start(1, 0, 1_000, 7, 0, 0);
    b.span_new(1, 1_100, 50, 0, "request", "method=GET uri=/a");
    b.span_enter(1, 1_200, 50);
    b.span_new(1, 1_250, 51, 50, "db", "");
    b.span_enter(1, 1_300, 51);
    b.span_exit(1, 1_400, 51);
    b.span_close(1, 1_450, 51);
    b.span_exit(1, 1_500, 50);
    b.poll_end(1, 0, 1_600, 7, false);
    b.wake(2, 1, 3_000, 7, 0);
    b.poll_start(3, 1, 3_400, 7, 0, 0);
    b.span_enter(3, 3_450, 50);
    b.span_exit(3, 3_550, 50);
    b.poll_end(3, 1, 3_600, 7, true);
    b.span_close(3, 3_700, 50);
    // Entered outside any poll, never closed.
    b.span_new(4, 4_000, 60, 0, "main", "");
    b.span_enter(4, 4_100, 60);
    b.span_exit(4, 4_200, 60);
    // An exit with no enter: counted, no record.
    b.span_exit(4, 4_300, 61);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.0.bin");
    std::fs::write(&path, b.finish()).unwrap();
    let mut log = SpanLog(Vec::new());
    runtrace_model::input::read(&[path], &mut log, None);
    let no = runtrace_format::NO_WORKER;
    assert_eq!(
        log.0,
        [
            "span new 50 parent 0".to_string(),
            "span enter 50 task 7 worker 0 depth 0".into(),
            "span new 51 parent 50".into(),
            "span enter 51 task 7 worker 0 depth 1".into(),
            "span exit 51 1300..1400".into(),
            "span closed 51 close Some(1450) busy 100 delay 0 enters 1 task 7".into(),
            "span exit 50 1200..1500".into(),
            "span enter 50 task 7 worker 1 depth 0".into(),
            "span exit 50 3450..3550".into(),
            "span closed 50 close Some(3700) busy 400 delay 400 enters 2 task 7".into(),
            "span new 60 parent 0".into(),
            format!("span enter 60 task 0 worker {no} depth 0"),
            "span exit 60 4100..4200".into(),
            "span alive 60 close None busy 100 delay 0 enters 1 task 0".into(),
        ]
    );
}
