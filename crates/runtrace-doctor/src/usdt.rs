//! USDT / SDT (`.note.stapsdt`) checks: every note listed, and the file
//! offsets perf, bpftrace and the kernel will compute for its probe and
//! semaphore simulated (see the crate docs for the three rules).

use crate::elf::{Image, Section};
use crate::fix::push_fix;
use crate::hex::{hex, hex_opt, signed_hex};
use object::elf;
use runtrace_build::symbols::{SDT_BASE_SECTION, SDT_NOTE_OWNER, SDT_NOTE_TYPE, SEMAPHORE_SECTION};
use std::collections::{BTreeMap, BTreeSet};

/// One USDT/SDT probe site.
#[derive(Debug, Clone)]
pub struct SdtProbe {
    /// Provider (`runtrace` for runtrace's probes).
    pub provider: String,
    /// Probe name.
    pub name: String,
    /// Virtual address of the probe's nop.
    pub pc: u64,
    /// The note's `base` field (link-time address of `.stapsdt.base`).
    pub base: u64,
    /// Virtual address of the semaphore, 0 if none.
    pub semaphore: u64,
    /// Argument string (`8@%rdi -4@%esi`).
    pub args: String,
    /// Correct file offset of `pc`, if it is in a loaded segment.
    pub pc_offset: Option<u64>,
    /// The file offset perf 6.1 computes for `pc`.
    pub perf_pc_offset: u64,
    /// Section holding the semaphore.
    pub semaphore_section: Option<String>,
    /// Correct file offset of the semaphore.
    pub semaphore_offset: Option<u64>,
    /// The semaphore offset perf 6.1 computes.
    pub perf_semaphore_offset: Option<u64>,
    /// The address the kernel increments for the correct semaphore offset.
    pub kernel_semaphore_vaddr: Option<u64>,
    /// What is wrong with this site (empty: sound).
    pub issues: Vec<String>,
}

impl SdtProbe {
    /// `provider:name`.
    pub fn event(&self) -> String {
        format!("{}:{}", self.provider, self.name)
    }
}

/// The USDT/SDT part of the report.
#[derive(Debug, Clone, Default)]
pub struct UsdtReport {
    /// Every probe site with code in the binary, in note order.
    pub probes: Vec<SdtProbe>,
    /// Sites whose function the linker discarded, in note order: no code,
    /// so they never fire, and nothing to check.
    ///
    /// lld's `--gc-sections` (rust-lld is Rust's default linker) drops an
    /// unused function but keeps the notes, which are not allocated; their
    /// address then resolves to the nop's offset in its dropped section,
    /// below any code. GNU ld keeps such functions instead. bpftrace skips
    /// these sites ("invalid address"); `perf probe` adds a uprobe at that
    /// address, which never fires.
    pub discarded: Vec<SdtProbe>,
    /// Address of `.stapsdt.base`, if present.
    pub base_section: Option<u64>,
    /// Problems (each makes the binary unsound).
    pub problems: Vec<String>,
    /// Remarks that do not break tracing.
    pub warnings: Vec<String>,
}

impl UsdtReport {
    /// No problems.
    pub fn is_sound(&self) -> bool {
        self.problems.is_empty()
    }
}

fn layout_fix(img: &Image<'_>) -> String {
    format!(
        "Link so that every loadable segment starts on its own file page: add to .cargo/config.toml\n\
         [target.{}]\n\
         rustflags = [\"-C\", \"link-arg=-Wl,-z,separate-loadable-segments\"]\n\
         (keeps rust-lld), or use \"-C\", \"linker-features=-lld\" to link with GNU ld instead.\n\
         C/C++: add -Wl,-z,separate-loadable-segments to LDFLAGS when linking with lld.\n\
         Then rebuild, and re-add perf probes (perf probe -d 'sdt_PROVIDER:*').",
        img.rust_target()
    )
}

