//! `runtrace doctor`: which runtrace probes a binary carries, per backend,
//! and whether the tools that attach to them will actually work.
//!
//! Any file can be given (it is user input): a missing path, a directory, a
//! file that is not ELF or an ELF file cut short each give one clear error
//! naming the path, never a panic.
//!
//! # USDT / SDT (`.note.stapsdt`)
//!
//! Every note (owner `stapsdt`, type 3; desc = pc, base, semaphore, then the
//! NUL-terminated provider, name and argument string) is listed. A tracer
//! turns the probe's virtual address, and its semaphore's, into FILE OFFSETS
//! for the kernel's uprobe (`path:offset(refctr_offset)`). Three things must
//! hold, and the doctor simulates each one rather than guessing from the
//! layout (verified with perf 6.1, bpftrace 0.17 and a 6.18 kernel on
//! binaries linked by GNU ld, LLD 14 and rust-lld 22, see `tests/doctor.rs`):
//!
//! 1. perf 6.1 places the probe at `pc - note.base + .stapsdt.base.sh_offset`
//!    (`sdt_adjust_loc`, tools/perf/util/symbol-elf.c). That is the right
//!    file offset only if the probe's PT_LOAD segment has the same
//!    `p_vaddr - p_offset` as the segment holding `.stapsdt.base` (read-only
//!    data). lld's default layout packs segments in the file while starting
//!    each one on a new page in memory, so `.text` is typically off by
//!    0x1000: the uprobe lands on the wrong byte and never fires.
//! 2. perf 6.1 computes the semaphore's offset relative to the `.probes`
//!    section (`sdt_adjust_refctr`): right as long as the semaphore is in
//!    `.probes`.
//! 3. The kernel then maps that offset back to an address through the FIRST
//!    writable mapping of the file that covers its page (uprobes'
//!    `find_ref_ctr_vma`). With lld's default layout the RELRO segment and
//!    the data segment share one file page, so the kernel increments the
//!    copy 0x1000 below the real semaphore: every guarded probe stays off,
//!    for perf and bpftrace alike, even with a correct offset.
//!
//! All three are fixed by `-z separate-loadable-segments` (lld) or by
//! linking with GNU ld. Semaphores must also sit in a writable, allocated
//! `PROGBITS` section (`.probes`), and all sites of one `provider:name` must
//! share one semaphore.
//!
//! # perf-probe functions
//!
//! `runtrace_<event>` symbols (one per built-in event) in `.symtab` or
//! `.dynsym`, with their address, file offset and whether the body starts
//! with the 5-byte nop `0f 1f 44 00 00` (a uprobe there becomes a cheap call
//! instead of a single-step).
//!
//! # LTTng-UST
//!
//! `DT_NEEDED` entries of liblttng-ust, the tracepoint sections and the
//! tracepoint symbols. LTTng-UST 2.13 names a tracepoint
//! `lttng_ust_tracepoint_<provider>___<event>` (a `struct
//! lttng_ust_tracepoint` in section `lttng_ust_tracepoints`), its pointer
//! `lttng_ust_tracepoint_ptr_<provider>___<event>` (section
//! `lttng_ust_tracepoints_ptrs`, registered by a constructor through
//! `__start_/__stop_lttng_ust_tracepoints_ptrs`) and the provider
//! `lttng_ust_tracepoint_provider_<provider>`; 2.12 and older used
//! `__tracepoint_<provider>___<event>` and `__tracepoints_ptrs`. A tracepoint
//! whose pointer is not in the pointers section is never registered (lld's
//! `--gc-sections` drops the section): the trace is silently empty.
//!
//! ```no_run
//! let report = runtrace_cli::doctor::inspect(std::path::Path::new("target/release/app"))?;
//! println!("{report}");
//! # Ok::<(), runtrace_cli::doctor::DoctorError>(())
//! ```

use crate::DoctorArgs;
use object::elf;
use object::read::elf::{Dyn, FileHeader, NoteIterator, ProgramHeader, Rela, SectionHeader, Sym};
use object::Endianness;
use runtrace_format::schema::BUILTIN_EVENTS;
use serde_json::{json, Value as Json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Page size used to model the kernel's file mappings (4 KiB: x86_64 and
/// most aarch64 kernels).
const PAGE: u64 = 0x1000;

/// The provider the report highlights.
const PROVIDER: &str = "runtrace";

/// `NT_STAPSDT`: the note type of SystemTap SDT v3 probes.
const NT_STAPSDT: u32 = 3;

/// The 5-byte nop a perf-probe function should start with.
const NOP5: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// Why a binary could not be inspected at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorError {
    /// The path as given.
    pub path: PathBuf,
    /// What was wrong with it.
    pub message: String,
}

