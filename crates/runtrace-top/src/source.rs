//! Where windows come from: a recording being written ([`Live`], followed
//! through [`runtrace_model::input::follow`], memory bounded by the
//! window), or a finished one ([`Replay`], read once into an index of
//! 32-byte events, then windows at any position: play, pause, step,
//! seek, next finding).
//!
//! ```
//! use runtrace_model::synth::{self, TraceBuilder};
//! use runtrace_top::source::{Options, Replay};
//! let dir = tempfile::tempdir().unwrap();
//! let mut b = TraceBuilder::new();
//! b.location(1, "src/main.rs", 3, 1);
//! for i in 0..20u64 {
//!     b.spawn(i + 1, i * 500_000_000, 1, 0, 1, 0);
//!     b.poll_start(i + 1, 0, i * 500_000_000 + 1_000, 1, 0, 0);
//!     b.poll_end(i + 1, 0, i * 500_000_000 + 2_000, 1, true);
//! }
//! std::fs::write(dir.path().join("trace.0.bin"), b.finish()).unwrap();
//! let mut r = Replay::open(dir.path(), Options::default()).unwrap();
//! r.seek(5.0);
//! let s = r.snapshot();
//! assert_eq!(s.at_ns, 5_000_000_000);
//! assert_eq!(s.locations[0].polls_per_s, 2.0); // 10 polls in 5 s
//! ```

use crate::lives::Lives;
use crate::snapshot::{self, Ages, Header, Key, Mode, Snapshot};
use crate::stagger::{Ask, Following};
use crate::window::{self, Collector};
use runtrace_analyze::functions::StackNames;
use runtrace_analyze::Thresholds;
use runtrace_format::files;
use runtrace_model::event::Ev;
use runtrace_model::input::{self, follow::Follow, ReadStats};
use runtrace_model::model::Model;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a view reads and judges.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The window, in seconds (default 5).
    pub window_s: f64,
    /// Replay speed (0.1 to 100; default 1, real time).
    pub speed: f64,
    /// The findings' thresholds (`runtrace analyze`'s).
    pub thresholds: Thresholds,
    /// How much of following [`Live`] does (all of it but to measure).
    pub stages: Stages,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window_s: 5.0,
            speed: 1.0,
            thresholds: Thresholds::default(),
            stages: Stages::All,
        }
    }
}

/// How far [`Live::refresh`] goes: every stage (what `top` does), or only
/// the first ones, to measure what each costs while following (the
/// `follow_stages` example; docs/top.md "Cost"). With fewer than all,
/// `refresh` shows nothing (None).
///
/// ```
/// use runtrace_top::source::{Options, Stages};
/// let opts = Options { stages: Stages::Lifecycle, ..Options::default() };
/// assert_eq!(Options::default().stages, Stages::All);
/// assert_ne!(opts.stages, Stages::All);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stages {
    /// Follow the files and keep the window's events and lives (reading,
    /// decoding, ordering, memory bounded by the window): no analysis.
    Read,
    /// ... and run the one lifecycle tracker the windows share (pairing
    /// polls, wakes and tasks; what each worker polls now) over every
    /// event: no window open.
    Lifecycle,
    /// ... and the windows: what `runtrace top` does.
    All,
}

/// One window of `path`, as `runtrace top --once` prints it: the latest
/// of a recording being written (`live`), else a finished recording's
/// window ending `at` seconds into it (its end when `None`). Errors name
/// the path.
pub fn once(path: &Path, opts: Options, live: bool, at: Option<f64>) -> Result<Snapshot, String> {
    if live {
        return Live::open(path, opts)?
            .snapshot_now()
            .ok_or_else(|| format!("{}: no events yet", path.display()));
    }
    let mut r = Replay::open(path, opts)?;
    r.seek(at.unwrap_or(f64::MAX));
    Ok(r.snapshot())
}

/// Whether to follow `path` as it grows: never when asked to replay,
/// always when asked to follow, else when a file is still being written
/// ([`is_live`]).
pub fn choose_live(path: &Path, replay: bool, follow: bool) -> Result<bool, String> {
    match (replay, follow) {
        (true, _) => Ok(false),
        (false, true) => Ok(true),
        (false, false) => is_live(path),
    }
}

