//! Stack interning: each distinct stack (its address list, leaf first)
//! gets one id for the whole recording, written once per file in a
//! `STACKS` frame before the first chunk that uses it (docs/format.md,
//! STACKS), so samples carry a varint instead of their frames.

use std::collections::HashMap;

/// Stack ids for a recording, and which ids the current file defines.
///
/// ```ignore
/// let mut s = Stacks::default();
/// let a = s.intern(&[0x10, 0x20]);
/// assert_eq!(s.intern(&[0x10, 0x20]), a);
/// assert_eq!(s.take_new().len(), 1); // to define in this file
/// ```
#[derive(Default)]
pub(crate) struct Stacks {
    ids: HashMap<Box<[u64]>, u64>,
    /// Frames by id - 1.
    by_id: Vec<Box<[u64]>>,
    /// Whether the current file defines id - 1 (or will, once the pending
    /// frame is written).
    defined: Vec<bool>,
    /// Ids used since the last `take_new` that the file does not define.
    new: Vec<u64>,
}

impl Stacks {
    /// The id of `frames` (never 0: 0 means "no stack"), noting it for the
    /// next `STACKS` frame if the current file has not defined it.
    pub(crate) fn intern(&mut self, frames: &[u64]) -> u64 {
        let id = match self.ids.get(frames) {
            Some(&id) => id,
            None => {
                let id = self.by_id.len() as u64 + 1;
                self.ids.insert(frames.into(), id);
                self.by_id.push(frames.into());
                self.defined.push(false);
                id
            }
        };
        let d = &mut self.defined[id as usize - 1];
        if !*d {
            *d = true;
            self.new.push(id);
        }
        id
    }

    /// The `STACKS` payload for the ids interned since the last call that
    /// the file does not define yet, and those ids (for `undo`); None when
    /// there are none.
    pub(crate) fn take_new(&mut self) -> Option<(Vec<u8>, Vec<u64>)> {
        if self.new.is_empty() {
            return None;
        }
        let new = std::mem::take(&mut self.new);
        let by_id = &self.by_id;
        let list = new.iter().map(|&id| (id, &*by_id[id as usize - 1]));
        Some((runtrace_format::frame::stacks(list), new))
    }

    /// The frame made by `take_new` was not written: the file does not
    /// define those ids.
    pub(crate) fn undo(&mut self, ids: &[u64]) {
        for &id in ids {
            self.defined[id as usize - 1] = false;
        }
    }

    /// A new file defines nothing yet.
    pub(crate) fn reset_file(&mut self) {
        self.defined.iter_mut().for_each(|d| *d = false);
        self.new.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Stacks;

    #[test]
    fn ids_are_stable_and_defined_once_per_file() {
        let mut s = Stacks::default();
        let a = s.intern(&[1, 2, 3]);
        let b = s.intern(&[1, 2]);
        assert_eq!((a, b), (1, 2));
        assert_eq!(s.intern(&[1, 2, 3]), a);
        let (_, ids) = s.take_new().unwrap();
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(s.intern(&[1, 2]), b);
        assert!(s.take_new().is_none(), "already defined in this file");
        // A failed write: the ids must be defined again.
        s.undo(&ids);
        s.intern(&[1, 2]);
        assert_eq!(s.take_new().unwrap().1, vec![2]);
        // A new file: everything used again is defined again, same ids.
        s.reset_file();
        assert_eq!(s.intern(&[1, 2, 3]), a);
        assert_eq!(s.take_new().unwrap().1, vec![1]);
        assert_eq!(s.intern(&[]), 3);
        assert_eq!(s.by_id.len(), 3);
    }
}
