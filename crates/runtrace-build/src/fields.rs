//! Field types of the catalog as each generated language sees them: the
//! Rust argument types, the values passed in registers, and the
//! `runtrace_format` field-type names. Shared by every backend.
//!
//! ```
//! assert_eq!(runtrace_build::fields::field_variant("u16"), "U16");
//! ```

use crate::catalog::{Event, Field};

/// The Rust type of a field in an event's `Args` (`__rt` is the runtime
/// support module the generated code imports).
///
/// ```
/// let f = runtrace_build::Field { name: "route".into(), ty: "str".into(), doc: String::new() };
/// assert_eq!(runtrace_build::fields::rust_ty(&f), "&'a str");
/// ```
pub fn rust_ty(f: &Field) -> &'static str {
    match f.ty.as_str() {
        "u64" | "task" => "u64",
        "u32" | "worker" => "u32",
        "u16" => "u16",
        "u8" => "u8",
        "i64" => "i64",
        "i32" => "i32",
        "bool" => "bool",
        "f64" => "f64",
        "str" => "&'a str",
        "istr" => "__rt::Istr",
        "loc" => "__rt::Loc",
        other => unreachable!("checked type {other}"),
    }
}

/// The value passed in a register (usdt, perf-probe): integers widened to
/// 64 bits, floats as their bits, names as C-string pointers.
///
/// ```
/// let f = runtrace_build::Field { name: "ratio".into(), ty: "f64".into(), doc: String::new() };
/// assert_eq!(runtrace_build::fields::reg_value(&f), "ratio.to_bits()");
/// ```
pub fn reg_value(f: &Field) -> String {
    let n = &f.name;
    match f.ty.as_str() {
        "istr" | "loc" => format!("{n}.c_str().as_ptr() as u64"),
        "str" => format!("__c_{n}.as_ptr() as u64"),
        "f64" => format!("{n}.to_bits()"),
        "i64" | "i32" => format!("{n} as i64 as u64"),
        _ => format!("{n} as u64"),
    }
}

/// Whether a field's register value is a sign-extended integer (`-8@` in
/// an SDT argument spec).
///
/// ```
/// let f = runtrace_build::Field { name: "delta".into(), ty: "i32".into(), doc: String::new() };
/// assert!(runtrace_build::fields::is_signed(&f));
/// ```
pub fn is_signed(f: &Field) -> bool {
    matches!(f.ty.as_str(), "i64" | "i32")
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
        .filter(|f| f.ty == "str")
        .map(|f| {
            format!(
                "{indent}let __c_{n} = __rt::CStrBuf::new({n});\n",
                n = f.name
            )
        })
        .collect()
}

/// The `runtrace_format::schema::FieldType` variant name of a catalog type.
///
/// ```
/// assert_eq!(runtrace_build::fields::field_variant("istr"), "Istr");
/// ```
pub fn field_variant(ty: &str) -> &'static str {
    match ty {
        "u64" => "U64",
        "u32" => "U32",
        "u16" => "U16",
        "u8" => "U8",
        "i64" => "I64",
        "i32" => "I32",
        "bool" => "Bool",
        "f64" => "F64",
        "str" => "Str",
        "istr" => "Istr",
        "loc" => "Loc",
        "task" => "Task",
        _ => "Worker",
    }
}
