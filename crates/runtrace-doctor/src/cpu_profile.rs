//! CPU-profile readiness: whether stacks sampled in this binary can be
//! walked (frame pointers) and named (symbol table, debug info).
//!
//! Frame pointers leave no flag in an ELF file, so the check looks at the
//! code: the share of functions (in `.symtab`, at least
//! [`MIN_FUNCTION_SIZE`] bytes) that start with `push %rbp` and set
//! `mov %rsp,%rbp` within the next few instructions (after an optional
//! `endbr64` or 5-byte nop). Functions of the Rust standard library are left out:
//! they come precompiled with the toolchain, whatever the program's own
//! flags (rustup's 1.95 std has frame pointers: 395 of 514 such functions
//! in a small program), and make up most of a small binary. Debug info is judged the same way: the DWARF compile units
//! of the program itself, not the ones the standard library brings along.

use crate::elf::{Image, Section};
use crate::fix::push_fix;
use gimli::{EndianSlice, RunTimeEndian};
use object::elf;

/// Functions smaller than this are not counted: stubs and thunks have no
/// frame in any build.
pub const MIN_FUNCTION_SIZE: u64 = 16;

/// At or above this share of checked functions with a frame-pointer
/// prologue, the binary counts as built with frame pointers. The two
/// cases are far apart: `tests/cpu_profile.rs`'s Rust program at
/// opt-level 2 has 0 of 15 without `-C force-frame-pointers=yes`, 14 of 15
/// with it; its C program (gcc -O2) 0 of 4 without
/// `-fno-omit-frame-pointer`, 3 of 4 with it (a leaf function keeps none).
pub const FRAME_POINTER_SHARE: f64 = 0.5;

/// Crates of the Rust toolchain's precompiled standard library (and the
/// crates it links in), whose functions are not the program's.
const SYSROOT_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "compiler_builtins",
    "panic_unwind",
    "panic_abort",
    "unwind",
    "std_detect",
    "rustc_demangle",
    "addr2line",
    "gimli",
    "object",
    "miniz_oxide",
    "adler2",
    "hashbrown",
    "memchr",
    "cfg_if",
    "libc",
    "__rustc",
    "rustc_std_workspace_core",
    "rustc_std_workspace_alloc",
];

/// The CPU-profile part of the report.
#[derive(Debug, Clone, Default)]
pub struct CpuProfileReport {
    /// Functions whose prologue was checked (x86-64, `.symtab`, at least
    /// [`MIN_FUNCTION_SIZE`] bytes, outside the standard library).
    pub functions_checked: usize,
    /// Of those, the ones starting with `push %rbp; mov %rsp,%rbp`.
    pub with_frame_pointer: usize,
    /// Built with frame pointers; `None` when it cannot tell (why is in
    /// `notes`).
    pub frame_pointers: Option<bool>,
    /// Has a `.symtab` (function names beyond the exported ones).
    pub symtab: bool,
    /// The GNU build id (hex), which the recorder writes into `MAPPINGS`
    /// so that the symbolizer can tell the right build of the binary from
    /// another one; `None`: the file has no `.note.gnu.build-id`.
    pub build_id: Option<String>,
    /// DWARF compile units in the file.
    pub debug_units: usize,
    /// Of those, the program's own (not the Rust toolchain's); `None` when
    /// the DWARF could not be read.
    pub own_debug_units: Option<usize>,
    /// The program's own Rust debug info is line tables only
    /// (`debug = "line-tables-only"`): its functions have names but no
    /// paths (no namespaces, no linkage names), so an inlined async body
    /// is a bare `{async_fn#0}` in profiles. `None`: no Rust functions of
    /// its own in the DWARF to tell by.
    pub line_tables_only: Option<bool>,
    /// Why something could not be told.
    pub notes: Vec<String>,
    /// Exact fixes, one per missing piece.
    pub fix: Vec<String>,
}

