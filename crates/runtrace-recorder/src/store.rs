//! Where the writer's segments go: one small trait, [`SegmentStore`], with
//! two implementations.
//!
//! A segment is what file mode calls a file: a complete, standalone trace
//! file image (header, definitions, rounds, `END`), written a round at a
//! time and sealed by size (and, in memory mode, by age).
//!
//! - [`FileStore`]: today's local files, `PATH.N.bin.active` appended to
//!   round by round (readable while written), fsynced and renamed to
//!   `PATH.N.bin` when sealed, the oldest sealed files evicted over
//!   `max_total_size`.
//! - [`MemoryStore`]: the flight recorder's RAM ring. The open segment is
//!   a `Vec<u8>`; sealing freezes it into a `bytes::Bytes` kept in a ring,
//!   the oldest dropped (and counted) over the memory budget. No file I/O.
//!
//! The trait streams (open, append, cut back, seal) rather than taking a
//! finished segment, because file mode writes each round as it is drained,
//! so a crash loses at most one round.

use crate::error::RecordError;
use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// What the writer knows of a sealed segment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SegmentMeta {
    /// The file index in its header (`N` of `PATH.N.bin`).
    pub(crate) index: u64,
    /// Trace ticks when it was sealed: every event it holds is older.
    pub(crate) end_ticks: u64,
    /// Its `END` totals.
    pub(crate) events: u64,
    pub(crate) dropped: u64,
    /// Length of its closing `END` frame, the last bytes of the segment
    /// (a snapshot puts a `FINISH` frame before it in its last file).
    pub(crate) end_len: usize,
}

/// Where segments are written and kept.
pub(crate) trait SegmentStore: Send {
    /// Starts segment `index` (nothing is open).
    fn open(&mut self, index: u64) -> Result<(), RecordError>;
    /// Whether a segment is open.
    fn is_open(&self) -> bool;
    /// Appends to the open segment.
    fn append(&mut self, bytes: &[u8]) -> Result<(), RecordError>;
    /// Cuts the open segment back to `len` bytes (a round that failed).
    fn truncate(&mut self, len: u64);
    /// Forgets the open segment, which has no complete header.
    fn abandon(&mut self);
    /// Seals the open segment, whose last bytes are its `END` frame. The
    /// segment counts as sealed even when this fails (the next one gets
    /// the next index).
    fn seal(&mut self, meta: SegmentMeta) -> Result<(), RecordError>;
    /// Sealed segments deleted or dropped to stay within the limit.
    fn evicted(&self) -> u64;
    /// The sealed segments still held in memory, oldest first (empty for
    /// files). `Bytes` clones share the memory.
    fn kept(&self) -> Vec<(SegmentMeta, Bytes)>;
    /// The most bytes held at once (sealed and open), for memory stores.
    fn peak_bytes(&self) -> u64;
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> RecordError {
    RecordError::Io(format!("{}: {what}: {e}", path.display()))
}

/// The name of file `index` of a recording with prefix `prefix`.
pub(crate) fn file_path(prefix: &Path, index: u64, active: bool) -> PathBuf {
    let mut s = prefix.to_path_buf().into_os_string();
    s.push(format!(".{index}.bin"));
    if active {
        s.push(".active");
    }
    PathBuf::from(s)
}

/// Today's local files (see the module doc).
pub(crate) struct FileStore {
    prefix: PathBuf,
    max_total: u64,
    file: Option<File>,
    index: u64,
    len: u64,
    sealed: VecDeque<(PathBuf, u64)>,
    evicted: u64,
}

impl FileStore {
    pub(crate) fn new(prefix: PathBuf, max_total: u64) -> FileStore {
        FileStore {
            prefix,
            max_total,
            file: None,
            index: 0,
            len: 0,
            sealed: VecDeque::new(),
            evicted: 0,
        }
    }

    /// Deletes the oldest sealed files while the total exceeds the budget
    /// (the newest sealed file is always kept).
    fn evict(&mut self) {
        let mut total: u64 = self.sealed.iter().map(|(_, n)| n).sum();
        while total > self.max_total && self.sealed.len() > 1 {
            let (p, n) = self.sealed.pop_front().unwrap_or_default();
            let _ = std::fs::remove_file(&p);
            self.evicted += 1;
            total -= n;
        }
    }
}

impl SegmentStore for FileStore {
    fn open(&mut self, index: u64) -> Result<(), RecordError> {
        let path = file_path(&self.prefix, index, true);
        let f = File::create(&path).map_err(|e| io_err(&path, "cannot create trace file", e))?;
        self.file = Some(f);
        self.index = index;
        self.len = 0;
        Ok(())
    }

