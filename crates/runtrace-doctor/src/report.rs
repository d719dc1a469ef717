//! The report of one binary: what each check found, the fixes, the
//! verdict, and its two renderings (text for people, one JSON object for
//! tools).

use crate::cpu_profile::{self, CpuProfileReport};
use crate::elf::Image;
use crate::hex::{hex, hex_opt, signed_hex};
use crate::lttng::{self, LttngReport};
use crate::perf_probe::{self, PerfProbeReport};
use crate::usdt::{self, UsdtReport};
use runtrace_build::symbols::RUNTRACE_PROVIDER;
use runtrace_format::schema::BUILTIN_EVENTS;
use serde_json::{json, Value as Json};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// One PT_LOAD segment, as shown in the report.
#[derive(Debug, Clone)]
pub struct LoadSegment {
    /// Index in the program header table.
    pub index: usize,
    /// `R`, `W`, `X` flags (`R-X`).
    pub flags: String,
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_vaddr - p_offset`.
    pub bias: i128,
}

/// Everything `runtrace doctor` found in one binary: the ELF layout, one
/// part per backend, the exact fixes and the verdict; `Display` is the text
/// report, [`Report::to_json`] the JSON one.
///
/// ```
/// let me = std::env::current_exe().unwrap();
/// let r = runtrace_doctor::inspect(&me).unwrap();
/// let j = r.to_json();
/// assert_eq!(j["ok"], r.is_sound());
/// assert_eq!(j["verdict"], r.verdict());
/// ```
#[derive(Debug, Clone)]
pub struct Report {
    /// The binary.
    pub binary: PathBuf,
    /// `ELF64 x86_64`.
    pub format: String,
    /// Linker strings from `.comment` (`Linker: LLD 22.1.2`).
    pub linker: Vec<String>,
    /// PT_LOAD segments.
    pub segments: Vec<LoadSegment>,
    /// All PT_LOAD segments share one `p_vaddr - p_offset`.
    pub uniform_bias: bool,
    /// Problems reading optional parts of the file.
    pub read_problems: Vec<String>,
    /// USDT/SDT probes.
    pub usdt: UsdtReport,
    /// perf-probe functions.
    pub perf_probe: PerfProbeReport,
    /// LTTng-UST tracepoints.
    pub lttng: LttngReport,
    /// Readiness for CPU profiles (frame pointers, symbols, debug info).
    /// Advisory: it has its own verdict and fixes and does not make the
    /// probes unsound.
    pub cpu_profile: CpuProfileReport,
    /// Exact fixes for the problems found.
    pub fix: Vec<String>,
}

impl Report {
    /// Everything found is sound (also true when nothing was found).
    pub fn is_sound(&self) -> bool {
        self.read_problems.is_empty()
            && self.usdt.problems.is_empty()
            && self.perf_probe.problems.is_empty()
            && self.lttng.problems.is_empty()
    }

    /// Problems over all backends.
    pub fn problem_count(&self) -> usize {
        self.read_problems.len()
            + self.usdt.problems.len()
            + self.perf_probe.problems.len()
            + self.lttng.problems.len()
    }

    /// The binary carries at least one runtrace probe of any backend.
    pub fn has_runtrace_probes(&self) -> bool {
        self.usdt
            .probes
            .iter()
            .any(|p| p.provider == RUNTRACE_PROVIDER)
            || !self.perf_probe.functions.is_empty()
            || self
                .lttng
                .tracepoints
                .iter()
                .any(|t| t.provider == RUNTRACE_PROVIDER)
    }

