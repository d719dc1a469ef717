//! One timestamp-ordered event stream over the files of a recording
//! (docs/format.md section 8).
//!
//! Chunks of different threads interleave in a file. The writer ends every
//! drain round with a `ROUND` frame carrying the tick at which the round
//! began; every event with an earlier timestamp was published before that
//! round and so sits in that round or an earlier one. The stream holds
//! events in a heap and releases those older than the previous round's
//! watermark when a `ROUND` arrives (a one-round lag that also absorbs a
//! producer preempted between its clock read and its publish). Memory is
//! bounded by about two rounds of events, and in any case by
//! [`MAX_PENDING_BYTES`]: a file without `ROUND` frames (or with a huge
//! round) has its oldest pending events released early, counted in
//! [`StreamStats::forced_releases`] (events released out of order then
//! show in [`StreamStats::late_events`]).
//!
//! ```no_run
//! use runtrace_format::merge::EventStream;
//! let mut s = EventStream::open(&["trace.0.bin", "trace.1.bin"]).unwrap();
//! while let Some(ev) = s.next_event() {
//!     println!("{} {}", ev.ns, ev.schema.display_name());
//! }
//! for e in s.errors() { eprintln!("{e}"); }
//! ```

use crate::frame::Header;
use crate::reader::{FileReader, ReadError, Record, Tables};
use crate::value::{Event, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bound on the memory of the events held for ordering, in bytes (100
/// MiB): each event counts its heap entry, its values and the text of its
/// string values (`weight`). Past it, the oldest are released down to
/// half of it.
pub const MAX_PENDING_BYTES: usize = 100 << 20;

/// The bytes an event held for ordering takes (an upper bound: an interned
/// string shared by many events counts for each).
fn weight(e: &Event) -> usize {
    let text: usize = e
        .values
        .iter()
        .map(|v| match v {
            Value::Str(s) => s.len() + 16,
            Value::Loc { text: Some(t), .. } => t.len() + 16,
            _ => 0,
        })
        .sum();
    std::mem::size_of::<Pending>() + e.values.capacity() * std::mem::size_of::<Value>() + text
}

struct Pending(Event, u64);

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.0.ticks, self.1) == (o.0.ticks, o.1)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0.ticks, self.1).cmp(&(o.0.ticks, o.1))
    }
}

/// Totals gathered while streaming.
#[derive(Debug, Default, Clone)]
pub struct StreamStats {
    /// Files opened.
    pub files: u64,
    /// Files that ended with an `END` frame.
    pub sealed: u64,
    /// Events reported lost (`DROPPED` frames).
    pub dropped: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Files that did not end with an `END` frame (cut short).
    pub unsealed_files: Vec<PathBuf>,
    /// Events that arrived after later events had already been released
    /// (out of order by more than one writer round; 0 in practice).
    pub late_events: u64,
    /// Times the pending events outgrew [`MAX_PENDING_BYTES`] and the
    /// oldest were released without waiting for a `ROUND` frame.
    pub forced_releases: u64,
}

/// A callback for the non-event records of a stream.
type RecordHook = Box<dyn FnMut(&Record, &Tables)>;

/// Timestamp-ordered events across files. See the module docs.
pub struct EventStream {
    paths: VecDeque<PathBuf>,
    cur: Option<FileReader<crate::reader::OpenFile>>,
    heap: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    release_below: u64,
    last_watermark: u64,
    errors: Vec<ReadError>,
    stats: StreamStats,
    headers: Vec<Arc<Header>>,
    ready: VecDeque<Event>,
    on_record: Option<RecordHook>,
    last_released: u64,
    /// Bytes of the events in `heap` (see [`MAX_PENDING_BYTES`]).
    pending_bytes: usize,
    /// Releasing early down to half the bound.
    forcing: bool,
}

