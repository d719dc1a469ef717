//! Following files as they are written: the same events as reading them
//! whole, whatever the cut points, across a rename and a rotation; files
//! evicted or damaged under the follower are named.

use runtrace_model::event::Ev;
use runtrace_model::input::{self, follow::Follow};
use runtrace_model::model::Model;
use runtrace_model::pass::{Pass, Wants};
use runtrace_model::synth::TraceBuilder;
use std::io::Write;

#[derive(Default)]
struct Keep(Vec<Ev>);
impl Pass for Keep {
    fn wants(&self) -> Wants {
        Wants::RUNTIME
    }
    fn event(&mut self, ev: &Ev, _: &Model) {
        self.0.push(*ev);
    }
}

fn busy(seed: u64, base: u64) -> Vec<u8> {
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    let mut t = base;
    for i in 0..400u64 {
        let task = seed * 10_000 + i;
        b.spawn(task, t, 1, 0, 1, 0);
        b.poll_start(task, 0, t + 10, 1 + (i % 2), 0, 0);
        b.poll_end(task, 0, t + 20, 1 + (i % 2), true);
        t += 1_000;
        if i % 50 == 49 {
            b.round(t);
        }
    }
    b.finish()
}

#[test]
fn a_growing_file_read_at_any_cut_gives_the_whole_read() {
    let dir = tempfile::tempdir().unwrap();
    let full = busy(1, 1_000);
    let whole = dir.path().join("whole.0.bin");
    std::fs::write(&whole, &full).unwrap();
    let mut want = Keep::default();
    input::read(std::slice::from_ref(&whole), &mut want, None);
    std::fs::remove_file(&whole).unwrap();
    assert!(want.0.len() > 1000);

    let active = dir.path().join("trace.0.bin.active");
    let mut f = std::fs::File::create(&active).unwrap();
    let mut fol = Follow::new(dir.path());
    let mut got = Keep::default();
    // Cut points that fall inside the magic, frame headers and payloads.
    let mut at = 0;
    for step in [3usize, 5, 1, 9, 17, 100, 1, 2, 333, 4096, 7, 50_000]
        .iter()
        .cycle()
    {
        if at >= full.len() {
            break;
        }
        let end = (at + step).min(full.len());
        f.write_all(&full[at..end]).unwrap();
        at = end;
        fol.poll(&mut got).unwrap();
    }
    drop(f);
    std::fs::rename(&active, dir.path().join("trace.0.bin")).unwrap();
    fol.poll(&mut got).unwrap();
    fol.flush(&mut got);
    assert_eq!(got.0, want.0);
    let st = fol.status();
    assert!(st.sealed_all, "{st:?}");
    assert_eq!(st.files, [dir.path().join("trace.0.bin")]);
    assert!(st.notes.is_empty(), "{:?}", st.notes);
}

#[test]
fn rotation_eviction_and_damage_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("trace.0.bin"), busy(1, 1_000)).unwrap();
    std::fs::write(d.join("trace.1.bin"), busy(2, 1_000_000)).unwrap();
    let mut fol = Follow::new(d);
    let mut got = Keep::default();
    fol.poll(&mut got).unwrap();
    let n1 = got.0.len();
    assert!(n1 > 0);
    // File 2 is written, then rotated, evicted and never seen: file 3
    // (damaged) comes next.
    std::fs::write(
        d.join("trace.3.bin"),
        b"RUNTRACE\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    )
    .unwrap();
    fol.poll(&mut got).unwrap();
    let st = fol.status();
    assert!(
        st.notes
            .iter()
            .any(|n| n.ends_with("trace.2.bin: evicted before it was read")),
        "{:?}",
        st.notes
    );
    assert!(
        st.notes
            .iter()
            .any(|n| n.contains("trace.3.bin") && n.contains("zeroed")),
        "{:?}",
        st.notes
    );
    // The directory vanishes: an error naming it, and no panic.
    drop(st);
    let p = d.to_path_buf();
    dir.close().unwrap();
    let e = fol.poll(&mut got).unwrap_err();
    assert!(
        e.contains(&*p.to_string_lossy()) && e.contains("gone"),
        "{e}"
    );
}

/// A recording's files given out of order (as a directory lists them) are
/// read in index order: a task spawned in the first file and ended in the
/// second comes out spawned first, and every event in time order.
#[test]
fn files_given_out_of_order_are_read_in_index_order() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.spawn(1, 1_000, 7, 0, 1, 0);
    b.poll_start(1, 0, 2_000, 7, 0, 0);
    b.poll_end(1, 0, 3_000, 7, false);
    std::fs::write(d.join("trace.9.bin"), b.finish()).unwrap();
    let mut b = TraceBuilder::new();
    b.location(1, "src/a.rs", 1, 1);
    b.poll_start(1, 0, 1_000_000, 7, 0, 0);
    b.poll_end(1, 0, 1_001_000, 7, true);
    b.terminate(1, 1_002_000, 7);
    std::fs::write(d.join("trace.10.bin"), b.finish()).unwrap();
    let mut got = Keep::default();
    let (_, st) = input::read(
        &[d.join("trace.10.bin"), d.join("trace.9.bin")],
        &mut got,
        None,
    );
    let ticks: Vec<u64> = got.0.iter().map(|e| e.ticks).collect();
    assert_eq!(
        ticks,
        [1_000, 2_000, 3_000, 1_000_000, 1_001_000, 1_002_000]
    );
    assert_eq!(st.files, [d.join("trace.9.bin"), d.join("trace.10.bin")]);
}
