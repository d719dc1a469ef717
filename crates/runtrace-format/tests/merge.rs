//! Section 8: `merge::EventStream` puts events of interleaved chunks from
//! several threads, and several files of one recording, in timestamp order.

mod common;

use common::*;
use proptest::prelude::*;
use runtrace_format::frame::{self, FrameType, Header};
use runtrace_format::merge::{sort_trace_paths, EventStream};
use runtrace_format::schema::FieldType;
use runtrace_format::Value;
use std::path::PathBuf;

const SEQ: u32 = 130;

fn file_header(index: u64) -> Header {
    let mut h = header(vec![schema(
        SEQ,
        "seq",
        &[("seq", FieldType::U64), ("w", FieldType::Worker)],
    )]);
    h.file_index = index;
    h
}

/// An event a thread recorded: (tid, ticks, per-thread sequence number).
type Ev = (u64, u64, u64);

/// A chunk of `evs` (all from one thread, in recording order).
fn chunk_of(evs: &[Ev]) -> Chunk {
    let tid = evs[0].0;
    let mut ticks = evs[0].1;
    let recs = evs
        .iter()
        .map(|&(_, t, seq)| {
            let dt = t - ticks;
            ticks = t;
            Rec::ev(SEQ, dt, vec![F::U(seq), F::Worker])
        })
        .collect();
    Chunk {
        worker: Some(tid as u32),
        ..Chunk::new(tid, evs[0].1, recs)
    }
}

/// Reads the files with an EventStream; checks ts order, per-thread order,
/// that nothing was lost or invented, and no errors.
fn check_stream(paths: &[PathBuf], recorded: &[Ev]) {
    let mut s = EventStream::open(paths).unwrap();
    let mut out: Vec<Ev> = Vec::new();
    while let Some(e) = s.next_event() {
        let Some(Value::U(seq)) = e.get("seq") else {
            panic!("{e:?}")
        };
        assert_eq!(e.get("w"), Some(&Value::Worker(Some(e.tid as u32))));
        out.push((e.tid, e.ticks, *seq));
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    assert_eq!(s.stats().files, paths.len() as u64);
    assert_eq!(s.stats().sealed, paths.len() as u64);
    assert_eq!(s.headers().len(), paths.len());
    for w in out.windows(2) {
        assert!(w[0].1 <= w[1].1, "out of order: {:?} then {:?}", w[0], w[1]);
    }
    for tid in 1..=3u64 {
        let seqs: Vec<u64> = out.iter().filter(|e| e.0 == tid).map(|e| e.2).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "thread {tid} reordered: {seqs:?}"
        );
    }
    let mut a = out.clone();
    let mut b = recorded.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "events lost or invented");
}

/// Writes what a drain loop would: per round, each thread's drained
/// events as chunks (threads in `order`), then ROUND(watermark). Files are
/// split after the rounds listed in `split_after`.
struct Writer {
    files: Vec<FileBuilder>,
    events_in_file: u64,
}

impl Writer {
    fn new() -> Writer {
        let mut w = Writer {
            files: Vec::new(),
            events_in_file: 0,
        };
        w.start_file();
        w
    }

    fn start_file(&mut self) {
        if let Some(f) = self.files.last_mut() {
            f.frame(FrameType::End, &frame::end(self.events_in_file, 0));
        }
        let mut f = FileBuilder::with_header(&file_header(self.files.len() as u64));
        for tid in 1..=3 {
            f.frame(
                FrameType::Thread,
                &frame::thread(tid, &format!("worker-{tid}")),
            );
        }
        self.files.push(f);
        self.events_in_file = 0;
    }

    fn chunk(&mut self, evs: &[Ev]) {
        if !evs.is_empty() {
            self.files.last_mut().unwrap().chunk(&chunk_of(evs));
            self.events_in_file += evs.len() as u64;
        }
    }

    fn round(&mut self, watermark: u64) {
        self.files
            .last_mut()
            .unwrap()
            .frame(FrameType::Round, &frame::round(watermark));
    }

    fn finish(mut self, dir: &TempDir) -> Vec<PathBuf> {
        let n = self.events_in_file;
        self.files
            .last_mut()
            .unwrap()
            .frame(FrameType::End, &frame::end(n, 0));
        let mut paths: Vec<PathBuf> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| dir.write(&format!("trace.{i}.bin"), &f.bytes))
            .collect();
        // Listing order does not matter once sorted numerically.
        paths.reverse();
        sort_trace_paths(&mut paths);
        paths
    }
}

