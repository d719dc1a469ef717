//! Helpers shared by the executor's integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// Yields to the executor: wakes itself at once, so the task goes back on
/// its queue at the next poll boundary.
///
/// Not `tokio::task::yield_now`: inside a tokio runtime that one defers the
/// wake until the tokio task hosting the executor yields, i.e. to the end of
/// the executor's turn, so each yielding task runs once per turn whatever
/// the queue weights say.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Busy-waits for about `d` and returns the time actually spent (the
/// attained service of this piece of a poll).
pub fn spin_for(d: Duration) -> Duration {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
    t.elapsed()
}

/// Sets its flag when dropped: put one in a task's future to see when the
/// executor drops that future.
pub struct DropFlag(pub Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// A flag and a guard that sets it on drop.
pub fn drop_flag() -> (Rc<Cell<bool>>, DropFlag) {
    let f = Rc::new(Cell::new(false));
    (f.clone(), DropFlag(f))
}

/// What [`watched`] reports about a task's future.
pub struct Watch {
    /// Set when the future is first polled.
    pub started: Rc<Cell<bool>>,
    /// Set when the future is dropped (it completed or was cancelled).
    pub dropped: Rc<Cell<bool>>,
}

/// Wraps `fut` so that the returned [`Watch`] shows when the executor
/// first polled it and when it dropped it.
pub fn watched<F: Future>(fut: F) -> (Watch, impl Future<Output = F::Output>) {
    let (dropped, guard) = drop_flag();
    let started = Rc::new(Cell::new(false));
    let s = started.clone();
    let wrapped = async move {
        let _guard = guard;
        s.set(true);
        fut.await
    };
    (Watch { started, dropped }, wrapped)
}

/// An ordered log that tasks append to.
pub type Log<T> = Rc<RefCell<Vec<T>>>;

/// Polls `f` to completion on the current (non-executor) thread, parking
/// between wakes.
pub fn block_on_thread<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Fails the test instead of hanging when `f` does not finish in time.
pub async fn within<F: Future>(what: &str, secs: u64, f: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(secs), f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not finish within {secs} s"),
    }
}