/// Parses one `stapsdt` note's description.
fn parse_sdt_desc(img: &Image<'_>, desc: &[u8]) -> Option<(u64, u64, u64, String, String, String)> {
    let w = img.word_size();
    if desc.len() < 3 * w + 2 {
        return None;
    }
    let pc = img.word(&desc[0..w]);
    let base = img.word(&desc[w..2 * w]);
    let sem = img.word(&desc[2 * w..3 * w]);
    let mut parts = desc[3 * w..].split(|&b| b == 0);
    let mut next = || {
        parts
            .next()
            .map(|s| String::from_utf8_lossy(s).into_owned())
    };
    let provider = next()?;
    let name = next()?;
    let args = next().unwrap_or_default();
    if provider.is_empty() || name.is_empty() {
        return None;
    }
    Some((pc, base, sem, provider, name, args))
}

/// The two sections the offset rules depend on, when the binary has them.
#[derive(Clone, Copy)]
struct SdtSections<'i> {
    /// `.stapsdt.base`: perf's prelink correction of probe addresses.
    base: Option<&'i Section>,
    /// `.probes`: where perf assumes every semaphore is.
    probes: Option<&'i Section>,
}

/// Lists every SDT note and checks that perf 6.1, bpftrace and the
/// kernel's semaphore code compute the right offsets for it.
pub(crate) fn check(img: &Image<'_>, fix: &mut Vec<String>) -> UsdtReport {
    let secs = SdtSections {
        base: img.section(SDT_BASE_SECTION),
        probes: img.section(SEMAPHORE_SECTION),
    };
    let mut r = UsdtReport {
        base_section: secs.base.map(|s| s.addr),
        ..UsdtReport::default()
    };
    read_probes(img, secs, &mut r);
    let code_start = lowest_code_address(img);
    (r.discarded, r.probes) = std::mem::take(&mut r.probes)
        .into_iter()
        .partition(|p| code_start.is_some_and(|start| p.pc < start));
    if r.probes.is_empty() {
        return r;
    }
    check_base_section(secs.base, &mut r);
    check_perf_pc_offsets(img, secs.base, &mut r, fix);
    check_kernel_semaphores(img, &mut r, fix);
    check_perf_semaphore_offsets(&mut r, fix);
    report_other_placement_issues(&mut r, fix);
    check_one_semaphore_per_event(&mut r, fix);
    check_probes_section(secs.probes, &mut r);
    r
}

/// The lowest address of any executable section (of any executable
/// segment when the binary has no section headers): no probe site with
/// code lies below it.
fn lowest_code_address(img: &Image<'_>) -> Option<u64> {
    let exec = u64::from(elf::SHF_EXECINSTR);
    img.sections
        .iter()
        .filter(|s| s.is_alloc() && s.flags & exec != 0 && s.size > 0)
        .map(|s| s.addr)
        .min()
        .or_else(|| {
            img.segments
                .iter()
                .filter(|s| s.flags & elf::PF_X != 0 && s.memsz > 0)
                .map(|s| s.vaddr)
                .min()
        })
}

/// Every `stapsdt` note as a probe site, in note order; damaged notes and
/// notes of other types are reported, not listed.
fn read_probes(img: &Image<'_>, secs: SdtSections<'_>, r: &mut UsdtReport) {
    let mut malformed = 0usize;
    let mut other_types = BTreeSet::new();
    for note in &img.sdt_notes {
        if note.owner != SDT_NOTE_OWNER.as_bytes() {
            continue;
        }
        if note.n_type != SDT_NOTE_TYPE {
            other_types.insert(note.n_type);
            continue;
        }
        match parse_sdt_desc(img, &note.desc) {
            Some(desc) => r.probes.push(probe_site(img, secs, desc)),
            None => malformed += 1,
        }
    }
    if malformed > 0 {
        r.problems.push(format!(
            "{malformed} stapsdt note{} too short or without provider/name: damaged notes",
            if malformed == 1 { " is" } else { "s are" }
        ));
    }
    if !other_types.is_empty() {
        r.warnings.push(format!(
            "stapsdt notes of unsupported type {:?} ignored (perf 6.1 stops reading notes at the first one)",
            other_types
        ));
    }
}

