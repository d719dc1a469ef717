//! Generates the built-in event catalog from `probes/events.toml`, the one
//! definition every backend is generated from (parsed and checked by
//! `runtrace-build`, like the probe backends).
//!
//! Output (`$OUT_DIR/catalog.rs`):
//! - `BUILTIN_EVENTS`: a static table of schemas (names, ids, fields, docs);
//! - `ids::*`: one constant per event id;
//! - `for_each_builtin_event!`: a callback macro that hands the whole table,
//!   as tokens, to another macro, so other crates generate their typed
//!   functions without repeating any field list.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let path = manifest.join("../../probes/events.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    let cat = runtrace_build::Catalog::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        cat.provider,
        "runtrace",
        "{}: the built-in provider is runtrace",
        path.display()
    );
    let mut events: Vec<&runtrace_build::Event> = cat.events.iter().collect();
    events.sort_by_key(|e| e.id);
    let id = |e: &runtrace_build::Event| e.id.expect("built-in events have ids (checked)");
    let json = |e: &runtrace_build::Event| {
        e.json
            .clone()
            .unwrap_or_else(|| panic!("{}: built-in events need `json`", e.name))
    };

    let mut out = String::new();
    out.push_str(
        "/// Wire ids of the built-in events (from `probes/events.toml`).\npub mod ids {\n",
    );
    for ev in &events {
        let _ = writeln!(
            out,
            "    /// `{}`: {}\n    pub const {}: u32 = {};",
            ev.name,
            ev.doc,
            ev.name.to_uppercase(),
            id(ev)
        );
    }
    out.push_str("}\n\n/// Every built-in event, in id order.\npub static BUILTIN_EVENTS: &[BuiltinEvent] = &[\n");
    for ev in &events {
        let kind = ev.kind.clone().unwrap_or_else(|| "runtime".into());
        let _ = writeln!(
            out,
            "    BuiltinEvent {{ id: {}, name: {:?}, json_name: {:?}, kind: {:?}, doc: {:?}, fields: &[",
            id(ev),
            ev.name,
            json(ev),
            kind,
            ev.doc
        );
        for f in &ev.fields {
            let _ = writeln!(
                out,
                "        BuiltinField {{ name: {:?}, ty: FieldType::{}, doc: {:?} }},",
                f.name,
                runtrace_build::fields::field_variant(&f.ty),
                f.doc
            );
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
    for ev in &events {
        let _ = write!(
            out,
            "            ({}, {}, {:?}, {:?}, [",
            ev.name,
            id(ev),
            json(ev),
            ev.doc
        );
        for f in &ev.fields {
            let _ = write!(out, "{}: {}, ", f.name, f.ty);
        }
        out.push_str("])\n");
    }
    out.push_str("        }\n    };\n}\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("catalog.rs");
    std::fs::write(dest, out).unwrap();
}