impl fmt::Display for DoctorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for DoctorError {}

/// Runs `runtrace doctor`: prints the report (text or JSON) and returns 0 if
/// everything found is sound, 1 on any problem or unreadable input.
pub fn run(args: &DoctorArgs) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match inspect(&args.binary) {
        Ok(report) => {
            let text = if args.json {
                report.to_json().to_string()
            } else {
                report.to_string()
            };
            // A closed stdout (`| head`) must not turn into a panic.
            let _ = writeln!(out, "{text}");
            if report.is_sound() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            if args.json {
                let j = json!({
                    "binary": args.binary.display().to_string(),
                    "ok": false,
                    "error": e.message,
                });
                let _ = writeln!(out, "{j}");
            }
            eprintln!("runtrace doctor: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads and inspects the binary at `path`.
pub fn inspect(path: &Path) -> Result<Report, DoctorError> {
    let err = |message: String| DoctorError {
        path: path.to_path_buf(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot open: {e}")))?;
    if meta.is_dir() {
        return Err(err(
            "is a directory, not an executable or shared library".into()
        ));
    }
    if !meta.is_file() {
        return Err(err("is not a regular file (device, FIFO or socket)".into()));
    }
    let data = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
    inspect_bytes(path, &data)
}

/// Inspects an in-memory copy of a binary; `path` is only used in messages.
pub fn inspect_bytes(path: &Path, data: &[u8]) -> Result<Report, DoctorError> {
    let err = |message: String| DoctorError {
        path: path.to_path_buf(),
        message,
    };
    if data.is_empty() {
        return Err(err("empty file, not an ELF binary".into()));
    }
    if !data.starts_with(b"\x7fELF") {
        let kind = if data.starts_with(b"!<arch>\n") {
            " (a static library archive)"
        } else if data.starts_with(b"MZ") {
            " (a PE/Windows file)"
        } else if data.starts_with(b"#!") {
            " (a script)"
        } else {
            ""
        };
        return Err(err(format!(
            "not an ELF file{kind}: no \\x7fELF magic in its first bytes ({} bytes); \
             doctor inspects Linux executables and shared libraries",
            data.len()
        )));
    }
    let image = match data.get(4) {
        Some(1) => load::<elf::FileHeader32<Endianness>>(data),
        Some(2) => load::<elf::FileHeader64<Endianness>>(data),
        _ => Err("damaged ELF header: unknown ELF class (byte 4 is not 1 or 2)".into()),
    }
    .map_err(err)?;
    Ok(analyse(path, &image))
}

// ---------------------------------------------------------------------------
// A plain, owned view of the parts of the ELF file the checks need.

#[derive(Debug, Clone)]
struct Segment {
    /// Index in the program header table.
    index: usize,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
}

impl Segment {
    fn bias(&self) -> i128 {
        i128::from(self.vaddr) - i128::from(self.offset)
    }
    fn contains(&self, vaddr: u64) -> bool {
        vaddr >= self.vaddr && vaddr - self.vaddr < self.memsz.max(self.filesz)
    }
    fn flags_str(&self) -> String {
        format!(
            "{}{}{}",
            if self.flags & elf::PF_R != 0 {
                "R"
            } else {
                "-"
            },
            if self.flags & elf::PF_W != 0 {
                "W"
            } else {
                "-"
            },
            if self.flags & elf::PF_X != 0 {
                "X"
            } else {
                "-"
            },
        )
    }
}

#[derive(Debug, Clone)]
struct Section {
    name: String,
    sh_type: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
}

impl Section {
    fn is_alloc(&self) -> bool {
        self.flags & u64::from(elf::SHF_ALLOC) != 0
    }
    fn is_write(&self) -> bool {
        self.flags & u64::from(elf::SHF_WRITE) != 0
    }
    fn contains(&self, vaddr: u64) -> bool {
        self.is_alloc() && vaddr >= self.addr && vaddr - self.addr < self.size
    }
}

#[derive(Debug, Clone)]
struct Symbol {
    name: String,
    value: u64,
    size: u64,
    kind: u8,
}

#[derive(Debug, Clone)]
struct RawNote {
    owner: Vec<u8>,
    n_type: u32,
    desc: Vec<u8>,
}

/// How a dynamic relocation fills a pointer-sized slot.
#[derive(Debug, Clone, Copy)]
enum Reloc {
    /// Load base + addend: the link-time target is the addend.
    Relative(i64),
    /// Symbol value + addend (symbol from `.dynsym`, 0 if undefined).
    Absolute(u64, i64),
}

#[derive(Debug)]
struct Image<'a> {
    data: &'a [u8],
    is64: bool,
    little: bool,
    machine: u16,
    e_type: u16,
    segments: Vec<Segment>,
    sections: Vec<Section>,
    /// `None` when the file has no `.symtab` (stripped).
    symtab: Option<Vec<Symbol>>,
    dynsym: Vec<Symbol>,
    needed: Vec<String>,
    sdt_notes: Vec<RawNote>,
    /// Problems met while reading optional parts (bad notes, bad symbol
    /// tables); reported, not fatal.
    read_problems: Vec<String>,
    relocs: HashMap<u64, Reloc>,
    comment: Vec<String>,
}

fn load<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<Image<'_>, String> {
    let len = data.len() as u64;
    let header = Elf::parse(data).map_err(|e| {
        format!("damaged ELF header ({e}); the file is {len} bytes: truncated or not an ELF binary")
    })?;
    let endian = header
        .endian()
        .map_err(|e| format!("damaged ELF header: {e}"))?;
    let truncated = |what: &str, end: u64| {
        format!("truncated ELF file: {what} ends at byte {end} but the file is only {len} bytes")
    };

    // Program headers.
    let phoff: u64 = header.e_phoff(endian).into();
    let phnum = u64::from(header.e_phnum(endian));
    let phend = phoff.saturating_add(phnum.saturating_mul(u64::from(header.e_phentsize(endian))));
    if phoff != 0 && phend > len {
        return Err(truncated("the program header table", phend));
    }
    let phdrs = header
        .program_headers(endian, data)
        .map_err(|e| format!("damaged ELF program headers: {e}"))?;
    let mut segments = Vec::new();
    for (index, ph) in phdrs.iter().enumerate() {
        if ph.p_type(endian) != elf::PT_LOAD {
            continue;
        }
        let s = Segment {
            index,
            flags: ph.p_flags(endian),
            offset: ph.p_offset(endian).into(),
            vaddr: ph.p_vaddr(endian).into(),
            filesz: ph.p_filesz(endian).into(),
            memsz: ph.p_memsz(endian).into(),
        };
        let end = s.offset.saturating_add(s.filesz);
        if end > len {
            return Err(truncated(&format!("PT_LOAD segment #{index}"), end));
        }
        segments.push(s);
    }

    // Section headers.
    let shoff: u64 = header.e_shoff(endian).into();
    let shnum = u64::from(header.e_shnum(endian));
    let shend = shoff.saturating_add(shnum.saturating_mul(u64::from(header.e_shentsize(endian))));
    if shoff != 0 && shend > len {
        return Err(truncated("the section header table", shend));
    }
    let table = header
        .sections(endian, data)
        .map_err(|e| format!("damaged ELF section headers: {e}"))?;
    let mut sections = Vec::new();
    for sh in table.iter() {
        let name = table
            .section_name(endian, sh)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_else(|_| "<bad name>".into());
        let s = Section {
            sh_type: sh.sh_type(endian),
            flags: sh.sh_flags(endian).into(),
            addr: sh.sh_addr(endian).into(),
            offset: sh.sh_offset(endian).into(),
            size: sh.sh_size(endian).into(),
            name,
        };
        if s.sh_type != elf::SHT_NOBITS && s.sh_type != elf::SHT_NULL {
            let end = s.offset.saturating_add(s.size);
            if end > len {
                return Err(truncated(&format!("section {}", s.name), end));
            }
        }
        sections.push(s);
    }

    let mut read_problems = Vec::new();
    let mut read_symbols = |sh_type: u32, what: &str| -> Option<Vec<Symbol>> {
        if !table.iter().any(|s| s.sh_type(endian) == sh_type) {
            return None;
        }
        match table.symbols(endian, data, sh_type) {
            Ok(syms) => {
                let strings = syms.strings();
                Some(
                    syms.iter()
                        .filter(|s| s.is_definition(endian) || s.st_type() == elf::STT_OBJECT)
                        .filter(|s| s.st_shndx(endian) != elf::SHN_UNDEF)
                        .filter_map(|s| {
                            let name = s.name(endian, strings).ok()?;
                            Some(Symbol {
                                name: String::from_utf8_lossy(name).into_owned(),
                                value: s.st_value(endian).into(),
                                size: s.st_size(endian).into(),
                                kind: s.st_type(),
                            })
                        })
                        .collect(),
                )
            }
            Err(e) => {
                read_problems.push(format!("cannot read {what}: {e}"));
                Some(Vec::new())
            }
        }
    };
    let symtab = read_symbols(elf::SHT_SYMTAB, ".symtab");
    let dynsym = read_symbols(elf::SHT_DYNSYM, ".dynsym").unwrap_or_default();

    // DT_NEEDED.
    let mut needed = Vec::new();
    match table.dynamic(endian, data) {
        Ok(Some((dyns, link))) => {
            let strings = table.strings(endian, data, link).unwrap_or_default();
            for d in dyns {
                let tag: u64 = d.d_tag(endian).into();
                if tag == u64::from(elf::DT_NEEDED) {
                    if let Ok(s) = d.string(endian, strings) {
                        needed.push(String::from_utf8_lossy(s).into_owned());
                    }
                } else if tag == u64::from(elf::DT_NULL) {
                    break;
                }
            }
        }
        Ok(None) => {}
        Err(e) => read_problems.push(format!("cannot read the dynamic section: {e}")),
    }

    // SDT notes.
    let mut sdt_notes = Vec::new();
    for sh in table.iter() {
        if sh.sh_type(endian) != elf::SHT_NOTE
            || table.section_name(endian, sh).ok() != Some(b".note.stapsdt".as_slice())
        {
            continue;
        }
        let bytes = match sh.data(endian, data) {
            Ok(b) => b,
            Err(e) => {
                read_problems.push(format!(".note.stapsdt: cannot read: {e}"));
                continue;
            }
        };
        let mut notes = match NoteIterator::<Elf>::new(endian, sh.sh_addralign(endian), bytes) {
            Ok(n) => n,
            Err(e) => {
                read_problems.push(format!(".note.stapsdt: {e}"));
                continue;
            }
        };
        loop {
            match notes.next() {
                Ok(Some(n)) => sdt_notes.push(RawNote {
                    owner: n.name().to_vec(),
                    n_type: n.n_type(endian),
                    desc: n.desc().to_vec(),
                }),
                Ok(None) => break,
                Err(e) => {
                    read_problems.push(format!(
                        ".note.stapsdt: damaged note after {} good ones: {e}",
                        sdt_notes.len()
                    ));
                    break;
                }
            }
        }
    }

    // Dynamic relocations (to resolve pointers in PIE / shared objects).
    let machine = header.e_machine(endian);
    let is_mips64el = header.is_mips64el(endian);
    let dynsym_values: Vec<u64> = match table.symbols(endian, data, elf::SHT_DYNSYM) {
        Ok(syms) => syms.iter().map(|s| s.st_value(endian).into()).collect(),
        Err(_) => Vec::new(),
    };
    let (relative, absolute) = match machine {
        elf::EM_X86_64 => (elf::R_X86_64_RELATIVE, elf::R_X86_64_64),
        elf::EM_AARCH64 => (elf::R_AARCH64_RELATIVE, elf::R_AARCH64_ABS64),
        elf::EM_RISCV => (elf::R_RISCV_RELATIVE, elf::R_RISCV_64),
        _ => (u32::MAX, u32::MAX),
    };
    let mut relocs = HashMap::new();
    for sh in table.iter() {
        if let Ok(Some((relas, _))) = sh.rela(endian, data) {
            for r in relas {
                let at: u64 = r.r_offset(endian).into();
                let ty = r.r_type(endian, is_mips64el);
                let addend: i64 = r.r_addend(endian).into();
                if ty == relative {
                    relocs.insert(at, Reloc::Relative(addend));
                } else if ty == absolute {
                    let sym = r.r_sym(endian, is_mips64el) as usize;
                    let value = dynsym_values.get(sym).copied().unwrap_or(0);
                    relocs.insert(at, Reloc::Absolute(value, addend));
                }
            }
        }
    }

    let comment = sections
        .iter()
        .find(|s| s.name == ".comment" && s.sh_type == elf::SHT_PROGBITS)
        .and_then(|s| data.get(s.offset as usize..(s.offset + s.size) as usize))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();

    Ok(Image {
        data,
        is64: header.is_type_64(),
        little: header.is_little_endian(),
        machine,
        e_type: header.e_type(endian),
        segments,
        sections,
        symtab,
        dynsym,
        needed,
        sdt_notes,
        read_problems,
        relocs,
        comment,
    })
}

impl Image<'_> {
    fn word_size(&self) -> usize {
        if self.is64 {
            8
        } else {
            4
        }
    }

    fn word(&self, bytes: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = self.word_size();
        b[..n].copy_from_slice(&bytes[..n]);
        if !self.little {
            b[..n].reverse();
        }
        u64::from_le_bytes(b)
    }

    fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    fn section_at(&self, vaddr: u64) -> Option<&Section> {
        // Prefer a section with a size over zero-sized markers.
        self.sections.iter().find(|s| s.contains(vaddr))
    }

    fn segment_at(&self, vaddr: u64) -> Option<&Segment> {
        self.segments.iter().find(|s| s.contains(vaddr))
    }

    /// The correct file offset of `vaddr` (through its PT_LOAD segment), or
    /// `None` if no segment maps it from the file (not loaded, or in .bss).
    fn file_offset(&self, vaddr: u64) -> Option<(u64, &Segment)> {
        let seg = self.segment_at(vaddr)?;
        let delta = vaddr - seg.vaddr;
        (delta < seg.filesz).then_some((seg.offset + delta, seg))
    }

    /// Reads `len` bytes at virtual address `vaddr` from the file.
    fn bytes_at(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let (off, seg) = self.file_offset(vaddr)?;
        if vaddr - seg.vaddr + len as u64 > seg.filesz {
            return None;
        }
        self.data.get(off as usize..off as usize + len)
    }

    /// The link-time value of the pointer stored at `vaddr`, applying a
    /// dynamic relocation if one targets it.
    fn pointer_at(&self, vaddr: u64) -> Option<u64> {
        match self.relocs.get(&vaddr) {
            Some(Reloc::Relative(a)) => Some(*a as u64),
            Some(Reloc::Absolute(v, a)) => Some(v.wrapping_add(*a as u64)),
            None => self.bytes_at(vaddr, self.word_size()).map(|b| self.word(b)),
        }
    }

    /// The address the kernel's uprobe code increments for a semaphore at
    /// file offset `off`: the first writable mapping of the file (lowest
    /// address) whose pages cover `off`, as `find_ref_ctr_vma` does.
    fn kernel_refctr_vaddr(&self, off: u64) -> Option<(u64, &Segment)> {
        let mut writable: Vec<&Segment> = self
            .segments
            .iter()
            .filter(|s| s.flags & elf::PF_W != 0 && s.filesz > 0)
            .collect();
        writable.sort_by_key(|s| s.vaddr);
        writable.into_iter().find_map(|s| {
            let start = s.offset & !(PAGE - 1);
            let end = (s.offset + s.filesz).div_ceil(PAGE) * PAGE;
            (off >= start && off < end)
                .then(|| (s.vaddr.wrapping_add(off.wrapping_sub(s.offset)), s))
        })
    }

    fn machine_name(&self) -> &'static str {
        match self.machine {
            elf::EM_X86_64 => "x86_64",
            elf::EM_386 => "i386",
            elf::EM_AARCH64 => "aarch64",
            elf::EM_ARM => "arm",
            elf::EM_RISCV => "riscv",
            elf::EM_PPC64 => "ppc64",
            elf::EM_S390 => "s390",
            _ => "unknown machine",
        }
    }

    fn rust_target(&self) -> &'static str {
        match self.machine {
            elf::EM_AARCH64 => "aarch64-unknown-linux-gnu",
            elf::EM_RISCV => "riscv64gc-unknown-linux-gnu",
            _ => "x86_64-unknown-linux-gnu",
        }
    }

    fn type_name(&self) -> &'static str {
        match self.e_type {
            elf::ET_EXEC => "executable (ET_EXEC)",
            elf::ET_DYN => "PIE or shared object (ET_DYN)",
            elf::ET_REL => "relocatable object (ET_REL)",
            elf::ET_CORE => "core dump (ET_CORE)",
            _ => "unknown ELF type",
        }
    }

    /// Symbols from `.symtab` and `.dynsym`, each name once (`.symtab` wins).
    fn all_symbols(&self) -> Vec<(&Symbol, &'static str)> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let tables = [
            (self.symtab.as_deref().unwrap_or(&[]), "symtab"),
            (self.dynsym.as_slice(), "dynsym"),
        ];
        for (table, label) in tables {
            for s in table {
                if seen.insert((s.name.as_str(), s.value)) {
                    out.push((s, label));
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------
// The report.

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
    /// Every probe site, in note order.
    pub probes: Vec<SdtProbe>,
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

/// Everything `runtrace doctor` found in one binary.
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
        self.usdt.probes.iter().any(|p| p.provider == PROVIDER)
            || !self.perf_probe.functions.is_empty()
            || self
                .lttng
                .tracepoints
                .iter()
                .any(|t| t.provider == PROVIDER)
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
                    "runtrace": p.provider == PROVIDER,
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
                    "runtrace": t.provider == PROVIDER,
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
        })
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn hex_opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), hex)
}

