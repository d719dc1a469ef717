//! Synthetic traces, written frame by frame with `runtrace_format`'s frame
//! API: a [`TraceBuilder`] for purpose-built traces (tests) and
//! [`workload`], a healthy runtime-like event mix of any size (tests and
//! `benches/analyze.rs`).
//!
//! ```
//! use runtrace_model::synth::TraceBuilder;
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 10, 5);
//! b.spawn(7, 1_000, 1, 0, 1, 0);
//! b.poll_start(7, 0, 2_000, 1, 0, 0);
//! b.poll_end(7, 0, 3_000, 1, true);
//! b.terminate(7, 3_000, 1);
//! let bytes = b.finish();
//! assert!(bytes.starts_with(b"RUNTRACE"));
//! ```

use runtrace_format::chunk::{ChunkHeader, ChunkState};
use runtrace_format::frame::{self, FrameType, Header, LocationDef, Mapping, ProfileInfo};
use runtrace_format::schema::{builtin_schemas, ids, wire, BUILTIN_EVENTS};
use runtrace_format::{varint, NO_WORKER};
use std::collections::BTreeMap;

/// A chunk is written once its events take this many bytes.
const CHUNK_BYTES: usize = 64 << 10;

struct ThreadBuf {
    start: ChunkState,
    cur: ChunkState,
    body: Vec<u8>,
    count: u64,
}

/// Builds a trace file in memory. Timestamps are in ticks of
/// `ticks_per_sec` (1e9 by default: one tick is one nanosecond) and the
/// recording's anchor is tick 0. Events of one thread must be added in
/// time order; each thread's events go to its own chunks.
pub struct TraceBuilder {
    out: Vec<u8>,
    threads: BTreeMap<u64, ThreadBuf>,
    events: u64,
    dropped: u64,
    /// Strings defined by [`TraceBuilder::span_new`] and the like.
    auto_strings: BTreeMap<String, u64>,
}

impl Default for TraceBuilder {
    fn default() -> Self {
        TraceBuilder::new()
    }
}

impl TraceBuilder {
    /// A file with one tick per nanosecond.
    pub fn new() -> TraceBuilder {
        TraceBuilder::with_header(1_000_000_000, 0x5eed, 4242)
    }

    /// A file with the given clock, recording id and pid (the built-in
    /// schemas in its header).
    pub fn with_header(ticks_per_sec: u64, recording_id: u64, pid: u64) -> TraceBuilder {
        let h = Header {
            version_major: runtrace_format::VERSION_MAJOR,
            version_minor: runtrace_format::VERSION_MINOR,
            ticks_per_sec,
            anchor_ticks: 0,
            anchor_wall_ns: 1_700_000_000_000_000_000,
            pid,
            process_name: "synth".into(),
            recording_id,
            file_index: 0,
            schemas: builtin_schemas(),
        };
        let mut out = runtrace_format::MAGIC.to_vec();
        frame::write(&mut out, FrameType::Header, &h.encode());
        TraceBuilder {
            out,
            threads: BTreeMap::new(),
            events: 0,
            dropped: 0,
            auto_strings: BTreeMap::new(),
        }
    }

    /// Defines spawn location `id` (a LOCATIONS frame).
    pub fn location(&mut self, id: u64, file: &str, line: u32, col: u32) {
        let l = LocationDef {
            id,
            file: file.into(),
            line,
            col,
        };
        frame::write(
            &mut self.out,
            FrameType::Locations,
            &frame::locations(std::iter::once(&l)),
        );
    }

    /// Defines interned string `id` (a STRINGS frame).
    pub fn string(&mut self, id: u64, text: &str) {
        frame::write(
            &mut self.out,
            FrameType::Strings,
            &frame::strings(std::iter::once((id, text))),
        );
    }

    /// Names a thread (a THREAD frame).
    pub fn thread_name(&mut self, tid: u64, name: &str) {
        frame::write(&mut self.out, FrameType::Thread, &frame::thread(tid, name));
    }

    /// Defines call stacks (a STACKS frame): `(id, addresses leaf first)`.
    ///
    /// ```
    /// use runtrace_model::synth::TraceBuilder;
    /// let mut b = TraceBuilder::new();
    /// b.stacks(&[(1, &[0x1234, 0x1000])]);
    /// b.cpu_sample(1, 5_000, 100, 1);
    /// assert_eq!(b.events(), 1);
    /// ```
    pub fn stacks(&mut self, list: &[(u64, &[u64])]) {
        frame::write(
            &mut self.out,
            FrameType::Stacks,
            &frame::stacks(list.iter().copied()),
        );
    }

