//! The wake path: what a task's waker reaches from any thread (`Shared`),
//! the owner-only state (the run queues and the wake list), and the
//! schedule function async-task calls on every wake. Ownership rules 1-3
//! (crate docs) are enforced here; the cross-thread half of rule 2 is
//! `inject.rs`.

use crate::inject::Inject;
use crate::sched::Sched;
use crate::sync::{AtomicBool, Cell, Ordering, RefCell};
use crate::task::{Meta, Registry, ABORTING, CURRENT_TASK};
use crate::thread::thread_no;
use async_task::Runnable;
use runtrace_core::Istr;
use runtrace_probes::builtin as probes;
use std::sync::Arc;
use std::task::{Wake, Waker};

thread_local! {
    /// Set by a spawn that fired TaskSpawn: the time it read, for the
    /// TaskWake of the task's first schedule (0: read the clock).
    pub(crate) static SPAWN_WAKE_AT: Cell<u64> = const { Cell::new(0) };
}

/// State only the owner thread touches (ownership rule 1), reached only
/// through [`Shared::owner`], which checks the thread. Interior mutability
/// only: a call that re-enters (a wake or a drop during a poll, a drop
/// while the queues are being cleared) meets a borrowed `RefCell`, never a
/// second `&mut`.
pub(crate) struct OwnerOnly {
    /// The run queues and the EEVDF state. A wake on the owner thread
    /// pushes onto them directly (`enqueue`).
    pub(crate) sched: RefCell<Sched>,
    /// Woken tasks that could not go onto their queue at once (see
    /// `enqueue`), in wake order; the run loop moves them at every step,
    /// so they land before the next pick.
    pub(crate) woken: RefCell<Vec<Runnable<Meta>>>,
    /// An empty buffer swapped with `woken` at every collection, so
    /// collecting wakes does not free and regrow a Vec each time.
    pub(crate) spare: RefCell<Vec<Runnable<Meta>>>,
    pub(crate) host: RefCell<Option<Waker>>,
    /// Rule 3: the host task has been woken (or is running) since it last
    /// parked.
    pub(crate) notified: Cell<bool>,
}

impl OwnerOnly {
    /// Makes `r` runnable: straight onto its queue, unless the queues are
    /// borrowed (a wake from inside `Sched`, e.g. a future dropped while
    /// they are cleared), the task is the one being polled (its poll's end
    /// charges its service, which places it in a LAS queue), or earlier
    /// wakes are still waiting in `woken` (wake order is kept). Those wait
    /// in `woken` until the run loop's next step.
    #[inline(always)]
    fn enqueue(&self, r: Runnable<Meta>) {
        let mut woken = self.woken.borrow_mut();
        if woken.is_empty() && CURRENT_TASK.get() != r.metadata().id {
            if let Ok(mut s) = self.sched.try_borrow_mut() {
                let q = r.metadata().queue;
                s.push(q, r);
                return;
            }
        }
        woken.push(r);
    }

    /// Whether tasks wait in `woken`.
    #[inline]
    pub(crate) fn has_woken(&self) -> bool {
        !self.woken.borrow().is_empty()
    }

