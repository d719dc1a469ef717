//! The wire encodings of event fields (docs/format.md section 6): one
//! function per [`Encoding`], writing to any [`Sink`]. Every writer of
//! events encodes through these: the recorder's built-in events (into its
//! ring, without a bounds check per byte), application events (through a
//! checked [`SliceSink`]) and the test-trace builder (a `Vec<u8>`), so
//! there is one encoder per encoding. Which encoding a field type uses is
//! [`FieldType::encoding`](super::FieldType::encoding), generated from
//! runtrace-build's table of field types.
//!
//! ```
//! use runtrace_format::schema::wire::{self, SliceSink};
//! let mut v = Vec::new();
//! wire::put_varint(&mut v, 300);
//! wire::put_str(&mut v, "hi");
//! assert_eq!(v, [0xAC, 0x02, 2, b'h', b'i']);
//! let mut buf = [0u8; 4];
//! let mut s = SliceSink::new(&mut buf);
//! let mut reg = 10;
//! wire::put_task(&mut s, &mut reg, 7); // zigzag(7 - 10)
//! assert_eq!((s.written(), buf[0], reg), (1, 5, 7));
//! ```

use crate::varint;

// `Encoding` (build.rs, from runtrace-build's table of field types).
include!(concat!(env!("OUT_DIR"), "/wire.rs"));

/// Where encoded bytes go. Callers reserve room first (each encoding's
/// [`Encoding::max_len`]); what a sink does when that was not enough is
/// its own business (a `Vec` grows, a [`SliceSink`] panics).
pub trait Sink {
    /// Writes one byte.
    fn byte(&mut self, b: u8);

    /// Writes `b`.
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.byte(x);
        }
    }
}

impl Sink for Vec<u8> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.push(b);
    }

    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// A write cursor over a byte slice; every write is bounds-checked (a
/// write past the end panics).
#[derive(Debug)]
pub struct SliceSink<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> SliceSink<'a> {
    /// A cursor at the start of `buf`.
    #[inline(always)]
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceSink { buf, pos: 0 }
    }

    /// Bytes written so far.
    #[inline(always)]
    pub fn written(&self) -> usize {
        self.pos
    }
}

impl Sink for SliceSink<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.buf[self.pos] = b;
        self.pos += 1;
    }

    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
}

/// [`Encoding::Varint`]: `v` as an unsigned LEB128 varint.
#[inline(always)]
pub fn put_varint<S: Sink + ?Sized>(s: &mut S, mut v: u64) {
    while v >= 0x80 {
        s.byte((v as u8) | 0x80);
        v >>= 7;
    }
    s.byte(v as u8);
}

/// [`Encoding::Zigzag`]: `v` as a zigzag varint.
#[inline(always)]
pub fn put_zigzag<S: Sink + ?Sized>(s: &mut S, v: i64) {
    put_varint(s, varint::zigzag(v));
}

/// [`Encoding::Bool`]: one byte, 0 or 1.
#[inline(always)]
pub fn put_bool<S: Sink + ?Sized>(s: &mut S, v: bool) {
    s.byte(v as u8);
}

/// [`Encoding::F64`]: 8 bytes, IEEE 754 binary64 little endian.
#[inline(always)]
pub fn put_f64<S: Sink + ?Sized>(s: &mut S, v: f64) {
    s.bytes(&v.to_le_bytes());
}

/// [`Encoding::Str`]: varint length and UTF-8 bytes, cut to at most
/// [`MAX_INLINE_STR`](crate::MAX_INLINE_STR) bytes at a character
/// boundary.
///
/// ```
/// let mut v = Vec::new();
/// runtrace_format::schema::wire::put_str(&mut v, &"é".repeat(200));
/// assert_eq!((v[0], v[1], v.len()), (0xFE, 0x01, 2 + 254)); // 127 whole characters
/// ```
#[inline]
pub fn put_str<S: Sink + ?Sized>(s: &mut S, text: &str) {
    let mut n = text.len().min(crate::MAX_INLINE_STR);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    put_varint(s, n as u64);
    s.bytes(&text.as_bytes()[..n]);
}

/// [`Encoding::Task`]: task id `task` as the zigzag varint of its
/// difference from the chunk's task register `reg`, which it then sets.
#[inline(always)]
pub fn put_task<S: Sink + ?Sized>(s: &mut S, reg: &mut u64, task: u64) {
    let d = task.wrapping_sub(*reg) as i64;
    *reg = task;
    put_varint(s, varint::zigzag(d));
}

/// Writes a value held as 64 bits by encoding `e`: integers, string and
/// location ids as is, signed integers as `v as i64`, `bool` as non-zero,
/// `f64` as its bits, a task id against the register `reg`; nothing for
/// [`Encoding::Register`]. For writers whose values come as numbers (the
/// test-trace builder). `Str` takes text: use [`put_str`].
///
/// # Panics
/// For [`Encoding::Str`].
///
/// ```
/// use runtrace_format::schema::{wire, FieldType};
/// let (mut v, mut reg) = (Vec::new(), 0);
/// wire::put_bits(&mut v, &mut reg, FieldType::I32.encoding(), -2i64 as u64);
/// wire::put_bits(&mut v, &mut reg, FieldType::Worker.encoding(), 9);
/// assert_eq!(v, [3]);
/// ```
pub fn put_bits<S: Sink + ?Sized>(s: &mut S, reg: &mut u64, e: Encoding, v: u64) {
    match e {
        Encoding::Varint => put_varint(s, v),
        Encoding::Zigzag => put_zigzag(s, v as i64),
        Encoding::Bool => put_bool(s, v != 0),
        Encoding::F64 => put_f64(s, f64::from_bits(v)),
        Encoding::Str => panic!("str fields take text, not a number"),
        Encoding::Task => put_task(s, reg, v),
        Encoding::Register => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FieldType;

    /// Every encoding writes what the reader decodes, and never more than
    /// its longest encoding.
    #[test]
    fn encodings_match_the_decoder_and_their_bounds() {
        for v in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut a = Vec::new();
            varint::put(&mut a, v);
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(a, b);
            assert!(b.len() <= Encoding::Varint.max_len());
            let mut c = varint::Cursor::new(&b);
            assert_eq!(c.varint().unwrap(), v);
        }
        let mut b = Vec::new();
        put_zigzag(&mut b, i64::MIN);
        assert!(b.len() <= Encoding::Zigzag.max_len());
        assert_eq!(
            varint::unzigzag(varint::Cursor::new(&b).varint().unwrap()),
            i64::MIN
        );
        let long = "x".repeat(1000);
        let mut b = Vec::new();
        put_str(&mut b, &long);
        assert_eq!(b.len(), Encoding::Str.max_len());
        assert_eq!(varint::Cursor::new(&b).str().unwrap().len(), 255);
        let mut b = Vec::new();
        put_f64(&mut b, 1.5);
        assert_eq!(b, 1.5f64.to_le_bytes());
        for t in FieldType::ALL {
            assert_eq!(t.max_encoded_len(), t.encoding().max_len());
        }
    }

    /// A slice sink writes the same bytes and refuses to run past its end.
    #[test]
    fn slice_sink_is_checked() {
        let mut buf = [0u8; 3];
        let mut s = SliceSink::new(&mut buf);
        put_str(&mut s, "ab");
        assert_eq!(s.written(), 3);
        let r = std::panic::catch_unwind(move || {
            let mut buf = [0u8; 1];
            put_varint(&mut SliceSink::new(&mut buf), 300);
        });
        assert!(r.is_err());
        assert_eq!(buf, [2, b'a', b'b']);
    }
}
