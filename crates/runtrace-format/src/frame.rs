//! Frames: the length-prefixed, checksummed units of a trace file, and the
//! encoders of their payloads (docs/format.md sections 2 and 3).
//!
//! ```
//! use runtrace_format::frame::{self, FrameType};
//! let mut file = runtrace_format::MAGIC.to_vec();
//! frame::write(&mut file, FrameType::Round, &frame::round(42));
//! assert_eq!(file.len(), 8 + 9 + 1);
//! ```

use crate::schema::Schema;
use crate::varint::{self, Cursor, DecodeError};

/// Bytes before a frame's payload: type, length, crc32.
pub const FRAME_HEADER_LEN: usize = 9;

/// Frame type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameType {
    /// File header.
    Header = 1,
    /// Schemas registered after the header.
    Schema = 2,
    /// Interned strings.
    Strings = 3,
    /// Interned spawn locations.
    Locations = 4,
    /// A thread's name.
    Thread = 5,
    /// Clock sync point.
    Clock = 6,
    /// Events of one thread.
    Chunk = 7,
    /// Lost events.
    Dropped = 8,
    /// End of a writer drain round.
    Round = 9,
    /// The file is sealed.
    End = 10,
}

impl FrameType {
    /// The frame type for a code, if known.
    pub fn from_u8(b: u8) -> Option<FrameType> {
        Some(match b {
            1 => FrameType::Header,
            2 => FrameType::Schema,
            3 => FrameType::Strings,
            4 => FrameType::Locations,
            5 => FrameType::Thread,
            6 => FrameType::Clock,
            7 => FrameType::Chunk,
            8 => FrameType::Dropped,
            9 => FrameType::Round,
            10 => FrameType::End,
            _ => return None,
        })
    }
}

/// Appends a frame (type, length, crc32, payload) to `out`.
pub fn write(out: &mut Vec<u8>, ty: FrameType, payload: &[u8]) {
    write_raw(out, ty as u8, payload);
}

/// Appends a frame with any type byte (tests use unknown types).
pub fn write_raw(out: &mut Vec<u8>, ty: u8, payload: &[u8]) {
    assert!(
        payload.len() <= crate::MAX_FRAME_LEN as usize,
        "frame too large"
    );
    out.push(ty);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The file header (docs/format.md section 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Major version (1).
    pub version_major: u64,
    /// Minor version.
    pub version_minor: u64,
    /// Trace ticks per second.
    pub ticks_per_sec: u64,
    /// Recording start, in trace ticks.
    pub anchor_ticks: u64,
    /// Wall clock at `anchor_ticks`, ns since the Unix epoch.
    pub anchor_wall_ns: u64,
    /// Process id.
    pub pid: u64,
    /// Process name.
    pub process_name: String,
    /// Random id shared by the files of one recording.
    pub recording_id: u64,
    /// N in `trace.N.bin`.
    pub file_index: u64,
    /// Schemas known when the file was opened.
    pub schemas: Vec<Schema>,
}

impl Header {
    /// Encodes the HEADER payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(256 + 64 * self.schemas.len());
        for v in [
            self.version_major,
            self.version_minor,
            self.ticks_per_sec,
            self.anchor_ticks,
        ] {
            varint::put(&mut p, v);
        }
        varint::put(&mut p, self.anchor_wall_ns);
        varint::put(&mut p, self.pid);
        varint::put_str(&mut p, &self.process_name);
        varint::put(&mut p, self.recording_id);
        varint::put(&mut p, self.file_index);
        varint::put(&mut p, self.schemas.len() as u64);
        for s in &self.schemas {
            s.encode(&mut p);
        }
        p
    }

    /// Decodes a HEADER payload.
    pub fn decode(payload: &[u8]) -> Result<Header, DecodeError> {
        let mut c = Cursor::new(payload);
        let version_major = c.varint()?;
        if version_major != crate::VERSION_MAJOR {
            return Err(DecodeError::new(
                0,
                format!("unsupported format major version {version_major} (this reader knows 1)"),
            ));
        }
        let version_minor = c.varint()?;
        let ticks_per_sec = c.varint()?;
        if ticks_per_sec == 0 {
            return Err(DecodeError::new(0, "ticks_per_sec is 0"));
        }
        let anchor_ticks = c.varint()?;
        let anchor_wall_ns = c.varint()?;
        let pid = c.varint()?;
        let process_name = c.str()?.to_owned();
        let recording_id = c.varint()?;
        let file_index = c.varint()?;
        let n = c.varint()?;
        let mut schemas = Vec::new();
        for _ in 0..n {
            schemas.push(Schema::decode(&mut c)?);
        }
        Ok(Header {
            version_major,
            version_minor,
            ticks_per_sec,
            anchor_ticks,
            anchor_wall_ns,
            pid,
            process_name,
            recording_id,
            file_index,
            schemas,
        })
    }

    /// Nanoseconds since the recording started for a timestamp in ticks.
    pub fn ticks_to_ns(&self, ticks: u64) -> i64 {
        let d = ticks as i128 - self.anchor_ticks as i128;
        (d * 1_000_000_000).div_euclid(self.ticks_per_sec as i128) as i64
    }

    /// A duration in ticks, in nanoseconds.
    pub fn duration_ns(&self, ticks: u64) -> u64 {
        (ticks as u128 * 1_000_000_000 / self.ticks_per_sec as u128) as u64
    }
}

/// SCHEMA payload.
pub fn schemas(list: &[Schema]) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, list.len() as u64);
    for s in list {
        s.encode(&mut p);
    }
    p
}

/// STRINGS payload from `(id, text)` pairs.
pub fn strings<'a>(list: impl ExactSizeIterator<Item = (u64, &'a str)>) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, list.len() as u64);
    for (id, s) in list {
        varint::put(&mut p, id);
        varint::put_str(&mut p, s);
    }
    p
}

/// A spawn location definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationDef {
    /// Interned id (never 0).
    pub id: u64,
    /// Source file.
    pub file: String,
    /// Line.
    pub line: u32,
    /// Column.
    pub col: u32,
}

/// LOCATIONS payload.
pub fn locations<'a>(list: impl ExactSizeIterator<Item = &'a LocationDef>) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, list.len() as u64);
    for l in list {
        varint::put(&mut p, l.id);
        varint::put_str(&mut p, &l.file);
        varint::put(&mut p, l.line as u64);
        varint::put(&mut p, l.col as u64);
    }
    p
}

/// THREAD payload.
pub fn thread(tid: u64, name: &str) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, tid);
    varint::put_str(&mut p, name);
    p
}

/// CLOCK payload.
pub fn clock(ticks: u64, wall_ns: u64) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, ticks);
    varint::put(&mut p, wall_ns);
    p
}

/// DROPPED payload.
pub fn dropped(tid: u64, count: u64, since_ticks: u64, until_ticks: u64) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [tid, count, since_ticks, until_ticks] {
        varint::put(&mut p, v);
    }
    p
}

/// ROUND payload.
pub fn round(watermark_ticks: u64) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, watermark_ticks);
    p
}

/// END payload.
pub fn end(events: u64, dropped: u64) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, events);
    varint::put(&mut p, dropped);
    p
}
