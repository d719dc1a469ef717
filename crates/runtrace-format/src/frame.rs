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
use std::sync::Arc;

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
    /// Interned call stacks (format 1.1).
    Stacks = 11,
    /// The process's executable mappings (format 1.1).
    Mappings = 12,
    /// What CPU profiling did (format 1.1).
    Profile = 13,
    /// The recording ended cleanly: this is its last file (format 1.2).
    Finish = 14,
    /// Events of one thread, dense records (format 1.3, [`crate::dense`]).
    DChunk = 15,
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
            11 => FrameType::Stacks,
            12 => FrameType::Mappings,
            13 => FrameType::Profile,
            14 => FrameType::Finish,
            15 => FrameType::DChunk,
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

/// The `THREAD` name of the recorder's writer thread (docs/format.md
/// section 10): its chunks carry the profiler's samples, and its `DROPPED`
/// frames the samples the profiler lost.
///
/// ```
/// let p = runtrace_format::frame::thread(7, runtrace_format::frame::WRITER_THREAD);
/// assert!(p.ends_with(b"runtrace-writer"));
/// ```
pub const WRITER_THREAD: &str = "runtrace-writer";

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

/// A `FINISH` frame (format 1.2, docs/format.md section 11): the
/// recording ended cleanly, in the file that holds it, and this is what
/// it wrote in all.
///
/// ```
/// use runtrace_format::frame::{decode_finish, Finish};
/// let f = Finish { files: 3, evicted: 1, events: 900, dropped: 2, lost_to_writes: 0 };
/// assert_eq!(decode_finish(&f.encode()).unwrap(), f);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Finish {
    /// Files the recording wrote (indexes 0 to `files - 1`; this one is
    /// the last).
    pub files: u64,
    /// The oldest of them deleted by the total-size limit
    /// (`max_total_size`): indexes 0 to `evicted - 1` are gone by design.
    pub evicted: u64,
    /// Events written over the whole recording.
    pub events: u64,
    /// Events lost over the whole recording (told in `DROPPED` frames,
    /// and those no file could be told about).
    pub dropped: u64,
    /// Of `dropped`, those lost because writing failed (disk full, I/O
    /// errors); the rest were lost to full thread buffers.
    pub lost_to_writes: u64,
}

impl Finish {
    /// The frame's payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        for v in [
            self.files,
            self.evicted,
            self.events,
            self.dropped,
            self.lost_to_writes,
        ] {
            varint::put(&mut p, v);
        }
        p
    }
}

/// Decodes a `FINISH` payload (trailing bytes ignored: later minor
/// versions may add fields).
pub fn decode_finish(p: &[u8]) -> Result<Finish, DecodeError> {
    let mut c = Cursor::new(p);
    Ok(Finish {
        files: c.varint()?,
        evicted: c.varint()?,
        events: c.varint()?,
        dropped: c.varint()?,
        lost_to_writes: c.varint()?,
    })
}

/// Most frames a `STACKS` stack may have (docs/format.md, `STACKS`).
pub const MAX_STACK_DEPTH: usize = 128;

/// `STACKS` payload from `(id, addresses)` pairs, addresses leaf first
/// (docs/format.md, frame type 11): each address is stored as the zigzag
/// delta from the previous one of its stack (from 0), so neighbouring
/// frames in one binary take a few bytes.
///
/// ```
/// use runtrace_format::frame;
/// let p = frame::stacks([(1, &[0x5555_0000_1234u64, 0x5555_0000_1000][..])].into_iter());
/// let s = frame::decode_stacks(&p).unwrap();
/// assert_eq!(s[0].0, 1);
/// assert_eq!(&*s[0].1, &[0x5555_0000_1234, 0x5555_0000_1000]);
/// ```
///
/// A stack deeper than [`MAX_STACK_DEPTH`] keeps its leaf-most frames, and
/// an entry with id 0 (which means "no stack") is left out: the writer runs
/// inside the application, so a bad argument must not panic there.
pub fn stacks<'a>(list: impl ExactSizeIterator<Item = (u64, &'a [u64])>) -> Vec<u8> {
    let list: Vec<(u64, &[u64])> = list.filter(|(id, _)| *id != 0).collect();
    let mut p = Vec::new();
    varint::put(&mut p, list.len() as u64);
    for (id, addrs) in list {
        let addrs = &addrs[..addrs.len().min(MAX_STACK_DEPTH)];
        varint::put(&mut p, id);
        varint::put(&mut p, addrs.len() as u64);
        let mut prev = 0u64;
        for &a in addrs {
            varint::put(&mut p, varint::zigzag(a.wrapping_sub(prev) as i64));
            prev = a;
        }
    }
    p
}

