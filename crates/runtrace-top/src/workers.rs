//! [`ByWorker`]: state per worker, keyed by the model's thread index and
//! the worker index the trace gives, for the passes that look a worker up
//! at every poll start and end ([`crate::window::Now`], and
//! [`crate::shared_now::SharedNow`] while following).
//!
//! A thread runs as one worker (one that changed runtimes, as more), so
//! each thread's first worker is kept inline, by thread index, and the
//! others in a list beside: a list per thread cost an indirection and a
//! search at every lookup, a third of `Now`'s instructions with five
//! windows open (callgrind of `follow_cost`, docs/measurements/top.md).

/// State `T` per (thread index, worker index); see the module docs.
///
/// ```
/// use runtrace_top::workers::ByWorker;
/// let mut w: ByWorker<u64> = ByWorker::default();
/// *w.entry(3, 0) += 1;
/// *w.entry(3, 7) += 5; // the same thread as another worker
/// assert_eq!(w.get(3, 0), Some(&1));
/// assert_eq!(w.get(3, 7), Some(&5));
/// assert_eq!(w.get(2, 0), None);
/// assert_eq!(w.iter().count(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct ByWorker<T> {
    /// By thread index: its first worker and that worker's state.
    first: Vec<Option<(u32, T)>>,
    /// The others: (thread, worker, state).
    more: Vec<(u32, u32, T)>,
}

impl<T> Default for ByWorker<T> {
    fn default() -> Self {
        ByWorker {
            first: Vec::new(),
            more: Vec::new(),
        }
    }
}

impl<T: Default> ByWorker<T> {
    /// The state of `worker` on `thread`, if it has one.
    pub fn get(&self, thread: u32, worker: u32) -> Option<&T> {
        match self.first.get(thread as usize) {
            Some(Some((w, t))) if *w == worker => Some(t),
            Some(Some(_)) => self
                .more
                .iter()
                .find(|(th, w, _)| *th == thread && *w == worker)
                .map(|(_, _, t)| t),
            _ => None,
        }
    }

    /// The same, to change.
    pub fn get_mut(&mut self, thread: u32, worker: u32) -> Option<&mut T> {
        match self.first.get_mut(thread as usize) {
            Some(Some((w, t))) if *w == worker => Some(t),
            Some(Some(_)) => self
                .more
                .iter_mut()
                .find(|(th, w, _)| *th == thread && *w == worker)
                .map(|(_, _, t)| t),
            _ => None,
        }
    }

    /// The state of `worker` on `thread`, a default one put there first
    /// if it has none.
    #[inline(always)]
    pub fn entry(&mut self, thread: u32, worker: u32) -> &mut T {
        let th = thread as usize;
        // Checked, then borrowed (returning the borrow from the check
        // would keep `self` borrowed on the other path).
        if !matches!(self.first.get(th), Some(Some((w, _))) if *w == worker) {
            return self.other_entry(thread, worker);
        }
        match &mut self.first[th] {
            Some((_, t)) => t,
            None => unreachable!("checked above"),
        }
    }

    /// [`ByWorker::entry`] off its common path: a thread's first worker,
    /// or another one.
    #[cold]
    fn other_entry(&mut self, thread: u32, worker: u32) -> &mut T {
        let th = thread as usize;
        if th >= self.first.len() {
            self.first.resize_with(th + 1, || None);
        }
        let first = &mut self.first[th];
        if first.is_none() {
            *first = Some((worker, T::default()));
        }
        if matches!(first, Some((w, _)) if *w == worker) {
            return match first {
                Some((_, t)) => t,
                None => unreachable!("put there above"),
            };
        }
        let i = match self
            .more
            .iter()
            .position(|(t, w, _)| *t == thread && *w == worker)
        {
            Some(i) => i,
            None => {
                self.more.push((thread, worker, T::default()));
                self.more.len() - 1
            }
        };
        &mut self.more[i].2
    }

    /// Every (thread, worker, state), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, &T)> {
        self.first
            .iter()
            .enumerate()
            .filter_map(|(th, f)| f.as_ref().map(|(w, t)| (th as u32, *w, t)))
            .chain(self.more.iter().map(|(th, w, t)| (*th, *w, t)))
    }
}
