//! What a candidate binary offers a symbolizer, read from its headers only
//! (build id note, section table), never its whole contents: binaries can
//! be hundreds of megabytes and most of a recording's mappings are never
//! hit by a sample.

use object::{Object, ObjectSection, ReadCache};
use std::fs::File;
use std::path::Path;

/// The parts of an ELF file that decide whether and how well it can be
/// used to symbolize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ElfInfo {
    /// `.note.gnu.build-id`, if the file has one.
    pub(crate) build_id: Option<Vec<u8>>,
    /// A `.symtab` section (function names beyond the exported ones).
    pub(crate) has_symtab: bool,
    /// DWARF (`.debug_info`, possibly compressed): file:line and inlined
    /// functions.
    pub(crate) has_debug_info: bool,
    /// `.gnu_debuglink`: the debug info lives in a separate file that
    /// blazesym looks for in its debug directories.
    pub(crate) debuglink: Option<String>,
}

/// Reads the build id and the symbol/debug sections of the ELF file at
/// `path`. The error says what was wrong (cannot open, not ELF, damaged).
pub(crate) fn read(path: &Path) -> Result<ElfInfo, String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).map_err(|e| format!("not a readable ELF file: {e}"))?;
    let build_id = obj
        .build_id()
        .map_err(|e| format!("damaged build id note: {e}"))?
        .map(<[u8]>::to_vec);
    let has_section = |name: &str| obj.section_by_name(name).is_some_and(|s| s.size() > 0);
    let debuglink = obj
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
    Ok(ElfInfo {
        build_id,
        has_symtab: obj.symbol_table().is_some(),
        has_debug_info: has_section(".debug_info") || has_section(".zdebug_info"),
        debuglink,
    })
}

/// Lower-case hex of a build id (`4f0e…`), as `readelf -n` and the
/// `.build-id/` directories spell it.
pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}
