//! A streaming reader for one trace file (docs/format.md section 7).
//!
//! It holds one frame in memory at a time, so files larger than RAM read in
//! bounded memory. It never panics on any input: damage becomes a
//! [`ReadError`] naming the file and byte offset, and reading goes on with
//! the next frame where the format allows.
//!
//! ```no_run
//! use runtrace_format::{FileReader, Record};
//! for rec in FileReader::open("trace.0.bin").unwrap() {
//!     match rec {
//!         Ok(Record::Events { events, .. }) => println!("{} events", events.len()),
//!         Ok(_) => {}
//!         Err(e) => eprintln!("{e}"),
//!     }
//! }
//! ```

use crate::chunk::{walk_from, ChunkHeader, ChunkState, RawValue};
use crate::frame::{self, FrameType, Header, Mapping, ProfileInfo, FRAME_HEADER_LEN};
use crate::schema::Schema;
use crate::value::{Event, Value};
use crate::varint::{Cursor, DecodeError};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What kind of damage a [`ReadError`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file ends inside a frame (or before the magic).
    Truncated,
    /// Bytes that cannot be what the format says.
    Corrupt(String),
    /// The operating system failed to read.
    Io(String),
    /// A sealed file's `END` frame disagrees with what the file holds
    /// (docs/format.md section 2: a mismatch is corruption). Reported by
    /// [`FileReader::end_mismatches`], never by the iterator itself.
    EndTotals {
        /// Which total disagrees.
        total: EndTotal,
        /// What the `END` frame says.
        end_says: u64,
        /// What the file's chunks (events) or `DROPPED` frames (drops)
        /// hold.
        file_holds: u64,
    },
}

/// One of the two totals an `END` frame carries (see
/// [`ErrorKind::EndTotals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndTotal {
    /// `END.events`: event records in the file's chunks.
    Events,
    /// `END.dropped`: the sum of the file's `DROPPED` counts.
    Dropped,
}