    /// The final verdict line.
    pub fn verdict(&self) -> String {
        if !self.is_sound() {
            let n = self.problem_count();
            format!(
                "UNSOUND: {n} problem{} (see Fix above)",
                if n == 1 { "" } else { "s" }
            )
        } else if !self.has_runtrace_probes() {
            if self.usdt.probes.is_empty() && self.lttng.tracepoints.is_empty() {
                "OK: no runtrace probes found (nothing to check)".into()
            } else {
                "OK: no runtrace probes found; the other probes are sound".into()
            }
        } else {
            "SOUND: every probe found can be attached".into()
        }
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> Json {
        let opt = |v: Option<u64>| v.map_or(Json::Null, Json::from);
        let probes: Vec<Json> = self
            .usdt
            .probes
            .iter()
            .map(|p| {
                json!({
                    "provider": p.provider,
                    "name": p.name,
                    "runtrace": p.provider == RUNTRACE_PROVIDER,
                    "pc": p.pc,
                    "base": p.base,
                    "semaphore": p.semaphore,
                    "args": p.args,
                    "pc_offset": opt(p.pc_offset),
                    "perf_pc_offset": p.perf_pc_offset,
                    "semaphore_section": p.semaphore_section,
                    "semaphore_offset": opt(p.semaphore_offset),
                    "perf_semaphore_offset": opt(p.perf_semaphore_offset),
                    "kernel_semaphore_vaddr": opt(p.kernel_semaphore_vaddr),
                    "ok": p.issues.is_empty(),
                    "issues": p.issues,
                })
            })
            .collect();
        let functions: Vec<Json> = self
            .perf_probe
            .functions
            .iter()
            .map(|f| {
                json!({
                    "event": f.event,
                    "symbol": f.symbol,
                    "address": f.address,
                    "size": f.size,
                    "table": f.table,
                    "file_offset": opt(f.file_offset),
                    "nop5": f.nop5,
                })
            })
            .collect();
        let tracepoints: Vec<Json> = self
            .lttng
            .tracepoints
            .iter()
            .map(|t| {
                json!({
                    "provider": t.provider,
                    "name": t.name,
                    "runtrace": t.provider == RUNTRACE_PROVIDER,
                    "symbol": t.symbol,
                    "address": t.address,
                    "registered": t.registered,
                })
            })
            .collect();
        let segments: Vec<Json> = self
            .segments
            .iter()
            .map(|s| {
                json!({
                    "index": s.index,
                    "flags": s.flags,
                    "offset": s.offset,
                    "vaddr": s.vaddr,
                    "filesz": s.filesz,
                    "memsz": s.memsz,
                    "bias": s.bias as i64,
                })
            })
            .collect();
        let discarded: Vec<Json> = self
            .usdt
            .discarded
            .iter()
            .map(|p| {
                json!({
                    "provider": p.provider,
                    "name": p.name,
                    "runtrace": p.provider == RUNTRACE_PROVIDER,
                    "pc": p.pc,
                })
            })
            .collect();
        json!({
            "binary": self.binary.display().to_string(),
            "ok": self.is_sound(),
            "verdict": self.verdict(),
            "elf": {
                "format": self.format,
                "linker": self.linker,
                "load_segments": segments,
                "uniform_bias": self.uniform_bias,
                "problems": self.read_problems,
            },
            "usdt": {
                "probes": probes,
                "discarded": discarded,
                "providers": self.usdt.probes.iter().map(|p| p.provider.as_str())
                    .collect::<BTreeSet<_>>(),
                "base_section": opt(self.usdt.base_section),
                "sound": self.usdt.is_sound(),
                "problems": self.usdt.problems,
                "warnings": self.usdt.warnings,
            },
            "perf_probe": {
                "functions": functions,
                "missing": self.perf_probe.missing,
                "stripped": self.perf_probe.stripped,
                "sound": self.perf_probe.problems.is_empty(),
                "problems": self.perf_probe.problems,
                "warnings": self.perf_probe.warnings,
            },
            "lttng": {
                "needed": self.lttng.needed,
                "abi": self.lttng.abi,
                "ptrs_section": self.lttng.ptrs_section,
                "ptrs": self.lttng.ptrs,
                "tracepoints": tracepoints,
                "providers_linked": self.lttng.providers_linked,
                "sound": self.lttng.problems.is_empty(),
                "problems": self.lttng.problems,
                "warnings": self.lttng.warnings,
            },
            "fix": self.fix,
            "cpu_profile": {
                "ready": self.cpu_profile.is_ready(),
                "verdict": self.cpu_profile.verdict(),
                "frame_pointers": self.cpu_profile.frame_pointers,
                "functions_checked": self.cpu_profile.functions_checked,
                "with_frame_pointer": self.cpu_profile.with_frame_pointer,
                "symtab": self.cpu_profile.symtab,
                "build_id": self.cpu_profile.build_id,
                "debug_units": self.cpu_profile.debug_units,
                "own_debug_units": self.cpu_profile.own_debug_units,
                "line_tables_only": self.cpu_profile.line_tables_only,
                "notes": self.cpu_profile.notes,
                "fix": self.cpu_profile.fix,
            },
        })
    }
}

fn list(f: &mut fmt::Formatter<'_>, label: &str, items: &[String]) -> fmt::Result {
    for item in items {
        writeln!(f, "  {label}: {item}")?;
    }
    Ok(())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "runtrace doctor: {}", self.binary.display())?;
        writeln!(f, "  {}", self.format)?;
        for c in &self.linker {
            writeln!(f, "  .comment: {c}")?;
        }
        writeln!(f, "  PT_LOAD segments:")?;
        for s in &self.segments {
            writeln!(
                f,
                "    #{:<2} {}  offset {:>8}  vaddr {:>10}  filesz {:>8}  memsz {:>8}  vaddr-offset {}",
                s.index,
                s.flags,
                hex(s.offset),
                hex(s.vaddr),
                hex(s.filesz),
                hex(s.memsz),
                signed_hex(s.bias)
            )?;
        }
        list(f, "PROBLEM", &self.read_problems)?;