/// A fixed example: two threads whose chunks interleave, a late event
/// (clock read before a round began, published after), two files.
#[test]
fn s8_merge_interleaved_threads_and_files() {
    let dir = TempDir::new();
    let mut w = Writer::new();
    // Round 1 began at 100: thread 2's chunk is written first.
    w.chunk(&[(2, 15, 0), (2, 60, 1), (2, 95, 2)]);
    w.chunk(&[(1, 10, 0), (1, 50, 1)]);
    w.chunk(&[(1, 70, 2)]);
    w.round(100);
    // Round 2 began at 200; thread 1's event at 99 was published late.
    w.chunk(&[(1, 99, 3), (1, 120, 4), (1, 190, 5)]);
    w.chunk(&[(2, 101, 3), (2, 150, 4)]);
    w.round(200);
    w.start_file();
    // Round 3 (file 1) began at 300; thread 2 at 199 was late.
    w.chunk(&[(2, 199, 5), (2, 250, 6)]);
    w.chunk(&[(1, 201, 6), (1, 299, 7)]);
    w.round(300);
    w.chunk(&[(1, 300, 8)]);
    w.chunk(&[(2, 300, 7), (2, 301, 8)]);
    let paths = w.finish(&dir);
    assert!(paths[0].ends_with("trace.0.bin"));
    let recorded = [
        (1, 10, 0),
        (1, 50, 1),
        (1, 70, 2),
        (1, 99, 3),
        (1, 120, 4),
        (1, 190, 5),
        (1, 201, 6),
        (1, 299, 7),
        (1, 300, 8),
        (2, 15, 0),
        (2, 60, 1),
        (2, 95, 2),
        (2, 101, 3),
        (2, 150, 4),
        (2, 199, 5),
        (2, 250, 6),
        (2, 300, 7),
        (2, 301, 8),
    ];
    check_stream(&paths, &recorded);
    // The whole recording also reads in order from one file.
    check_stream(
        &paths[..1],
        &recorded[..6]
            .iter()
            .chain(&recorded[9..14])
            .copied()
            .collect::<Vec<_>>(),
    );
}

/// Per round and thread: how many events, how many of them were published
/// late (drained in the next round), and whether the drained events are
/// split into two chunks.
#[derive(Debug, Clone)]
struct ThreadRound {
    n: usize,
    late: usize,
    split: bool,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random drain schedules: 1-3 threads, up to 6 rounds, late
    /// publishers, chunks of a round in any thread order, and the recording
    /// split into 1-3 files.
    #[test]
    fn s8_merge_orders_random_schedules(
        rounds in proptest::collection::vec(
            proptest::collection::vec(
                (0usize..6, 0usize..3, any::<bool>())
                    .prop_map(|(n, late, split)| ThreadRound { n, late: late.min(n), split }),
                1..=3,
            ),
            1..=6,
        ),
        seed in any::<u64>(),
        split_after in proptest::collection::vec(any::<bool>(), 6),
    ) {
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let threads = rounds[0].len();
        let dir = TempDir::new();
        let mut w = Writer::new();
        let mut recorded: Vec<Ev> = Vec::new();
        let mut seqs = vec![0u64; threads + 1];
        // Events each thread published late, drained in the next round.
        let mut carried: Vec<Vec<Ev>> = vec![Vec::new(); threads + 1];
        for (k, round) in rounds.iter().enumerate() {
            let lo = k as u64 * 1000;
            let watermark = lo + 1000;
            let mut drained: Vec<(u64, Vec<Ev>, bool)> = Vec::new();
            for tid in 1..=threads as u64 {
                let tr = &round[(tid as usize - 1) % round.len()];
                let mut ticks: Vec<u64> = (0..tr.n).map(|_| lo + next() % 1000).collect();
                ticks.sort_unstable();
                let evs: Vec<Ev> = ticks
                    .into_iter()
                    .map(|t| {
                        seqs[tid as usize] += 1;
                        (tid, t, seqs[tid as usize])
                    })
                    .collect();
                recorded.extend(&evs);
                let on_time = evs.len() - tr.late;
                let mut now = std::mem::take(&mut carried[tid as usize]);
                now.extend(&evs[..on_time]);
                carried[tid as usize] = evs[on_time..].to_vec();
                drained.push((tid, now, tr.split));
            }
            // Threads are drained in any order.
            for i in (1..drained.len()).rev() {
                drained.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            for (_, evs, split) in &drained {
                let mid = if *split { evs.len() / 2 } else { evs.len() };
                w.chunk(&evs[..mid]);
                w.chunk(&evs[mid..]);
            }
            w.round(watermark);
            if split_after[k] && k + 1 < rounds.len() {
                w.start_file();
            }
        }
        // The final drain after the last round.
        for evs in carried.iter().skip(1) {
            w.chunk(evs);
        }
        let paths = w.finish(&dir);
        check_stream(&paths, &recorded);
    }
}
