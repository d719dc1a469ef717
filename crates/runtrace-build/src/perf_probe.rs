//! The perf-probe backend: one naked `#[no_mangle] extern "C"` function
//! per event whose body is a 5-byte nop, a 7-byte nop with an event-unique
//! displacement (so identical-code folding cannot merge two of them) and
//! `ret`. The arguments sit in the C ABI registers. Its first byte is the
//! enabled check: an attached uprobe replaces it.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"\"\nfields = []\n",
//! )
//! .unwrap();
//! let fns = runtrace_build::perf_probe::functions(&cat);
//! assert!(fns.contains("pub unsafe extern \"C\" fn myapp_done()"));
//! assert!(runtrace_build::perf_probe::supports(&cat.events[0]));
//! ```

use crate::catalog::{Catalog, Event};
use crate::fields::{c_strings, reg_value};
use crate::symbols::perf_probe_symbol;
use std::fmt::Write as _;

/// Arguments past the sixth go on the stack; perf-probe definitions here
/// use registers only, so such events get no perf-probe function.
const MAX_REGISTER_ARGS: usize = 6;

/// Whether `ev` gets a perf-probe function (at most six fields).
pub fn supports(ev: &Event) -> bool {
    ev.fields.len() <= MAX_REGISTER_ARGS
}

/// A short, stable number unique to `provider:event` (FNV-1a), for the
/// perf-probe functions' distinguishing nop.
fn event_hash(provider: &str, event: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in provider.bytes().chain([b':']).chain(event.bytes()) {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h & 0x7fff_ffff
}

/// The `__perf` module: one naked function per supported event.
pub fn functions(cat: &Catalog) -> String {
    let mut o = String::from(
        "/// perf-probe functions: `perf probe -x BIN 'runtrace:EVENT=SYMBOL arg=%di:u64 ...'`\n\
         /// (see `setup_probes.sh`). Never called unless a uprobe is attached.\n\
         #[doc(hidden)]\npub mod __perf {\n",
    );
    for ev in &cat.events {
        if !supports(ev) {
            continue;
        }
        let sym = perf_probe_symbol(&cat.provider, &ev.name);
        let args: Vec<String> = ev
            .fields
            .iter()
            .map(|f| format!("_{}: u64", f.name))
            .collect();
        let _ = write!(
            o,
            "    /// perf-probe site of `{prov}:{name}`.\n\
             \x20   #[unsafe(naked)]\n\
             \x20   #[unsafe(no_mangle)]\n\
             \x20   pub unsafe extern \"C\" fn {sym}({args}) {{\n\
             \x20       ::core::arch::naked_asm!(\n\
             \x20           \".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\",\n\
             \x20           \"nopl 0x{hash:x}(%rax)\",\n\
             \x20           \"ret\",\n\
             \x20           options(att_syntax)\n\
             \x20       )\n\
             \x20   }}\n",
            prov = cat.provider,
            name = ev.name,
            args = args.join(", "),
            hash = event_hash(&cat.provider, &ev.name),
        );
    }
    o.push_str("}\n\n");
    o
}

/// `fn perf_on() -> bool` for one event: reads the first code byte of its
/// function.
pub fn rust_on(cat: &Catalog, ev: &Event) -> String {
    let sym = perf_probe_symbol(&cat.provider, &ev.name);
    format!(
        "    #[inline(always)]\n    #[doc(hidden)]\n    pub fn perf_on() -> bool {{\n        \
         // SAFETY: reads the first code byte of our own naked function\n        \
         // (text is mapped readable): it is 0x0f (the nop) unless a\n        \
         // uprobe attached there has replaced it (int3 or a call).\n        \
         unsafe {{ ::core::ptr::read_volatile(super::__perf::{sym} as *const u8) != 0x0f }}\n    }}\n\n"
    )
}

/// The statement calling one event's function when a uprobe is attached.
pub fn rust_fire(cat: &Catalog, ev: &Event) -> String {
    let sym = perf_probe_symbol(&cat.provider, &ev.name);
    let vals: Vec<String> = ev.fields.iter().map(reg_value).collect();
    format!(
        "        if perf_on() {{\n{}            \
         // SAFETY: the naked function only executes nops and `ret`.\n            \
         unsafe {{ super::__perf::{sym}({}) }};\n        }}\n",
        c_strings(ev, "            "),
        vals.join(", ")
    )
}
