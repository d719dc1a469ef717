//! Symbolizes addresses of this test binary's own functions, with the
//! mappings of this process read from `/proc/self/maps` (as the recorder
//! writes them), and checks the failure cases: a stripped copy, a wrong
//! build id, a binary found only through the search directories.
//!
//! The addresses are real: an instruction pointer read inside an
//! `#[inline(always)]` helper (so the frame is inlined, even in a debug
//! build: LLVM's always-inliner runs at opt-level 0) and a return address
//! read through the frame pointer (the workspace builds with
//! `-C force-frame-pointers=yes`).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use runtrace_symbolize::{Frame, Mapping, SymbolizeOptions, Symbolizer};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The 1-based line of this file holding `marker`.
fn line_of(marker: &str) -> u32 {
    let src = include_str!("symbolize.rs");
    let n = src
        .lines()
        .position(|l| l.contains(marker) && !l.contains("line_of("))
        .unwrap_or_else(|| panic!("marker {marker} not in the test source"));
    n as u32 + 1
}

/// The instruction pointer where this helper's body is inlined.
#[inline(always)]
fn current_ip() -> u64 {
    let ip: u64;
    // SAFETY: `lea` of a local label (the `lea` itself, so the address
    // is on this line, not the next instruction's) writes one register and
    // touches neither memory nor the stack.
    unsafe { std::arch::asm!("2: lea {}, [rip + 2b]", out(reg) ip, options(nomem, nostack)) }; // @ip
    ip
}

/// A "sample" taken inside this function: the inlined instruction pointer
/// (leaf) and this function's return address, leaf first like a recorded
/// stack.
#[inline(never)]
fn sampled() -> Vec<u64> {
    let ip = current_ip(); // @call
    let ret: u64;
    // SAFETY: this function has a frame pointer (force-frame-pointers=yes
    // in .cargo/config.toml): [rbp + 8] is its return address, readable
    // stack memory.
    unsafe { std::arch::asm!("mov {}, [rbp + 8]", out(reg) ret, options(nostack, readonly)) };
    vec![ip, ret]
}

/// The executable file-backed mappings of this process, each with its
/// build id, as the recorder writes the MAPPINGS frame.
fn self_mappings() -> Vec<Mapping> {
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

fn me() -> PathBuf {
    std::env::current_exe().unwrap().canonicalize().unwrap()
}

/// This binary's mappings only, rewritten by `f`.
fn my_mappings(f: impl Fn(&mut Mapping)) -> Vec<Mapping> {
    let me = me();
    let mut ms: Vec<Mapping> = self_mappings()
        .into_iter()
        .filter(|m| Path::new(&m.path) == me)
        .collect();
    assert!(!ms.is_empty(), "no executable mapping of {me:?}");
    ms.iter_mut().for_each(f);
    ms
}

fn names(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| {
            format!(
                "{}{} @ {}:{}",
                if f.inlined { "(inlined) " } else { "" },
                f.function,
                f.file.as_deref().unwrap_or("?"),
                f.line.unwrap_or(0)
            )
        })
        .collect()
}

fn assert_at(frame: &Frame, function: &str, line: u32, all: &[Frame]) {
    assert!(
        frame.function.ends_with(function),
        "want {function}, got {:#?}",
        names(all)
    );
    assert!(
        frame
            .file
            .as_deref()
            .is_some_and(|f| f.ends_with("tests/symbolize.rs")),
        "{:#?}",
        names(all)
    );
    assert_eq!(frame.line, Some(line), "{:#?}", names(all));
}

