//! Process-wide definitions: interned strings, spawn locations and
//! application-defined event schemas.
//!
//! Ids are assigned once per process and never reused, so they stay valid
//! across recordings and rotated files. Each kind is an append-only log; the
//! writer remembers how much of each log a file has seen and writes the rest
//! before the chunks that may use it (an id is logged before any event that
//! carries it is published, so the writer, which reads the log after taking
//! the events, always finds it). Lookups lock a mutex; they happen once per
//! new name, never per event.

use runtrace_format::frame::LocationDef;
use runtrace_format::schema::{FieldType, Schema, SchemaField};
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

#[derive(Default)]
pub(crate) struct Logs {
    pub(crate) strings: Vec<String>,
    string_ids: HashMap<String, u32>,
    pub(crate) locations: Vec<LocationDef>,
    location_ids: HashMap<(usize, u32, u32), u32>,
    pub(crate) schemas: Vec<Schema>,
}

fn logs() -> MutexGuard<'static, Logs> {
    static LOGS: OnceLock<Mutex<Logs>> = OnceLock::new();
    let m = LOGS.get_or_init(Default::default);
    // A panic while holding the lock cannot leave the logs half-updated in a
    // way that matters (each push is one step), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn with_logs<R>(f: impl FnOnce(&Logs) -> R) -> R {
    f(&logs())
}

/// An interned string (a queue or lock name, ...), for `istr` fields.
///
/// ```
/// use runtrace_recorder::Istr;
/// let a = Istr::new("latency");
/// assert_eq!(a, Istr::new("latency"));
/// assert_eq!(Istr::EMPTY.id(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Istr(u32);

impl Istr {
    /// The empty string (id 0, never written).
    pub const EMPTY: Istr = Istr(0);

    /// Interns `s` (takes a lock the first time a text is seen; keep the
    /// result rather than interning per event).
    pub fn new(s: &str) -> Istr {
        if s.is_empty() {
            return Istr::EMPTY;
        }
        let mut l = logs();
        if let Some(&id) = l.string_ids.get(s) {
            return Istr(id);
        }
        l.strings.push(s.to_owned());
        let id = l.strings.len() as u32;
        l.string_ids.insert(s.to_owned(), id);
        Istr(id)
    }

    /// The wire id.
    pub fn id(self) -> u32 {
        self.0
    }
}

/// An interned spawn location, for `loc` fields.
///
/// ```
/// use runtrace_recorder::Loc;
/// #[track_caller]
/// fn here() -> Loc { Loc::caller() }
/// let a = here();
/// assert_ne!(a, here()); // a different line
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Loc(u32);

impl Loc {
    /// Unknown location (id 0).
    pub const UNKNOWN: Loc = Loc(0);

    /// Interns the caller's location (`#[track_caller]` chains pass it on).
    #[track_caller]
    pub fn caller() -> Loc {
        Loc::from_location(Location::caller())
    }

    /// Interns a location. A per-thread cache keyed by the location's address
    /// avoids the lock after the first sighting on a thread.
    pub fn from_location(l: &'static Location<'static>) -> Loc {
        thread_local! {
            static CACHE: std::cell::RefCell<HashMap<usize, u32>> = Default::default();
        }
        let key = l as *const _ as usize;
        if let Ok(Some(id)) = CACHE.try_with(|c| c.borrow().get(&key).copied()) {
            return Loc(id);
        }
        let id = {
            let mut g = logs();
            // Different `Location` statics can describe the same place
            // (generic instantiations): key by file address and position.
            let k = (l.file().as_ptr() as usize, l.line(), l.column());
            if let Some(&id) = g.location_ids.get(&k) {
                id
            } else {
                let id = g.locations.len() as u32 + 1;
                g.locations.push(LocationDef {
                    id: id as u64,
                    file: l.file().to_owned(),
                    line: l.line(),
                    col: l.column(),
                });
                g.location_ids.insert(k, id);
                id
            }
        };
        let _ = CACHE.try_with(|c| c.borrow_mut().insert(key, id));
        Loc(id)
    }

    /// The wire id.
    pub fn id(self) -> u32 {
        self.0
    }
}

/// The static description of an application-defined event; made by
/// [`user_events!`](crate::user_events), not by hand.
#[derive(Debug)]
pub struct UserEventDef {
    /// Provider name.
    pub provider: &'static str,
    /// Event name.
    pub name: &'static str,
    /// Fields, in order.
    pub fields: &'static [(&'static str, FieldType)],
    id: AtomicU32,
}

impl UserEventDef {
    /// A definition; its wire id is assigned on first use.
    pub const fn new(
        provider: &'static str,
        name: &'static str,
        fields: &'static [(&'static str, FieldType)],
    ) -> Self {
        UserEventDef {
            provider,
            name,
            fields,
            id: AtomicU32::new(0),
        }
    }

    /// The wire id, registering the schema on first call.
    #[inline]
    pub fn id(&self) -> u32 {
        // Acquire: pairs with the Release in `register`, so whoever sees the
        // id also sees the schema logged before it (the writer relies on it).
        let id = self.id.load(Ordering::Acquire);
        if id != 0 {
            return id;
        }
        self.register()
    }

    #[cold]
    fn register(&self) -> u32 {
        let mut l = logs();
        // Re-check under the lock: another thread may have registered it.
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            return id;
        }
        let id = runtrace_format::FIRST_USER_EVENT_ID + l.schemas.len() as u32;
        l.schemas.push(Schema {
            id,
            provider: self.provider.to_owned(),
            name: self.name.to_owned(),
            fields: self
                .fields
                .iter()
                .map(|(n, t)| SchemaField {
                    name: (*n).to_owned(),
                    ty: *t,
                })
                .collect(),
        });
        self.id.store(id, Ordering::Release);
        id
    }
}
