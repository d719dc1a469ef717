//! The writer thread: drains every ring in rounds, frames what it took,
//! writes `PATH.N.bin.active`, seals and renames it, rotates by size and
//! evicts old files.
//!
//! A round: take pieces from every ring into a chunk buffer; then write the
//! definitions logged since the file last saw them (every id in those
//! pieces was logged before its event was published, so reading the logs
//! after taking the pieces finds them all), then the chunks, the drop
//! reports and a `ROUND` frame.
//!
//! What it wrote is counted in [`RecordStats`], which the session hands
//! back from `RecordingGuard::finish`.

use crate::error::RecordError;
use crate::ring::DrainPos;
use crate::rules::{EventRule, PollWatch, Rules, SlowPoll, WakeP99};
use crate::sink::{SegmentInfo, SinkQueue};
use crate::snapshot;
use crate::state::{RingEntry, Shared};
use crate::stats::RecordStats;
use crate::store::{FileStore, MemoryStore, SegmentMeta, SegmentStore};
use crate::sync::Ordering;
use crate::trigger;
use runtrace_core as registry;
use runtrace_core::clock::{self, TraceClock};
use runtrace_format::chunk::{first_ticks, scan, ChunkHeader};
use runtrace_format::frame::{self, FrameType, Header};
use runtrace_format::schema::{builtin_schemas, Schema};
use runtrace_profile::{Profiler, RawSample, Undo};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

struct WRing {
    entry: RingEntry,
    pos: DrainPos,
    reported_dropped: u64,
    /// Tick of the round that last reported this ring's drops (or of its
    /// registration).
    last_report: u64,
    announced_in: Option<u64>,
    /// Its poll in progress, for the slow-poll rule.
    polls: PollWatch,
}

/// A snapshot triggered and waiting for its post-trigger period.
struct Pending {
    /// When the trigger fired (trace ticks).
    ticks: u64,
    wall_ns: u64,
    reason: String,
    /// When to write it.
    due: Instant,
}

/// How much of each definition log the current file has seen.
#[derive(Default, Clone, Copy)]
struct DefCursor {
    strings: usize,
    locations: usize,
    schemas: usize,
}

pub(crate) struct Writer {
    shared: Arc<Shared>,
    clock: &'static TraceClock,
    anchor_ticks: u64,
    anchor_wall_ns: u64,
    recording_id: u64,
    process_name: String,
    rings: Vec<WRing>,
    /// Schemas by id, for counting events in partial pieces.
    schemas: Vec<Option<Schema>>,
    user_schemas_known: usize,
    /// Where segments go: files, or the memory ring.
    store: Box<dyn SegmentStore>,
    /// When the open segment was opened (for `max_segment_age`).
    segment_start: Instant,
    file_index: u64,
    file_bytes: u64,
    file_events: u64,
    file_dropped: u64,
    defs: DefCursor,
    buf: Vec<u8>,
    chunks: Vec<u8>,
    stats: RecordStats,
    last_clock_sync: Instant,
    /// Events drained but not written because writing failed, per thread:
    /// (count, tick since). Written as `DROPPED` frames by the first round
    /// whose write succeeds; counted in `stats.dropped` then (or at the
    /// end of a recording that never could write them).
    unwritten: BTreeMap<u64, (u64, u64)>,
    /// The first write error of the recording, for `finish()`'s error.
    first_error: Option<String>,
    /// The last write failed.
    failing: bool,
    /// Failing and resuming were each said once on stderr (a nearly full
    /// disk can flap between them at every round).
    said_failing: bool,
    said_resumed: bool,
    /// Events lost to write errors (not to full buffers).
    lost_to_writes: u64,
    /// The previous round's watermark: lost events are newer than it.
    prev_watermark: u64,
    /// The CPU profiler, when the recording asked for one.
    profiler: Option<Profiler>,
    /// This round's CPU samples (time order), written in a chunk of the
    /// writer thread.
    samples: Vec<RawSample>,
    /// What the profile frames of the round being written defined, undone
    /// if the write fails.
    profile_undo: Option<Undo>,
    /// The writer thread's OS tid (its chunks carry the CPU samples).
    tid: u64,
    /// The file index whose THREAD frame announced the writer thread.
    announced_in: Option<u64>,
    /// The snapshot signal's handler, while the recording runs.
    signal: Option<trigger::Installed>,
    /// Triggers taken this round (ticks, reason), recorded as
    /// `snapshot_trigger` events of the writer thread.
    fired: Vec<(u64, String)>,
    /// The snapshot waiting for its post-trigger period.
    pending: Option<Pending>,
    /// When the last snapshot was accepted (for the cooldown).
    last_snapshot: Option<Instant>,
    /// Snapshot directories being written.
    jobs: Vec<JoinHandle<Result<PathBuf, String>>>,
    /// The built-in snapshot rules configured.
    rules: Rules,
    /// The sinks' queues and threads (sink.rs).
    sinks: Vec<(Arc<SinkQueue>, JoinHandle<()>)>,
    /// `service=` and `host=` of the segments shipped.
    service: String,
    host: String,
}

