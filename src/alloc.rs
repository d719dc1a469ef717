//! Sampled heap allocations (feature `alloc`): a global allocator wrapper
//! that lets a recording with a memory profile
//! (`Recorder::builder().memory_profile(bytes)` or
//! `RUNTRACE_ALLOC_SAMPLE_BYTES`) sample the allocations with their stacks
//! (docs/memory.md).

use std::alloc::{GlobalAlloc, Layout};

/// A [`GlobalAlloc`] that forwards everything to `A` and, while a
/// recording samples allocations, samples them: on average one per N
/// bytes allocated (a Poisson process over the bytes), each sample with
/// its size, the bytes it stands for and the allocating thread's stack.
/// Without such a recording an allocation costs the wrapped allocator's
/// plus one relaxed atomic load, and so does a free. With the live set on
/// (`memory_live`), the free of a sampled allocation is recorded too.
///
/// Any allocator can be wrapped (`Sampled::new(tikv_jemallocator::Jemalloc)`,
/// `Sampled::new(mimalloc::MiMalloc)`).
///
/// ```
/// #[global_allocator]
/// static A: runtrace::alloc::Sampled<std::alloc::System> =
///     runtrace::alloc::Sampled::new(std::alloc::System);
/// fn main() {
///     let v = vec![0u8; 1 << 20]; // allocated through A
///     assert_eq!(v.len(), 1 << 20);
/// }
/// ```
pub struct Sampled<A> {
    inner: A,
}

impl<A> Sampled<A> {
    /// Wraps `inner`; usable in a `static`.
    pub const fn new(inner: A) -> Self {
        Sampled { inner }
    }
}

// SAFETY: every method forwards to `inner` with the caller's arguments
// unchanged and returns its result unchanged, so `inner`'s guarantees are
// ours; `on_alloc` only reads the size and never touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Sampled<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            runtrace_profile::alloc::on_alloc(p as usize, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            runtrace_profile::alloc::on_alloc(p as usize, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Before the inner free: once freed, the address may be handed
        // out (and sampled) again by another thread.
        runtrace_profile::alloc::on_free(ptr as usize);
        // SAFETY: the caller's contract for `dealloc` is passed on.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Before the inner realloc, for the same reason as in `dealloc`.
        let moving = runtrace_profile::alloc::realloc_start(ptr as usize);
        // SAFETY: the caller's contract for `realloc` is passed on.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        // A growth allocates the difference (a shrink allocates nothing);
        // a sampled allocation that moved is recorded as moved.
        runtrace_profile::alloc::realloc_end(
            moving,
            ptr as usize,
            p as usize,
            layout.size(),
            new_size,
        );
        p
    }
}
