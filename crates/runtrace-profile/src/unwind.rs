//! Completes an on-CPU stack whose leaf keeps no frame pointer (issue 35).
//!
//! The kernel walks a sampled thread's user stack by its frame pointers
//! (`rbp`). Functions built without them, such as Debian glibc's syscall
//! wrappers (`send`, `recv`, `write`, `clock_nanosleep`) and `memcpy`,
//! break that walk: one that leaves `rbp` alone makes the kernel skip its
//! caller, and one that uses `rbp` as a plain register (`__libc_send` on a
//! multi-threaded process keeps the cancellation state in it) ends the
//! walk at the leaf, a stack of one or two frames that names no caller.
//!
//! On-CPU samples therefore carry the user registers (`rip`, `rsp`, `rbp`)
//! and a copy of the top of the user stack ([`STACK_COPY`] bytes). When the
//! leaf's call frame information (`.eh_frame`, which every ELF object on
//! Linux keeps for unwinding) says its frame is not addressed through
//! `rbp`, the first frames are unwound with it from the copy (where the
//! return address and the caller's `rbp` were saved), and the walk goes on
//! by frame pointers from the first frame that has one, inside the copy;
//! past its end the kernel's own chain is spliced on where it agrees. A
//! sample whose leaf has a frame pointer costs one table lookup.
//!
//! This runs on the writer thread, never on the application's threads.
//! `.eh_frame` is read with `gimli` (the unwinding tables' parser the Rust
//! toolchain itself uses) and located with `object`, each module once.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, NativeEndian, Register, RegisterRule,
    UnwindContext, UnwindSection, X86_64,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of user stack copied with each on-CPU sample by default
/// (`RUNTRACE_CPU_STACK_COPY` sets it): enough for a tokio worker's whole
/// stack under mini-redis' connection handler (8 KiB reached the
/// thread's start in 40% of its samples inside `send`, 16 KiB in all;
/// docs/cpu-profile.md). Frames past it come from the kernel's chain where
/// they agree.
pub(crate) const STACK_COPY: u32 = 16384;
/// Frames unwound by call frame information before the walk needs a
/// frame pointer (a libc function calling another, at most a few deep).
const CFI_STEPS: usize = 6;
/// Frames kept per stack (the kernel's `sample_max_stack` bound).
const MAX_FRAMES: usize = 128;

/// The user registers taken with a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Regs {
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
}

/// One executable mapping of this process.
struct Mapping {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
    path: Arc<str>,
}

/// A module's unwinding tables, read once.
struct Module {
    eh_frame: Vec<u8>,
    eh_frame_hdr: Vec<u8>,
    bases: BaseAddresses,
    /// PT_LOAD segments: (file offset, file size, virtual address).
    loads: Vec<(u64, u64, u64)>,
}

/// What one step of call-frame unwinding found.
struct Step {
    /// The caller's address (the return address).
    ra: u64,
    /// The frame's canonical frame address: the caller's `rsp`.
    cfa: u64,
    /// The caller's `rbp`.
    bp: u64,
    /// The frame was addressed through `rbp` (its function keeps a frame
    /// pointer, and is past its prologue).
    fp_frame: bool,
}

/// Unwinds sampled stacks of this process (see the module's docs).
pub(crate) struct Unwinder {
    maps: Vec<Mapping>,
    /// Modules by path, loaded when a sample first needs one (None: it
    /// has no unwinding tables, or could not be read).
    modules: HashMap<Arc<str>, Option<Arc<Module>>>,
    maps_read: Option<Instant>,
    ctx: Box<UnwindContext<usize>>,
}

impl Unwinder {
    pub(crate) fn new() -> Unwinder {
        Unwinder {
            maps: Vec::new(),
            modules: HashMap::new(),
            maps_read: None,
            ctx: Box::new(UnwindContext::new()),
        }
    }

