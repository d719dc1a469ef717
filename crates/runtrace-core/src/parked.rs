//! Which threads are parked (idle by choice), for the kernel-side filter
//! of CPU profiles' off-CPU stacks: a runtime's park hook marks its thread
//! parked, its unpark hook clears the mark, and the BPF program on the
//! scheduler's switch tracepoint reads the mark of the thread switching
//! out and skips the switch when it is set. A parked worker's switch-outs are the
//! runtime waiting for work, not the application blocking, and they are
//! most of a server's switches: recording a stack at each would cost more
//! than the rest of the profile (docs/cpu-profile.md, "Cost").
//!
//! The table is an array of [`SLOTS`] words indexed by thread id modulo
//! its length; each slot holds the id of the parked thread that owns it,
//! or 0. Two threads whose ids collide may clear each other's mark: their
//! switches are then recorded (the safe side: a stack too many, never one
//! too few). The profiler provides the table ([`use_table`]): memory the
//! kernel maps for the BPF program too, so that the program reads a mark
//! with a plain load. Marking costs one relaxed load while no profile
//! uses a table, a thread-local read and one relaxed store while one does.
//!
//! ```
//! runtrace_core::parked::set(true); // in a park hook
//! runtrace_core::parked::set(false); // in the unpark hook
//! ```

use std::cell::Cell;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Slots in the table (a power of two).
pub const SLOTS: usize = 4096;

/// The table in use; null while no profile uses one.
static TABLE: AtomicPtr<AtomicU32> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// Marks the calling thread parked (`true`) or running (`false`) in the
/// table in use, if any.
///
/// ```
/// runtrace_core::parked::set(false);
/// ```
#[inline]
pub fn set(parked: bool) {
    // Relaxed: every table ever installed stays valid (`use_table`), so
    // any pointer read here may be written through.
    let table = TABLE.load(Ordering::Relaxed);
    if table.is_null() {
        return;
    }
    let tid = TID.with(|t| {
        if t.get() == 0 {
            t.set(crate::clock::gettid() as u32);
        }
        t.get()
    });
    // SAFETY: a non-null TABLE points to SLOTS words valid for the rest of
    // the process (`use_table`'s contract), and the index is below SLOTS.
    let slot = unsafe { &*table.add(tid as usize % SLOTS) };
    slot.store(if parked { tid } else { 0 }, Ordering::Relaxed);
}

/// Starts marking into `table`, cleared first (null: stops marking; the
/// table that was in use is cleared).
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// let table: &'static [AtomicU32] =
///     Box::leak((0..runtrace_core::parked::SLOTS).map(|_| AtomicU32::new(0)).collect());
/// // SAFETY: a leaked table of SLOTS words lives as long as the process.
/// unsafe { runtrace_core::parked::use_table(table.as_ptr().cast_mut()) };
/// runtrace_core::parked::set(true);
/// unsafe { runtrace_core::parked::use_table(std::ptr::null_mut()) };
/// ```
///
/// # Safety
/// A non-null `table` must point to [`SLOTS`] aligned, writable `u32`
/// words that stay valid for the rest of the process (a park hook may be
/// writing through an older pointer while it is replaced).
pub unsafe fn use_table(table: *mut AtomicU32) {
    let clear = |t: *mut AtomicU32| {
        if !t.is_null() {
            for i in 0..SLOTS {
                // SAFETY: as the contract says, `t` holds SLOTS words.
                unsafe { &*t.add(i) }.store(0, Ordering::Relaxed);
            }
        }
    };
    clear(table);
    let old = TABLE.swap(table, Ordering::Relaxed);
    if old != table {
        clear(old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_only_while_a_table_is_used() {
        let table: &'static [AtomicU32] =
            Box::leak((0..SLOTS).map(|_| AtomicU32::new(0)).collect());
        let tid = crate::clock::gettid() as u32;
        let slot = &table[tid as usize % SLOTS];
        set(true);
        assert_eq!(slot.load(Ordering::Relaxed), 0);
        // SAFETY: a leaked table of SLOTS words.
        unsafe { use_table(table.as_ptr().cast_mut()) };
        set(true);
        assert_eq!(slot.load(Ordering::Relaxed), tid);
        set(false);
        assert_eq!(slot.load(Ordering::Relaxed), 0);
        set(true);
        // SAFETY: null stops marking.
        unsafe { use_table(std::ptr::null_mut()) };
        assert_eq!(slot.load(Ordering::Relaxed), 0, "cleared when stopped");
        set(true);
        assert_eq!(slot.load(Ordering::Relaxed), 0);
    }
}
