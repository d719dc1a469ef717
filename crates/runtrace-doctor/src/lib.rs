//! Binary inspection for `runtrace doctor`: which runtrace probes a binary
//! carries, per backend, and whether the tools that attach to them will
//! actually work.
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
//! let report = runtrace_doctor::inspect(std::path::Path::new("target/release/app"))?;
//! println!("{report}");
//! # Ok::<(), runtrace_doctor::DoctorError>(())
//! ```
//!
//! # CPU profiles
//!
//! Whether stacks sampled in the binary can be walked and named: frame
//! pointers (judged from the prologues of its own functions, x86-64),
//! a symbol table, debug info of its own (DWARF compile units other
//! than the Rust standard library's) and a build id. Advisory: a separate verdict and
//! fixes, not counted as a probe problem.
//!
//! The crate is split by job: `elf` loads the parts of the file the checks
//! need; `cpu_profile` checks CPU-profile readiness;
//! `usdt`, `perf_probe` and `lttng` check one backend each, taking the
//! names to look for from [`runtrace_build::symbols`] (the names the
//! generators write); [`Report`] gathers their findings and renders them as
//! text (`Display`) or JSON ([`Report::to_json`]).

#![warn(missing_docs)]

use object::Endianness;
use std::fmt;
use std::path::{Path, PathBuf};

mod cpu_profile;
mod elf;
mod fix;
mod hex;
mod lttng;
mod perf_probe;
mod report;
mod usdt;

pub use cpu_profile::{CpuProfileReport, FRAME_POINTER_SHARE, MIN_FUNCTION_SIZE};
pub use lttng::{LttngReport, Tracepoint};
pub use perf_probe::{PerfProbeReport, ProbeFunction};
pub use report::{LoadSegment, Report};
pub use usdt::{SdtProbe, UsdtReport};

/// Why a binary could not be inspected at all.
///
/// ```
/// let e = runtrace_doctor::inspect(std::path::Path::new("/nonexistent/app")).unwrap_err();
/// assert!(e.to_string().starts_with("/nonexistent/app: cannot open: "), "{e}");
/// ```
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

/// Reads and inspects the binary at `path`. Any path may be given (it is
/// user input): a missing path, a directory or a file that is not ELF is a
/// [`DoctorError`] naming it.
///
/// ```
/// // This test binary: an ELF file, so a report (with or without probes).
/// let me = std::env::current_exe().unwrap();
/// let report = runtrace_doctor::inspect(&me).unwrap();
/// assert!(report.format.starts_with("ELF"));
/// assert!(report.to_string().contains("Verdict: "));
/// ```
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
///
/// ```
/// use std::path::Path;
/// let e = runtrace_doctor::inspect_bytes(Path::new("run.sh"), b"#!/bin/sh\n").unwrap_err();
/// assert!(e.message.starts_with("not an ELF file (a script)"), "{e}");
/// ```
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
        Some(1) => elf::load::<object::elf::FileHeader32<Endianness>>(data),
        Some(2) => elf::load::<object::elf::FileHeader64<Endianness>>(data),
        _ => Err("damaged ELF header: unknown ELF class (byte 4 is not 1 or 2)".into()),
    }
    .map_err(err)?;
    Ok(report::analyse(path, &image))
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
}