    /// Describes the process's executable mappings (a MAPPINGS frame).
    pub fn mappings(&mut self, list: &[Mapping]) {
        frame::write(&mut self.out, FrameType::Mappings, &frame::mappings(list));
    }

    /// Says what CPU profiling did (a PROFILE frame).
    pub fn profile(&mut self, info: &ProfileInfo) {
        frame::write(&mut self.out, FrameType::Profile, &frame::profile(info));
    }

    /// A CPU profile at `hz` (a PROFILE frame, perf_event_open's mode)
    /// of a binary that is on no machine: one mapping of
    /// `/nonexistent/app` over `0x400000..0x500000`, so stacks of
    /// addresses there read back unresolved (`[unknown] app+0x...`). For
    /// tests of what is drawn or counted rather than named.
    ///
    /// ```
    /// # use runtrace_model::synth::TraceBuilder;
    /// let mut b = TraceBuilder::new();
    /// b.profile_elsewhere(99);
    /// b.stacks(&[(1, &[0x40_1000, 0x40_2000])]);
    /// b.cpu_sample(999, 5_000, 100, 1);
    /// assert_eq!(b.events(), 1);
    /// ```
    pub fn profile_elsewhere(&mut self, hz: u64) {
        self.profile(&ProfileInfo {
            mode: 1,
            hz,
            flags: 0,
            message: String::new(),
        });
        self.mappings(&[Mapping {
            start: 0x40_0000,
            end: 0x50_0000,
            file_offset: 0,
            build_id: Vec::new(),
            path: "/nonexistent/app".into(),
        }]);
    }

    /// `cpu_sample` of thread `tid` at `ticks` with stack id `stack`,
    /// written in the chunks of `writer` (the recorder's writer thread, as
    /// the recorder does).
    pub fn cpu_sample(&mut self, writer: u64, ticks: u64, tid: u64, stack: u64) {
        self.record(writer, None, ticks, ids::CPU_SAMPLE, &[tid, stack]);
    }

    /// `off_cpu` of thread `tid`: it ran again at `ticks` after `off_ns`
    /// off-CPU, having switched out in stack `stack`; in `writer`'s chunks.
    pub fn off_cpu(&mut self, writer: u64, ticks: u64, tid: u64, stack: u64, off_ns: u64) {
        self.record(writer, None, ticks, ids::OFF_CPU, &[tid, stack, off_ns]);
    }

    /// `alloc_sample` of thread `tid` at `ticks`: `size` bytes at `addr`
    /// standing for `weight` bytes, stack id `stack`, live-set state
    /// `live` (0 off, 1 tracked, 2 untracked); in `writer`'s chunks.
    ///
    /// ```
    /// let mut b = runtrace_model::synth::TraceBuilder::new();
    /// b.alloc_sample(1, 5_000, 100, 0, 64, 4096, 0x1000, 1);
    /// b.alloc_free(1, 9_000, 100, 0x1000, 0);
    /// assert_eq!(b.events(), 2);
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn alloc_sample(
        &mut self,
        writer: u64,
        ticks: u64,
        tid: u64,
        stack: u64,
        size: u64,
        weight: u64,
        addr: u64,
        live: u64,
    ) {
        self.record(
            writer,
            None,
            ticks,
            ids::ALLOC_SAMPLE,
            &[tid, stack, size, weight, addr, live],
        );
    }

    /// `alloc_free` by thread `tid` of the sampled allocation at `addr`
    /// (`moved_to` 0: freed; else moved there by realloc).
    pub fn alloc_free(&mut self, writer: u64, ticks: u64, tid: u64, addr: u64, moved_to: u64) {
        self.record(writer, None, ticks, ids::ALLOC_FREE, &[tid, addr, moved_to]);
    }

    /// `alloc_note`: the live set lost track of `untracked` samples and
    /// `lost_frees` frees since the previous note.
    pub fn alloc_note(&mut self, writer: u64, ticks: u64, untracked: u64, lost_frees: u64) {
        self.record(
            writer,
            None,
            ticks,
            ids::ALLOC_NOTE,
            &[untracked, lost_frees],
        );
    }

