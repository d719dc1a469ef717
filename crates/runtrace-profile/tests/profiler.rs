//! The profiler through its public interface, as the recorder's writer
//! drives it: what it encodes reads back with runtrace-format's reader,
//! and its samplers sample a busy thread handed to it by thread id.
//! (End-to-end recordings with CPU profiles are tested in
//! `runtrace-recorder/tests/cpu_profile.rs`.)

use runtrace_core::clock::{gettid, TraceClock};
use runtrace_format::frame::{self, FrameType, Header, ProfileInfo};
use runtrace_format::schema::builtin_schemas;
use runtrace_format::{FileReader, Record};
use runtrace_profile::{CpuBackend, Profiler, RawKind, RawSample};
use std::hint::black_box;
use std::sync::mpsc::channel;
use std::sync::{Mutex, MutexGuard};

/// The samplers are per process (one SIGPROF handler, one parked table):
/// one profiler at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A file's start as the recorder writes it: magic, header, then the
/// profiler's first frames.
fn file_start(p: &mut Profiler, clock: &TraceClock) -> Vec<u8> {
    let header = Header {
        version_major: runtrace_format::VERSION_MAJOR,
        version_minor: runtrace_format::VERSION_MINOR,
        ticks_per_sec: clock.ticks_per_sec(),
        anchor_ticks: 0,
        anchor_wall_ns: 0,
        pid: std::process::id() as u64,
        process_name: "profiler-test".into(),
        recording_id: 1,
        file_index: 0,
        schemas: builtin_schemas(),
    };
    let mut file = runtrace_format::MAGIC.to_vec();
    frame::write(&mut file, FrameType::Header, &header.encode());
    p.file_start(&mut file);
    file
}

/// One sample event as read back: (name, tid, ticks, stack frames, off_ns).
type Read = (String, u64, u64, Vec<u64>, Option<u64>);

fn read_back(file: Vec<u8>) -> (Vec<Read>, ProfileInfo) {
    let mut r = FileReader::new(std::io::Cursor::new(file), "profile.bin");
    let mut out = Vec::new();
    while let Some(rec) = r.next() {
        let Record::Events { events, .. } = rec.expect("the profiler's frames read back") else {
            continue;
        };
        for e in events {
            let field = |name: &str| {
                let v = e.u64(name);
                assert!(v.is_some(), "{}: no u64 field {name}", e.schema.name);
                v
            };
            let stack_id = field("stack").unwrap();
            let frames = r
                .tables()
                .stack(stack_id)
                .unwrap_or_else(|| panic!("stack {stack_id} used but not defined in the file"))
                .to_vec();
            let off_ns = (e.schema.name == "off_cpu").then(|| field("off_ns").unwrap());
            out.push((
                e.schema.name.to_string(),
                field("tid").unwrap(),
                e.ticks,
                frames,
                off_ns,
            ));
        }
    }
    let info = r.tables().profile().expect("a PROFILE frame").clone();
    (out, info)
}

fn sample(tid: u64, ticks: u64, kind: RawKind, stack: &[u64]) -> RawSample {
    RawSample {
        tid,
        ticks,
        kind,
        stack: stack.to_vec(),
    }
}