impl EventStream {
    /// Opens the files (in the order given, which should be `trace.0.bin`,
    /// `trace.1.bin`, ...; see [`sort_trace_paths`]).
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> std::io::Result<Self> {
        for p in paths {
            std::fs::metadata(p.as_ref()).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", p.as_ref().display()))
            })?;
        }
        Ok(EventStream {
            paths: paths.iter().map(|p| p.as_ref().to_path_buf()).collect(),
            cur: None,
            heap: BinaryHeap::new(),
            seq: 0,
            release_below: 0,
            last_watermark: 0,
            errors: Vec::new(),
            stats: StreamStats::default(),
            headers: Vec::new(),
            ready: VecDeque::new(),
            on_record: None,
            last_released: 0,
            pending_bytes: 0,
            forcing: false,
        })
    }

    /// Calls `f` for every non-event record (threads, drops, clocks, ...).
    pub fn on_record(&mut self, f: impl FnMut(&Record, &Tables) + 'static) {
        self.on_record = Some(Box::new(f));
    }

    /// Damage found so far (truncation, corruption), in order.
    pub fn errors(&self) -> &[ReadError] {
        &self.errors
    }

    /// Totals so far.
    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    /// Headers of the files opened so far.
    pub fn headers(&self) -> &[Arc<Header>] {
        &self.headers
    }

    /// The next event in timestamp order, or None at the end.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if self.pending_bytes > MAX_PENDING_BYTES && !self.forcing {
                self.forcing = true;
                self.stats.forced_releases += 1;
            }
            if self.forcing {
                if self.pending_bytes > MAX_PENDING_BYTES / 2 {
                    return self.release();
                }
                self.forcing = false;
            }
            if let Some(Reverse(top)) = self.heap.peek() {
                if top.0.ticks < self.release_below {
                    return self.release();
                }
            }
            if !self.pump() {
                // Everything is read: drain the heap.
                return self.release();
            }
        }
    }

    fn release(&mut self) -> Option<Event> {
        let Reverse(Pending(ev, _)) = self.heap.pop()?;
        self.pending_bytes -= weight(&ev);
        if ev.ticks < self.last_released {
            self.stats.late_events = self.stats.late_events.saturating_add(1);
        }
        self.last_released = self.last_released.max(ev.ticks);
        Some(ev)
    }

    /// Reads one record; false when every file is exhausted.
    fn pump(&mut self) -> bool {
        loop {
            if self.cur.is_none() {
                let Some(p) = self.paths.pop_front() else {
                    return false;
                };
                match FileReader::open(&p) {
                    Ok(r) => {
                        self.stats.files += 1;
                        self.cur = Some(r);
                    }
                    Err(e) => {
                        self.errors.push(ReadError {
                            file: p,
                            offset: 0,
                            kind: crate::ErrorKind::Io(e.to_string()),
                        });
                        continue;
                    }
                }
            }
            let r = self.cur.as_mut().unwrap();
            match r.next() {
                None => {
                    self.stats.bytes = self.stats.bytes.saturating_add(r.offset());
                    if r.sealed() {
                        self.stats.sealed += 1;
                    } else {
                        self.stats.unsealed_files.push(r.path().to_path_buf());
                    }
                    self.cur = None;
                }
                Some(Err(e)) => self.errors.push(e),
                Some(Ok(Record::Events { events, .. })) => {
                    for ev in events {
                        self.pending_bytes += weight(&ev);
                        self.seq += 1;
                        self.heap.push(Reverse(Pending(ev, self.seq)));
                    }
                    return true;
                }
                Some(Ok(rec)) => {
                    match &rec {
                        Record::Round { watermark_ticks } => {
                            self.release_below = self.last_watermark;
                            self.last_watermark = *watermark_ticks;
                        }
                        Record::Header(h) => self.headers.push(h.clone()),
                        Record::Dropped { count, .. } => {
                            self.stats.dropped = self.stats.dropped.saturating_add(*count)
                        }
                        _ => {}
                    }
                    if let Some(f) = self.on_record.as_mut() {
                        f(&rec, r.tables());
                    }
                    return true;
                }
            }
        }
    }
}

/// Sorts paths so `x.2.bin` comes before `x.10.bin`; kept here for
/// existing callers, the rules live in [`crate::files`].
///
/// ```
/// use std::path::PathBuf;
/// let mut v: Vec<PathBuf> = ["t.10.bin", "t.2.bin"].map(PathBuf::from).into();
/// runtrace_format::merge::sort_trace_paths(&mut v);
/// assert_eq!(v, ["t.2.bin", "t.10.bin"].map(PathBuf::from));
/// ```
pub use crate::files::sort_trace_paths;
