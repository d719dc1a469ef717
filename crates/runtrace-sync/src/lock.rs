//! Named locks: parking_lot's `Mutex` and `RwLock` firing `lock_wait` and
//! `lock_hold`.
//!
//! With nobody listening, acquisition is parking_lot's own fast path (one
//! CAS) behind one relaxed load (does a backend want `lock_wait` or
//! `lock_hold`?). While one listens, the clock is read, and a wait is only
//! ever measured after a failed first attempt, so an uncontended
//! acquisition never records a `lock_wait`. Events are fired after the lock
//! is released (the hold stamped just before), so a probe's cost never
//! lengthens the critical section it reports.

use crate::clock;
use runtrace_core::Istr;
use runtrace_probes::builtin::{lock_hold, lock_wait};
use std::fmt;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// Thresholds below which a lock records nothing (the in-process
/// equivalent of `--filter 'wait_ns > 100000'`; they apply to every
/// backend). Both default to zero: every contended wait and every hold is
/// recorded while a backend listens.
///
/// ```
/// use runtrace_sync::{LockOptions, Mutex};
/// use std::time::Duration;
/// let m = Mutex::with_options(
///     "sessions",
///     LockOptions::new()
///         .wait_threshold(Duration::from_micros(100))
///         .hold_threshold(Duration::from_micros(50)),
///     0u64,
/// );
/// *m.lock() += 1;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockOptions {
    wait_min_ns: u64,
    hold_min_ns: u64,
}

impl LockOptions {
    /// Record every contended wait and every hold.
    pub const fn new() -> LockOptions {
        LockOptions {
            wait_min_ns: 0,
            hold_min_ns: 0,
        }
    }

    /// Waits shorter than `d` are not recorded.
    pub fn wait_threshold(mut self, d: Duration) -> LockOptions {
        self.wait_min_ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self
    }

    /// Holds shorter than `d` are not recorded.
    pub fn hold_threshold(mut self, d: Duration) -> LockOptions {
        self.hold_min_ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self
    }
}

/// What a lock knows about itself for its events.
struct Meta {
    name: Istr,
    opts: LockOptions,
}

impl Meta {
    fn new(name: &str, opts: LockOptions) -> Meta {
        Meta {
            name: Istr::new(name),
            opts,
        }
    }

    /// Acquires the lock. With nobody listening, through `acquire` alone:
    /// the wrapped lock's own fast path (a `try_lock` first reads the lock
    /// word before its CAS, which measured 2-5 ns more per lock+unlock).
    /// Otherwise a first attempt through `try_acquire`, and a timed wait
    /// if it fails. Returns the guard and its hold start (see
    /// `uncontended`).
    #[inline(always)]
    fn acquire<G>(
        &self,
        write: bool,
        try_acquire: impl FnOnce() -> Option<G>,
        acquire: impl FnOnce() -> G,
    ) -> (G, u64) {
        if !(lock_wait::enabled() || lock_hold::enabled()) {
            return (acquire(), 0);
        }
        match try_acquire() {
            Some(g) => (g, self.uncontended()),
            None => self.contended(write, acquire),
        }
    }

    /// Hold start of an acquisition that did not wait: a clock reading
    /// when `lock_hold` is wanted, else 0 (nothing to do at release).
    #[inline(always)]
    fn uncontended(&self) -> u64 {
        if lock_hold::enabled() {
            clock::now().max(1)
        } else {
            0
        }
    }

    /// Acquires through `acquire` after a failed first attempt, recording
    /// the wait. Returns the guard and its hold start (see `uncontended`).
    #[cold]
    #[inline(never)]
    fn contended<G>(&self, write: bool, acquire: impl FnOnce() -> G) -> (G, u64) {
        let waits = lock_wait::enabled();
        let holds = lock_hold::enabled();
        if !waits && !holds {
            return (acquire(), 0);
        }
        let t0 = clock::now();
        let g = acquire();
        let t1 = clock::now();
        if waits {
            let wait_ns = clock::ns_between(t0, t1);
            if wait_ns >= self.opts.wait_min_ns {
                lock_wait::fire_at(
                    t1,
                    lock_wait::Args {
                        lock_name: self.name,
                        wait_ns,
                        write,
                    },
                );
            }
        }
        (g, if holds { t1.max(1) } else { 0 })
    }

    /// After the release of a hold from `since` (non-zero) to `t`.
    #[cold]
    #[inline(never)]
    fn released(&self, since: u64, t: u64, write: bool) {
        let hold_ns = clock::ns_between(since, t);
        if hold_ns >= self.opts.hold_min_ns && lock_hold::enabled() {
            lock_hold::fire_at(
                t,
                lock_hold::Args {
                    lock_name: self.name,
                    hold_ns,
                    write,
                },
            );
        }
    }

    fn name(&self) -> &str {
        self.name.c_str().to_str().unwrap_or("")
    }
}

