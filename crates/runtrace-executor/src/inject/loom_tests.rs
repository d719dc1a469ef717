//! Loom models of the cross-thread wake path (`Inject`, protocol rules 1-5
//! in `inject.rs`). Run them with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=/work/target-extest-loom \
//!     cargo test -p runtrace-executor --release --lib loom_
//! ```
//!
//! The owner does what `Executor::turn` does: register the host waker, then
//! `is_flagged()` (the `has_woken` gate) and `drain()`; when that finds
//! nothing it "parks" and only goes round again after a wake of the host
//! waker. A lost wake shows up as a failed assertion (the item is in neither
//! drain) or as a park that never ends (loom then reports the spin as
//! exceeding its branch limit).

use super::Inject;
use crate::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

/// Stands in for the tokio waker of the task hosting the executor: counts
/// wakes. Like tokio's (rule 5), a wake happens-before the poll it causes:
/// the Release increment pairs with the Acquire load in `park`.
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

/// The owner parks until a wake it has not seen yet. Parking when every
/// remote thread is done and no unseen wake is left would be for ever: that
/// is the lost wake. (Loads only: loom treats a spinning read-modify-write
/// as progress and never ends the spin.)
fn park(host: &Host, seen: &mut usize, finished: &AtomicUsize, remotes: usize) {
    loop {
        // Acquire: pairs with the Release increment at the end of each
        // remote thread, so once all are seen done, all their wakes are
        // visible to the load below.
        let all_done = finished.load(Ordering::Acquire) == remotes;
        let n = host.wakes.load(Ordering::Acquire);
        if n != *seen {
            *seen = n;
            return;
        }
        assert!(
            !all_done,
            "lost wake: the owner parked with an item injected and no wake to come"
        );
        loom::thread::yield_now();
    }
}

/// One turn's worth of draining (`collect_woken` behind `has_woken`).
fn turn(inj: &Inject<u32>, got: &mut Vec<u32>) {
    if inj.is_flagged() {
        got.extend(inj.drain());
    }
}

/// `remotes` threads each inject one item and wake the host while the
/// owner registers its waker and drains; the owner must end up with every
/// item exactly once, parking only when a wake is still to come.
fn model(remotes: u32) {
    let mut b = loom::model::Builder::new();
    // Bounded like tokio's loom CI: exhaustive up to 3 preemptions.
    b.preemption_bound = Some(3);
    b.check(move || {
        let inj = Arc::new(Inject::<u32>::new());
        let finished = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..remotes)
            .map(|k| {
                let (inj, finished) = (inj.clone(), finished.clone());
                // A wake on another thread: `schedule` pushes, `notify`
                // wakes the host.
                loom::thread::spawn(move || {
                    inj.push(k);
                    inj.wake_host();
                    finished.fetch_add(1, Ordering::Release);
                })
            })
            .collect();
        let host = std::sync::Arc::new(Host {
            wakes: AtomicUsize::new(0),
        });
        inj.set_host(Waker::from(host.clone()));
        let mut got = Vec::new();
        let mut seen = 0;
        turn(&inj, &mut got);
        while got.len() < remotes as usize {
            // Nothing (more) found: park until a wake, then go round again.
            park(&host, &mut seen, &finished, remotes as usize);
            turn(&inj, &mut got);
        }
        got.sort_unstable();
        assert_eq!(
            got,
            (0..remotes).collect::<Vec<_>>(),
            "lost or duplicated item"
        );
        for t in threads {
            t.join().unwrap();
        }
        // Nothing is left behind (rule 3).
        assert!(inj.take_all().is_empty());
    });
}

#[test]
fn loom_remote_inject_wakes_owner() {
    model(1);
}

#[test]
fn loom_two_remotes_inject_while_owner_drains() {
    model(2);
}
