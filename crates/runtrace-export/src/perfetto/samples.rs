//! Profile samples as Perfetto callstack samples: each `cpu_sample`,
//! `off_cpu` and `alloc_sample` event becomes a `PerfSample` on its
//! thread (pid, tid),
//! which trace processor puts in its `perf_sample` table and the UI shows
//! on the thread's track. Stacks are named with `runtrace_symbolize` (as
//! `runtrace flamegraph` names them, inlined frames expanded) and interned
//! once each: function names, the recorded executable mappings, frames
//! (mapping, address relative to the mapped file, name) and callstacks
//! (frames root first).
//!
//! An off-CPU stack is a sample at the time its thread switched out (so it
//! falls in the poll that blocked), under an extra root frame
//! [`OFF_CPU_ROOT`]: a flame graph of a thread's samples shows the time it
//! ran and the places it blocked side by side. An allocation sample is a
//! sample at the allocation's time under [`ALLOC_ROOT`] (its thread is
//! the allocating one, from the event's `tid`). Perfetto counts samples;
//! the time each off-CPU stack stood for and the bytes each allocation
//! sample stood for are not carried (`runtrace flamegraph --off-cpu` and
//! `--alloc` weigh by them).
//!
//! Memory is bounded by the distinct stacks, addresses and names, never by
//! the number of samples.

use super::proto::{
    Callstack, Frame as PFrame, InternedString, Mapping as PMapping, PerfSample, MODE_USER,
};
use super::writer::PacketWriter;
use runtrace_format::frame::Mapping;
use runtrace_symbolize::{SymbolizeOptions, Symbolizer};
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

/// The root frame of every off-CPU stack.
pub const OFF_CPU_ROOT: &str = "[off-CPU]";
/// The root frame of every allocation sample's stack.
pub const ALLOC_ROOT: &str = "[alloc]";

/// What a sample is, hence the extra root frame of its callstack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Root {
    /// An on-CPU sample: the stack as recorded.
    OnCpu,
    /// An off-CPU stack: under [`OFF_CPU_ROOT`].
    OffCpu,
    /// A sampled allocation: under [`ALLOC_ROOT`].
    Alloc,
}

impl Root {
    fn frame(self) -> Option<&'static str> {
        match self {
            Root::OnCpu => None,
            Root::OffCpu => Some(OFF_CPU_ROOT),
            Root::Alloc => Some(ALLOC_ROOT),
        }
    }
}
/// The one frame of a sample whose stack is empty (undefined stack id).
pub const NO_STACK: &str = crate::flamegraph::NO_STACK;

/// Interning state of the samples (iids per kind of interned message,
/// each numbered from 1, as Perfetto numbers them per field).
#[derive(Default)]
pub(crate) struct Samples {
    /// Built at the first sample with the mappings known then; rebuilt if
    /// a later `MAPPINGS` frame adds some.
    sym: Option<Symbolizer>,
    sym_mappings: usize,
    /// Interned mappings by (start, end, offset, path).
    mappings: HashMap<(u64, u64, u64, String), u64>,
    /// The mapping of frames that have none ([`Samples::no_mapping`]).
    no_mapping: Option<u64>,
    /// Callstack iid by (stack index in the model, its root).
    callstacks: HashMap<(u32, Root), u64>,
    /// Frame iid by (mapping iid, rel_pc, name).
    frames: HashMap<(u64, u64, Arc<str>), u64>,
    functions: HashMap<Arc<str>, u64>,
    /// Next iid of: mapping strings (paths, build ids), mappings, frames,
    /// callstacks, function names.
    next_string: u64,
    next_mapping: u64,
    next_frame: u64,
    next_callstack: u64,
    next_function: u64,
}