    fn is_open(&self) -> bool {
        self.file.is_some()
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        let Some(f) = self.file.as_mut() else {
            return Err(RecordError::Io("no open trace file".into()));
        };
        if let Err(e) = f.write_all(bytes) {
            return Err(io_err(
                &file_path(&self.prefix, self.index, true),
                "write failed",
                e,
            ));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn truncate(&mut self, len: u64) {
        if let Some(f) = self.file.as_mut() {
            let _ = f.set_len(len);
            let _ = f.seek(SeekFrom::Start(len));
            self.len = len;
        }
    }

    fn abandon(&mut self) {
        // No header, no file: leave nothing half-made behind.
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(file_path(&self.prefix, self.index, true));
        }
    }

    fn seal(&mut self, _meta: SegmentMeta) -> Result<(), RecordError> {
        let active = file_path(&self.prefix, self.index, true);
        let done = file_path(&self.prefix, self.index, false);
        let synced = match self.file.take() {
            Some(f) => f
                .sync_data()
                .map_err(|e| io_err(&active, "fsync failed", e)),
            None => Ok(()),
        };
        std::fs::rename(&active, &done)
            .map_err(|e| io_err(&active, "cannot rename sealed file", e))?;
        self.sealed.push_back((done, self.len));
        self.evict();
        synced
    }

    fn evicted(&self) -> u64 {
        self.evicted
    }

    fn kept(&self) -> Vec<(SegmentMeta, Bytes)> {
        Vec::new()
    }

    fn peak_bytes(&self) -> u64 {
        0
    }
}

/// The flight recorder's RAM ring (see the module doc).
///
/// Budget rule: after each seal, the oldest sealed segments are dropped
/// while the sealed ones plus room for one more segment (`segment_size`)
/// exceed `budget`; the newest sealed one is always kept. The open segment
/// can pass `segment_size` by one round's output (as a file can pass
/// `max_file_size`), so the bytes held stay within `budget` plus one
/// round.
pub(crate) struct MemoryStore {
    budget: u64,
    segment_size: u64,
    open: Option<Vec<u8>>,
    ring: VecDeque<(SegmentMeta, Bytes)>,
    /// Bytes of the sealed segments in `ring`.
    held: u64,
    dropped: u64,
    peak: u64,
}

impl MemoryStore {
    pub(crate) fn new(budget: u64, segment_size: u64) -> MemoryStore {
        MemoryStore {
            budget,
            segment_size,
            open: None,
            ring: VecDeque::new(),
            held: 0,
            dropped: 0,
            peak: 0,
        }
    }
}

impl SegmentStore for MemoryStore {
    fn open(&mut self, _index: u64) -> Result<(), RecordError> {
        // One allocation per segment, on the writer thread: the size it is
        // sealed at, so rounds append without growing it (but the last).
        let cap = usize::try_from(self.segment_size).unwrap_or(usize::MAX);
        self.open = Some(Vec::with_capacity(cap));
        Ok(())
    }

    fn is_open(&self) -> bool {
        self.open.is_some()
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), RecordError> {
        let Some(v) = self.open.as_mut() else {
            return Err(RecordError::Io("no open memory segment".into()));
        };
        // Past its size (the round that seals it), grow by exactly what
        // is appended, not by doubling: the budget's slack is one round.
        v.reserve_exact(bytes.len());
        v.extend_from_slice(bytes);
        self.peak = self.peak.max(self.held + v.capacity() as u64);
        Ok(())
    }

    fn truncate(&mut self, len: u64) {
        if let Some(v) = self.open.as_mut() {
            v.truncate(len as usize);
        }
    }

    fn abandon(&mut self) {
        self.open = None;
    }

    fn seal(&mut self, meta: SegmentMeta) -> Result<(), RecordError> {
        let Some(mut v) = self.open.take() else {
            return Ok(());
        };
        // Hold exactly the bytes written (a copy when the last round grew
        // the vector past its size, or a segment sealed early by age).
        v.shrink_to_fit();
        self.held += v.len() as u64;
        self.ring.push_back((meta, Bytes::from(v)));
        while self.held + self.segment_size > self.budget && self.ring.len() > 1 {
            if let Some((_, b)) = self.ring.pop_front() {
                self.held -= b.len() as u64;
                self.dropped += 1;
            }
        }
        self.peak = self.peak.max(self.held);
        Ok(())
    }

    fn evicted(&self) -> u64 {
        self.dropped
    }

    fn kept(&self) -> Vec<(SegmentMeta, Bytes)> {
        self.ring.iter().cloned().collect()
    }

    fn peak_bytes(&self) -> u64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(index: u64) -> SegmentMeta {
        SegmentMeta {
            index,
            ..SegmentMeta::default()
        }
    }

    /// The ring drops the oldest segments over its budget, counts them,
    /// and keeps the newest.
    #[test]
    fn memory_ring_keeps_within_its_budget() {
        let mut s = MemoryStore::new(10_000, 2_000);
        for i in 0..20 {
            s.open(i).unwrap();
            s.append(&[i as u8; 1_500]).unwrap();
            s.seal(meta(i)).unwrap();
        }
        let kept = s.kept();
        // 8_000 bytes of room for sealed ones: 5 segments of 1_500.
        assert_eq!(kept.len(), 5);
        assert_eq!(kept[0].0.index, 15);
        assert_eq!(kept[4].1[0], 19);
        assert_eq!(s.evicted(), 15);
        assert!(s.peak_bytes() <= 10_000, "{}", s.peak_bytes());
    }

    /// A cut-back round leaves the open segment as it was.
    #[test]
    fn truncate_undoes_an_append() {
        let mut s = MemoryStore::new(10_000, 2_000);
        s.open(0).unwrap();
        s.append(b"abc").unwrap();
        s.append(b"def").unwrap();
        s.truncate(3);
        s.seal(meta(0)).unwrap();
        assert_eq!(&s.kept()[0].1[..], b"abc");
    }
}
