//! Which events the analysis reads and which of their fields it takes:
//! built-in events by name, fields by the catalog's name and wire type
//! (generated from `probes/events.toml`, see `crate::event::catalog`), so
//! a reordered or extended schema in a trace still works and a mismatched
//! one is skipped rather than misread. Every built-in event of a group a
//! pass reads is kept: the kinds listed in [`wanted`] with their own
//! packing, any other (an event added to the catalog) packed by its field
//! types ([`generic`]).

use crate::event::catalog::*;
use crate::event::kind;
use crate::pass::Wants;
use runtrace_format::reader::Tables;
use runtrace_format::schema::{builtin, builtin_by_name, BuiltinEvent, FieldType, Schema};
use std::collections::HashMap;

/// How the analysis uses an event type: its kind and the positions, in
/// the trace's schema, of the fields [`wanted`] (or [`generic`]) lists for
/// that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Role {
    /// [`kind`] of the events, 0: not used.
    pub kind: u8,
    /// Field positions, in [`wanted`]'s order ([`NO_FIELD`]: the event has
    /// no field for that slot of a [`generic`] packing).
    pub f: [u8; 6],
    /// Packed by field types ([`generic`]), not by a packing of its own.
    pub generic: bool,
}

impl Role {
    pub const SKIP: Role = Role {
        kind: 0,
        f: [0; 6],
        generic: false,
    };
}

/// A slot of a [`generic`] packing that no field fills (its value is 0).
pub(crate) const NO_FIELD: u8 = u8::MAX;

/// The position of a field appended to an event after files were written
/// without it ([`appended`]) when the trace's schema lacks it: the
/// decoder keeps a value slot past the last field that is always 0.
pub(crate) const ZERO_FIELD: u8 = runtrace_format::MAX_FIELDS as u8;

/// Whether catalog field `i` of kind `k` was appended after files were
/// written without it: a schema without it still decodes (the field
/// reads as 0), as docs/format.md promises for these.
fn appended(k: u8, i: usize) -> bool {
    k == kind::ALLOC_SAMPLE && (i == alloc_sample::ADDR || i == alloc_sample::LIVE)
}