impl CpuProfileReport {
    /// Stacks of this binary can be walked and named with file:line.
    pub fn is_ready(&self) -> bool {
        self.frame_pointers == Some(true) && self.symtab && self.own_debug_units.unwrap_or(0) > 0
    }

    /// The one-line verdict of this part.
    pub fn verdict(&self) -> String {
        if self.is_ready() && self.build_id.is_some() {
            return "ready: frame pointers, symbols and debug info".into();
        }
        if self.is_ready() {
            return "ready: frame pointers, symbols and debug info; but no build id, so a copy \
                    of the binary on another machine cannot be verified"
                .into();
        }
        let mut missing = Vec::new();
        match self.frame_pointers {
            Some(false) => missing.push("no frame pointers (stacks are cut short)"),
            None => missing.push("frame pointers unknown"),
            Some(true) => {}
        }
        if !self.symtab {
            missing.push("no symbol table (functions show as [unknown])");
        }
        if self.own_debug_units.unwrap_or(0) == 0 {
            missing.push("no debug info of its own (no file:line, no inlined frames)");
        }
        format!("NOT READY: {}", missing.join("; "))
    }

    /// The share of checked functions with a frame-pointer prologue, as
    /// the report prints it.
    pub fn share_text(&self) -> String {
        format!(
            "{} of {} functions ({}+ bytes, outside the Rust standard library) set up a frame \
             pointer at entry (push %rbp ... mov %rsp,%rbp)",
            self.with_frame_pointer, self.functions_checked, MIN_FUNCTION_SIZE
        )
    }
}

/// The crate a Rust symbol's code belongs to: for the v0 mangling the
/// last crate root in it (a generic function's instantiating crate, else
/// its own), for the legacy mangling the first path component. `None` for
/// an unmangled (C) name.
fn rust_crate(symbol: &str) -> Option<&str> {
    if let Some(rest) = symbol.strip_prefix("_ZN") {
        return length_prefixed(rest.as_bytes()).map(|(name, _)| name);
    }
    let rest = symbol.strip_prefix("_R")?.as_bytes();
    let mut last = None;
    let mut i = 0;
    while i < rest.len() {
        if rest[i] == b'C' {
            // C [s <base62> _] <decimal length> [_] <identifier>
            let mut j = i + 1;
            if rest.get(j) == Some(&b's') {
                j += 1;
                while rest.get(j).is_some_and(u8::is_ascii_alphanumeric) {
                    j += 1;
                }
                if rest.get(j) != Some(&b'_') {
                    i += 1;
                    continue;
                }
                j += 1;
            }
            if let Some((name, end)) = length_prefixed(&rest[j..]) {
                last = Some(name);
                i = j + end;
                continue;
            }
        }
        i += 1;
    }
    last
}

/// `<decimal length>[_]<identifier>` at the start of `s`: the identifier
/// and the index just past it.
fn length_prefixed(s: &[u8]) -> Option<(&str, usize)> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let len: usize = std::str::from_utf8(&s[..digits]).ok()?.parse().ok()?;
    let mut start = digits;
    if s.get(start) == Some(&b'_') {
        start += 1;
    }
    let name = std::str::from_utf8(s.get(start..start + len)?).ok()?;
    Some((name, start + len))
}

/// Code of the Rust standard library (or of its unmangled runtime hooks)
/// or of the C runtime's start-up files.
fn is_sysroot(symbol: &str) -> bool {
    match rust_crate(symbol) {
        Some(c) => SYSROOT_CRATES.contains(&c),
        None => {
            symbol.starts_with("rust_")
                || symbol.starts_with("__rust_")
                || CRT_FUNCTIONS.contains(&symbol)
        }
    }
}

/// Bytes of a function's start that are read: `push %rbp` comes first,
/// but compilers may schedule a few instructions before the `mov`.
const PROLOGUE_BYTES: usize = 24;