/// One probe site from its note: where the tools will put its uprobe and
/// find its semaphore, and what is wrong with either.
fn probe_site(
    img: &Image<'_>,
    secs: SdtSections<'_>,
    (pc, base, semaphore, provider, name, args): (u64, u64, u64, String, String, String),
) -> SdtProbe {
    let perf_pc_offset = perf_pc_offset(secs.base, pc, base);
    let mut issues = Vec::new();
    let pc_offset = check_pc(img, pc, perf_pc_offset, &mut issues);
    let sem = if semaphore != 0 {
        check_semaphore(img, secs.probes, semaphore, &mut issues)
    } else {
        SemaphorePlace::default()
    };
    SdtProbe {
        provider,
        name,
        pc,
        base,
        semaphore,
        args,
        pc_offset,
        perf_pc_offset,
        semaphore_section: sem.section,
        semaphore_offset: sem.offset,
        perf_semaphore_offset: sem.perf_offset,
        kernel_semaphore_vaddr: sem.kernel_vaddr,
        issues,
    }
}

/// The file offset perf 6.1 computes for a probe at `pc` (its
/// `sdt_adjust_loc`): corrected by `.stapsdt.base` only when that section
/// has a non-zero file offset; the address is used as an offset otherwise.
fn perf_pc_offset(base_sec: Option<&Section>, pc: u64, base: u64) -> u64 {
    match base_sec {
        Some(s) if s.offset != 0 => pc.wrapping_add(s.offset).wrapping_sub(base),
        _ => pc,
    }
}

/// The correct file offset of the probe's nop, noting in `issues` when it
/// is not executable, not in the file, or not where perf puts the uprobe.
fn check_pc(
    img: &Image<'_>,
    pc: u64,
    perf_pc_offset: u64,
    issues: &mut Vec<String>,
) -> Option<u64> {
    match img.file_offset(pc) {
        Some((off, seg)) => {
            if seg.flags & elf::PF_X == 0 {
                issues.push(format!(
                    "pc {} is in PT_LOAD #{} which is not executable",
                    hex(pc),
                    seg.index
                ));
            }
            if perf_pc_offset != off {
                issues.push(format!(
                    "perf 6.1 places the uprobe at file offset {} but the probe's nop is at {}: it never fires",
                    hex(perf_pc_offset),
                    hex(off)
                ));
            }
            Some(off)
        }
        None => {
            issues.push(format!(
                "pc {} is not in any PT_LOAD segment's file data",
                hex(pc)
            ));
            None
        }
    }
}

/// Where a semaphore is, and where perf and the kernel think it is.
#[derive(Default)]
struct SemaphorePlace {
    section: Option<String>,
    offset: Option<u64>,
    perf_offset: Option<u64>,
    kernel_vaddr: Option<u64>,
}

/// Checks a probe's (non-zero) semaphore: its section, the offset perf
/// passes, and the address the kernel increments.
fn check_semaphore(
    img: &Image<'_>,
    probes_sec: Option<&Section>,
    semaphore: u64,
    issues: &mut Vec<String>,
) -> SemaphorePlace {
    let section = check_semaphore_section(img, semaphore, issues);
    let perf_offset = Some(perf_semaphore_offset(probes_sec, semaphore));
    let (offset, kernel_vaddr) = check_semaphore_mapping(img, semaphore, perf_offset, issues);
    SemaphorePlace {
        section,
        offset,
        perf_offset,
        kernel_vaddr,
    }
}

/// The name of the section holding the semaphore, noting in `issues` when
/// it is not a writable PROGBITS section or in no allocated section.
fn check_semaphore_section(
    img: &Image<'_>,
    semaphore: u64,
    issues: &mut Vec<String>,
) -> Option<String> {
    let Some(s) = img.section_at(semaphore) else {
        issues.push(format!(
            "semaphore {} is not inside any allocated section",
            hex(semaphore)
        ));
        return None;
    };
    if !s.is_write() || s.sh_type != elf::SHT_PROGBITS {
        issues.push(format!(
            "semaphore {} is in {} which is not a writable PROGBITS section{}",
            hex(semaphore),
            s.name,
            if s.sh_type == elf::SHT_NOBITS {
                " (it is .bss-like: no file offset for the kernel to find)"
            } else {
                ""
            }
        ));
    }
    Some(s.name.clone())
}