    /// A flight-recorder snapshot trigger (`snapshot_trigger`, group
    /// `recorder`) recorded by thread `writer` (the recorder's writer) at
    /// `ticks`, for `reason`.
    pub fn snapshot_trigger(&mut self, writer: u64, ticks: u64, reason: &str) {
        self.record_texts(writer, None, ticks, ids::SNAPSHOT_TRIGGER, &[], &[reason]);
    }

    /// A `snapshot_request` (the application's `snapshot!`) on `tid`.
    pub fn snapshot_request(&mut self, tid: u64, ticks: u64, reason: &str) {
        self.record_texts(tid, None, ticks, ids::SNAPSHOT_REQUEST, &[], &[reason]);
    }

    /// Reports `count` events lost on thread `tid` (a DROPPED frame).
    pub fn dropped(&mut self, tid: u64, count: u64, since: u64, until: u64) {
        self.dropped += count;
        frame::write(
            &mut self.out,
            FrameType::Dropped,
            &frame::dropped(tid, count, since, until),
        );
    }

    /// Appends one built-in event of wire id `id` to `tid`'s chunk,
    /// encoded by the catalog's field list (`probes/events.toml`) with the
    /// format's encoders (`runtrace_format::schema::wire`, as the recorder
    /// writes):
    /// `values` holds one value per field that has bytes on the wire (all
    /// but `worker` fields), in catalog order: integers, string and
    /// location ids as is, `i64`/`i32` as `v as u64`, `bool` as 0/1, `f64`
    /// as its bits, `task` as the task id (written as a delta against the
    /// task register). `worker`: `Some(w)` sets the worker register first
    /// (`NO_WORKER` for none), `None` leaves it.
    ///
    /// ```
    /// use runtrace_model::synth::TraceBuilder;
    /// use runtrace_format::schema::ids;
    /// let mut b = TraceBuilder::new();
    /// // task_terminate { task_id }
    /// b.record(1, None, 5_000, ids::TASK_TERMINATE, &[7]);
    /// assert_eq!(b.events(), 1);
    /// ```
    ///
    /// # Panics
    /// When `id` is not a built-in event or `values` does not match its
    /// fields (a bug in the calling test).
    pub fn record(&mut self, tid: u64, worker: Option<u32>, ticks: u64, id: u32, values: &[u64]) {
        self.record_texts(tid, worker, ticks, id, values, &[]);
    }

    /// [`TraceBuilder::record`] for an event with `str` fields: their
    /// values, in field order, come from `texts`.
    pub fn record_texts(
        &mut self,
        tid: u64,
        worker: Option<u32>,
        ticks: u64,
        id: u32,
        values: &[u64],
        texts: &[&str],
    ) {
        let ev = BUILTIN_EVENTS
            .iter()
            .find(|e| e.id == id)
            .unwrap_or_else(|| panic!("event id {id} is not a built-in event"));
        let t = self.threads.entry(tid).or_insert_with(|| ThreadBuf {
            start: ChunkState {
                ticks,
                task_reg: 0,
                worker_reg: NO_WORKER,
            },
            cur: ChunkState {
                ticks,
                task_reg: 0,
                worker_reg: NO_WORKER,
            },
            body: Vec::new(),
            count: 0,
        });
        if let Some(w) = worker {
            if w != t.cur.worker_reg {
                t.body.push(runtrace_format::SET_WORKER as u8);
                varint::put(&mut t.body, ticks.wrapping_sub(t.cur.ticks));
                varint::put(&mut t.body, (w as u64 + 1) & 0xffff_ffff);
                t.cur.ticks = ticks;
                t.cur.worker_reg = w;
            }
        }
        // Built-in ids are below the tag escape: one tag byte.
        t.body.push(id as u8);
        varint::put(&mut t.body, ticks.wrapping_sub(t.cur.ticks));
        t.cur.ticks = ticks;
        let mut vals = values.iter();
        let mut texts = texts.iter();
        for f in ev.fields {
            let enc = f.ty.encoding();
            if enc == wire::Encoding::Register {
                continue; // the worker register, no bytes
            }
            if enc == wire::Encoding::Str {
                let text = texts
                    .next()
                    .unwrap_or_else(|| panic!("{}: no text for `{}`", ev.name, f.name));
                wire::put_str(&mut t.body, text);
                continue;
            }
            let v = *vals
                .next()
                .unwrap_or_else(|| panic!("{}: no value for `{}`", ev.name, f.name));
            wire::put_bits(&mut t.body, &mut t.cur.task_reg, enc, v);
        }
        assert!(
            vals.next().is_none(),
            "{}: more values than fields",
            ev.name
        );
        t.count += 1;
        self.events += 1;
        if t.body.len() >= CHUNK_BYTES {
            Self::flush_thread(&mut self.out, tid, t);
        }
    }