/// A problem in a trace file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// The file.
    pub file: PathBuf,
    /// Byte offset in the file.
    pub offset: u64,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = self.file.display();
        match &self.kind {
            ErrorKind::Truncated => {
                write!(
                    f,
                    "{file}: truncated at byte {}: the file ends inside a frame",
                    self.offset
                )
            }
            ErrorKind::Corrupt(m) => write!(f, "{file}: corrupt at byte {}: {m}", self.offset),
            ErrorKind::Io(m) => write!(f, "{file}: read error at byte {}: {m}", self.offset),
            // No byte offset: the disagreement is between the END frame and
            // the whole file, not at one place.
            ErrorKind::EndTotals {
                total: EndTotal::Events,
                end_says,
                file_holds,
            } => write!(
                f,
                "{file}: corrupt END frame: it says the file holds {end_says} events, but its chunks hold {file_holds}"
            ),
            ErrorKind::EndTotals {
                total: EndTotal::Dropped,
                end_says,
                file_holds,
            } => write!(
                f,
                "{file}: corrupt END frame: it says {end_says} events were dropped, but the DROPPED frames report {file_holds}"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

/// The most events one [`Record::Events`] holds: a bigger chunk is handed
/// out in parts. With events of up to 32 fields that is a few MiB at most.
pub const MAX_EVENTS_PER_RECORD: usize = 4096;

/// A chunk being handed out in parts (see [`MAX_EVENTS_PER_RECORD`]).
struct ChunkPart {
    /// Offset of the chunk's frame in the file.
    at: u64,
    header: ChunkHeader,
    /// Where the event records start in the payload.
    body_at: usize,
    /// Record offset (within the body) to resume at.
    pos: usize,
    /// Registers after the last record handed out.
    state: ChunkState,
    /// Events handed out so far.
    walked: u64,
}

/// One unit of a trace file, as the reader hands it out.
#[derive(Debug, Clone)]
pub enum Record {
    /// The header (always first).
    Header(Arc<Header>),
    /// The decoded events of one chunk, or of a part of it: a chunk of
    /// more than [`MAX_EVENTS_PER_RECORD`] events comes as several records
    /// with the same `offset`, so memory stays bounded whatever a chunk
    /// holds (a 1 MiB chunk of zero-width events is ~500,000 events).
    Events {
        /// Byte offset of the chunk's frame.
        offset: u64,
        /// Bytes the frame takes in the file.
        frame_len: u64,
        /// Recording thread.
        tid: u64,
        /// Events, in the thread's order (`set_worker` records excluded).
        events: Vec<Event>,
    },
    /// A thread's name.
    Thread {
        /// OS thread id.
        tid: u64,
        /// Name.
        name: String,
    },
    /// A clock sync point.
    Clock {
        /// Trace ticks.
        ticks: u64,
        /// Wall clock, ns since the Unix epoch.
        wall_ns: u64,
    },
    /// Events a thread lost.
    Dropped {
        /// OS thread id.
        tid: u64,
        /// How many.
        count: u64,
        /// Tick of the first loss.
        since_ticks: u64,
        /// Tick of the report.
        until_ticks: u64,
    },
    /// End of a writer drain round.
    Round {
        /// Every event older than this tick was written before this frame
        /// (docs/format.md section 8).
        watermark_ticks: u64,
    },
    /// The file is sealed.
    End {
        /// Event records the writer put in this file.
        events: u64,
        /// Events reported lost in this file.
        dropped: u64,
    },
}

/// What [`FileReader::next_raw`] hands out.
#[derive(Debug)]
pub enum RawRecord<'a> {
    /// An intact `CHUNK` frame, not decoded.
    Chunk(RawChunk<'a>),
    /// Any other frame, decoded as [`FileReader::next`] decodes it.
    Record(Record),
}

/// An intact (checksum-verified) `CHUNK` frame whose events are not decoded.
#[derive(Debug, Clone, Copy)]
pub struct RawChunk<'a> {
    /// The file (for errors).
    pub file: &'a Path,
    /// Byte offset of the frame in the file.
    pub offset: u64,
    /// Bytes the frame takes in the file.
    pub frame_len: u64,
    /// The chunk header: thread, initial registers, event count.
    pub header: ChunkHeader,
    /// File offset of `body[0]`.
    pub body_offset: u64,
    /// The event records, to walk with [`crate::chunk::walk`] from
    /// `header.state`; or, when [`RawChunk::dense`], a `DCHUNK`'s dense
    /// records (docs/format.md section 6.1).
    pub body: &'a [u8],
    /// `body` holds a `DCHUNK`'s records as the file has them: only from
    /// a reader asked to keep them ([`FileReader::keep_dense`]), for a
    /// caller that decodes them itself ([`crate::dense::SLOTS`],
    /// [`crate::dense::slot_schema`]); [`crate::dense::decode`] expands them.
    pub dense: bool,
    /// The file's definitions so far (schemas to walk with, strings and
    /// locations to resolve ids).
    pub tables: &'a Tables,
}

impl RawChunk<'_> {
    /// The corruption error for a problem at `pos` within `body` (what the
    /// reader reports for a bad event: file, and its byte offset).
    pub fn error(&self, pos: usize, what: &str) -> ReadError {
        ReadError {
            file: self.file.to_path_buf(),
            offset: self.body_offset + pos as u64,
            kind: ErrorKind::Corrupt(format!("chunk at byte {}: {what}", self.offset)),
        }
    }
}

enum Step {
    Record(Record),
    RawChunk {
        offset: u64,
        header: ChunkHeader,
        body_at: usize,
        dense: bool,
    },
}

/// Definitions a file has provided so far.
#[derive(Default, Debug)]
pub struct Tables {
    schemas: Vec<Option<Arc<Schema>>>,
    /// Schemas whose id is too large to index `schemas` (any u32 is valid).
    large_schemas: HashMap<u32, Arc<Schema>>,
    strings: HashMap<u64, Arc<str>>,
    locations: HashMap<u64, Arc<str>>,
    threads: HashMap<u64, String>,
    stacks: HashMap<u64, Arc<[u64]>>,
    mappings: Vec<Mapping>,
    profile: Option<ProfileInfo>,
}

impl Tables {
    /// The schema for an event type id.
    pub fn schema(&self, id: u32) -> Option<&Arc<Schema>> {
        match self.schemas.get(id as usize) {
            Some(s) => s.as_ref(),
            None => self.large_schemas.get(&id),
        }
    }

    fn add_schema(&mut self, s: Schema) -> Result<(), DecodeError> {
        // Ids index a table; a sane recording has a few hundred types, but
        // any u32 id is valid, so large ones go to a map.
        if s.id as usize > 1 << 16 {
            self.large_schemas.insert(s.id, Arc::new(s));
            return Ok(());
        }
        let i = s.id as usize;
        if self.schemas.len() <= i {
            self.schemas.resize(i + 1, None);
        }
        self.schemas[i] = Some(Arc::new(s));
        Ok(())
    }

