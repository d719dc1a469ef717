//! Scheduling behaviour: FIFO and LAS order inside a queue, EEVDF shares
//! between queues, no starvation, and executors side by side.
//!
//! Shares are measured as attained service (time spent inside polls,
//! measured by the tasks themselves), never as wall-clock time, so a noisy
//! machine only makes the tests slower, not flaky.

// Loom builds (`--cfg loom`) only run the `loom_` models in `src/`.
#![cfg(not(loom))]

mod common;

use common::{spin_for, within, yield_now, Log};
use runtrace_executor::{Executor, QueueConfig, Shutdown, LAS_AGING};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn one_queue(cfg: QueueConfig) -> Executor {
    Executor::builder().queue("q", cfg).build().unwrap()
}

/// 1. Tasks run in spawn order, and a task that wakes itself goes to the
///    back of the queue, behind everything already runnable.
#[test]
fn fifo_runs_in_spawn_order_and_requeues_at_the_back() {
    let ex = one_queue(QueueConfig::fifo());
    let log: Log<(char, u32)> = Log::default();
    ex.block_on(async {
        let hs: Vec<_> = ['a', 'b', 'c', 'd']
            .into_iter()
            .map(|name| {
                let log = log.clone();
                ex.spawn(async move {
                    for i in 0..3 {
                        log.borrow_mut().push((name, i));
                        yield_now().await;
                    }
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let want: Vec<_> = (0..3)
        .flat_map(|i| ['a', 'b', 'c', 'd'].map(|n| (n, i)))
        .collect();
    assert_eq!(*log.borrow(), want);
}

/// 1. "Runnable FIFO": order is the order tasks became runnable, not spawn
///    order. Three parked tasks woken in the order z, x, y run in that order.
#[test]
fn fifo_runs_woken_tasks_in_wake_order() {
    let ex = one_queue(QueueConfig::fifo());
    let log: Log<char> = Log::default();
    ex.block_on(async {
        let mut senders = Vec::new();
        let mut hs = Vec::new();
        for name in ['x', 'y', 'z'] {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            senders.push(tx);
            let log = log.clone();
            hs.push(ex.spawn(async move {
                rx.await.unwrap();
                log.borrow_mut().push(name);
            }));
        }
        // Let all three park on their channels.
        for _ in 0..3 {
            yield_now().await;
        }
        let [x, y, z]: [_; 3] = senders.try_into().unwrap();
        // The waker is a separate task, so all three wakes happen before
        // any of them runs.
        ex.spawn(async move {
            z.send(()).unwrap();
            x.send(()).unwrap();
            y.send(()).unwrap();
        })
        .await
        .unwrap();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(*log.borrow(), ['z', 'x', 'y']);
}

/// The order in which one long task `L` and three fresh tasks run: `L`
/// spins 2 ms per poll and yields; after its third poll the main future
/// spawns `F0..F2` while `L` is already queued again.
fn fresh_vs_long(cfg: QueueConfig) -> Vec<String> {
    let ex = one_queue(cfg);
    let log: Log<String> = Log::default();
    let third_poll = Rc::new(tokio::sync::Notify::new());
    ex.block_on(async {
        let l = {
            let (log, third_poll) = (log.clone(), third_poll.clone());
            ex.spawn(async move {
                for i in 0..5 {
                    log.borrow_mut().push("L".into());
                    spin_for(Duration::from_millis(2));
                    if i == 2 {
                        third_poll.notify_one();
                    }
                    yield_now().await;
                }
            })
        };
        third_poll.notified().await;
        let fs: Vec<_> = (0..3)
            .map(|k| {
                let log = log.clone();
                ex.spawn(async move { log.borrow_mut().push(format!("F{k}")) })
            })
            .collect();
        for f in fs {
            f.await.unwrap();
        }
        l.await.unwrap();
    });
    Rc::try_unwrap(log).unwrap().into_inner()
}

/// 2. LAS: fresh tasks (no attained service) run before a task that has
///    already used milliseconds, although it was runnable first (except on
///    an aging pick, every `LAS_AGING`th); FIFO (the contrast) runs the long
///    task first.
#[test]
fn las_runs_fresh_tasks_before_long_ones() {
    // Picks 1-3 are L's; from pick 4 the fresh tasks go first unless the
    // pick is an aging one.
    let mut want: Vec<String> = vec!["L".into(); 3];
    let (mut fresh, mut long_left) = (0, 2);
    for pick in 4u64.. {
        if fresh < 3 && !pick.is_multiple_of(LAS_AGING) {
            want.push(format!("F{fresh}"));
            fresh += 1;
        } else if long_left > 0 {
            want.push("L".into());
            long_left -= 1;
        } else if fresh == 3 {
            break;
        }
    }
    assert_eq!(want.len(), 8);
    assert_eq!(fresh_vs_long(QueueConfig::las()), want);
    assert_eq!(
        fresh_vs_long(QueueConfig::fifo()),
        ["L", "L", "L", "L", "F0", "F1", "F2", "L"]
    );
}

/// 2. LAS aging: a long task keeps getting one pick in `LAS_AGING` while
///    fresh tasks keep arriving (four chains of tasks that each spawn their
///    successor), and no more than that (fresh tasks keep their priority).
#[test]
fn las_aging_gives_a_long_task_its_picks() {
    const LONG_POLLS: u64 = 60;
    let ex = one_queue(QueueConfig::las());
    let long_polls = Rc::new(Cell::new(0u64));
    let fresh_polls = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));

    fn fresh(ex: Executor, polls: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) {
        let ex2 = ex.clone();
        drop(ex.spawn(async move {
            polls.set(polls.get() + 1);
            if !stop.get() {
                fresh(ex2, polls, stop);
            }
        }));
    }

    ex.block_on(async {
        let long = {
            let (n, stop) = (long_polls.clone(), stop.clone());
            ex.spawn(async move {
                while n.get() < LONG_POLLS {
                    n.set(n.get() + 1);
                    spin_for(Duration::from_micros(100));
                    yield_now().await;
                }
                stop.set(true);
            })
        };
        for _ in 0..4 {
            fresh(ex.clone(), fresh_polls.clone(), stop.clone());
        }
        within("long LAS task", 60, long).await.unwrap();
        ex.shutdown_drain().await;
    });
    let (long, total) = (long_polls.get(), long_polls.get() + fresh_polls.get());
    assert!(
        fresh_polls.get() > 5 * LONG_POLLS,
        "fresh tasks kept arriving"
    );
    assert!(
        long + 1 >= total / LAS_AGING,
        "long task starved: {long} of {total} picks (want >= 1/{LAS_AGING})"
    );
    assert!(
        long <= total / LAS_AGING + 2,
        "long task got {long} of {total} picks: LAS did not favour fresh tasks"
    );
    assert_eq!(ex.live_tasks(), 0);
}

/// Two always-busy queues with shares `wa:wb` (two tasks each, 100 us
/// polls); returns queue a's fraction of the attained service once the two
/// have used `total` between them.
fn busy_share(wa: u32, wb: u32, total: Duration) -> f64 {
    let ex = Executor::builder()
        .queue("a", QueueConfig::fifo().share(wa))
        .queue("b", QueueConfig::las().share(wb))
        .build()
        .unwrap();
    let service = Rc::new([Cell::new(Duration::ZERO), Cell::new(Duration::ZERO)]);
    ex.block_on(async {
        for (qi, q) in ["a", "b"].into_iter().enumerate() {
            for _ in 0..2 {
                let service = service.clone();
                drop(ex.spawn_on(q, async move {
                    loop {
                        let s = &service[qi];
                        s.set(s.get() + spin_for(Duration::from_micros(100)));
                        yield_now().await;
                    }
                }));
            }
        }
        within("busy queues", 60, async {
            while service[0].get() + service[1].get() < total {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        ex.shutdown(Shutdown::Cancel);
    });
    let (a, b) = (service[0].get(), service[1].get());
    a.as_secs_f64() / (a + b).as_secs_f64()
}

/// 3. Shares 3:1 give 75/25 of the attained service (+-10 points), whichever
///    queue is first.
#[test]
fn weights_3_to_1_split_attained_service() {
    // 600 ms of service each (the issue asks for "a few hundred ms"): a
    // single preemption inside one poll (charged to that poll) on a loaded
    // machine must last 60 ms to leave the tolerance.
    let total = Duration::from_millis(600);
    let a = busy_share(3, 1, total);
    assert!((0.65..=0.85).contains(&a), "share 3 of 4 got {a:.3}");
    let a = busy_share(1, 3, total);
    assert!((0.15..=0.35).contains(&a), "share 1 of 4 got {a:.3}");
}

/// 4. No starvation: a share-1 LAS queue next to a busy share-99 queue
///    still progresses, and so does a long task inside it while fresh tasks
///    keep arriving there.
#[test]
fn low_share_queue_and_long_las_task_progress() {
    const LONG_POLLS: u64 = 20;
    let ex = Executor::builder()
        .queue("hi", QueueConfig::fifo().share(99))
        .queue("lo", QueueConfig::las().share(1))
        .build()
        .unwrap();
    let hi = Rc::new(Cell::new(Duration::ZERO));
    let lo = Rc::new(Cell::new(Duration::ZERO));
    let long_polls = Rc::new(Cell::new(0u64));
    let fresh_polls = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));

    fn fresh(ex: Executor, polls: Rc<Cell<u64>>, stop: Rc<Cell<bool>>) {
        let ex2 = ex.clone();
        drop(
            ex.spawn_on("lo", async move {
                polls.set(polls.get() + 1);
                if !stop.get() {
                    fresh(ex2, polls, stop);
                }
            })
            .unwrap(),
        );
    }

    ex.block_on(async {
        for _ in 0..2 {
            let (hi, stop) = (hi.clone(), stop.clone());
            drop(ex.spawn_on("hi", async move {
                while !stop.get() {
                    hi.set(hi.get() + spin_for(Duration::from_micros(100)));
                    yield_now().await;
                }
            }));
        }
        let long = {
            let (n, lo, stop) = (long_polls.clone(), lo.clone(), stop.clone());
            ex.spawn_on("lo", async move {
                while n.get() < LONG_POLLS {
                    n.set(n.get() + 1);
                    lo.set(lo.get() + spin_for(Duration::from_micros(100)));
                    yield_now().await;
                }
                stop.set(true);
            })
            .unwrap()
        };
        for _ in 0..4 {
            fresh(ex.clone(), fresh_polls.clone(), stop.clone());
        }
        within("long task on the share-1 queue", 60, long)
            .await
            .unwrap();
        within("drain", 60, ex.shutdown_drain()).await;
    });
    assert_eq!(long_polls.get(), LONG_POLLS);
    assert!(
        fresh_polls.get() >= LONG_POLLS,
        "fresh tasks on lo progressed"
    );
    // The weights still hold: lo (long task's polls dominate its service)
    // got far less than hi.
    let (hi, lo) = (hi.get(), lo.get());
    assert!(
        lo.as_secs_f64() < 0.1 * (hi + lo).as_secs_f64(),
        "share-1 queue got {lo:?} next to {hi:?}"
    );
    assert_eq!(ex.live_tasks(), 0);
}

/// 4b. `low_share_turn_time`: a task from a lower-share queue never starts
///     late in a turn; the executor yields to the tokio driver first, so a
///     higher-share queue's due timer or I/O wake is delivered before a
///     poll that cannot be preempted. With 20 polls of at least 300 us on
///     the share-1 queue (the share-8 queue idle), every poll after the
///     first starts a new turn: tokio's scheduler gets in between each
///     time (counted by a tokio task). Polls only get longer on a loaded
///     machine, so this does not depend on timing.
#[test]
fn low_share_poll_late_in_a_turn_yields_to_the_driver_first() {
    const POLLS: u64 = 20;
    let ex = Executor::builder()
        .queue("hi", QueueConfig::fifo().share(8))
        .queue("lo", QueueConfig::fifo().share(1))
        .low_share_turn_time(Duration::from_micros(100))
        .max_turn_time(Duration::from_secs(1))
        .max_polls_per_turn(1_000)
        .build()
        .unwrap();
    let turns = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    ex.block_on(async {
        let counter = {
            let (turns, stop) = (turns.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    turns.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        // Let the counter start, then measure from here.
        tokio::task::yield_now().await;
        let before = turns.load(Ordering::Relaxed);
        let lo = ex
            .spawn_on("lo", async {
                for _ in 0..POLLS {
                    spin_for(Duration::from_micros(300));
                    yield_now().await;
                }
            })
            .unwrap();
        within("share-1 task", 60, lo).await.unwrap();
        let yields = turns.load(Ordering::Relaxed) - before;
        stop.store(true, Ordering::Relaxed);
        counter.await.unwrap();
        assert!(
            yields >= POLLS - 1,
            "{POLLS} share-1 polls of 300 us ran in turns the driver saw only {yields} times"
        );
    });
}

/// 12. Thread-per-core: executors on two threads run independently. A task
///     on executor A busy-waits until executor B has finished its whole
///     workload (timers, yields, a channel from A), which only works if B
///     does not need A's thread.
#[test]
fn executors_on_separate_threads_run_independently() {
    let b_done = Arc::new(AtomicBool::new(false));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let workers = Arc::new(std::sync::Mutex::new(Vec::new()));

    let a = {
        let (b_done, workers) = (b_done.clone(), workers.clone());
        std::thread::spawn(move || {
            let ex = Executor::builder()
                .queue("q", QueueConfig::fifo())
                .build()
                .unwrap();
            workers.lock().unwrap().push(ex.worker());
            ex.block_on(async {
                for i in 0..10 {
                    tx.send(i).unwrap();
                }
                drop(tx);
                ex.spawn(async move {
                    let t = std::time::Instant::now();
                    while !b_done.load(Ordering::Acquire) {
                        assert!(t.elapsed() < Duration::from_secs(60), "B made no progress");
                        std::thread::yield_now();
                    }
                })
                .await
                .unwrap();
            });
            ex.live_tasks()
        })
    };
    let b = {
        let (b_done, workers) = (b_done.clone(), workers.clone());
        std::thread::spawn(move || {
            let ex = Executor::builder()
                .queue("q", QueueConfig::las())
                .queue("r", QueueConfig::fifo().share(2))
                .build()
                .unwrap();
            workers.lock().unwrap().push(ex.worker());
            let sum = Rc::new(RefCell::new(0u32));
            ex.block_on(async {
                let mut rx = rx;
                let consumer = {
                    let sum = sum.clone();
                    ex.spawn_on("r", async move {
                        while let Some(v) = rx.recv().await {
                            *sum.borrow_mut() += v;
                        }
                    })
                    .unwrap()
                };
                let hs: Vec<_> = (0..50u64)
                    .map(|i| {
                        ex.spawn(async move {
                            tokio::time::sleep(Duration::from_millis(1 + i % 3)).await;
                            yield_now().await;
                            i
                        })
                    })
                    .collect();
                let mut total = 0;
                for h in hs {
                    total += h.await.unwrap();
                }
                consumer.await.unwrap();
                assert_eq!(total, (0..50).sum::<u64>());
            });
            b_done.store(true, Ordering::Release);
            assert_eq!(*sum.borrow(), (0..10).sum::<u32>());
            ex.live_tasks()
        })
    };
    assert_eq!(b.join().unwrap(), 0);
    assert_eq!(a.join().unwrap(), 0);
    let w = workers.lock().unwrap();
    assert_ne!(w[0], w[1], "each executor has its own worker index");
}