    fn flush_thread(out: &mut Vec<u8>, tid: u64, t: &mut ThreadBuf) {
        if t.count == 0 {
            return;
        }
        let mut p = Vec::with_capacity(t.body.len() + 32);
        ChunkHeader {
            tid,
            state: t.start,
            count: t.count,
        }
        .encode(&mut p);
        p.extend_from_slice(&t.body);
        frame::write(out, FrameType::Chunk, &p);
        t.body.clear();
        t.count = 0;
        t.start = t.cur;
    }

    /// Writes every thread's pending events as chunks.
    pub fn flush(&mut self) {
        for (tid, t) in self.threads.iter_mut() {
            Self::flush_thread(&mut self.out, *tid, t);
        }
    }

    /// Flushes, then writes a ROUND frame. The caller promises that every
    /// event with a timestamp below `watermark` has been added by now.
    pub fn round(&mut self, watermark: u64) {
        self.flush();
        frame::write(&mut self.out, FrameType::Round, &frame::round(watermark));
    }

    /// Events added so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Flushes and seals the file (END frame); returns its bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.flush();
        // A one-file recording that ended cleanly (format 1.2).
        let finish = frame::Finish {
            files: 1,
            evicted: 0,
            events: self.events,
            dropped: self.dropped,
            lost_to_writes: 0,
        };
        frame::write(&mut self.out, FrameType::Finish, &finish.encode());
        frame::write(
            &mut self.out,
            FrameType::End,
            &frame::end(self.events, self.dropped),
        );
        self.out
    }

    /// Flushes and returns the bytes without an END frame (a recording cut
    /// short at a frame boundary).
    pub fn finish_unsealed(mut self) -> Vec<u8> {
        self.flush();
        self.out
    }

    /// `task_spawn` on thread `tid` (no worker register change).
    pub fn spawn(&mut self, tid: u64, ticks: u64, task: u64, parent: u64, loc: u64, queue: u64) {
        self.record(
            tid,
            None,
            ticks,
            ids::TASK_SPAWN,
            &[task, parent, loc, queue],
        );
    }

    /// `task_poll_start` by `worker` on `tid`; `queue` is a string id (0:
    /// empty, as tokio writes).
    pub fn poll_start(
        &mut self,
        tid: u64,
        worker: u32,
        ticks: u64,
        task: u64,
        queue: u64,
        local_q: u32,
    ) {
        self.record(
            tid,
            Some(worker),
            ticks,
            ids::TASK_POLL_START,
            &[task, queue, local_q as u64],
        );
    }

    /// `task_poll_end` by `worker` on `tid`.
    pub fn poll_end(&mut self, tid: u64, worker: u32, ticks: u64, task: u64, ready: bool) {
        self.record(
            tid,
            Some(worker),
            ticks,
            ids::TASK_POLL_END,
            &[task, ready as u64],
        );
    }

    /// `task_wake` of `woken` on `tid`, issued by `worker` (`NO_WORKER`:
    /// not from a worker).
    pub fn wake(&mut self, tid: u64, worker: u32, ticks: u64, woken: u64, waker: u64) {
        self.record(tid, Some(worker), ticks, ids::TASK_WAKE, &[woken, waker]);
    }

    /// `resource_new` on `tid` (worker 0): resource `id` of tokio's
    /// concrete type `ty` (a name id of [`TraceBuilder::string`]),
    /// created at location `loc` (0: none given).
    pub fn resource_new(
        &mut self,
        tid: u64,
        ticks: u64,
        id: u64,
        ty: u64,
        loc: u64,
        internal: bool,
    ) {
        self.record(
            tid,
            Some(0),
            ticks,
            ids::RESOURCE_NEW,
            &[id, ty, loc, internal as u64],
        );
    }

    /// `resource_poll` on `tid` (worker 0): `task` polled an operation on
    /// resource `id` (`ready` false: it waits).
    pub fn resource_poll(&mut self, tid: u64, ticks: u64, task: u64, id: u64, ready: bool) {
        self.record(
            tid,
            Some(0),
            ticks,
            ids::RESOURCE_POLL,
            &[task, id, ready as u64],
        );
    }

    /// `resource_release` on `tid` (worker 0): `task` released resource `id`.
    pub fn resource_release(&mut self, tid: u64, ticks: u64, task: u64, id: u64) {
        self.record(tid, Some(0), ticks, ids::RESOURCE_RELEASE, &[task, id]);
    }

    /// `task_terminate` on `tid`.
    pub fn terminate(&mut self, tid: u64, ticks: u64, task: u64) {
        self.record(tid, None, ticks, ids::TASK_TERMINATE, &[task]);
    }

    /// `worker_park`.
    pub fn park(&mut self, tid: u64, worker: u32, ticks: u64, local_q: u32, cpu_ns: u64) {
        self.record(
            tid,
            Some(worker),
            ticks,
            ids::WORKER_PARK,
            &[local_q as u64, cpu_ns],
        );
    }

    /// `worker_unpark`; `sched_wait_ns` is the thread's cumulative wait.
    pub fn unpark(&mut self, tid: u64, worker: u32, ticks: u64, cpu_ns: u64, sched_wait_ns: u64) {
        self.record(
            tid,
            Some(worker),
            ticks,
            ids::WORKER_UNPARK,
            &[cpu_ns, sched_wait_ns],
        );
    }

    /// `queue_sample` (`queue`: string id, 0 for the global queue only).
    pub fn queue_sample(&mut self, tid: u64, ticks: u64, global_q: u32, queue: u64, depth: u32) {
        self.record(
            tid,
            None,
            ticks,
            ids::QUEUE_SAMPLE,
            &[global_q as u64, queue, depth as u64],
        );
    }

    /// `span_new` on `tid`: span `span` (child of `parent`, 0: none) named
    /// `name` with fields text `fields` (the name is defined as a string
    /// the first time it is used, with an id from 1<<20 up, clear of the
    /// ids tests pick).
    pub fn span_new(
        &mut self,
        tid: u64,
        ticks: u64,
        span: u64,
        parent: u64,
        name: &str,
        fields: &str,
    ) {
        let id = self.auto_string(name);
        self.record_texts(
            tid,
            None,
            ticks,
            ids::SPAN_NEW,
            &[span, parent, id],
            &[fields],
        );
    }

    /// `span_enter` on `tid`.
    pub fn span_enter(&mut self, tid: u64, ticks: u64, span: u64) {
        self.record(tid, None, ticks, ids::SPAN_ENTER, &[span]);
    }

    /// `span_exit` on `tid`.
    pub fn span_exit(&mut self, tid: u64, ticks: u64, span: u64) {
        self.record(tid, None, ticks, ids::SPAN_EXIT, &[span]);
    }

    /// `span_close` on `tid`.
    pub fn span_close(&mut self, tid: u64, ticks: u64, span: u64) {
        self.record(tid, None, ticks, ids::SPAN_CLOSE, &[span]);
    }

    /// `task_dump_start` on `tid`: dump `dump` begins.
    pub fn task_dump_start(&mut self, tid: u64, ticks: u64, dump: u32, trigger: &str) {
        self.record_texts(
            tid,
            None,
            ticks,
            ids::TASK_DUMP_START,
            &[dump as u64],
            &[trigger],
        );
    }

    /// `task_dump` on `tid`: in dump `dump`, `task` sat at `point` (empty:
    /// in no tokio future).
    pub fn task_dump(&mut self, tid: u64, ticks: u64, task: u64, dump: u32, point: &str) {
        let id = self.auto_string(point);
        self.record_texts(
            tid,
            None,
            ticks,
            ids::TASK_DUMP,
            &[task, dump as u64, id],
            &[""],
        );
    }

    /// `runtime_name` on `tid`: runtime `runtime` is called `name`.
    pub fn runtime_name(&mut self, tid: u64, ticks: u64, runtime: u32, name: &str) {
        let id = self.auto_string(name);
        self.record(tid, None, ticks, ids::RUNTIME_NAME, &[runtime as u64, id]);
    }

    /// The string id of `text`, defined on first use (ids from 1<<20).
    fn auto_string(&mut self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        if let Some(&id) = self.auto_strings.get(text) {
            return id;
        }
        let id = (1 << 20) + self.auto_strings.len() as u64;
        self.auto_strings.insert(text.to_string(), id);
        self.string(id, text);
        id
    }

    /// `worker_start`.
    pub fn worker_start(&mut self, tid: u64, worker: u32, ticks: u64, runtime: u32) {
        self.record(
            tid,
            Some(worker),
            ticks,
            ids::WORKER_START,
            &[runtime as u64],
        );
    }

    // --- Application instrumentation (runtrace-sync's events). Names
    // (`lock`, `queue`, `op`, `role`, `cause`, `reason`) are string ids
    // defined with [`TraceBuilder::string`]; `ticks` is when the operation
    // ended (durations end at `ticks`).

    /// `lock_wait`: `tid` got lock `lock` after waiting `wait_ns`.
    pub fn lock_wait(&mut self, tid: u64, ticks: u64, lock: u64, wait_ns: u64, write: bool) {
        self.record(
            tid,
            None,
            ticks,
            ids::LOCK_WAIT,
            &[lock, wait_ns, write as u64],
        );
    }

    /// `lock_hold`: `tid` released `lock` after holding it `hold_ns`.
    pub fn lock_hold(&mut self, tid: u64, ticks: u64, lock: u64, hold_ns: u64, write: bool) {
        self.record(
            tid,
            None,
            ticks,
            ids::LOCK_HOLD,
            &[lock, hold_ns, write as u64],
        );
    }

    /// `enqueue` of item `seqno`; `queue_size` after it.
    pub fn enqueue(&mut self, tid: u64, ticks: u64, queue: u64, seqno: u64, queue_size: u32) {
        self.record(
            tid,
            None,
            ticks,
            ids::ENQUEUE,
            &[queue, seqno, queue_size as u64],
        );
    }

    /// `dequeue` of item `seqno`, which waited `queue_delay_ns`;
    /// `queue_size` after it.
    pub fn dequeue(
        &mut self,
        tid: u64,
        ticks: u64,
        queue: u64,
        seqno: u64,
        queue_delay_ns: u64,
        queue_size: u32,
    ) {
        self.record(
            tid,
            None,
            ticks,
            ids::DEQUEUE,
            &[queue, seqno, queue_delay_ns, queue_size as u64],
        );
    }

    /// `processing_end` of item `seqno` after `processing_ns`.
    pub fn processing_end(
        &mut self,
        tid: u64,
        ticks: u64,
        queue: u64,
        seqno: u64,
        processing_ns: u64,
        success: bool,
    ) {
        self.record(
            tid,
            None,
            ticks,
            ids::PROCESSING_END,
            &[queue, seqno, processing_ns, success as u64],
        );
    }

    /// `item_dropped` of would-be item `seqno` (`cause`: string id).
    pub fn item_dropped(
        &mut self,
        tid: u64,
        ticks: u64,
        queue: u64,
        seqno: u64,
        queue_size: u32,
        cause: u64,
    ) {
        self.record(
            tid,
            None,
            ticks,
            ids::ITEM_DROPPED,
            &[queue, seqno, queue_size as u64, cause],
        );
    }

    /// `queue_snapshot`.
    #[allow(clippy::too_many_arguments)]
    pub fn queue_snapshot(
        &mut self,
        tid: u64,
        ticks: u64,
        queue: u64,
        queue_size: u32,
        produced: u64,
        consumed: u64,
        dropped: u64,
    ) {
        self.record(
            tid,
            None,
            ticks,
            ids::QUEUE_SNAPSHOT,
            &[queue, queue_size as u64, produced, consumed, dropped],
        );
    }

    /// `backlog_trigger` (`reason`: string id).
    pub fn backlog_trigger(
        &mut self,
        tid: u64,
        ticks: u64,
        queue: u64,
        queue_size: u32,
        growth_rate_per_sec: i64,
        reason: u64,
    ) {
        self.record(
            tid,
            None,
            ticks,
            ids::BACKLOG_TRIGGER,
            &[queue, queue_size as u64, growth_rate_per_sec as u64, reason],
        );
    }

    /// `io`: operation `op` moved `bytes` in `io_ns`.
    pub fn io(&mut self, tid: u64, ticks: u64, op: u64, bytes: u64, io_ns: u64) {
        self.record(tid, None, ticks, ids::IO, &[op, bytes, io_ns]);
    }

    /// `thread_heartbeat` of `role`, `gap_ns` after the previous one.
    pub fn heartbeat(&mut self, tid: u64, ticks: u64, role: u64, gap_ns: u64) {
        self.record(tid, None, ticks, ids::THREAD_HEARTBEAT, &[role, gap_ns]);
    }
}

