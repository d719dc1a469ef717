#!/usr/bin/env python3
"""The callstack samples of a `runtrace perfetto` output, read two ways.

Usage: check_perfetto_samples.py OUT.pftrace

1. Decoded with the Perfetto project's own protos (`pip install perfetto`):
   every PerfSample's callstack, frames, function names and mappings must
   be interned before use on the sequence; each sample is named root first.
   A sample's kind is its root frame: `[off-CPU]` (an off-CPU stack),
   `[alloc]` (a sampled allocation), else on-CPU; those two root frames
   must be names only (no mapping) and never appear below the root.
2. Loaded into trace processor (the `perfetto` package's TraceProcessor),
   when its binary can be had: the samples of its `perf_sample` table, on
   their threads, named by walking `stack_profile_callsite` up from the
   sample's callsite. The binary comes from $RUNTRACE_TRACE_PROCESSOR when
   set, else the package's own (downloaded once and cached by it); when
   neither can be had, the output says why under "trace_processor_skipped".

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
            for fr in d.frames:
                if fr.function_name_id not in functions:
                    fail(f"packet {order}: frame {fr.iid} name {fr.function_name_id} not interned")
                if fr.mapping_id and fr.mapping_id not in mappings:
                    fail(f"packet {order}: frame {fr.iid} mapping {fr.mapping_id} not interned")
                frames[fr.iid] = functions[fr.function_name_id]
                if frames[fr.iid] in ROOTS and fr.mapping_id:
                    fail(f"packet {order}: root frame {frames[fr.iid]} has a mapping")
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
    return out, sorted(set(mappings.values()))


def kinds(samples):
    """Sample counts by kind (the root frame) over every thread."""
    out = {"on_cpu": 0, "off_cpu": 0, "alloc": 0}
    for stacks in samples.values():
        for name, n in stacks.items():
            out[ROOTS.get(name.split(";", 1)[0], "on_cpu")] += n
    return out


def from_trace_processor(path):
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as e:
        return None, f"perfetto.trace_processor cannot be imported: {e}"
    bin_path = os.environ.get("RUNTRACE_TRACE_PROCESSOR") or None
    try:
        # The package says on stdout that it downloads: keep stdout JSON.
        with contextlib.redirect_stdout(sys.stderr):
            tp = TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=bin_path))
    except Exception as e:  # no binary and no way to download it
        return None, f"trace processor cannot be started: {e}"
    try:
        q = """
            select s.id as sample, t.tid as tid, c.depth as depth, f.name as name
            from perf_sample s
            join thread t using (utid)
            join experimental_ancestor_stack_profile_callsite(s.callsite_id) c
            join stack_profile_frame f on f.id = c.frame_id
            union all
            select s.id, t.tid, c.depth, f.name
            from perf_sample s
            join thread t using (utid)
            join stack_profile_callsite c on c.id = s.callsite_id
            join stack_profile_frame f on f.id = c.frame_id
        """
        stacks = defaultdict(list)
        tids = {}
        for r in tp.query(q):
            stacks[r.sample].append((r.depth, r.name))
            tids[r.sample] = r.tid
        out = defaultdict(lambda: defaultdict(int))
        for sample, frames in stacks.items():
            out[str(tids[sample])][";".join(n for _, n in sorted(frames))] += 1
        n = next(iter(tp.query("select count(*) as n from perf_sample"))).n
        named = sum(sum(v.values()) for v in out.values())
        if n != named:
            fail(f"trace processor: {n} perf_sample rows, {named} with a callstack")
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
