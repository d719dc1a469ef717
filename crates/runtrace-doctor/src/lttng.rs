//! LTTng-UST checks: `DT_NEEDED` entries of liblttng-ust, the tracepoint
//! pointers section and the tracepoint symbols (both LTTng-UST namings, see
//! [`runtrace_build::symbols`]). A tracepoint whose pointer is not in the
//! pointers section is never registered (lld's `--gc-sections` drops the
//! section): the trace is silently empty.

use crate::elf::Image;
use crate::fix::push_fix;
use object::elf;
use runtrace_build::symbols::{
    parse_tracepoint_symbol, TracepointSymbol, LEGACY_TRACEPOINT_PTRS_SECTION, RUNTRACE_PROVIDER,
    TRACEPOINT_PROVIDER_PREFIX, TRACEPOINT_PTRS_SECTION,
};
use std::collections::BTreeSet;

/// One LTTng-UST tracepoint.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    /// Provider.
    pub provider: String,
    /// Event name.
    pub name: String,
    /// Symbol of its `struct lttng_ust_tracepoint`.
    pub symbol: String,
    /// Its address.
    pub address: u64,
    /// A pointer to it is in the pointers section (`None`: cannot tell).
    pub registered: Option<bool>,
}

/// The LTTng-UST part of the report.
#[derive(Debug, Clone, Default)]
pub struct LttngReport {
    /// `DT_NEEDED` entries naming liblttng-ust.
    pub needed: Vec<String>,
    /// `"2.13"` or `"2.12"` naming, by the symbols and sections found.
    pub abi: Option<&'static str>,
    /// Name of the tracepoint pointers section, if present.
    pub ptrs_section: Option<String>,
    /// Number of pointers in it.
    pub ptrs: usize,
    /// Tracepoints found.
    pub tracepoints: Vec<Tracepoint>,
    /// Providers whose probe provider is linked in.
    pub providers_linked: Vec<String>,
    /// Problems.
    pub problems: Vec<String>,
    /// Remarks.
    pub warnings: Vec<String>,
}

