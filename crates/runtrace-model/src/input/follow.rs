//! Following a recording while it is written (`runtrace top`): the files
//! of a directory (or path prefix) read as they grow, the `.active` file
//! and the files it is sealed and rotated into, with the same decoding,
//! ordering and model as [`super::read`].
//!
//! A file is read through its open descriptor, so a rename (`.active` to
//! sealed) or an eviction of a file being read loses nothing; only whole
//! frames are handed to the reader (a frame the writer is still writing
//! waits for the next [`Follow::poll`]). Files are read in their order:
//! the next one starts once the current one is sealed, or once a later
//! file exists and the current one stopped growing (its writer died).
//!
//! ```
//! use runtrace_model::input::follow::Follow;
//! use runtrace_model::{event::Ev, model::Model, pass::{Pass, Wants}, synth::TraceBuilder};
//! #[derive(Default)]
//! struct Count(u64);
//! impl Pass for Count {
//!     fn wants(&self) -> Wants { Wants::RUNTIME }
//!     fn event(&mut self, _: &Ev, _: &Model) { self.0 += 1 }
//! }
//! let dir = tempfile::tempdir().unwrap();
//! let mut b = TraceBuilder::new();
//! b.poll_start(1, 0, 1_000, 7, 0, 0);
//! b.poll_end(1, 0, 3_000, 7, true);
//! std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
//! let mut f = Follow::new(dir.path());
//! let mut n = Count::default();
//! f.poll(&mut n).unwrap();
//! f.flush(&mut n); // the events of the last writer round
//! assert_eq!(n.0, 2);
//! assert!(f.status().sealed_all);
//! ```

use super::{FileRead, Reading};
use crate::model::Model;
use crate::pass::Pass;
use runtrace_format::files;
use runtrace_format::FileReader;
use std::cell::Cell;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes of a frame header: type u8, length u32, crc u32 (format.md
/// section 2).
const FRAME_HEADER: u64 = 9;
/// The magic's length.
const MAGIC: u64 = 8;

/// A recording followed as it is written. See the module docs.
pub struct Follow {
    source: PathBuf,
    reading: Option<Reading>,
    model: Model,
    /// Files opened and not finished, in reading order.
    open: Vec<Followed>,
    /// Keys (path without `.active`) of the files read to their end.
    done: Vec<PathBuf>,
    /// Keys of every file seen in a listing.
    seen: Vec<PathBuf>,
    notes: Vec<String>,
    finished: bool,
    last_growth: Instant,
    bytes: u64,
    /// The source was a directory when first listed.
    was_dir: bool,
}

/// One file being read.
struct Followed {
    key: PathBuf,
    limit: Rc<Cell<u64>>,
    /// The end of the whole frames found so far.
    scanned: u64,
    file: Rc<File>,
    reader: FileReader<Growing>,
    state: Option<FileRead>,
    last_len: u64,
    stopped: Option<String>,
}

/// What [`Follow::status`] tells.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Files being read or read, by name (the names they have now).
    pub files: Vec<PathBuf>,
    /// Bytes read from them.
    pub bytes: u64,
    /// Events read (all kinds).
    pub events: u64,
    /// Events the recorder reported dropped.
    pub dropped: u64,
    /// Of `dropped`, profiler samples the writer could not keep
    /// ([`ReadStats::profiler_dropped`](super::ReadStats::profiler_dropped)).
    pub profiler_dropped: u64,
    /// Every file read is sealed and none is being written.
    pub sealed_all: bool,
    /// The recording wrote its FINISH frame (it ended cleanly).
    pub finished: bool,
    /// Time since a file last grew.
    pub idle: Duration,
    /// What happened to files (evicted before being read, damage).
    pub notes: Vec<String>,
}

impl Follow {
    /// Follows the trace files of `source`: a directory, or the path
    /// prefix a recording was made with (`traces/trace`).
    pub fn new(source: &Path) -> Follow {
        Follow {
            source: source.to_path_buf(),
            reading: None,
            model: Model::new(),
            open: Vec::new(),
            done: Vec::new(),
            seen: Vec::new(),
            notes: Vec::new(),
            finished: false,
            last_growth: Instant::now(),
            bytes: 0,
            was_dir: false,
        }
    }

    /// The model filled so far.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The model, for a caller that adjusts it between polls (restore
    /// what it changes).
    pub fn model_mut(&mut self) -> &mut Model {
        &mut self.model
    }

