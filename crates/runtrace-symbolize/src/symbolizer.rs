//! The symbolizer: maps each address to its recorded mapping, finds that
//! mapping's binary once (on the first address that needs it), asks
//! blazesym for the symbol at the file offset, and remembers the frames per
//! address and what went wrong per binary.

use crate::elf;
use crate::frame::{self, Frame, Strings};
use crate::locate::{self, Located, SymbolizeOptions};
use blazesym::symbolize::{self, source, Input, Symbolized};
use runtrace_format::frame::Mapping;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// One recorded executable mapping and what became of its binary.
#[derive(Debug)]
struct Module {
    mapping: Mapping,
    /// File name of the binary, for frames.
    name: Arc<str>,
    /// `None` until an address in the mapping is symbolized.
    located: Option<Located>,
    /// Distinct addresses looked up in this mapping.
    looked_up: u64,
    /// Of those, the ones that gave no symbol.
    unresolved: u64,
    /// The first error blazesym reported for this binary.
    error: Option<String>,
}

/// Symbolizes the stacks of one recording: addresses, leaf first, to
/// function names, files and lines, with inlined calls expanded.
///
/// Each distinct address is resolved once; each binary is located (and its
/// build id checked) once, on the first address inside it.
///
/// Not `Send`: blazesym's state uses `Rc`. Create it on the thread that
/// symbolizes (in async code, inside `spawn_blocking`); the [`Frame`]s it
/// returns are `Send` and `Sync`.
///
/// ```
/// use runtrace_symbolize::{Symbolizer, SymbolizeOptions};
/// // No mappings: every address is unknown, and problems() says why.
/// let mut s = Symbolizer::new(&[], SymbolizeOptions::default());
/// let frames = s.stack(&[0x1000, 0x2001]);
/// assert_eq!(frames.len(), 2);
/// assert_eq!(&*frames[1].function, "[unknown] 0x2001");
/// assert!(s.problems()[0].starts_with("2 addresses outside every recorded mapping"));
/// ```
#[derive(Debug)]
pub struct Symbolizer {
    /// Sorted by start; a later mapping with the same start replaced the
    /// earlier one.
    modules: Vec<Module>,
    opts: SymbolizeOptions,
    blaze: symbolize::Symbolizer,
    /// Frames per (address, is a return address).
    cache: HashMap<(u64, bool), Box<[Frame]>>,
    strings: Strings,
    /// Distinct addresses in no mapping.
    outside: u64,
}

impl Symbolizer {
    /// A symbolizer for a recording's mappings (its MAPPINGS frames, in
    /// file order). Nothing is read until [`Symbolizer::stack`] needs it.
    ///
    /// ```
    /// use runtrace_symbolize::Mapping;
    /// use runtrace_symbolize::{Symbolizer, SymbolizeOptions};
    /// let app = Mapping {
    ///     start: 0x5555_0000_0000,
    ///     end: 0x5555_0001_0000,
    ///     file_offset: 0x1000,
    ///     build_id: vec![0xab; 20],
    ///     path: "/nonexistent/app".into(),
    /// };
    /// let mut s = Symbolizer::new(&[app], SymbolizeOptions::default());
    /// let frames = s.stack(&[0x5555_0000_0010]);
    /// assert_eq!(&*frames[0].function, "[unknown] app+0x1010");
    /// assert!(s.problems()[0].starts_with("/nonexistent/app: not found (build id abab"));
    /// ```
    pub fn new(mappings: &[Mapping], opts: SymbolizeOptions) -> Symbolizer {
        let mut modules: Vec<Module> = Vec::with_capacity(mappings.len());
        for m in mappings {
            let name = Path::new(locate::recorded_path(&m.path))
                .file_name()
                .map_or_else(|| "[anon]".into(), |n| n.to_string_lossy().into_owned());
            let module = Module {
                mapping: m.clone(),
                name: Arc::from(name),
                located: None,
                looked_up: 0,
                unresolved: 0,
                error: None,
            };
            match modules.iter_mut().find(|old| old.mapping.start == m.start) {
                Some(old) => *old = module,
                None => modules.push(module),
            }
        }
        modules.sort_by_key(|m| m.mapping.start);
        let mut debug_dirs: Vec<&Path> = vec![Path::new("/usr/lib/debug"), Path::new("/lib/debug")];
        debug_dirs.extend(opts.search_dirs.iter().map(|d| d.as_path()));
        let blaze = symbolize::Symbolizer::builder()
            // Each binary's build id was checked when it was located.
            .enable_auto_reload(false)
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .set_debug_dirs(Some(debug_dirs))
            .build();
        Symbolizer {
            modules,
            opts,
            blaze,
            cache: HashMap::new(),
            strings: Strings::default(),
            outside: 0,
        }
    }

