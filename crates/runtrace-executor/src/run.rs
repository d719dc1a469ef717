//! The run loop: one turn of the executor on its tokio host task: poll
//! the main future when woken, move woken tasks onto their queues, then
//! pick queue and task (`sched.rs`) and poll, until the turn's budget is
//! spent (yield to the tokio driver) or nothing is runnable (park,
//! ownership rule 3). The clock is read once per poll transition.

use crate::sync::{Cell, Ordering};
use crate::task::{
    mode, PollCtx, CURRENT_TASK, POLLED, POLL_CTX, POLL_END, POLL_MODE, POLL_T0, TASK_DONE,
};
use crate::wake::{MainWake, OwnerOnly, Shared};
use runtrace_core::clock::TraceClock;
use runtrace_probes::builtin as probes;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// The largest wake buffer kept for reuse (`OwnerOnly::spare`).
const SPARE_MAX: usize = 1024;

/// The owner thread's side of an executor (ownership rule 1): the settings
/// the run loop reads every turn (the queues themselves are in
/// `Shared`'s owner-only state, where wakes reach them).
pub(crate) struct Local {
    pub(crate) shared: Arc<Shared>,
    pub(crate) clock: &'static TraceClock,
    /// Poll durations are needed (several queues or a LAS queue).
    pub(crate) timed: bool,
    pub(crate) las: Vec<bool>,
    /// Per queue: its share is below the highest (`low_share_turn_time`
    /// applies to it).
    pub(crate) low: Vec<bool>,
    pub(crate) max_polls: u32,
    /// `max_turn_time` in trace ticks.
    pub(crate) turn_ticks: u64,
    /// `low_share_turn_time` in trace ticks (at most `turn_ticks`).
    pub(crate) low_turn_ticks: u64,
    pub(crate) parked: Cell<bool>,
}

impl Drop for Local {
    fn drop(&mut self) {
        // Queued tasks' futures may be `!Send`: drop them here, on the
        // owner thread, not wherever the last `Arc<Shared>` goes (a
        // `Spawner`, a waker). Taken out first: a drop may wake a task.
        if let Some(o) = self.shared.owner() {
            let queued = o.sched.borrow_mut().clear();
            drop(queued);
            let woken = std::mem::take(&mut *o.woken.borrow_mut());
            drop(woken);
        }
    }
}

impl Local {
    /// Moves tasks woken from other threads, and owner-thread wakes that
    /// could not go onto their queue at once, onto their queues.
    fn collect_woken(&self, o: &OwnerOnly) {
        let sh = &self.shared;
        let mut woken = {
            let spare = std::mem::take(&mut *o.spare.borrow_mut());
            std::mem::replace(&mut *o.woken.borrow_mut(), spare)
        };
        let mut injected = sh.inject.drain();
        if sh.closed.load(Ordering::Relaxed) {
            // Woken on another thread after (or racing with) shutdown: drop
            // the futures here, on their own thread, before borrowing the
            // queues (a drop may call back in); never poll them.
            drop(std::mem::take(&mut injected));
        }
        let mut sched = o.sched.borrow_mut();
        for r in woken.drain(..).chain(injected) {
            let q = r.metadata().queue;
            sched.push(q, r);
        }
        drop(sched);
        // Keep the (now empty) buffer for the next swap, unless a burst
        // grew it large.
        if woken.capacity() <= SPARE_MAX {
            *o.spare.borrow_mut() = woken;
        }
    }