    /// The text of an interned string.
    pub fn string(&self, id: u64) -> Option<&Arc<str>> {
        self.strings.get(&id)
    }

    /// The text of a spawn location.
    pub fn location(&self, id: u64) -> Option<&Arc<str>> {
        self.locations.get(&id)
    }

    /// A call stack (`STACKS`), addresses leaf first: the sampled
    /// instruction pointer, then return addresses. `None` for id 0 ("no
    /// stack") and ids not defined so far.
    ///
    /// ```
    /// use runtrace_format::frame::{self, FrameType, Header};
    /// use runtrace_format::{FileReader, Record};
    /// let h = Header { version_major: 1, version_minor: 1, ticks_per_sec: 1_000_000_000,
    ///     anchor_ticks: 0, anchor_wall_ns: 0, pid: 1, process_name: "p".into(),
    ///     recording_id: 1, file_index: 0, schemas: vec![] };
    /// let mut file = runtrace_format::MAGIC.to_vec();
    /// frame::write(&mut file, FrameType::Header, &h.encode());
    /// frame::write(&mut file, FrameType::Stacks, &frame::stacks([(5, &[0x40_1000u64, 0x40_2000][..])].into_iter()));
    /// let mut r = FileReader::new(&file[..], "mem");
    /// while let Some(rec) = r.next() { rec.unwrap(); }
    /// assert_eq!(&**r.tables().stack(5).unwrap(), &[0x40_1000, 0x40_2000]);
    /// assert!(r.tables().stack(6).is_none());
    /// ```
    pub fn stack(&self, id: u64) -> Option<&Arc<[u64]>> {
        self.stacks.get(&id)
    }

    /// Stacks defined so far.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// The process's executable mappings (`MAPPINGS` frames; a later
    /// mapping with the same `start` replaced the earlier one), in the
    /// order first seen.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// What CPU profiling did (the last `PROFILE` frame read), if the
    /// recording asked for it.
    pub fn profile(&self) -> Option<&ProfileInfo> {
        self.profile.as_ref()
    }

    /// Thread names seen so far.
    pub fn threads(&self) -> &HashMap<u64, String> {
        &self.threads
    }

    /// All schemas seen so far.
    pub fn schemas(&self) -> impl Iterator<Item = &Arc<Schema>> {
        self.schemas
            .iter()
            .flatten()
            .chain(self.large_schemas.values())
    }
}

/// Reads one trace file frame by frame. See the module docs.
pub struct FileReader<R> {
    r: R,
    path: PathBuf,
    offset: u64,
    started: bool,
    finished: bool,
    /// `finished` came from the end of the source at a frame boundary (not
    /// from damage): [`FileReader::resume`] may go on.
    at_end: bool,
    sealed: bool,
    header: Option<Arc<Header>>,
    tables: Tables,
    payload: Vec<u8>,
    pending: Option<Result<Record, ReadError>>,
    events_read: u64,
    dropped_read: u64,
    /// Sum of the `count`s of the raw chunks handed out by `next_raw`.
    raw_chunk_events: u64,
    /// An error was handed out (damage, truncation, I/O).
    damaged: bool,
    /// The last `END` frame: its offset and totals.
    end: Option<(u64, u64, u64)>,
    /// The `FINISH` frame (format 1.2), if the file has one.
    finish: Option<frame::Finish>,
    /// A chunk whose events are being handed out in parts; its payload is
    /// still in `payload`.
    part: Option<ChunkPart>,
    /// [`FileReader::next_raw`] hands `DCHUNK`s out unexpanded.
    keep_dense: bool,
}

/// A trace file as [`FileReader::open`] reads it.
pub type OpenFile = BufReader<std::io::Take<File>>;

impl FileReader<OpenFile> {
    /// Opens a file for reading. Anything but a regular file (a FIFO, a
    /// device, a directory) is refused before it is opened: opening a FIFO
    /// would block until some process writes to it. It reads the bytes the
    /// file held when opened, no more: a pseudo-file that says it is empty
    /// but blocks when read (`/proc/kmsg`) reads as empty, and a file still
    /// being written reads as it was (open it again for more).
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let m = std::fs::metadata(path)?;
        if !m.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let f = File::open(path)?.take(m.len());
        Ok(FileReader::new(BufReader::with_capacity(1 << 20, f), path))
    }
}