    /// One stack, leaf first in, leaf first out, inlined frames expanded
    /// (an inlined callee comes before the function it was inlined into).
    /// Every address but the first is a return address and is looked up
    /// at `addr - 1`, inside the call instruction.
    ///
    /// ```
    /// let mut s = runtrace_symbolize::Symbolizer::new(&[], Default::default());
    /// assert!(s.stack(&[]).is_empty());
    /// ```
    pub fn stack(&mut self, addrs: &[u64]) -> Vec<Frame> {
        let mut out = Vec::with_capacity(addrs.len());
        for (i, &addr) in addrs.iter().enumerate() {
            out.extend_from_slice(self.address(addr, i > 0));
        }
        out
    }

    /// The frames of one address of a stack, innermost (inlined callee)
    /// first, as [`Symbolizer::stack`] names it: `is_return` for every
    /// address but a stack's first (looked up at `addr - 1`). For callers
    /// that keep which address each frame came from (Perfetto's frames).
    ///
    /// ```
    /// let mut s = runtrace_symbolize::Symbolizer::new(&[], Default::default());
    /// assert_eq!(s.address(0x10, false).len(), 1);
    /// assert!(s.address(0x10, false)[0].is_unknown());
    /// ```
    pub fn address(&mut self, addr: u64, is_return: bool) -> &[Frame] {
        let key = (addr, is_return);
        if !self.cache.contains_key(&key) {
            let frames = self.resolve(addr, is_return).into_boxed_slice();
            self.cache.insert(key, frames);
        }
        &self.cache[&key]
    }

