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
use std::path::Path;
use std::process::Command;
use support::{me, self_mappings};

mod support;

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
    let mut s = Symbolizer::new(&ms, opts.clone());
    let frames = s.stack(&stack);
    assert!(
        frames[1].function.ends_with("symbolize::sampled"),
        "{:#?}",
        names(&frames)
    );
    assert!(frames.iter().all(|f| &*f.module == "renamed"));

    // Only the debug file (`objcopy --only-keep-debug`, as distributions
    // ship them) as `.build-id/xx/yyyy.debug`: the same frames, lines
    // and inlined frame included.
    if !have("objcopy") {
        return;
    }
    std::fs::remove_file(sub.join(&hex[2..])).unwrap();
    objcopy(
        "--only-keep-debug",
        &sub.join(format!("{}.debug", &hex[2..])),
    );
    let mut s = Symbolizer::new(&ms, opts);
    let from_debug = s.stack(&stack);
    assert_eq!(from_debug, frames, "{:#?}", names(&from_debug));
    assert_eq!(from_debug.len(), 3, "{:#?}", names(&from_debug));
    assert_eq!(s.problems(), Vec::<String>::new());
}

/// `objcopy FLAG <this test binary> OUT`.
fn objcopy(flag: &str, out: &Path) {
    let o = Command::new("objcopy")
        .arg(flag)
        .arg(me())
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "objcopy {flag}: {err}");
}

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
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
    objcopy("--strip-all", &copy);
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
    objcopy("--strip-debug", &copy);
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
        p[1].starts_with("1 address outside every recorded mapping"),
        "{p:?}"
    );
}

#[test]
fn vdso_frames_are_named_vdso_without_a_problem() {
    let vdso = Mapping {
        start: 0x7fff_0000,
        end: 0x7fff_2000,
        file_offset: 0,
        build_id: vec![],
        path: "[vdso]".into(),
    };
    let mut s = Symbolizer::new(&[vdso], SymbolizeOptions::default());
    let frames = s.stack(&[0x7fff_0b46, 0x7fff_1001]);
    assert_eq!(names(&frames), ["[vdso] @ ?:0", "[vdso] @ ?:0"]);
    assert!(frames
        .iter()
        .all(|f| f.file.is_none() && &*f.module == "[vdso]"));
    assert!(s.problems().is_empty(), "{:?}", s.problems());
}

#[test]
fn nonsense_mappings_never_panic() {
    let odd = [
        Mapping {
            start: 0x1000,
            end: 0x2000,
            file_offset: u64::MAX,
            build_id: vec![],
            path: String::new(),
        },
        Mapping {
            start: 0x5000,
            end: 0x4000,
            file_offset: 0,
            build_id: vec![],
            path: "/".into(),
        },
        Mapping {
            start: 0x8000,
            end: u64::MAX,
            file_offset: u64::MAX - 1,
            build_id: vec![],
            path: me().display().to_string(),
        },
    ];
    let mut s = Symbolizer::new(&odd, SymbolizeOptions::default());
    let frames = s.stack(&[0x1800, 0x4800, 0x5000, u64::MAX - 1, 0x8000, 0]);
    assert_eq!(frames.len(), 6, "{:#?}", names(&frames));
    assert!(
        frames.iter().all(Frame::is_unknown),
        "{:#?}",
        names(&frames)
    );
    assert_eq!(&*frames[0].function, "[unknown] [anon]+0x7ff");
    let p = s.problems();
    assert!(
        p.iter()
            .any(|l| l.contains(": no build id recorded: symbolized with this file unverified")),
        "{p:#?}"
    );
}

/// The way tools use it: a trace file with this process's MAPPINGS and a
/// sampled stack, read back by `runtrace_format::FileReader`, then
/// symbolized from what the file says.
#[test]
fn stacks_and_mappings_read_back_from_a_trace_file() {
    use runtrace_format::frame::{self, FrameType, Header};
    use runtrace_format::FileReader;
    let stack = sampled();
    let header = Header {
        version_major: runtrace_format::VERSION_MAJOR,
        version_minor: runtrace_format::VERSION_MINOR,
        ticks_per_sec: 1_000_000_000,
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: std::process::id().into(),
        process_name: "symbolize".into(),
        recording_id: 1,
        file_index: 0,
        schemas: Vec::new(),
    };
    let mut file = runtrace_format::MAGIC.to_vec();
    frame::write(&mut file, FrameType::Header, &header.encode());
    let maps = self_mappings();
    frame::write(&mut file, FrameType::Mappings, &frame::mappings(&maps));
    let stacks = frame::stacks([(1, &stack[..])].into_iter());
    frame::write(&mut file, FrameType::Stacks, &stacks);

    let mut r = FileReader::new(&file[..], "mem");
    for rec in r.by_ref() {
        rec.unwrap();
    }
    assert_eq!(r.tables().mappings(), &maps[..]);
    let mut s = Symbolizer::new(r.tables().mappings(), SymbolizeOptions::default());
    let frames = s.stack(r.tables().stack(1).unwrap());
    assert_eq!(frames.len(), 3, "{:#?}", names(&frames));
    assert_at(&frames[0], "current_ip", line_of("// @ip"), &frames);
    assert_at(
        &frames[1],
        "symbolize::sampled",
        line_of("// @call"),
        &frames,
    );
    assert_eq!(s.problems(), Vec::<String>::new());
}

#[test]
fn frames_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Frame>();
    send_sync::<Mapping>();
}
