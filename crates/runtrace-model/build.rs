//! Generates the analysis's view of the built-in event catalog from
//! `probes/events.toml` (parsed by `runtrace-build`, as runtrace-format's
//! build script does): for every event a module named after it with its
//! wire id (`ID`, the analysis's event kind) and one constant per field
//! holding the field's position in the catalog layout.
//!
//! So `input/roles.rs` names fields as `task_poll_start::LOCAL_Q` and the
//! compiler, not a hand-kept table, catches a renamed or removed field.
//! Field names and types at run time come from
//! `runtrace_format::schema::BUILTIN_EVENTS`.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let path = manifest.join("../../probes/events.toml");
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rerun-if-changed=build.rs");
    let cat = runtrace_build::Catalog::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = String::new();
    for ev in &cat.events {
        let id = ev
            .id
            .unwrap_or_else(|| panic!("{}: built-in events have ids", ev.name));
        assert!(id < 128, "{}: built-in ids are below 128", ev.name);
        let _ = writeln!(
            out,
            "/// `{}` (probes/events.toml): {}\n#[allow(dead_code)]\npub mod {} {{\n    /// Wire id, also the analysis's event kind.\n    pub const ID: u8 = {id};",
            ev.name, ev.doc, ev.name
        );
        for (i, f) in ev.fields.iter().enumerate() {
            let _ = writeln!(
                out,
                "    /// Position of `{}` ({}): {}\n    pub const {}: u8 = {i};",
                f.name,
                f.ty,
                f.doc,
                f.name.to_uppercase()
            );
        }
        out.push_str("}\n");
    }
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("catalog.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}