#[test]
fn encoded_rounds_read_back_with_their_stacks() {
    let _g = serial();
    let clock = TraceClock::get();
    let mut p = Profiler::start(99, CpuBackend::Off, true, clock);
    assert_eq!(p.info().mode, ProfileInfo::MODE_NONE);
    let mut file = file_start(&mut p, clock);
    let t0 = clock.now();
    let a = [0x1000, 0x2000, 0x3000];
    let b = [0x1100, 0x2000];
    // Round 1 is encoded but "fails to write": its STACKS frame is lost,
    // so round 2, using the same stack, must define it again.
    let lost = p.encode(&[sample(7, t0 + 1, RawKind::OnCpu, &a)], 99);
    assert!(!lost.defs.is_empty() && !lost.chunk.is_empty());
    p.undo(lost.undo);
    let round2 = [
        sample(7, t0 + 10, RawKind::OnCpu, &a),
        sample(8, t0 + 20, RawKind::OffCpu { off_ns: 5_000 }, &b),
    ];
    let r = p.encode(&round2, 99);
    file.extend_from_slice(&r.defs);
    file.extend_from_slice(&r.chunk);
    // Round 3 reuses both stacks: defined once per file, nothing new.
    let round3 = [sample(8, t0 + 30, RawKind::OnCpu, &b)];
    let r = p.encode(&round3, 99);
    assert!(
        r.defs.is_empty(),
        "stacks the file defines are not repeated"
    );
    file.extend_from_slice(&r.chunk);
    // A round without samples writes nothing.
    let r = p.encode(&[], 99);
    assert!(r.defs.is_empty() && r.chunk.is_empty());

    let (got, info) = read_back(file);
    assert_eq!(info.mode, ProfileInfo::MODE_NONE);
    assert!(
        info.message.contains("RUNTRACE_CPU_FALLBACK=off"),
        "{}",
        info.message
    );
    let want: Vec<Read> = vec![
        ("cpu_sample".into(), 7, t0 + 10, a.to_vec(), None),
        ("off_cpu".into(), 8, t0 + 20, b.to_vec(), Some(5_000)),
        ("cpu_sample".into(), 8, t0 + 30, b.to_vec(), None),
    ];
    assert_eq!(got, want);
}

#[inline(never)]
fn spin_cpu_ms(ms: u64) -> u64 {
    let start = runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let mut x = 1u64;
    while runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start
        < ms * 1_000_000
    {
        for _ in 0..10_000 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    x
}

/// Hands a thread that burns `ms` of CPU to `p`, and returns the samples
/// collected afterwards and that thread's id.
fn sample_busy_thread(p: &mut Profiler, ms: u64) -> (Vec<RawSample>, u64) {
    sample_thread(p, move || {
        black_box(spin_cpu_ms(ms));
    })
}

/// Hands a thread that runs `work` to `p`, and returns the samples
/// collected afterwards and that thread's id.
fn sample_thread(p: &mut Profiler, work: impl FnOnce() + Send + 'static) -> (Vec<RawSample>, u64) {
    let (tid_tx, tid_rx) = channel();
    let (go_tx, go_rx) = channel::<()>();
    let t = std::thread::spawn(move || {
        tid_tx.send(gettid()).unwrap();
        go_rx.recv().unwrap();
        work();
    });
    let tid = tid_rx.recv().unwrap();
    p.add_thread(tid);
    go_tx.send(()).unwrap();
    t.join().unwrap();
    let mut samples = Vec::new();
    p.collect(TraceClock::get().now(), &mut samples);
    p.remove_thread(tid);
    (samples, tid)
}

fn check_on_cpu_samples(samples: &[RawSample], tid: u64, hz: u64, ms: u64, what: &str) {
    let mine: Vec<&RawSample> = samples.iter().filter(|s| s.tid == tid).collect();
    let on_cpu = mine.iter().filter(|s| s.kind == RawKind::OnCpu).count() as u64;
    // hz * ms / 1000 expected; a tenth of it rules out "no sampling"
    // without depending on how loaded the machine is.
    assert!(
        on_cpu >= hz * ms / 1000 / 10,
        "{what}: {on_cpu} on-CPU samples of the busy thread, expected about {}",
        hz * ms / 1000
    );
    assert!(
        mine.iter().all(|s| !s.stack.is_empty()),
        "{what}: every sample of the busy thread has a user stack"
    );
    assert!(
        samples.windows(2).all(|w| w[0].ticks <= w[1].ticks),
        "{what}: time order"
    );
}

#[test]
fn signal_fallback_samples_a_thread_handed_to_it() {
    let _g = serial();
    let (hz, ms) = (999, 300);
    let mut p = Profiler::start(hz as u32, CpuBackend::Signal, true, TraceClock::get());
    assert_eq!(
        p.info().mode,
        ProfileInfo::MODE_SIGNAL,
        "{}",
        p.info().message
    );
    assert!(
        !p.info().off_cpu(),
        "the signal fallback takes no off-CPU stacks"
    );
    let (samples, tid) = sample_busy_thread(&mut p, ms);
    check_on_cpu_samples(&samples, tid, hz, ms, "signal");
    assert!(samples.iter().all(|s| s.kind == RawKind::OnCpu));
}

#[test]
fn perf_samples_a_thread_handed_to_it_or_says_why_not() {
    let _g = serial();
    let (hz, ms) = (999, 300);
    let mut p = Profiler::start(hz as u32, CpuBackend::PerfThread, false, TraceClock::get());
    if p.info().mode != ProfileInfo::MODE_PERF {
        // No perf_event_open here: the profile says why, and fell back.
        assert!(
            p.info().message.contains("perf_event_open"),
            "{}",
            p.info().message
        );
        eprintln!("perf_event_open refused: {}", p.info().message);
        return;
    }
    let (samples, tid) = sample_busy_thread(&mut p, ms);
    check_on_cpu_samples(&samples, tid, hz, ms, "perf");
}

/// `[addr, addr + size)` of the libc function `name` (its dynamic symbol's
/// size, read from the library file `dladdr` names).
fn libc_function(name: &str) -> std::ops::Range<u64> {
    use object::{Object, ObjectSymbol};
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only
    // looks the symbol up; dladdr fills `info` for an address in a
    // loaded object.
    let (addr, path) = unsafe {
        let addr = libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr());
        assert!(!addr.is_null(), "no {name} in this process");
        let mut info: libc::Dl_info = std::mem::zeroed();
        assert!(libc::dladdr(addr, &mut info) != 0, "dladdr({name})");
        let path = std::ffi::CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned();
        (
            addr as u64,
            (path, info.dli_saddr as u64, info.dli_fbase as u64),
        )
    };
    let data = std::fs::read(&path.0).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let sym_addr = path.1 - path.2;
    let size = file
        .dynamic_symbols()
        .find(|s| s.address() == sym_addr && s.size() > 0)
        .map(|s| s.size())
        .unwrap_or_else(|| panic!("no size for {name} in {}", path.0));
    addr..addr + size
}