/// The semaphore offset perf 6.1 passes (its `sdt_adjust_refctr`):
/// relative to the `.probes` section.
fn perf_semaphore_offset(probes_sec: Option<&Section>, semaphore: u64) -> u64 {
    match probes_sec {
        Some(s) if s.offset != 0 => semaphore.wrapping_sub(s.addr.wrapping_sub(s.offset)),
        _ => semaphore,
    }
}

/// The semaphore's file offset and the address the kernel increments for
/// it, noting in `issues` when it has no file offset, its segment is not
/// writable, or perf passes another offset.
fn check_semaphore_mapping(
    img: &Image<'_>,
    semaphore: u64,
    perf_offset: Option<u64>,
    issues: &mut Vec<String>,
) -> (Option<u64>, Option<u64>) {
    let Some((off, seg)) = img.file_offset(semaphore) else {
        // Already reported when the section is NOBITS.
        if img
            .section_at(semaphore)
            .is_none_or(|s| s.sh_type != elf::SHT_NOBITS)
        {
            issues.push(format!(
                "semaphore {} has no file offset (not in a PT_LOAD's file data): the kernel cannot increment it",
                hex(semaphore)
            ));
        }
        return (None, None);
    };
    if seg.flags & elf::PF_W == 0 {
        issues.push(format!(
            "semaphore {} is in PT_LOAD #{} which is not writable",
            hex(semaphore),
            seg.index
        ));
    }
    if perf_offset != Some(off) {
        issues.push(format!(
            "perf 6.1 passes semaphore offset {} but the semaphore is at file offset {}",
            hex_opt(perf_offset),
            hex(off)
        ));
    }
    let kernel_vaddr = check_kernel_refctr(img, semaphore, off, issues);
    (Some(off), kernel_vaddr)
}

/// The address the kernel increments for a semaphore at file offset
/// `off`, noting in `issues` when it is another copy or none.
fn check_kernel_refctr(
    img: &Image<'_>,
    semaphore: u64,
    off: u64,
    issues: &mut Vec<String>,
) -> Option<u64> {
    match img.kernel_refctr_vaddr(off) {
        Some((v, kseg)) => {
            if v != semaphore {
                issues.push(format!(
                    "the kernel increments {} (PT_LOAD #{} maps the same file page first), not the semaphore at {}: guarded probes stay off",
                    hex(v),
                    kseg.index,
                    hex(semaphore)
                ));
            }
            Some(v)
        }
        None => {
            issues.push(format!(
                "no writable mapping covers the semaphore's file offset {}: the kernel cannot increment it",
                hex(off)
            ));
            None
        }
    }
}

