//! The dataset's tables and columns: the one place that names them, and
//! the schema version written into every file's metadata.
//!
//! Renaming, retyping, removing or reordering a column is a schema change:
//! bump [`SCHEMA_VERSION`] and commit the new `schema/vN.txt` (the test
//! `schema_stability` compares [`describe`] with it). Adding a table is one
//! too.
//!
//! ```
//! use runtrace_parquet::schema::{Table, Ty};
//! let cols = Table::Polls.columns();
//! assert_eq!(cols[0].name, "pid");
//! assert!(cols.iter().any(|c| c.name == "wake_delay_ns" && c.ty == Ty::I64 && c.nullable));
//! assert_eq!(Table::Polls.arrow_schema().fields().len(), cols.len());
//! ```

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::collections::HashMap;
use std::sync::Arc;

/// Version of the tables' layout, in every file's metadata under
/// [`VERSION_KEY`]. 2: `polls.queue` and `tasks.parent_task_id` filled
/// (always null in 1), and the `cpu_samples` table. 3: the `spans` table,
/// and `runtime` / `runtime_name` in `polls` and `workers` (several
/// runtimes in one process). 4: the `resource_waits` and `alloc_samples`
/// tables.
pub const SCHEMA_VERSION: u32 = 4;
/// File metadata key of [`SCHEMA_VERSION`].
pub const VERSION_KEY: &str = "runtrace.schema_version";
/// File metadata key of the table's name.
pub const TABLE_KEY: &str = "runtrace.table";
/// Name of a list column's element field (Arrow's default).
pub const LIST_ITEM: &str = "item";
/// File metadata key of the recording id (16 hex digits).
pub const RECORDING_KEY: &str = "runtrace.recording_id";

/// A column's type. Ids are unsigned 64-bit, times and durations signed
/// 64-bit nanoseconds (epoch ns fit until 2262, and every engine has a
/// signed 64-bit integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// Unsigned 64-bit (ids, counts, bytes).
    U64,
    /// Unsigned 32-bit (worker indexes, queue depths).
    U32,
    /// Signed 64-bit (times and durations in ns).
    I64,
    /// 64-bit float.
    F64,
    /// Boolean.
    Bool,
    /// UTF-8 text.
    Str,
    /// A list of UTF-8 texts (a call stack's frames).
    StrList,
}

impl Ty {
    fn arrow(self) -> DataType {
        match self {
            Ty::U64 => DataType::UInt64,
            Ty::U32 => DataType::UInt32,
            Ty::I64 => DataType::Int64,
            Ty::F64 => DataType::Float64,
            Ty::Bool => DataType::Boolean,
            Ty::Str => DataType::Utf8,
            Ty::StrList => DataType::List(Arc::new(Field::new(LIST_ITEM, DataType::Utf8, false))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ty::U64 => "u64",
            Ty::U32 => "u32",
            Ty::I64 => "i64",
            Ty::F64 => "f64",
            Ty::Bool => "bool",
            Ty::Str => "string",
            Ty::StrList => "list<string>",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// snake_case name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// Whether it may be null.
    pub nullable: bool,
}

const fn c(name: &'static str, ty: Ty) -> Column {
    Column {
        name,
        ty,
        nullable: false,
    }
}

const fn n(name: &'static str, ty: Ty) -> Column {
    Column {
        name,
        ty,
        nullable: true,
    }
}

/// The columns every table starts with: which recording, which thread,
/// when (`ts_ns`, or `start_ns` in `polls`).
const POLLS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("task_id", Ty::U64),
    c("spawn_loc", Ty::Str),
    n("worker", Ty::U32),
    n("queue", Ty::Str),
    c("start_ns", Ty::I64),
    c("duration_ns", Ty::I64),
    n("wake_delay_ns", Ty::I64),
    c("local_q", Ty::U32),
    n("runtime", Ty::U32),
    n("runtime_name", Ty::Str),
];

const TASKS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    n("tid", Ty::U64),
    c("task_id", Ty::U64),
    c("spawn_loc", Ty::Str),
    n("parent_task_id", Ty::U64),
    n("spawn_ns", Ty::I64),
    n("terminate_ns", Ty::I64),
];

const WORKERS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    n("worker", Ty::U32),
    c("park_ns", Ty::I64),
    n("unpark_ns", Ty::I64),
    n("parked_ns", Ty::I64),
    c("local_q", Ty::U32),
    n("runtime", Ty::U32),
    n("runtime_name", Ty::Str),
];

const QUEUES: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    n("queue", Ty::Str),
    c("global_q", Ty::U32),
    c("depth", Ty::U32),
];

const LOCK_EVENTS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    c("lock", Ty::Str),
    n("wait_ns", Ty::I64),
    n("hold_ns", Ty::I64),
    c("write", Ty::Bool),
];

const IO_EVENTS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    c("op", Ty::Str),
    c("io_ns", Ty::I64),
    c("bytes", Ty::U64),
];

const BACKLOG_TRIGGERS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    c("queue", Ty::Str),
    c("queue_size", Ty::U32),
    c("growth_rate", Ty::I64),
    c("reason", Ty::Str),
];

const QUEUE_SNAPSHOTS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    c("queue", Ty::Str),
    c("queue_size", Ty::U32),
    c("produced_total", Ty::U64),
];

const CPU_SAMPLES: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    n("task_id", Ty::U64),
    n("spawn_loc", Ty::Str),
    n("worker", Ty::U32),
    n("poll_start_ns", Ty::I64),
    c("on_cpu", Ty::Bool),
    n("off_ns", Ty::I64),
    n("thread", Ty::Str),
    n("function", Ty::Str),
    c("stack", Ty::StrList),
];

