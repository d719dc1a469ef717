#!/usr/bin/env python3
"""Semantic check of a `runtrace perfetto` output, decoded with the Perfetto
project's own protos (`pip install perfetto`).

Usage: check_perfetto.py OUT.pftrace CHECK.json
  CHECK.json: `runtrace check --json` of the same trace files.

Checks: the first packet clears incremental state; every name iid is
interned before use; every event's track is described; slice begins and
ends balance on every track (never below zero, zero at the end, in time
order); every TaskPollStart is a slice named by a spawn location, every
WorkerPark a "parked" slice; every flow starts once and ends at most once,
after it starts, on a poll slice; counters carry values on counter tracks;
span slices (annotated `span_id`) on thread tracks, one per SpanEnter, and
the spans' whole lives on the process's span lanes; resource waits
("wait KIND SITE" slices on the process's resource wait lanes, a
"handover" slice nested in a wait where its releaser is known, reached
by a flow from a "release" instant on a thread track); counts equal
`runtrace check`'s. Then Perfetto's trace processor loads the file (see
trace_processor_counts): no error or data-loss stat, and the same slices,
parked slices and counter values as the protos. Prints a JSON summary;
exit 1 on failure.
"""
import json
import os
import sys
from collections import defaultdict

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def trace_processor_counts(path, counter_tracks):
    """What Perfetto's trace processor makes of the file (slices, parked
    slices, values on our counter tracks), failing on any stat of
    severity error or data_loss; None when it is not at hand, which
    CI=true refuses. The WebAssembly build in
    $RUNTRACE_TRACE_PROCESSOR_WASM (.ci/run sets it; tools/tp_wasm.py) is
    Perfetto v20.1: flows (TrackEvent.flow_ids, field 47) are newer, so
    they are checked with the protos only."""
    wasm = os.environ.get("RUNTRACE_TRACE_PROCESSOR_WASM")
    if not wasm:
        if os.environ.get("CI") == "true":
            fail("CI=true and no trace processor (bash .ci/run sets RUNTRACE_TRACE_PROCESSOR_WASM)")
        print("skipped: the trace processor check (RUNTRACE_TRACE_PROCESSOR_WASM unset)", file=sys.stderr)
        return None
    from tp_wasm import TraceProcessorError, WasmTraceProcessor

    try:
        tp = WasmTraceProcessor(wasm, path)
    except TraceProcessorError as e:
        fail(f"trace processor (WebAssembly build in {wasm}): {e}")
    try:
        bad = tp.query(
            "select name, idx, value from stats "
            "where value > 0 and severity in ('error', 'data_loss')"
        )
        if bad:
            fail(f"trace processor: stats {[r.__dict__ for r in bad]}")
        one = lambda q: tp.query(q)[0].n
        # Instants are slices of no duration there.
        counts = {
            "slices": one("select count(*) as n from slice"),
            "parked": one("select count(*) as n from slice where name = 'parked'"),
            "counter_values": sum(
                r.n
                for r in tp.query(
                    "select t.name as name, count(*) as n from counter c "
                    "join counter_track t on c.track_id = t.id group by t.name"
                )
                if r.name in counter_tracks
            ),
        }
    finally:
        tp.close()
    return counts


