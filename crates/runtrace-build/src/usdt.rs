//! The USDT backend: a SystemTap v3 SDT probe per site: a 5-byte nop
//! (`0f 1f 44 00 00`, which the kernel patches into a call when a uprobe
//! attaches, much cheaper than a trap) and a `.note.stapsdt` entry with
//! typed argument specs (`8@%rdi`); one weak, hidden 2-byte semaphore per
//! event in `.probes`, shared by every site of that event in the binary, is
//! the enabled check.
//!
//! ```
//! let cat = runtrace_build::Catalog::parse(
//!     "provider = \"myapp\"\n[[event]]\nname = \"done\"\ndoc = \"\"\nfields = []\n",
//! )
//! .unwrap();
//! let on = runtrace_build::usdt::rust_on(&cat, &cat.events[0]);
//! assert!(on.contains("lea __runtrace_sema_myapp_done(%rip)"));
//! ```

use crate::catalog::{Catalog, Event};
use crate::fields::{c_strings, is_signed, reg_value};
use crate::symbols::{
    usdt_semaphore_symbol, SDT_BASE_SECTION, SDT_NOTE_OWNER, SDT_NOTE_SECTION, SDT_NOTE_TYPE,
    SEMAPHORE_SECTION,
};

fn sema_def_lines(sema: &str) -> Vec<String> {
    vec![
        format!(".ifndef {sema}"),
        format!(".pushsection {SEMAPHORE_SECTION}, \\\"aw\\\", \\\"progbits\\\""),
        format!(".weak {sema}"),
        format!(".hidden {sema}"),
        ".balign 2".into(),
        format!("{sema}:"),
        ".zero 2".into(),
        format!(".type {sema}, @object"),
        format!(".size {sema}, 2"),
        ".popsection".into(),
        ".endif".into(),
    ]
}

fn asm_lines(lines: &[String], indent: &str) -> String {
    lines
        .iter()
        .map(|l| format!("{indent}\"{l}\",\n"))
        .collect()
}

/// `fn usdt_on() -> bool` for one event: a volatile read of its
/// semaphore (defined here, once per object file).
pub fn rust_on(cat: &Catalog, ev: &Event) -> String {
    let sema = usdt_semaphore_symbol(&cat.provider, &ev.name);
    let mut lines = sema_def_lines(&sema);
    lines.push(format!("lea {sema}(%rip), {{s}}"));
    format!(
        "    #[cfg(target_arch = \"x86_64\")]\n    #[inline(always)]\n    \
         // The semaphore is a named data symbol, defined once (`.ifndef`).\n    \
         #[allow(named_asm_labels)]\n    #[doc(hidden)]\n    pub fn usdt_on() -> bool {{\n        \
         let sema: *const u16;\n        \
         // SAFETY: computes the address of this event's semaphore, which the\n        \
         // asm defines (once per object file, weak and hidden, so all sites\n        \
         // of the event in the binary share one).\n        \
         unsafe {{\n            ::core::arch::asm!(\n{}                s = out(reg) sema,\n                \
         options(att_syntax, pure, nomem, nostack, preserves_flags)\n            );\n        }}\n        \
         // SAFETY: a valid, aligned 2-byte counter for the life of the\n        \
         // process, written by tools that attach (hence volatile).\n        \
         unsafe {{ sema.read_volatile() != 0 }}\n    }}\n\n    \
         #[cfg(not(target_arch = \"x86_64\"))]\n    #[inline(always)]\n    #[doc(hidden)]\n    pub fn usdt_on() -> bool {{\n        false\n    }}\n\n",
        asm_lines(&lines, "                ")
    )
}

/// The statement firing one event as an SDT probe when its semaphore is
/// set.
///
/// ```
/// let cat = runtrace_build::Catalog::parse(
///     "provider = \"p\"\n[[event]]\nname = \"e\"\ndoc = \"\"\n\
///      fields = [{ name = \"d\", type = \"i32\", doc = \"\" }]\n",
/// )
/// .unwrap();
/// let fire = runtrace_build::usdt::rust_fire(&cat, &cat.events[0]);
/// assert!(fire.contains(".asciz \\\"-8@{a0}\\\""), "{fire}");
/// ```
pub fn rust_fire(cat: &Catalog, ev: &Event) -> String {
    let sema = usdt_semaphore_symbol(&cat.provider, &ev.name);
    let specs: Vec<String> = ev
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| format!("{}8@{{a{i}}}", if is_signed(f) { "-" } else { "" }))
        .collect();
    let mut lines = sema_def_lines(&sema);
    lines.extend([
        "990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00".into(),
        format!(".pushsection {SDT_NOTE_SECTION}, \\\"\\\", \\\"note\\\""),
        ".balign 4".into(),
        format!(".4byte 992f-991f, 994f-993f, {SDT_NOTE_TYPE}"),
        format!("991: .asciz \\\"{SDT_NOTE_OWNER}\\\""),
        "992: .balign 4".into(),
        "993: .8byte 990b".into(),
        format!(".8byte _{SDT_BASE_SECTION}"),
    ]);
    lines.push(format!(".8byte {sema}"));
    lines.push(format!(".asciz \\\"{}\\\"", cat.provider));
    lines.push(format!(".asciz \\\"{}\\\"", ev.name));
    lines.push(format!(".asciz \\\"{}\\\"", specs.join(" ")));
    lines.extend([
        "994: .balign 4".into(),
        ".popsection".into(),
        format!(".ifndef _{SDT_BASE_SECTION}"),
        format!(
            ".pushsection {SDT_BASE_SECTION}, \\\"aGR\\\", \\\"progbits\\\", {SDT_BASE_SECTION}, comdat"
        ),
        format!(".weak _{SDT_BASE_SECTION}"),
        format!(".hidden _{SDT_BASE_SECTION}"),
        format!("_{SDT_BASE_SECTION}: .space 1"),
        format!(".size _{SDT_BASE_SECTION}, 1"),
        ".popsection".into(),
        ".endif".into(),
    ]);
    let operands: String = ev
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| format!("                    a{i} = in(reg) {},\n", reg_value(f)))
        .collect();
    format!(
        "        #[cfg(target_arch = \"x86_64\")]\n        if usdt_on() {{\n{}            \
         // SAFETY: a 5-byte nop plus an ELF note describing it (and, once\n            \
         // per object file, the semaphore and `.stapsdt.base`); the asm only\n            \
         // reads its register operands, and tools read memory through them.\n            \
         unsafe {{\n                ::core::arch::asm!(\n{}{}                    \
         options(att_syntax, readonly, nostack, preserves_flags)\n                );\n            }}\n        }}\n",
        c_strings(ev, "            "),
        asm_lines(&lines, "                    "),
        operands
    )
}
