//! Shared by the tests and the bench: this process's executable mappings,
//! as the recorder writes them into MAPPINGS.

use runtrace_symbolize::Mapping;
use std::path::{Path, PathBuf};

/// The executable file-backed mappings of this process, each with its
/// build id, as the recorder writes the MAPPINGS frame.
pub fn self_mappings() -> Vec<Mapping> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
                return None;
            }
            let (start, end) = f[0].split_once('-')?;
            let path = f[5..].join(" ");
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                file_offset: u64::from_str_radix(f[2], 16).ok()?,
                build_id: runtrace_symbolize::build_id(Path::new(&path))
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
                path,
            })
        })
        .collect()
}

/// This executable (canonical path, as /proc/self/maps names it).
pub fn me() -> PathBuf {
    std::env::current_exe().unwrap().canonicalize().unwrap()
}