impl<R: Read> FileReader<R> {
    /// Reads from any byte source; `path` names it in errors.
    pub fn new(r: R, path: impl Into<PathBuf>) -> Self {
        FileReader {
            r,
            path: path.into(),
            offset: 0,
            started: false,
            finished: false,
            at_end: false,
            sealed: false,
            header: None,
            tables: Tables::default(),
            payload: Vec::new(),
            pending: None,
            events_read: 0,
            dropped_read: 0,
            raw_chunk_events: 0,
            damaged: false,
            end: None,
            finish: None,
            part: None,
            keep_dense: false,
        }
    }

    /// Goes on reading after the source ended at a frame boundary: for a
    /// file still being written (`runtrace top` follows a `.active` file),
    /// whose source now has more bytes. Returns false, and changes nothing,
    /// when reading stopped for another reason (damage, a truncated frame,
    /// no header) or has not stopped.
    ///
    /// ```
    /// use runtrace_format::FileReader;
    /// let mut r = FileReader::new(&b"RUNTRACE"[..], "x.0.bin");
    /// assert!(r.next().unwrap().is_err()); // no HEADER: truncated, for good
    /// assert!(!r.resume());
    /// ```
    pub fn resume(&mut self) -> bool {
        if !(self.finished && self.at_end && self.header.is_some()) || self.sealed {
            return false;
        }
        self.finished = false;
        self.at_end = false;
        true
    }

    /// The header, once read.
    pub fn header(&self) -> Option<&Arc<Header>> {
        self.header.as_ref()
    }

    /// Definitions read so far.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// True once an `END` frame was read.
    pub fn sealed(&self) -> bool {
        self.sealed
    }

    /// The `FINISH` frame read (format 1.2): the recording ended cleanly
    /// and this file is its last.
    pub fn finish(&self) -> Option<&frame::Finish> {
        self.finish.as_ref()
    }

    /// The file's path (as given).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Events reported so far in [`Record::Events`] records. For a file
    /// without damage this is the sum of its chunks' `event_count`s, so a
    /// checker compares it with `END.events` (docs/format.md section 2: a
    /// mismatch is corruption).
    pub fn events_read(&self) -> u64 {
        self.events_read
    }

    /// Sum of the `count`s of the `DROPPED` frames read so far, to compare
    /// with `END.dropped` (saturating: a sum past `u64::MAX` stays there).
    pub fn dropped_read(&self) -> u64 {
        self.dropped_read
    }

    /// The check of a sealed file's `END` totals against what the file
    /// held (docs/format.md section 2): an [`ErrorKind::EndTotals`] error
    /// for the event total, then one for the dropped total, for each that
    /// disagrees. Call it once the reader is exhausted.
    ///
    /// Empty when there is nothing to compare: no `END` frame was read, or
    /// the reader already reported damage (its shortfall is explained by
    /// that error, and a second one about it would be noise). Events count
    /// as decoded records for [`Iterator::next`], and as each raw chunk's
    /// `header.count` for [`FileReader::next_raw`]; a caller that finds a
    /// raw chunk's events disagree with its count reports that damage
    /// itself and so skips this check.
    ///
    /// ```no_run
    /// use runtrace_format::FileReader;
    /// let mut r = FileReader::open("trace.0.bin").unwrap();
    /// for rec in r.by_ref() {
    ///     if let Err(e) = rec { eprintln!("{e}"); }
    /// }
    /// for e in r.end_mismatches() {
    ///     // "trace.0.bin: corrupt END frame: it says the file holds ..."
    ///     eprintln!("{e}");
    /// }
    /// ```
    pub fn end_mismatches(&self) -> Vec<ReadError> {
        let Some((offset, end_events, end_dropped)) = self.end else {
            return Vec::new();
        };
        if self.damaged {
            return Vec::new();
        }
        let held = self.events_read.saturating_add(self.raw_chunk_events);
        [
            (EndTotal::Events, end_events, held),
            (EndTotal::Dropped, end_dropped, self.dropped_read),
        ]
        .into_iter()
        .filter(|(_, end_says, file_holds)| end_says != file_holds)
        .map(|(total, end_says, file_holds)| {
            self.err(
                offset,
                ErrorKind::EndTotals {
                    total,
                    end_says,
                    file_holds,
                },
            )
        })
        .collect()
    }

    fn err(&self, offset: u64, kind: ErrorKind) -> ReadError {
        ReadError {
            file: self.path.clone(),
            offset,
            kind,
        }
    }

