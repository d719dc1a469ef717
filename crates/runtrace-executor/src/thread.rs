//! This thread's number, for the ownership checks (rule 1 in the crate
//! docs): comparing two numbers is cheaper than comparing `ThreadId`s.

use crate::sync::{Cell, Ordering, StaticAtomicU64};

static NEXT_THREAD_NO: StaticAtomicU64 = StaticAtomicU64::new(1);

thread_local! {
    /// This thread's number (0: not given one yet).
    static THREAD_NO: Cell<u64> = const { Cell::new(0) };
}

/// This thread's number, unique in the process (`Shared::owner_thread` is
/// the owner's).
#[inline]
pub(crate) fn thread_no() -> u64 {
    let n = THREAD_NO.get();
    if n != 0 {
        return n;
    }
    let n = NEXT_THREAD_NO.fetch_add(1, Ordering::Relaxed);
    THREAD_NO.set(n);
    n
}