        // USDT.
        writeln!(f)?;
        let u = &self.usdt;
        if u.probes.is_empty() {
            writeln!(
                f,
                "USDT/SDT probes: none{}",
                if u.discarded.is_empty() {
                    " (no .note.stapsdt notes)"
                } else {
                    " with code in this binary"
                }
            )?;
        } else {
            let providers: BTreeSet<&str> = u.probes.iter().map(|p| p.provider.as_str()).collect();
            writeln!(
                f,
                "USDT/SDT probes: {} site{} (providers: {}; * = {RUNTRACE_PROVIDER})",
                u.probes.len(),
                if u.probes.len() == 1 { "" } else { "s" },
                providers.into_iter().collect::<Vec<_>>().join(", ")
            )?;
            for p in &u.probes {
                let mark = if p.provider == RUNTRACE_PROVIDER {
                    '*'
                } else {
                    ' '
                };
                writeln!(
                    f,
                    "  {mark} {:<32} pc {:>8} (file offset {}, perf 6.1 uses {})",
                    p.event(),
                    hex(p.pc),
                    hex_opt(p.pc_offset),
                    hex(p.perf_pc_offset),
                )?;
                if p.semaphore != 0 {
                    writeln!(
                        f,
                        "      semaphore {} in {} (file offset {}, perf 6.1 uses {}, kernel increments {})",
                        hex(p.semaphore),
                        p.semaphore_section.as_deref().unwrap_or("no section"),
                        hex_opt(p.semaphore_offset),
                        hex_opt(p.perf_semaphore_offset),
                        hex_opt(p.kernel_semaphore_vaddr),
                    )?;
                } else {
                    writeln!(f, "      no semaphore")?;
                }
                writeln!(
                    f,
                    "      args: {}",
                    if p.args.is_empty() { "(none)" } else { &p.args }
                )?;
                for i in &p.issues {
                    writeln!(f, "      ! {i}")?;
                }
            }
        }
        if !u.discarded.is_empty() {
            let sites: Vec<String> = u
                .discarded
                .iter()
                .map(|p| format!("{} (pc {})", p.event(), hex(p.pc)))
                .collect();
            writeln!(
                f,
                "  discarded by the linker with their functions (no code in this binary, never fire; \
                 bpftrace skips them, perf probe adds them at this address): {}",
                sites.join(", ")
            )?;
        }
        list(f, "PROBLEM", &u.problems)?;
        list(f, "warning", &u.warnings)?;
        if !u.probes.is_empty() {
            writeln!(
                f,
                "  USDT verdict: {}",
                if u.is_sound() {
                    "sound (perf 6.1, bpftrace and the kernel's semaphore code get the right offsets)"
                } else {
                    "UNSOUND"
                }
            )?;
        }

        // perf-probe.
        writeln!(f)?;
        let pp = &self.perf_probe;
        writeln!(
            f,
            "perf-probe functions (runtrace_<event>): {} of {} built-in events{}",
            pp.functions.len(),
            BUILTIN_EVENTS.iter().filter(|e| e.has_probe_site()).count(),
            if pp.stripped {
                " (no .symtab: stripped)"
            } else {
                ""
            }
        )?;
        for p in &pp.functions {
            writeln!(
                f,
                "  * {:<28} {:>10} (file offset {}, {}, {} bytes)  5-byte nop at entry: {}",
                p.symbol,
                hex(p.address),
                hex_opt(p.file_offset),
                p.table,
                p.size,
                if p.nop5 { "yes" } else { "NO" }
            )?;
        }
        if !pp.functions.is_empty() && !pp.missing.is_empty() {
            writeln!(f, "  not present: {}", pp.missing.join(", "))?;
        }
        list(f, "PROBLEM", &pp.problems)?;
        list(f, "warning", &pp.warnings)?;