/// A guard wrapping parking_lot's, recording the hold when it is dropped.
macro_rules! guard {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $write:expr) => {
        $(#[$doc])*
        #[must_use = "if unused the lock is released at once"]
        pub struct $name<'a, T: ?Sized> {
            inner: ManuallyDrop<parking_lot::$inner<'a, T>>,
            meta: &'a Meta,
            /// Hold start in trace ticks, 0 when nobody listens.
            since: u64,
        }

        impl<T: ?Sized> Deref for $name<'_, T> {
            type Target = T;
            #[inline]
            fn deref(&self) -> &T {
                &self.inner
            }
        }

        impl<T: ?Sized> Drop for $name<'_, T> {
            #[inline]
            fn drop(&mut self) {
                // The hold ends now: stamped before the release, so a
                // thread preempted right after unlocking cannot date its
                // hold after a waiter already got the lock.
                let until = if self.since != 0 { clock::now() } else { 0 };
                // SAFETY: `inner` is dropped exactly once, here, and never
                // touched again; it is ManuallyDrop only so that the lock
                // is released before the hold event is fired.
                unsafe { ManuallyDrop::drop(&mut self.inner) };
                if self.since != 0 {
                    self.meta.released(self.since, until, $write);
                }
            }
        }

        impl<T: ?Sized + fmt::Debug> fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }
    };
}

guard!(
    /// Exclusive access to a [`Mutex`]'s value; dropping it unlocks (and
    /// records `lock_hold`).
    MutexGuard, MutexGuard, true
);
guard!(
    /// Shared access to an [`RwLock`]'s value; dropping it releases (and
    /// records `lock_hold` with `write: false`).
    RwLockReadGuard, RwLockReadGuard, false
);
guard!(
    /// Exclusive access to an [`RwLock`]'s value; dropping it releases (and
    /// records `lock_hold` with `write: true`).
    RwLockWriteGuard, RwLockWriteGuard, true
);

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

/// A named mutex (parking_lot's) recording `lock_wait` when an acquisition
/// had to wait and `lock_hold` when it is released.
///
/// ```
/// use runtrace_sync::Mutex;
/// let log = Mutex::new("log", String::new());
/// log.lock().push_str("hello");
/// assert_eq!(log.name(), "log");
/// assert_eq!(log.into_inner(), "hello");
/// ```
pub struct Mutex<T: ?Sized> {
    meta: Meta,
    inner: parking_lot::Mutex<T>,
}

impl<T> Mutex<T> {
    /// A mutex named `name` (the `lock_name` of its events; interned once,
    /// here) recording every contended wait and every hold.
    pub fn new(name: &str, value: T) -> Mutex<T> {
        Mutex::with_options(name, LockOptions::new(), value)
    }

    /// A mutex with recording thresholds.
    pub fn with_options(name: &str, options: LockOptions, value: T) -> Mutex<T> {
        Mutex {
            meta: Meta::new(name, options),
            inner: parking_lot::Mutex::new(value),
        }
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks, blocking until the lock is free.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let (inner, since) =
            self.meta
                .acquire(true, || self.inner.try_lock(), || self.inner.lock());
        MutexGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since,
        }
    }

    /// Locks if the lock is free now (never records a wait).
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let inner = self.inner.try_lock()?;
        Some(MutexGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since: self.meta.uncontended(),
        })
    }

    /// The value, through `&mut self` (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// Whether some thread holds the lock now.
    pub fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.meta.name()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex")
            .field("name", &self.name())
            .field("inner", &&self.inner)
            .finish()
    }
}

/// A named reader-writer lock (parking_lot's) recording `lock_wait` and
/// `lock_hold` with `write` telling reads from writes.
///
/// ```
/// use runtrace_sync::RwLock;
/// let config = RwLock::new("config", 1u32);
/// assert_eq!(*config.read(), 1);
/// *config.write() = 2;
/// assert_eq!(*config.read(), 2);
/// ```
pub struct RwLock<T: ?Sized> {
    meta: Meta,
    inner: parking_lot::RwLock<T>,
}

impl<T> RwLock<T> {
    /// A lock named `name` recording every contended wait and every hold.
    pub fn new(name: &str, value: T) -> RwLock<T> {
        RwLock::with_options(name, LockOptions::new(), value)
    }

    /// A lock with recording thresholds.
    pub fn with_options(name: &str, options: LockOptions, value: T) -> RwLock<T> {
        RwLock {
            meta: Meta::new(name, options),
            inner: parking_lot::RwLock::new(value),
        }
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access, blocking while a writer holds the lock.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        let (inner, since) =
            self.meta
                .acquire(false, || self.inner.try_read(), || self.inner.read());
        RwLockReadGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since,
        }
    }

    /// Exclusive access, blocking while anyone holds the lock.
    #[inline]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        let (inner, since) =
            self.meta
                .acquire(true, || self.inner.try_write(), || self.inner.write());
        RwLockWriteGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since,
        }
    }

    /// Shared access if no writer holds the lock now.
    #[inline]
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let inner = self.inner.try_read()?;
        Some(RwLockReadGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since: self.meta.uncontended(),
        })
    }

    /// Exclusive access if nobody holds the lock now.
    #[inline]
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let inner = self.inner.try_write()?;
        Some(RwLockWriteGuard {
            inner: ManuallyDrop::new(inner),
            meta: &self.meta,
            since: self.meta.uncontended(),
        })
    }

    /// The value, through `&mut self`.
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.meta.name()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name())
            .field("inner", &&self.inner)
            .finish()
    }
}
