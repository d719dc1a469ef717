//! [`SharedNow`]: what [`Now`] says (what each worker polls at a window's
//! end, each location's recent polls), kept once over a followed
//! recording for every window joined to its lifecycle
//! ([`crate::stagger`]), and said for one window exactly as that window's
//! own [`Now`] pass would have said it.
//!
//! A [`Now`] pass per window looked a worker up and wrote a location's
//! ring at every poll start and end of every window open: an eighth of
//! following's instructions with five windows (callgrind of
//! `follow_cost`, docs/measurements/top.md). What a window's own pass
//! says differs from the state kept over all events only through what
//! straddles the window's start, which the window notes as it meets it
//! ([`Since`]):
//! - a poll begun before the window is not open in it, and its end is no
//!   poll of it (not counted, not among the recent polls);
//! - a poll woken before the window and polled in it has the wake the
//!   window's tracker paired it with (`stagger`'s joined windows);
//! - a worker with no poll started and no park since the window began is
//!   not in it.
//!
//! So each location keeps [`RECENT`] polls and one more per thread (a
//! window leaves out at most one poll per thread: the one open when it
//! began), and each window needs only its start, a count of each
//! worker's polls when it began, and the rare polls above.
//!
//! ```
//! use runtrace_model::lifecycle::{Life, Poll};
//! use runtrace_top::shared_now::SharedNow;
//! let mut s = SharedNow::default();
//! let poll = |task, start, end| Poll {
//!     task, serial: 0, slot: 0, thread: 0, worker: 0, loc: 1, start, end, local_q: 0,
//!     executor: false, queue: 0, ready: false, wake: None, depth: 0, self_woken: false,
//! };
//! let (a, b) = (poll(1, 100, 300), poll(2, 400, 500));
//! // A window begins at 200 (the second event fed), inside `a`.
//! s.life(&Life::PollStart(&a), 1, 1);
//! let mut since = s.since(200, 1);
//! s.life(&Life::PollEnd(&a), 2, 1);
//! since.ended_before(0, 0); // what the window met: `a` began before it
//! s.life(&Life::PollStart(&b), 3, 1);
//! s.life(&Life::PollEnd(&b), 4, 1);
//! let now = s.window(&since);
//! let starts: Vec<u64> = now.recent(1).map(|p| p.start).collect();
//! assert_eq!(starts, vec![400]);
//! assert_eq!(now.worker(0, 0).map(|w| w.polls), Some(1));
//! ```

use crate::window::{Now, RecentPoll, WorkerNow, RECENT};
use crate::workers::ByWorker;
use runtrace_model::event::Ev;
use runtrace_model::lifecycle::Life;
use std::collections::VecDeque;

/// A worker as all events so far say it.
#[derive(Debug, Clone, Copy, Default)]
struct Worker {
    now: WorkerNow,
    /// The sequence number of the last event that started a poll on it
    /// or parked it (0: none).
    touched: u64,
}

/// A poll kept among a location's recent polls.
#[derive(Debug, Clone, Copy)]
struct Kept {
    /// As a window shows it, its delay from `wake`.
    poll: RecentPoll,
    /// Its wake (ticks).
    wake: Option<u64>,
    /// Its thread index.
    thread: u32,
    /// The sequence number of the event that ended it.
    seq: u64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct SharedNow {
    workers: ByWorker<Worker>,
    /// By location index, oldest first.
    recent: Vec<VecDeque<Kept>>,
}

/// What one window met of what straddles its start, with where it began
/// (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Since {
    /// Ticks of the last event before the window.
    start: u64,
    /// The sequence number of that event.
    fed_at: u64,
    /// (thread, worker, polls ended) when it began.
    polls_at: Vec<(u32, u32, u64)>,
    /// (thread, worker) of each poll begun before it that ended in it.
    ended_before: Vec<(u32, u32)>,
    /// (thread, start, wake) of each poll woken before it and polled in
    /// it, with the wake the window paired it with.
    rewoken: Vec<(u32, u64, Option<u64>)>,
}

impl Since {
    /// A poll begun before the window, of `worker` on `thread`, ended.
    pub fn ended_before(&mut self, thread: u32, worker: u32) {
        self.ended_before.push((thread, worker));
    }

