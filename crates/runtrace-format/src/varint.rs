//! LEB128 varints, zigzag, and a bounds-checked cursor for decoding.
//!
//! ```
//! use runtrace_format::varint::{self, Cursor};
//! let mut b = Vec::new();
//! varint::put(&mut b, u64::MAX);
//! varint::put(&mut b, varint::zigzag(-3));
//! let mut c = Cursor::new(&b);
//! assert_eq!(c.varint().unwrap(), u64::MAX);
//! assert_eq!(varint::unzigzag(c.varint().unwrap()), -3);
//! ```

/// Longest encoding of a u64.
pub const MAX_LEN: usize = 10;

/// Appends `v` as a varint (frames; event fields are written by
/// [`crate::schema::wire`], which has one function per field encoding).
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `v` takes as a varint.
#[inline]
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Maps a signed integer to an unsigned one with small magnitudes first.
#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline(always)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends a `str`: varint length then the bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Why a payload failed to decode, and where (offset within the payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset in the decoded slice where the problem starts.
    pub pos: usize,
    /// What was wrong.
    pub what: String,
}

impl DecodeError {
    /// Builds an error at `pos`.
    pub fn new(pos: usize, what: impl Into<String>) -> Self {
        DecodeError {
            pos,
            what: what.into(),
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at +{})", self.what, self.pos)
    }
}

/// A read position in a byte slice; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Starts reading at the beginning of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// Current offset.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// True when every byte was read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// Reads one byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or_else(|| DecodeError::new(self.pos, "unexpected end of data"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads a varint (at most 10 bytes, no overflow).
    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        // Fast path: one byte, the common case for deltas and small ids.
        if let Some(&b) = self.data.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        let mut v: u64 = 0;
        for i in 0..MAX_LEN {
            let b = *self
                .data
                .get(self.pos)
                .ok_or_else(|| DecodeError::new(start, "varint runs past the end"))?;
            self.pos += 1;
            if i == MAX_LEN - 1 && b > 1 {
                return Err(DecodeError::new(start, "varint overflows 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError::new(start, "varint longer than 10 bytes"))
    }

    /// Reads `n` raw bytes.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::new(
                self.pos,
                format!("{n} bytes run past the end"),
            ));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads a `str` (varint length + UTF-8).
    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        let start = self.pos;
        let n = self.varint()?;
        if n > self.remaining() as u64 {
            return Err(DecodeError::new(start, "string runs past the end"));
        }
        let b = self.bytes(n as usize)?;
        std::str::from_utf8(b).map_err(|_| DecodeError::new(start, "string is not UTF-8"))
    }

    /// Reads the rest of the data.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.data[self.pos..];
        self.pos = self.data.len();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_matches_encoding() {
        for v in [0, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put(&mut b, v);
            assert_eq!(b.len(), len(v), "{v}");
        }
    }

    #[test]
    fn overlong_varints_are_errors() {
        let eleven = [0x80u8; 11];
        assert!(Cursor::new(&eleven).varint().is_err());
        let mut ten = [0xffu8; 10];
        ten[9] = 0x02;
        assert!(Cursor::new(&ten).varint().is_err());
        ten[9] = 0x01;
        assert_eq!(Cursor::new(&ten).varint().unwrap(), u64::MAX);
    }
}