/// A decoded stack definition: its id and its addresses, leaf first.
pub type StackDef = (u64, Arc<[u64]>);

/// Decodes a `STACKS` payload: `(id, addresses leaf first)` in frame order.
pub fn decode_stacks(payload: &[u8]) -> Result<Vec<StackDef>, DecodeError> {
    let mut c = Cursor::new(payload);
    let n = c.varint()?;
    // Every stack takes at least two bytes: no allocation beyond the payload.
    let mut out = Vec::with_capacity((n as usize).min(payload.len() / 2));
    let mut addrs = Vec::with_capacity(MAX_STACK_DEPTH);
    for _ in 0..n {
        let at = c.pos();
        let id = c.varint()?;
        if id == 0 {
            return Err(DecodeError::new(
                at,
                "stack id 0 defined (id 0 means no stack)",
            ));
        }
        let at = c.pos();
        let depth = c.varint()?;
        if depth > MAX_STACK_DEPTH as u64 {
            return Err(DecodeError::new(
                at,
                format!("stack {id} has depth {depth} (at most {MAX_STACK_DEPTH})"),
            ));
        }
        addrs.clear();
        let mut prev = 0u64;
        for _ in 0..depth {
            prev = prev.wrapping_add(varint::unzigzag(c.varint()?) as u64);
            addrs.push(prev);
        }
        out.push((id, Arc::from(&addrs[..])));
    }
    Ok(out)
}

/// One executable file-backed mapping of the recorded process (a `MAPPINGS`
/// entry): what a symbolizer needs to turn an address into a file offset in
/// a binary it can find by path or build id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub file_offset: u64,
    /// GNU build id of the file (usually 20 bytes; empty: unknown).
    pub build_id: Vec<u8>,
    /// Path of the file as the process saw it.
    pub path: String,
}

impl Mapping {
    /// Whether `addr` falls in this mapping.
    ///
    /// ```
    /// let m = runtrace_format::frame::Mapping {
    ///     start: 0x1000, end: 0x2000, file_offset: 0, build_id: vec![], path: "/bin/x".into(),
    /// };
    /// assert!(m.contains(0x1fff) && !m.contains(0x2000));
    /// ```
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
}

/// Adds `list` to `known` as a later `MAPPINGS` frame does: a mapping with
/// the same `start` as a known one replaces it, others are appended.
///
/// ```
/// use runtrace_format::frame::{merge_mappings, Mapping};
/// let m = |start, path: &str| Mapping { start, end: start + 0x1000, file_offset: 0,
///                                       build_id: vec![], path: path.into() };
/// let mut known = vec![m(0x1000, "/a")];
/// merge_mappings(&mut known, [m(0x1000, "/b"), m(0x9000, "/c")]);
/// assert_eq!(known, vec![m(0x1000, "/b"), m(0x9000, "/c")]);
/// ```
pub fn merge_mappings(known: &mut Vec<Mapping>, list: impl IntoIterator<Item = Mapping>) {
    for m in list {
        match known.iter_mut().find(|x| x.start == m.start) {
            Some(x) => *x = m,
            None => known.push(m),
        }
    }
}

/// `MAPPINGS` payload (docs/format.md, frame type 12).
///
/// ```
/// use runtrace_format::frame::{self, Mapping};
/// let m = Mapping { start: 0x1000, end: 0x2000, file_offset: 0x1000,
///                   build_id: vec![0xab; 20], path: "/usr/bin/app".into() };
/// let p = frame::mappings(std::slice::from_ref(&m));
/// assert_eq!(frame::decode_mappings(&p).unwrap(), vec![m]);
/// ```
pub fn mappings(list: &[Mapping]) -> Vec<u8> {
    let mut p = Vec::new();
    varint::put(&mut p, list.len() as u64);
    for m in list {
        varint::put(&mut p, m.start);
        varint::put(&mut p, m.end);
        varint::put(&mut p, m.file_offset);
        varint::put(&mut p, m.build_id.len() as u64);
        p.extend_from_slice(&m.build_id);
        varint::put_str(&mut p, &m.path);
    }
    p
}