    /// The stack to keep for a sample whose kernel chain (leaf first) is
    /// `kernel`: `None` keeps it, `Some` is a longer one found by
    /// unwinding the leaf's frame from `regs` and the stack copy `stack`
    /// (its first byte at `regs.sp`).
    pub(crate) fn repair(&mut self, kernel: &[u64], regs: Regs, stack: &[u8]) -> Option<Vec<u64>> {
        if stack.len() < 8 || regs.ip == 0 {
            return None;
        }
        let read = |addr: u64| -> Option<u64> {
            let at = usize::try_from(addr.checked_sub(regs.sp)?).ok()?;
            Some(u64::from_ne_bytes(
                stack.get(at..at.checked_add(8)?)?.try_into().ok()?,
            ))
        };
        let first = self.step(regs.ip, regs.sp, regs.bp, true, &read);
        let first = match first {
            // The leaf keeps a frame pointer: the kernel's walk is right.
            Some(s) if s.fp_frame => return None,
            None => return None,
            Some(s) => s,
        };
        let mut out = vec![regs.ip, first.ra];
        let (mut ip, mut sp, mut bp) = (first.ra, first.cfa, first.bp);
        let mut fp_chain = false;
        for _ in 1..CFI_STEPS {
            match self.step(ip, sp, bp, false, &read) {
                // A frame-pointer frame: from its caller on, the chain of
                // saved `rbp`s holds (Rust code built with frame pointers).
                Some(s) if s.fp_frame => {
                    out.push(s.ra);
                    bp = s.bp;
                    fp_chain = true;
                    break;
                }
                Some(s) => {
                    out.push(s.ra);
                    (ip, sp, bp) = (s.ra, s.cfa, s.bp);
                }
                None => {
                    // No unwinding table for the caller (or it needs a
                    // register the sample lacks): it may still keep a
                    // frame pointer, which the walk below checks.
                    fp_chain = true;
                    break;
                }
            }
        }
        if fp_chain {
            // The frame-pointer walk, inside the copy.
            while out.len() < MAX_FRAMES {
                let (Some(next), Some(ra)) = (read(bp), read(bp.wrapping_add(8))) else {
                    break;
                };
                if ra == 0 {
                    break;
                }
                out.push(ra);
                if next <= bp {
                    break;
                }
                bp = next;
            }
        }
        // Past the copy: the kernel's chain from the last frame both have.
        if let Some(j) = out
            .last()
            .and_then(|last| kernel.iter().position(|ip| ip == last))
        {
            out.extend(
                kernel[j + 1..]
                    .iter()
                    .take(MAX_FRAMES.saturating_sub(out.len())),
            );
        }
        out.truncate(MAX_FRAMES);
        (out.len() > kernel.len()).then_some(out)
    }

    /// Unwinds one frame at `ip` (the leaf's own address if `leaf`, else
    /// a return address) from `sp` and `bp`.
    fn step(
        &mut self,
        ip: u64,
        sp: u64,
        bp: u64,
        leaf: bool,
        read: &impl Fn(u64) -> Option<u64>,
    ) -> Option<Step> {
        let (module, svma) = self.module_for(ip)?;
        // A return address is the instruction after the call: look up the
        // call itself, which may be a function's last instruction.
        let lookup = if leaf { svma } else { svma.checked_sub(1)? };
        let hdr = EhFrameHdr::new(&module.eh_frame_hdr, NativeEndian)
            .parse(&module.bases, 8)
            .ok()?;
        let table = hdr.table()?;
        let eh = EhFrame::new(&module.eh_frame, NativeEndian);
        let row = table
            .unwind_info_for_address(
                &eh,
                &module.bases,
                &mut self.ctx,
                lookup,
                EhFrame::cie_from_offset,
            )
            .ok()?;
        let (reg, off) = match *row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => (register, offset),
            CfaRule::Expression(_) => return None,
        };
        let base = match reg {
            X86_64::RSP => sp,
            X86_64::RBP => bp,
            _ => return None,
        };
        let cfa = base.checked_add_signed(off)?;
        let saved = |r: Register, now: u64| match row.register(r) {
            None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => Some(now),
            Some(RegisterRule::Offset(o)) => read(cfa.checked_add_signed(o)?),
            Some(RegisterRule::ValOffset(o)) => cfa.checked_add_signed(o),
            Some(_) => None,
        };
        let ra = match row.register(X86_64::RA) {
            Some(RegisterRule::Offset(o)) => read(cfa.checked_add_signed(o)?)?,
            _ => return None,
        };
        let caller_bp = saved(X86_64::RBP, bp)?;
        Some(Step {
            ra,
            cfa,
            bp: caller_bp,
            fp_frame: reg == X86_64::RBP,
        })
    }

    /// The module mapped at `ip` and `ip`'s address in its file.
    fn module_for(&mut self, ip: u64) -> Option<(Arc<Module>, u64)> {
        let found = |maps: &[Mapping]| {
            let i = maps.partition_point(|m| m.end <= ip);
            maps.get(i)
                .filter(|m| m.start <= ip)
                .map(|m| (m.path.clone(), m.start, m.offset))
        };
        let hit = match found(&self.maps) {
            Some(h) => h,
            None => {
                // A library loaded since: read the maps again, at most once
                // a second (an address in no file, such as JIT code or a
                // stray value, would otherwise cost a read per sample).
                let stale = self
                    .maps_read
                    .is_none_or(|t| t.elapsed() > Duration::from_secs(1));
                if !stale {
                    return None;
                }
                self.read_maps();
                found(&self.maps)?
            }
        };
        let (path, start, offset) = hit;
        let module = match self.modules.get(&path) {
            Some(m) => m.clone()?,
            None => {
                let m = Module::load(&path).map(Arc::new);
                self.modules.insert(path, m.clone());
                m?
            }
        };
        let file_off = ip - start + offset;
        let svma = module
            .loads
            .iter()
            .find(|(o, size, _)| file_off >= *o && file_off < o + size)
            .map(|(o, _, vaddr)| file_off - o + vaddr)?;
        Some((module, svma))
    }

    fn read_maps(&mut self) {
        self.maps_read = Some(Instant::now());
        let Ok(text) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        let mut maps = Vec::new();
        for m in text.lines().filter_map(crate::maps::parse_line) {
            if !m.path.starts_with('/') {
                continue;
            }
            // A path seen before shares its key (and its loaded module).
            let path = match self.modules.get_key_value(m.path.as_str()) {
                Some((k, _)) => k.clone(),
                None => Arc::from(m.path.as_str()),
            };
            maps.push(Mapping {
                start: m.start,
                end: m.end,
                offset: m.file_offset,
                path,
            });
        }
        maps.sort_by_key(|m| m.start);
        self.maps = maps;
    }
}

