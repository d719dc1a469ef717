#!/usr/bin/env python3
"""Where the bytes of runtrace trace files go: per frame type, and per event
kind and field inside CHUNK frames (docs/measurements/density.md).

    python3 tools/event_sizes.py DIR/trace.*.bin [--json]

Reads files through `rtdecode` (the reference decoder, docs/format.md) for
their headers, schemas and definitions, and walks each chunk itself to
count the bytes of every part of every record: the tag, the timestamp
delta, each field. Valid files only (it stops at the first damage).
"""

from __future__ import annotations

import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rtdecode as rt  # noqa: E402


def account(paths: list[str]) -> dict:
    frames: dict[str, list[int]] = {}  # name -> [count, bytes incl. 9-byte frame header]
    kinds: dict[str, dict] = {}
    chunk_headers = 0
    set_worker = [0, 0]
    total = 0
    events = 0
    plain_growth = 0  # bytes the DCHUNK frames would take more as CHUNKs
    for path in paths:
        data = open(path, "rb").read()
        total += len(data)
        tf = rt.TraceFile(path)
        pos = len(rt.MAGIC)
        frames.setdefault("magic", [0, 0])
        frames["magic"][0] += 1
        frames["magic"][1] += len(rt.MAGIC)
        while pos < len(data):
            ftype, flen, _crc = rt.FRAME_HEADER.unpack_from(data, pos)
            name = rt.FRAME_NAMES.get(ftype, f"type {ftype}")
            f = frames.setdefault(name, [0, 0])
            f[0] += 1
            f[1] += rt.FRAME_HEADER.size + flen
            buf = rt._Payload(data[pos + rt.FRAME_HEADER.size: pos + rt.FRAME_HEADER.size + flen],
                              pos + rt.FRAME_HEADER.size)
            if ftype == rt.DCHUNK:
                # Counted as the plain CHUNK it stands for (the per-kind
                # figures are of the plain records), and both sizes kept.
                plain = rt.expand_dense(buf.data, tf.schemas, buf.base)
                plain_growth += len(plain) - flen
                buf = rt._Payload(plain, buf.base)
            if ftype in (rt.CHUNK, rt.DCHUNK):
                n, hdr = walk_chunk(tf, buf, kinds, set_worker)
                events += n
                chunk_headers += hdr
            elif ftype in rt.FRAME_NAMES:
                if ftype == rt.HEADER:
                    h, schemas = tf._header(buf)
                    tf.header = h
                    tf.schemas.update((s.type_id, s) for s in schemas)
                else:
                    tf._frame(ftype, buf)
            pos += rt.FRAME_HEADER.size + flen
    return {
        "files": len(paths),
        "bytes": total,
        "events": events,
        "bytes_per_event": total / max(events, 1),
        "plain_bytes": total + plain_growth,
        "plain_bytes_per_event": (total + plain_growth) / max(events, 1),
        "frames": {k: {"count": v[0], "bytes": v[1]} for k, v in sorted(frames.items())},
        "chunk_headers_bytes": chunk_headers,
        "set_worker": {"count": set_worker[0], "bytes": set_worker[1]},
        "kinds": kinds,
    }


def walk_chunk(tf: rt.TraceFile, buf: rt._Payload, kinds: dict, set_worker: list) -> tuple[int, int]:
    """Counts the bytes of every record of one chunk; returns (events,
    chunk header bytes)."""
    start = buf.at()
    buf.varint()  # tid
    buf.varint()  # worker
    buf.varint()  # task_reg
    buf.varint()  # base_ticks
    buf.varint()  # event_count
    hdr = buf.at() - start
    n = 0
    while buf.remaining():
        a = buf.at()
        tag = buf.u8()
        type_id = buf.varint() if tag == rt.ESCAPE_TAG else tag
        b = buf.at()
        buf.varint()  # dt
        c = buf.at()
        if type_id == rt.SET_WORKER_TYPE_ID:
            buf.varint()
            set_worker[0] += 1
            set_worker[1] += buf.at() - a
            continue
        schema = tf.schemas[type_id]
        k = kinds.setdefault(schema.name, {"count": 0, "bytes": 0, "tag": 0, "dt": 0,
                                           "fields": {fn: 0 for fn, _ in schema.fields}})
        k["count"] += 1
        k["tag"] += b - a
        k["dt"] += c - b
        for fname, code in schema.fields:
            p = buf.at()
            if code in (rt.F_U64, rt.F_ISTR, rt.F_LOC):
                buf.varint()
            elif code in (rt.F_I64, rt.F_TASK):
                buf.zigzag()
            elif code == rt.F_BOOL:
                buf.u8()
            elif code == rt.F_F64:
                buf.f64()
            elif code == rt.F_STR:
                buf.str()
            k["fields"][fname] = k["fields"].get(fname, 0) + buf.at() - p
        k["bytes"] += buf.at() - a
        n += 1
    return n, hdr


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    r = account(paths)
    if as_json:
        print(json.dumps(r, indent=1))
        return 0
    ev = max(r["events"], 1)
    print(f"{r['files']} files, {r['bytes']} bytes, {r['events']} events: "
          f"{r['bytes_per_event']:.3f} bytes/event")
    if r["plain_bytes"] != r["bytes"]:
        print(f"as plain CHUNKs (format 1.2 records): {r['plain_bytes']} bytes, "
              f"{r['plain_bytes_per_event']:.3f} bytes/event; per-kind figures below are of those")
    print("\nframes (bytes incl. the 9-byte frame header; per event over all events):")
    for name, f in sorted(r["frames"].items(), key=lambda x: -x[1]["bytes"]):
        print(f"  {name:10} {f['count']:8} frames {f['bytes']:10} bytes  {f['bytes'] / ev:6.3f} B/ev")
    print(f"  of CHUNK: chunk headers {r['chunk_headers_bytes']} bytes "
          f"({r['chunk_headers_bytes'] / ev:.3f} B/ev), set_worker records "
          f"{r['set_worker']['count']} / {r['set_worker']['bytes']} bytes "
          f"({r['set_worker']['bytes'] / ev:.3f} B/ev)")
    print("\nevents by kind (share of events; bytes per event of that kind: tag, dt, fields):")
    for name, k in sorted(r["kinds"].items(), key=lambda x: -x[1]["bytes"]):
        c = k["count"]
        fields = "  ".join(f"{fn} {v / c:.2f}" for fn, v in k["fields"].items())
        print(f"  {name:20} {c:9} ({100 * c / ev:5.1f}%) {k['bytes'] / c:6.2f} B  "
              f"[{100 * k['bytes'] / r['bytes']:5.1f}% of file]  tag {k['tag'] / c:.2f}  "
              f"dt {k['dt'] / c:.2f}  {fields}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
