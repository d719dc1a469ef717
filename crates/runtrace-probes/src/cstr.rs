//! NUL-terminated stack copies of short strings, for backends that hand
//! text to C consumers (USDT, perf-probe, LTTng) without allocating.

use std::ffi::c_char;

/// A short string (at most 255 bytes, cut at a UTF-8 boundary) with a NUL
/// after it, on the stack.
///
/// ```
/// use runtrace_probes::__rt::CStrBuf;
/// let b = CStrBuf::new("route");
/// // SAFETY: as_ptr points at a NUL-terminated buffer that `b` owns.
/// let s = unsafe { std::ffi::CStr::from_ptr(b.as_ptr()) };
/// assert_eq!(s.to_str(), Ok("route"));
/// ```
pub struct CStrBuf([u8; 256]);

impl CStrBuf {
    /// Copies `s` (truncated to 255 bytes; an interior NUL ends it early
    /// for C readers).
    #[inline]
    pub fn new(s: &str) -> CStrBuf {
        let mut n = s.len().min(255);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        let mut b = [0u8; 256];
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        CStrBuf(b)
    }

    /// Pointer to the NUL-terminated text.
    #[inline]
    pub fn as_ptr(&self) -> *const c_char {
        self.0.as_ptr().cast()
    }
}
