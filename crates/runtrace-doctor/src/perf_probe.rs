//! perf-probe checks: the `runtrace_<event>` functions (one per built-in
//! event) in `.symtab` or `.dynsym`, with their address, file offset and
//! whether the body starts with the 5-byte nop `0f 1f 44 00 00` (a uprobe
//! there becomes a cheap call instead of a single-step).

use crate::elf::Image;
use crate::fix::push_fix;
use crate::hex::hex;
use object::elf;
use runtrace_build::symbols::{perf_probe_symbol, RUNTRACE_PROVIDER};
use runtrace_format::schema::BUILTIN_EVENTS;
use std::collections::BTreeMap;

/// The 5-byte nop a perf-probe function should start with.
const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// One perf-probe function (`runtrace_<event>`).
#[derive(Debug, Clone)]
pub struct ProbeFunction {
    /// The built-in event it belongs to.
    pub event: String,
    /// Symbol name.
    pub symbol: String,
    /// Symbol address.
    pub address: u64,
    /// Symbol size.
    pub size: u64,
    /// `symtab` or `dynsym`.
    pub table: &'static str,
    /// File offset of the first instruction.
    pub file_offset: Option<u64>,
    /// The body starts with `0f 1f 44 00 00`.
    pub nop5: bool,
}

/// The perf-probe part of the report.
#[derive(Debug, Clone, Default)]
pub struct PerfProbeReport {
    /// Functions found, in event order.
    pub functions: Vec<ProbeFunction>,
    /// Built-in events without a function.
    pub missing: Vec<String>,
    /// No `.symtab`.
    pub stripped: bool,
    /// Problems.
    pub problems: Vec<String>,
    /// Remarks.
    pub warnings: Vec<String>,
}

/// Finds each built-in event's perf-probe function and checks that perf
/// can probe it cheaply (executable, unique address, 5-byte nop at entry).
pub(crate) fn check(img: &Image<'_>, fix: &mut Vec<String>) -> PerfProbeReport {
    let mut r = PerfProbeReport {
        stripped: img.symtab.is_none(),
        ..Default::default()
    };
    let symbols = img.all_symbols();
    let mut mangled = Vec::new();
    for e in BUILTIN_EVENTS.iter().filter(|e| e.has_probe_site()) {
        let want = perf_probe_symbol(RUNTRACE_PROVIDER, e.name);
        let found = symbols
            .iter()
            .find(|(s, _)| s.name == want && s.kind == elf::STT_FUNC)
            .or_else(|| symbols.iter().find(|(s, _)| s.name == want));
        match found {
            Some((s, table)) => {
                let file_offset = img.file_offset(s.value).map(|(o, _)| o);
                let nop5 = img.bytes_at(s.value, NOP5.len()) == Some(&NOP5[..]);
                r.functions.push(ProbeFunction {
                    event: e.name.to_string(),
                    symbol: s.name.clone(),
                    address: s.value,
                    size: s.size,
                    table,
                    file_offset,
                    nop5,
                });
            }
            None => {
                r.missing.push(e.name.to_string());
                // `_ZN..18runtrace_task_spawn17h..E` and friends.
                if let Some((s, _)) = symbols.iter().find(|(s, _)| {
                    s.kind == elf::STT_FUNC
                        && s.name != want
                        && s.name.contains(&format!("{}{want}", want.len()))
                }) {
                    mangled.push(format!("{want} ({})", s.name));
                }
            }
        }
    }
    for f in &r.functions {
        match img.segment_at(f.address) {
            Some(seg) if seg.flags & elf::PF_X != 0 => {}
            _ => r.problems.push(format!(
                "{} at {} is not in an executable segment: perf cannot probe it",
                f.symbol,
                hex(f.address)
            )),
        }
        if f.size == 0 {
            r.warnings.push(format!(
                "{} has size 0: an empty body may be removed or merged by the compiler",
                f.symbol
            ));
        }
    }
    let mut by_addr: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for f in &r.functions {
        by_addr.entry(f.address).or_default().push(&f.symbol);
    }
    for (addr, names) in by_addr {
        if names.len() > 1 {
            r.problems.push(format!(
                "{} share one address {} (identical-code folding merged them): a probe on one fires for all",
                names.join(", "),
                hex(addr)
            ));
            push_fix(
                fix,
                "Give every runtrace_<event> function a unique body (e.g. an asm! block starting with the 5-byte nop and naming the event) so the linker cannot fold them."
                    .into(),
            );
        }
    }
    let no_nop: Vec<&str> = r
        .functions
        .iter()
        .filter(|f| !f.nop5)
        .map(|f| f.symbol.as_str())
        .collect();
    if !no_nop.is_empty() {
        r.warnings.push(format!(
            "{} do{} not start with the 5-byte nop 0f 1f 44 00 00: a uprobe there is single-stepped (~6 us per hit instead of ~0.4 us)",
            no_nop.join(", "),
            if no_nop.len() == 1 { "es" } else { "" }
        ));
    }
    if !mangled.is_empty() {
        r.warnings.push(format!(
            "mangled names found, perf probe cannot use them: {}; mark the functions #[no_mangle]",
            mangled.join(", ")
        ));
    }
    if r.stripped {
        r.warnings.push(if r.functions.is_empty() {
            "stripped (no .symtab): perf-probe functions cannot be found unless exported in .dynsym; SDT notes survive stripping".into()
        } else {
            "stripped (no .symtab): only the functions exported in .dynsym were found".into()
        });
    }
    r
}
