//! From trace files to ordered events and a [`Model`]: decoding
//! (`decode`, over [`FileReader::next_raw`], no `Event`/`Value`
//! allocation), the roles of the built-in events generated from the
//! catalog (`roles`), and time ordering one writer round behind
//! (`order`). [`read`] feeds any [`Pass`] (or pair of passes) in one read.
//!
//! ```
//! use runtrace_model::input::{read, sorted};
//! use runtrace_model::{event::Ev, model::Model, pass::{Pass, Wants}};
//! struct Nothing;
//! impl Pass for Nothing {
//!     fn wants(&self) -> Wants { Wants::RUNTIME }
//!     fn event(&mut self, _: &Ev, _: &Model) {}
//! }
//! let paths = sorted(&["trace.10.bin", "trace.2.bin"]);
//! assert!(paths[0].ends_with("trace.2.bin"));
//! let (model, stats) = read(&paths, &mut Nothing, None);
//! assert!(stats.damaged); // no such files
//! assert!(model.procs.is_empty());
//! ```

mod decode;
pub mod follow;
mod order;
mod roles;

use crate::lifecycle::Tracked;
use crate::model::{Model, Process};
use crate::pass::{Pass, Wants};
use decode::{decode_chunk, FileCache, Names};
use order::Orderer;
use runtrace_format::reader::RawRecord;
use runtrace_format::{FileReader, Record};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What the reading side found, besides the events.
#[derive(Debug, Default, Clone)]
pub struct ReadStats {
    /// The files, in reading order.
    pub files: Vec<PathBuf>,
    /// Bytes read.
    pub bytes: u64,
    /// Events in the chunks (all types).
    pub events: u64,
    /// Events the recorder reported dropped.
    pub dropped: u64,
    /// Of `dropped`, those the writer thread reported (the `DROPPED`
    /// frames of the thread named `runtrace-writer`, docs/format.md
    /// section 10): profiler samples it could not keep, never a task's,
    /// poll's or wake's event.
    pub profiler_dropped: u64,
    /// Damage: file and byte offset, and what.
    pub errors: Vec<String>,
    /// Some file was damaged or unreadable.
    pub damaged: bool,
    /// Files without an END frame (cut short) but otherwise intact.
    pub unsealed: Vec<PathBuf>,
    /// Times the orderer released events early to bound memory.
    pub forced_releases: u64,
    /// Built-in event schemas whose fields differ from the catalog's.
    pub unrecognised_schemas: u64,
}

/// Progress callback: (bytes read, bytes in all files).
pub type Progress<'a> = Option<&'a mut dyn FnMut(u64, u64)>;

/// Sorts trace paths as `trace.0.bin`, `trace.1.bin`, ..., `trace.10.bin`,
/// a file given twice (a link, another spelling) kept once.
pub fn sorted(paths: &[impl AsRef<Path>]) -> Vec<PathBuf> {
    let mut v =
        runtrace_format::files::dedup(paths.iter().map(|p| p.as_ref().to_path_buf()).collect());
    runtrace_format::files::sort_trace_paths(&mut v);
    v
}

/// Reads `paths` once, feeding `pass` the events it [wants](Pass::wants)
/// in timestamp order, and finishes it. The files are read in index order
/// (`trace.0.bin`, `trace.1.bin`, ..., as [`sorted`] lists them) whatever
/// order they are given in: events are ordered across a recording's files
/// only when its files come in the order they were written. Never panics
/// on bad input: damage is in [`ReadStats::errors`].
pub fn read<P: Pass>(
    paths: &[PathBuf],
    pass: &mut P,
    progress: Progress<'_>,
) -> (Model, ReadStats) {
    // A directory's listing is in no particular order (a caller that
    // passed one straight through read a 9-file recording with its tasks'
    // terminates before their spawns).
    let mut paths = paths.to_vec();
    runtrace_format::files::sort_trace_paths(&mut paths);
    let paths = &paths[..];
    let mut model = Model::new();
    let st = if pass.wants().lifecycle {
        // The lifecycle's records, computed once for every pass in `pass`.
        let mut tracked = Tracked::new(&mut *pass);
        let st = read_files(paths, &mut tracked, &mut model, progress);
        tracked.finish(&model);
        st
    } else {
        let st = read_files(paths, pass, &mut model, progress);
        pass.finish(&model);
        st
    };
    (model, st)
}