/// `push %rbp` at the start of `code` (after an optional `endbr64` (CET)
/// and an optional 5-byte nop (patchable entry)), then `mov %rsp,%rbp`
/// among the next bytes (gcc -O2 may put an instruction in between).
fn has_frame_pointer_prologue(code: &[u8]) -> bool {
    let mut c = code;
    for prefix in [
        &[0xf3, 0x0f, 0x1e, 0xfa][..],
        &[0x0f, 0x1f, 0x44, 0x00, 0x00][..],
    ] {
        if let Some(rest) = c.strip_prefix(prefix) {
            c = rest;
        }
    }
    let Some(rest) = c.strip_prefix(&[0x55]) else {
        return false;
    };
    let movs: [&[u8]; 2] = [&[0x48, 0x89, 0xe5], &[0x48, 0x8b, 0xec]];
    rest.windows(3).take(12).any(|w| movs.contains(&w))
}

/// Start-up code the C runtime links into every executable (crt1.o,
/// crti.o, crtbegin.o), built without frame pointers whatever the
/// program's flags.
const CRT_FUNCTIONS: &[&str] = &[
    "_start",
    "_init",
    "_fini",
    "deregister_tm_clones",
    "register_tm_clones",
    "__do_global_dtors_aux",
    "frame_dummy",
    "__libc_csu_init",
    "__libc_csu_fini",
];

/// The DWARF compile units: (all, the program's own). A unit is the Rust
/// toolchain's when its compilation directory is the one rustup's
/// standard library was built in (`/rustc/<commit>` or `/rust/deps/…`).
fn debug_units(img: &Image<'_>) -> Result<DebugUnits, String> {
    let endian = if img.little {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let section = |name: &str| -> Result<EndianSlice<'_, RunTimeEndian>, String> {
        let bytes = match img.section(name) {
            Some(s) if s.sh_type != elf::SHT_NOBITS => {
                if s.flags & u64::from(elf::SHF_COMPRESSED) != 0 {
                    return Err(format!("{name} is compressed (not inspected)"));
                }
                section_bytes(img, s)
            }
            _ => &[],
        };
        Ok(EndianSlice::new(bytes, endian))
    };
    let dwarf = gimli::Dwarf::load(|id| section(id.name()))?;
    let mut d = DebugUnits::default();
    let mut units = dwarf.units();
    while let Some(header) = units
        .next()
        .map_err(|e| format!("damaged .debug_info: {e}"))?
    {
        d.all += 1;
        let unit = dwarf
            .unit(header)
            .map_err(|e| format!("damaged .debug_info unit: {e}"))?;
        let dir = unit.comp_dir.map(|d| d.to_string_lossy().into_owned());
        let toolchain = dir
            .as_deref()
            .is_some_and(|d| d.starts_with("/rustc/") || d.starts_with("/rust/deps/"));
        if toolchain {
            continue;
        }
        d.own += 1;
        match rust_unit_paths(&unit) {
            Ok(Some(true)) => d.rust_with_paths += 1,
            Ok(Some(false)) => d.rust_line_tables += 1,
            Ok(None) => {}
            Err(e) => return Err(format!("damaged .debug_info unit: {e}")),
        }
    }
    Ok(d)
}

/// What [`debug_units`] counts.
#[derive(Default)]
struct DebugUnits {
    all: usize,
    /// The program's own.
    own: usize,
    /// Of those, Rust units whose functions have paths (namespaces or
    /// linkage names: `debug = "limited"` or more).
    rust_with_paths: usize,
    /// ... and Rust units whose functions have bare names only (line
    /// tables only).
    rust_line_tables: usize,
}