    /// Reads up to `buf.len()` bytes; returns how many (less only at EOF).
    fn fill(&mut self, buf_len: usize) -> Result<usize, ReadError> {
        self.payload.clear();
        let r = (&mut self.r)
            .take(buf_len as u64)
            .read_to_end(&mut self.payload);
        r.map_err(|e| self.err(self.offset, ErrorKind::Io(e.to_string())))
    }

    fn next_record(&mut self) -> Option<Result<Record, ReadError>> {
        match self.advance(false)? {
            Ok(Step::Record(r)) => Some(Ok(r)),
            Ok(Step::RawChunk { .. }) => unreachable!("raw chunks only in raw mode"),
            Err(e) => Some(Err(e)),
        }
    }

    /// Whether [`FileReader::next_raw`] hands a `DCHUNK` out as it is
    /// ([`RawChunk::dense`]) instead of expanded into plain records: for a
    /// caller that decodes dense records itself, which saves expanding
    /// every chunk and walking it again (off by default).
    ///
    /// ```
    /// use runtrace_format::FileReader;
    /// let mut r = FileReader::new(&[][..], "empty.bin");
    /// r.keep_dense(true);
    /// assert!(r.next_raw().is_some_and(|x| x.is_err())); // no magic
    /// ```
    pub fn keep_dense(&mut self, yes: bool) {
        self.keep_dense = yes;
    }

