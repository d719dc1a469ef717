//! The event catalog: the TOML file (`probes/events.toml`, an
//! application's `probes/<provider>.toml`) every backend is generated from,
//! read and checked.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"d\"\n\
//!      fields = [{ name = \"status\", type = \"u16\", doc = \"s\" }]\n",
//! )
//! .unwrap();
//! assert_eq!(cat.events[0].fields[0].ty, "u16");
//! ```

use crate::symbols::RUNTRACE_PROVIDER;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// An event group of the built-in catalog (`group = "..."`): what reads
/// the event, and whether code fires it at a probe site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupInfo {
    /// The catalog's name.
    pub name: &'static str,
    /// The `runtrace_format::schema::Group` variant.
    pub variant: &'static str,
    /// Events of the group are fired at probe sites, so the USDT, LTTng
    /// and perf-probe backends generate them (all but `profile`, whose
    /// events the recorder's writer thread writes itself).
    pub probe_site: bool,
    /// One line for the catalog's reader.
    pub doc: &'static str,
}

/// The groups of the built-in catalog, in id order of their first event.
pub const GROUPS: &[GroupInfo] = &[
    GroupInfo {
        name: "runtime",
        variant: "Runtime",
        probe_site: true,
        doc: "Task, worker and queue events of a runtime (tokio's hooks, the instrumented executor): `runtrace analyze`'s input.",
    },
    GroupInfo {
        name: "executor",
        variant: "Executor",
        probe_site: true,
        doc: "The instrumented executor's own scheduling decisions.",
    },
    GroupInfo {
        name: "app",
        variant: "App",
        probe_site: true,
        doc: "Application instrumentation (runtrace-sync: locks, queues, I/O, heartbeats): `runtrace backlog`'s input.",
    },
    GroupInfo {
        name: "profile",
        variant: "Profile",
        probe_site: false,
        doc: "CPU profile samples, written by the recorder's writer thread: no probe site.",
    },
    GroupInfo {
        name: "span",
        variant: "Span",
        probe_site: true,
        doc: "The application's own `tracing` spans (runtrace-tokio's layer): `runtrace analyze`'s span table.",
    },
    GroupInfo {
        name: "recorder",
        variant: "Recorder",
        probe_site: false,
        doc: "The recorder's own marks (a flight-recorder snapshot's trigger), written by its writer thread: no probe site.",
    },
];

/// The group called `name`, if it is one.
///
/// ```
/// assert!(!runtrace_build::group("profile").unwrap().probe_site);
/// assert!(runtrace_build::group("meta").is_none());
/// ```
pub fn group(name: &str) -> Option<&'static GroupInfo> {
    GROUPS.iter().find(|g| g.name == name)
}

/// An event catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// Provider name (`runtrace` for the built-ins).
    #[serde(default = "default_provider")]
    pub provider: String,
    /// The events.
    #[serde(rename = "event")]
    pub events: Vec<Event>,
}

fn default_provider() -> String {
    RUNTRACE_PROVIDER.into()
}

/// One event of a catalog.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// snake_case name.
    pub name: String,
    /// Wire id (built-ins only; application events get theirs at run time).
    pub id: Option<u32>,
    /// Name printed by `runtrace jsonl` (built-ins).
    pub json: Option<String>,
    /// One of [`GROUPS`] (built-ins only; see [`Event::has_probe_site`]).
    pub group: Option<String>,
    /// One-line description.
    pub doc: String,
    /// Fields in order.
    pub fields: Vec<Field>,
}

/// One field of an event.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// snake_case name.
    pub name: String,
    /// One of [`crate::types::TYPES`].
    #[serde(rename = "type")]
    pub ty: String,
    /// One-line description.
    pub doc: String,
}