/// Whether a Rust compile unit's functions carry their paths (a
/// `DW_TAG_namespace` or a `DW_AT_linkage_name`, which rustc emits from
/// `debuginfo=1` on and not with line tables only); `None` for a unit of
/// another language, or with no functions.
fn rust_unit_paths<R: gimli::Reader>(unit: &gimli::Unit<R>) -> gimli::Result<Option<bool>> {
    let mut entries = unit.entries();
    let mut rust = false;
    let mut functions = false;
    while let Some(e) = entries.next_dfs()? {
        match e.tag() {
            gimli::DW_TAG_compile_unit => {
                rust = matches!(
                    e.attr_value(gimli::DW_AT_language),
                    Some(gimli::AttributeValue::Language(gimli::DW_LANG_Rust))
                );
                if !rust {
                    return Ok(None);
                }
            }
            gimli::DW_TAG_namespace => return Ok(Some(true)),
            gimli::DW_TAG_subprogram => {
                if e.attr_value(gimli::DW_AT_linkage_name).is_some() {
                    return Ok(Some(true));
                }
                functions = true;
            }
            _ => {}
        }
    }
    Ok((rust && functions).then_some(false))
}

/// The descriptor of the `.note.gnu.build-id` note (owner `GNU`, type 3),
/// in hex.
fn build_id(img: &Image<'_>) -> Option<String> {
    let note = section_bytes(img, img.section(".note.gnu.build-id")?);
    let word = |at: usize| -> Option<usize> {
        let b: [u8; 4] = note.get(at..at + 4)?.try_into().ok()?;
        let v = if img.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        };
        usize::try_from(v).ok()
    };
    let (namesz, descsz, kind) = (word(0)?, word(4)?, word(8)?);
    let desc_at = 12 + namesz.div_ceil(4) * 4;
    let name = note.get(12..12 + namesz)?;
    if kind != 3 || name != b"GNU\0" || descsz == 0 {
        return None;
    }
    let desc = note.get(desc_at..desc_at.checked_add(descsz)?)?;
    Some(desc.iter().map(|b| format!("{b:02x}")).collect())
}

fn section_bytes<'a>(img: &Image<'a>, s: &Section) -> &'a [u8] {
    let data = img.data;
    usize::try_from(s.offset)
        .ok()
        .zip(usize::try_from(s.size).ok())
        .and_then(|(off, len)| data.get(off..off.checked_add(len)?))
        .unwrap_or(&[])
}

