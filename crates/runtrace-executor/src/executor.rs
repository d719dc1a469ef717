//! The executor's handles: [`Executor`] (owner thread: spawn, run,
//! shut down) and [`Spawner`] (any thread: spawn `Send` futures).

use crate::error::SpawnError;
use crate::run::Local;
use crate::sync::Cell;
use crate::sync::Ordering;
use crate::task::{JoinHandle, Meta, TaskFuture, TaskOut, CURRENT_TASK};
use crate::wake::SPAWN_WAKE_AT;
use crate::wake::{schedule_task, MainWake, Shared};
use async_task::Runnable;
use runtrace_core::clock::TraceClock;
use runtrace_core::Loc;
use runtrace_probes::builtin as probes;
use std::future::Future;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// How [`Executor::shutdown`] ends the executor.
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig, Shutdown};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let h = ex.spawn(std::future::pending::<()>());
/// ex.shutdown(Shutdown::Cancel);
/// assert!(ex.block_on(h).unwrap_err().is_cancelled());
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Drop every task now (queued and parked tasks' futures are dropped
    /// when their wakers next fire or are dropped).
    Cancel,
}

/// A handle to an executor (cheap to clone; tasks keep one to spawn more).
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let inner = ex.clone();
/// let n = ex.block_on(async move { inner.spawn(async { 2 }).await.unwrap() * 21 });
/// assert_eq!(n, 42);
/// # Ok::<(), runtrace_executor::BuildError>(())
/// ```
#[derive(Clone)]
pub struct Executor {
    pub(crate) local: Rc<Local>,
}

/// A `Send + Clone` handle for spawning `Send` futures onto an executor from
/// other threads.
///
/// ```
/// use runtrace_executor::{Executor, QueueConfig};
/// let ex = Executor::builder().queue("main", QueueConfig::fifo()).build()?;
/// let spawner = ex.spawner();
/// let h = std::thread::spawn(move || spawner.spawn_on("main", async { 7 }))
///     .join()
///     .unwrap()?;
/// assert_eq!(ex.block_on(h).unwrap(), 7);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Spawner {
    shared: Arc<Shared>,
}

fn queue_index(shared: &Shared, name: &str) -> Result<usize, SpawnError> {
    shared
        .names
        .iter()
        .position(|n| n == name)
        .ok_or_else(|| SpawnError::UnknownQueue(name.to_owned()))
}

/// The spawn location, as the caller's `Location` (interned into a
/// [`Loc`] only when the spawn probe fires).
type SpawnLoc = &'static Location<'static>;

thread_local! {
    /// The last spawn location interned on this thread, by address: a
    /// loop spawning from one place interns it once (`Loc::from_location`
    /// hashes the address into a map, ~200 instructions).
    static LAST_LOC: Cell<(usize, Loc)> = const { Cell::new((0, Loc::UNKNOWN)) };
}

/// `loc` interned, through the one-entry cache `LAST_LOC`.
fn intern(loc: SpawnLoc) -> Loc {
    let key = loc as *const Location<'static> as usize;
    let (k, l) = LAST_LOC.get();
    if k == key {
        return l;
    }
    let l = Loc::from_location(loc);
    LAST_LOC.set((key, l));
    l
}

fn spawned<T>(
    shared: &Arc<Shared>,
    loc: SpawnLoc,
    r: Runnable<Meta>,
    t: async_task::Task<TaskOut<T>, Meta>,
) -> JoinHandle<T> {
    let (id, qi) = (r.metadata().id, r.metadata().queue);
    if probes::task_spawn::enabled() {
        // One clock read for the spawn and for the first wake, the
        // schedule just below (they are a function call apart).
        let t = TraceClock::get().now();
        probes::task_spawn::fire_at(
            t,
            probes::task_spawn::Args {
                task_id: id,
                parent_task_id: CURRENT_TASK.get(),
                spawn_loc: intern(loc),
                queue: shared.istrs[qi],
            },
        );
        SPAWN_WAKE_AT.set(t);
    }
    r.schedule();
    SPAWN_WAKE_AT.set(0);
    JoinHandle::new(t, id)
}

