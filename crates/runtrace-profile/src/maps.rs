//! The process's executable mappings, for the `MAPPINGS` frame: which file
//! (and which build of it) every sampled address came from, so a trace can
//! be symbolized later, on another machine that has the binaries.
//!
//! Read from `/proc/self/maps` (executable, file-backed mappings) with
//! each file's GNU build id read from its ELF notes. Re-read when a
//! sample's leaf address falls outside every executable range seen so far
//! (a `dlopen`ed library), at most once per writer round.

use runtrace_format::frame::Mapping;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The executable mappings known so far, and which of them the current
/// file has not been told about.
///
/// ```ignore
/// let mut m = Maps::read();
/// assert!(m.covers(Maps::read as usize as u64));
/// ```
#[derive(Default)]
pub(crate) struct Maps {
    /// File-backed executable mappings, in the order first seen.
    known: Vec<Mapping>,
    /// Every executable range of the last read, file-backed or not
    /// (`[vdso]`, JIT code): an address inside one needs no re-read.
    exec: Vec<(u64, u64)>,
    /// Entries of `known` not yet in a `MAPPINGS` frame of the current
    /// file (indexes into `known`).
    unwritten: Vec<usize>,
    /// The round (watermark) of the last re-read.
    last_read_round: Option<u64>,
    /// Why the last read failed, told once.
    pub(crate) problem: Option<String>,
}

impl Maps {
    /// Reads the current mappings.
    pub(crate) fn read() -> Maps {
        let mut m = Maps::default();
        m.refresh();
        m
    }

    /// Whether `addr` lies in an executable mapping seen at the last read.
    pub(crate) fn covers(&self, addr: u64) -> bool {
        self.exec.iter().any(|&(s, e)| s <= addr && addr < e)
    }

    /// Re-reads `/proc/self/maps` if `addr` is outside every known range
    /// and no re-read happened in `round` yet.
    pub(crate) fn ensure(&mut self, addr: u64, round: u64) {
        if self.covers(addr) || self.last_read_round == Some(round) {
            return;
        }
        self.last_read_round = Some(round);
        self.refresh();
    }

    /// A new file: it must be told every mapping.
    pub(crate) fn reset_file(&mut self) {
        self.unwritten = (0..self.known.len()).collect();
    }

    /// The `MAPPINGS` payload of what the current file has not been told
    /// yet (None when nothing), marking it told. `undo` reverses it.
    pub(crate) fn take_unwritten(&mut self) -> Option<(Vec<u8>, Vec<usize>)> {
        if self.unwritten.is_empty() {
            return None;
        }
        let list: Vec<Mapping> = self
            .unwritten
            .iter()
            .map(|&i| self.known[i].clone())
            .collect();
        Some((
            runtrace_format::frame::mappings(&list),
            std::mem::take(&mut self.unwritten),
        ))
    }

    /// The frame taken by `take_unwritten` was not written.
    pub(crate) fn undo(&mut self, taken: Vec<usize>) {
        self.unwritten.extend(taken);
        self.unwritten.sort_unstable();
        self.unwritten.dedup();
    }

    fn refresh(&mut self) {
        let text = match std::fs::read_to_string("/proc/self/maps") {
            Ok(t) => t,
            Err(e) => {
                self.problem = Some(format!("cannot read /proc/self/maps: {e}"));
                return;
            }
        };
        self.exec.clear();
        for line in text.lines() {
            let Some(m) = parse_line(line) else {
                continue;
            };
            self.exec.push((m.start, m.end));
            // File-backed code, and the vDSO (clock_gettime and friends:
            // a busy `Instant::now` loop samples there), which readers
            // then name `[vdso]` instead of an address outside every
            // mapping. Anonymous (JIT) code has nothing to name.
            if !m.path.starts_with('/') && m.path != "[vdso]" {
                continue;
            }
            let same = |k: &Mapping| {
                k.start == m.start
                    && k.end == m.end
                    && k.file_offset == m.file_offset
                    && k.path == m.path
            };
            if self.known.iter().any(same) {
                continue;
            }
            let build_id = build_id(&m.path).unwrap_or_default();
            let mapping = Mapping { build_id, ..m };
            // A mapping with the same start replaces the earlier one (for
            // readers too: docs/format.md, MAPPINGS).
            match self.known.iter().position(|k| k.start == mapping.start) {
                Some(i) => {
                    self.known[i] = mapping;
                    self.unwritten.push(i);
                }
                None => {
                    self.known.push(mapping);
                    self.unwritten.push(self.known.len() - 1);
                }
            }
        }
        self.unwritten.sort_unstable();
        self.unwritten.dedup();
    }
}

/// One `/proc/self/maps` line, if it is an executable mapping:
/// `start-end perms offset dev inode [path]`.
pub(crate) fn parse_line(line: &str) -> Option<Mapping> {
    let mut it = line.split_ascii_whitespace();
    let range = it.next()?;
    let perms = it.next()?;
    let offset = it.next()?;
    let _dev = it.next()?;
    let _inode = it.next()?;
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    // The path is the rest of the line (it may contain spaces).
    let path = match line.find('/') {
        Some(i) => line[i..].to_owned(),
        None => it.collect::<Vec<_>>().join(" "),
    };
    Some(Mapping {
        start: u64::from_str_radix(s, 16).ok()?,
        end: u64::from_str_radix(e, 16).ok()?,
        file_offset: u64::from_str_radix(offset, 16).ok()?,
        build_id: Vec::new(),
        path,
    })
}

