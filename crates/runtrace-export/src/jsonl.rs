//! Traces to JSON Lines (`runtrace jsonl`), one object per event, in
//! timestamp order across threads and files.
//!
//! Every line has `"event"` (the display name: `PollStart`, ...,
//! `provider:name` for application events), `"timestamp_ns"` (ns since the
//! recording started), `"tid"`, then every field under its schema name:
//!
//! | field type | JSON |
//! |---|---|
//! | integers, `task` | number |
//! | `bool` | `true` / `false` |
//! | `f64` | number (`null` when not finite) |
//! | `str`, `istr` | string |
//! | `worker` | number, `null` off the workers |
//! | `loc` field `X` | `"X_id"` (number) and `"X"` (`"file:line:col"`, `null` for id 0) |
//!
//! CPU samples (`CpuSample`, `OffCpu`) are written by the recorder's writer
//! thread: their `"tid"` is the sampled thread and `"writer_tid"` the
//! writer; `"stack"` is the id of a `STACKS` frame's stack.
//!
//! `PollStart`, `PollEnd`, `WakeEvent` and `TaskTerminate` also get
//! `"spawn_loc_id"` and `"spawn_loc"` of their task (the event's `task`
//! field: `woken_task_id` for a wake), remembered from its `TaskSpawn`'s
//! `task` and `loc` fields (both `null` when the spawn is not
//! in the trace) and kept past its `TaskTerminate` for the task's own
//! polls that follow it (the last poll's `PollEnd`; tokio's extra poll at
//! shutdown); a wake after the end names no location. These are the names the user guide's Python snippets read.
//!
//! ```no_run
//! let summary = runtrace_export::jsonl::write_jsonl(&["trace.0.bin"], std::io::stdout(), |e| eprintln!("{e}"))
//!     .expect("write failed");
//! eprintln!("{} events", summary.events);
//! ```

use runtrace_format::files::{sort_trace_paths, unreadable};
use runtrace_format::merge::EventStream;
use runtrace_format::output::{refuse_input, AtomicFile};
use runtrace_format::per_schema::PerSchema;
use runtrace_format::schema::{builtin, ids};
use runtrace_format::{Event, FieldType, Record, Schema, Value};
use serde_json::ser::{CompactFormatter, Formatter};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;

/// Turns decoded events into JSON lines, remembering each live task's spawn
/// location so later events of the task can name it.
///
/// ```
/// use runtrace_export::jsonl::JsonlEncoder;
/// use runtrace_format::{schema::builtin_by_name, Event, Value};
/// use std::sync::Arc;
/// let schema = Arc::new(builtin_by_name("task_terminate").unwrap().schema());
/// let ev = Event { ticks: 5, ns: 40, tid: 7, schema, values: vec![Value::U(3)] };
/// let mut out = Vec::new();
/// JsonlEncoder::new().write_event(&ev, &mut out).unwrap();
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "{\"event\":\"TaskTerminate\",\"timestamp_ns\":40,\"tid\":7,\"task_id\":3,\
///      \"spawn_loc_id\":null,\"spawn_loc\":null}\n"
/// );
/// ```
pub struct JsonlEncoder {
    layouts: PerSchema<Layout>,
    /// task id -> (location id, location text), from `TaskSpawn` until
    /// `TaskTerminate`, so memory follows the number of live tasks.
    spawn_locs: HashMap<u64, (u64, Option<Arc<str>>)>,
    /// Recently terminated tasks, for their events after `TaskTerminate`:
    /// tokio fires it inside the task's last poll (whose `PollEnd`
    /// follows), and at runtime shutdown may poll the task once more. Two
    /// generations of at most [`MAX_ENDED`] each: memory stays bounded.
    ended: [HashMap<u64, SpawnLoc>; 2],
}

/// Bound on one generation of [`JsonlEncoder`]'s terminated-task table.
const MAX_ENDED: usize = 1 << 16;

/// How events of one schema are written, worked out once per schema.
struct Layout {
    /// `{"event":"<name>","timestamp_ns":`
    head: String,
    /// `,"tid":` (the recording thread), or `,"writer_tid":` for CPU
    /// samples, whose own `tid` field names the sampled thread.
    tid_key: &'static str,
    /// Per field, `,"<key>":` (and for `loc` fields the `_id` key first).
    keys: Vec<FieldKeys>,
    role: Role,
}