const ALLOC_SAMPLES: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("ts_ns", Ty::I64),
    n("task_id", Ty::U64),
    n("spawn_loc", Ty::Str),
    n("worker", Ty::U32),
    c("size", Ty::U64),
    c("weight", Ty::U64),
    c("live", Ty::Str),
    n("freed_ns", Ty::I64),
    n("thread", Ty::Str),
    n("function", Ty::Str),
    c("stack", Ty::StrList),
];

const SPANS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("span_id", Ty::U64),
    n("parent_span_id", Ty::U64),
    c("name", Ty::Str),
    c("label", Ty::Str),
    n("fields", Ty::Str),
    n("task_id", Ty::U64),
    n("worker", Ty::U32),
    n("runtime", Ty::U32),
    n("runtime_name", Ty::Str),
    c("new_ns", Ty::I64),
    n("first_enter_ns", Ty::I64),
    n("close_ns", Ty::I64),
    n("wall_ns", Ty::I64),
    c("busy_ns", Ty::I64),
    c("delay_ns", Ty::I64),
    c("enters", Ty::U32),
];

const RESOURCE_WAITS: &[Column] = &[
    c("pid", Ty::U64),
    c("recording_id", Ty::U64),
    c("tid", Ty::U64),
    c("task_id", Ty::U64),
    c("spawn_loc", Ty::Str),
    c("resource_id", Ty::U32),
    c("resource_kind", Ty::Str),
    n("resource_created_at", Ty::Str),
    c("resource_internal", Ty::Bool),
    c("start_ns", Ty::I64),
    c("end_ns", Ty::I64),
    c("wait_ns", Ty::I64),
    n("released_by", Ty::Str),
    n("released_by_task_id", Ty::U64),
    n("released_by_loc", Ty::Str),
];

/// The tables of a dataset, one directory each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per completed poll.
    Polls,
    /// One row per task: spawn and terminate.
    Tasks,
    /// One row per park/unpark stretch of a worker.
    Workers,
    /// Global and named queue samples.
    Queues,
    /// Lock waits and holds.
    LockEvents,
    /// Timed I/O operations.
    IoEvents,
    /// Backlog triggers.
    BacklogTriggers,
    /// Queue snapshots.
    QueueSnapshots,
    /// CPU-profile samples, on and off CPU, with symbolized stacks.
    CpuSamples,
    /// One row per span of the application (closed, or open at the end).
    Spans,
    /// One row per finished wait of a task on a tokio resource (a lock,
    /// a semaphore, a channel).
    ResourceWaits,
    /// Sampled heap allocations (the memory profile), with their frees.
    AllocSamples,
}

impl Table {
    /// Every table, in directory order.
    pub const ALL: [Table; 12] = [
        Table::Polls,
        Table::Tasks,
        Table::Workers,
        Table::Queues,
        Table::LockEvents,
        Table::IoEvents,
        Table::BacklogTriggers,
        Table::QueueSnapshots,
        Table::CpuSamples,
        Table::Spans,
        Table::ResourceWaits,
        Table::AllocSamples,
    ];

    /// Its position in [`Table::ALL`] (the order of a recording's
    /// writers), so writers are found by table, never by a number that a
    /// new table shifts.
    ///
    /// ```
    /// use runtrace_parquet::schema::Table;
    /// for (i, t) in Table::ALL.iter().enumerate() {
    ///     assert_eq!(t.index(), i);
    /// }
    /// ```
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Its directory (and SQL table) name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Polls => "polls",
            Table::Tasks => "tasks",
            Table::Workers => "workers",
            Table::Queues => "queues",
            Table::LockEvents => "lock_events",
            Table::IoEvents => "io_events",
            Table::BacklogTriggers => "backlog_triggers",
            Table::QueueSnapshots => "queue_snapshots",
            Table::CpuSamples => "cpu_samples",
            Table::Spans => "spans",
            Table::ResourceWaits => "resource_waits",
            Table::AllocSamples => "alloc_samples",
        }
    }

    /// Its columns in file order (the partition columns `service`, `host`
    /// and `date` come from the directory names, not the files).
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Polls => POLLS,
            Table::Tasks => TASKS,
            Table::Workers => WORKERS,
            Table::Queues => QUEUES,
            Table::LockEvents => LOCK_EVENTS,
            Table::IoEvents => IO_EVENTS,
            Table::BacklogTriggers => BACKLOG_TRIGGERS,
            Table::QueueSnapshots => QUEUE_SNAPSHOTS,
            Table::CpuSamples => CPU_SAMPLES,
            Table::Spans => SPANS,
            Table::ResourceWaits => RESOURCE_WAITS,
            Table::AllocSamples => ALLOC_SAMPLES,
        }
    }

    /// Its Arrow schema, with the table name and [`SCHEMA_VERSION`] in the
    /// metadata.
    pub fn arrow_schema(self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns()
            .iter()
            .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
            .collect();
        let meta = HashMap::from([
            (VERSION_KEY.to_string(), SCHEMA_VERSION.to_string()),
            (TABLE_KEY.to_string(), self.name().to_string()),
        ]);
        Arc::new(Schema::new_with_metadata(fields, meta))
    }
}

/// Every table and column as text, one `table.column type [null]` a line:
/// what `schema/vN.txt` holds for version N.
pub fn describe() -> String {
    let mut s = String::new();
    for t in Table::ALL {
        for c in t.columns() {
            s.push_str(&format!(
                "{}.{} {}{}\n",
                t.name(),
                c.name,
                c.ty.name(),
                if c.nullable { " null" } else { "" }
            ));
        }
    }
    s
}
