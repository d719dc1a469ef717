//! The core every probe backend shares (the role `tracing-core` plays for
//! `tracing`): the trace clock and thread ids ([`clock`]), threads' CPU time
//! and scheduler wait ([`thread_time`]), and process-wide
//! names: interned strings (queue and lock names), spawn locations and
//! application-defined event schemas.
//!
//! The recorder writes ids (and the definitions, once per file); the USDT,
//! LTTng and perf-probe backends pass text, so each name also keeps a
//! NUL-terminated copy at a stable address for the life of the process.
//!
//! Ids are assigned once per process and never reused, so they stay valid
//! across recordings and rotated files. Each kind is an append-only log; the
//! recorder's writer remembers how much of each log a file has seen and
//! writes the rest before the chunks that may use it (an id is logged before
//! any event that carries it is published, so the writer, which reads the
//! log after taking the events, always finds it). Interning locks a mutex
//! once per new name, never per event.

#![warn(missing_docs)]

pub mod clock;
pub mod idset;
pub mod listeners;
pub mod parked;
pub mod thread_time;

use runtrace_format::frame::LocationDef;
use runtrace_format::schema::{FieldType, Schema, SchemaField};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::panic::Location;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The append-only definition logs (see the module docs).
#[derive(Default)]
pub struct Logs {
    /// Interned strings; id `i + 1` is `strings[i]`.
    pub strings: Vec<String>,
    string_ids: HashMap<String, Istr>,
    /// Spawn locations; id `i + 1` is `locations[i]`.
    pub locations: Vec<LocationDef>,
    location_ids: HashMap<(usize, u32, u32), Loc>,
    /// Application event schemas, in id order from `FIRST_USER_EVENT_ID`.
    pub schemas: Vec<Schema>,
}

fn logs() -> MutexGuard<'static, Logs> {
    static LOGS: OnceLock<Mutex<Logs>> = OnceLock::new();
    let m = LOGS.get_or_init(Default::default);
    // A panic while holding the lock cannot leave the logs half-updated in a
    // way that matters (each push is one step), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the logs (under their lock; keep it short).
pub fn with_logs<R>(f: impl FnOnce(&Logs) -> R) -> R {
    f(&logs())
}

/// Leaks a NUL-terminated copy of `s` (interned names live for the process).
fn leak_cstr(s: &str) -> &'static CStr {
    // Interior NULs cannot reach C consumers: cut there.
    let s = s.split('\0').next().unwrap_or("");
    Box::leak(CString::new(s).unwrap_or_default().into_boxed_c_str())
}

/// An interned string (a queue or lock name, ...), for `istr` fields.
///
/// ```
/// use runtrace_core::Istr;
/// let a = Istr::new("latency");
/// assert_eq!(a, Istr::new("latency"));
/// assert_eq!(a.c_str().to_str(), Ok("latency"));
/// assert_eq!(Istr::EMPTY.id(), 0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Istr {
    id: u32,
    text: &'static CStr,
}

impl PartialEq for Istr {
    fn eq(&self, o: &Istr) -> bool {
        self.id == o.id
    }
}
impl Eq for Istr {}
impl std::hash::Hash for Istr {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.id.hash(h)
    }
}
impl Default for Istr {
    fn default() -> Self {
        Istr::EMPTY
    }
}

impl Istr {
    /// The empty string (id 0, never written).
    pub const EMPTY: Istr = Istr { id: 0, text: c"" };

    /// Interns `s` (takes a lock the first time a text is seen; keep the
    /// result rather than interning per event).
    pub fn new(s: &str) -> Istr {
        if s.is_empty() {
            return Istr::EMPTY;
        }
        let mut l = logs();
        if let Some(&i) = l.string_ids.get(s) {
            return i;
        }
        l.strings.push(s.to_owned());
        let i = Istr {
            id: l.strings.len() as u32,
            text: leak_cstr(s),
        };
        l.string_ids.insert(s.to_owned(), i);
        i
    }

    /// The wire id.
    pub fn id(self) -> u32 {
        self.id
    }

    /// The text, NUL-terminated at a stable address (for C consumers).
    pub fn c_str(self) -> &'static CStr {
        self.text
    }
}

/// An interned spawn location, for `loc` fields.
///
/// ```
/// use runtrace_core::Loc;
/// #[track_caller]
/// fn here() -> Loc { Loc::caller() }
/// let a = here();
/// assert_ne!(a, here()); // a different line
/// assert!(a.c_str().to_str().unwrap().contains("src/lib.rs"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Loc {
    id: u32,
    text: &'static CStr,
}