/// The catalog fields an event of kind `k` contributes, in the order the
/// decoder packs them into an [`crate::event::Ev`] (its doc has the
/// table); None for the kinds without a packing of their own.
pub(crate) fn wanted(k: u8) -> Option<&'static [usize]> {
    Some(match k {
        kind::SPAWN => &[
            task_spawn::TASK_ID,
            task_spawn::SPAWN_LOC,
            task_spawn::QUEUE,
            task_spawn::PARENT_TASK_ID,
        ],
        kind::POLL_START => &[
            task_poll_start::TASK_ID,
            task_poll_start::WORKER,
            task_poll_start::QUEUE,
            task_poll_start::LOCAL_Q,
        ],
        kind::POLL_END => &[
            task_poll_end::TASK_ID,
            task_poll_end::WORKER,
            task_poll_end::READY,
        ],
        kind::WAKE => &[task_wake::WOKEN_TASK_ID, task_wake::WORKER],
        kind::TERMINATE => &[task_terminate::TASK_ID],
        kind::PARK => &[worker_park::WORKER, worker_park::LOCAL_Q],
        kind::UNPARK => &[
            worker_unpark::WORKER,
            worker_unpark::SCHED_WAIT_NS,
            worker_unpark::CPU_NS,
        ],
        kind::QUEUE_SAMPLE => &[
            queue_sample::GLOBAL_Q,
            queue_sample::QUEUE,
            queue_sample::DEPTH,
        ],
        kind::WORKER_START => &[worker_start::WORKER, worker_start::RUNTIME],
        kind::WORKER_STOP => &[worker_stop::WORKER, worker_stop::RUNTIME],
        kind::RESOURCE_NEW => &[
            resource_new::RESOURCE_ID,
            resource_new::CREATED_AT,
            resource_new::CONCRETE_TYPE,
            resource_new::INTERNAL,
        ],
        kind::LOCK_WAIT => &[lock_wait::LOCK_NAME, lock_wait::WAIT_NS, lock_wait::WRITE],
        kind::LOCK_HOLD => &[lock_hold::LOCK_NAME, lock_hold::HOLD_NS, lock_hold::WRITE],
        kind::ENQUEUE => &[enqueue::QUEUE, enqueue::SEQNO, enqueue::QUEUE_SIZE],
        kind::DEQUEUE => &[dequeue::QUEUE, dequeue::QUEUE_DELAY_NS, dequeue::QUEUE_SIZE],
        kind::PROCESSING_END => &[
            processing_end::QUEUE,
            processing_end::PROCESSING_NS,
            processing_end::SUCCESS,
        ],
        kind::ITEM_DROPPED => &[
            item_dropped::QUEUE,
            item_dropped::QUEUE_SIZE,
            item_dropped::CAUSE,
        ],
        kind::QUEUE_SNAPSHOT => &[
            queue_snapshot::QUEUE,
            queue_snapshot::PRODUCED_TOTAL,
            queue_snapshot::QUEUE_SIZE,
        ],
        kind::BACKLOG_TRIGGER => &[
            backlog_trigger::QUEUE,
            backlog_trigger::QUEUE_SIZE,
            backlog_trigger::GROWTH_RATE_PER_SEC,
            backlog_trigger::REASON,
        ],
        kind::IO => &[io::OP, io::BYTES, io::IO_NS],
        kind::HEARTBEAT => &[thread_heartbeat::ROLE, thread_heartbeat::GAP_NS],
        kind::CPU_SAMPLE => &[cpu_sample::TID, cpu_sample::STACK],
        kind::OFF_CPU => &[off_cpu::TID, off_cpu::STACK, off_cpu::OFF_NS],
        kind::ALLOC_SAMPLE => &[
            alloc_sample::TID,
            alloc_sample::STACK,
            alloc_sample::SIZE,
            alloc_sample::WEIGHT,
            alloc_sample::ADDR,
            alloc_sample::LIVE,
        ],
        kind::ALLOC_FREE => &[alloc_free::TID, alloc_free::ADDR, alloc_free::MOVED_TO],
        kind::ALLOC_NOTE => &[alloc_note::UNTRACKED, alloc_note::LOST_FREES],
        kind::SPAN_NEW => &[
            span_new::SPAN,
            span_new::PARENT,
            span_new::NAME,
            span_new::FIELDS,
        ],
        kind::SPAN_ENTER => &[span_enter::SPAN],
        kind::SPAN_EXIT => &[span_exit::SPAN],
        kind::SPAN_CLOSE => &[span_close::SPAN],
        kind::SNAPSHOT_TRIGGER => &[snapshot_trigger::REASON],
        kind::SNAPSHOT_REQUEST => &[snapshot_request::REASON],
        _ => return None,
    })
}

/// The packing of a built-in event without one of its own, from its
/// field types (catalog positions, in the order `x`, `a`, `worker`,
/// `flag` of [`crate::event::Ev`]): `x` its `task` field, else its first
/// integer; `a` its next integer; `worker` its `worker` field, else its
/// first `istr` (a name, as the application events have); `flag` its
/// first `bool`. Text, `f64` and `loc` fields are not kept.
pub(crate) fn generic(b: &BuiltinEvent) -> [Option<usize>; 4] {
    let first = |want: &dyn Fn(FieldType) -> bool| b.fields.iter().position(|f| want(f.ty));
    let is_int = |t: FieldType| {
        matches!(
            t,
            FieldType::U64
                | FieldType::U32
                | FieldType::U16
                | FieldType::U8
                | FieldType::I64
                | FieldType::I32
        )
    };
    let task = first(&|t| t == FieldType::Task);
    let mut ints = b.fields.iter().enumerate().filter(|(_, f)| is_int(f.ty));
    let (x, a) = match task {
        Some(t) => (Some(t), ints.next().map(|(i, _)| i)),
        None => (ints.next().map(|(i, _)| i), ints.next().map(|(i, _)| i)),
    };
    let worker = first(&|t| t == FieldType::Worker).or_else(|| first(&|t| t == FieldType::Istr));
    [x, a, worker, first(&|t| t == FieldType::Bool)]
}

/// Snapshot triggers and requests: kept in the model whatever the passes
/// read (rare, and every tool shows them).
pub(crate) fn is_snapshot_mark(k: u8) -> bool {
    k == kind::SNAPSHOT_TRIGGER || k == kind::SNAPSHOT_REQUEST
}

/// The kinds the decoder has a fast path for, whose catalog layouts
/// `decode.rs` decodes inline (a test checks them against the catalog).
pub(crate) fn has_fast_path(k: u8) -> bool {
    matches!(
        k,
        kind::SPAWN | kind::POLL_START | kind::POLL_END | kind::WAKE | kind::TERMINATE
    )
}