/// The GNU build id of an ELF file (from its `PT_NOTE` segments), None if
/// it has none or is not a 64-bit little-endian ELF.
fn build_id(path: &str) -> Option<Vec<u8>> {
    let f = File::open(path).ok()?;
    let mut eh = [0u8; 64];
    f.read_exact_at(&mut eh, 0).ok()?;
    // ELFCLASS64, ELFDATA2LSB.
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let phoff = u64_at(&eh, 32);
    let phentsize = u16_at(&eh, 54) as u64;
    let phnum = u16_at(&eh, 56) as u64;
    if phentsize < 56 || phnum > 256 {
        return None;
    }
    let mut ph = vec![0u8; (phentsize * phnum) as usize];
    f.read_exact_at(&mut ph, phoff).ok()?;
    for k in 0..phnum as usize {
        let p = &ph[k * phentsize as usize..];
        const PT_NOTE: u32 = 4;
        if u32_at(p, 0) != PT_NOTE {
            continue;
        }
        let (off, size) = (u64_at(p, 8), u64_at(p, 32));
        if size > 1 << 16 {
            continue;
        }
        let mut notes = vec![0u8; size as usize];
        if f.read_exact_at(&mut notes, off).is_err() {
            continue;
        }
        if let Some(id) = find_build_id(&notes) {
            return Some(id);
        }
    }
    None
}

/// The `NT_GNU_BUILD_ID` descriptor in a run of ELF notes (4-byte aligned).
fn find_build_id(mut notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let align = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let word =
            |o: usize| u32::from_le_bytes([notes[o], notes[o + 1], notes[o + 2], notes[o + 3]]);
        let (namesz, descsz, ty) = (word(0) as usize, word(4) as usize, word(8));
        let name_end = 12 + align(namesz);
        let desc_end = name_end.checked_add(align(descsz))?;
        if desc_end > notes.len() {
            return None;
        }
        if ty == NT_GNU_BUILD_ID && notes[12..12 + namesz] == *b"GNU\0" {
            return Some(notes[name_end..name_end + descsz].to_vec());
        }
        notes = &notes[desc_end..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let m =
            parse_line("5581a000-5581b000 r-xp 00002000 08:01 1234    /usr/bin/my prog").unwrap();
        assert_eq!(
            (m.start, m.end, m.file_offset),
            (0x5581a000, 0x5581b000, 0x2000)
        );
        assert_eq!(m.path, "/usr/bin/my prog");
        assert!(parse_line("5581a000-5581b000 r--p 00000000 08:01 1234 /usr/bin/x").is_none());
        let v = parse_line("7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]").unwrap();
        assert_eq!(v.path, "[vdso]");
        assert!(parse_line("garbage").is_none());
    }

    #[test]
    fn own_binary_is_mapped_with_its_build_id() {
        let m = Maps::read();
        let here = own_binary_is_mapped_with_its_build_id as *const () as usize as u64;
        assert!(m.covers(here));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mine = m
            .known
            .iter()
            .find(|k| k.start <= here && here < k.end)
            .expect("the test binary's text is a file mapping");
        assert_eq!(std::path::Path::new(&mine.path), exe);
        // rustc's linkers write a GNU build id by default on Linux.
        assert!(!mine.build_id.is_empty(), "no build id in {}", mine.path);
    }

    #[test]
    fn notes_without_build_id_and_truncated_notes() {
        // One note of type 1 ("GNU", 4-byte desc), then a build id note.
        let mut n = Vec::new();
        for (ty, desc) in [(1u32, vec![9u8; 4]), (3, vec![0xab; 20])] {
            n.extend_from_slice(&4u32.to_le_bytes());
            n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            n.extend_from_slice(&ty.to_le_bytes());
            n.extend_from_slice(b"GNU\0");
            n.extend_from_slice(&desc);
        }
        assert_eq!(find_build_id(&n), Some(vec![0xab; 20]));
        assert_eq!(find_build_id(&n[..20]), None);
        for cut in 0..n.len() {
            let _ = find_build_id(&n[..cut]);
        }
    }

    #[test]
    fn rereads_once_per_round_and_tells_new_files_everything() {
        let mut m = Maps::read();
        let n = m.known.len();
        assert!(n > 0);
        let (_, taken) = m.take_unwritten().unwrap();
        assert_eq!(taken.len(), n);
        assert!(m.take_unwritten().is_none());
        m.undo(taken);
        assert_eq!(m.take_unwritten().unwrap().1.len(), n);
        m.ensure(1, 7);
        assert_eq!(m.last_read_round, Some(7));
        m.last_read_round = Some(7);
        m.ensure(2, 7); // same round: no re-read (nothing to observe but no panic)
        m.reset_file();
        assert_eq!(m.take_unwritten().unwrap().1.len(), m.known.len());
    }
}