    /// Like [`Iterator::next`], but an intact `CHUNK` frame comes back
    /// undecoded, as [`RawRecord::Chunk`]: its header and event bytes,
    /// borrowed from the reader's buffer until the next call. Every other
    /// frame comes back as [`RawRecord::Record`], decoded and checked
    /// exactly as `next` does (definitions still update [`tables`]).
    ///
    /// This is the fast path for tools that walk the events themselves with
    /// [`crate::chunk::walk`] instead of building an [`Event`] (with its
    /// `Vec<Value>`) per event. The caller then owns the chunk rules of
    /// docs/format.md section 7 that the reader would otherwise check: an
    /// event the walker rejects, a string or location id that
    /// [`RawChunk::tables`] does not define, or a count other than
    /// `header.count`, is corruption at `body_offset + pos` (see
    /// [`RawChunk::error`]). Raw chunks' events are not counted in
    /// [`FileReader::events_read`].
    ///
    /// [`tables`]: FileReader::tables
    pub fn next_raw(&mut self) -> Option<Result<RawRecord<'_>, ReadError>> {
        match self.advance(true)? {
            Ok(Step::Record(r)) => Some(Ok(RawRecord::Record(r))),
            Ok(Step::RawChunk {
                offset,
                header,
                body_at,
                dense,
            }) => Some(Ok(RawRecord::Chunk(RawChunk {
                file: &self.path,
                offset,
                // The frame's own length (a `DCHUNK`'s payload was
                // expanded): the next frame starts where this one ends.
                frame_len: self.offset - offset,
                header,
                body_offset: offset + (FRAME_HEADER_LEN + body_at) as u64,
                body: &self.payload[body_at..],
                dense,
                tables: &self.tables,
            }))),
            Err(e) => Some(Err(e)),
        }
    }

    /// The next step; notes damage and raw chunk counts for
    /// [`FileReader::end_mismatches`].
    fn advance(&mut self, raw: bool) -> Option<Result<Step, ReadError>> {
        let step = self.step(raw);
        match &step {
            Some(Err(_)) => self.damaged = true,
            Some(Ok(Step::RawChunk { header, .. })) => {
                self.raw_chunk_events = self.raw_chunk_events.saturating_add(header.count)
            }
            _ => {}
        }
        step
    }

    fn step(&mut self, raw: bool) -> Option<Result<Step, ReadError>> {
        if let Some(part) = self.part.take() {
            let payload = std::mem::take(&mut self.payload);
            let r = self.chunk_part(part, &payload);
            self.payload = payload;
            if let Some(rec) = r {
                return Some(Ok(Step::Record(rec)));
            }
        }
        if let Some(p) = self.pending.take() {
            return Some(p.map(Step::Record));
        }
        if self.finished {
            return None;
        }
        if !self.started {
            self.started = true;
            let n = match self.fill(8) {
                Ok(n) => n,
                Err(e) => return self.fatal(e),
            };
            if n < 8 {
                return self.fatal(self.err(0, ErrorKind::Truncated));
            }
            if self.payload != crate::MAGIC {
                return self.fatal(self.err(
                    0,
                    ErrorKind::Corrupt("bad magic: not a runtrace trace".into()),
                ));
            }
            self.offset = 8;
        }
        loop {
            let at = self.offset;
            let n = match self.fill(FRAME_HEADER_LEN) {
                Ok(n) => n,
                Err(e) => return self.fatal(e),
            };
            if n == 0 {
                self.finished = true;
                self.at_end = true;
                if self.header.is_none() {
                    return Some(Err(self.err(at, ErrorKind::Truncated)));
                }
                return None;
            }
            if n < FRAME_HEADER_LEN {
                return self.fatal(self.err(at, ErrorKind::Truncated));
            }
            let ty = self.payload[0];
            let len = u32::from_le_bytes(self.payload[1..5].try_into().unwrap());
            let crc = u32::from_le_bytes(self.payload[5..9].try_into().unwrap());
            if ty == 0 {
                return self
                    .fatal(self.err(at, ErrorKind::Corrupt("frame type 0 (zeroed data)".into())));
            }
            if len > crate::MAX_FRAME_LEN {
                return self.fatal(self.err(
                    at,
                    ErrorKind::Corrupt(format!(
                        "frame length {len} exceeds 64 MiB; cannot continue"
                    )),
                ));
            }
            let n = match self.fill(len as usize) {
                Ok(n) => n,
                Err(e) => return self.fatal(e),
            };
            if n < len as usize {
                return self.fatal(self.err(at, ErrorKind::Truncated));
            }
            self.offset = at + FRAME_HEADER_LEN as u64 + len as u64;
            if crc32fast::hash(&self.payload) != crc {
                if self.header.is_none() {
                    return self.fatal(
                        self.err(at, ErrorKind::Corrupt("header checksum mismatch".into())),
                    );
                }
                return Some(Err(
                    self.err(at, ErrorKind::Corrupt("frame checksum mismatch".into()))
                ));
            }
            // The first frame must be a HEADER, even when its type is unknown
            // (rule 4 skips unknown types only after the HEADER).
            if self.header.is_none() && ty != FrameType::Header as u8 {
                return self
                    .fatal(self.err(at, ErrorKind::Corrupt("first frame is not a HEADER".into())));
            }
            let Some(ft) = FrameType::from_u8(ty) else {
                continue; // Unknown frame types are skipped (rule 4).
            };
            // A dense chunk (1.3) is expanded into the plain one it
            // stands for: from here on both are read alike. Unless the
            // caller of `next_raw` decodes dense records itself.
            let dense = raw && self.keep_dense && ft == FrameType::DChunk;
            let ft = if ft == FrameType::DChunk && !dense {
                if let Err(e) = self.expand_dense() {
                    return Some(Err(
                        self.err(at, ErrorKind::Corrupt(format!("dense chunk: {e}")))
                    ));
                }
                FrameType::Chunk
            } else {
                ft
            };
            if raw && (ft == FrameType::Chunk || dense) {
                let mut c = Cursor::new(&self.payload);
                return Some(match ChunkHeader::decode(&mut c) {
                    Ok(header) => Ok(Step::RawChunk {
                        offset: at,
                        header,
                        body_at: c.pos(),
                        dense,
                    }),
                    Err(e) => Err(self.err(at, ErrorKind::Corrupt(e.to_string()))),
                });
            }
            match self.frame(ft, at) {
                Ok(Some(rec)) => return Some(Ok(Step::Record(rec))),
                Ok(None) => {
                    if let Some(p) = self.pending.take() {
                        return Some(p.map(Step::Record));
                    }
                    continue;
                }
                // Only the first HEADER is fatal; a second one is a corrupt
                // frame like any other and `len` still delimits it.
                Err(e) if ft == FrameType::Header && self.header.is_none() => {
                    return self.fatal(self.err(at, ErrorKind::Corrupt(format!("bad header: {e}"))))
                }
                Err(e) => return Some(Err(self.err(at, ErrorKind::Corrupt(e.to_string())))),
            }
        }
    }

    /// Replaces the `DCHUNK` payload in `self.payload` by the `CHUNK`
    /// payload it encodes (the same chunk header, the records expanded
    /// with the file's schemas so far).
    fn expand_dense(&mut self) -> Result<(), DecodeError> {
        let mut c = Cursor::new(&self.payload);
        ChunkHeader::decode(&mut c)?;
        let body_at = c.pos();
        let mut out = Vec::with_capacity(self.payload.len() * 2);
        out.extend_from_slice(&self.payload[..body_at]);
        let tables = &self.tables;
        crate::dense::decode(
            &self.payload[body_at..],
            &|id| tables.schema(id).map(|s| &**s),
            &mut out,
        )
        .map_err(|e| DecodeError::new(body_at + e.pos, e.what))?;
        self.payload = out;
        Ok(())
    }

    fn fatal<T>(&mut self, e: ReadError) -> Option<Result<T, ReadError>> {
        self.finished = true;
        Some(Err(e))
    }

    /// Decodes one intact frame. `Ok(None)`: definitions absorbed.
    fn frame(&mut self, ft: FrameType, at: u64) -> Result<Option<Record>, DecodeError> {
        let payload = std::mem::take(&mut self.payload);
        let r = self.frame_inner(ft, at, &payload);
        self.payload = payload;
        r
    }

    fn frame_inner(
        &mut self,
        ft: FrameType,
        at: u64,
        p: &[u8],
    ) -> Result<Option<Record>, DecodeError> {
        let mut c = Cursor::new(p);
        Ok(Some(match ft {
            FrameType::Header => {
                if self.header.is_some() {
                    return Err(DecodeError::new(0, "second HEADER frame"));
                }
                let h = Header::decode(p)?;
                for s in &h.schemas {
                    self.tables.add_schema(s.clone())?;
                }
                let h = Arc::new(h);
                self.header = Some(h.clone());
                Record::Header(h)
            }
            FrameType::Schema => {
                let n = c.varint()?;
                for _ in 0..n {
                    let s = Schema::decode(&mut c)?;
                    self.tables.add_schema(s)?;
                }
                return Ok(None);
            }
            FrameType::Strings => {
                let n = c.varint()?;
                for _ in 0..n {
                    let id = defined_id(&mut c, "string id 0 is always the empty string")?;
                    let s = c.str()?;
                    self.tables.strings.insert(id, Arc::from(s));
                }
                return Ok(None);
            }
            FrameType::Locations => {
                let n = c.varint()?;
                for _ in 0..n {
                    let id = defined_id(&mut c, "location id 0 means unknown location")?;
                    let file = c.str()?;
                    let line = c.varint()?;
                    let col = c.varint()?;
                    let text = format!("{file}:{line}:{col}");
                    self.tables.locations.insert(id, Arc::from(text.as_str()));
                }
                return Ok(None);
            }
            // Format 1.1 definitions: decoded whole before any is applied,
            // so a corrupt frame defines nothing.
            FrameType::Stacks => {
                for (id, addrs) in frame::decode_stacks(p)? {
                    self.tables.stacks.insert(id, addrs);
                }
                return Ok(None);
            }
            FrameType::Mappings => {
                let list = frame::decode_mappings(p)?;
                frame::merge_mappings(&mut self.tables.mappings, list);
                return Ok(None);
            }
            FrameType::Profile => {
                self.tables.profile = Some(frame::decode_profile(p)?);
                return Ok(None);
            }
            FrameType::Finish => {
                self.finish = Some(frame::decode_finish(p)?);
                return Ok(None);
            }
            FrameType::Thread => {
                let tid = c.varint()?;
                let name = c.str()?.to_owned();
                self.tables.threads.insert(tid, name.clone());
                Record::Thread { tid, name }
            }
            FrameType::Clock => Record::Clock {
                ticks: c.varint()?,
                wall_ns: c.varint()?,
            },
            FrameType::Dropped => {
                let (tid, count) = (c.varint()?, c.varint()?);
                let (since_ticks, until_ticks) = (c.varint()?, c.varint()?);
                self.dropped_read = self.dropped_read.saturating_add(count);
                Record::Dropped {
                    tid,
                    count,
                    since_ticks,
                    until_ticks,
                }
            }
            FrameType::Round => Record::Round {
                watermark_ticks: c.varint()?,
            },
            FrameType::End => {
                let (events, dropped) = (c.varint()?, c.varint()?);
                self.sealed = true; // Only once the END frame decoded.
                self.end = Some((at, events, dropped));
                Record::End { events, dropped }
            }
            // (A `DCHUNK` was expanded into its `CHUNK` before.)
            FrameType::Chunk | FrameType::DChunk => {
                let header = ChunkHeader::decode(&mut c)?;
                let part = ChunkPart {
                    at,
                    state: header.state,
                    header,
                    body_at: c.pos(),
                    pos: 0,
                    walked: 0,
                };
                return Ok(self.chunk_part(part, p));
            }
        }))
    }
}