/// Parameters of [`workload`].
#[derive(Debug, Clone)]
pub struct Workload {
    /// Stop after about this many events.
    pub events: u64,
    /// Worker threads (tids 100, 101, ...; workers 0, 1, ...).
    pub workers: u32,
    /// Spawn locations (ids 1..=locations).
    pub locations: u64,
    /// Polls per task.
    pub polls_per_task: u32,
    /// Tasks alive at once per worker.
    pub live_per_worker: u32,
    /// Seed of the pseudo-random durations.
    pub seed: u64,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            events: 100_000,
            workers: 4,
            locations: 8,
            polls_per_task: 5,
            live_per_worker: 64,
            seed: 1,
        }
    }
}

/// A healthy runtime: every worker runs its own tasks round-robin (each
/// poll 1-20 us; a task is woken 5-50 us after its poll and runs again
/// when its turn comes, well under a millisecond later), tasks spawn, get polled
/// `polls_per_task` times and terminate; the workers never park; a global
/// queue sample every ms shows an empty queue. ROUND frames every ms of
/// trace time (the recorder's default is every 50 ms).
/// Returns the file's bytes and the number of events in it.
pub fn workload(w: &Workload) -> (Vec<u8>, u64) {
    let mut b = TraceBuilder::new();
    for l in 1..=w.locations {
        b.location(l, &format!("src/service_{l}.rs"), 10 + l as u32, 9);
    }
    for k in 0..w.workers {
        b.thread_name(100 + k as u64, &format!("worker-{k}"));
    }
    let mut rng = w.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut rand = move |lo: u64, hi: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        lo + rng % (hi - lo + 1)
    };
    struct Live {
        task: u64,
        polls: u32,
    }
    let workers = w.workers.max(1) as u64;
    // Per worker: its clock and its run list.
    let mut clock: Vec<u64> = vec![1_000; workers as usize];
    let mut live: Vec<Vec<Live>> = (0..workers).map(|_| Vec::new()).collect();
    let mut next_task = 1u64;
    let mut next_round = 1_000_000u64;
    let mut next_sample = 1_000_000u64;
    let mut cursor = vec![0usize; workers as usize];
    while b.events() < w.events {
        // Advance the worker that is furthest behind, so events come in
        // (roughly) time order across threads and rounds stay honest.
        let k = (0..workers as usize).min_by_key(|&k| clock[k]).unwrap_or(0);
        let tid = 100 + k as u64;
        let now = clock[k];
        while next_sample <= now {
            b.queue_sample(99, next_sample, 0, 0, 0);
            next_sample += 1_000_000;
        }
        while next_round <= now {
            b.round(next_round);
            next_round += 1_000_000;
        }
        if live[k].len() < w.live_per_worker as usize {
            let task = next_task;
            next_task += 1;
            let loc = 1 + task % w.locations.max(1);
            b.spawn(tid, now, task, 0, loc, 0);
            live[k].push(Live { task, polls: 0 });
            clock[k] = now + rand(50, 200);
            continue;
        }
        let i = cursor[k] % live[k].len();
        cursor[k] = cursor[k].wrapping_add(1);
        let task = live[k][i].task;
        let start = now;
        let local_q = (live[k].len() as u32).min(16) / 2;
        b.poll_start(tid, k as u32, start, task, 0, local_q);
        let end = start + rand(1_000, 20_000);
        live[k][i].polls += 1;
        let done = live[k][i].polls >= w.polls_per_task;
        b.poll_end(tid, k as u32, end, task, done);
        if done {
            b.terminate(tid, end, task);
            live[k].swap_remove(i);
        } else {
            // Woken a little after the poll: its next poll comes later.
            b.wake(tid, k as u32, end + rand(5, 50), task, 0);
        }
        clock[k] = end + rand(100, 1_000);
    }
    let n = b.events();
    (b.finish(), n)
}

