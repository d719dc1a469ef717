use runtrace_format::{FileReader, Record};
use runtrace_recorder::{Istr, Loc, Recorder};

#[test]
fn smoke() {
    let dir = std::env::temp_dir().join(format!("rt-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let g = Recorder::builder().path(dir.join("trace")).start().unwrap();
    let q = Istr::new("latency");
    for t in 1..=1000u64 {
        runtrace_recorder::task_spawn(t, 0, Loc::caller(), q);
        runtrace_recorder::task_poll_start(t, 0, q, 3);
        runtrace_recorder::task_poll_end(t, 0, true);
        runtrace_recorder::task_terminate(t);
    }
    let st = g.finish().unwrap();
    assert_eq!(st.events, 4000);
    let mut n = 0;
    let mut bytes = 0;
    for r in FileReader::open(dir.join("trace.0.bin")).unwrap() {
        match r.unwrap() {
            Record::Events { events, frame_len, .. } => { n += events.len(); bytes += frame_len; }
            _ => {}
        }
    }
    eprintln!("{st:?} chunk bytes/event {}", bytes as f64 / n as f64);
    assert_eq!(n, 4000);
}