struct FieldKeys {
    key: String,
    loc_id_key: Option<String>,
}

/// What a built-in event means for the spawn-location table.
enum Role {
    Plain,
    /// `TaskSpawn`: remember the location of the task.
    Spawn {
        task: usize,
        loc: usize,
    },
    /// Name the spawn location of the task in field `task`; `step` says
    /// what the event means for the task's lifetime.
    Enrich {
        task: usize,
        step: Step,
        id_key: String,
        text_key: String,
    },
}

/// The keys under which enriched events name their task's spawn location:
/// those of the `task_spawn`'s location field in JSONL (`"X_id"`, `"X"`
/// for a `loc` field `X`: `spawn_loc_id`, `spawn_loc`).
fn spawn_loc_keys() -> (String, String) {
    let loc = builtin(ids::TASK_SPAWN)
        .and_then(|b| b.fields.iter().find(|f| f.ty == FieldType::Loc))
        .map_or("spawn_loc", |f| f.name);
    (format!("{loc}_id"), loc.to_string())
}

/// The spawn location of task `t` for an event that means `step`, from
/// the live (`live`) and terminated (`ended`) tables.
fn lookup(
    live: &mut HashMap<u64, SpawnLoc>,
    ended: &mut [HashMap<u64, SpawnLoc>; 2],
    t: u64,
    step: Step,
) -> Option<SpawnLoc> {
    match step {
        Step::Keep => live.get(&t).cloned(),
        Step::Poll => live
            .get(&t)
            .or_else(|| ended[0].get(&t))
            .or_else(|| ended[1].get(&t))
            .cloned(),
        Step::Terminate => {
            let k = live.remove(&t)?;
            if ended[0].len() >= MAX_ENDED {
                // The older generation goes.
                ended[1] = std::mem::take(&mut ended[0]);
            }
            ended[0].insert(t, k.clone());
            Some(k)
        }
    }
}

/// A task's spawn location: id and text.
type SpawnLoc = (u64, Option<Arc<str>>);

/// What an enriched event means for its task's entry.
#[derive(Clone, Copy)]
enum Step {
    /// `WakeEvent`: a live task's (a wake after the end names none).
    Keep,
    /// `PollStart`, `PollEnd`: the task's own polls, also the ones after
    /// its `TaskTerminate` (its last poll's end, tokio's shutdown poll).
    Poll,
    /// `TaskTerminate`: the task is no longer live.
    Terminate,
}

impl Default for JsonlEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonlEncoder {
    /// An encoder that has seen no events yet.
    pub fn new() -> Self {
        JsonlEncoder {
            layouts: PerSchema::new(),
            spawn_locs: HashMap::new(),
            ended: [HashMap::new(), HashMap::new()],
        }
    }

    /// Number of tasks whose spawn location is remembered (spawned and not
    /// yet terminated).
    pub fn live_tasks(&self) -> usize {
        self.spawn_locs.len()
    }

    /// Writes `ev` as one JSON object and a newline.
    pub fn write_event<W: Write + ?Sized>(&mut self, ev: &Event, out: &mut W) -> io::Result<()> {
        let layout = self.layouts.get(&ev.schema, Layout::new);
        out.write_all(layout.head.as_bytes())?;
        CompactFormatter.write_i64(out, ev.ns)?;
        out.write_all(layout.tid_key.as_bytes())?;
        CompactFormatter.write_u64(out, ev.tid)?;
        for (keys, v) in layout.keys.iter().zip(&ev.values) {
            match (v, &keys.loc_id_key) {
                (Value::Loc { id, text }, Some(id_key)) => {
                    out.write_all(id_key.as_bytes())?;
                    CompactFormatter.write_u64(out, *id)?;
                    out.write_all(keys.key.as_bytes())?;
                    write_opt_str(out, text.as_deref())?;
                }
                _ => {
                    out.write_all(keys.key.as_bytes())?;
                    write_value(out, v)?;
                }
            }
        }
        let task_of = |i: usize| ev.values.get(i).and_then(Value::as_u64);
        match &layout.role {
            Role::Plain => {}
            Role::Spawn { task, loc } => {
                if let (Some(t), Some(Value::Loc { id, text })) =
                    (task_of(*task), ev.values.get(*loc))
                {
                    self.spawn_locs.insert(t, (*id, text.clone()));
                }
            }
            Role::Enrich {
                task,
                step,
                id_key,
                text_key,
            } => {
                let (live, ended) = (&mut self.spawn_locs, &mut self.ended);
                let known = task_of(*task).and_then(|t| lookup(live, ended, t, *step));
                out.write_all(id_key.as_bytes())?;
                match &known {
                    Some((id, _)) => CompactFormatter.write_u64(out, *id)?,
                    None => out.write_all(b"null")?,
                }
                out.write_all(text_key.as_bytes())?;
                write_opt_str(out, known.as_ref().and_then(|(_, t)| t.as_deref()))?;
            }
        }
        out.write_all(b"}\n")
    }
}

