//! Names given per call (I/O ops, heartbeat roles) as interned strings.
//!
//! `Istr::new` takes a global lock; calling it per event would put a lock on
//! the hot path. Each thread keeps the few names it uses in a small list and
//! interns a name only the first time it sees it.

use runtrace_core::Istr;
use std::cell::RefCell;

/// More distinct names than this per thread are interned per call (still
/// correct, slower): a cache must not grow without bound on generated names.
const MAX_CACHED: usize = 64;

thread_local! {
    static CACHE: RefCell<Vec<(Box<str>, Istr)>> = const { RefCell::new(Vec::new()) };
}

/// `name` interned, through the calling thread's cache.
pub(crate) fn intern(name: &str) -> Istr {
    CACHE
        .try_with(|c| {
            let mut c = c.borrow_mut();
            if let Some((_, i)) = c.iter().find(|(n, _)| &**n == name) {
                return *i;
            }
            let i = Istr::new(name);
            if c.len() < MAX_CACHED {
                c.push((name.into(), i));
            }
            i
        })
        // Thread-local storage already torn down (a destructor logging):
        // intern directly.
        .unwrap_or_else(|_| Istr::new(name))
}

#[cfg(test)]
mod tests {
    #[test]
    fn same_name_same_id() {
        let a = super::intern("file_write");
        let b = super::intern("file_write");
        assert_eq!(a, b);
        assert_eq!(a.c_str().to_str().unwrap(), "file_write");
        assert_ne!(a, super::intern("flush"));
    }
}
