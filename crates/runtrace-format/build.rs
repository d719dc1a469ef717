//! Generates this crate's view of the event catalog, `probes/events.toml`
//! (read and checked by `runtrace-build`, like the probe backends), and of
//! runtrace-build's table of field types: the one build script that turns
//! them into per-event and per-type code.
//!
//! Output, included by `src/schema.rs` and `src/schema/wire.rs`:
//! - `types.rs`: `FieldType` (codes, names, wire encodings, longest
//!   encodings), `Group`, and `__field_type!`, the per-type macro the
//!   recorder's encoders are written with (argument types, `FieldType`s,
//!   longest encodings, the encoding statements);
//! - `wire.rs`: `Encoding`, the wire encodings (one `put_*` function each
//!   in `schema::wire`);
//! - `catalog.rs`: `BUILTIN_EVENTS` (names, ids, groups, fields, docs),
//!   `ids::*`, `catalog::<event>` (wire id and field positions, so code
//!   names fields as `task_poll_start::LOCAL_Q` and the compiler catches a
//!   renamed field), `ID_FACTS` (group, task and worker by id: a lookup
//!   cheap enough for every event), and `for_each_builtin_event!`, which
//!   hands the whole catalog as tokens to another macro, so other crates
//!   generate their typed functions without repeating any field list.