/// Live when some file of `path` is still being written (`.active`).
///
/// Errors name the path: no such directory, no trace files.
pub fn is_live(path: &Path) -> Result<bool, String> {
    let files = files::expand(&[path.to_path_buf()])?;
    let mut any = false;
    for f in &files {
        if files::is_active_trace_file(f) {
            return Ok(true);
        }
        any |= files::is_trace_file(f);
    }
    if !any {
        return Err(match files::unreadable(path) {
            Some(why) => why,
            None => format!(
                "{}: no trace files (trace.N.bin or trace.N.bin.active)",
                path.display()
            ),
        });
    }
    Ok(false)
}

/// The recording of `model` with the most events (the one shown).
fn main_proc(model: &Model) -> Option<u32> {
    (0..model.procs.len() as u32)
        .filter(|&p| model.procs[p as usize].events > 0)
        .max_by_key(|&p| (model.procs[p as usize].events, p))
}

fn process_name(model: &Model, proc: u32, others: usize) -> String {
    let p = &model.procs[proc as usize];
    let mut s = format!("{} (pid {})", p.process_name, p.pid);
    if others > 0 {
        s.push_str(&format!(" [+{others} other recordings not shown]"));
    }
    s
}

/// The names of the CPU samples' stacks, kept from window to window
/// (stacks repeat; the symbolizer caches per address), made again when
/// the recording adds executable mappings.
#[derive(Default)]
struct Names(Option<(usize, StackNames)>);

impl Names {
    fn get(&mut self, model: &Model) -> &mut StackNames {
        let n = model.mappings.len();
        if self.0.as_ref().is_some_and(|(k, _)| *k != n) {
            self.0 = None;
        }
        &mut self
            .0
            .get_or_insert_with(|| {
                (
                    n,
                    StackNames::for_mappings(&model.mappings, Default::default()),
                )
            })
            .1
    }
}

/// A recording being written, followed.
pub struct Live {
    source: PathBuf,
    follow: Follow,
    coll: Collector,
    opts: Options,
    ages: Ages,
    /// (when, events read, dropped, dropped but profiler samples) over
    /// the last window.
    history: VecDeque<(Instant, u64, u64, u64)>,
    flushed: bool,
    problem: Option<String>,
    names: Names,
    /// The windows computed from one lifecycle (windows of at least two
    /// refreshes; see [`crate::stagger`]).
    stagger: Option<Following>,
    /// The collector's events fed to `stagger` ([`Collector::pushed`]).
    fed: u64,
}

/// How often windows open while following, and how far from its ideal
/// start the window shown may begin, in seconds, for a window of
/// `window_s` seconds and a refresh a second.
///
/// Windows open at refreshes, so every whole number of seconds, and every
/// event goes through the engine of each window open. Under 15 s one
/// opens at every refresh (the window shown begins within 0.75 s, or a
/// quarter of the window, of a window's length before the newest event:
/// about a tenth of the window for the default 5 s). From 15 s on, one
/// opens every `window_s / 5 - 1` whole seconds (at most eleven open,
/// seven with a 30 s window) and is shown at each refresh it is the nearest
/// for, within half that time and half a refresh of its ideal start: at
/// most a tenth of the window (a 30 s window holds 27-33 s; the screen
/// says what it holds).
///
/// ```
/// use runtrace_top::source::opening;
/// assert_eq!(opening(5.0), (1.0, 0.75));
/// assert_eq!(opening(14.0), (1.0, 0.75));
/// assert_eq!(opening(15.0), (2.0, 1.5));
/// assert_eq!(opening(30.0), (5.0, 3.0));
/// ```
pub fn opening(window_s: f64) -> (f64, f64) {
    let every = ((window_s / 5.0).floor() - 1.0).max(1.0);
    if every > 1.0 {
        (every, every / 2.0 + 0.5)
    } else {
        (1.0, 0.75f64.min(window_s / 4.0))
    }
}

