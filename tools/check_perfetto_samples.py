#!/usr/bin/env python3
"""The callstack samples of a `runtrace perfetto` output, read two ways.

Usage: check_perfetto_samples.py OUT.pftrace

1. Decoded with the Perfetto project's own protos (`pip install perfetto`):
   every PerfSample's callstack, frames, function names and mappings must
   be interned before use on the sequence; each sample is named root first.
   A sample's kind is its root frame: `[off-CPU]` (an off-CPU stack),
   `[alloc]` (a sampled allocation), else on-CPU; those two root frames
   must be names only (on the mapping with an empty range that stands for
   none: every frame needs an interned mapping) and never appear below
   the root.
2. Loaded into Perfetto's trace processor: the samples of its
   `perf_sample` table, on their threads, named by walking
   `stack_profile_callsite` up from the sample's callsite. The trace
   processor is the WebAssembly build in $RUNTRACE_TRACE_PROCESSOR_WASM
   when set (a Perfetto UI build, run by tools/tp_wasm.py; .ci/run sets
   it), else the `perfetto` package's TraceProcessor with the binary
   $RUNTRACE_TRACE_PROCESSOR or the package's own (downloaded once and
   cached by it); when none can be had, the output says why under
   "trace_processor_skipped".

Prints JSON: {"protos": {"TID": {"root;...;leaf": count}}, "trace_processor":
same shape or null, "trace_processor_skipped": reason or null,
"mappings": [paths], "kinds": {"on_cpu": n, "off_cpu": n, "alloc": n}
(from the protos)}. Exit 1 on a malformed trace.
"""
import contextlib
import json
import os
import sys
from collections import defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

# Root frames that say what a sample is (runtrace_export::perfetto's
# OFF_CPU_ROOT and ALLOC_ROOT).
ROOTS = {"[off-CPU]": "off_cpu", "[alloc]": "alloc"}


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def from_protos(path):
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    functions, frames, callstacks, mappings, paths = {}, {}, {}, {}, {}
    empty = set()  # mappings with an empty range: the name-only frames' own
    out = defaultdict(lambda: defaultdict(int))
    for order, p in enumerate(trace.packet):
        if p.HasField("interned_data"):
            d = p.interned_data
            for s in d.function_names:
                functions[s.iid] = s.str.decode()
            for s in d.mapping_paths:
                paths[s.iid] = s.str.decode()
            for m in d.mappings:
                for i in m.path_string_ids:
                    if i not in paths:
                        fail(f"packet {order}: mapping {m.iid} path {i} not interned")
                mappings[m.iid] = "/".join(paths[i] for i in m.path_string_ids)
                if m.start == m.end:
                    empty.add(m.iid)
            for fr in d.frames:
                if fr.function_name_id not in functions:
                    fail(f"packet {order}: frame {fr.iid} name {fr.function_name_id} not interned")
                # Trace processor drops a frame whose mapping is not
                # interned, 0 (none) included, and every callstack through it.
                if fr.mapping_id not in mappings:
                    fail(f"packet {order}: frame {fr.iid} mapping {fr.mapping_id} not interned")
                frames[fr.iid] = functions[fr.function_name_id]
                if frames[fr.iid] in ROOTS and fr.mapping_id not in empty:
                    fail(f"packet {order}: root frame {frames[fr.iid]} on a real mapping")
            for cs in d.callstacks:
                for depth, i in enumerate(cs.frame_ids):
                    if i not in frames:
                        fail(f"packet {order}: callstack {cs.iid} frame {i} not interned")
                    if depth > 0 and frames[i] in ROOTS:
                        fail(f"packet {order}: callstack {cs.iid} has {frames[i]} below its root")
                callstacks[cs.iid] = ";".join(frames[i] for i in cs.frame_ids)
        if not p.HasField("perf_sample"):
            continue
        s = p.perf_sample
        if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
            fail(f"packet {order}: sample without SEQ_NEEDS_INCREMENTAL_STATE")
        if not p.HasField("timestamp"):
            fail(f"packet {order}: sample without a timestamp")
        if s.callstack_iid not in callstacks:
            fail(f"packet {order}: callstack {s.callstack_iid} not interned")
        out[str(s.tid)][callstacks[s.callstack_iid]] += 1
    real = {name for iid, name in mappings.items() if iid not in empty}
    return out, sorted(real)


def kinds(samples):
    """Sample counts by kind (the root frame) over every thread."""
    out = {"on_cpu": 0, "off_cpu": 0, "alloc": 0}
    for stacks in samples.values():
        for name, n in stacks.items():
            out[ROOTS.get(name.split(";", 1)[0], "on_cpu")] += n
    return out


def open_trace_processor(path):
    """A trace processor holding `path`, or None and why not."""
    wasm = os.environ.get("RUNTRACE_TRACE_PROCESSOR_WASM")
    if wasm:
        from tp_wasm import TraceProcessorError, WasmTraceProcessor

        try:
            return WasmTraceProcessor(wasm, path), None
        except TraceProcessorError as e:
            fail(f"trace processor (WebAssembly build in {wasm}): {e}")
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as e:
        return None, f"perfetto.trace_processor cannot be imported: {e}"
    bin_path = os.environ.get("RUNTRACE_TRACE_PROCESSOR") or None
    try:
        # The package says on stdout that it downloads: keep stdout JSON.
        with contextlib.redirect_stdout(sys.stderr):
            return TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=bin_path)), None
    except Exception as e:  # no binary and no way to download it
        return None, f"trace processor cannot be started: {e}"


def from_trace_processor(path):
    tp, why = open_trace_processor(path)
    if tp is None:
        return None, why
    try:
        # The callsite tree and the frames' names, walked here rather than
        # with experimental_ancestor_stack_profile_callsite: that table
        # function takes only a constant in the WebAssembly build's version
        # (v20), and a join passes it a column.
        names = {r.id: r.name for r in tp.query("select id, name from stack_profile_frame")}
        callsites = {
            r.id: (r.parent_id, r.frame_id)
            for r in tp.query("select id, parent_id, frame_id from stack_profile_callsite")
        }

        def stack(callsite):
            frames = []
            while callsite is not None:
                callsite, frame = callsites[callsite]
                frames.append(names[frame])
            return ";".join(reversed(frames))

        # A frame, callstack or mapping it could not read (an iid never
        # interned, say) is counted here, and its samples lose their stack.
        for r in tp.query("select name, value from stats where name glob 'stackprofile_*'"):
            if r.value:
                fail(f"trace processor: stat {r.name} = {r.value}")
        out = defaultdict(lambda: defaultdict(int))
        q = """
            select t.tid as tid, s.callsite_id as callsite
            from perf_sample s left join thread t using (utid)
        """
        for r in tp.query(q):
            if r.callsite is None or r.tid is None:
                fail(f"trace processor: a perf_sample row without a callsite or thread: {r.__dict__}")
            out[str(r.tid)][stack(r.callsite)] += 1
        return out, None
    finally:
        tp.close()


def main():
    path = sys.argv[1]
    protos, mappings = from_protos(path)
    tp, why = from_trace_processor(path)
    print(json.dumps({
        "protos": protos,
        "trace_processor": tp,
        "trace_processor_skipped": why,
        "mappings": mappings,
        "kinds": kinds(protos),
    }))


if __name__ == "__main__":
    main()