    /// The poll begun at `start` on `thread` was woken before the window;
    /// the window paired it with `wake`.
    pub fn rewoken(&mut self, thread: u32, start: u64, wake: Option<u64>) {
        self.rewoken.push((thread, start, wake));
    }
}

impl SharedNow {
    /// A window beginning after the event at ticks `start`, sequence
    /// number `fed_at` (of the events given to [`SharedNow::life`] and
    /// [`SharedNow::park`]).
    pub fn since(&self, start: u64, fed_at: u64) -> Since {
        Since {
            start,
            fed_at,
            polls_at: self
                .workers
                .iter()
                .map(|(t, w, x)| (t, w, x.now.polls))
                .collect(),
            ended_before: Vec::new(),
            rewoken: Vec::new(),
        }
    }

    /// A park of `ev`'s worker; `seq`: the event's sequence number.
    #[inline(always)]
    pub fn park(&mut self, ev: &Ev, seq: u64) {
        let w = self.workers.entry(ev.thread, ev.worker);
        w.now.local_q = ev.a;
        w.touched = seq;
    }

    /// A lifecycle record of the event numbered `seq`; `threads`: the
    /// model's threads.
    #[inline(always)]
    pub fn life(&mut self, rec: &Life<'_>, seq: u64, threads: usize) {
        match *rec {
            Life::PollStart(p) => {
                let w = self.workers.entry(p.thread, p.worker);
                w.now.polling = Some((p.task, p.loc, p.start));
                w.now.local_q = p.local_q;
                w.touched = seq;
            }
            Life::PollEnd(p) => {
                let w = &mut self.workers.entry(p.thread, p.worker).now;
                w.polls += 1;
                if w.polling.is_some_and(|(t, ..)| t == p.task) {
                    w.polling = None;
                }
                let li = p.loc as usize;
                if li >= self.recent.len() {
                    self.recent.resize_with(li + 1, VecDeque::new);
                }
                let ring = &mut self.recent[li];
                if ring.len() >= RECENT + threads {
                    ring.pop_front();
                }
                ring.push_back(Kept {
                    poll: RecentPoll {
                        task: p.task,
                        worker: p.worker,
                        start: p.start,
                        ticks: p.ticks(),
                        delay: p.delay_ticks(),
                    },
                    wake: p.wake,
                    thread: p.thread,
                    seq,
                });
            }
            Life::PollLost(p) => {
                if let Some(w) = self.workers.get_mut(p.thread, p.worker) {
                    w.now.polling = None;
                }
            }
            _ => {}
        }
    }

    /// What the window `since` describes says: its own [`Now`] pass's
    /// result.
    pub fn window(&self, since: &Since) -> Now {
        let mut now = Now::default();
        for (thread, worker, w) in self.workers.iter() {
            if w.touched <= since.fed_at {
                continue;
            }
            let at = since
                .polls_at
                .iter()
                .find(|x| x.0 == thread && x.1 == worker)
                .map_or(0, |x| x.2);
            let before = since
                .ended_before
                .iter()
                .filter(|x| **x == (thread, worker))
                .count() as u64;
            now.set_worker(
                thread,
                worker,
                WorkerNow {
                    polling: w.now.polling.filter(|p| p.2 > since.start),
                    local_q: w.now.local_q,
                    polls: w.now.polls.saturating_sub(at).saturating_sub(before),
                },
            );
        }
        let mut polls: Vec<RecentPoll> = Vec::with_capacity(RECENT);
        for (loc, ring) in self.recent.iter().enumerate() {
            polls.clear();
            for k in ring.iter().rev() {
                if k.seq <= since.fed_at || polls.len() == RECENT {
                    break;
                }
                if k.poll.start <= since.start {
                    continue;
                }
                let mut p = k.poll;
                if k.wake.is_some_and(|w| w <= since.start) {
                    let wake = since
                        .rewoken
                        .iter()
                        .find(|r| r.0 == k.thread && r.1 == p.start)
                        .and_then(|r| r.2);
                    p.delay = wake.map(|w| p.start.saturating_sub(w));
                }
                polls.push(p);
            }
            for p in polls.iter().rev() {
                now.push_recent(loc as u32, *p);
            }
        }
        now
    }
}