/// Checks frame pointers, symbols and debug info.
pub(crate) fn check(img: &Image<'_>) -> CpuProfileReport {
    let mut r = CpuProfileReport {
        symtab: img.symtab.is_some(),
        build_id: build_id(img),
        ..Default::default()
    };
    match (&img.symtab, img.machine) {
        (None, _) => r
            .notes
            .push("no .symtab (stripped): cannot tell whether it has frame pointers".into()),
        (Some(_), m) if m != elf::EM_X86_64 => r.notes.push(format!(
            "the frame-pointer check reads x86-64 code only ({}): cannot tell",
            img.machine_name()
        )),
        (Some(symtab), _) => {
            let mut seen = std::collections::BTreeSet::new();
            for s in symtab {
                if s.kind != elf::STT_FUNC
                    || s.size < MIN_FUNCTION_SIZE
                    || is_sysroot(&s.name)
                    || !seen.insert(s.value)
                {
                    continue;
                }
                let len = PROLOGUE_BYTES.min(s.size as usize);
                let Some(code) = img.bytes_at(s.value, len) else {
                    continue;
                };
                r.functions_checked += 1;
                if has_frame_pointer_prologue(code) {
                    r.with_frame_pointer += 1;
                }
            }
            if r.functions_checked == 0 {
                r.notes.push(
                    "no functions outside the Rust standard library to check: cannot tell".into(),
                );
            } else {
                let share = r.with_frame_pointer as f64 / r.functions_checked as f64;
                r.frame_pointers = Some(share >= FRAME_POINTER_SHARE);
            }
        }
    }
    match debug_units(img) {
        Ok(d) => {
            r.debug_units = d.all;
            r.own_debug_units = Some(d.own);
            r.line_tables_only = (d.rust_with_paths + d.rust_line_tables > 0)
                .then_some(d.rust_line_tables > d.rust_with_paths);
        }
        Err(e) => r.notes.push(format!("debug info: {e}")),
    }

    if r.frame_pointers == Some(false) {
        push_fix(
            &mut r.fix,
            format!(
                "build with frame pointers (CPU-profile stacks walk them): in .cargo/config.toml\n\
                 [target.{}]\n\
                 rustflags = [\"-C\", \"force-frame-pointers=yes\"]\n\
                 (or RUSTFLAGS=\"-C force-frame-pointers=yes\"; C/C++: -fno-omit-frame-pointer)",
                img.rust_target()
            ),
        );
    }
    if r.build_id.is_none() {
        push_fix(
            &mut r.fix,
            "add a build id (the symbolizer checks it before trusting a binary found on \
             another machine): link with -Wl,--build-id, e.g. in .cargo/config.toml\n\
             rustflags = [\"-C\", \"link-arg=-Wl,--build-id\"]"
                .into(),
        );
    }
    if !r.symtab {
        push_fix(
            &mut r.fix,
            "keep the symbol table: in Cargo.toml [profile.release] strip = false (and do not \
             run strip on the binary), or give the symbolizer the unstripped build"
                .into(),
        );
    }
    if r.own_debug_units == Some(0) {
        push_fix(
            &mut r.fix,
            "add debug info (function names, file:line and inlined frames in profiles): \
             in Cargo.toml\n\
             [profile.release]\n\
             debug = \"limited\"   # not \"line-tables-only\": it leaves inlined async \
             bodies nameless ({async_fn#0}); C/C++: -g1"
                .into(),
        );
    }
    if r.line_tables_only == Some(true) {
        push_fix(
            &mut r.fix,
            "debug info is line tables only: inlined async bodies show as a bare \
             {async_fn#0} / {async_block#0} in profiles and findings; in Cargo.toml\n\
             [profile.release]\n\
             debug = \"limited\"   # function paths for +0.03% file size"
                .into(),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_of_mangled_names() {
        assert_eq!(rust_crate("_ZN3app4main17h72769ddfa41acab1E"), Some("app"));
        assert_eq!(
            rust_crate("_RNvCsfLfy6EI15iL_7___rustc12___rust_alloc"),
            Some("__rustc")
        );
        // A generic std function instantiated in std (the last crate root).
        assert_eq!(
            rust_crate("_RINvMNtCsgEmfK2I1SDS_4core3stre18trim_start_matchesReECsgY6Mt91CT9J_14rustc_demangle"),
            Some("rustc_demangle")
        );
        assert_eq!(rust_crate("main"), None);
        assert_eq!(rust_crate("_ZN"), None);
        assert_eq!(rust_crate("_RNvC"), None);
        assert!(is_sysroot("_RNvNtCs1234_3std2io5stdio"));
        assert!(is_sysroot("rust_eh_personality"));
        assert!(!is_sysroot("_ZN3app4work17h0123456789abcdefE"));
        assert!(!is_sysroot("compute"));
        assert!(is_sysroot("_start"));
    }

    #[test]
    fn prologues() {
        assert!(has_frame_pointer_prologue(&[0x55, 0x48, 0x89, 0xe5, 0x90]));
        assert!(has_frame_pointer_prologue(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        assert!(has_frame_pointer_prologue(&[
            0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55, 0x48, 0x89, 0xe5
        ]));
        // gcc -O2 -fno-omit-frame-pointer: push %rbp; imul; mov %rsp,%rbp.
        assert!(has_frame_pointer_prologue(&[
            0x55, 0x6b, 0xff, 0x64, 0x48, 0x89, 0xe5
        ]));
        // push %rax; ... (no frame), and a frame set up later.
        assert!(!has_frame_pointer_prologue(&[0x50, 0x48, 0x89, 0xf1]));
        assert!(!has_frame_pointer_prologue(&[
            0x41, 0x57, 0x55, 0x48, 0x89, 0xe5
        ]));
        assert!(!has_frame_pointer_prologue(&[0x55]));
    }
}
