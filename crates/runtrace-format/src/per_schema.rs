//! A small cache of per-schema data (display names, JSON keys, counters).
//!
//! Every decoded [`Event`](crate::Event) points at its schema
//! through an `Arc`, shared by all events of that type in a file, so the
//! pointer is a cheap key: deriving names and keys once per schema instead
//! of once per event keeps the per-event work to a hash lookup.

use crate::Schema;
use std::collections::HashMap;
use std::sync::Arc;

/// Values of type `T` computed once per distinct schema object.
///
/// ```
/// use runtrace_format::per_schema::PerSchema;
/// use runtrace_format::schema::builtin_by_name;
/// use std::sync::Arc;
/// let s = Arc::new(builtin_by_name("task_terminate").unwrap().schema());
/// let mut counts = PerSchema::new();
/// *counts.get(&s, |_| 0u64) += 1;
/// *counts.get(&s.clone(), |_| 0u64) += 1;
/// assert_eq!(counts.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [2]);
/// ```
pub struct PerSchema<T> {
    // The map keeps a clone of each `Arc`: while it lives, its address
    // cannot be freed and reused by a different schema (from a later file,
    // say), so a pointer never maps to another schema's entry.
    map: HashMap<*const Schema, (Arc<Schema>, T)>,
}

impl<T> Default for PerSchema<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> PerSchema<T> {
    /// An empty cache.
    pub fn new() -> Self {
        PerSchema {
            map: HashMap::new(),
        }
    }

    /// The entry for `schema`, computed with `make` the first time.
    pub fn get(&mut self, schema: &Arc<Schema>, make: impl FnOnce(&Schema) -> T) -> &mut T {
        &mut self
            .map
            .entry(Arc::as_ptr(schema))
            .or_insert_with(|| (schema.clone(), make(schema)))
            .1
    }

    /// Every schema seen, with its entry.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<Schema>, &T)> {
        self.map.values().map(|(s, t)| (s, t))
    }
}