def main():
    trace_path, check_path = sys.argv[1], sys.argv[2]
    trace = pb.Trace()
    with open(trace_path, "rb") as f:
        trace.ParseFromString(f.read())
    counts = json.load(open(check_path))["event_counts"]
    c = lambda k: counts.get(k, 0)

    tracks = {}  # uuid -> descriptor
    names = {}  # iid -> name
    ann_names = {}
    per_track = defaultdict(list)  # uuid -> [(ts, order, type, name, event)]
    flow_start = {}
    flow_end = {}
    slice_names = defaultdict(int)
    flow_start_name = {}
    instants = defaultdict(int)
    counter_values = 0
    packets = trace.packet
    if not packets:
        fail("no packets")
    if not packets[0].sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        fail("first packet does not clear incremental state")
    for order, p in enumerate(packets):
        if p.trusted_packet_sequence_id != 1:
            fail(f"packet {order}: sequence id {p.trusted_packet_sequence_id}")
        if p.HasField("interned_data"):
            for n in p.interned_data.event_names:
                names[n.iid] = n.name
            for n in p.interned_data.debug_annotation_names:
                ann_names[n.iid] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = d
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                fail(f"track {d.name!r} before its parent")
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if not p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE:
            fail(f"packet {order}: event without SEQ_NEEDS_INCREMENTAL_STATE")
        if e.track_uuid not in tracks:
            fail(f"packet {order}: track {e.track_uuid:#x} not described before use")
        name = None
        if e.HasField("name_iid"):
            if e.name_iid not in names:
                fail(f"packet {order}: name iid {e.name_iid} not interned")
            name = names[e.name_iid]
        for a in e.debug_annotations:
            if a.name_iid not in ann_names:
                fail(f"packet {order}: annotation iid {a.name_iid} not interned")
        per_track[e.track_uuid].append((p.timestamp, order, e.type, name, e))
        if e.type == TE.TYPE_COUNTER:
            if not e.HasField("counter_value"):
                fail(f"packet {order}: counter without a value")
            if not tracks[e.track_uuid].HasField("counter"):
                fail(f"packet {order}: counter value on a non-counter track")
            counter_values += 1
        elif e.type == TE.TYPE_INSTANT:
            instants[name] += 1
        elif e.type == TE.TYPE_SLICE_BEGIN:
            slice_names[name] += 1
        for fid in e.flow_ids:
            if fid in flow_start:
                fail(f"flow {fid} starts twice")
            flow_start[fid] = (p.timestamp, order)
            flow_start_name[fid] = (name, e.track_uuid)
        for fid in e.terminating_flow_ids:
            if fid in flow_end:
                fail(f"flow {fid} ends twice")
            if fid not in flow_start:
                fail(f"flow {fid} ends before it starts (packet {order})")
            if e.type != TE.TYPE_SLICE_BEGIN:
                fail(f"flow {fid} ends on a non-slice")
            if flow_start[fid][0] > p.timestamp:
                fail(f"flow {fid} goes back in time")
            flow_end[fid] = p.timestamp

    # Balanced slices per track, in time order (file order breaks ties, as
    # Perfetto's sorter does).
    for uuid, evs in per_track.items():
        depth = 0
        for ts, order, ty, name, e in sorted(evs, key=lambda x: (x[0], x[1])):
            if ty == TE.TYPE_SLICE_BEGIN:
                depth += 1
            elif ty == TE.TYPE_SLICE_END:
                depth -= 1
                if depth < 0:
                    fail(f"track {tracks[uuid].name!r}: slice end without a begin at {ts}")
        if depth != 0:
            fail(f"track {tracks[uuid].name!r}: {depth} slices never end")

    # Thread tracks hold polls, parked stretches and span slices (the
    # latter annotated with span_id); a span slice inside a poll slice is
    # nested in it.
    def is_span(e):
        return any(ann_names.get(a.name_iid) == "span_id" for a in e.debug_annotations)

    polls = 0
    span_slices = 0
    span_slices_in_polls = 0
    span_slice_names = defaultdict(int)
    for uuid, evs in per_track.items():
        if not tracks[uuid].HasField("thread"):
            continue
        stack = []
        for ts, order, ty, name, e in sorted(evs, key=lambda x: (x[0], x[1])):
            if ty == TE.TYPE_SLICE_BEGIN:
                kind = "span" if is_span(e) else ("park" if name == "parked" else "poll")
                if kind == "poll":
                    polls += 1
                elif kind == "span":
                    span_slices += 1
                    span_slice_names[name] += 1
                    span_slices_in_polls += "poll" in stack
                stack.append(kind)
            elif ty == TE.TYPE_SLICE_END:
                stack.pop()
    # Resource waits: "wait ..." slices on the resource wait lanes, each
    # with at most one "handover" nested in it, which a flow from a
    # "release" instant on a thread track reaches.
    resource_waits = defaultdict(int)
    handovers = 0
    for uuid, evs in per_track.items():
        if not tracks[uuid].name.startswith("resource waits"):
            continue
        stack = []
        for ts, order, ty, name, e in sorted(evs, key=lambda x: (x[0], x[1])):
            if ty == TE.TYPE_SLICE_BEGIN:
                if name == "handover":
                    if stack != ["wait"]:
                        fail(f"handover at {ts} not inside a wait slice: {stack}")
                    if len(e.terminating_flow_ids) != 1:
                        fail(f"handover at {ts} without its flow")
                    src, src_track = flow_start_name[e.terminating_flow_ids[0]]
                    if src != "release" or not tracks[src_track].HasField("thread"):
                        fail(f"handover at {ts}: its flow starts at {src!r}, not a release on a thread")
                    handovers += 1
                    stack.append("handover")
                elif name and name.startswith("wait "):
                    if stack:
                        fail(f"wait slice at {ts} inside {stack}")
                    resource_waits[name] += 1
                    stack.append("wait")
                else:
                    fail(f"{name!r} on a resource wait lane")
            elif ty == TE.TYPE_SLICE_END:
                stack.pop()
    span_lives = defaultdict(int)
    for uuid, evs in per_track.items():
        d = tracks[uuid]
        if d.name.startswith("spans") and not d.HasField("thread"):
            for _, _, ty, name, e in evs:
                if ty == TE.TYPE_SLICE_BEGIN:
                    span_lives[name] += 1
    checks = {
        "poll slices == PollStart": (polls, c("PollStart")),
        "parked slices == WorkerPark": (slice_names["parked"], c("WorkerPark")),
        "wake instants == WakeEvent": (instants["wake"], c("WakeEvent")),
        "spawn instants == TaskSpawn": (instants["spawn"], c("TaskSpawn")),
        "lock wait slices == LockWait": (
            sum(n for k, n in slice_names.items() if k and k.startswith("wait "))
            - sum(resource_waits.values()), c("LockWait")),
        "lock hold slices == LockHold": (
            sum(n for k, n in slice_names.items() if k and k.startswith("hold ")), c("LockHold")),
        "io slices == Io": (sum(n for k, n in slice_names.items() if k and k.startswith("io ")), c("Io")),
        "processing slices == ProcessingEnd": (
            sum(n for k, n in slice_names.items() if k and k.startswith("process ")), c("ProcessingEnd")),
        "trigger instants == BacklogTrigger": (
            sum(n for k, n in instants.items() if k and k.startswith("backlog trigger ")), c("BacklogTrigger")),
        "drop instants == ItemDropped": (
            sum(n for k, n in instants.items() if k and k.startswith("dropped ")), c("ItemDropped")),
        "span slices == SpanEnter": (span_slices, c("SpanEnter")),
        "heartbeat instants == ThreadHeartbeat": (
            sum(n for k, n in instants.items() if k and k.startswith("heartbeat ")), c("ThreadHeartbeat")),
    }
    for what, (got, want) in checks.items():
        if got != want:
            fail(f"{what}: {got} != {want}")
    if sum(span_lives.values()) > c("SpanClose"):
        fail(f"more span lives than SpanClose: {sum(span_lives.values())} > {c('SpanClose')}")
    if c("PollStart") and not flow_end:
        fail("no flow reaches a poll")
    if (c("QueueSample") or c("Enqueue")) and not counter_values:
        fail("queue events but no counter values")
    counter_tracks = {d.name for d in tracks.values() if d.HasField("counter")}
    tp = trace_processor_counts(trace_path, counter_tracks)
    if tp is not None:
        want = {
            "slices": sum(slice_names.values()) + sum(instants.values()),
            "parked": slice_names["parked"],
            "counter_values": counter_values,
        }
        for k, n in want.items():
            if tp[k] != n:
                fail(f"trace processor: {k} {tp[k]}, the protos say {n}")
    thread_tracks = [d.name for d in tracks.values() if d.HasField("thread")]
    print(json.dumps({
        "trace_processor": tp,
        "packets": len(packets),
        "tracks": len(tracks),
        "thread_tracks": sorted(thread_tracks),
        "poll_slices": polls,
        "flows": len(flow_start),
        "flows_joined": len(flow_end),
        "counter_values": counter_values,
        "instants": sum(instants.values()),
        "span_slices": span_slices,
        "span_slices_in_polls": span_slices_in_polls,
        "span_slice_names": dict(span_slice_names),
        "span_lives": dict(span_lives),
        "resource_waits": dict(resource_waits),
        "resource_handovers": handovers,
    }))


if __name__ == "__main__":
    main()
