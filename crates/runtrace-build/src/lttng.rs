//! LTTng-UST backend generation (tracepoint provider in C, compiled with
//! `cc`; inline enabled check on the Rust side).
//!
//! Not implemented yet: enabling the `lttng` backend fails the build with
//! a clear message rather than producing probes that never fire.

use crate::{Catalog, Event};
use std::path::Path;

/// Generates and compiles the provider into `out`, and links liblttng-ust.
pub fn build(_cat: &Catalog, _out: &Path) -> Result<(), String> {
    Err("the lttng backend is not implemented yet".into())
}

/// Extern declarations the generated Rust needs.
pub fn rust_decls(_cat: &Catalog) -> String {
    String::new()
}

/// `fn lttng_on() -> bool` for one event.
pub fn rust_on(_cat: &Catalog, _ev: &Event) -> String {
    "    #[inline(always)]\n    fn lttng_on() -> bool {\n        false\n    }\n".into()
}

/// The statement firing one event into LTTng.
pub fn rust_fire(_cat: &Catalog, _ev: &Event) -> String {
    String::new()
}