impl Live {
    /// Starts following `path` (a directory or path prefix). Reads what is
    /// there; an error when it holds nothing readable as a trace.
    pub fn open(path: &Path, opts: Options) -> Result<Live, String> {
        let mut l = Live {
            source: path.to_path_buf(),
            follow: Follow::new(path),
            coll: Collector::default(),
            opts,
            ages: Ages::default(),
            history: VecDeque::new(),
            flushed: false,
            problem: None,
            names: Names::default(),
            stagger: None,
            fed: 0,
        };
        l.follow.poll(&mut l.coll)?;
        let st = l.follow.status();
        if st.events == 0
            && !st.notes.is_empty()
            && st.files.iter().all(|f| {
                st.notes
                    .iter()
                    .any(|n| n.starts_with(&*f.to_string_lossy()))
            })
        {
            return Err(st.notes.join("\n"));
        }
        Ok(l)
    }

    /// Reads what was written since, and the window ending at the newest
    /// event (None: no event yet).
    pub fn refresh(&mut self) -> Option<Snapshot> {
        self.problem = self.follow.poll(&mut self.coll).err();
        let st = self.follow.status();
        if st.idle > Duration::from_secs(2) && !self.flushed {
            // The writer stopped: its last round's events are all there is.
            self.follow.flush(&mut self.coll);
            self.flushed = true;
        } else if st.idle < Duration::from_secs(2) {
            self.flushed = false;
        }
        let now = Instant::now();
        let lifecycle_dropped = st.dropped.saturating_sub(st.profiler_dropped);
        self.history
            .push_back((now, st.events, st.dropped, lifecycle_dropped));
        let keep = Duration::from_secs_f64(self.opts.window_s);
        while self
            .history
            .front()
            .is_some_and(|h| now.duration_since(h.0) > keep)
        {
            self.history.pop_front();
        }
        let model = self.follow.model_mut();
        let proc = main_proc(model)?;
        let c = &mut self.coll;
        let t1 = c.evs.back()?.ticks;
        let p = &model.procs[proc as usize];
        // Not before the recording's start: rates are over the time the
        // window holds.
        let start = p.anchor_ticks.min(p.first_ticks);
        let t0 = t1
            .saturating_sub((self.opts.window_s * p.ticks_per_sec as f64) as u64)
            .max(start)
            .min(t1);
        // A window of at least two refreshes is the one (of those opened
        // over the window and fed every event since, through one
        // lifecycle) that began nearest to `t0`; else, or when none did, it
        // is computed whole from the events kept.
        let stages = self.opts.stages;
        let windowed = self.opts.window_s >= 2.0;
        let staggered = (windowed || stages == Stages::Lifecycle) && stages != Stages::Read;
        let tps = p.ticks_per_sec as f64;
        let (every, tolerance) = opening(self.opts.window_s);
        let (every, tolerance) = ((every * tps) as u64, (tolerance * tps) as u64);
        let new = (c.pushed - self.fed).min(c.evs.len() as u64) as usize;
        self.fed = c.pushed;
        if staggered {
            match &mut self.stagger {
                Some(f) if f.fits(model, proc) => f.feed(c.evs.range(c.evs.len() - new..), model),
                // No window: the tracker alone, from the newest event on.
                _ if stages == Stages::Lifecycle => {
                    self.stagger = Some(Following::new(model, proc, &c.lives, t1));
                }
                // The windows of this refresh and the next ones, over the
                // events kept (`Following::warm`).
                _ => {
                    let th = self.opts.thresholds;
                    self.stagger = Some(Following::warm(
                        model, proc, &c.lives, &c.evs, t0, every, th,
                    ));
                }
            }
        }
        // Memory bounded by the window.
        let keep = t0.saturating_sub(if windowed { tolerance } else { 0 });
        while c.evs.front().is_some_and(|e| e.ticks < keep) {
            c.evs.pop_front();
        }
        c.lives.forget_before(keep);
        c.heap.forget_before(keep);
        if stages != Stages::All {
            return None;
        }
        let (h0, h1) = (self.history.front()?, self.history.back()?);
        let dt = h1.0.duration_since(h0.0).as_secs_f64();
        // The drops of the window's time when this view has watched that
        // long, else every drop so far (when they happened is not known).
        // Lost profiler samples leave the lifecycle whole: only the other
        // drops caveat the findings (as in `runtrace analyze`).
        let dropped = if dt >= self.opts.window_s * 0.9 {
            h1.3 - h0.3
        } else {
            st.dropped.saturating_sub(st.profiler_dropped)
        };
        // A followed file's damage comes as notes (the header shows them),
        // not as a flag this view can date.
        let lost = window::Losses {
            dropped,
            damaged: false,
        };
        let joined = match &mut self.stagger {
            Some(f) if staggered => {
                let ask = Ask {
                    t0,
                    t1,
                    tolerance,
                    lost,
                    // Opened less often than refreshes, or the recording
                    // younger than the window (the window asked for begins
                    // at its start: the one opened there serves every
                    // refresh until it is older): shown at several.
                    keep: every > tps as u64 || t0 == start,
                };
                f.window(model, &c.lives, ask)
            }
            _ => None,
        };
        let (t0, mut w) = match joined {
            Some(j) => j,
            None => (
                t0,
                window::analyze(
                    model,
                    proc,
                    c.evs.iter(),
                    &c.lives,
                    t0,
                    t1,
                    self.opts.thresholds,
                    lost,
                ),
            ),
        };
        if let Some(f) = &mut self.stagger {
            // Half a refresh early: refreshes are not exactly a second apart.
            f.start_window_every(self.opts.thresholds, t1, every, tps as u64 / 2);
        }
        if w.profile.is_some() {
            w.add_functions(self.names.get(model));
        }
        let events_per_s = if dt > 0.5 {
            (h1.1 - h0.1) as f64 / dt
        } else {
            w.events as f64 / self.opts.window_s
        };
        let state = if st.finished {
            "finished".to_string()
        } else if st.idle > Duration::from_secs(2) {
            format!(
                "no new data for {:.0} s (the process exited or crashed?)",
                st.idle.as_secs_f64()
            )
        } else {
            "recording".to_string()
        };
        let mut notes = st.notes.clone();
        notes.extend(self.problem.clone());
        let header = Header {
            source: self.source.display().to_string(),
            process: process_name(model, proc, model.procs.len() - 1),
            events_per_s,
            dropped: st.dropped,
            dropped_recent: h1.2 - h0.2,
            files: st.files.len(),
            bytes: st.bytes,
            state,
            notes,
        };
        let mut snap = snapshot::build(
            &w,
            model,
            proc,
            t0,
            t1,
            Mode::Live,
            header,
            &mut self.ages,
            true,
        );
        snap.heap = self.coll.heap.window(proc, t0, t1);
        Some(snap)
    }