impl Event {
    /// Whether code fires this event at a probe site: every event but
    /// those of a group without one (`profile`, which the recorder's
    /// writer thread writes itself). Application events always have one.
    ///
    /// ```
    /// let cat = runtrace_build::Catalog::parse(
    ///     "[[event]]\nname = \"s\"\nid = 1\njson = \"S\"\ngroup = \"profile\"\ndoc = \"\"\nfields = []\n",
    /// )
    /// .unwrap();
    /// assert!(!cat.events[0].has_probe_site());
    /// ```
    pub fn has_probe_site(&self) -> bool {
        self.group
            .as_deref()
            .and_then(group)
            .is_none_or(|g| g.probe_site)
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

impl Catalog {
    /// Reads and checks a catalog; errors name the file and the problem.
    pub fn load(path: impl AsRef<Path>) -> Result<Catalog, String> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Catalog::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The catalog without the events that have no probe site (see
    /// [`Event::has_probe_site`]): what the USDT, LTTng and perf-probe
    /// backends generate from.
    pub fn probe_sites(&self) -> Catalog {
        Catalog {
            provider: self.provider.clone(),
            events: self
                .events
                .iter()
                .filter(|e| e.has_probe_site())
                .cloned()
                .collect(),
        }
    }

    /// Appends `more`'s events (of the same provider) and checks the
    /// whole again: names and ids stay unique.
    ///
    /// ```
    /// let mut a = runtrace_build::Catalog::parse("provider = \"p\"\n[[event]]\nname = \"a\"\ndoc = \"\"\nfields = []\n").unwrap();
    /// let b = runtrace_build::Catalog::parse("provider = \"p\"\n[[event]]\nname = \"a\"\ndoc = \"\"\nfields = []\n").unwrap();
    /// assert!(a.extend(b).unwrap_err().contains("defined twice"));
    /// ```
    pub fn extend(&mut self, more: Catalog) -> Result<(), String> {
        if more.provider != self.provider {
            return Err(format!(
                "provider {} cannot extend provider {}",
                more.provider, self.provider
            ));
        }
        self.events.extend(more.events);
        self.check()
    }

    /// Parses and checks catalog text.
    pub fn parse(text: &str) -> Result<Catalog, String> {
        let cat: Catalog = toml::from_str(text).map_err(|e| e.to_string())?;
        cat.check()?;
        Ok(cat)
    }

    fn check(&self) -> Result<(), String> {
        if !is_ident(&self.provider) {
            return Err(format!("provider {:?} must be snake_case", self.provider));
        }
        let builtin = self.provider == RUNTRACE_PROVIDER;
        let mut names = HashSet::new();
        let mut ids = HashSet::new();
        for ev in &self.events {
            if !is_ident(&ev.name) {
                return Err(format!("event {:?}: names are snake_case", ev.name));
            }
            if !names.insert(&ev.name) {
                return Err(format!("event {} defined twice", ev.name));
            }
            match (builtin, ev.id) {
                (true, Some(id)) if (1..=127).contains(&id) => {
                    if !ids.insert(id) {
                        return Err(format!("{}: id {id} used twice", ev.name));
                    }
                }
                (true, _) => {
                    return Err(format!(
                        "{}: built-in events need an id in 1..=127",
                        ev.name
                    ))
                }
                (false, Some(_)) => {
                    return Err(format!(
                        "{}: application events get their id at run time; remove `id`",
                        ev.name
                    ))
                }
                (false, None) => {}
            }
            match (builtin, ev.group.as_deref()) {
                (true, Some(g)) if group(g).is_some() => {}
                (true, g) => {
                    let names: Vec<&str> = GROUPS.iter().map(|g| g.name).collect();
                    return Err(format!(
                        "{}: built-in events need a `group`, one of {} (got {g:?})",
                        ev.name,
                        names.join(", ")
                    ));
                }
                (false, Some(_)) => {
                    return Err(format!(
                        "{}: `group` is for runtrace's built-in events; remove it",
                        ev.name
                    ))
                }
                (false, None) => {}
            }
            if builtin && ev.json.is_none() {
                return Err(format!(
                    "{}: built-in events need `json` (their name in `runtrace jsonl`)",
                    ev.name
                ));
            }
            if ev.fields.len() > 32 {
                return Err(format!("{}: at most 32 fields", ev.name));
            }
            let mut fnames = HashSet::new();
            for f in &ev.fields {
                if !is_ident(&f.name) || f.name == "args" {
                    return Err(format!(
                        "{}.{}: field names are snake_case (not `args`)",
                        ev.name, f.name
                    ));
                }
                if !fnames.insert(&f.name) {
                    return Err(format!("{}.{} repeated", ev.name, f.name));
                }
                let Some(t) = crate::types::ty(&f.ty) else {
                    let all: Vec<&str> = crate::types::TYPES.iter().map(|t| t.name).collect();
                    return Err(format!(
                        "{}.{}: unknown type {:?} (one of {})",
                        ev.name,
                        f.name,
                        f.ty,
                        all.join(" ")
                    ));
                };
                if !builtin && t.builtin_only {
                    return Err(format!(
                        "{}.{}: `{}` is for built-in events; use u64/u32",
                        ev.name, f.name, f.ty
                    ));
                }
            }
            // "The event's task" and "its worker" must be one field each
            // (the analysis, JSONL and the recorder's worker register).
            for one in ["task", "worker"] {
                if ev.fields.iter().filter(|f| f.ty == one).count() > 1 {
                    return Err(format!(
                        "{}: at most one `{one}` field (use u64/u32 for the others)",
                        ev.name
                    ));
                }
            }
        }
        Ok(())
    }
}