/// The role of schema `s` for passes that read `wants`, and whether `s`
/// is exactly its catalog layout (the decoder's fast path).
pub(crate) fn role_of(s: &Schema, wants: Wants) -> (Role, bool) {
    if s.provider != "runtrace" {
        return (Role::SKIP, false);
    }
    let Some(b) = builtin_by_name(&s.name) else {
        return (Role::SKIP, false);
    };
    let k = b.id as u8;
    // Snapshot triggers go to the model whatever the passes read (rare,
    // and every tool shows them).
    if !wants.has(k) && !is_snapshot_mark(k) {
        return (Role::SKIP, false);
    }
    let listed = wanted(k);
    let want: Vec<Option<usize>> = match listed {
        Some(l) => l.iter().map(|&i| Some(i)).collect(),
        None => generic(b).to_vec(),
    };
    let mut role = Role {
        kind: k,
        f: [0; 6],
        generic: listed.is_none(),
    };
    for (j, &w) in want.iter().enumerate() {
        let Some(i) = w else {
            role.f[j] = NO_FIELD;
            continue;
        };
        let cf = &b.fields[i];
        match s
            .fields
            .iter()
            .position(|x| x.name == cf.name && x.ty.code() == cf.ty.code())
        {
            Some(p) => role.f[j] = p as u8,
            None if appended(k, i) => role.f[j] = ZERO_FIELD,
            None => return (Role::SKIP, false),
        }
    }
    let fast = has_fast_path(k)
        && want
            .iter()
            .zip(&role.f)
            .all(|(&w, &p)| w == Some(p as usize))
        && b.fields.len() == s.fields.len()
        && b.fields
            .iter()
            .zip(&s.fields)
            .all(|(x, y)| x.ty.code() == y.ty.code());
    (role, fast)
}

/// Whether `s` is exactly the catalog's built-in event of that id.
fn matches_catalog(s: &Schema) -> bool {
    builtin(s.id).is_some_and(|b| {
        b.name == s.name
            && b.fields.len() == s.fields.len()
            && b.fields
                .iter()
                .zip(&s.fields)
                .all(|(x, y)| x.name == y.name && x.ty.code() == y.ty.code())
    })
}

/// How to decode one event type: its field types, and what the analysis
/// takes from it.
pub(crate) struct Plan {
    /// Address of the schema the plan was made from (a redefined schema is
    /// a new allocation, so the plan is rebuilt).
    addr: usize,
    /// The chunk in which the plan was last checked against the tables.
    epoch: u64,
    pub role: Role,
    /// The schema is exactly the built-in layout of its role.
    pub fast: bool,
    pub types: Box<[FieldType]>,
}

/// Plans by event type id (ids up to 4095; larger ones in `big_plans`,
/// checked on every use).
#[derive(Default)]
pub(crate) struct Plans {
    /// The event groups to decode (see [`role_of`]).
    pub wants: Wants,
    plans: Vec<Option<Plan>>,
    big_plans: HashMap<u32, Plan>,
    pub unrecognised: u64,
}

impl Plans {
    /// The plan for event type `id`, or None when it has no schema. A
    /// chunk's tables do not change while it is decoded, so a plan checked
    /// against the tables once in chunk `epoch` is used as is after that.
    #[inline(always)]
    pub fn plan(&mut self, id: u32, tables: &Tables, epoch: u64) -> Option<&Plan> {
        let i = id as usize;
        if let Some(Some(p)) = self.plans.get(i) {
            if p.epoch == epoch {
                return self.plans[i].as_ref();
            }
        }
        self.check(id, tables, epoch)
    }

