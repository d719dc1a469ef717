//! Field types of the catalog as each generated language sees them, for
//! one field (a variable of its name): the Rust argument types, the values
//! passed in registers, the encoding statements, the C and FFI types.
//! Everything comes from the one table of field types, [`crate::types`].
//!
//! ```
//! assert_eq!(runtrace_build::fields::field_variant("u16"), "U16");
//! ```

use crate::catalog::{Event, Field};
use crate::types::{fill, ty, FieldTypeInfo, Wire};

/// The row of a checked field's type.
fn info(f: &Field) -> &'static FieldTypeInfo {
    ty(&f.ty).unwrap_or_else(|| unreachable!("checked type {}", f.ty))
}

/// The Rust type of a field in an event's `Args` (`__rt` is the runtime
/// support module the generated code imports; text borrows for `'a`).
///
/// ```
/// let f = runtrace_build::Field { name: "route".into(), ty: "str".into(), doc: String::new() };
/// assert_eq!(runtrace_build::fields::rust_ty(&f), "&'a str");
/// ```
pub fn rust_ty(f: &Field) -> String {
    fill(info(f).rust, "", "__rt").replacen('&', "&'a ", 1)
}

/// The value passed in a register (usdt, perf-probe): integers widened to
/// 64 bits, floats as their bits, names as C-string pointers.
///
/// ```
/// let f = runtrace_build::Field { name: "ratio".into(), ty: "f64".into(), doc: String::new() };
/// assert_eq!(runtrace_build::fields::reg_value(&f), "ratio.to_bits()");
/// ```
pub fn reg_value(f: &Field) -> String {
    fill(info(f).reg, &f.name, "__rt")
}

/// Whether a field's register value is a sign-extended integer (`-8@` in
/// an SDT argument spec): the zigzag-encoded types.
///
/// ```
/// let f = runtrace_build::Field { name: "delta".into(), ty: "i32".into(), doc: String::new() };
/// assert!(runtrace_build::fields::is_signed(&f));
/// ```
pub fn is_signed(f: &Field) -> bool {
    info(f).wire == Wire::Zigzag
}

/// Most bytes a field takes in a recorded event.
pub fn max_len(f: &Field) -> usize {
    info(f).wire.max_len()
}

/// The statement writing field `f` (a variable of its name) through a
/// `runtrace_format::schema::wire::Sink` called `sink`, with the task
/// register `reg`; `wire` is the path of that module. Empty for `worker`
/// fields (no bytes).
///
/// ```
/// let f = runtrace_build::Field { name: "status".into(), ty: "u16".into(), doc: String::new() };
/// assert_eq!(
///     runtrace_build::fields::encode(&f, "w", "s", "r"),
///     "w::put_varint(s, status as u64);"
/// );
/// ```
pub fn encode(f: &Field, wire: &str, sink: &str, reg: &str) -> String {
    let t = info(f);
    let v = fill(t.to_wire, &f.name, "__rt");
    match (t.wire, t.wire.function()) {
        (Wire::Task, Some(func)) => format!("{wire}::{func}({sink}, {reg}, {v});"),
        (_, Some(func)) => format!("{wire}::{func}({sink}, {v});"),
        (_, None) => String::new(),
    }
}

/// NUL-terminated stack copies of `str` fields, for backends passing text
/// (`__c_<name>`, one statement per line, each line starting with
/// `indent`).
///
/// ```
/// let cat = runtrace_build::Catalog::parse(
///     "provider = \"p\"\n[[event]]\nname = \"e\"\ndoc = \"\"\n\
///      fields = [{ name = \"route\", type = \"str\", doc = \"\" }]\n",
/// )
/// .unwrap();
/// assert_eq!(
///     runtrace_build::fields::c_strings(&cat.events[0], "  "),
///     "  let __c_route = __rt::CStrBuf::new(route);\n"
/// );
/// ```
pub fn c_strings(ev: &Event, indent: &str) -> String {
    ev.fields
        .iter()
        .filter(|f| info(f).wire == Wire::Str)
        .map(|f| {
            format!(
                "{indent}let __c_{n} = __rt::CStrBuf::new({n});\n",
                n = f.name
            )
        })
        .collect()
}

/// Whether a field borrows (its `Args` type has a lifetime).
pub fn borrows(f: &Field) -> bool {
    info(f).rust.starts_with('&')
}

/// The `runtrace_format::schema::FieldType` variant name of a catalog type.
///
/// ```
/// assert_eq!(runtrace_build::fields::field_variant("istr"), "Istr");
/// ```
pub fn field_variant(ty_name: &str) -> &'static str {
    ty(ty_name).map_or_else(|| unreachable!("checked type {ty_name}"), |t| t.variant)
}

/// The C type of a field's LTTng tracepoint argument.
pub fn c_ty(f: &Field) -> &'static str {
    info(f).c
}

/// The Rust type of a field's LTTng wrapper parameter.
pub fn ffi_ty(f: &Field) -> &'static str {
    info(f).ffi
}

/// The Rust expression passing a field (a variable of its name) to its
/// LTTng wrapper.
pub fn ffi_value(f: &Field) -> String {
    fill(info(f).ffi_value, &f.name, "__rt")
}