/// (a) `.stapsdt.base`: present at the address every note carries, or
/// absent with every note's base 0.
fn check_base_section(base_sec: Option<&Section>, r: &mut UsdtReport) {
    match base_sec {
        // rust-lld's --gc-sections drops the section (nothing allocated
        // refers to it) and the notes then carry base 0. Tools skip the
        // prelink correction and use the addresses as they are, which the
        // offset checks below verify: not a problem by itself.
        None => {
            let nonzero = r.probes.iter().filter(|p| p.base != 0).count();
            if nonzero > 0 {
                r.problems.push(format!(
                    "no .stapsdt.base section but {nonzero} note{} carry a non-zero base: damaged or partially stripped binary",
                    if nonzero == 1 { "" } else { "s" }
                ));
            } else {
                r.warnings.push(
                    "no .stapsdt.base section (the linker's --gc-sections removed it; notes carry base 0): \
                     tools use the probe addresses as they are, checked below"
                        .into(),
                );
            }
        }
        Some(s) => {
            let bad: BTreeSet<u64> = r
                .probes
                .iter()
                .map(|p| p.base)
                .filter(|&b| b != s.addr)
                .collect();
            if !bad.is_empty() {
                r.problems.push(format!(
                    ".stapsdt.base is at {} but notes carry base {} (prelinked or damaged binary)",
                    hex(s.addr),
                    bad.iter().map(|&b| hex(b)).collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }
}

/// (b) The uprobe offsets perf computes, aggregated over the sites: one
/// problem naming the segments that cause them, and the layout fix.
fn check_perf_pc_offsets(
    img: &Image<'_>,
    base_sec: Option<&Section>,
    r: &mut UsdtReport,
    fix: &mut Vec<String>,
) {
    let perf_pc_bad: Vec<&SdtProbe> = r
        .probes
        .iter()
        .filter(|p| p.pc_offset.is_some_and(|o| o != p.perf_pc_offset))
        .collect();
    let Some(first) = perf_pc_bad.first() else {
        return;
    };
    let base_seg = base_segment(img, base_sec);
    let text_segs: BTreeSet<String> = perf_pc_bad
        .iter()
        .filter_map(|p| img.segment_at(p.pc))
        .map(|s| {
            format!(
                "PT_LOAD #{} (vaddr - offset {})",
                s.index,
                signed_hex(s.bias())
            )
        })
        .collect();
    let problem = format!(
        "perf 6.1 computes wrong file offsets for {} of {} probe sites (e.g. {} at pc {}: perf uses {}, the nop is at {}): \
         {base_seg} but the probes are in {}. The uprobes land on the wrong bytes and never fire. \
         This is lld's default layout (segments packed in the file, each starting on a new page in memory).",
        perf_pc_bad.len(),
        r.probes.len(),
        first.event(),
        hex(first.pc),
        hex(first.perf_pc_offset),
        hex_opt(first.pc_offset),
        text_segs.into_iter().collect::<Vec<_>>().join(", ")
    );
    r.problems.push(problem);
    push_fix(fix, layout_fix(img));
}

/// Where perf's probe offsets come from: the segment of `.stapsdt.base`
/// and its bias, or the addresses taken as offsets without it.
fn base_segment(img: &Image<'_>, base_sec: Option<&Section>) -> String {
    match base_sec {
        Some(b) => img
            .segment_at(b.addr)
            .map(|s| {
                format!(
                    ".stapsdt.base is in PT_LOAD #{} (vaddr - offset {})",
                    s.index,
                    signed_hex(s.bias())
                )
            })
            .unwrap_or_else(|| ".stapsdt.base is in no PT_LOAD segment".into()),
        None => {
            "without .stapsdt.base perf takes the addresses as file offsets (vaddr - offset 0x0)"
                .into()
        }
    }
}

/// Semaphores whose file page an earlier writable segment maps too, so
/// the kernel increments the wrong copy: one problem, and the layout fix.
fn check_kernel_semaphores(img: &Image<'_>, r: &mut UsdtReport, fix: &mut Vec<String>) {
    let sem_kernel_bad: Vec<&SdtProbe> = r
        .probes
        .iter()
        .filter(|p| p.semaphore != 0)
        .filter(|p| p.kernel_semaphore_vaddr.is_some_and(|v| v != p.semaphore))
        .collect();
    let Some(first) = sem_kernel_bad.first() else {
        return;
    };
    let n: BTreeSet<u64> = sem_kernel_bad.iter().map(|p| p.semaphore).collect();
    let problem = format!(
        "the kernel increments the wrong copy of {} semaphore{} (e.g. {}: semaphore {}, kernel writes {}): \
         an earlier writable segment maps the same file page, so semaphore-guarded probes never turn on \
         (perf, bpftrace and any other uprobe user alike)",
        n.len(),
        if n.len() == 1 { "" } else { "s" },
        first.event(),
        hex(first.semaphore),
        hex_opt(first.kernel_semaphore_vaddr),
    );
    r.problems.push(problem);
    push_fix(fix, layout_fix(img));
}

/// Semaphores perf looks for in `.probes` though they are elsewhere.
fn check_perf_semaphore_offsets(r: &mut UsdtReport, fix: &mut Vec<String>) {
    let sem_perf_bad = r
        .probes
        .iter()
        .filter(|p| p.semaphore != 0)
        .filter(|p| p.semaphore_offset.is_some() && p.perf_semaphore_offset != p.semaphore_offset)
        .count();
    if sem_perf_bad > 0 {
        r.problems.push(format!(
            "perf 6.1 computes wrong semaphore offsets for {sem_perf_bad} site{} (it assumes every semaphore is in .probes)",
            if sem_perf_bad == 1 { "" } else { "s" }
        ));
        push_fix(fix, probes_section_fix());
    }
}

/// Placement problems not covered above (bad section, no file offset,
/// non-executable pc), each once with the events it affects.
fn report_other_placement_issues(r: &mut UsdtReport, fix: &mut Vec<String>) {
    let mut other: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &r.probes {
        for i in &p.issues {
            if i.starts_with("perf 6.1") || i.starts_with("the kernel increments") {
                continue;
            }
            other.entry(i.clone()).or_default().push(p.event());
        }
    }
    for (issue, events) in other {
        r.problems.push(format!("{}: {issue}", events.join(", ")));
        if issue.contains("semaphore") {
            push_fix(fix, probes_section_fix());
        }
    }
}

/// Semaphores per event: all sites of one event must share one semaphore.
fn check_one_semaphore_per_event(r: &mut UsdtReport, fix: &mut Vec<String>) {
    let mut by_event: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for p in &r.probes {
        by_event.entry(p.event()).or_default().insert(p.semaphore);
    }
    for (event, sems) in &by_event {
        let nonzero: Vec<u64> = sems.iter().copied().filter(|&s| s != 0).collect();
        if nonzero.len() > 1 {
            r.problems.push(format!(
                "{event}: its sites use {} different semaphores ({}): perf 6.1 adds only the first site (the kernel refuses a second \
                 uprobe with another semaphore under the same event: \"File exists\") and bpftrace enables only the first \
                 site's semaphore, so the other sites never fire",
                nonzero.len(),
                nonzero.iter().map(|&s| hex(s)).collect::<Vec<_>>().join(", ")
            ));
            push_fix(
                fix,
                "Give each provider:name exactly one semaphore (one static per event in the probe glue) and reference it from every site."
                    .into(),
            );
        } else if !nonzero.is_empty() && sems.contains(&0) {
            r.warnings.push(format!(
                "{event}: some sites have a semaphore and some have none"
            ));
        }
    }
}

/// `.probes`, when present, must be writable PROGBITS for the kernel to
/// increment the semaphores in it.
fn check_probes_section(probes_sec: Option<&Section>, r: &mut UsdtReport) {
    if let Some(s) = probes_sec {
        if !s.is_write() || s.sh_type != elf::SHT_PROGBITS {
            r.problems.push(
                ".probes is not a writable PROGBITS section: the kernel cannot increment semaphores in it"
                    .into(),
            );
        }
    }
}

/// The fix for semaphores outside one writable `.probes` section.
fn probes_section_fix() -> String {
    "Put every SDT semaphore in one writable PROGBITS section named .probes \
     (Rust: #[link_section = \".probes\"] on a `static mut u16`; C: __attribute__((section(\".probes\"))))."
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::elf;
    use std::collections::HashMap;

    #[test]
    fn sdt_desc_parses() {
        let img = Image {
            data: &[],
            is64: true,
            little: true,
            machine: elf::EM_X86_64,
            e_type: elf::ET_DYN,
            segments: vec![],
            sections: vec![],
            symtab: None,
            dynsym: vec![],
            needed: vec![],
            sdt_notes: vec![],
            read_problems: vec![],
            relocs: HashMap::new(),
            comment: vec![],
        };
        let mut d = Vec::new();
        d.extend_from_slice(&0x1234u64.to_le_bytes());
        d.extend_from_slice(&0x500u64.to_le_bytes());
        d.extend_from_slice(&0x4000u64.to_le_bytes());
        d.extend_from_slice(b"runtrace\0task_spawn\08@%rdi\0");
        let (pc, base, sem, p, n, a) = parse_sdt_desc(&img, &d).unwrap();
        assert_eq!((pc, base, sem), (0x1234, 0x500, 0x4000));
        assert_eq!(
            (p.as_str(), n.as_str(), a.as_str()),
            ("runtrace", "task_spawn", "8@%rdi")
        );
        assert!(parse_sdt_desc(&img, &d[..20]).is_none());
    }
}
