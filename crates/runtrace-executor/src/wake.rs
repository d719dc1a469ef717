//! The wake path: what a task's waker reaches from any thread (`Shared`),
//! the owner-only wake list, and the schedule function async-task calls on
//! every wake. Ownership rules 1-3 (crate docs) are enforced here; the
//! cross-thread half of rule 2 is `inject.rs`.

use crate::inject::Inject;
use crate::sync::{AtomicBool, Cell, Ordering, StaticAtomicU64, UnsafeCell};
use crate::task::{Meta, Registry, ABORTING, CURRENT_TASK};
use async_task::Runnable;
use runtrace_probes::builtin as probes;
use std::sync::Arc;
use std::task::{Wake, Waker};

static NEXT_THREAD_NO: StaticAtomicU64 = StaticAtomicU64::new(1);

thread_local! {
    /// A number for this thread (cheaper to compare than `ThreadId`).
    static THREAD_NO: Cell<u64> = const { Cell::new(0) };
}

/// This thread's number (`Shared::owner_thread` is the owner's).
pub(crate) fn thread_no() -> u64 {
    THREAD_NO.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_THREAD_NO.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// State only the owner thread touches (ownership rule 1).
#[derive(Default)]
pub(crate) struct OwnerOnly {
    pub(crate) woken: Vec<Runnable<Meta>>,
    /// An empty buffer swapped with `woken` at every collection, so
    /// collecting wakes does not free and regrow a Vec each time.
    pub(crate) spare: Vec<Runnable<Meta>>,
    pub(crate) host: Option<Waker>,
    pub(crate) notified: bool,
}

/// What wakers on any thread can reach.
pub(crate) struct Shared {
    pub(crate) worker: u32,
    pub(crate) names: Vec<String>,
    pub(crate) owner_thread: u64,
    /// Rule 1: only ever accessed on `owner_thread`, never across a call
    /// that could re-enter it.
    owner: UnsafeCell<OwnerOnly>,
    /// Rule 2: wakes from other threads (protocol in `inject.rs`).
    pub(crate) inject: Inject<Runnable<Meta>>,
    /// Live tasks (see `TaskFuture`). Leaked once per executor (a few
    /// words; emptied at shutdown) so tasks can point at it without a
    /// reference count per spawn.
    pub(crate) live: &'static Registry,
    pub(crate) closed: AtomicBool,
}

// SAFETY: `owner` is only accessed from `owner_thread` (checked at every
// access in `owner_mut`); everything else is Sync by itself.
unsafe impl Sync for Shared {}
// SAFETY: as above; the runnables and wakers inside are Send.
unsafe impl Send for Shared {}

impl Shared {
    /// The state of a new executor with these queue names, owned by this
    /// thread (rule 1).
    pub(crate) fn new(worker: u32, names: Vec<String>) -> Shared {
        Shared {
            worker,
            names,
            owner_thread: thread_no(),
            owner: UnsafeCell::new(OwnerOnly::default()),
            inject: Inject::new(),
            live: Box::leak(Box::default()),
            closed: AtomicBool::new(false),
        }
    }

    /// The owner-only state, when called on the owner thread.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn owner_mut(&self) -> Option<&mut OwnerOnly> {
        if thread_no() == self.owner_thread {
            // SAFETY: rule 1: we are on the owner thread, and callers never
            // hold this reference across anything that could call back here.
            Some(unsafe { &mut *self.owner.get() })
        } else {
            None
        }
    }

    /// Makes sure the tokio task hosting the executor will poll it (rule 3).
    pub(crate) fn notify(&self) {
        match self.owner_mut() {
            Some(o) => {
                if !o.notified {
                    o.notified = true;
                    if let Some(w) = o.host.clone() {
                        w.wake();
                    }
                }
            }
            None => self.inject.wake_host(),
        }
    }
}

/// The schedule function of every task (async-task calls it on each wake).
pub(crate) fn schedule(shared: &Shared, r: Runnable<Meta>) {
    let id = r.metadata().id;
    let on_owner = thread_no() == shared.owner_thread;
    if on_owner && ABORTING.get() == id {
        // `abort()` on a parked task: run it now, which drops its future
        // (the task is closed), instead of waiting for the executor. Not on
        // another thread: a `!Send` future must be dropped on its own
        // (async-task aborts the process otherwise); it goes through the
        // injection queue and the owner drops it at its next turn.
        r.run();
        return;
    }
    if shared.closed.load(Ordering::Relaxed) {
        if on_owner || !r.metadata().local {
            drop(r); // drops the future
        } else {
            // As above: the owner drops it (`collect_woken`).
            shared.inject.push(r);
            shared.inject.wake_host();
        }
        return;
    }
    if probes::task_wake::enabled() {
        probes::task_wake::fire(probes::task_wake::Args {
            woken_task_id: id,
            waker_task_id: CURRENT_TASK.get(),
            worker: if thread_no() == shared.owner_thread {
                shared.worker
            } else {
                runtrace_format::NO_WORKER
            },
        });
    }
    if let Some(o) = shared.owner_mut() {
        o.woken.push(r);
    } else {
        shared.inject.push(r);
    }
    shared.notify();
}

/// The main future's waker: flags it and wakes the host if needed.
pub(crate) struct MainWake {
    pub(crate) woken: AtomicBool,
    shared: Arc<Shared>,
}

impl MainWake {
    /// Woken to start with, so the first turn polls the main future.
    pub(crate) fn new(shared: Arc<Shared>) -> MainWake {
        MainWake {
            woken: AtomicBool::new(true),
            shared,
        }
    }
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Relaxed);
        self.shared.notify();
    }
}