    /// Reads everything written so far, the writer's last round included,
    /// and returns the window ending at the newest event (`--once`).
    pub fn snapshot_now(&mut self) -> Option<Snapshot> {
        let _ = self.follow.poll(&mut self.coll);
        self.follow.flush(&mut self.coll);
        self.refresh()
    }

    /// Events and lives held (the memory bound's witnesses).
    pub fn held(&self) -> (usize, usize) {
        (self.coll.evs.len(), self.coll.lives.len())
    }

    /// Windows open while following (each costs every event followed its
    /// engine's pass): 0 before the first refresh and for windows under
    /// 2 s, computed whole.
    pub fn windows_open(&self) -> usize {
        self.stagger.as_ref().map_or(0, Following::windows)
    }
}

/// A finished recording, played back.
pub struct Replay {
    source: PathBuf,
    model: Model,
    stats: ReadStats,
    evs: Vec<Ev>,
    lives: Lives,
    heap: crate::heap::Heap,
    proc: u32,
    first: u64,
    last: u64,
    tps: f64,
    /// The window's end, in ticks.
    pos: u64,
    opts: Options,
    /// Playing paused.
    pub paused: bool,
    ages: Ages,
    contiguous: bool,
    names: Names,
}

/// Replay speeds allowed.
pub const SPEEDS: std::ops::RangeInclusive<f64> = 0.1..=100.0;

