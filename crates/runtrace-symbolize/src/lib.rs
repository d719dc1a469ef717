//! Symbolization of runtrace CPU-profile stacks: the addresses of a
//! recording's `STACKS` frames become function names, source files and
//! lines, with inlined calls expanded, using the recording's `MAPPINGS`
//! (which binary was mapped where, and its build id) and
//! [blazesym](https://docs.rs/blazesym) for ELF symbols and DWARF.
//!
//! It never names a function it is not sure of: a binary whose build id
//! differs from the recorded one is not used, and every address that
//! cannot be resolved becomes an `[unknown] module+0xoffset` frame.
//! [`Symbolizer::problems`] then says, once per binary, what was missing
//! (the binary, the right build of it, its symbol table, its debug info),
//! for tools to print.
//!
//! ```no_run
//! use runtrace_symbolize::{Symbolizer, SymbolizeOptions};
//! # let mappings: Vec<runtrace_symbolize::Mapping> = Vec::new();
//! # let stack: Vec<u64> = Vec::new();
//! let mut sym = Symbolizer::new(&mappings, SymbolizeOptions {
//!     search_dirs: vec!["target/release".into()],
//! });
//! for frame in sym.stack(&stack) {
//!     println!("{} {}:{}", frame.function, frame.file.as_deref().unwrap_or("?"),
//!              frame.line.unwrap_or(0));
//! }
//! for p in sym.problems() {
//!     eprintln!("symbolize: {p}");
//! }
//! ```
//!
//! The crate is split by job: `locate` finds a mapping's binary (recorded
//! path or search directories, build id checked), `elf` reads what a
//! candidate binary offers (build id, symbol table, debug info), `frame`
//! turns blazesym's answer for one address into frames, and `symbolizer`
//! ties them together with the per-address cache.

#![warn(missing_docs)]

mod elf;
mod frame;
mod locate;
mod mapping;
mod symbolizer;

pub use frame::Frame;
pub use locate::SymbolizeOptions;
/// A recorded executable mapping (the `MAPPINGS` frame's entries), as
/// [`Symbolizer::new`] takes them.
pub use mapping::Mapping;
pub use symbolizer::Symbolizer;

/// The GNU build id of the ELF file at `path` (`None`: it has none), as a
/// recorder writes it into `MAPPINGS`. The error names what is wrong.
///
/// ```
/// let me = std::env::current_exe().unwrap();
/// let id = runtrace_symbolize::build_id(&me).unwrap();
/// assert!(id.is_some_and(|id| !id.is_empty()));
/// assert!(runtrace_symbolize::build_id("/nonexistent".as_ref()).is_err());
/// ```
pub fn build_id(path: &std::path::Path) -> Result<Option<Vec<u8>>, String> {
    elf::read(path)
        .map(|info| info.build_id)
        .map_err(|e| format!("{}: {e}", path.display()))
}