    /// One turn on the tokio runtime: poll the main future if woken, then
    /// up to `max_polls` tasks; yield to tokio after that or when idle.
    pub(crate) fn turn<F: Future>(
        &self,
        cx: &mut Context<'_>,
        mut fut: Pin<&mut F>,
        main: &Arc<MainWake>,
    ) -> Poll<F::Output> {
        let l = self;
        let sh = &*l.shared;
        let Some(o) = sh.owner() else {
            panic!("runtrace executor: polled on a thread other than the one that built it");
        };
        if !o
            .host
            .borrow()
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            *o.host.borrow_mut() = Some(cx.waker().clone());
            sh.inject.set_host(cx.waker().clone());
        }
        // While we run, wakes need not wake the host (rule 3).
        o.notified.set(true);
        if l.parked.replace(false) && probes::worker_unpark::enabled() {
            let (cpu_ns, sched_wait_ns) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_unpark::fire(probes::worker_unpark::Args {
                worker: sh.worker,
                cpu_ns,
                sched_wait_ns,
            });
        }
        let main_waker = Waker::from(main.clone());
        let mut polls = 0;
        let mut now: Option<u64> = None;
        let mut turn_start: Option<u64> = None;
        let mut last_queue = usize::MAX;
        loop {
            if main.woken.take() {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                    return Poll::Ready(v);
                }
            }
            if o.has_woken() || sh.inject.is_flagged() {
                self.collect_woken(o);
            }
            // Time into this turn (0 until the clock has been read twice).
            let elapsed = match (turn_start, now) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            };
            if polls >= l.max_polls || elapsed >= l.turn_ticks {
                // Yield to the tokio driver (I/O, timers), then come back.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let traced = probes::task_poll_start::enabled();
            let (r, qi) = {
                let mut s = o.sched.borrow_mut();
                let Some(qi) = s.pick_queue() else {
                    break;
                };
                if l.low[qi] && elapsed >= l.low_turn_ticks {
                    // A lower-share poll could not be preempted by a
                    // higher-share queue's timer or I/O wake that is due
                    // now: let the driver deliver those first
                    // (`low_share_turn_time`).
                    drop(s);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                if qi != last_queue && s.runnable_queues() > 1 && probes::queue_select::enabled() {
                    probes::queue_select::fire(probes::queue_select::Args {
                        worker: sh.worker,
                        queue: s.queues[qi].name,
                        vruntime: s.vruntime(qi),
                        runnable: s.runnable_queues(),
                    });
                }
                last_queue = qi;
                let r = s
                    .pop(qi)
                    .unwrap_or_else(|| unreachable!("picked queue is non-empty"));
                if traced {
                    // PollStart fires from inside the task's poll
                    // (TaskFuture), so a cancelled task that `run` only
                    // drops gets none.
                    POLL_CTX.set(PollCtx {
                        worker: sh.worker,
                        queue: s.queues[qi].name,
                        depth: s.queues[qi].len as u32,
                    });
                }
                (r, qi)
            };
            let id = r.metadata().id;
            let clocked = l.timed || traced;
            let t0 = if clocked {
                let t0 = now.unwrap_or_else(|| l.clock.now());
                turn_start.get_or_insert(t0);
                POLL_T0.set(t0);
                t0
            } else {
                0
            };
            // The task's poll itself fires PollStart, takes the end time
            // and, in a LAS queue, charges the task's service: see
            // `TaskFuture::poll`.
            POLL_MODE.set(
                if clocked { mode::TIMED } else { 0 }
                    | if l.las[qi] { mode::LAS } else { 0 }
                    | if traced { mode::TRACED } else { 0 },
            );
            CURRENT_TASK.set(id);
            TASK_DONE.set(false);
            r.run();
            CURRENT_TASK.set(0);
            POLL_MODE.set(0);
            let done = TASK_DONE.get();
            let polled = POLLED.replace(false);
            polls += 1;
            if clocked {
                // One clock read per transition: the poll's own, or ours
                // when the task was not polled (cancelled).
                let t1 = if polled {
                    POLL_END.get()
                } else {
                    l.clock.now()
                }
                .max(t0);
                now = Some(t1);
                if l.timed {
                    o.sched.borrow_mut().charge(qi, t1 - t0);
                }
                if traced && polled {
                    probes::task_poll_end::fire_at(
                        t1,
                        probes::task_poll_end::Args {
                            task_id: id,
                            worker: sh.worker,
                            ready: done,
                        },
                    );
                    if done {
                        probes::task_terminate::fire_at(
                            t1,
                            probes::task_terminate::Args { task_id: id },
                        );
                    }
                }
            }
        }
        // Nothing runnable: park until a wake (rule 3).
        o.notified.set(false);
        if o.has_woken() || main.woken.is_set() {
            // Woken while we were finishing up: go round again soon.
            cx.waker().wake_by_ref();
            o.notified.set(true);
            return Poll::Pending;
        }
        l.parked.set(true);
        if probes::worker_park::enabled() {
            let (cpu_ns, _) = runtrace_core::clock::thread_cpu_and_wait_ns();
            probes::worker_park::fire(probes::worker_park::Args {
                worker: sh.worker,
                local_q: 0,
                cpu_ns,
            });
        }
        Poll::Pending
    }
}