#[test]
fn own_functions_with_inlined_frame_and_return_address() {
    let stack = sampled(); // @ret
    let mut s = Symbolizer::new(&self_mappings(), SymbolizeOptions::default());
    let frames = s.stack(&stack);
    eprintln!("{:#?}", names(&frames));
    assert_eq!(frames.len(), 3, "{:#?}", names(&frames));
    // The inlined helper first, at the asm line, then the function it was
    // inlined into, at the call of the helper, then the caller at the call
    // of `sampled` (the return address looked up one byte before).
    assert_at(&frames[0], "current_ip", line_of("// @ip"), &frames);
    assert!(frames[0].inlined);
    assert_at(
        &frames[1],
        "symbolize::sampled",
        line_of("// @call"),
        &frames,
    );
    assert!(!frames[1].inlined);
    assert_at(
        &frames[2],
        "own_functions_with_inlined_frame_and_return_address",
        line_of("// @ret"),
        &frames,
    );
    // Demangled, without the Rust hash suffix.
    assert!(frames.iter().all(|f| !f.function.contains("17h")));
    let exe = me();
    let module = exe.file_name().unwrap().to_str().unwrap();
    assert!(frames.iter().all(|f| &*f.module == module));
    assert_eq!(s.problems(), Vec::<String>::new());
    // Cached: the same answer again.
    assert_eq!(s.stack(&stack), frames);
}

#[test]
fn entry_address_of_a_function_pointer() {
    let addr = sampled as fn() -> Vec<u64> as usize as u64;
    let mut s = Symbolizer::new(&self_mappings(), SymbolizeOptions::default());
    let frames = s.stack(&[addr]);
    assert_eq!(frames.len(), 1, "{:#?}", names(&frames));
    assert!(
        frames[0].function.ends_with("symbolize::sampled"),
        "{:#?}",
        names(&frames)
    );
    assert!(!frames[0].inlined);
}

#[test]
fn wrong_build_id_is_never_used() {
    let stack = sampled();
    let ms = my_mappings(|m| {
        assert!(!m.build_id.is_empty(), "test binary without a build id");
        m.build_id[0] ^= 0xff;
    });
    let mut s = Symbolizer::new(&ms, SymbolizeOptions::default());
    let frames = s.stack(&stack);
    assert_eq!(frames.len(), 2);
    assert!(
        frames.iter().all(Frame::is_unknown),
        "{:#?}",
        names(&frames)
    );
    let module = me().file_name().unwrap().to_string_lossy().into_owned();
    let start = ms
        .iter()
        .find(|m| m.start <= stack[0] && stack[0] < m.end)
        .unwrap();
    assert_eq!(
        &*frames[0].function,
        format!(
            "[unknown] {module}+{:#x}",
            stack[0] - start.start + start.file_offset
        )
    );
    let problems = s.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains(": build id mismatch: recorded "),
        "{problems:?}"
    );
    assert!(
        problems[0].contains("2 of 2 addresses unresolved"),
        "{problems:?}"
    );
}

#[test]
fn found_through_search_dirs_by_name_and_by_build_id() {
    let stack = sampled();
    let exe = me();
    // Recorded elsewhere (another machine's path): found by file name.
    let ms = my_mappings(|m| {
        m.path = format!(
            "/nonexistent/build/{}",
            exe.file_name().unwrap().to_string_lossy()
        )
    });
    let mut s = Symbolizer::new(&ms, SymbolizeOptions::default());
    assert!(s.stack(&stack).iter().all(Frame::is_unknown));
    assert!(
        s.problems()[0].contains(": not found (build id "),
        "{:?}",
        s.problems()
    );
    let dir = exe.parent().unwrap().to_path_buf();
    let mut s = Symbolizer::new(
        &ms,
        SymbolizeOptions {
            search_dirs: vec![dir],
        },
    );
    let frames = s.stack(&stack);
    assert!(
        frames[1].function.ends_with("symbolize::sampled"),
        "{:#?}",
        names(&frames)
    );
    assert_eq!(s.problems(), Vec::<String>::new());

    // Under another name, in a `.build-id/xx/yyyy` tree.
    let ms = my_mappings(|m| m.path = "/nonexistent/renamed".into());
    let hex: String = ms[0].build_id.iter().map(|b| format!("{b:02x}")).collect();
    let tree = tempfile::tempdir().unwrap();
    let sub = tree.path().join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    std::os::unix::fs::symlink(&exe, sub.join(&hex[2..])).unwrap();
    let opts = SymbolizeOptions {
        search_dirs: vec![tree.path().to_path_buf()],
    };
    let mut s = Symbolizer::new(&ms, opts);
    let frames = s.stack(&stack);
    assert!(
        frames[1].function.ends_with("symbolize::sampled"),
        "{:#?}",
        names(&frames)
    );
    assert!(frames.iter().all(|f| &*f.module == "renamed"));
}

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} (binutils) is needed in CI"
        );
        eprintln!("skipped: {tool} not installed (binutils)");
    }
    found
}

