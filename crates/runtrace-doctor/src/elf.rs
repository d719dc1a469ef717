//! A plain, owned view of the parts of an ELF file the checks need:
//! segments, sections, symbols, `DT_NEEDED`, SDT notes, dynamic
//! relocations and `.comment`, loaded with the `object` crate. Reading
//! never panics: a damaged header is an error, a damaged optional part a
//! `read_problems` entry.

use object::elf;
use object::read::elf::{Dyn, FileHeader, NoteIterator, ProgramHeader, Rela, SectionHeader, Sym};
use object::Endianness;
use runtrace_build::symbols::SDT_NOTE_SECTION;
use std::collections::{BTreeSet, HashMap};

/// Page size used to model the kernel's file mappings (4 KiB: x86_64 and
/// most aarch64 kernels).
const PAGE: u64 = 0x1000;

#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// Index in the program header table.
    pub(crate) index: usize,
    pub(crate) flags: u32,
    pub(crate) offset: u64,
    pub(crate) vaddr: u64,
    pub(crate) filesz: u64,
    pub(crate) memsz: u64,
}

impl Segment {
    pub(crate) fn bias(&self) -> i128 {
        i128::from(self.vaddr) - i128::from(self.offset)
    }
    pub(crate) fn contains(&self, vaddr: u64) -> bool {
        vaddr >= self.vaddr && vaddr - self.vaddr < self.memsz.max(self.filesz)
    }
    pub(crate) fn flags_str(&self) -> String {
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
pub(crate) struct Section {
    pub(crate) name: String,
    pub(crate) sh_type: u32,
    pub(crate) flags: u64,
    pub(crate) addr: u64,
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

impl Section {
    pub(crate) fn is_alloc(&self) -> bool {
        self.flags & u64::from(elf::SHF_ALLOC) != 0
    }
    pub(crate) fn is_write(&self) -> bool {
        self.flags & u64::from(elf::SHF_WRITE) != 0
    }
    pub(crate) fn contains(&self, vaddr: u64) -> bool {
        self.is_alloc() && vaddr >= self.addr && vaddr - self.addr < self.size
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Symbol {
    pub(crate) name: String,
    pub(crate) value: u64,
    pub(crate) size: u64,
    pub(crate) kind: u8,
}

#[derive(Debug, Clone)]
pub(crate) struct RawNote {
    pub(crate) owner: Vec<u8>,
    pub(crate) n_type: u32,
    pub(crate) desc: Vec<u8>,
}

/// How a dynamic relocation fills a pointer-sized slot.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reloc {
    /// Load base + addend: the link-time target is the addend.
    Relative(i64),
    /// Symbol value + addend (symbol from `.dynsym`, 0 if undefined).
    Absolute(u64, i64),
}

#[derive(Debug)]
pub(crate) struct Image<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) is64: bool,
    pub(crate) little: bool,
    pub(crate) machine: u16,
    pub(crate) e_type: u16,
    pub(crate) segments: Vec<Segment>,
    pub(crate) sections: Vec<Section>,
    /// `None` when the file has no `.symtab` (stripped).
    pub(crate) symtab: Option<Vec<Symbol>>,
    pub(crate) dynsym: Vec<Symbol>,
    pub(crate) needed: Vec<String>,
    pub(crate) sdt_notes: Vec<RawNote>,
    /// Problems met while reading optional parts (bad notes, bad symbol
    /// tables); reported, not fatal.
    pub(crate) read_problems: Vec<String>,
    pub(crate) relocs: HashMap<u64, Reloc>,
    pub(crate) comment: Vec<String>,
}

pub(crate) fn load<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<Image<'_>, String> {
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
            || table.section_name(endian, sh).ok() != Some(SDT_NOTE_SECTION.as_bytes())
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
    pub(crate) fn word_size(&self) -> usize {
        if self.is64 {
            8
        } else {
            4
        }
    }

    pub(crate) fn word(&self, bytes: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = self.word_size();
        b[..n].copy_from_slice(&bytes[..n]);
        if !self.little {
            b[..n].reverse();
        }
        u64::from_le_bytes(b)
    }

    pub(crate) fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    pub(crate) fn section_at(&self, vaddr: u64) -> Option<&Section> {
        // Prefer a section with a size over zero-sized markers.
        self.sections.iter().find(|s| s.contains(vaddr))
    }

    pub(crate) fn segment_at(&self, vaddr: u64) -> Option<&Segment> {
        self.segments.iter().find(|s| s.contains(vaddr))
    }

    /// The correct file offset of `vaddr` (through its PT_LOAD segment), or
    /// `None` if no segment maps it from the file (not loaded, or in .bss).
    pub(crate) fn file_offset(&self, vaddr: u64) -> Option<(u64, &Segment)> {
        let seg = self.segment_at(vaddr)?;
        let delta = vaddr - seg.vaddr;
        (delta < seg.filesz).then_some((seg.offset + delta, seg))
    }

    /// Reads `len` bytes at virtual address `vaddr` from the file.
    pub(crate) fn bytes_at(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let (off, seg) = self.file_offset(vaddr)?;
        if vaddr - seg.vaddr + len as u64 > seg.filesz {
            return None;
        }
        self.data.get(off as usize..off as usize + len)
    }

    /// The link-time value of the pointer stored at `vaddr`, applying a
    /// dynamic relocation if one targets it.
    pub(crate) fn pointer_at(&self, vaddr: u64) -> Option<u64> {
        match self.relocs.get(&vaddr) {
            Some(Reloc::Relative(a)) => Some(*a as u64),
            Some(Reloc::Absolute(v, a)) => Some(v.wrapping_add(*a as u64)),
            None => self.bytes_at(vaddr, self.word_size()).map(|b| self.word(b)),
        }
    }

    /// The address the kernel's uprobe code increments for a semaphore at
    /// file offset `off`: the first writable mapping of the file (lowest
    /// address) whose pages cover `off`, as `find_ref_ctr_vma` does.
    pub(crate) fn kernel_refctr_vaddr(&self, off: u64) -> Option<(u64, &Segment)> {
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

    pub(crate) fn machine_name(&self) -> &'static str {
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

    pub(crate) fn rust_target(&self) -> &'static str {
        match self.machine {
            elf::EM_AARCH64 => "aarch64-unknown-linux-gnu",
            elf::EM_RISCV => "riscv64gc-unknown-linux-gnu",
            _ => "x86_64-unknown-linux-gnu",
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match self.e_type {
            elf::ET_EXEC => "executable (ET_EXEC)",
            elf::ET_DYN => "PIE or shared object (ET_DYN)",
            elf::ET_REL => "relocatable object (ET_REL)",
            elf::ET_CORE => "core dump (ET_CORE)",
            _ => "unknown ELF type",
        }
    }

    /// Symbols from `.symtab` and `.dynsym`, each name once (`.symtab` wins).
    pub(crate) fn all_symbols(&self) -> Vec<(&Symbol, &'static str)> {
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