impl Layout {
    fn new(s: &Schema) -> Layout {
        // Only the genuine built-ins: an application schema that happens to
        // reuse an id or a name must not feed or read the table.
        let is_builtin =
            s.provider == "runtrace" && builtin(s.id).is_some_and(|b| b.name == s.name);
        // CPU samples are written by the recorder's writer thread: "tid"
        // is the sampled thread (their field), the writer is "writer_tid".
        let (tid_name, tid_key) = match s.id {
            ids::CPU_SAMPLE | ids::OFF_CPU if is_builtin => ("writer_tid", ",\"writer_tid\":"),
            _ => ("tid", ",\"tid\":"),
        };
        // Keys must be unique or a JSON reader keeps only the last one: an
        // application field called "event" would hide the event name. Later
        // duplicates get a numeric suffix.
        let mut used: HashSet<String> =
            ["event", "timestamp_ns", tid_name].map(String::from).into();
        let mut claim = |name: &str| -> String {
            let mut k = name.to_string();
            let mut n = 2;
            while !used.insert(k.clone()) {
                k = format!("{name}_{n}");
                n += 1;
            }
            format!(",{}:", json_str(&k))
        };
        let keys = s
            .fields
            .iter()
            .map(|f| {
                let loc_id_key = (f.ty == FieldType::Loc).then(|| claim(&format!("{}_id", f.name)));
                FieldKeys {
                    key: claim(&f.name),
                    loc_id_key,
                }
            })
            .collect();
        // The task an event is about is its `task` field, and a spawn's
        // location its `loc` field: the catalog gives each built-in event
        // at most one task field, so the roles follow from field types.
        let field = |ty: FieldType| s.fields.iter().position(|f| f.ty == ty);
        let (id_key, text_key) = spawn_loc_keys();
        let mut enrich = |step: Step| match field(FieldType::Task) {
            Some(task) => Role::Enrich {
                task,
                step,
                id_key: claim(&id_key),
                text_key: claim(&text_key),
            },
            None => Role::Plain,
        };
        let role = match s.id {
            _ if !is_builtin => Role::Plain,
            ids::TASK_SPAWN => match (field(FieldType::Task), field(FieldType::Loc)) {
                (Some(task), Some(loc)) => Role::Spawn { task, loc },
                _ => Role::Plain,
            },
            ids::TASK_POLL_START | ids::TASK_POLL_END => enrich(Step::Poll),
            ids::TASK_WAKE => enrich(Step::Keep),
            ids::TASK_TERMINATE => enrich(Step::Terminate),
            _ => Role::Plain,
        };
        let head = format!(
            "{{\"event\":{},\"timestamp_ns\":",
            json_str(&s.display_name())
        );
        Layout {
            head,
            tid_key,
            keys,
            role,
        }
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn write_opt_str<W: Write + ?Sized>(out: &mut W, s: Option<&str>) -> io::Result<()> {
    match s {
        Some(s) => write_str(out, s),
        None => out.write_all(b"null"),
    }
}

fn write_str<W: Write + ?Sized>(out: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::from)
}

fn write_value<W: Write + ?Sized>(out: &mut W, v: &Value) -> io::Result<()> {
    let mut f = CompactFormatter;
    match v {
        Value::U(x) => f.write_u64(out, *x),
        Value::I(x) => f.write_i64(out, *x),
        Value::Bool(b) => f.write_bool(out, *b),
        Value::F(x) if x.is_finite() => f.write_f64(out, *x),
        Value::F(_) => out.write_all(b"null"),
        Value::Str(s) => write_str(out, s),
        // Only reached for a loc value without a loc key (cannot happen for
        // a decoded event); the text is the more useful half.
        Value::Loc { text, .. } => write_opt_str(out, text.as_deref()),
        Value::Worker(Some(w)) => f.write_u32(out, *w),
        Value::Worker(None) => out.write_all(b"null"),
    }
}

/// What a conversion did.
///
/// ```
/// // No input at all: nothing written, nothing wrong.
/// let s = runtrace_export::jsonl::write_jsonl::<&str, _>(&[], Vec::new(), |_| {}).unwrap();
/// assert_eq!(s.events, 0);
/// assert!(s.is_clean() && !s.output_closed);
/// ```
#[derive(Debug, Clone, Default)]
pub struct JsonlSummary {
    /// Events written.
    pub events: u64,
    /// Problems found (unreadable paths, truncation, corruption), each
    /// naming its file; the conversion went on past them.
    pub errors: Vec<String>,
    /// True when the reader went away (a closed pipe, as with `| head`) and
    /// the conversion stopped early.
    pub output_closed: bool,
    /// Things worth knowing that are not damage: the ordering bound hit
    /// (a file without `ROUND` frames, events then possibly out of order).
    pub notes: Vec<String>,
}

impl JsonlSummary {
    /// True when every input was read completely without damage.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Converts trace files to JSON Lines on `out` (buffered here).
///
/// The paths are sorted as `trace.0.bin`, `trace.1.bin`, ... and read as one
/// recording. Damage is passed to `on_error` as soon as it is found (and kept
/// in the summary); conversion continues with the next readable frame or
/// file. A file without an `END` frame counts as an error too: the
/// recording was cut short. Only a failure to write is returned as `Err`; a
/// closed pipe ends the conversion quietly (see
/// [`JsonlSummary::output_closed`]).
///
/// ```
/// let mut seen = Vec::new();
/// let s = runtrace_export::jsonl::write_jsonl(&["/nonexistent/trace.0.bin"], Vec::new(), |e| {
///     seen.push(e.to_string())
/// })
/// .unwrap();
/// assert_eq!(s.events, 0);
/// assert!(seen[0].starts_with("/nonexistent/trace.0.bin: cannot open: "));
/// assert_eq!(s.errors, seen);
/// ```
pub fn write_jsonl<P: AsRef<Path>, W: Write>(
    paths: &[P],
    out: W,
    mut on_error: impl FnMut(&str),
) -> io::Result<JsonlSummary> {
    let mut summary = JsonlSummary::default();
    let mut report = |summary: &mut JsonlSummary, msg: String| {
        on_error(&msg);
        summary.errors.push(msg);
    };
    let mut readable = Vec::new();
    for p in paths {
        match unreadable(p.as_ref()) {
            Some(msg) => report(&mut summary, msg),
            None => readable.push(p.as_ref().to_path_buf()),
        }
    }
    let mut readable = runtrace_format::files::dedup(readable);
    sort_trace_paths(&mut readable);
    let mut stream = match EventStream::open(&readable) {
        Ok(s) => s,
        Err(e) => {
            // Only if a file vanished since the check above.
            report(&mut summary, e.to_string());
            return Ok(summary);
        }
    };
    // Headers and END frames both go through the record callback; a file
    // with a header but no END was cut short. (Files without a readable
    // header are reported by the reader already.)
    let (headers, ends) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
    let (h, e) = (headers.clone(), ends.clone());
    stream.on_record(move |rec, _| match rec {
        Record::Header(_) => h.set(h.get() + 1),
        Record::End { .. } => e.set(e.get() + 1),
        _ => {}
    });

    let mut out = BufWriter::with_capacity(1 << 18, out);
    let mut enc = JsonlEncoder::new();
    let mut seen_errors = 0;
    let mut write_result = Ok(());
    while let Some(ev) = stream.next_event() {
        for e in &stream.errors()[seen_errors..] {
            report(&mut summary, e.to_string());
        }
        seen_errors = stream.errors().len();
        if let Err(e) = enc.write_event(&ev, &mut out) {
            write_result = Err(e);
            break;
        }
        summary.events += 1;
    }
    let write_result = write_result.and_then(|()| out.flush());
    if let Err(e) = write_result {
        if e.kind() == io::ErrorKind::BrokenPipe {
            summary.output_closed = true;
            return Ok(summary);
        }
        return Err(e);
    }
    for e in &stream.errors()[seen_errors..] {
        report(&mut summary, e.to_string());
    }
    let st = stream.stats();
    if st.forced_releases > 0 {
        summary.notes.push(format!(
            "events held for time ordering outgrew the bound ({} bytes) {} times (files without ROUND frames?): the oldest were written early; {} events came out of order",
            runtrace_format::merge::MAX_PENDING_BYTES,
            st.forced_releases,
            st.late_events
        ));
    }
    let unsealed = headers.get().saturating_sub(ends.get());
    if unsealed > 0 {
        report(
            &mut summary,
            format!(
                "{unsealed} of {} trace files end without an END frame: the recording was cut short (or is still being written)",
                headers.get()
            ),
        );
    }
    Ok(summary)
}

/// Converts `files` to JSON Lines in `output` (standard output for `None`
/// or `-`), printing problems to standard error. Returns the exit code:
/// 0 when everything was read cleanly, 1 otherwise. This is `runtrace
/// jsonl`, and what `examples/trace_to_jsonl.rs` calls.
///
/// ```no_run
/// use std::path::{Path, PathBuf};
/// let code = runtrace_export::jsonl::convert(&[PathBuf::from("trace.0.bin")], Some(Path::new("trace.jsonl")));
/// # let _ = code;
/// ```
pub fn convert(files: &[PathBuf], output: Option<&Path>) -> ExitCode {
    let output = output.filter(|p| *p != Path::new("-"));
    let on_error = |e: &str| eprintln!("runtrace: {e}");
    let result = match output {
        None => write_jsonl(files, io::stdout().lock(), on_error),
        Some(path) => {
            if let Err(e) = refuse_input(path, files) {
                eprintln!("runtrace: {e}");
                return ExitCode::FAILURE;
            }
            // Complete or not at all: renamed into place once written.
            let mut f = match AtomicFile::create(path) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("runtrace: {}: cannot create: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            };
            write_jsonl(files, &mut f, on_error).and_then(|s| f.commit().map(|()| s))
        }
    };
    if let Ok(s) = &result {
        for n in &s.notes {
            eprintln!("runtrace: note: {n}");
        }
    }
    match result {
        Ok(s) if s.is_clean() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            let to = output.map_or_else(
                || "standard output".to_string(),
                |p| p.display().to_string(),
            );
            eprintln!("runtrace: writing {to}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_format::schema::builtin_by_name;

    fn line(name: &str, tid: u64, values: Vec<Value>) -> String {
        let schema = Arc::new(builtin_by_name(name).unwrap().schema());
        let ev = Event {
            ticks: 5,
            ns: 40,
            tid,
            schema,
            values,
        };
        let mut out = Vec::new();
        JsonlEncoder::new().write_event(&ev, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A CPU sample's "tid" is the sampled thread, not the writer thread
    /// whose chunk holds it.
    #[test]
    fn cpu_samples_name_the_sampled_thread() {
        assert_eq!(
            line("cpu_sample", 7, vec![Value::U(100), Value::U(3)]),
            "{\"event\":\"CpuSample\",\"timestamp_ns\":40,\"writer_tid\":7,\"tid\":100,\"stack\":3}\n"
        );
        assert_eq!(
            line("off_cpu", 7, vec![Value::U(100), Value::U(3), Value::U(500)]),
            "{\"event\":\"OffCpu\",\"timestamp_ns\":40,\"writer_tid\":7,\"tid\":100,\"stack\":3,\"off_ns\":500}\n"
        );
        // Other events keep the recording thread as "tid".
        assert!(line("task_terminate", 7, vec![Value::U(3)]).contains("\"tid\":7,"));
    }
}