use runtrace_build::types::{fill, Wire, TYPES};
use runtrace_build::{Catalog, Event, GROUPS};
use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    // Read at run time, not baked in with `env!`: a build script's binary
    // may be reused by another checkout sharing the target directory.
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let cat = runtrace_build::builtin_catalog(&manifest.join("../../probes/events.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    write(&out.join("types.rs"), &types());
    write(&out.join("wire.rs"), &encodings());
    write(&out.join("catalog.rs"), &catalog(&cat));
}

fn write(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn encoding_variant(w: Wire) -> String {
    format!("{w:?}")
}

/// `FieldType`, `Group` and `__field_type!`.
fn types() -> String {
    let mut o = String::new();
    o.push_str(
        "/// The type of an event field, as declared in the catalog (one variant\n\
         /// per row of runtrace-build's table of field types).\n\
         ///\n\
         /// On the wire, integer widths collapse to one code (see [`FieldType::code`]).\n\
         ///\n\
         /// ```\n\
         /// use runtrace_format::schema::{wire::Encoding, FieldType};\n\
         /// assert_eq!(FieldType::from_name(\"u16\"), Some(FieldType::U16));\n\
         /// assert_eq!(FieldType::from_code(FieldType::U16.code()), Some(FieldType::U64));\n\
         /// assert_eq!(FieldType::I32.encoding(), Encoding::Zigzag);\n\
         /// assert_eq!(FieldType::Worker.max_encoded_len(), 0);\n\
         /// ```\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\npub enum FieldType {\n",
    );
    for t in TYPES {
        let _ = writeln!(o, "    /// `{}`: {}\n    {},", t.name, t.doc, t.variant);
    }
    o.push_str("}\n\nimpl FieldType {\n");
    let _ = writeln!(
        o,
        "    /// Every field type, in the catalog's order.\n    pub const ALL: [FieldType; {}] = [{}];\n",
        TYPES.len(),
        TYPES
            .iter()
            .map(|t| format!("FieldType::{}", t.variant))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let arms = |f: &dyn Fn(&runtrace_build::types::FieldTypeInfo) -> String| -> String {
        TYPES
            .iter()
            .map(|t| format!("            FieldType::{} => {},\n", t.variant, f(t)))
            .collect()
    };
    let _ = write!(
        o,
        "    /// The catalog's name of the type (`u64`, `task`, ...).\n    \
         pub const fn name(self) -> &'static str {{\n        match self {{\n{}        }}\n    }}\n\n",
        arms(&|t| format!("{:?}", t.name))
    );
    let _ = write!(
        o,
        "    /// The type the catalog calls `name`.\n    \
         pub fn from_name(name: &str) -> Option<FieldType> {{\n        \
         FieldType::ALL.into_iter().find(|t| t.name() == name)\n    }}\n\n"
    );
    let _ = write!(
        o,
        "    /// The wire type code (docs/format.md section 5).\n    \
         pub const fn code(self) -> u8 {{\n        match self {{\n{}        }}\n    }}\n\n",
        arms(&|t| t.code.to_string())
    );
    // A decoded schema reports the first type of each code (the widest).
    let mut codes: Vec<(u8, &str)> = Vec::new();
    for t in TYPES {
        if !codes.iter().any(|(c, _)| *c == t.code) {
            codes.push((t.code, t.variant));
        }
    }
    let _ = write!(
        o,
        "    /// The type a wire code decodes as, if known (the widest of the\n    \
         /// types sharing the code).\n    \
         pub const fn from_code(code: u8) -> Option<FieldType> {{\n        Some(match code {{\n{}            _ => return None,\n        }})\n    }}\n\n",
        codes
            .iter()
            .map(|(c, v)| format!("            {c} => FieldType::{v},\n"))
            .collect::<String>()
    );
    let _ = write!(
        o,
        "    /// How values of this type are written.\n    \
         pub const fn encoding(self) -> wire::Encoding {{\n        match self {{\n{}        }}\n    }}\n\n",
        arms(&|t| format!("wire::Encoding::{}", encoding_variant(t.wire)))
    );
    o.push_str(
        "    /// Most bytes one value of this type takes in an event record.\n    \
         pub const fn max_encoded_len(self) -> usize {\n        self.encoding().max_len()\n    }\n}\n\n",
    );

    // Groups.
    o.push_str(
        "/// The group of a built-in event (`group` in `probes/events.toml`):\n\
         /// what reads it, and whether code fires it at a probe site.\n\
         ///\n\
         /// ```\n\
         /// use runtrace_format::schema::Group;\n\
         /// assert_eq!(Group::from_name(\"app\"), Some(Group::App));\n\
         /// assert!(!Group::Profile.has_probe_site());\n\
         /// ```\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\npub enum Group {\n",
    );
    for g in GROUPS {
        let _ = writeln!(o, "    /// `{}`: {}\n    {},", g.name, g.doc, g.variant);
    }
    o.push_str("}\n\nimpl Group {\n");
    let _ = writeln!(
        o,
        "    /// Every group.\n    pub const ALL: [Group; {}] = [{}];\n",
        GROUPS.len(),
        GROUPS
            .iter()
            .map(|g| format!("Group::{}", g.variant))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let garms = |f: &dyn Fn(&runtrace_build::GroupInfo) -> String| -> String {
        GROUPS
            .iter()
            .map(|g| format!("            Group::{} => {},\n", g.variant, f(g)))
            .collect()
    };
    let _ = write!(
        o,
        "    /// The catalog's name of the group.\n    \
         pub const fn name(self) -> &'static str {{\n        match self {{\n{}        }}\n    }}\n\n\
         \x20   /// The group the catalog calls `name`.\n    \
         pub fn from_name(name: &str) -> Option<Group> {{\n        \
         Group::ALL.into_iter().find(|g| g.name() == name)\n    }}\n\n\
         \x20   /// Whether code fires events of this group at probe sites (so USDT,\n    \
         /// LTTng and perf-probe see them too).\n    \
         pub const fn has_probe_site(self) -> bool {{\n        match self {{\n{}        }}\n    }}\n}}\n\n",
        garms(&|g| format!("{:?}", g.name)),
        garms(&|g| g.probe_site.to_string()),
    );

    // The recorder's per-type macro.
    o.push_str(
        "/// The per-type facts the recorder's generated encoders use, one arm\n\
         /// per field type (from runtrace-build's table; not for direct use):\n\
         ///\n\
         /// - `(arg [$k] ty)`: the Rust type of an argument; `$k` is a path\n\
         ///   that has `Istr` and `Loc` (the caller's `$crate`);\n\
         /// - `(variant ty)`: its [`schema::FieldType`](crate::schema::FieldType);\n\
         /// - `(app_variant ty)`: the same for an application event's field, a\n\
         ///   compile error for the types only built-in events may have;\n\
         /// - `(max ty)`: the most bytes a value takes;\n\
         /// - `(put $sink $reg ty $v)`: writes `$v` through a\n\
         ///   [`Sink`](crate::schema::wire::Sink) with the task register `$reg`;\n\
         /// - `(worker $w ty $v)`: `$w = Some($v)` for a `worker` field (the\n\
         ///   worker register), nothing otherwise.\n\
         #[doc(hidden)]\n#[macro_export]\nmacro_rules! __field_type {\n",
    );
    for t in TYPES {
        let n = t.name;
        let _ = writeln!(
            o,
            "    (arg [$($k:tt)*] {n}) => {{ {} }};",
            fill(t.rust, "", "$($k)*")
        );
        let _ = writeln!(
            o,
            "    (variant {n}) => {{ $crate::schema::FieldType::{} }};",
            t.variant
        );
        let _ = writeln!(
            o,
            "    (app_variant {n}) => {{ {} }};",
            if t.builtin_only {
                format!("::core::compile_error!(\"`{n}` is for built-in events; use u64/u32\")")
            } else {
                format!("$crate::schema::FieldType::{}", t.variant)
            }
        );
        let _ = writeln!(o, "    (max {n}) => {{ {} }};", t.wire.max_len());
        let v = fill(t.to_wire, "$v", "");
        let put = match (t.wire, t.wire.function()) {
            (Wire::Task, Some(f)) => format!("$crate::schema::wire::{f}($s, $reg, {v})"),
            (_, Some(f)) => format!("$crate::schema::wire::{f}($s, {v})"),
            (_, None) => "()".to_string(),
        };
        let _ = writeln!(
            o,
            "    (put $s:ident $reg:ident {n} $v:expr) => {{ {put} }};"
        );
        if t.wire == Wire::Register {
            let _ = writeln!(
                o,
                "    (worker $w:ident {n} $v:expr) => {{ $w = Some($v) }};"
            );
        }
    }
    o.push_str("    (worker $w:ident $t:ident $v:expr) => {};\n}\n");
    o
}

/// `schema::wire::Encoding`.
fn encodings() -> String {
    let mut o = String::from(
        "/// A wire encoding of field values (docs/format.md section 6), with its\n\
         /// `put_*` function in this module. Generated from runtrace-build's\n\
         /// table of field types, like [`FieldType::encoding`](super::FieldType::encoding).\n\
         ///\n\
         /// ```\n\
         /// use runtrace_format::schema::wire::Encoding;\n\
         /// assert_eq!(Encoding::Str.max_len(), 2 + runtrace_format::MAX_INLINE_STR);\n\
         /// ```\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\npub enum Encoding {\n",
    );
    for w in Wire::ALL {
        let f = w
            .function()
            .map_or(String::new(), |f| format!(" Written by [`{f}`]."));
        let _ = writeln!(o, "    /// {}{f}\n    {},", w.doc(), encoding_variant(w));
    }
    o.push_str(
        "}\n\nimpl Encoding {\n    /// Most bytes one value takes.\n    \
         pub const fn max_len(self) -> usize {\n        match self {\n",
    );
    for w in Wire::ALL {
        let _ = writeln!(
            o,
            "            Encoding::{} => {},",
            encoding_variant(w),
            w.max_len()
        );
    }
    o.push_str("        }\n    }\n}\n");
    o
}

/// `ids`, `BUILTIN_EVENTS`, `catalog`, `ID_FACTS` and
/// `for_each_builtin_event!`.
fn catalog(cat: &Catalog) -> String {
    let mut events: Vec<&Event> = cat.events.iter().collect();
    events.sort_by_key(|e| e.id);
    // Checked by `Catalog`: built-ins have ids in 1..=127, a json name and
    // a group.
    let id = |e: &Event| e.id.expect("checked");
    let json = |e: &Event| e.json.clone().expect("checked");
    let group = |e: &Event| {
        let g = e.group.as_deref().expect("checked");
        runtrace_build::group(g).expect("checked").variant
    };
    let has = |e: &Event, ty: &str| e.fields.iter().any(|f| f.ty == ty);

    let mut o = String::new();
    o.push_str("/// Wire ids of the built-in events (from `probes/events.toml`).\npub mod ids {\n");
    for ev in &events {
        let _ = writeln!(
            o,
            "    /// `{}`: {}\n    pub const {}: u32 = {};",
            ev.name,
            ev.doc,
            ev.name.to_uppercase(),
            id(ev)
        );
    }
    o.push_str("}\n\n");

    o.push_str(
        "/// The built-in events, one module each (from `probes/events.toml`):\n\
         /// its wire id and the position of each field in its catalog layout,\n\
         /// so code names fields (`catalog::task_poll_start::LOCAL_Q`) and the\n\
         /// compiler, not a hand-kept table, catches a renamed or removed one.\n\
         pub mod catalog {\n",
    );
    for ev in &events {
        let _ = writeln!(
            o,
            "    /// `{}` (group `{}`): {}\n    pub mod {} {{\n        /// Wire id.\n        pub const ID: u32 = {};",
            ev.name,
            ev.group.as_deref().unwrap_or_default(),
            ev.doc,
            ev.name,
            id(ev)
        );
        for (i, f) in ev.fields.iter().enumerate() {
            let _ = writeln!(
                o,
                "        /// Position of `{}` ({}): {}\n        pub const {}: usize = {i};",
                f.name,
                f.ty,
                f.doc,
                f.name.to_uppercase()
            );
        }
        o.push_str("    }\n");
    }
    o.push_str("}\n\n");

    let _ = writeln!(
        o,
        "/// Every built-in event, in id order.\npub const BUILTIN_EVENTS: &[BuiltinEvent] = &["
    );
    for ev in &events {
        let _ = writeln!(
            o,
            "    BuiltinEvent {{ id: {}, name: {:?}, json_name: {:?}, group: Group::{}, doc: {:?}, fields: &[",
            id(ev),
            ev.name,
            json(ev),
            group(ev),
            ev.doc
        );
        for f in &ev.fields {
            let _ = writeln!(
                o,
                "        BuiltinField {{ name: {:?}, ty: FieldType::{}, doc: {:?} }},",
                f.name,
                runtrace_build::fields::field_variant(&f.ty),
                f.doc
            );
        }
        o.push_str("    ] },\n");
    }
    o.push_str("];\n\n");

    o.push_str(
        "/// What the catalog says about each wire id below 256 (generated):\n\
         /// [`IdFacts::NONE`] for ids that are no built-in event. A lookup\n\
         /// cheap enough for every event; use [`id_facts`].\n\
         pub const ID_FACTS: [IdFacts; 256] = {\n    let mut t = [IdFacts::NONE; 256];\n",
    );
    for ev in &events {
        let _ = writeln!(
            o,
            "    t[{}] = IdFacts {{ group: Some(Group::{}), task: {}, worker: {} }};",
            id(ev),
            group(ev),
            has(ev, "task"),
            has(ev, "worker")
        );
    }
    o.push_str("    t\n};\n\n");

    o.push_str(
        "/// Calls `$m!` with the whole built-in catalog as tokens:\n\
         /// `$m! { (name, id, \"Json\", \"doc\", [field: type, ...]) ... }`.\n\
         ///\n\
         /// This is how other crates generate per-event code without repeating\n\
         /// a field list. Types are the catalog's type names (`u64`, `task`, ...;\n\
         /// [`__field_type!`] has what each means in Rust).\n\
         #[macro_export]\nmacro_rules! for_each_builtin_event {\n    ($m:ident) => {\n        $m! {\n",
    );
    for ev in &events {
        let _ = write!(
            o,
            "            ({}, {}, {:?}, {:?}, [",
            ev.name,
            id(ev),
            json(ev),
            ev.doc
        );
        for f in &ev.fields {
            let _ = write!(o, "{}: {}, ", f.name, f.ty);
        }
        o.push_str("])\n");
    }
    o.push_str("        }\n    };\n}\n");
    o
}