/// Writes `bytes` to a temporary trace file (the reader reads files) and
/// runs `f` on its path, or on a message naming the file when it cannot be
/// written; removes the file after. For the `analyze_bytes` functions.
pub fn via_temp_file<R>(bytes: &[u8], what: &str, f: impl FnOnce(Result<&Path, String>) -> R) -> R {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf =
        std::env::temp_dir().join(format!("runtrace-{what}-{}-{n}.0.bin", std::process::id()));
    if let Err(e) = std::fs::write(&path, bytes) {
        let _ = std::fs::remove_file(&path);
        return f(Err(format!("{}: cannot write: {e}", path.display())));
    }
    let r = f(Ok(&path));
    let _ = std::fs::remove_file(&path);
    r
}

/// Reads `paths` (already sorted) into `model`, feeding `pass`.
fn read_files<P: Pass>(
    paths: &[PathBuf],
    pass: &mut P,
    model: &mut Model,
    mut progress: Progress<'_>,
) -> ReadStats {
    let mut rd = Reading::new(pass.wants());
    let total: u64 = paths
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let mut done_bytes = 0u64;
    for path in paths {
        let Some(mut r) = rd.open(path) else { continue };
        let mut f = rd.file();
        let mut last_progress = 0u64;
        while let Some(item) = r.next_raw() {
            if let Some(at) = rd.item(item, &mut f, pass, model) {
                if let Some(cb) = progress.as_mut() {
                    if at - last_progress >= 1 << 20 {
                        last_progress = at;
                        cb(done_bytes + at, total);
                    }
                }
            }
        }
        rd.end_file(&r, f, model);
        done_bytes += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if let Some(cb) = progress.as_mut() {
            cb(done_bytes, total);
        }
    }
    rd.finish(pass, model)
}

/// The state of one read across its files: what [`read`] keeps from file
/// to file, and what [`follow::Follow`] keeps while files grow.
pub(crate) struct Reading {
    wants: Wants,
    st: ReadStats,
    names: Names,
    order: Orderer,
    procs: HashMap<(u64, u64), u32>,
    cur_proc: Option<u32>,
    /// A FINISH frame was read (the recording ended cleanly).
    pub(crate) finished_recording: bool,
}

/// One file's reading state.
pub(crate) struct FileRead {
    cache: FileCache,
    proc: Option<u32>,
    pub(crate) events: u64,
    dropped: u64,
    profiler_dropped: u64,
    pub(crate) damaged: bool,
}

impl Reading {
    pub(crate) fn new(wants: Wants) -> Reading {
        Reading {
            wants,
            st: ReadStats::default(),
            names: Names::default(),
            order: Orderer::default(),
            procs: HashMap::new(),
            cur_proc: None,
            finished_recording: false,
        }
    }

    /// Opens `path` (listed in the stats), or notes why it cannot be.
    fn open(&mut self, path: &Path) -> Option<FileReader<runtrace_format::reader::OpenFile>> {
        self.st.files.push(path.to_path_buf());
        let err = match runtrace_format::files::unreadable(path) {
            Some(why) => why,
            None => match FileReader::open(path) {
                Ok(mut r) => {
                    // Dense chunks are decoded as they are (decode.rs).
                    r.keep_dense(true);
                    return Some(r);
                }
                Err(err) => format!("{}: cannot open: {err}", path.display()),
            },
        };
        self.error(err);
        None
    }

    /// Notes damage that is no file's frame.
    pub(crate) fn error(&mut self, err: String) {
        self.st.errors.push(err);
        self.st.damaged = true;
    }

    /// A new file's state.
    pub(crate) fn file(&self) -> FileRead {
        let mut cache = FileCache::default();
        cache.plans.wants = self.wants;
        FileRead {
            cache,
            proc: None,
            events: 0,
            dropped: 0,
            profiler_dropped: 0,
            damaged: false,
        }
    }