impl Module {
    /// Reads `path`'s `.eh_frame` and `.eh_frame_hdr` and its program
    /// headers, nothing else: `ReadCache` reads the file on demand, and
    /// the ELF is walked by its headers (object's `File::parse` would read
    /// the symbol tables too, tens of MB in a debug build, on the writer
    /// thread while producers wait for it to drain).
    fn load(path: &str) -> Option<Module> {
        use object::elf::{FileHeader64, PT_LOAD};
        use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
        let file = std::fs::File::open(path).ok()?;
        let cache = object::ReadCache::new(file);
        let header = FileHeader64::<object::Endianness>::parse(&cache).ok()?;
        let endian = header.endian().ok()?;
        let sections = header.sections(endian, &cache).ok()?;
        let section = |name: &[u8]| {
            let (_, sh) = sections.section_by_name(endian, name)?;
            Some((sh.sh_addr(endian), sh.data(endian, &cache).ok()?.to_vec()))
        };
        let (eh_addr, eh_frame) = section(b".eh_frame")?;
        let (hdr_addr, eh_frame_hdr) = section(b".eh_frame_hdr")?;
        let mut bases = BaseAddresses::default()
            .set_eh_frame(eh_addr)
            .set_eh_frame_hdr(hdr_addr);
        if let Some((_, sh)) = sections.section_by_name(endian, b".text") {
            bases = bases.set_text(sh.sh_addr(endian));
        }
        let loads = header
            .program_headers(endian, &cache)
            .ok()?
            .iter()
            .filter(|ph| ph.p_type(endian) == PT_LOAD)
            .map(|ph| (ph.p_offset(endian), ph.p_filesz(endian), ph.p_vaddr(endian)))
            .collect();
        Some(Module {
            eh_frame,
            eh_frame_hdr,
            bases,
            loads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary's own code keeps frame pointers (the workspace
    /// builds with them): past its prologue, a function's frame is
    /// addressed through `rbp`, so its samples keep the kernel's chain.
    #[test]
    #[inline(never)]
    fn a_function_with_a_frame_pointer_is_addressed_through_rbp() {
        let mut u = Unwinder::new();
        let f = a_function_with_a_frame_pointer_is_addressed_through_rbp as *const () as u64;
        // Past `push rbp; mov rbp, rsp` (and an `endbr64` if any).
        let ip = f + 16;
        assert!(u.module_for(ip).is_some(), "this binary and its .eh_frame");
        let s = u
            .step(ip, 0x1000, 0x2000, true, &|_| Some(0x1234))
            .expect("unwinding info for this function");
        assert!(s.fp_frame);
        assert_eq!((s.cfa, s.ra, s.bp), (0x2010, 0x1234, 0x1234));
        // An address in no mapping has nothing to unwind by.
        assert!(u.step(8, 0x1000, 0x2000, true, &|_| Some(0)).is_none());
    }
}
