//! Writes a finished recording out again as if it were being recorded,
//! faster: its files appear one by one as `.active` files that grow at
//! each writer round (`ROUND` frame) when the round's time comes, sealed
//! and renamed as the recorder does (docs/format.md section 11), with
//! time compressed so that the copy runs at `--rate` events per second.
//!
//! This is how `runtrace top`'s CPU is measured at a rate this 2-vCPU
//! machine cannot record beside it (issue 38 asks for 1M events/s): the
//! events are the recorded service's, in its order and mix, and only the
//! clock is faster. Each file's header says `ticks_per_sec` times the
//! speed-up, so every tick-based time (polls, delays, windows) shrinks by
//! it and `top` sees a recording of `--rate` events per second of its own
//! time, written in real time. Writing costs a copy per round and a sleep;
//! `tools/top_cpu.py --paced` measures `top` beside it.
//!
//! ```text
//! cargo run --release -p runtrace-top --example paced -- SRC_DIR OUT_PREFIX [--rate EVENTS_PER_S]
//! ```
//!
//! Prints the source's rate, the speed-up and, when done, the rate
//! written.

use runtrace_format::frame::{self, FrameType, Header, FRAME_HEADER_LEN};
use runtrace_format::varint::Cursor;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One frame of a source file: its type byte and the bytes it spans
/// (header, length, crc and payload) in the file.
struct Frame {
    ty: u8,
    at: usize,
    len: usize,
}

/// The frames of a whole file, or why it cannot be paced.
fn frames(path: &Path, b: &[u8]) -> Result<Vec<Frame>, String> {
    if !b.starts_with(runtrace_format::MAGIC) {
        return Err(format!("{}: not a runtrace file", path.display()));
    }
    let mut out = Vec::new();
    let mut at = runtrace_format::MAGIC.len();
    while at + FRAME_HEADER_LEN <= b.len() {
        let n = u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap()) as usize;
        let len = FRAME_HEADER_LEN + n;
        if at + len > b.len() {
            break;
        }
        out.push(Frame { ty: b[at], at, len });
        at += len;
    }
    if at != b.len() {
        return Err(format!(
            "{}: a frame cut short at byte {at} (a truncated file)",
            path.display()
        ));
    }
    Ok(out)
}

/// The payload of frame `f` of `b`.
fn payload<'a>(b: &'a [u8], f: &Frame) -> &'a [u8] {
    &b[f.at + FRAME_HEADER_LEN..f.at + f.len]
}

/// A ROUND frame's watermark, an END frame's event count.
fn first_varint(p: &[u8]) -> Result<u64, String> {
    Cursor::new(p).varint().map_err(|e| e.what.to_string())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("paced: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (Some(src), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: paced SRC_DIR OUT_PREFIX [--rate EVENTS_PER_S]".into());
    };
    let mut rate = 1_000_000f64;
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().map(|v| v.parse::<f64>())) {
            ("--rate", Some(Ok(v))) if v > 0.0 => rate = v,
            _ => return Err(format!("bad argument {a:?} (--rate EVENTS_PER_S)")),
        }
    }
    let mut paths = runtrace_format::files::expand(&[PathBuf::from(&src)])?;
    runtrace_format::files::sort_trace_paths(&mut paths);
    let files: Vec<(PathBuf, Vec<u8>)> = paths
        .into_iter()
        .map(|p| {
            std::fs::read(&p)
                .map(|b| (p.clone(), b))
                .map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect::<Result<_, _>>()?;
    if files.is_empty() {
        return Err(format!("{src}: no trace files"));
    }
    // The source's rate: events (END frames) over its rounds' span.
    let (mut events, mut first, mut last, mut header) = (0u64, u64::MAX, 0u64, None);
    let mut parsed = Vec::new();
    for (p, b) in &files {
        let fs = frames(p, b)?;
        for f in &fs {
            let pl = payload(b, f);
            match FrameType::from_u8(f.ty) {
                Some(FrameType::Header) if header.is_none() => {
                    header = Some(
                        Header::decode(pl).map_err(|e| format!("{}: {}", p.display(), e.what))?,
                    )
                }
                Some(FrameType::Round) => {
                    let w = first_varint(pl)?;
                    first = first.min(w);
                    last = last.max(w);
                }
                Some(FrameType::End) => events += first_varint(pl)?,
                _ => {}
            }
        }
        parsed.push(fs);
    }
    let h = header.ok_or_else(|| format!("{src}: no HEADER frame"))?;
    // From the first round on: the files before it may have been evicted.
    let span_s = last.saturating_sub(first) as f64 / h.ticks_per_sec as f64;
    if events == 0 || span_s <= 0.0 {
        return Err(format!(
            "{src}: no sealed file with events (END frames) or no rounds"
        ));
    }
    let src_rate = events as f64 / span_s;
    let speed = rate / src_rate;
    let tps = (h.ticks_per_sec as f64 * speed).round() as u64;
    eprintln!(
        "paced: {events} events over {span_s:.1} s ({src_rate:.0}/s), written {speed:.2}x faster: {rate:.0}/s for {:.1} s",
        span_s / speed
    );
    let start = Instant::now();
    for ((p, b), fs) in files.iter().zip(&parsed) {
        let hdr = fs
            .iter()
            .find(|f| f.ty == FrameType::Header as u8)
            .ok_or_else(|| format!("{}: no HEADER frame", p.display()))?;
        let mut h = Header::decode(payload(b, hdr)).map_err(|e| e.what.to_string())?;
        h.ticks_per_sec = tps;
        let name = format!("{out}.{}.bin", h.file_index);
        let active = format!("{name}.active");
        let mut w = std::fs::File::create(&active).map_err(|e| format!("{active}: {e}"))?;
        let mut pending = runtrace_format::MAGIC.to_vec();
        frame::write(&mut pending, FrameType::Header, &h.encode());
        let mut sealed = false;
        for f in fs.iter().filter(|f| f.at != hdr.at) {
            pending.extend_from_slice(&b[f.at..f.at + f.len]);
            sealed |= f.ty == FrameType::End as u8;
            if f.ty == FrameType::Round as u8 {
                // The round is written when its time comes.
                let wm = first_varint(payload(b, f))?;
                let due = Duration::from_secs_f64(wm.saturating_sub(first) as f64 / tps as f64);
                if let Some(d) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(d);
                }
                w.write_all(&pending)
                    .map_err(|e| format!("{active}: {e}"))?;
                pending.clear();
            }
        }
        w.write_all(&pending)
            .map_err(|e| format!("{active}: {e}"))?;
        drop(w);
        if sealed {
            std::fs::rename(&active, &name).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    let took = start.elapsed().as_secs_f64();
    eprintln!(
        "paced: wrote {events} events in {took:.1} s ({:.0}/s)",
        events as f64 / took
    );
    Ok(())
}