        // LTTng.
        writeln!(f)?;
        let l = &self.lttng;
        writeln!(
            f,
            "LTTng-UST: {} tracepoint{}{}",
            l.tracepoints.len(),
            if l.tracepoints.len() == 1 { "" } else { "s" },
            l.abi.map(|a| format!(" ({a} naming)")).unwrap_or_default()
        )?;
        writeln!(
            f,
            "  DT_NEEDED liblttng-ust: {}",
            if l.needed.is_empty() {
                "no".to_string()
            } else {
                l.needed.join(", ")
            }
        )?;
        writeln!(
            f,
            "  tracepoint pointers section: {}",
            l.ptrs_section
                .as_ref()
                .map(|s| format!("{s} ({} pointers)", l.ptrs))
                .unwrap_or_else(|| "none".into())
        )?;
        if !l.providers_linked.is_empty() {
            writeln!(
                f,
                "  probe providers linked in: {}",
                l.providers_linked.join(", ")
            )?;
        }
        for t in &l.tracepoints {
            let mark = if t.provider == RUNTRACE_PROVIDER {
                '*'
            } else {
                ' '
            };
            writeln!(
                f,
                "  {mark} {:<32} {} {:>10}  registered: {}",
                format!("{}:{}", t.provider, t.name),
                t.symbol,
                hex(t.address),
                match t.registered {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "unknown",
                }
            )?;
        }
        list(f, "PROBLEM", &l.problems)?;
        list(f, "warning", &l.warnings)?;

        // CPU profiles.
        writeln!(f)?;
        let c = &self.cpu_profile;
        writeln!(f, "CPU profiles (frame pointers, symbols, debug info):")?;
        let yes_no = |b: bool| if b { "yes" } else { "NO" };
        if c.functions_checked > 0 {
            writeln!(
                f,
                "  frame pointers: {} ({})",
                c.frame_pointers.map_or("unknown", yes_no),
                c.share_text()
            )?;
        } else {
            writeln!(f, "  frame pointers: unknown (see note)")?;
        }
        writeln!(
            f,
            "  symbol table (.symtab): {}",
            if c.symtab { "yes" } else { "NO (stripped)" }
        )?;
        writeln!(
            f,
            "  build id: {}",
            c.build_id
                .as_deref()
                .unwrap_or("NO (.note.gnu.build-id missing)")
        )?;
        match c.own_debug_units {
            Some(_) if c.debug_units == 0 => writeln!(f, "  debug info of its own: NO (no DWARF)")?,
            Some(own) => writeln!(
                f,
                "  debug info of its own: {} ({own} of {} DWARF compile units; the rest are the Rust toolchain's)",
                yes_no(own > 0),
                c.debug_units
            )?,
            None => writeln!(f, "  debug info of its own: unknown")?,
        }
        if let Some(lto) = c.line_tables_only {
            writeln!(
                f,
                "  function paths in debug info: {}",
                if lto {
                    "NO (line tables only: async bodies are nameless {async_fn#0})"
                } else {
                    "yes"
                }
            )?;
        }
        list(f, "note", &c.notes)?;
        for fix in &c.fix {
            for (i, line) in fix.lines().enumerate() {
                writeln!(f, "  {} {line}", if i == 0 { "fix:" } else { "    " })?;
            }
        }
        writeln!(f, "  CPU profile verdict: {}", c.verdict())?;

        if !self.fix.is_empty() {
            writeln!(f)?;
            writeln!(f, "Fix:")?;
            for fix in &self.fix {
                for (i, line) in fix.lines().enumerate() {
                    writeln!(f, "  {} {line}", if i == 0 { "-" } else { " " })?;
                }
            }
        }
        writeln!(f)?;
        write!(f, "Verdict: {}", self.verdict())
    }
}

/// Runs every check on a loaded image.
pub(crate) fn analyse(path: &Path, img: &Image<'_>) -> Report {
    let segments: Vec<LoadSegment> = img
        .segments
        .iter()
        .map(|s| LoadSegment {
            index: s.index,
            flags: s.flags_str(),
            offset: s.offset,
            vaddr: s.vaddr,
            filesz: s.filesz,
            memsz: s.memsz,
            bias: s.bias(),
        })
        .collect();
    let uniform_bias = segments.windows(2).all(|w| w[0].bias == w[1].bias);
    let mut fix = Vec::new();
    let usdt = usdt::check(img, &mut fix);
    let perf_probe = perf_probe::check(img, &mut fix);
    let lttng = lttng::check(img, &mut fix);
    let cpu_profile = cpu_profile::check(img);
    let mut read_problems = img.read_problems.clone();
    if img.sections.is_empty() {
        read_problems.push(
            "no section headers: SDT notes and symbols cannot be found (perf needs them too)"
                .into(),
        );
    }
    Report {
        binary: path.to_path_buf(),
        format: format!(
            "ELF{} {} {}, {}",
            if img.is64 { 64 } else { 32 },
            if img.little { "LE" } else { "BE" },
            img.machine_name(),
            img.type_name()
        ),
        linker: img.comment.clone(),
        segments,
        uniform_bias,
        read_problems,
        usdt,
        perf_probe,
        lttng,
        cpu_profile,
        fix,
    }
}