impl Samples {
    /// Writes one sample at `ts` of thread `tid` of process `pid`, its
    /// stack `stack` (addresses leaf first, index `stack_index` in the
    /// model's stacks) named with `mappings`, under `root`'s frame.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write<W: Write>(
        &mut self,
        w: &mut PacketWriter<W>,
        mappings: &[Mapping],
        ts: u64,
        pid: u32,
        tid: u32,
        stack_index: u32,
        stack: &Arc<[u64]>,
        root: Root,
    ) {
        let iid = match self.callstacks.get(&(stack_index, root)) {
            Some(&iid) => iid,
            None => {
                let iid = self.intern_callstack(w, mappings, stack, root);
                self.callstacks.insert((stack_index, root), iid);
                iid
            }
        };
        w.sample(
            ts,
            PerfSample {
                pid: Some(pid),
                tid: Some(tid),
                callstack_iid: Some(iid),
                cpu_mode: Some(MODE_USER),
            },
        );
    }

    /// What could not be symbolized, one line each.
    pub(crate) fn problems(&self) -> Vec<String> {
        self.sym.as_ref().map(|s| s.problems()).unwrap_or_default()
    }

    fn intern_callstack<W: Write>(
        &mut self,
        w: &mut PacketWriter<W>,
        mappings: &[Mapping],
        stack: &Arc<[u64]>,
        root: Root,
    ) -> u64 {
        if self.sym.is_none() || self.sym_mappings != mappings.len() {
            self.sym = Some(Symbolizer::new(mappings, SymbolizeOptions::default()));
            self.sym_mappings = mappings.len();
        }
        // Leaf first while collecting, reversed to root first below.
        let mut leaf_first: Vec<u64> = Vec::with_capacity(stack.len() + 1);
        for (i, &addr) in stack.iter().enumerate() {
            let (mapping, rel_pc) = match mappings.iter().find(|m| m.contains(addr)) {
                Some(m) => (self.intern_mapping(w, m), addr - m.start + m.file_offset),
                None => (self.no_mapping(w), addr),
            };
            let names: Vec<Arc<str>> = self
                .sym
                .as_mut()
                .expect("built above")
                .address(addr, i > 0)
                .iter()
                .map(|f| f.function.clone())
                .collect();
            for name in names {
                leaf_first.push(self.intern_frame(w, mapping, rel_pc, name));
            }
        }
        if stack.is_empty() {
            let none = self.no_mapping(w);
            leaf_first.push(self.intern_frame(w, none, 0, Arc::from(NO_STACK)));
        }
        if let Some(name) = root.frame() {
            let none = self.no_mapping(w);
            leaf_first.push(self.intern_frame(w, none, 0, Arc::from(name)));
        }
        leaf_first.reverse();
        self.next_callstack += 1;
        let iid = self.next_callstack;
        w.interned().callstacks.push(Callstack {
            iid: Some(iid),
            frame_ids: leaf_first,
        });
        iid
    }

    fn intern_frame<W: Write>(
        &mut self,
        w: &mut PacketWriter<W>,
        mapping: u64,
        rel_pc: u64,
        name: Arc<str>,
    ) -> u64 {
        let key = (mapping, rel_pc, name);
        if let Some(&iid) = self.frames.get(&key) {
            return iid;
        }
        let function = match self.functions.get(&key.2) {
            Some(&iid) => iid,
            None => {
                self.next_function += 1;
                let iid = self.next_function;
                self.functions.insert(key.2.clone(), iid);
                w.interned().function_names.push(InternedString {
                    iid: Some(iid),
                    str: Some(key.2.as_bytes().to_vec()),
                });
                iid
            }
        };
        self.next_frame += 1;
        let iid = self.next_frame;
        w.interned().frames.push(PFrame {
            iid: Some(iid),
            function_name_id: Some(function),
            mapping_id: Some(mapping),
            rel_pc: Some(rel_pc),
        });
        self.frames.insert(key, iid);
        iid
    }

    /// The mapping of the frames that have none: the name-only root
    /// frames ([`OFF_CPU_ROOT`], [`ALLOC_ROOT`], [`NO_STACK`]) and
    /// addresses outside every recorded mapping. An empty range and no
    /// path, interned once.
    ///
    /// Trace processor drops a frame whose mapping iid is not interned,
    /// 0 included (stat `stackprofile_invalid_mapping_id`), and with it
    /// every callstack through the frame: the sample is then in
    /// `perf_sample` without a callsite.
    fn no_mapping<W: Write>(&mut self, w: &mut PacketWriter<W>) -> u64 {
        if let Some(iid) = self.no_mapping {
            return iid;
        }
        self.next_mapping += 1;
        let iid = self.next_mapping;
        w.interned().mappings.push(PMapping {
            iid: Some(iid),
            build_id: None,
            start: Some(0),
            end: Some(0),
            exact_offset: Some(0),
            path_string_ids: Vec::new(),
        });
        self.no_mapping = Some(iid);
        iid
    }

    fn intern_mapping<W: Write>(&mut self, w: &mut PacketWriter<W>, m: &Mapping) -> u64 {
        let key = (m.start, m.end, m.file_offset, m.path.clone());
        if let Some(&iid) = self.mappings.get(&key) {
            return iid;
        }
        let build_id = if m.build_id.is_empty() {
            None
        } else {
            self.next_string += 1;
            w.interned().build_ids.push(InternedString {
                iid: Some(self.next_string),
                str: Some(m.build_id.clone()),
            });
            Some(self.next_string)
        };
        // The whole path as one component (trace processor reads that too).
        self.next_string += 1;
        let path = self.next_string;
        w.interned().mapping_paths.push(InternedString {
            iid: Some(path),
            str: Some(m.path.as_bytes().to_vec()),
        });
        self.next_mapping += 1;
        let iid = self.next_mapping;
        w.interned().mappings.push(PMapping {
            iid: Some(iid),
            build_id,
            start: Some(m.start),
            end: Some(m.end),
            exact_offset: Some(m.file_offset),
            path_string_ids: vec![path],
        });
        self.mappings.insert(key, iid);
        iid
    }
}