/// Parses a sliding window's length (`runtrace top --window`): 0.1 to
/// 3600 seconds; the error says what was expected.
///
/// ```
/// use runtrace_top::source::parse_window;
/// assert_eq!(parse_window("5"), Ok(5.0));
/// assert!(parse_window("0").is_err());
/// ```
pub fn parse_window(s: &str) -> Result<f64, String> {
    let w = s.trim().parse::<f64>().unwrap_or(f64::NAN);
    (0.1..=3600.0)
        .contains(&w)
        .then_some(w)
        .ok_or_else(|| format!("{s:?}: expected 0.1 to 3600 seconds"))
}

/// Parses a replay speed (`runtrace top --speed`): one of [`SPEEDS`].
///
/// ```
/// use runtrace_top::source::parse_speed;
/// assert_eq!(parse_speed("10"), Ok(10.0));
/// assert!(parse_speed("1000").is_err());
/// ```
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let x = s.trim().parse::<f64>().unwrap_or(f64::NAN);
    SPEEDS
        .contains(&x)
        .then_some(x)
        .ok_or_else(|| format!("{s:?}: expected 0.1 to 100"))
}

impl Replay {
    /// Reads `path` (a directory, files' prefix, or a file) once and
    /// stands at the first window. Errors name the files: no trace, or
    /// nothing readable.
    pub fn open(path: &Path, opts: Options) -> Result<Replay, String> {
        let files = files::expand(&[path.to_path_buf()])?;
        Replay::open_files(path, &files, opts)
    }

    /// [`Replay::open`] over trace `files` already listed (`source` names
    /// them in messages): what the MCP server's `get_window` reads.
    pub fn open_files(source: &Path, files: &[PathBuf], opts: Options) -> Result<Replay, String> {
        let path = source;
        let files = input::sorted(files);
        for f in &files {
            if let Some(why) = files::unreadable(f) {
                return Err(why);
            }
        }
        let mut c = Collector::default();
        let (model, stats) = input::read(&files, &mut c, None);
        let Some(proc) = main_proc(&model) else {
            let mut msg = format!("{}: no events", path.display());
            for e in &stats.errors {
                msg.push('\n');
                msg.push_str(e);
            }
            return Err(msg);
        };
        // The collector only pushed to the back, so this takes its buffer
        // as it is (no copy): filtering into a second vector was ~18% of
        // opening a recording (`perf record` of `top --once`), and held
        // both copies at once at the peak.
        let mut evs: Vec<Ev> = Vec::from(c.evs);
        if model.threads.iter().any(|t| t.proc != proc) {
            evs.retain(|e| model.threads[e.thread as usize].proc == proc);
        }
        // Late events (rare) out of place would hide from a window.
        if !evs.is_sorted_by_key(|e| e.ticks) {
            evs.sort_by_key(|e| e.ticks);
        }
        let p = &model.procs[proc as usize];
        let (first, last) = (p.anchor_ticks.min(p.first_ticks), p.last_ticks);
        let tps = p.ticks_per_sec as f64;
        let mut r = Replay {
            source: path.to_path_buf(),
            model,
            stats,
            evs,
            lives: c.lives,
            heap: c.heap,
            proc,
            first,
            last,
            tps,
            pos: first,
            opts,
            paused: false,
            ages: Ages::default(),
            contiguous: false,
            names: Names::default(),
        };
        r.pos = r.clamp(first as f64 + opts.window_s * tps);
        Ok(r)
    }

    fn clamp(&self, t: f64) -> u64 {
        (t.max(self.first as f64) as u64).min(self.last)
    }

    /// The window's end, in seconds since the recording started.
    pub fn at_s(&self) -> f64 {
        self.model.procs[self.proc as usize].ns(self.pos) as f64 / 1e9
    }

    /// The recording's length, in seconds.
    pub fn length_s(&self) -> f64 {
        self.model.procs[self.proc as usize].ns(self.last) as f64 / 1e9
    }

    /// At the recording's end.
    pub fn at_end(&self) -> bool {
        self.pos >= self.last
    }

    /// Plays `dt` of wall time at the replay speed (nothing when paused).
    pub fn advance(&mut self, dt: Duration) {
        if self.paused {
            return;
        }
        let t = self.pos as f64 + dt.as_secs_f64() * self.opts.speed * self.tps;
        self.pos = self.clamp(t);
        self.contiguous = true;
        if self.at_end() {
            self.paused = true;
        }
    }