impl<R: Read> FileReader<R> {
    /// Decodes the next at most [`MAX_EVENTS_PER_RECORD`] events of the
    /// chunk `part` (its frame payload is `p`). Leaves `self.part` set when
    /// events remain, and `self.pending` holding the damage found, if any;
    /// `None` when there is nothing to hand out (damage right away; an
    /// intact empty chunk is an empty record).
    fn chunk_part(&mut self, mut part: ChunkPart, p: &[u8]) -> Option<Record> {
        let body = &p[part.body_at..];
        let mut events = Vec::with_capacity(
            (part.header.count.saturating_sub(part.walked) as usize).min(MAX_EVENTS_PER_RECORD),
        );
        let header = self.header.clone().expect("header read first");
        let tables = &self.tables;
        let tid = part.header.tid;
        let mut paused_at = None;
        let res = walk_from(
            body,
            part.pos,
            &mut part.state,
            |id| tables.schema(id).map(|s| &**s),
            |ev| {
                if events.len() == MAX_EVENTS_PER_RECORD {
                    // Enough for one record: resume here next time.
                    paused_at = Some(ev.offset);
                    return Err(DecodeError::new(ev.offset, "paused"));
                }
                let schema = tables.schema(ev.schema.id).unwrap().clone();
                let mut values = Vec::with_capacity(ev.values.len());
                for v in ev.values {
                    values.push(resolve(tables, *v).map_err(|m| {
                        DecodeError::new(ev.offset, format!("event at +{}: {m}", ev.offset))
                    })?);
                }
                events.push(Event {
                    ticks: ev.ticks,
                    ns: header.ticks_to_ns(ev.ticks),
                    tid,
                    schema,
                    values,
                });
                Ok(())
            },
        );
        let walked = part.walked.saturating_add(events.len() as u64);
        let problem = match (res, paused_at) {
            (Err(_), Some(pos)) => {
                self.part = Some(ChunkPart {
                    pos,
                    walked,
                    ..part
                });
                None
            }
            (Ok(_), _) if walked != part.header.count => Some(DecodeError::new(
                part.body_at,
                format!("chunk says {} events but holds {walked}", part.header.count),
            )),
            (Ok(_), _) => None,
            (Err(e), None) => Some(DecodeError::new(part.body_at + e.pos, e.what)),
        };
        let at = part.at;
        if let Some(e) = problem {
            // Keep the good prefix; report the damage next.
            let off = at + FRAME_HEADER_LEN as u64 + e.pos as u64;
            self.pending = Some(Err(self.err(
                off,
                ErrorKind::Corrupt(format!("chunk at byte {at}: {}", e.what)),
            )));
            if events.is_empty() {
                return None;
            }
        }
        self.events_read = self.events_read.saturating_add(events.len() as u64);
        Some(Record::Events {
            offset: at,
            // The frame's own length, as `next_raw` gives it.
            frame_len: self.offset - at,
            tid,
            events,
        })
    }
}