/// Decodes a `MAPPINGS` payload.
pub fn decode_mappings(payload: &[u8]) -> Result<Vec<Mapping>, DecodeError> {
    let mut c = Cursor::new(payload);
    let n = c.varint()?;
    // Every mapping takes at least five bytes.
    let mut out = Vec::with_capacity((n as usize).min(payload.len() / 5));
    for _ in 0..n {
        let at = c.pos();
        let (start, end, file_offset) = (c.varint()?, c.varint()?, c.varint()?);
        if end < start {
            return Err(DecodeError::new(
                at,
                format!("mapping ends ({end:#x}) before it starts ({start:#x})"),
            ));
        }
        let len_at = c.pos();
        let len = c.varint()?;
        if len > c.remaining() as u64 {
            return Err(DecodeError::new(len_at, "build id runs past the end"));
        }
        let build_id = c.bytes(len as usize)?.to_vec();
        let path = c.str()?.to_owned();
        out.push(Mapping {
            start,
            end,
            file_offset,
            build_id,
            path,
        });
    }
    Ok(out)
}

/// What CPU profiling did in a recording (a `PROFILE` frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileInfo {
    /// [`ProfileInfo::MODE_NONE`], [`ProfileInfo::MODE_PERF`] or
    /// [`ProfileInfo::MODE_SIGNAL`] (other values: a later writer's mode).
    pub mode: u64,
    /// Samples per second asked for.
    pub hz: u64,
    /// Bit 0 ([`ProfileInfo::FLAG_OFF_CPU`]): off-CPU stacks recorded.
    pub flags: u64,
    /// Why profiling was not possible (mode 0), or a note; may be empty.
    pub message: String,
}

impl ProfileInfo {
    /// Asked for but not possible (`message` says why).
    pub const MODE_NONE: u64 = 0;
    /// Sampled with `perf_event_open`.
    pub const MODE_PERF: u64 = 1;
    /// Sampled with a CPU-time timer and a signal (on-CPU only).
    pub const MODE_SIGNAL: u64 = 2;
    /// `flags` bit: off-CPU (context switch) stacks recorded.
    pub const FLAG_OFF_CPU: u64 = 1;

    /// The mode's name: `none`, `perf_event_open`, `signal` or `mode N`.
    ///
    /// ```
    /// let p = runtrace_format::frame::ProfileInfo { mode: 1, hz: 99, flags: 1, message: String::new() };
    /// assert_eq!(p.mode_name(), "perf_event_open");
    /// assert!(p.off_cpu());
    /// ```
    pub fn mode_name(&self) -> String {
        match self.mode {
            Self::MODE_NONE => "none".into(),
            Self::MODE_PERF => "perf_event_open".into(),
            Self::MODE_SIGNAL => "signal".into(),
            m => format!("mode {m}"),
        }
    }

    /// Whether off-CPU stacks were recorded.
    pub fn off_cpu(&self) -> bool {
        self.flags & Self::FLAG_OFF_CPU != 0
    }
}

/// `PROFILE` payload (docs/format.md, frame type 13).
///
/// ```
/// use runtrace_format::frame::{self, ProfileInfo};
/// let p = ProfileInfo { mode: 0, hz: 99, flags: 0, message: "perf_event_paranoid is 3".into() };
/// assert_eq!(frame::decode_profile(&frame::profile(&p)).unwrap(), p);
/// ```
pub fn profile(p: &ProfileInfo) -> Vec<u8> {
    let mut out = Vec::new();
    varint::put(&mut out, p.mode);
    varint::put(&mut out, p.hz);
    varint::put(&mut out, p.flags);
    varint::put_str(&mut out, &p.message);
    out
}

/// Decodes a `PROFILE` payload (trailing bytes, from a later minor version,
/// are ignored).
pub fn decode_profile(payload: &[u8]) -> Result<ProfileInfo, DecodeError> {
    let mut c = Cursor::new(payload);
    Ok(ProfileInfo {
        mode: c.varint()?,
        hz: c.varint()?,
        flags: c.varint()?,
        message: c.str()?.to_owned(),
    })
}