    /// One item of a file's [`FileReader::next_raw`]: returns the end
    /// offset of a chunk read (for progress).
    #[inline]
    pub(crate) fn item<P: Pass>(
        &mut self,
        item: Result<RawRecord<'_>, runtrace_format::ReadError>,
        f: &mut FileRead,
        pass: &mut P,
        model: &mut Model,
    ) -> Option<u64> {
        match item {
            Ok(RawRecord::Chunk(c)) => {
                let p = f.proc?;
                let thread = model.thread(p, c.header.tid);
                let (n, err) = decode_chunk(
                    &c,
                    thread,
                    &mut f.cache,
                    &mut self.names,
                    model,
                    p,
                    &mut self.order,
                );
                f.events += n;
                if let Some(err) = err {
                    self.st.errors.push(err.to_string());
                    f.damaged = true;
                }
                if self.order.bound(pass, model) {
                    self.st.forced_releases += 1;
                }
                return Some(c.offset + c.frame_len);
            }
            Ok(RawRecord::Record(rec)) => match rec {
                Record::Header(h) => {
                    let key = (h.recording_id, h.pid);
                    let p = match self.procs.get(&key) {
                        Some(&p) => p,
                        None => {
                            let p = model.add_proc(Process::new(&h));
                            self.procs.insert(key, p);
                            p
                        }
                    };
                    if self.cur_proc != Some(p) {
                        // Another recording: finish ordering the last one.
                        self.order.flush(pass, model);
                        pass.end_recording(model);
                        self.cur_proc = Some(p);
                    }
                    f.proc = Some(p);
                }
                Record::Round { watermark_ticks } => self.order.round(watermark_ticks, pass, model),
                Record::Dropped { tid, count, .. } => {
                    f.dropped = f.dropped.saturating_add(count);
                    // The writer names its thread before it reports a loss
                    // (a round's THREAD frames come first).
                    if f.proc.is_some_and(|p| model.is_writer_thread(p, tid)) {
                        f.profiler_dropped = f.profiler_dropped.saturating_add(count);
                    }
                }
                Record::Thread { tid, name } => {
                    if let Some(p) = f.proc {
                        let t = model.thread(p, tid);
                        model.threads[t as usize].name = Some(name);
                    }
                }
                _ => {}
            },
            Err(err) => {
                // Truncation is damage too: the tail is lost.
                self.st.errors.push(err.to_string());
                f.damaged = true;
            }
        }
        None
    }

    /// A file is read: its totals into the stats.
    pub(crate) fn end_file<R: std::io::Read>(
        &mut self,
        r: &FileReader<R>,
        mut f: FileRead,
        model: &mut Model,
    ) {
        // CPU profile context (format 1.1): complete once the file is read.
        model.add_mappings(r.tables().mappings());
        if let Some(info) = r.tables().profile() {
            model.profiles.push((r.path().to_path_buf(), info.clone()));
        }
        let st = &mut self.st;
        st.events += f.events;
        st.unrecognised_schemas += f.cache.plans.unrecognised;
        st.dropped = st.dropped.saturating_add(f.dropped);
        st.profiler_dropped = st.profiler_dropped.saturating_add(f.profiler_dropped);
        if !f.damaged {
            // The END frame's totals against what the file held
            // (format.md section 10), checked by the reader.
            for e in r.end_mismatches() {
                st.errors.push(e.to_string());
                f.damaged = true;
            }
        }
        if !r.sealed() && !f.damaged {
            st.unsealed.push(r.path().to_path_buf());
        }
        st.damaged |= f.damaged;
        st.bytes += r.offset();
    }

    /// The statistics so far (events of files still being read not yet
    /// counted).
    pub(crate) fn stats(&self) -> &ReadStats {
        &self.st
    }

    /// Releases the events held for ordering (the files read so far are
    /// all there is for now).
    pub(crate) fn flush<P: Pass>(&mut self, pass: &mut P, model: &Model) {
        self.order.flush(pass, model);
    }

    /// Releases the events still held for ordering; the read is over.
    pub(crate) fn finish<P: Pass>(mut self, pass: &mut P, model: &Model) -> ReadStats {
        self.order.flush(pass, model);
        self.st
    }
}