    /// Steps `secs` forward (negative: back).
    pub fn step(&mut self, secs: f64) {
        self.pos = self.clamp(self.pos as f64 + secs * self.tps);
        self.contiguous = secs > 0.0 && secs <= self.opts.window_s;
    }

    /// Moves the window's end to `secs` since the recording started.
    pub fn seek(&mut self, secs: f64) {
        let p = &self.model.procs[self.proc as usize];
        self.pos = self.clamp(p.anchor_ticks as f64 + secs * self.tps);
        self.contiguous = false;
    }

    /// The replay speed.
    pub fn speed(&self) -> f64 {
        self.opts.speed
    }

    /// Sets the replay speed (clamped to [`SPEEDS`]).
    pub fn set_speed(&mut self, s: f64) {
        self.opts.speed = s.clamp(*SPEEDS.start(), *SPEEDS.end());
    }

    /// Moves to the next position (in steps of a second) whose window
    /// holds a finding the current one does not; stays and returns false
    /// when none comes before the end.
    pub fn next_finding(&mut self) -> bool {
        let here: Vec<Key> = self
            .analyse(self.pos)
            .report
            .findings
            .iter()
            .map(Key::of)
            .collect();
        let mut t = self.pos;
        let step = self.tps.max(1.0) as u64;
        while t < self.last {
            t = (t + step).min(self.last);
            let w = self.analyse(t);
            if w.report
                .findings
                .iter()
                .any(|f| !here.contains(&Key::of(f)))
            {
                self.pos = t;
                self.contiguous = false;
                return true;
            }
        }
        false
    }

    /// The window ending at `t1`: not before the recording's start (rates
    /// are over the time the window holds).
    fn window(&self, t1: u64) -> (u64, u64) {
        let t0 = t1.saturating_sub((self.opts.window_s * self.tps) as u64);
        (t0.max(self.first).min(t1), t1)
    }

    fn analyse(&mut self, t1: u64) -> window::Analysed {
        let (t0, t1) = self.window(t1);
        let a = self.evs.partition_point(|e| e.ticks < t0);
        let b = self.evs.partition_point(|e| e.ticks <= t1);
        window::analyze(
            &mut self.model,
            self.proc,
            self.evs[a..b].iter(),
            &self.lives,
            t0,
            t1,
            self.opts.thresholds,
            window::Losses {
                // As `runtrace analyze`: lost profiler samples hide no wake.
                dropped: self
                    .stats
                    .dropped
                    .saturating_sub(self.stats.profiler_dropped),
                damaged: self.stats.damaged,
            },
        )
    }

    /// The window at the current position.
    pub fn snapshot(&mut self) -> Snapshot {
        let (t0, t1) = self.window(self.pos);
        let mut w = self.analyse(self.pos);
        if w.profile.is_some() {
            w.add_functions(self.names.get(&self.model));
        }
        let secs = (t1 - t0) as f64 / self.tps.max(1.0);
        let state = if self.at_end() {
            "end of recording".to_string()
        } else if self.paused {
            "paused".to_string()
        } else {
            format!("replay {}x", self.opts.speed)
        };
        let header = Header {
            source: self.source.display().to_string(),
            process: process_name(&self.model, self.proc, self.model.procs.len() - 1),
            // Every kind read counts in the recording's rate; the window
            // holds runtime events only.
            events_per_s: w.events as f64 / secs.max(1e-9),
            dropped: self.stats.dropped,
            dropped_recent: 0,
            files: self.stats.files.len(),
            bytes: self.stats.bytes,
            state,
            notes: self.stats.errors.clone(),
        };
        let contiguous = std::mem::replace(&mut self.contiguous, true);
        let mut snap = snapshot::build(
            &w,
            &self.model,
            self.proc,
            t0,
            t1,
            Mode::Replay,
            header,
            &mut self.ages,
            contiguous,
        );
        snap.heap = self.heap.window(self.proc, t0, t1);
        snap
    }

    /// Bytes the index holds per event, and events held.
    pub fn index_size(&self) -> (usize, usize) {
        (std::mem::size_of::<Ev>(), self.evs.len())
    }
}