/// Lists the tracepoints and checks that each will register (its pointer
/// is in the pointers section) and that liblttng-ust will be found.
pub(crate) fn check(img: &Image<'_>, fix: &mut Vec<String>) -> LttngReport {
    let mut r = LttngReport {
        needed: img
            .needed
            .iter()
            .filter(|n| n.contains("lttng-ust"))
            .cloned()
            .collect(),
        ..Default::default()
    };
    let mut seen = BTreeSet::new();
    let mut abi = BTreeSet::new();
    for (s, _) in img.all_symbols() {
        if let Some(p) = s.name.strip_prefix(TRACEPOINT_PROVIDER_PREFIX) {
            if !r.providers_linked.iter().any(|x| x == p) {
                r.providers_linked.push(p.to_string());
            }
            continue;
        }
        if s.kind == elf::STT_FUNC {
            continue;
        }
        let Some(TracepointSymbol {
            provider,
            event: name,
            abi: version,
        }) = parse_tracepoint_symbol(&s.name)
        else {
            continue;
        };
        if seen.insert(s.value) {
            abi.insert(version);
            r.tracepoints.push(Tracepoint {
                provider,
                name,
                symbol: s.name.clone(),
                address: s.value,
                registered: None,
            });
        }
    }
    // `lttng_ust_tracepoint_provider_{mismatch,check}_<p>` are LTTng's own
    // helper functions for provider `<p>` (kept in debug builds).
    let all = r.providers_linked.clone();
    r.providers_linked.retain(|p| {
        !["mismatch_", "check_"].iter().any(|h| {
            p.strip_prefix(h)
                .is_some_and(|base| all.iter().any(|x| x == base))
        })
    });
    r.tracepoints
        .sort_by(|a, b| (&a.provider, &a.name).cmp(&(&b.provider, &b.name)));
    let ptrs = [TRACEPOINT_PTRS_SECTION, LEGACY_TRACEPOINT_PTRS_SECTION]
        .iter()
        .find_map(|n| img.section(n));
    r.abi = if abi.contains("2.13") {
        Some("2.13")
    } else if abi.contains("2.12") {
        Some("2.12")
    } else {
        match ptrs.map(|s| s.name.as_str()) {
            Some(TRACEPOINT_PTRS_SECTION) => Some("2.13"),
            Some(_) => Some("2.12"),
            None => None,
        }
    };
    let gc_fix = format!(
        "Keep the tracepoint pointers section: add to .cargo/config.toml\n\
         [target.{}]\n\
         rustflags = [\"-C\", \"link-arg=-Wl,-z,nostart-stop-gc\"]\n\
         or reference every lttng_ust_tracepoint_ptr_<provider>___<event> from a constructor in the generated C.",
        img.rust_target()
    );
    match ptrs {
        None => {
            if !r.tracepoints.is_empty() {
                r.problems.push(format!(
                    "{} tracepoint{} but no lttng_ust_tracepoints_ptrs section (removed by the linker's --gc-sections, as lld does): \
                     the tracepoints are never registered and every trace is silently empty",
                    r.tracepoints.len(),
                    if r.tracepoints.len() == 1 { "" } else { "s" }
                ));
                push_fix(fix, gc_fix);
                for t in &mut r.tracepoints {
                    t.registered = Some(false);
                }
            }
        }
        Some(sec) => {
            r.ptrs_section = Some(sec.name.clone());
            let w = img.word_size() as u64;
            let mut targets = BTreeSet::new();
            let mut unknown = 0usize;
            // A NOBITS section has no pointers in the file (and an
            // arbitrary size): nothing to resolve.
            let slots = if sec.sh_type == elf::SHT_NOBITS {
                0
            } else {
                sec.size / w
            };
            for i in 0..slots {
                match img.pointer_at(sec.addr.wrapping_add(i * w)) {
                    Some(v) if v != 0 => {
                        targets.insert(v);
                    }
                    _ => unknown += 1,
                }
            }
            r.ptrs = slots as usize;
            let mut unregistered = Vec::new();
            for t in &mut r.tracepoints {
                if targets.contains(&t.address) {
                    t.registered = Some(true);
                } else if unknown == 0 {
                    t.registered = Some(false);
                    unregistered.push(format!("{}:{}", t.provider, t.name));
                }
            }
            if !unregistered.is_empty() {
                r.problems.push(format!(
                    "{} not in {}: never registered, their events are silently lost",
                    unregistered.join(", "),
                    sec.name
                ));
                push_fix(fix, gc_fix);
            }
            if unknown > 0 && r.tracepoints.iter().any(|t| t.registered.is_none()) {
                r.warnings.push(format!(
                    "{unknown} pointer{} in {} could not be resolved: registration of some tracepoints unknown",
                    if unknown == 1 { "" } else { "s" },
                    sec.name
                ));
            }
        }
    }
    let runtrace_tps = r
        .tracepoints
        .iter()
        .any(|t| t.provider == RUNTRACE_PROVIDER);
    if runtrace_tps && !r.providers_linked.iter().any(|p| p == RUNTRACE_PROVIDER) {
        r.warnings.push(
            "the runtrace tracepoint provider (lttng_ust_tracepoint_provider_runtrace) is not linked in: LD_PRELOAD the shared object that defines it, or no events are recorded"
                .into(),
        );
    }
    if !r.tracepoints.is_empty() && r.needed.is_empty() && !r.providers_linked.is_empty() {
        r.warnings.push(
            "probe provider linked in but no DT_NEEDED liblttng-ust.so: it will not find the tracer at run time"
                .into(),
        );
    }
    if r.tracepoints.is_empty() && img.symtab.is_none() && ptrs.is_some() {
        r.warnings.push(
            "stripped: tracepoint names cannot be listed, but the pointers section is present"
                .into(),
        );
    }
    r
}
