//! The delayed windows the engine kept ([`Engine::keep_waits`]) as
//! [`Wait`]s: which task waited from its wake to its poll, on which
//! worker, when. `runtrace blocked` looks at what that worker ran then.

use super::engine::Engine;
use super::report::WorkerId;
use runtrace_model::model::Model;

/// A poll that started more than the wake-delay threshold after its wake
/// (the engine's wake->poll pairing: the first wake, or the spawn, since
/// the task's previous poll).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The worker that finally polled the task.
    pub worker: WorkerId,
    /// The waiting task.
    pub task: u64,
    /// Its spawn location (`file:line:col`, or `<unknown>`).
    pub location: String,
    /// The wake, ns since the recording started.
    pub wake_ns: i64,
    /// The poll's start, ns since the recording started.
    pub poll_ns: i64,
    /// `poll_ns - wake_ns` as measured in ticks.
    pub delay_ns: u64,
}

impl Engine {
    /// The delayed windows kept over the read (none unless
    /// [`Engine::keep_waits`] was called before it), in the order their
    /// polls started, and how many more there were past the cap.
    ///
    /// ```
    /// use runtrace_analyze::runtime::Engine;
    /// use runtrace_model::{input, synth::TraceBuilder};
    /// let mut b = TraceBuilder::new();
    /// b.location(1, "src/main.rs", 3, 1);
    /// b.spawn(7, 0, 1, 0, 1, 0); // task 1 at location 1, on tid 7
    /// b.poll_start(7, 0, 30_000_000, 1, 0, 0); // 30 ms after its spawn
    /// b.poll_end(7, 0, 31_000_000, 1, true);
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("trace.0.bin");
    /// std::fs::write(&path, b.finish()).unwrap();
    /// let mut e = Engine::new(Default::default());
    /// e.keep_waits(100);
    /// let (model, _) = input::read(&[path], &mut e, None);
    /// let (waits, lost) = e.waits(&model);
    /// assert_eq!((waits.len(), lost), (1, 0));
    /// assert_eq!(waits[0].delay_ns, 30_000_000);
    /// assert_eq!(waits[0].location, "src/main.rs:3:1");
    /// ```
    pub fn waits(&self, m: &Model) -> (Vec<Wait>, u64) {
        let c = self.ctx(m);
        let waits = self
            .waits
            .iter()
            .map(|w| {
                let (wake_ns, poll_ns) = c.window(w.worker, w.wake, w.poll);
                Wait {
                    worker: c.worker_id(w.worker),
                    task: w.task,
                    location: c.loc(w.victim),
                    wake_ns,
                    poll_ns,
                    delay_ns: w.delay_ns,
                }
            })
            .collect();
        (waits, self.waits_lost)
    }
}