#[test]
fn stripped_binary_says_so_and_names_nothing_wrong() {
    if !have("objcopy") {
        return;
    }
    let stack = sampled();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("stripped-copy");
    let out = Command::new("objcopy")
        .arg("--strip-all")
        .arg(me())
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The build id note survives stripping, so the copy is the same build.
    let ms = my_mappings(|m| m.path = copy.display().to_string());
    assert_eq!(
        runtrace_symbolize::build_id(&copy).unwrap().as_deref(),
        Some(&ms[0].build_id[..])
    );
    let mut s = Symbolizer::new(&ms, SymbolizeOptions::default());
    let frames = s.stack(&stack);
    // Only dynamic symbols are left: nothing may claim these addresses
    // but the functions really there.
    for f in &frames {
        assert!(f.is_unknown(), "{:#?}", names(&frames));
        assert_eq!(f.file, None);
        assert!(
            f.function.starts_with("[unknown] stripped-copy+0x"),
            "{f:?}"
        );
    }
    let problems = s.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with(&format!(
            "{}: stripped (no symbol table / no debug info)",
            copy.display()
        )),
        "{problems:?}"
    );
}

#[test]
fn symbols_without_debug_info_name_functions_but_say_no_lines() {
    if !have("objcopy") {
        return;
    }
    let stack = sampled();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("nodebug-copy");
    let out = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(me())
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ms = my_mappings(|m| m.path = copy.display().to_string());
    let mut s = Symbolizer::new(&ms, SymbolizeOptions::default());
    let frames = s.stack(&stack);
    // No DWARF: no inlined frame, no file:line, but the right names.
    assert_eq!(frames.len(), 2, "{:#?}", names(&frames));
    assert!(
        frames[0].function.ends_with("symbolize::sampled"),
        "{:#?}",
        names(&frames)
    );
    assert!(frames.iter().all(|f| f.file.is_none() && f.line.is_none()));
    let problems = s.problems();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains(": no debug info: function names only"),
        "{problems:?}"
    );
}

#[test]
fn addresses_outside_every_mapping_and_a_later_mapping_replacing_one() {
    let a = Mapping {
        start: 0x1000,
        end: 0x2000,
        file_offset: 0,
        build_id: vec![1; 20],
        path: "/nonexistent/old".into(),
    };
    let b = Mapping {
        path: "/nonexistent/new".into(),
        ..a.clone()
    };
    let mut s = Symbolizer::new(&[a, b], SymbolizeOptions::default());
    let frames = s.stack(&[0x1800, 0x2000, 0x1001]);
    assert_eq!(&*frames[0].function, "[unknown] new+0x800");
    assert_eq!(&*frames[1].function, "[unknown] 0x2000");
    assert_eq!(&*frames[1].module, "");
    // A return address is named by its own offset (looked up one byte before).
    assert_eq!(&*frames[2].function, "[unknown] new+0x1");
    let p = s.problems();
    assert_eq!(p.len(), 2, "{p:#?}");
    assert!(
        p[0].starts_with("/nonexistent/new: not found (build id 0101"),
        "{p:?}"
    );
    assert!(p[0].contains("2 of 2 addresses unresolved"), "{p:?}");
    assert!(
        p[1].starts_with("1 addresses outside every recorded mapping"),
        "{p:?}"
    );
}
