//! Test helper (also included by path from runtrace-cli's tests): real
//! addresses for synthetic CPU-profile stacks, this test binary's own
//! functions and their executable mapping as the recorder records it
//! (/proc/self/maps and the ELF's GNU build id), so symbolization is real.

#![allow(dead_code)]

use runtrace_format::frame::Mapping;

/// An address a few bytes into function `f` (a sampled instruction, or a
/// return address, which the symbolizer looks up at `addr - 1`).
pub fn inside(f: fn(u64) -> u64) -> u64 {
    f as usize as u64 + 4
}

/// The executable mapping of this process that holds `addr`.
pub fn mapping_of(addr: u64) -> Mapping {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        if f[1].contains('x') && a <= addr && addr < b {
            let path = f[5..].join(" ");
            return Mapping {
                start: a,
                end: b,
                file_offset: u64::from_str_radix(f[2], 16).unwrap(),
                build_id: runtrace_symbolize::build_id(std::path::Path::new(&path))
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
                path,
            };
        }
    }
    panic!("no executable mapping holds {addr:#x}");
}