    /// What could not be symbolized and why, one line per binary (binary
    /// missing, build-id mismatch, stripped, no debug info), plus one for
    /// addresses outside every mapping; empty when everything resolved.
    ///
    /// ```
    /// let s = runtrace_symbolize::Symbolizer::new(&[], Default::default());
    /// assert!(s.problems().is_empty());
    /// ```
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in self.modules.iter().filter(|m| m.looked_up > 0) {
            let path = &m.mapping.path;
            let unresolved = format!("{} of {} addresses unresolved", m.unresolved, m.looked_up);
            match &m.located {
                None => {}
                Some(Located::NotFound) => out.push(format!(
                    "{path}: not found (build id {}): {unresolved}; add the directory holding \
                     this build of it to the search directories",
                    id_text(&m.mapping.build_id)
                )),
                Some(Located::Mismatch {
                    path: found,
                    found: id,
                }) => out.push(format!(
                    "{path}: build id mismatch: recorded {}, but {} has {}; not used: {unresolved}",
                    id_text(&m.mapping.build_id),
                    found.display(),
                    id.as_deref().map_or_else(|| "none".into(), elf::hex)
                )),
                Some(Located::Unreadable { path: found, why }) => {
                    out.push(format!("{path}: {} {why}: {unresolved}", found.display()))
                }
                Some(Located::Found { path: found, info }) => {
                    let shown = if found.as_os_str() == locate::recorded_path(path) {
                        path.clone()
                    } else {
                        format!("{path} (as {})", found.display())
                    };
                    if let Some(e) = &m.error {
                        out.push(format!("{shown}: symbolizer error: {e}: {unresolved}"));
                    } else if !info.has_symtab && !info.has_debug_info && m.unresolved > 0 {
                        let link = info
                            .debuglink
                            .as_ref()
                            .map(|l| format!(" (its debug file {l} was not found)"))
                            .unwrap_or_default();
                        out.push(format!(
                            "{shown}: stripped (no symbol table / no debug info){link}: {unresolved}"
                        ));
                    } else if m.unresolved > 0 {
                        out.push(format!("{shown}: {unresolved} (in no symbol)"));
                    }
                    if m.mapping.build_id.is_empty() {
                        out.push(format!(
                            "{shown}: no build id recorded: symbolized with this file unverified \
                             (it may be a different build)"
                        ));
                    }
                    if info.has_symtab && !info.has_debug_info && info.debuglink.is_none() {
                        out.push(format!(
                            "{shown}: no debug info: function names only, no file:line or inlined \
                             frames (build with debug = 1 or \"line-tables-only\")"
                        ));
                    }
                }
            }
        }
        if self.outside > 0 {
            out.push(format!(
                "{} outside every recorded mapping (JIT code, the vDSO, or a library loaded \
                 after the last MAPPINGS frame)",
                match self.outside {
                    1 => "1 address".to_string(),
                    n => format!("{n} addresses"),
                }
            ));
        }
        out
    }

    /// The frames of one address (not cached yet).
    fn resolve(&mut self, addr: u64, is_return: bool) -> Vec<Frame> {
        let at = self.modules.partition_point(|m| m.mapping.start <= addr);
        let Some(m) = at
            .checked_sub(1)
            .map(|i| &mut self.modules[i])
            .filter(|m| addr < m.mapping.end)
        else {
            self.outside += 1;
            return vec![frame::unknown_addr(addr)];
        };
        m.looked_up += 1;
        // Wrapping: the numbers come from a file and may be nonsense.
        let offset = |a: u64| (a - m.mapping.start).wrapping_add(m.mapping.file_offset);
        // A return address points after its call; the call itself (and
        // its line, and its inlining) is one byte before.
        let lookup = if is_return && addr > m.mapping.start {
            addr - 1
        } else {
            addr
        };
        if m.mapping.path == VDSO {
            // The kernel's vDSO has no file to read here (and the
            // recording machine's differs from this one's): name the
            // place, not a function we cannot check.
            return vec![frame::unknown_in(&m.name, offset(addr)).named(VDSO)];
        }
        let unknown = frame::unknown_in(&m.name, offset(addr));
        let located = m.located.get_or_insert_with(|| {
            locate::locate(&m.mapping.path, &m.mapping.build_id, &self.opts)
        });
        let Located::Found { path, info } = located else {
            m.unresolved += 1;
            return vec![unknown];
        };
        let input = match info.debug_only_text {
            // The mapping starts at the executable segment's first page.
            Some(text) => Input::VirtOffset(text.wrapping_add(lookup - m.mapping.start)),
            None => Input::FileOffset(offset(lookup)),
        };
        let src = source::Source::Elf(source::Elf::new(path.as_path()));
        match self.blaze.symbolize_single(&src, input) {
            Ok(Symbolized::Sym(sym)) => frame::resolved(&sym, &m.name, &mut self.strings),
            Ok(Symbolized::Unknown(_)) => {
                m.unresolved += 1;
                vec![unknown]
            }
            Err(e) => {
                m.unresolved += 1;
                m.error.get_or_insert_with(|| e.to_string());
                vec![unknown]
            }
        }
    }
}

/// The path the recorder gives the kernel's vDSO mapping
/// (`/proc/self/maps` names it so).
const VDSO: &str = "[vdso]";

/// A recorded build id as problems print it.
fn id_text(id: &[u8]) -> String {
    if id.is_empty() {
        "unknown".into()
    } else {
        elf::hex(id)
    }
}