/// A thread that sends and receives datagrams on a socket pair for `ms`
/// of CPU: most of its time is in glibc's `send` and `recv`, which keep
/// no frame pointer (on a multi-threaded process they hold the
/// cancellation state in `rbp`).
#[inline(never)]
fn send_loop_marker(ms: u64) -> u64 {
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two fds into the array it is given.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair");
    let start = runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let (mut buf, mut n) = ([7u8; 64], 0u64);
    while runtrace_core::thread_time::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start
        < ms * 1_000_000
    {
        for _ in 0..64 {
            // SAFETY: valid fds of ours and a buffer of the length given.
            unsafe {
                libc::send(fds[0], buf.as_ptr().cast(), buf.len(), 0);
                libc::recv(fds[1], buf.as_mut_ptr().cast(), buf.len(), 0);
            }
            n += 1;
        }
    }
    // SAFETY: our own fds, closed once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    black_box(n)
}

/// Issue 35: on-CPU samples whose leaf is a glibc function without a
/// frame pointer still reach the function that called it. The kernel's
/// frame-pointer walk alone ends at `__libc_send`/`__libc_recv` here
/// (their `rbp` holds no frame): with the stack copy unwound by
/// `.eh_frame`, nearly all of those samples name `send_loop_marker`.
#[test]
fn perf_stacks_reach_the_caller_of_a_libc_function_without_frame_pointers() {
    let _g = serial();
    let mut p = Profiler::start(999, CpuBackend::PerfThread, false, TraceClock::get());
    if p.info().mode != ProfileInfo::MODE_PERF {
        assert!(
            std::env::var_os("CI").is_none(),
            "perf_event_open refused in CI: {}",
            p.info().message
        );
        eprintln!("skipped: perf_event_open refused: {}", p.info().message);
        return;
    }
    let (send, recv) = (libc_function("send"), libc_function("recv"));
    let (samples, tid) = sample_thread(&mut p, || {
        send_loop_marker(800);
    });
    let marker = send_loop_marker as *const () as usize as u64;
    // The marker's code: its symbol's size is not needed, the function
    // is small and its callees are libc's.
    let in_marker = |ip: &u64| (marker..marker + 1024).contains(ip);
    let in_libc: Vec<&RawSample> = samples
        .iter()
        .filter(|s| s.tid == tid && s.kind == RawKind::OnCpu)
        .filter(|s| {
            s.stack
                .first()
                .is_some_and(|ip| send.contains(ip) || recv.contains(ip))
        })
        .collect();
    let reached = in_libc
        .iter()
        .filter(|s| s.stack.iter().skip(1).any(in_marker))
        .count();
    let mine = samples.iter().filter(|s| s.tid == tid).count();
    eprintln!(
        "{mine} samples of the thread, {} on-CPU with the leaf in send/recv, {reached} reach send_loop_marker",
        in_libc.len()
    );
    assert!(
        in_libc.len() >= 20,
        "only {} samples in send/recv of {} on-CPU samples",
        in_libc.len(),
        samples.len()
    );
    assert!(
        reached * 10 >= in_libc.len() * 9,
        "{reached} of {} samples in send/recv reach their caller; first: {:x?}",
        in_libc.len(),
        in_libc.first().map(|s| &s.stack)
    );
}

