//! Loom model of the main future's wake flag (`WakeFlag`, protocol rules
//! 1-3 in `wake.rs`) together with the host wake it relies on
//! (`Inject::wake_host`). Run with the crate's other models:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=/work/target-extest-loom \
//!     cargo test -p runtrace-executor --release --lib loom_
//! ```
//!
//! The owner does what `Local::turn` does with the flag: register the host
//! waker, take the flag at every step, check it once more before parking,
//! and park until a host wake it has not seen. A lost wake shows up as a
//! park with nothing left to wake it (a failed assertion).

use super::WakeFlag;
use crate::inject::Inject;
use crate::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

/// The tokio waker of the host task: counts wakes; a wake happens-before
/// the poll it causes (Release here, Acquire in `park`), as tokio's does.
struct Host {
    wakes: AtomicUsize,
}

impl Wake for Host {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Release);
    }
}

/// Parks until a host wake not seen yet. Once every waker is done (and
/// its flag write visible: the Acquire load of `done` pairs with each
/// waker's Release), a real owner with nothing unseen would sleep for
/// ever: that is a lost wake exactly when the flag is still set.
fn park(host: &Host, seen: &mut usize, done: &AtomicUsize, wakers: usize, flag: &WakeFlag) {
    loop {
        let all_done = done.load(Ordering::Acquire) == wakers;
        let n = host.wakes.load(Ordering::Acquire);
        if n != *seen {
            *seen = n;
            return;
        }
        if all_done {
            assert!(
                !flag.is_set(),
                "lost wake: the owner parked with the flag set and no wake to come"
            );
            return;
        }
        loom::thread::yield_now();
    }
}

/// `wakers` threads each wake the main future once (`MainWake::wake_by_ref`
/// on another thread: set the flag, wake the host) while the owner runs
/// its loop; the owner must see at least one wake after the last waker is
/// done, and never park while the flag is set.
fn model(wakers: usize, preemptions: usize) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.check(move || {
        let flag = Arc::new(WakeFlag::new(false));
        let inj = Arc::new(Inject::<u32>::new());
        let done = Arc::new(AtomicUsize::new(0));
        let host = std::sync::Arc::new(Host {
            wakes: AtomicUsize::new(0),
        });
        inj.set_host(Waker::from(host.clone()));
        let threads: Vec<_> = (0..wakers)
            .map(|_| {
                let (flag, inj, done) = (flag.clone(), inj.clone(), done.clone());
                loom::thread::spawn(move || {
                    flag.set();
                    inj.wake_host();
                    done.fetch_add(1, Ordering::Release);
                })
            })
            .collect();
        let mut seen = 0;
        let mut polls = 0;
        loop {
            // A step of the run loop.
            if flag.take() {
                polls += 1;
            }
            // The check before parking (rule 2).
            if flag.is_set() {
                continue;
            }
            // Every waker finished (Acquire: pairs with each waker's
            // Release, so its set is visible) and no set left: done.
            if done.load(Ordering::Acquire) == wakers && !flag.is_set() {
                break;
            }
            park(&host, &mut seen, &done, wakers, &flag);
        }
        // Each set was taken by some poll (two may merge into one).
        assert!(
            (1..=wakers).contains(&polls),
            "{polls} polls for {wakers} wakes"
        );
        for t in threads {
            t.join().unwrap();
        }
    });
}

#[test]
fn loom_main_wake_from_another_thread_is_not_lost() {
    model(1, 3);
}

#[test]
fn loom_two_main_wakes_race_with_the_owner() {
    // Two preemptions: three took 80-100 s in release on the 2-core
    // reference machine, for the CI run of every model.
    model(2, 2);
}