fn signed_hex(v: i128) -> String {
    if v < 0 {
        format!("-{:#x}", -v)
    } else {
        format!("{v:#x}")
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
            writeln!(f, "USDT/SDT probes: none (no .note.stapsdt notes)")?;
        } else {
            let providers: BTreeSet<&str> = u.probes.iter().map(|p| p.provider.as_str()).collect();
            writeln!(
                f,
                "USDT/SDT probes: {} site{} (providers: {}; * = {PROVIDER})",
                u.probes.len(),
                if u.probes.len() == 1 { "" } else { "s" },
                providers.into_iter().collect::<Vec<_>>().join(", ")
            )?;
            for p in &u.probes {
                let mark = if p.provider == PROVIDER { '*' } else { ' ' };
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
            BUILTIN_EVENTS.len(),
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
            let mark = if t.provider == PROVIDER { '*' } else { ' ' };
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

// ---------------------------------------------------------------------------
// The checks.

fn analyse(path: &Path, img: &Image<'_>) -> Report {
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
    let usdt = check_usdt(img, &mut fix);
    let perf_probe = check_perf_probe(img, &mut fix);
    let lttng = check_lttng(img, &mut fix);
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
        fix,
    }
}

fn push_fix(fix: &mut Vec<String>, text: String) {
    if !fix.contains(&text) {
        fix.push(text);
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

fn check_usdt(img: &Image<'_>, fix: &mut Vec<String>) -> UsdtReport {
    let mut r = UsdtReport::default();
    let base_sec = img.section(".stapsdt.base");
    let probes_sec = img.section(".probes");
    r.base_section = base_sec.map(|s| s.addr);
    let mut malformed = 0usize;
    let mut other_types = BTreeSet::new();
    for note in &img.sdt_notes {
        if note.owner != b"stapsdt" {
            continue;
        }
        if note.n_type != NT_STAPSDT {
            other_types.insert(note.n_type);
            continue;
        }
        let Some((pc, base, semaphore, provider, name, args)) = parse_sdt_desc(img, &note.desc)
        else {
            malformed += 1;
            continue;
        };
        // perf 6.1, sdt_adjust_loc: only when .stapsdt.base has a non-zero
        // file offset; the address is used as an offset otherwise.
        let perf_pc_offset = match base_sec {
            Some(s) if s.offset != 0 => pc.wrapping_add(s.offset).wrapping_sub(base),
            _ => pc,
        };
        let mut issues = Vec::new();
        let pc_offset = match img.file_offset(pc) {
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
        };
        let mut semaphore_section = None;
        let mut semaphore_offset = None;
        let mut perf_semaphore_offset = None;
        let mut kernel_semaphore_vaddr = None;
        if semaphore != 0 {
            match img.section_at(semaphore) {
                Some(s) => {
                    semaphore_section = Some(s.name.clone());
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
                }
                None => issues.push(format!(
                    "semaphore {} is not inside any allocated section",
                    hex(semaphore)
                )),
            }
            // perf 6.1, sdt_adjust_refctr: relative to the .probes section.
            perf_semaphore_offset = Some(match probes_sec {
                Some(s) if s.offset != 0 => semaphore.wrapping_sub(s.addr.wrapping_sub(s.offset)),
                _ => semaphore,
            });
            match img.file_offset(semaphore) {
                Some((off, seg)) => {
                    semaphore_offset = Some(off);
                    if seg.flags & elf::PF_W == 0 {
                        issues.push(format!(
                            "semaphore {} is in PT_LOAD #{} which is not writable",
                            hex(semaphore),
                            seg.index
                        ));
                    }
                    if perf_semaphore_offset != Some(off) {
                        issues.push(format!(
                            "perf 6.1 passes semaphore offset {} but the semaphore is at file offset {}",
                            hex_opt(perf_semaphore_offset),
                            hex(off)
                        ));
                    }
                    match img.kernel_refctr_vaddr(off) {
                        Some((v, kseg)) => {
                            kernel_semaphore_vaddr = Some(v);
                            if v != semaphore {
                                issues.push(format!(
                                    "the kernel increments {} (PT_LOAD #{} maps the same file page first), not the semaphore at {}: guarded probes stay off",
                                    hex(v),
                                    kseg.index,
                                    hex(semaphore)
                                ));
                            }
                        }
                        None => issues.push(format!(
                            "no writable mapping covers the semaphore's file offset {}: the kernel cannot increment it",
                            hex(off)
                        )),
                    }
                }
                // Already reported when the section is NOBITS.
                None if semaphore_section.is_some()
                    && img
                        .section_at(semaphore)
                        .is_some_and(|s| s.sh_type == elf::SHT_NOBITS) => {}
                None => issues.push(format!(
                    "semaphore {} has no file offset (not in a PT_LOAD's file data): the kernel cannot increment it",
                    hex(semaphore)
                )),
            }
        }
        r.probes.push(SdtProbe {
            provider,
            name,
            pc,
            base,
            semaphore,
            args,
            pc_offset,
            perf_pc_offset,
            semaphore_section,
            semaphore_offset,
            perf_semaphore_offset,
            kernel_semaphore_vaddr,
            issues,
        });
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
    if r.probes.is_empty() {
        return r;
    }

    // (a) .stapsdt.base.
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

    // (b) Offsets, aggregated over sites.
    let perf_pc_bad: Vec<&SdtProbe> = r
        .probes
        .iter()
        .filter(|p| p.pc_offset.is_some_and(|o| o != p.perf_pc_offset))
        .collect();
    if let Some(first) = perf_pc_bad.first() {
        let base_seg = match base_sec {
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
            None => "without .stapsdt.base perf takes the addresses as file offsets (vaddr - offset 0x0)"
                .into(),
        };
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
        r.problems.push(format!(
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
        ));
        push_fix(fix, layout_fix(img));
    }
    let sem_kernel_bad: Vec<&SdtProbe> = r
        .probes
        .iter()
        .filter(|p| p.semaphore != 0)
        .filter(|p| p.kernel_semaphore_vaddr.is_some_and(|v| v != p.semaphore))
        .collect();
    if let Some(first) = sem_kernel_bad.first() {
        let n: BTreeSet<u64> = sem_kernel_bad.iter().map(|p| p.semaphore).collect();
        r.problems.push(format!(
            "the kernel increments the wrong copy of {} semaphore{} (e.g. {}: semaphore {}, kernel writes {}): \
             an earlier writable segment maps the same file page, so semaphore-guarded probes never turn on \
             (perf, bpftrace and any other uprobe user alike)",
            n.len(),
            if n.len() == 1 { "" } else { "s" },
            first.event(),
            hex(first.semaphore),
            hex_opt(first.kernel_semaphore_vaddr),
        ));
        push_fix(fix, layout_fix(img));
    }
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
        push_fix(
            fix,
            "Put every SDT semaphore in one writable PROGBITS section named .probes \
             (Rust: #[link_section = \".probes\"] on a `static mut u16`; C: __attribute__((section(\".probes\"))))."
                .into(),
        );
    }
    // Placement problems not covered above (bad section, no file offset,
    // non-executable pc).
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
            push_fix(
                fix,
                "Put every SDT semaphore in one writable PROGBITS section named .probes \
                 (Rust: #[link_section = \".probes\"] on a `static mut u16`; C: __attribute__((section(\".probes\"))))."
                    .into(),
            );
        }
    }

    // Semaphores per event: all sites of one event share one semaphore.
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
    if let Some(s) = probes_sec {
        if !s.is_write() || s.sh_type != elf::SHT_PROGBITS {
            r.problems.push(
                ".probes is not a writable PROGBITS section: the kernel cannot increment semaphores in it"
                    .into(),
            );
        }
    }
    r
}

fn check_perf_probe(img: &Image<'_>, fix: &mut Vec<String>) -> PerfProbeReport {
    let mut r = PerfProbeReport {
        stripped: img.symtab.is_none(),
        ..Default::default()
    };
    let symbols = img.all_symbols();
    let mut mangled = Vec::new();
    for e in BUILTIN_EVENTS {
        let want = format!("runtrace_{}", e.name);
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

/// Splits `<provider>___<event>`.
fn split_tracepoint(rest: &str) -> Option<(String, String)> {
    let (p, e) = rest.split_once("___")?;
    (!p.is_empty() && !e.is_empty()).then(|| (p.to_string(), e.to_string()))
}

fn check_lttng(img: &Image<'_>, fix: &mut Vec<String>) -> LttngReport {
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
        if let Some(p) = s.name.strip_prefix("lttng_ust_tracepoint_provider_") {
            if !r.providers_linked.iter().any(|x| x == p) {
                r.providers_linked.push(p.to_string());
            }
            continue;
        }
        let (rest, version) = if let Some(rest) = s.name.strip_prefix("lttng_ust_tracepoint_") {
            (rest, "2.13")
        } else if let Some(rest) = s.name.strip_prefix("__tracepoint_") {
            (rest, "2.12")
        } else {
            continue;
        };
        if rest.starts_with("ptr_") || s.kind == elf::STT_FUNC {
            continue;
        }
        let Some((provider, name)) = split_tracepoint(rest) else {
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
    let ptrs = ["lttng_ust_tracepoints_ptrs", "__tracepoints_ptrs"]
        .iter()
        .find_map(|n| img.section(n));
    r.abi = if abi.contains("2.13") {
        Some("2.13")
    } else if abi.contains("2.12") {
        Some("2.12")
    } else {
        match ptrs.map(|s| s.name.as_str()) {
            Some("lttng_ust_tracepoints_ptrs") => Some("2.13"),
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
    let runtrace_tps = r.tracepoints.iter().any(|t| t.provider == PROVIDER);
    if runtrace_tps && !r.providers_linked.iter().any(|p| p == PROVIDER) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_non_elf() {
        let e = inspect_bytes(Path::new("x.txt"), b"hello world\n").unwrap_err();
        assert!(e.to_string().starts_with("x.txt: not an ELF file"), "{e}");
        let e = inspect_bytes(Path::new("e"), b"").unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
    }

    #[test]
    fn truncated_headers_never_panic() {
        let mut h = b"\x7fELF\x02\x01\x01".to_vec();
        for n in 0..80 {
            h.push(n as u8);
            let _ = inspect_bytes(Path::new("t"), &h);
        }
        let e = inspect_bytes(Path::new("t"), b"\x7fELF\x02\x01\x01").unwrap_err();
        assert!(e.message.contains("truncated"), "{e}");
    }

    /// Corrupts header bytes of a real ELF file (this test binary) at
    /// pseudo-random places: every result is a report or an error, never a
    /// panic or an overflow.
    #[test]
    fn corrupted_headers_never_panic() {
        let elf = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(inspect_bytes(Path::new("self"), &elf).is_ok());
        let shoff = u64::from_le_bytes(elf[0x28..0x30].try_into().unwrap()) as usize;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..40 {
            let mut bad = elf.clone();
            for _ in 0..8 {
                // Program headers (start of file) or section headers (end).
                let at = if next() % 2 == 0 {
                    (next() % 0x400) as usize
                } else {
                    shoff + (next() % (elf.len() - shoff) as u64) as usize
                };
                bad[at] = next() as u8;
            }
            let _ = inspect_bytes(Path::new("bad"), &bad);
        }
    }

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
