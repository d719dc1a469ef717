//! What dense chunks (docs/format.md section 6.1) cost the recorder's
//! writer thread and a reader: the chunks of the given trace files, as
//! plain records, are encoded with `dense::encode` and decoded back with
//! `dense::decode`, 20 times each; prints the median ns per event of each
//! and the sizes (docs/measurements/density.md).
//!
//! ```text
//! cargo run --release -p runtrace-format --example dense_cost -- DIR/trace.*.bin
//! cargo run --release -p runtrace-format --example dense_cost -- --rewrite IN OUT
//! ```
//!
//! `--rewrite` writes `IN` with its plain chunks rewritten as dense ones,
//! as a 1.3 writer would have framed them (the fuzz corpus' dense seed).

use runtrace_format::dense;
use runtrace_format::reader::RawRecord;
use runtrace_format::FileReader;
use std::time::Instant;

/// `input` with every `CHUNK` frame rewritten as a `DCHUNK`.
fn rewrite(input: &str, output: &str) {
    let bytes = std::fs::read(input).expect("a readable trace file");
    let mut r = FileReader::new(&bytes[..], input);
    let (mut out, mut last) = (Vec::new(), 0usize);
    while let Some(item) = r.next_raw() {
        if let Ok(RawRecord::Chunk(c)) = item {
            out.extend_from_slice(&bytes[last..c.offset as usize]);
            let mut p = Vec::new();
            c.header.encode(&mut p);
            let t = c.tables;
            dense::encode(c.body, &|id| t.schema(id).map(|s| &**s), &mut p)
                .expect("chunks that decode");
            runtrace_format::frame::write(&mut out, runtrace_format::frame::FrameType::DChunk, &p);
            last = (c.offset + c.frame_len) as usize;
        }
    }
    out.extend_from_slice(&bytes[last..]);
    std::fs::write(output, &out).expect("a writable output");
    println!(
        "{input}: {} bytes -> {output}: {} bytes",
        bytes.len(),
        out.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 3 && args[0] == "--rewrite" {
        return rewrite(&args[1], &args[2]);
    }
    // (tables, plain body, events) per chunk; the schemas of each file.
    let mut chunks: Vec<(usize, Vec<u8>, u64)> = Vec::new();
    // Indexed by type id, as the writer keeps them.
    let mut schemas: Vec<Vec<Option<runtrace_format::Schema>>> = Vec::new();
    for path in std::env::args().skip(1) {
        let mut r = FileReader::open(&path).expect("a readable trace file");
        let fi = schemas.len();
        schemas.push(Vec::new());
        while let Some(item) = r.next_raw() {
            if let Ok(RawRecord::Chunk(c)) = item {
                // The reader hands out a dense chunk expanded: plain records.
                chunks.push((fi, c.body.to_vec(), c.header.count));
                schemas[fi] = (0..256u32)
                    .map(|id| c.tables.schema(id).map(|s| (**s).clone()))
                    .collect();
            }
        }
    }
    let events: u64 = chunks.iter().map(|c| c.2).sum();
    let plain: usize = chunks.iter().map(|c| c.1.len()).sum();
    let mut dense_bodies = Vec::new();
    let (mut enc, mut dec, mut walk) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..20 {
        // For scale: one walk of the plain records, what every reader
        // does to decode them anyway.
        let t = Instant::now();
        let mut n = 0;
        for (fi, body, _) in &chunks {
            let s = &schemas[*fi];
            let mut st = runtrace_format::chunk::ChunkState {
                ticks: 0,
                task_reg: 0,
                worker_reg: u32::MAX,
            };
            n += runtrace_format::chunk::walk(
                body,
                &mut st,
                |id| s.get(id as usize)?.as_ref(),
                |_| Ok(()),
            )
            .unwrap_or(0);
        }
        assert_eq!(n, events);
        walk.push(t.elapsed().as_nanos() as f64 / events as f64);
        let t = Instant::now();
        let mut out = Vec::new();
        for (fi, body, _) in &chunks {
            let s = &schemas[*fi];
            let mut d = Vec::with_capacity(body.len());
            dense::encode(body, &|id| s.get(id as usize)?.as_ref(), &mut d).unwrap();
            out.push(d);
        }
        enc.push(t.elapsed().as_nanos() as f64 / events as f64);
        let t = Instant::now();
        for ((fi, body, _), d) in chunks.iter().zip(&out) {
            let s = &schemas[*fi];
            let mut back = Vec::with_capacity(body.len());
            dense::decode(d, &|id| s.get(id as usize)?.as_ref(), &mut back).unwrap();
            assert_eq!(&back, body);
        }
        dec.push(t.elapsed().as_nanos() as f64 / events as f64);
        if round == 0 {
            dense_bodies = out;
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let dense: usize = dense_bodies.iter().map(Vec::len).sum();
    println!(
        "{} chunks, {events} events: plain records {plain} bytes ({:.3}/event), dense {dense} bytes ({:.3}/event)",
        chunks.len(),
        plain as f64 / events as f64,
        dense as f64 / events as f64
    );
    println!(
        "encode (writer thread): {:.1} ns/event; decode (readers): {:.1} ns/event; for scale, chunk::walk of the plain records: {:.1} ns/event (medians of 20 rounds)",
        median(&mut enc),
        median(&mut dec),
        median(&mut walk)
    );
}
