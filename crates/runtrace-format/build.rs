//! Generates the built-in event catalog from `probes/events.toml`, the one
//! definition every backend is generated from.
//!
//! Output (`$OUT_DIR/catalog.rs`):
//! - `BUILTIN_EVENTS`: a static table of schemas (names, ids, fields, docs);
//! - `ids::*`: one constant per event id;
//! - `for_each_builtin_event!`: a callback macro that hands the whole table,
//!   as tokens, to another macro, so other crates generate their typed
//!   functions without repeating any field list.

use serde::Deserialize;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Deserialize)]
struct Catalog {
    event: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    name: String,
    id: u32,
    json: String,
    kind: String,
    doc: String,
    fields: Vec<Field>,
}

#[derive(Deserialize)]
struct Field {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    doc: String,
}

const TYPES: &[(&str, &str)] = &[
    ("u64", "U64"),
    ("u32", "U32"),
    ("u16", "U16"),
    ("u8", "U8"),
    ("i64", "I64"),
    ("i32", "I32"),
    ("bool", "Bool"),
    ("f64", "F64"),
    ("str", "Str"),
    ("istr", "Istr"),
    ("loc", "Loc"),
    ("task", "Task"),
    ("worker", "Worker"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let path = manifest.join("../../probes/events.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let cat: Catalog = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));

    let mut ids = HashSet::new();
    let mut names = HashSet::new();
    for ev in &cat.event {
        assert!(
            (1..=127).contains(&ev.id),
            "{}: built-in ids are 1..=127",
            ev.name
        );
        assert!(ids.insert(ev.id), "duplicate event id {}", ev.id);
        assert!(names.insert(ev.name.clone()), "duplicate event {}", ev.name);
        assert!(
            ev.kind == "runtime" || ev.kind == "meta",
            "{}: kind must be runtime or meta",
            ev.name
        );
        assert!(ev.fields.len() <= 32, "{}: at most 32 fields", ev.name);
        assert!(
            ev.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{}: names are snake_case",
            ev.name
        );
        let mut fnames = HashSet::new();
        for f in &ev.fields {
            assert!(
                TYPES.iter().any(|(t, _)| *t == f.ty),
                "{}.{}: unknown type {}",
                ev.name,
                f.name,
                f.ty
            );
            assert!(fnames.insert(&f.name), "{}.{} repeated", ev.name, f.name);
        }
    }

    let variant = |t: &str| TYPES.iter().find(|(n, _)| *n == t).unwrap().1;
    let mut out = String::new();
    out.push_str(
        "/// Wire ids of the built-in events (from `probes/events.toml`).\npub mod ids {\n",
    );
    for ev in &cat.event {
        writeln!(
            out,
            "    /// `{}`: {}\n    pub const {}: u32 = {};",
            ev.name,
            ev.doc,
            ev.name.to_uppercase(),
            ev.id
        )
        .unwrap();
    }
    out.push_str("}\n\n");

    out.push_str(
        "/// Every built-in event, in id order.\npub static BUILTIN_EVENTS: &[BuiltinEvent] = &[\n",
    );
    let mut sorted: Vec<&Event> = cat.event.iter().collect();
    sorted.sort_by_key(|e| e.id);
    for ev in &sorted {
        writeln!(
            out,
            "    BuiltinEvent {{ id: {}, name: {:?}, json_name: {:?}, kind: {:?}, doc: {:?}, fields: &[",
            ev.id, ev.name, ev.json, ev.kind, ev.doc
        )
        .unwrap();
        for f in &ev.fields {
            writeln!(
                out,
                "        BuiltinField {{ name: {:?}, ty: FieldType::{}, doc: {:?} }},",
                f.name,
                variant(&f.ty),
                f.doc
            )
            .unwrap();
        }
        out.push_str("    ] },\n");
    }
    out.push_str("];\n\n");

    out.push_str(
        "/// Calls `$m!` with the whole built-in catalog as tokens:\n\
         /// `$m! { (name, id, \"Json\", \"doc\", [field: type, ...]) ... }`.\n\
         ///\n\
         /// This is how other crates generate per-event code without repeating\n\
         /// a field list. Types are the catalog's type names (`u64`, `task`, ...).\n\
         #[macro_export]\nmacro_rules! for_each_builtin_event {\n    ($m:ident) => {\n        $m! {\n",
    );
    for ev in &sorted {
        write!(
            out,
            "            ({}, {}, {:?}, {:?}, [",
            ev.name, ev.id, ev.json, ev.doc
        )
        .unwrap();
        for f in &ev.fields {
            write!(out, "{}: {}, ", f.name, f.ty).unwrap();
        }
        out.push_str("])\n");
    }
    out.push_str("        }\n    };\n}\n");

    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("catalog.rs");
    std::fs::write(dest, out).unwrap();
}