    /// Reads what was written since the last poll, feeding `pass` the
    /// events it wants in timestamp order (those of the newest writer
    /// round wait for the next round, as in [`super::read`]). Wrap a pass
    /// that wants lifecycle records in [`crate::lifecycle::Tracked`].
    /// Returns the bytes read; an error when the source cannot be listed
    /// (a directory removed: following goes on if it comes back).
    pub fn poll<P: Pass>(&mut self, pass: &mut P) -> Result<u64, String> {
        let reading = self
            .reading
            .get_or_insert_with(|| Reading::new(pass.wants()));
        let listed = list(&self.source, &mut self.was_dir);
        let paths = match listed {
            Ok(p) => p,
            Err(e) => {
                // Read what is open all the same: the descriptors survive.
                let n = read_open(
                    &mut self.open,
                    reading,
                    pass,
                    &mut self.model,
                    &mut self.done,
                );
                self.bytes += n;
                return Err(e);
            }
        };
        for p in &paths {
            let key = key_of(p);
            if self.done.contains(&key) || self.open.iter().any(|f| f.key == key) {
                continue;
            }
            if !self.seen.contains(&key) {
                self.seen.push(key.clone());
            }
            match open(p, key.clone()) {
                Ok(f) => self.open.push(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // Renamed (sealed) since the listing: found next poll.
                }
                Err(e) => {
                    reading.error(format!("{}: cannot open: {e}", p.display()));
                    self.done.push(key);
                }
            }
        }
        // A gap in a recording's file indexes: files rotated and evicted
        // between two polls, never read.
        self.seen.sort_by_key(|k| split_index(k));
        for w in self.seen.windows(2) {
            if let (Some((pa, a)), Some((pb, b))) = (split_index(&w[0]), split_index(&w[1])) {
                if pa == pb && b > a + 1 {
                    let note = if b == a + 2 {
                        format!("{}.{}.bin: evicted before it was read", pa, a + 1)
                    } else {
                        format!(
                            "{pa}.{}.bin to {pa}.{}.bin: evicted before they were read",
                            a + 1,
                            b - 1
                        )
                    };
                    if !self.notes.contains(&note) {
                        self.notes.push(note);
                    }
                }
            }
        }
        let mut order: Vec<PathBuf> = self.open.iter().map(|f| f.key.clone()).collect();
        files::sort_trace_paths(&mut order);
        self.open
            .sort_by_key(|f| order.iter().position(|k| *k == f.key));
        let n = read_open(
            &mut self.open,
            reading,
            pass,
            &mut self.model,
            &mut self.done,
        );
        for f in &self.open {
            if let Some(s) = &f.stopped {
                if !self.notes.contains(s) {
                    self.notes.push(s.clone());
                }
            }
        }
        if n > 0 {
            self.last_growth = Instant::now();
        }
        self.bytes += n;
        self.finished |= self.finish_seen();
        if self.finished && self.open.is_empty() {
            self.flush(pass);
        }
        Ok(n)
    }

    /// Releases the events held for ordering (normally until the writer's
    /// next round): for a recording that ended or stalled.
    pub fn flush<P: Pass>(&mut self, pass: &mut P) {
        if let Some(r) = self.reading.as_mut() {
            r.flush(pass, &self.model);
        }
    }

    fn finish_seen(&self) -> bool {
        self.reading.as_ref().is_some_and(|r| r.finished_recording)
    }

    /// What was read, and how the recording is doing.
    pub fn status(&self) -> Status {
        let (events, dropped, profiler_dropped, errors) = match &self.reading {
            Some(r) => {
                let st = r.stats();
                let open: u64 = self
                    .open
                    .iter()
                    .filter_map(|f| f.state.as_ref().map(|s| s.events))
                    .sum();
                let errors = st.errors.clone();
                (st.events + open, st.dropped, st.profiler_dropped, errors)
            }
            None => (0, 0, 0, Vec::new()),
        };
        let mut notes = self.notes.clone();
        notes.extend(errors);
        let mut names: Vec<PathBuf> = self.done.clone();
        names.extend(self.open.iter().map(|f| f.key.clone()));
        files::sort_trace_paths(&mut names);
        Status {
            files: names,
            bytes: self.bytes,
            events,
            dropped,
            profiler_dropped,
            sealed_all: self.open.is_empty() && !self.done.is_empty(),
            finished: self.finished,
            idle: self.last_growth.elapsed(),
            notes,
        }
    }
}

/// Reads the open files in order; returns the bytes read.
fn read_open<P: Pass>(
    open: &mut Vec<Followed>,
    reading: &mut Reading,
    pass: &mut P,
    model: &mut Model,
    done: &mut Vec<PathBuf>,
) -> u64 {
    let mut total = 0;
    let i = 0;
    while i < open.len() {
        let later_exists = i + 1 < open.len();
        let f = &mut open[i];
        let n = f.read(reading, pass, model);
        total += n;
        let sealed = f.reader.sealed();
        let dead = f.stopped.is_some() || (later_exists && n == 0);
        if sealed || dead {
            let f = open.remove(i);
            done.push(f.key.clone());
            f.end(reading, model);
            continue;
        }
        // Later files wait for this one (time order).
        break;
    }
    total
}