impl PartialEq for Loc {
    fn eq(&self, o: &Loc) -> bool {
        self.id == o.id
    }
}
impl Eq for Loc {}
impl std::hash::Hash for Loc {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.id.hash(h)
    }
}
impl Default for Loc {
    fn default() -> Self {
        Loc::UNKNOWN
    }
}

impl Loc {
    /// Unknown location (id 0).
    pub const UNKNOWN: Loc = Loc { id: 0, text: c"" };

    /// Interns the caller's location (`#[track_caller]` chains pass it on).
    #[track_caller]
    pub fn caller() -> Loc {
        Loc::from_location(Location::caller())
    }

    /// Interns a location. A per-thread cache keyed by the location's address
    /// avoids the lock after the first sighting on a thread.
    pub fn from_location(l: &'static Location<'static>) -> Loc {
        thread_local! {
            static CACHE: std::cell::RefCell<HashMap<usize, Loc>> = Default::default();
        }
        let key = l as *const _ as usize;
        if let Ok(Some(loc)) = CACHE.try_with(|c| c.borrow().get(&key).copied()) {
            return loc;
        }
        let loc = {
            let mut g = logs();
            // Different `Location` statics can describe the same place
            // (generic instantiations): key by file address and position.
            let k = (l.file().as_ptr() as usize, l.line(), l.column());
            if let Some(&loc) = g.location_ids.get(&k) {
                loc
            } else {
                let id = g.locations.len() as u32 + 1;
                g.locations.push(LocationDef {
                    id: id as u64,
                    file: l.file().to_owned(),
                    line: l.line(),
                    col: l.column(),
                });
                let text = leak_cstr(&format!("{}:{}:{}", l.file(), l.line(), l.column()));
                let loc = Loc { id, text };
                g.location_ids.insert(k, loc);
                loc
            }
        };
        let _ = CACHE.try_with(|c| c.borrow_mut().insert(key, loc));
        loc
    }

    /// Interns a location given as its parts (tokio's resource spans carry
    /// their creation site as field values, not as a `Location`). A
    /// per-thread cache keyed by the file text's address avoids the lock
    /// after the first sighting on a thread: callers pass the `&'static
    /// str` of a `Location` (its address is stable, and the same as
    /// [`Loc::from_location`] keys by); the text is compared as well.
    ///
    /// ```
    /// use runtrace_core::Loc;
    /// let a = Loc::from_parts("src/db.rs", 12, 9);
    /// assert_eq!(a, Loc::from_parts("src/db.rs", 12, 9));
    /// assert_eq!(a.c_str().to_str().unwrap(), "src/db.rs:12:9");
    /// assert_eq!(Loc::from_parts("", 0, 0), Loc::UNKNOWN);
    /// ```
    pub fn from_parts(file: &str, line: u32, col: u32) -> Loc {
        if file.is_empty() {
            return Loc::UNKNOWN;
        }
        thread_local! {
            static CACHE: std::cell::RefCell<HashMap<(usize, usize, u32, u32), Loc>> = Default::default();
        }
        let key = (file.as_ptr() as usize, file.len(), line, col);
        // The text is compared too: a borrowed `file` may be gone and its
        // address reused for another text.
        let same = |l: &Loc| {
            let t = l.text.to_bytes();
            t.starts_with(file.as_bytes()) && t.get(file.len()) == Some(&b':')
        };
        if let Ok(Some(loc)) = CACHE.try_with(|c| c.borrow().get(&key).copied()) {
            if same(&loc) {
                return loc;
            }
        }
        let loc = {
            let mut g = logs();
            // Keyed like `from_location`: the same site given either way
            // is one id.
            let k = (file.as_ptr() as usize, line, col);
            match g.location_ids.get(&k) {
                Some(loc) if same(loc) => *loc,
                _ => {
                    let id = g.locations.len() as u32 + 1;
                    g.locations.push(LocationDef {
                        id: id as u64,
                        file: file.to_owned(),
                        line,
                        col,
                    });
                    let loc = Loc {
                        id,
                        text: leak_cstr(&format!("{file}:{line}:{col}")),
                    };
                    g.location_ids.insert(k, loc);
                    loc
                }
            }
        };
        let _ = CACHE.try_with(|c| c.borrow_mut().insert(key, loc));
        loc
    }

    /// The wire id.
    pub fn id(self) -> u32 {
        self.id
    }

    /// `file:line:col`, NUL-terminated at a stable address (empty when
    /// unknown).
    pub fn c_str(self) -> &'static CStr {
        self.text
    }
}

/// The static description of an application-defined event; made by the
/// generated probe code or `runtrace_recorder::user_events!`, not by hand.
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