/// A `runtrace::sync` lock "db" (name 5) held 25 ms by a task of
/// `src/flush.rs:7:9` in one poll on worker 0 (thread 1), every 50 ms for
/// 20 rounds; meanwhile a task of `src/req.rs:30:13` on worker 1 (thread
/// 2) waits for it 20 ms inside its poll, blocking its worker, then holds
/// it 80 us. The convoy's tests share it (`lock_convoy` in analyze and in
/// `top`'s windows).
///
/// ```
/// let bytes = runtrace_model::synth::named_lock_convoy();
/// assert!(bytes.len() > 500);
/// ```
pub fn named_lock_convoy() -> Vec<u8> {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    let mut b = TraceBuilder::new();
    b.location(1, "src/flush.rs", 7, 9);
    b.location(2, "src/req.rs", 30, 13);
    b.string(5, "db");
    let mut task = 100;
    for i in 0..20u64 {
        let at = i * 50 * MS;
        // The holder: one 25 ms poll holding the lock.
        b.spawn(1, at, task, 0, 1, 0);
        b.poll_start(1, 0, at + 100 * US, task, 0, 0);
        b.lock_hold(1, at + 25 * MS + 100 * US, 5, 25 * MS, true);
        b.poll_end(1, 0, at + 25 * MS + 150 * US, task, true);
        b.terminate(1, at + 25 * MS + 200 * US, task);
        // A waiter on worker 1: tries at +5 ms, gets it at the release.
        let w = task + 1;
        b.spawn(2, at + MS, w, 0, 2, 0);
        b.poll_start(2, 1, at + 5 * MS, w, 0, 0);
        b.lock_wait(2, at + 25 * MS + 120 * US, 5, 20 * MS + 120 * US, true);
        b.lock_hold(2, at + 25 * MS + 200 * US, 5, 80 * US, true);
        b.poll_end(2, 1, at + 25 * MS + 210 * US, w, true);
        b.terminate(2, at + 25 * MS + 220 * US, w);
        task += 2;
    }
    b.finish()
}

