//! The snapshot signal (`snapshot_signal`, `RUNTRACE_SNAPSHOT_SIGNAL`):
//! a handler that only notes that the signal came, and when, for the
//! writer thread to read at its next round.
//!
//! # Rules
//! 1. The handler is async-signal-safe: it reads the trace clock (a TSC
//!    read, or quanta's `clock_gettime`: no lock, no allocation) through a
//!    pointer set before the handler was installed, stores the time
//!    (`Relaxed`), then sets `FIRED` (`Release`).
//! 2. Only the writer thread takes `FIRED` (`swap`, `Acquire`: pairs with
//!    the handler's `Release`, so the time it then loads is the one stored
//!    before, or a later signal's).
//! 3. One recording runs per process, so one handler at a time: it is
//!    installed when the writer starts and the previous disposition is put
//!    back when it ends.

use crate::error::RecordError;
use crate::sync::{Ordering, StaticAtomicBool, StaticAtomicPtr, StaticAtomicU64};
use runtrace_core::clock::TraceClock;

static FIRED: StaticAtomicBool = StaticAtomicBool::new(false);
static FIRED_AT: StaticAtomicU64 = StaticAtomicU64::new(0);
static CLOCK: StaticAtomicPtr<TraceClock> = StaticAtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_signal(_sig: libc::c_int) {
    let c = CLOCK.load(Ordering::Relaxed);
    if !c.is_null() {
        // SAFETY: `CLOCK` only ever holds the `&'static TraceClock` stored
        // by `Installed::new` (rule 1), valid for the whole process.
        let now = unsafe { &*c }.now();
        FIRED_AT.store(now, Ordering::Relaxed);
    }
    // Release: pairs with the Acquire swap in `take` (rule 2).
    FIRED.store(true, Ordering::Release);
}

/// When the signal came since the last call (trace ticks), if it did.
pub(crate) fn take() -> Option<u64> {
    FIRED
        .swap(false, Ordering::Acquire)
        .then(|| FIRED_AT.load(Ordering::Relaxed))
}

/// The handler, installed for one signal until dropped.
pub(crate) struct Installed {
    sig: libc::c_int,
    old: libc::sigaction,
}

impl Installed {
    /// Installs the handler for `sig`.
    pub(crate) fn new(
        sig: libc::c_int,
        clock: &'static TraceClock,
    ) -> Result<Installed, RecordError> {
        CLOCK.store(
            clock as *const TraceClock as *mut TraceClock,
            Ordering::Relaxed,
        );
        FIRED.store(false, Ordering::Relaxed);
        // SAFETY: a zeroed `sigaction` is a valid value (no handler, empty
        // flags); every field that matters is set below.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        act.sa_flags = libc::SA_RESTART;
        // SAFETY: `act.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut act.sa_mask) };
        // SAFETY: as above, filled in by `sigaction`.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live, initialised `sigaction`s; the
        // handler is async-signal-safe (rule 1).
        if unsafe { libc::sigaction(sig, &act, &mut old) } != 0 {
            return Err(RecordError::Io(format!(
                "cannot install the snapshot signal's handler (signal {sig}): {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Installed { sig, old })
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        // SAFETY: `old` is the disposition `sigaction` returned for `sig`.
        unsafe { libc::sigaction(self.sig, &self.old, std::ptr::null_mut()) };
    }
}