fn io_err(path: &std::path::Path, what: &str, e: std::io::Error) -> RecordError {
    RecordError::Io(format!("{}: {what}: {e}", path.display()))
}

impl Writer {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Writer, RecordError> {
        let clock = TraceClock::get();
        let recording_id = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(clock::wall_ns());
            h.write_u32(std::process::id());
            h.finish()
        };
        let process_name = std::fs::read_to_string("/proc/self/comm")
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default();
        let mut schemas: Vec<Option<Schema>> = Vec::new();
        for s in builtin_schemas() {
            let i = s.id as usize;
            if schemas.len() <= i {
                schemas.resize(i + 1, None);
            }
            schemas[i] = Some(s);
        }
        let mut w = Writer {
            shared: shared.clone(),
            clock,
            anchor_ticks: clock.now(),
            anchor_wall_ns: clock::wall_ns(),
            recording_id,
            process_name,
            rings: Vec::new(),
            schemas,
            user_schemas_known: 0,
            store: match shared.cfg.memory {
                Some(budget) => Box::new(MemoryStore::new(budget, shared.cfg.max_file_size)),
                None => Box::new(FileStore::new(
                    shared.cfg.path.clone(),
                    shared.cfg.max_total_size,
                )),
            },
            segment_start: Instant::now(),
            file_index: 0,
            file_bytes: 0,
            file_events: 0,
            file_dropped: 0,
            defs: DefCursor::default(),
            buf: Vec::with_capacity(1 << 20),
            chunks: Vec::with_capacity(1 << 20),
            stats: RecordStats::default(),
            last_clock_sync: Instant::now(),
            unwritten: BTreeMap::new(),
            first_error: None,
            failing: false,
            said_failing: false,
            said_resumed: false,
            lost_to_writes: 0,
            prev_watermark: 0,
            profiler: None,
            samples: Vec::new(),
            profile_undo: None,
            tid: 0,
            announced_in: None,
            signal: None,
            fired: Vec::new(),
            pending: None,
            last_snapshot: None,
            jobs: Vec::new(),
            rules: {
                let ticks = |d: Duration| (d.as_secs_f64() * clock.ticks_per_sec() as f64) as u64;
                let cfg = &shared.cfg;
                Rules {
                    slow_poll: cfg.snapshot_poll.map(|d| SlowPoll { limit: ticks(d) }),
                    wake: cfg
                        .snapshot_wake_p99
                        .map(|(l, w)| WakeP99::new(ticks(l), ticks(w))),
                    drops: cfg.snapshot_drops,
                    events: (!cfg.snapshot_events.is_empty())
                        .then(|| EventRule::new(&cfg.snapshot_events)),
                    ..Rules::default()
                }
            },
            sinks: Vec::new(),
            service: String::new(),
            host: String::new(),
        };
        w.service = match &w.shared.cfg.service {
            Some(s) => s.clone(),
            None => runtrace_format::partition::sanitize(&w.process_name),
        };
        w.host = match &w.shared.cfg.host {
            Some(h) => h.clone(),
            None => runtrace_format::partition::hostname(),
        };
        if w.shared.cfg.cpu_hz > 0 {
            // Before the first file opens: it starts with the PROFILE frame.
            w.profiler = Some(Profiler::start(
                w.shared.cfg.cpu_hz,
                w.shared.cfg.cpu_backend,
                w.shared.cfg.off_cpu,
                clock,
            ));
        }
        if w.shared.cfg.alloc_mean > 0 {
            let p = w.profiler.get_or_insert_with(Profiler::without_cpu);
            if let Err(e) = p.sample_allocations(w.shared.cfg.alloc_mean, w.shared.cfg.alloc_live) {
                // The recording goes on without a memory profile.
                eprintln!("runtrace: memory profile not recorded: {e}");
            }
        }
        if let Some(dir) = w
            .shared
            .cfg
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "cannot create directory", e))?;
        }
        // Open the first file now so a bad path fails `start()`, not later.
        w.open_file()?;
        if let Some(sig) = w.shared.cfg.snapshot_signal {
            w.signal = Some(trigger::Installed::new(sig, clock)?);
        }
        // Last: nothing after this can fail, so no sink thread is left
        // waiting on a recording that did not start.
        for sink in w.shared.cfg.sinks.take() {
            let name = sink.name();
            match SinkQueue::start(sink, w.shared.cfg.sink_queue, w.shared.cfg.sink_retries) {
                Ok(q) => w.sinks.push(q),
                Err(e) => {
                    w.close_sinks();
                    return Err(RecordError::Io(format!(
                        "cannot start the thread of sink {name}: {e}"
                    )));
                }
            }
        }
        Ok(w)
    }

    /// Drains rounds until the recording stops, then seals the last file.
    ///
    /// A write error does not stop it: the writer keeps draining every
    /// ring (so producers never block and every event is accounted for),
    /// counts what it could not write as dropped, reports the failure once
    /// on stderr, and retries at every round; the first successful write
    /// carries the loss in `DROPPED` frames. A recording that hit a write
    /// error ends with [`RecordError::Incomplete`], which carries the stats.
    pub(crate) fn run(mut self) -> Result<RecordStats, RecordError> {
        self.tid = registry::clock::gettid();
        let interval = self.shared.cfg.flush_interval;
        loop {
            // Acquire: pairs with the Release store in `state::end`.
            let stopping = self.shared.stop.load(Ordering::Acquire);
            self.round(stopping);
            if stopping {
                break;
            }
            self.snapshot_if_due();
            // Not busy-polling: sleep until the interval passes or a producer
            // wakes us at its high-water mark.
            std::thread::park_timeout(interval);
        }
        if !self.unwritten.is_empty() {
            // The last round's write failed: one more try to tell its loss
            // (a round with nothing left to drain is just DROPPED frames,
            // small enough to fit where the round did not).
            self.round(true);
        }
        // `finish()` waits for a pending snapshot: it is written now, with
        // what was recorded (the recording ends before its period does).
        if self.pending.is_some() {
            self.write_snapshot();
        }
        self.signal = None;
        // A sealed file claims its losses are all told (END totals); with
        // losses no DROPPED frame could carry, it stays unsealed
        // (`.active`), so readers report it as incomplete.
        if self.unwritten.is_empty() {
            if let Err(e) = self.finish_recording() {
                self.write_failed(&e);
            }
        }
        self.stats.segments_dropped = match self.shared.cfg.memory {
            Some(_) => self.store.evicted(),
            None => 0,
        };
        self.stats.memory_peak = self.store.peak_bytes();
        self.reap_snapshots(true);
        self.close_sinks();
        // Losses no file could be told about still count.
        let never_written: u64 = self.unwritten.values().map(|(n, _)| n).sum();
        self.stats.dropped = self.stats.dropped.saturating_add(never_written);
        match self.first_error.take() {
            None => Ok(self.stats),
            Some(first) => Err(RecordError::Incomplete {
                message: format!(
                    "recording incomplete: {first}; {} events could not be written (counted as dropped)",
                    self.lost_to_writes
                ),
                stats: Box::new(self.stats),
            }),
        }
    }

    /// Notes a write error: reported on stderr the first time (not at every
    /// retry), kept for `finish()`.
    fn write_failed(&mut self, e: &RecordError) {
        if !self.said_failing {
            self.said_failing = true;
            eprintln!(
                "runtrace: {e}: recording paused; events are counted as dropped until a write succeeds (retried every flush interval)"
            );
        }
        self.failing = true;
        self.first_error.get_or_insert_with(|| e.to_string());
    }

    /// Cuts the open file back to its last complete round, so it stays
    /// readable (a frame boundary) and the next attempt appends cleanly.
    fn rollback(&mut self) {
        self.store.truncate(self.file_bytes);
        self.buf.clear();
    }

    /// One round. `last`: the recording is ending, so every ring is
    /// drained to its end.
    fn round(&mut self, last: bool) {
        let now = self.clock.now();
        self.take_triggers();
        if self.rules.decodes() {
            // The rules walk whole slots too, which the drain takes without
            // looking up their ids: know every schema logged so far (an
            // event's schema is logged before the event is published).
            self.sync_schemas();
        }
        {
            let mut new = self
                .shared
                .new_rings
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for entry in new.drain(..) {
                if let Some(p) = self.profiler.as_mut() {
                    p.add_thread(entry.tid);
                }
                self.rings.push(WRing {
                    entry,
                    pos: DrainPos::default(),
                    reported_dropped: 0,
                    last_report: now,
                    announced_in: None,
                    polls: PollWatch::default(),
                });
            }
        }
        self.chunks.clear();
        let mut dropped_frames = Vec::new();
        let mut thread_frames = Vec::new();
        // (thread, events drained, drops reported) of this round, undone if
        // its write fails.
        let mut took: Vec<(u64, u64, u64)> = Vec::new();
        let index = self.file_index;
        // The earliest time of the events a ring keeps for the next round.
        let mut left_from: Option<u64> = None;
        let mut i = 0;
        while i < self.rings.len() {
            // Load `closed` before draining: a ring seen closed is then
            // drained to its very end (ring rule 6).
            let closed = self.rings[i].entry.ring.closed.load(Ordering::Acquire);
            // A thread's current slot waits for the next round, its seal
            // asked for, so it is then taken whole without decoding
            // (`Ring::drain`), unless it holds events older than the last
            // ROUND's watermark or its thread recorded nothing since it was
            // asked.
            let defer = (!closed && !last).then_some(self.prev_watermark);
            let Ok((events, left)) = self.drain_ring(i, defer) else {
                // An event type id the writer cannot find even after
                // re-reading the logs: only a bug could cause it. Keep going
                // without this thread rather than stop the recording.
                closed_ring_warning(&self.rings[i].entry);
                self.rings.swap_remove(i);
                continue;
            };
            if let Some(t) = left {
                left_from = Some(left_from.map_or(t, |m| m.min(t)));
            }
            let r = &mut self.rings[i];
            let mut ring_drops = 0;
            if r.announced_in != Some(index) {
                thread_frames.push(frame::thread(r.entry.tid, &r.entry.name));
                r.announced_in = Some(index);
            }
            let d = r.entry.ring.dropped.load(Ordering::Relaxed);
            if d > r.reported_dropped {
                let since = r.entry.ring.drop_since.swap(0, Ordering::Relaxed);
                // A loss between our load of `dropped` and this swap loses
                // its tick: fall back to the previous report, a lower bound.
                let since = if since == 0 { r.last_report } else { since };
                dropped_frames.push(frame::dropped(
                    r.entry.tid,
                    d - r.reported_dropped,
                    since,
                    now,
                ));
                ring_drops = d - r.reported_dropped;
                self.rules.dropped(ring_drops);
                self.stats.dropped += ring_drops;
                self.file_dropped += ring_drops;
                r.reported_dropped = d;
                r.last_report = now;
            }
            if events + ring_drops > 0 {
                took.push((r.entry.tid, events, ring_drops));
            }
            if closed {
                let tid = self.rings.swap_remove(i).entry.tid;
                // (A new thread may already reuse the tid.)
                if !self.rings.iter().any(|r| r.entry.tid == tid) {
                    if let Some(p) = self.profiler.as_mut() {
                        p.remove_thread(tid);
                    }
                }
            } else {
                i += 1;
            }
        }
        // Every event before the watermark is in this round's frames (format
        // section 8): the round's start, or earlier if a ring kept events
        // for the next round (never below the previous watermark: a ring
        // keeps none older than that).
        let watermark = left_from.map_or(now, |t| t.min(now));
        self.samples.clear();
        if let Some(p) = self.profiler.as_mut() {
            let lost = p.collect(watermark, &mut self.samples);
            let n = self.samples.len() as u64;
            if n + lost > 0 && self.announced_in != Some(index) {
                thread_frames.push(frame::thread(self.tid, frame::WRITER_THREAD));
                self.announced_in = Some(index);
            }
            if lost > 0 {
                // Samples the kernel or the signal ring could not keep:
                // told like any other lost events (END totals count them).
                dropped_frames.push(frame::dropped(
                    self.tid,
                    lost,
                    self.prev_watermark,
                    watermark,
                ));
                self.stats.dropped += lost;
                self.file_dropped += lost;
            }
            self.stats.events += n;
            self.file_events += n;
            if n + lost > 0 {
                took.push((self.tid, n, lost));
            }
        }
        // Against the watermark, not `now`: a poll's end can still wait in
        // a slot left for the next round, but none older than the
        // watermark can (so an open poll is not mistaken for a slow one).
        self.consider_triggers(watermark, now);
        if !self.fired.is_empty() {
            if self.announced_in != Some(index) {
                thread_frames.push(frame::thread(self.tid, frame::WRITER_THREAD));
                self.announced_in = Some(index);
            }
            let n = self.trigger_chunk();
            self.stats.events += n;
            self.file_events += n;
            took.push((self.tid, n, 0));
        }
        if self.chunks.is_empty()
            && self.samples.is_empty()
            && dropped_frames.is_empty()
            && thread_frames.is_empty()
            && self.unwritten.is_empty()
        {
            // An idle round writes nothing (and opens no file), but a
            // segment that has grown old is sealed all the same.
            self.prev_watermark = watermark;
            self.seal_if_due();
            return;
        }
        // What earlier failed writes lost, told now.
        let carried: u64 = self.unwritten.values().map(|(n, _)| n).sum();
        for (&tid, &(n, since)) in &self.unwritten {
            dropped_frames.push(frame::dropped(tid, n, since, watermark));
        }
        let defs_before = self.defs;
        match self.write_round(&thread_frames, &dropped_frames, watermark) {
            Ok(()) => {
                if carried > 0 {
                    self.stats.dropped = self.stats.dropped.saturating_add(carried);
                    self.file_dropped = self.file_dropped.saturating_add(carried);
                    self.unwritten.clear();
                }
                if std::mem::take(&mut self.failing) && !self.said_resumed {
                    self.said_resumed = true;
                    eprintln!(
                        "runtrace: writing works again: recording resumed ({} events lost so far, told in DROPPED frames)",
                        self.lost_to_writes
                    );
                }
            }
            Err(e) => {
                // Undo the round: its events and drops become one loss per
                // thread, told by the next round that can write.
                self.rollback();
                self.defs = defs_before;
                for r in &mut self.rings {
                    r.announced_in = None;
                }
                self.announced_in = None;
                if let (Some(p), Some(u)) = (self.profiler.as_mut(), self.profile_undo.take()) {
                    p.undo(u);
                }
                for (tid, events, drops) in took {
                    self.stats.events -= events;
                    self.file_events -= events;
                    self.stats.dropped -= drops;
                    self.file_dropped -= drops;
                    self.lost_to_writes += events;
                    let u = self
                        .unwritten
                        .entry(tid)
                        .or_insert((0, self.prev_watermark));
                    u.0 = u.0.saturating_add(events + drops);
                }
                self.write_failed(&e);
                self.prev_watermark = watermark;
                return;
            }
        }
        self.prev_watermark = watermark;
        self.seal_if_due();
    }

    /// Takes the triggers that fired since the last round: snapshot
    /// requests and the snapshot signal. Each is recorded (a
    /// `snapshot_trigger` event at its instant); in memory mode, one not
    /// within the cooldown of the last snapshot, with none pending, starts
    /// a snapshot.
    fn take_triggers(&mut self) {
        self.fired.clear();
        {
            let mut req = self
                .shared
                .snapshot_requests
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.fired.append(&mut req);
        }
        if self.signal.is_some() {
            if let Some(t) = trigger::take() {
                self.fired.push((t, "signal".into()));
            }
        }
    }

    /// Decides which of this round's triggers start a snapshot (see
    /// `take_triggers`); the built-in rules' are added first, judged on
    /// what was drained up to `watermark` (every event before it has
    /// been drained; `now`: the round's start).
    fn consider_triggers(&mut self, watermark: u64, now: u64) {
        self.rules.take(
            watermark,
            now,
            self.rings.iter_mut().map(|r| &mut r.polls),
            &mut self.fired,
        );
        let cfg = &self.shared.cfg;
        for (ticks, reason) in &self.fired {
            let at = Instant::now();
            let cooling = self
                .last_snapshot
                .is_some_and(|t| at.duration_since(t) < cfg.snapshot_cooldown);
            if cfg.memory.is_none() || self.pending.is_some() || cooling {
                self.stats.snapshots_skipped += 1;
                continue;
            }
            self.last_snapshot = Some(at);
            self.pending = Some(Pending {
                ticks: *ticks,
                wall_ns: clock::wall_ns(),
                reason: reason.clone(),
                due: at + cfg.snapshot_after,
            });
        }
    }

    /// Frames this round's triggers as one chunk of the writer thread in
    /// `chunks`; returns how many events it holds.
    fn trigger_chunk(&mut self) -> u64 {
        use runtrace_format::chunk::ChunkState;
        use runtrace_format::schema::wire;
        self.fired.sort_by_key(|(t, _)| *t);
        // Events of a round are not older than the previous watermark (a
        // signal can be read a round late).
        let start = self.fired[0].0.max(self.prev_watermark);
        let mut payload = Vec::new();
        ChunkHeader {
            tid: self.tid,
            state: ChunkState {
                ticks: start,
                task_reg: 0,
                worker_reg: runtrace_format::NO_WORKER,
            },
            count: self.fired.len() as u64,
        }
        .encode(&mut payload);
        let mut prev = start;
        for (t, reason) in &self.fired {
            let t = (*t).max(prev);
            // Built-in ids are below TAG_ESCAPE: one tag byte.
            payload.push(runtrace_format::schema::ids::SNAPSHOT_TRIGGER as u8);
            wire::put_varint(&mut payload, t - prev);
            wire::put_str(&mut payload, reason);
            prev = t;
        }
        frame::write(&mut self.chunks, FrameType::Chunk, &payload);
        self.fired.len() as u64
    }

    /// Writes the pending snapshot once its post-trigger period is over.
    fn snapshot_if_due(&mut self) {
        if self
            .pending
            .as_ref()
            .is_some_and(|p| Instant::now() >= p.due)
        {
            self.write_snapshot();
        }
        self.reap_snapshots(false);
    }

    /// Seals the open segment, so the ring holds everything recorded, and
    /// hands the segments covering the pending snapshot's window to a
    /// thread that writes them (`snapshot.rs`).
    fn write_snapshot(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if let Err(e) = self.seal() {
            self.write_failed(&e);
        }
        let before = self.shared.cfg.snapshot_before;
        let before_ticks =
            (before.as_secs_f64() * self.clock.ticks_per_sec() as f64).min(u64::MAX as f64) as u64;
        let from = p.ticks.saturating_sub(before_ticks);
        let segments: Vec<_> = self
            .store
            .kept()
            .into_iter()
            .filter(|(m, _)| m.end_ticks >= from)
            .collect();
        let path = &self.shared.cfg.path;
        let job = snapshot::Job {
            parent: path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), |d| d.to_path_buf()),
            prefix: path
                .file_name()
                .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned()),
            wall_ns: p.wall_ns,
            reason: p.reason,
            sinks: self.sinks.iter().map(|(q, _)| q.clone()).collect(),
            service: self.service.clone(),
            host: self.host.clone(),
            walls: segments
                .iter()
                .map(|(m, _)| self.wall_of(m.end_ticks))
                .collect(),
            segments,
        };
        match std::thread::Builder::new()
            .name("runtrace-snapshot".into())
            .spawn(move || snapshot::write(job))
        {
            Ok(h) => self.jobs.push(h),
            Err(e) => eprintln!("runtrace: snapshot not written: cannot start its thread: {e}"),
        }
    }

    /// Offers a sealed file to every sink (sink.rs rule 1: a push, never a
    /// wait).
    fn ship(&self, path: PathBuf, index: u64, wall_ns: u64) {
        for (q, _) in &self.sinks {
            q.push(SegmentInfo {
                path: path.clone(),
                index,
                wall_ns,
                service: self.service.clone(),
                host: self.host.clone(),
                snapshot: None,
            });
        }
    }

    /// Closes the sinks' queues and waits (`sink_finish_timeout`) for
    /// them to send what they hold; counts what they did not, and says
    /// so on stderr. A sink still busy then is left to itself.
    fn close_sinks(&mut self) {
        let deadline = Instant::now() + self.shared.cfg.sink_finish_timeout;
        for (q, h) in self.sinks.drain(..) {
            let (c, done) = q.close(deadline);
            if done {
                let _ = h.join();
            }
            self.stats.sink_sent += c.sent;
            self.stats.sink_failed += c.failed;
            self.stats.sink_dropped += c.dropped;
            self.stats.sink_unsent += c.unsent;
            if c.failed + c.dropped + c.unsent > 0 {
                eprintln!(
                    "runtrace: sink {}: {} segments sent, not sent: {} failed, {} dropped from its full queue, {} left when the recording ended{}",
                    q.name(),
                    c.sent,
                    c.failed,
                    c.dropped,
                    c.unsent,
                    if done { "" } else { " (the sink did not return in time; left running)" }
                );
            }
        }
    }

    /// The wall clock (ns since the Unix epoch) at trace time `ticks`.
    fn wall_of(&self, ticks: u64) -> u64 {
        let dt = ticks.saturating_sub(self.anchor_ticks) as u128 * 1_000_000_000
            / u128::from(self.clock.ticks_per_sec().max(1));
        self.anchor_wall_ns
            .saturating_add(u64::try_from(dt).unwrap_or(u64::MAX))
    }

    /// Counts the snapshots written (all of them when `wait`, else those
    /// done), saying on stderr which failed.
    fn reap_snapshots(&mut self, wait: bool) {
        let mut i = 0;
        while i < self.jobs.len() {
            if !wait && !self.jobs[i].is_finished() {
                i += 1;
                continue;
            }
            match self.jobs.swap_remove(i).join() {
                Ok(Ok(_)) => self.stats.snapshots += 1,
                Ok(Err(e)) => eprintln!("runtrace: snapshot not written: {e}"),
                Err(_) => eprintln!("runtrace: snapshot not written: its thread panicked"),
            }
        }
    }

    /// Seals the open segment once it reaches `max_file_size` or, in
    /// memory mode, `max_segment_age`.
    fn seal_if_due(&mut self) {
        if !self.store.is_open() {
            return;
        }
        let aged = self.shared.cfg.memory.is_some()
            && self.segment_start.elapsed() >= self.shared.cfg.max_segment_age;
        if self.file_bytes >= self.shared.cfg.max_file_size || aged {
            if let Err(e) = self.seal() {
                // The data is written; only the END frame or the rename is
                // missing: the file stays `.active`, read as unsealed.
                self.write_failed(&e);
            }
        }
    }

    /// Writes one round's frames to the current file, opening it first if
    /// needed.
    fn write_round(
        &mut self,
        thread_frames: &[Vec<u8>],
        dropped_frames: &[Vec<u8>],
        watermark: u64,
    ) -> Result<(), RecordError> {
        // Rotation is lazy: the next file opens when there is something for
        // it, so no file ends up empty.
        self.profile_undo = None;
        if !self.store.is_open() {
            self.open_file()?;
        }
        // Definitions first, then threads, chunks, drops, the round marker.
        self.buf.clear();
        self.write_new_defs();
        // Stacks and mappings are defined for the file being written, so
        // only once it is open (a rotation resets what it defines).
        let profile = match self.profiler.as_mut() {
            Some(p) => p.encode(&self.samples, self.tid),
            None => Default::default(),
        };
        self.buf.extend_from_slice(&profile.defs);
        self.profile_undo = Some(profile.undo);
        for t in thread_frames {
            frame::write(&mut self.buf, FrameType::Thread, t);
        }
        self.buf.extend_from_slice(&self.chunks);
        self.buf.extend_from_slice(&profile.chunk);
        for d in dropped_frames {
            frame::write(&mut self.buf, FrameType::Dropped, d);
        }
        if self.last_clock_sync.elapsed() >= Duration::from_secs(1) {
            self.last_clock_sync = Instant::now();
            frame::write(
                &mut self.buf,
                FrameType::Clock,
                &frame::clock(self.clock.now(), clock::wall_ns()),
            );
        }
        frame::write(&mut self.buf, FrameType::Round, &frame::round(watermark));
        self.write_buf()
    }

    /// Takes what ring `i` published (see `Ring::drain` for `defer`) and
    /// frames it into `chunks`; returns how many events it took and, when it
    /// left the current slot, the earliest time of the events left.
    fn drain_ring(&mut self, i: usize, defer: Option<u64>) -> Result<(u64, Option<u64>), ()> {
        let mut took = 0;
        for attempt in 0..2 {
            let schemas = &self.schemas;
            let chunks = &mut self.chunks;
            let r = &mut self.rings[i];
            let tid = r.entry.tid;
            let mut events = 0;
            let decoded = &mut self.stats.decoded_chunks;
            let rules = &mut self.rules;
            let polls = &mut r.polls;
            let res = r.entry.ring.drain(
                &mut r.pos,
                defer,
                |bytes, mut st| {
                    let n = scan(bytes, &mut st, |id| {
                        schemas.get(id as usize).and_then(|s| s.as_ref())
                    })?;
                    *decoded += 1;
                    Ok::<_, runtrace_format::varint::DecodeError>((n, st))
                },
                |bytes, st| first_ticks(bytes, &st),
                |piece| {
                    let mut payload = Vec::with_capacity(piece.bytes.len() + 32);
                    ChunkHeader {
                        tid,
                        state: piece.start,
                        count: piece.count,
                    }
                    .encode(&mut payload);
                    // Dense records (format 1.3): rewritten here, off the
                    // recording threads; the plain chunk if that fails (a
                    // record the writer cannot walk is the reader's to
                    // report).
                    let body_at = payload.len();
                    let look = |id: u32| schemas.get(id as usize).and_then(|s| s.as_ref());
                    let ty = match runtrace_format::dense::encode(piece.bytes, &look, &mut payload)
                    {
                        Ok(()) => FrameType::DChunk,
                        Err(_) => {
                            payload.truncate(body_at);
                            payload.extend_from_slice(piece.bytes);
                            FrameType::Chunk
                        }
                    };
                    frame::write(chunks, ty, &payload);
                    events += piece.count;
                    let look = |id: u32| schemas.get(id as usize).and_then(|s| s.as_ref());
                    rules.piece(polls, piece.bytes, piece.start, look);
                },
            );
            self.stats.events += events;
            self.file_events += events;
            took += events;
            match res {
                Ok(left) => return Ok((took, left)),
                // A schema registered after our last look: re-read the logs.
                Err(_) if attempt == 0 => self.sync_schemas(),
                Err(_) => return Err(()),
            }
        }
        Err(())
    }

    fn sync_schemas(&mut self) {
        let new: Vec<Schema> = registry::with_logs(|l| {
            l.schemas[self.user_schemas_known.min(l.schemas.len())..].to_vec()
        });
        self.user_schemas_known += new.len();
        for s in new {
            let i = s.id as usize;
            if self.schemas.len() <= i {
                self.schemas.resize(i + 1, None);
            }
            self.schemas[i] = Some(s);
        }
    }

    /// Appends STRINGS/LOCATIONS/SCHEMA frames for what the file has not
    /// seen yet.
    fn write_new_defs(&mut self) {
        let cur = self.defs;
        let buf = &mut self.buf;
        self.defs = registry::with_logs(|l| {
            if l.schemas.len() > cur.schemas {
                frame::write(
                    buf,
                    FrameType::Schema,
                    &frame::schemas(&l.schemas[cur.schemas..]),
                );
            }
            if l.strings.len() > cur.strings {
                let list = l.strings[cur.strings..].iter().enumerate();
                let list = list.map(|(k, s)| ((cur.strings + k + 1) as u64, s.as_str()));
                frame::write(buf, FrameType::Strings, &frame::strings(list));
            }
            if l.locations.len() > cur.locations {
                frame::write(
                    buf,
                    FrameType::Locations,
                    &frame::locations(l.locations[cur.locations..].iter()),
                );
            }
            DefCursor {
                strings: l.strings.len(),
                locations: l.locations.len(),
                schemas: l.schemas.len(),
            }
        });
    }

    fn write_buf(&mut self) -> Result<(), RecordError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.store.append(&self.buf)?;
        self.file_bytes += self.buf.len() as u64;
        self.stats.bytes += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    fn open_file(&mut self) -> Result<(), RecordError> {
        self.store.open(self.file_index)?;
        self.segment_start = Instant::now();
        // (The file's event and drop counters were reset when the previous
        // file was sealed: this round's may already count toward this one.)
        self.file_bytes = 0;
        // Every file stands alone: the header carries every schema known now,
        // and all definitions so far are repeated.
        let mut schemas = builtin_schemas();
        let users = registry::with_logs(|l| l.schemas.clone());
        let n_users = users.len();
        schemas.extend(users);
        let header = Header {
            version_major: runtrace_format::VERSION_MAJOR,
            version_minor: runtrace_format::VERSION_MINOR,
            ticks_per_sec: self.clock.ticks_per_sec(),
            anchor_ticks: self.anchor_ticks,
            anchor_wall_ns: self.anchor_wall_ns,
            pid: std::process::id() as u64,
            process_name: self.process_name.clone(),
            recording_id: self.recording_id,
            file_index: self.file_index,
            schemas,
        };
        self.buf.clear();
        self.buf.extend_from_slice(runtrace_format::MAGIC);
        frame::write(&mut self.buf, FrameType::Header, &header.encode());
        frame::write(
            &mut self.buf,
            FrameType::Clock,
            &frame::clock(self.clock.now(), clock::wall_ns()),
        );
        self.defs = DefCursor {
            schemas: n_users,
            ..DefCursor::default()
        };
        self.write_new_defs();
        if let Some(p) = self.profiler.as_mut() {
            p.file_start(&mut self.buf);
        }
        if let Err(e) = self.write_buf() {
            // No header, no file: leave nothing half-made behind; the next
            // round tries again under the same name.
            self.store.abandon();
            return Err(e);
        }
        self.stats.files += 1;
        Ok(())
    }

    /// Ends the recording: a `FINISH` frame (format 1.2) in the last file,
    /// then its `END`, so readers tell a finished recording from one that
    /// stopped after a rotation. A recording whose last file was sealed
    /// by rotation gets one more file for it.
    fn finish_recording(&mut self) -> Result<(), RecordError> {
        if !self.store.is_open() {
            self.open_file()?;
        }
        let f = frame::Finish {
            files: self.file_index + 1,
            evicted: self.store.evicted(),
            events: self.stats.events,
            dropped: self.stats.dropped,
            lost_to_writes: self.lost_to_writes,
        };
        self.buf.clear();
        frame::write(&mut self.buf, FrameType::Finish, &f.encode());
        if let Err(e) = self.write_buf() {
            self.rollback();
            return Err(e);
        }
        self.seal()
    }

    fn seal(&mut self) -> Result<(), RecordError> {
        if !self.store.is_open() {
            return Ok(());
        }
        self.buf.clear();
        frame::write(
            &mut self.buf,
            FrameType::End,
            &frame::end(self.file_events, self.file_dropped),
        );
        let end_len = self.buf.len();
        if let Err(e) = self.write_buf() {
            // Not sealed: cut back to the last round, keep writing to it.
            self.rollback();
            return Err(e);
        }
        let meta = SegmentMeta {
            index: self.file_index,
            end_ticks: self.clock.now(),
            events: self.file_events,
            dropped: self.file_dropped,
            end_len,
        };
        self.file_events = 0;
        self.file_dropped = 0;
        // The file is sealed from here on: whatever fails below, the next
        // file gets the next index (never overwriting this one).
        self.file_index += 1;
        self.store.seal(meta)?;
        if self.shared.cfg.memory.is_none() && !self.sinks.is_empty() {
            let path = crate::store::file_path(&self.shared.cfg.path, meta.index, false);
            self.ship(path, meta.index, clock::wall_ns());
        }
        Ok(())
    }
}

#[cold]
fn closed_ring_warning(e: &RingEntry) {
    eprintln!(
        "runtrace: thread {} ({}) published an event of an unknown type; its further events are not recorded",
        e.tid, e.name
    );
}