/// Receives `n` datagrams on `fd`, each waited for in glibc's `recv`
/// (blocking): every wait is a switch-out inside a libc function without
/// a frame pointer.
#[inline(never)]
fn recv_wait_marker(fd: i32, n: usize) -> u64 {
    let mut buf = [0u8; 64];
    let mut got = 0u64;
    for _ in 0..n {
        // SAFETY: a valid fd of the caller's and a buffer of the length
        // given.
        let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        got += r.max(0) as u64;
    }
    black_box(got)
}

/// Issue 35: off-CPU stacks (the BPF switch tracer) of a thread that
/// blocks in glibc's `recv` reach the function that called it. The
/// frame-pointer walk alone ends in `__libc_recv` (it keeps the
/// cancellation state in `rbp`); the switch-out then carries a stack copy
/// the writer unwinds.
#[test]
fn off_cpu_stacks_reach_the_caller_of_a_blocking_libc_function() {
    let _g = serial();
    let mut p = Profiler::start(99, CpuBackend::Auto, true, TraceClock::get());
    let message = p.info().message.clone();
    if !message.contains("BPF program") || !message.contains("stack copy") {
        assert!(
            std::env::var_os("CI").is_none(),
            "no BPF off-CPU stacks with stack copies in CI: {message}"
        );
        eprintln!("skipped: no BPF off-CPU stacks with stack copies here (needs root): {message}");
        return;
    }
    let recv = libc_function("recv");
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two fds into the array it is given.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_DGRAM, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair");
    const N: usize = 200;
    let (tx, rx) = (fds[0], fds[1]);
    let (samples, tid) = sample_thread(&mut p, move || {
        let sender = std::thread::spawn(move || {
            for _ in 0..N {
                std::thread::sleep(std::time::Duration::from_millis(1));
                // SAFETY: a valid fd and a buffer of the length given.
                unsafe { libc::send(tx, [7u8; 8].as_ptr().cast(), 8, 0) };
            }
        });
        recv_wait_marker(rx, N);
        sender.join().unwrap();
    });
    // SAFETY: our own fds, closed once.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    let marker = recv_wait_marker as *const () as usize as u64;
    let in_marker = |ip: &u64| (marker..marker + 1024).contains(ip);
    let in_recv: Vec<&RawSample> = samples
        .iter()
        .filter(|s| s.tid == tid && matches!(s.kind, RawKind::OffCpu { .. }))
        .filter(|s| s.stack.first().is_some_and(|ip| recv.contains(ip)))
        .collect();
    let reached = in_recv
        .iter()
        .filter(|s| s.stack.iter().skip(1).any(in_marker))
        .count();
    // The copy reaches the thread's first frame: as deep as the thread's
    // stacks that the frame-pointer walk alone got whole (the sender's
    // sleeps are not ours; the thread's own other switch-outs are).
    let depth = |s: &&RawSample| s.stack.len();
    let mut depths: Vec<usize> = in_recv.iter().map(depth).collect();
    depths.sort_unstable();
    eprintln!(
        "{} off-CPU samples with the leaf in recv, {reached} reach recv_wait_marker, depths {:?}..{:?} ({message})",
        in_recv.len(),
        depths.first(),
        depths.last()
    );
    assert!(
        in_recv.len() >= N / 2,
        "only {} off-CPU samples in recv for {N} blocking receives",
        in_recv.len()
    );
    assert!(
        reached * 10 >= in_recv.len() * 9,
        "{reached} of {} off-CPU samples in recv reach their caller; first: {:x?}",
        in_recv.len(),
        in_recv.first().map(|s| &s.stack)
    );
}