/// A tokio Mutex held across an await (resource 1, created at
/// `src/state.rs:4:17`): every 50 ms for 20 rounds, a task of
/// `src/sync.rs:12:5` (thread 1) locks it and awaits 40 ms holding it;
/// meanwhile 8 request tasks of `src/req.rs:40:9` (thread 2) try it and
/// wait; the holder releases it (`resource_release`) and wakes the first
/// waiter, and each waiter holds it 50 us, then releases it and wakes the
/// next. 160 waits in all: the first of each round is ended by the
/// holder's wake (task 1), the others by the previous waiter's. The
/// waiting outputs' tests share it.
///
/// ```
/// let bytes = runtrace_model::synth::mutex_held_across_await();
/// assert!(bytes.len() > 1_000);
/// ```
pub fn mutex_held_across_await() -> Vec<u8> {
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;
    let mut b = TraceBuilder::new();
    b.location(1, "src/sync.rs", 12, 5);
    b.location(2, "src/req.rs", 40, 9);
    b.location(3, "src/state.rs", 4, 17);
    b.string(7, "Mutex");
    b.resource_new(1, 0, 1, 7, 3, false);
    let holder = 1;
    b.spawn(1, 10, holder, 0, 1, 0);
    let mut task = 100;
    for i in 0..20u64 {
        let at = i * 50 * MS + MS;
        b.poll_start(1, 0, at, holder, 0, 0);
        b.resource_poll(1, at + US, holder, 1, true);
        b.poll_end(1, 0, at + 2 * US, holder, false);
        let ws: Vec<u64> = (0..8).map(|k| task + k).collect();
        for (k, &w) in ws.iter().enumerate() {
            let t = at + 5 * MS + k as u64 * 100 * US;
            b.spawn(2, t, w, 0, 2, 0);
            b.poll_start(2, 1, t + 10 * US, w, 0, 0);
            b.record(2, Some(1), t + 11 * US, ids::RESOURCE_POLL, &[w, 1, 0]);
            b.poll_end(2, 1, t + 12 * US, w, false);
        }
        b.wake(1, 0, at + 40 * MS, holder, 0);
        b.poll_start(1, 0, at + 40 * MS + 10 * US, holder, 0, 0);
        b.resource_release(1, at + 40 * MS + 20 * US, holder, 1);
        b.wake(1, 0, at + 40 * MS + 21 * US, ws[0], holder);
        b.poll_end(1, 0, at + 40 * MS + 30 * US, holder, false);
        let mut t = at + 40 * MS + 100 * US;
        for (k, &w) in ws.iter().enumerate() {
            b.poll_start(2, 1, t, w, 0, 0);
            b.record(2, Some(1), t + US, ids::RESOURCE_POLL, &[w, 1, 1]);
            b.record(2, Some(1), t + 50 * US, ids::RESOURCE_RELEASE, &[w, 1]);
            if let Some(&next) = ws.get(k + 1) {
                b.wake(2, 1, t + 51 * US, next, w);
            }
            b.poll_end(2, 1, t + 60 * US, w, true);
            b.terminate(2, t + 61 * US, w);
            t += 100 * US;
        }
        task += 8;
    }
    b.finish()
}