/// Reads the id of a definition; id 0 is reserved and never defined
/// (docs/format.md section 7, rule 5).
fn defined_id(c: &mut Cursor<'_>, why: &str) -> Result<u64, DecodeError> {
    let at = c.pos();
    match c.varint()? {
        0 => Err(DecodeError::new(at, format!("id 0 defined ({why})"))),
        id => Ok(id),
    }
}

fn resolve(t: &Tables, v: RawValue<'_>) -> Result<Value, String> {
    Ok(match v {
        RawValue::U(x) | RawValue::Task(x) => Value::U(x),
        RawValue::I(x) => Value::I(x),
        RawValue::Bool(b) => Value::Bool(b),
        RawValue::F(f) => Value::F(f),
        RawValue::Str(s) => Value::Str(Arc::from(s)),
        RawValue::Istr(0) => Value::Str(Arc::from("")),
        RawValue::Istr(id) => Value::Str(
            t.strings
                .get(&id)
                .cloned()
                .ok_or_else(|| format!("string id {id} was never defined"))?,
        ),
        RawValue::Loc(0) => Value::Loc { id: 0, text: None },
        RawValue::Loc(id) => Value::Loc {
            id,
            text: Some(
                t.locations
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| format!("location id {id} was never defined"))?,
            ),
        },
        RawValue::Worker(w) => Value::Worker((w != crate::NO_WORKER).then_some(w)),
    })
}

impl<R: Read> Iterator for FileReader<R> {
    type Item = Result<Record, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record()
    }
}