impl Followed {
    /// Reads the whole frames written since last time.
    fn read<P: Pass>(&mut self, reading: &mut Reading, pass: &mut P, model: &mut Model) -> u64 {
        let before = self.reader.offset();
        let len = match self.file.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                self.stopped = Some(format!("{}: cannot read: {e}", self.key.display()));
                return 0;
            }
        };
        if len < self.last_len {
            self.stopped = Some(format!(
                "{}: shrank from {} to {len} bytes; stopped reading it",
                self.key.display(),
                self.last_len
            ));
            return 0;
        }
        self.last_len = len;
        self.scan(len);
        if self.scanned <= MAGIC {
            return 0; // Not even a whole HEADER frame yet.
        }
        self.limit.set(self.scanned);
        if self.reader.offset() >= self.scanned {
            return 0;
        }
        self.reader.resume();
        let state = self.state.get_or_insert_with(|| reading.file());
        // After damage that ends the file the reader yields nothing more.
        while let Some(item) = self.reader.next_raw() {
            reading.item(item, state, pass, model);
        }
        if self.reader.finish().is_some() {
            reading.finished_recording = true;
        }
        if state.damaged && !self.reader.sealed() && self.stopped.is_none() {
            self.stopped = Some(format!(
                "{}: damaged at byte {}; stopped reading it",
                self.key.display(),
                self.reader.offset()
            ));
        }
        self.reader.offset() - before
    }

    /// Finds the whole frames in the first `len` bytes.
    fn scan(&mut self, len: u64) {
        if self.scanned == 0 {
            if len < MAGIC {
                return;
            }
            self.scanned = MAGIC;
        }
        let mut hdr = [0u8; FRAME_HEADER as usize];
        let mut at = self.scanned;
        while at + FRAME_HEADER <= len {
            if self.file.read_exact_at(&mut hdr, at).is_err() {
                break;
            }
            let ty = hdr[0];
            let flen = u32::from_le_bytes([hdr[1], hdr[2], hdr[3], hdr[4]]) as u64;
            if ty == 0 || flen > runtrace_format::MAX_FRAME_LEN as u64 {
                // Zeroed space or garbage, which a writer never leaves
                // (a file's size grows with the bytes written): hand it
                // all over for the reader to say where and what.
                at = len;
                break;
            }
            if at + FRAME_HEADER + flen > len {
                break;
            }
            at += FRAME_HEADER + flen;
        }
        // Only frames after the magic count; the magic alone is not handed
        // over (the reader would call a file of eight bytes truncated).
        self.scanned = at;
    }

    fn end(mut self, reading: &mut Reading, model: &mut Model) {
        let state = self.state.take().unwrap_or_else(|| reading.file());
        reading.end_file(&self.reader, state, model);
    }
}

/// Opens `path` for following.
fn open(path: &Path, key: PathBuf) -> io::Result<Followed> {
    let m = std::fs::metadata(path)?;
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let file = Rc::new(File::open(path)?);
    let limit = Rc::new(Cell::new(0));
    let src = Growing {
        file: file.clone(),
        limit: limit.clone(),
        at: 0,
        buf: Vec::new(),
        pos: 0,
    };
    let mut reader = FileReader::new(src, path);
    // Dense chunks are decoded as they are (decode.rs).
    reader.keep_dense(true);
    Ok(Followed {
        key,
        limit,
        scanned: 0,
        file,
        reader,
        state: None,
        last_len: 0,
        stopped: None,
    })
}

/// The trace files of `source` now, in reading order: a directory's, a
/// single file, or those of a path prefix (none yet: the recording may
/// not have started).
fn list(source: &Path, was_dir: &mut bool) -> Result<Vec<PathBuf>, String> {
    let mut v = if source.is_dir() {
        *was_dir = true;
        match std::fs::read_dir(source) {
            Ok(rd) => rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| files::is_trace_file(p) || files::is_active_trace_file(p))
                .collect(),
            Err(e) => return Err(format!("{}: cannot read: {e}", source.display())),
        }
    } else if *was_dir {
        return Err(format!(
            "{}: the directory is gone (removed or renamed)",
            source.display()
        ));
    } else if source.is_file() {
        vec![source.to_path_buf()]
    } else {
        match source.parent() {
            Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => {
                return Err(format!("{}: no such directory", source.display()))
            }
            _ => files::with_prefix(source),
        }
    };
    files::sort_trace_paths(&mut v);
    Ok(v)
}

/// (path prefix, N) of a key `PREFIX.N.bin`.
fn split_index(k: &Path) -> Option<(String, u64)> {
    let s = k.to_str()?;
    let stem = s.strip_suffix(".bin")?;
    let dot = stem.rfind('.')?;
    Some((stem[..dot].to_string(), stem[dot + 1..].parse().ok()?))
}

/// A file's name without `.active`: the same file before and after it is
/// sealed.
fn key_of(p: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let s = p.as_os_str().as_bytes();
    match s.strip_suffix(b".active") {
        Some(b) => PathBuf::from(std::ffi::OsStr::from_bytes(b)),
        None => p.to_path_buf(),
    }
}

/// A file's bytes up to `limit` (the end of its whole frames), read
/// through its open descriptor.
struct Growing {
    file: Rc<File>,
    limit: Rc<Cell<u64>>,
    /// File offset of the byte after `buf`.
    at: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for Growing {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.buf.len() {
            let limit = self.limit.get();
            if self.at >= limit {
                return Ok(0);
            }
            let want = (limit - self.at).min(1 << 20) as usize;
            self.buf.resize(want, 0);
            let n = self.file.read_at(&mut self.buf, self.at)?;
            self.buf.truncate(n);
            self.pos = 0;
            self.at += n as u64;
            if n == 0 {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