    /// Makes sure the host task will poll the executor (rule 3).
    fn notify(&self) {
        if !self.notified.replace(true) {
            // Cloned out of the borrow: waking may run arbitrary code.
            let w = self.host.borrow().clone();
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

/// What wakers on any thread can reach.
pub(crate) struct Shared {
    pub(crate) worker: u32,
    pub(crate) names: Vec<String>,
    /// The queue names, interned once (for the spawn probe).
    pub(crate) istrs: Vec<Istr>,
    pub(crate) owner_thread: u64,
    /// Rule 1: only reached through `owner()` (the owner thread).
    owner: OwnerOnly,
    /// Rule 2: wakes from other threads (protocol in `inject.rs`).
    pub(crate) inject: Inject<Runnable<Meta>>,
    /// Live tasks (see `TaskFuture`). Leaked once per executor (a few
    /// words; emptied at shutdown) so tasks can point at it without a
    /// reference count per spawn.
    pub(crate) live: &'static Registry,
    pub(crate) closed: AtomicBool,
}

// SAFETY: `owner` is only reached through `owner()`, which returns it on
// `owner_thread` only (rule 1); everything else is Sync by itself.
unsafe impl Sync for Shared {}
// SAFETY: as above. The runnables inside `owner` may be `!Send` tasks'; the
// owner thread empties the queues and the wake list before it lets go of
// the executor (`Local`'s drop), so none is dropped elsewhere.
unsafe impl Send for Shared {}

impl Shared {
    /// The state of a new executor with these queues, owned by this thread
    /// (rule 1).
    pub(crate) fn new(worker: u32, names: Vec<String>, sched: Sched) -> Shared {
        let owner_thread = thread_no();
        Shared {
            worker,
            istrs: names.iter().map(|n| Istr::new(n)).collect(),
            names,
            owner_thread,
            owner: OwnerOnly {
                sched: RefCell::new(sched),
                woken: RefCell::default(),
                spare: RefCell::default(),
                host: RefCell::new(None),
                notified: Cell::new(false),
            },
            inject: Inject::new(),
            live: Box::leak(Box::new(Registry::new(owner_thread))),
            closed: AtomicBool::new(false),
        }
    }

    /// The owner-only state, when called on the owner thread.
    #[inline]
    pub(crate) fn owner(&self) -> Option<&OwnerOnly> {
        (thread_no() == self.owner_thread).then_some(&self.owner)
    }

    /// Makes sure the tokio task hosting the executor will poll it (rule 3).
    pub(crate) fn notify(&self) {
        match self.owner() {
            Some(o) => o.notify(),
            None => self.inject.wake_host(),
        }
    }
}

/// The executor task `r` belongs to.
fn shared_of(r: &Runnable<Meta>) -> &Shared {
    r.metadata()
        .exec
        .downcast_ref::<Shared>()
        .unwrap_or_else(|| unreachable!("a task's executor is a wake::Shared"))
}

/// The schedule function of every task (async-task calls it on each wake).
///
/// It captures nothing: the task's metadata names its executor. A schedule
/// function with captured state makes async-task hold a temporary task
/// reference around every call (a waker clone and drop: two atomic
/// read-modify-writes per wake and per spawn), which this avoids.
pub(crate) fn schedule_task(r: Runnable<Meta>) {
    let sh = shared_of(&r);
    let id = r.metadata().id;
    if let Some(o) = sh.owner() {
        if ABORTING.get() != id && !sh.closed.load(Ordering::Relaxed) {
            // The common case: a wake on the owner thread.
            fire_wake(sh, id, true);
            let o: *const OwnerOnly = o;
            // SAFETY: `r` goes into the executor's own run queue or wake
            // list (in `Shared`), which only this thread empties, and
            // neither `enqueue` nor `notify` runs code that could empty
            // them; so `r`'s task reference keeps the task, whose metadata
            // keeps `Shared` and its `OwnerOnly`, alive until we return.
            let o = unsafe { &*o };
            o.enqueue(r);
            o.notify();
            return;
        }
    }
    // Another thread, an abort or a closed executor: these may run or drop
    // the task, or let the owner do so before we are done, and the task's
    // reference to the executor may be the last one: hold our own.
    let exec = r.metadata().exec.clone();
    let sh = exec
        .downcast_ref::<Shared>()
        .unwrap_or_else(|| unreachable!("a task's executor is a wake::Shared"));
    schedule(sh, r);
}

/// Fires TaskWake for task `id` woken on this thread (`on_owner`: the
/// executor's own thread), when anything listens.
#[inline(always)]
fn fire_wake(shared: &Shared, id: u64, on_owner: bool) {
    if probes::task_wake::enabled() {
        fire_wake_now(shared, id, on_owner);
    }
}

/// `fire_wake`'s firing half, out of line.
#[inline(never)]
fn fire_wake_now(shared: &Shared, id: u64, on_owner: bool) {
    {
        let args = probes::task_wake::Args {
            woken_task_id: id,
            waker_task_id: CURRENT_TASK.get(),
            worker: if on_owner {
                shared.worker
            } else {
                runtrace_format::NO_WORKER
            },
        };
        match SPAWN_WAKE_AT.replace(0) {
            0 => probes::task_wake::fire(args),
            t => probes::task_wake::fire_at(t, args),
        }
    }
}

/// The general schedule path (`schedule_task` takes a shortcut for the
/// common case): `shared` must stay alive for the whole call, whatever
/// happens to `r`.
fn schedule(shared: &Shared, r: Runnable<Meta>) {
    let owner = shared.owner();
    let id = r.metadata().id;
    if owner.is_some() && ABORTING.get() == id {
        // `abort()` on a parked task: run it now, which drops its future
        // (the task is closed), instead of waiting for the executor. Not on
        // another thread: a `!Send` future must be dropped on its own
        // (async-task aborts the process otherwise); it goes through the
        // injection queue and the owner drops it at its next turn.
        r.run();
        return;
    }
    if shared.closed.load(Ordering::Relaxed) {
        if owner.is_some() || !r.metadata().local {
            drop(r); // drops the future
        } else {
            // As above: the owner drops it (`collect_woken`).
            shared.inject.push(r);
            shared.inject.wake_host();
        }
        return;
    }
    fire_wake(shared, id, owner.is_some());
    match owner {
        Some(o) => {
            o.enqueue(r);
            o.notify();
        }
        None => {
            shared.inject.push(r);
            shared.inject.wake_host();
        }
    }
}

/// A "woken" flag any thread sets and the owner takes (the main future's).
///
/// # Protocol
/// 1. A waker sets the flag, then wakes the host (`Shared::notify`): on
///    another thread through `Inject::wake_host`, whose wake happens-before
///    the host's next poll (inject rule 5).
/// 2. The owner takes the flag at every step of its run loop, and checks
///    it once more before it parks.
/// 3. `take` loads first and swaps only when it saw the flag set, so the
///    run loop's check costs no locked instruction; the swap (not a load
///    and a store) keeps a wake that lands between the two: it is either
///    taken now or left set.
///
/// Every ordering is Relaxed: the host wake of rule 1 carries the
/// happens-before. The loom models in `wake/loom_tests.rs` check that the
/// owner never parks with the flag set and no wake to come; they fail when
/// the waker does not wake the host (rule 1). They do not tell rule 3's
/// swap from a load and a store (the host wake hides the lost set from
/// their owner loop), so that part rests on the argument above.
pub(crate) struct WakeFlag(AtomicBool);

impl WakeFlag {
    pub(crate) fn new(set: bool) -> WakeFlag {
        WakeFlag(AtomicBool::new(set))
    }

    /// Any thread: sets the flag (rule 1; wake the host after it).
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Owner: whether the flag was set, clearing it (rule 3).
    #[inline]
    pub(crate) fn take(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }

    /// Owner: whether the flag is set (the check before parking, rule 2).
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The main future's waker: flags it and wakes the host if needed.
pub(crate) struct MainWake {
    pub(crate) woken: WakeFlag,
    shared: Arc<Shared>,
}

impl MainWake {
    /// Woken to start with, so the first turn polls the main future.
    pub(crate) fn new(shared: Arc<Shared>) -> MainWake {
        MainWake {
            woken: WakeFlag::new(true),
            shared,
        }
    }
}

impl Wake for MainWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.set();
        self.shared.notify();
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