    #[cold]
    fn check(&mut self, id: u32, tables: &Tables, epoch: u64) -> Option<&Plan> {
        let s = &**tables.schema(id)?;
        let addr = s as *const Schema as usize;
        let i = id as usize;
        if let Some(Some(p)) = self.plans.get_mut(i) {
            if p.addr == addr {
                p.epoch = epoch;
                return self.plans[i].as_ref();
            }
        }
        if let Some(p) = self.big_plans.get(&id) {
            if p.addr == addr {
                return self.big_plans.get(&id);
            }
        }
        let (role, fast) = role_of(s, self.wants);
        // A built-in this analyser has no use for (queue_select, ...) is
        // fine; only a built-in whose fields differ from the catalog's is
        // worth a note.
        if role == Role::SKIP
            && s.provider == "runtrace"
            && s.id < runtrace_format::FIRST_USER_EVENT_ID
            && !matches_catalog(s)
        {
            self.unrecognised += 1;
        }
        let types: Box<[FieldType]> = s.fields.iter().map(|f| f.ty).collect();
        let plan = Plan {
            addr,
            epoch,
            role,
            fast,
            types,
        };
        if i < 4096 {
            if i >= self.plans.len() {
                self.plans.resize_with(i + 1, || None);
            }
            self.plans[i] = Some(plan);
            self.plans[i].as_ref()
        } else {
            self.big_plans.insert(id, plan);
            self.big_plans.get(&id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtrace_format::schema::BUILTIN_EVENTS;
    use FieldType as T;

    /// The layouts `decode.rs` decodes inline on its fast path.
    #[test]
    fn fast_path_layouts_are_the_catalogs() {
        let types = |k: u8| -> Vec<u8> {
            let b = BUILTIN_EVENTS.iter().find(|b| b.id == k as u32).unwrap();
            b.fields.iter().map(|f| f.ty.code()).collect()
        };
        let c = |v: &[T]| -> Vec<u8> { v.iter().map(|t| t.code()).collect() };
        assert_eq!(
            types(kind::POLL_START),
            c(&[T::Task, T::Worker, T::Istr, T::U64])
        );
        assert_eq!(types(kind::POLL_END), c(&[T::Task, T::Worker, T::Bool]));
        assert_eq!(types(kind::WAKE), c(&[T::Task, T::U64, T::Worker]));
        assert_eq!(types(kind::SPAWN), c(&[T::Task, T::U64, T::Loc, T::Istr]));
        assert_eq!(types(kind::TERMINATE), c(&[T::Task]));
    }

    #[test]
    fn every_catalog_event_of_a_group_has_a_role() {
        for b in BUILTIN_EVENTS {
            let k = b.id as u8;
            let wants = Wants::RUNTIME
                .or(Wants::APP)
                .or(Wants::PROFILE)
                .or(Wants::SPAN_EVENTS);
            let (role, fast) = role_of(&b.schema(), wants);
            if is_snapshot_mark(k) {
                // Read for the model whatever the passes want.
                for w in [wants, Wants::default()] {
                    let (r, fast) = role_of(&b.schema(), w);
                    assert_eq!((r.kind, r.generic, fast), (k, false, false));
                }
                continue;
            }
            if kind::is_runtime(k) || kind::is_app(k) || kind::is_profile(k) || kind::is_span(k) {
                assert_eq!(role.kind, k, "{}", b.name);
                assert_eq!(fast, has_fast_path(k), "{}", b.name);
                assert_eq!(role.generic, wanted(k).is_none(), "{}", b.name);
            } else {
                assert_eq!(role, Role::SKIP, "{}", b.name);
            }
            // A pass that does not read the group: skipped.
            let (r, _) = role_of(&b.schema(), Wants::default());
            assert_eq!(r, Role::SKIP);
            // The analyses of `runtrace analyze` and `backlog` never see
            // profile samples.
            if kind::is_profile(k) {
                let (r, _) = role_of(&b.schema(), Wants::RUNTIME.or(Wants::APP));
                assert_eq!(r, Role::SKIP, "{}", b.name);
            }
        }
    }

    /// An event without a packing of its own is packed by its field types,
    /// wherever its fields are.
    #[test]
    fn generic_packing_follows_field_types() {
        use runtrace_format::schema::{BuiltinField, Group};
        let f = |name: &'static str, ty: FieldType| BuiltinField { name, ty, doc: "" };
        let app = BuiltinEvent {
            id: 99,
            name: "request_done",
            json_name: "RequestDone",
            group: Group::App,
            doc: "",
            fields: &[],
        };
        let fields = [
            f("note", T::Str),
            f("route", T::Istr),
            f("ok", T::Bool),
            f("latency_ns", T::U64),
            f("delta", T::I32),
            f("extra", T::U64),
        ];
        let app = BuiltinEvent {
            fields: Box::leak(Box::new(fields)),
            ..app
        };
        assert_eq!(generic(&app), [Some(3), Some(4), Some(1), Some(2)]);
        let runtime_fields = [
            f("n", T::U32),
            f("worker", T::Worker),
            f("task_id", T::Task),
        ];
        let rt = BuiltinEvent {
            fields: Box::leak(Box::new(runtime_fields)),
            group: Group::Runtime,
            ..app
        };
        assert_eq!(generic(&rt), [Some(2), Some(0), Some(1), None]);
        let empty = BuiltinEvent { fields: &[], ..rt };
        assert_eq!(generic(&empty), [None; 4]);
    }
}