impl Executor {
    /// Spawns `fut` on the first queue. After `shutdown`, the task is
    /// dropped at once and its handle gives
    /// [`JoinError::Cancelled`](crate::JoinError::Cancelled).
    #[track_caller]
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.spawn_at(0, Location::caller(), fut)
    }

    /// Spawns `fut` on the queue called `queue`.
    #[track_caller]
    pub fn spawn_on<F>(&self, queue: &str, fut: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let qi = queue_index(&self.local.shared, queue)?;
        Ok(self.spawn_at(qi, Location::caller(), fut))
    }

    fn spawn_at<F>(&self, qi: usize, loc: SpawnLoc, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let shared = &self.local.shared;
        let live = shared.live;
        let (r, t) = live.register(true, |slot| {
            async_task::Builder::new()
                .metadata(Meta::new(qi, true, shared.clone()))
                .spawn_local(
                    move |m: &Meta| TaskFuture::new(fut, m, live, slot),
                    schedule_task,
                )
        });
        spawned(shared, loc, r, t)
    }

    /// A handle other threads can spawn `Send` futures with.
    pub fn spawner(&self) -> Spawner {
        Spawner {
            shared: self.local.shared.clone(),
        }
    }

    /// Tasks spawned and not yet freed (running, queued or parked).
    pub fn live_tasks(&self) -> usize {
        self.local.shared.live.count()
    }

    /// This executor's worker index (as in traces).
    pub fn worker(&self) -> u32 {
        self.local.shared.worker
    }

    /// Creates a tokio current-thread runtime (`enable_all`) and runs `fut`
    /// with the executor on it.
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtrace executor: cannot build a tokio runtime: {e}"));
        rt.block_on(self.run_until(fut))
    }

    /// Runs the executor's tasks until `fut` completes, inside an existing
    /// tokio runtime (current-thread runtime or `LocalSet`).
    pub async fn run_until<F: Future>(&self, fut: F) -> F::Output {
        let main = Arc::new(MainWake::new(self.local.shared.clone()));
        let mut fut = std::pin::pin!(fut);
        std::future::poll_fn(|cx| self.local.turn(cx, fut.as_mut(), &main)).await
    }

    /// Ends the executor: see [`Shutdown`]. Spawning afterwards fails.
    pub fn shutdown(&self, mode: Shutdown) {
        match mode {
            Shutdown::Cancel => {
                self.local.shared.closed.store(true, Ordering::Relaxed);
                // Taken out before they are dropped: a drop may wake a task
                // (the closed executor's schedule function drops it).
                let sh = &self.local.shared;
                if let Some(o) = sh.owner() {
                    let queued = o.sched.borrow_mut().clear();
                    drop(queued);
                    let woken = std::mem::take(&mut *o.woken.borrow_mut());
                    drop(woken);
                }
                let injected = sh.inject.take_all();
                drop(injected);
                // Parked tasks: wake each one; the closed executor's schedule
                // function drops it (its future with it).
                for w in self.local.shared.live.take_all() {
                    w.wake();
                }
            }
        }
    }

    /// Runs until every task has finished (call it inside `block_on` or
    /// `run_until`), then closes the executor.
    pub async fn shutdown_drain(&self) {
        while self.live_tasks() > 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.local.shared.closed.store(true, Ordering::Relaxed);
    }
}

impl Spawner {
    /// Spawns a `Send` future on the queue called `queue`, from any thread.
    #[track_caller]
    pub fn spawn_on<F>(&self, queue: &str, fut: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.shared.closed.load(Ordering::Relaxed) {
            return Err(SpawnError::ShutDown);
        }
        let qi = queue_index(&self.shared, queue)?;
        let loc = Location::caller();
        let live = self.shared.live;
        let (r, t) = live.register(false, |slot| {
            async_task::Builder::new()
                .metadata(Meta::new(qi, false, self.shared.clone()))
                .spawn(
                    move |m: &Meta| TaskFuture::new(fut, m, live, slot),
                    schedule_task,
                )
        });
        Ok(spawned(&self.shared, loc, r, t))
    }
}
