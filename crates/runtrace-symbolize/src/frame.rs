//! One symbolized stack frame, and the frames of one address: blazesym's
//! symbol with its inlined calls expanded innermost first, or an honest
//! `[unknown]` frame.

use blazesym::symbolize::{CodeInfo, Sym};
use std::collections::HashSet;
use std::sync::Arc;

/// One frame of a symbolized stack.
///
/// An address inside inlined code gives several frames: the inlined
/// callee (`inlined: true`) first, then the function it was inlined into.
/// An address that cannot be resolved gives one frame named
/// `[unknown] <module>+0x<file offset>` (or `[unknown] 0x<addr>` outside
/// every mapping), never a guessed name.
///
/// ```
/// use runtrace_symbolize::{Symbolizer, SymbolizeOptions};
/// let mut s = Symbolizer::new(&[], SymbolizeOptions::default());
/// let frames = s.stack(&[0x1234]);
/// assert_eq!(&*frames[0].function, "[unknown] 0x1234");
/// assert!(frames[0].is_unknown());
/// assert_eq!(frames[0].file, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name (Rust hashes removed), or `[unknown] …`.
    pub function: Arc<str>,
    /// Source file (as recorded in the debug info, usually absolute).
    pub file: Option<Arc<str>>,
    /// Line in `file`.
    pub line: Option<u32>,
    /// This function was inlined into the next frame.
    pub inlined: bool,
    /// File name of the binary (`app`, `libc.so.6`); empty outside every
    /// mapping.
    pub module: Arc<str>,
}

/// Prefix of the name of a frame that could not be resolved.
const UNKNOWN: &str = "[unknown]";

impl Frame {
    /// This frame's address could not be resolved to a function.
    ///
    /// ```
    /// let mut s = runtrace_symbolize::Symbolizer::new(&[], Default::default());
    /// assert!(s.stack(&[1])[0].is_unknown());
    /// ```
    pub fn is_unknown(&self) -> bool {
        self.function.starts_with(UNKNOWN)
    }
}

/// Shares the strings of frames: a profile repeats the same few hundred
/// function and file names over many thousands of addresses.
#[derive(Debug, Default)]
pub(crate) struct Strings(HashSet<Arc<str>>);

impl Strings {
    pub(crate) fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return Arc::clone(a);
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(Arc::clone(&a));
        a
    }
}

/// The frame of an address in `module` (at `offset` in its file) that
/// could not be resolved.
pub(crate) fn unknown_in(module: &Arc<str>, offset: u64) -> Frame {
    Frame {
        function: format!("{UNKNOWN} {module}+{offset:#x}").into(),
        file: None,
        line: None,
        inlined: false,
        module: Arc::clone(module),
    }
}

impl Frame {
    /// The same frame under another function name (for places that have
    /// a name but no symbols, such as `[vdso]`).
    pub(crate) fn named(mut self, function: &str) -> Frame {
        self.function = function.into();
        self
    }
}

/// The frame of an address outside every recorded mapping.
pub(crate) fn unknown_addr(addr: u64) -> Frame {
    Frame {
        function: format!("{UNKNOWN} {addr:#x}").into(),
        file: None,
        line: None,
        inlined: false,
        module: Arc::from(""),
    }
}

/// The frames of one resolved address, innermost (leaf) first. blazesym
/// lists inlined calls outermost first and gives each one the location
/// inside it, so the list is reversed and the symbol itself comes last.
pub(crate) fn resolved(sym: &Sym<'_>, module: &Arc<str>, strings: &mut Strings) -> Vec<Frame> {
    let mut place = |info: Option<&CodeInfo<'_>>| match info {
        Some(info) => (
            Some(strings.get(&info.to_path().to_string_lossy())),
            info.line,
        ),
        None => (None, None),
    };
    let mut frames = Vec::with_capacity(sym.inlined.len() + 1);
    for f in sym.inlined.iter().rev() {
        let (file, line) = place(f.code_info.as_ref());
        frames.push((f.name.as_ref(), file, line, true));
    }
    let (file, line) = place(sym.code_info.as_deref());
    frames.push((sym.name.as_ref(), file, line, false));
    frames
        .into_iter()
        .map(|(name, file, line, inlined)| Frame {
            function: strings.get(name),
            file,
            line,
            inlined,
            module: Arc::clone(module),
        })
        .collect()
}
