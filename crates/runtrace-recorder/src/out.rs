//! [`Out`]: writes one event's bytes, front to back, into space its
//! producer has already reserved, with no bounds check per byte.
//!
//! Why not a checked slice (`schema::wire::SliceSink`, as application
//! events use): every byte written through a slice
//! is bounds-checked, and each check carries a branch to its own panic
//! call. In the tokio hooks that made a poll event's path ~1 KB of code
//! spread over ~16 cache lines, and the application's code evicts those
//! lines between requests: in the HTTP server benchmark under callgrind,
//! `poll_start` alone missed the instruction cache ~9 times a call
//! (docs/measurements/server-instructions.md, "Events written without bounds checks"). The
//! producer already checks once per event that `max` bytes are free
//! ([`crate::ring`]'s `must_leave`); each built-in event's `max` is the sum
//! of its fields' longest encodings, so the per-byte checks could never
//! fail.
//!
//! Debug builds keep a bounds check (`debug_assert!`) on every write.
//! `Out` is a [`Sink`]: fields are written by runtrace-format's one
//! encoder per wire encoding (`schema::wire`), the same functions the
//! application events and the test-trace builder write through, inlined
//! here into unchecked stores.

use runtrace_format::schema::wire::Sink;

/// A write cursor over the bytes reserved for one event.
///
/// Only [`Out::new`] (unsafe) makes one; its caller promises the room.
pub(crate) struct Out {
    p: *mut u8,
    #[cfg(debug_assertions)]
    end: *mut u8,
}

impl Out {
    /// A cursor at `p`.
    ///
    /// # Safety
    /// `p..p + room` must be writable bytes that nothing else reads or
    /// writes while this `Out` lives, and whoever writes through it must
    /// write at most `room` bytes (debug builds check).
    #[inline(always)]
    pub(crate) unsafe fn new(p: *mut u8, room: usize) -> Out {
        #[cfg(not(debug_assertions))]
        let _ = room;
        Out {
            p,
            // SAFETY: `p + room` is the end of the caller's range (or one
            // past it), so the offset stays within one allocation.
            #[cfg(debug_assertions)]
            end: unsafe { p.add(room) },
        }
    }

    /// Where the next byte goes.
    #[inline(always)]
    pub(crate) fn at(&self) -> *mut u8 {
        self.p
    }

    /// Writes one byte.
    #[inline(always)]
    pub(crate) fn byte(&mut self, b: u8) {
        #[cfg(debug_assertions)]
        debug_assert!(self.p < self.end, "event overran its reserved bytes");
        // SAFETY: `new`'s contract: the writer stays within `room`.
        unsafe {
            self.p.write(b);
            self.p = self.p.add(1);
        }
    }

    /// Gives the rest of the reserved bytes, `room` of them, to `enc` as a
    /// slice (it writes from index 0 and returns how many it wrote), and
    /// moves past what it wrote. For encoders generated outside this crate
    /// (application events), which write through bounds-checked slices.
    ///
    /// # Safety
    /// At least `room` reserved bytes must be left.
    #[inline(always)]
    pub(crate) unsafe fn with_slice<T>(
        &mut self,
        room: usize,
        enc: impl FnOnce(&mut [u8]) -> (usize, T),
    ) -> T {
        #[cfg(debug_assertions)]
        debug_assert!(self.end as usize - self.p as usize >= room);
        // SAFETY: the caller promises `room` reserved bytes from `p`, which
        // nothing else touches while `self` is borrowed.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.p, room) };
        let (n, t) = enc(buf);
        // `n <= room`: `enc` indexed a slice of `room` bytes.
        let n = n.min(room);
        // SAFETY: within the slice just written.
        self.p = unsafe { self.p.add(n) };
        t
    }
}

impl Sink for Out {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        Out::byte(self, b);
    }

    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        #[cfg(debug_assertions)]
        debug_assert!(
            self.end as usize - self.p as usize >= b.len(),
            "event overran its reserved bytes"
        );
        // SAFETY: `new`'s contract: the writer stays within `room`; `b`
        // is not in the reserved bytes, which nothing else references.
        unsafe {
            std::ptr::copy_nonoverlapping(b.as_ptr(), self.p, b.len());
            self.p = self.p.add(b.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_format::schema::wire;
    use runtrace_format::varint;

    fn written(room: usize, f: impl FnOnce(&mut Out)) -> Vec<u8> {
        let mut buf = vec![0xAAu8; room];
        // SAFETY: `buf` has `room` bytes; the tests write at most that,
        // but for the overrun test, whose debug check panics first.
        let mut out = unsafe { Out::new(buf.as_mut_ptr(), room) };
        f(&mut out);
        let n = out.at() as usize - buf.as_ptr() as usize;
        buf.truncate(n);
        buf
    }

    /// Writes through `Out` encode as the reader's format expects (the
    /// same bytes as `varint::put`, the task register, text).
    #[test]
    fn writes_what_the_format_says() {
        for v in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut want = Vec::new();
            varint::put(&mut want, v);
            assert_eq!(written(10, |o| wire::put_varint(o, v)), want, "{v}");
        }
        let mut reg = 10;
        assert_eq!(written(10, |o| wire::put_task(o, &mut reg, 7)), [5]); // zigzag(-3)
        assert_eq!(reg, 7);
        assert_eq!(
            written(4, |o| wire::put_str(o, "abc")),
            [3, b'a', b'b', b'c']
        );
        let b = written(4, |o| {
            o.byte(9);
            // SAFETY: 3 bytes are left.
            let t = unsafe {
                o.with_slice(3, |s| {
                    s[0] = 1;
                    s[1] = 2;
                    (2, 'x')
                })
            };
            assert_eq!(t, 'x');
        });
        assert_eq!(b, [9, 1, 2]);
    }

    /// Debug builds catch an encoder that writes more than it reserved.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "overran")]
    fn an_overrun_is_caught_in_debug_builds() {
        let _ = written(2, |o| wire::put_varint(o, 1 << 20));
    }
}
