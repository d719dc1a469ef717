#!/usr/bin/env python3
"""Self-test for tools/rtdecode.py: python3 tools/test_rtdecode.py

Contains a minimal encoder for the runtrace format (docs/format.md), written
independently of the decoder, and checks round trips, truncation at every
byte, corruption handling and the CLI.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tools/ free of __pycache__

import rtdecode  # noqa: E402

# ---------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------

MASK64 = (1 << 64) - 1
HEADER, SCHEMA, STRINGS, LOCATIONS, THREAD, CLOCK, CHUNK, DROPPED, ROUND, END = range(1, 11)
U64, I64, BOOL, F64, STR, ISTR, LOC, TASK, WORKER = range(1, 10)


def uv(n: int) -> bytes:
    """Unsigned LEB128."""
    assert 0 <= n <= MASK64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zz(n: int) -> bytes:
    return uv(((n << 1) ^ (n >> 63)) & MASK64)


def s(text: str) -> bytes:
    b = text.encode("utf-8")
    return uv(len(b)) + b


def frame(ftype: int, payload: bytes, crc: int | None = None) -> bytes:
    if crc is None:
        crc = zlib.crc32(payload)
    return struct.pack("<BII", ftype, len(payload), crc) + payload


def schema(type_id: int, provider: str, name: str, fields: list[tuple[str, int]]) -> bytes:
    out = uv(type_id) + s(provider) + s(name) + uv(len(fields))
    for fname, code in fields:
        out += s(fname) + bytes([code])
    return out


TPS = 300_000_000  # 3.33 ns per tick: makes the floor in ns conversion visible
ANCHOR = 1_000_000


def header_payload(schemas: list[bytes], major: int = 1, minor: int = 0, tps: int = TPS,
                   trailing: bytes = b"") -> bytes:
    return (uv(major) + uv(minor) + uv(tps) + uv(ANCHOR) + uv(1_700_000_000_000_000_000)
            + uv(4242) + s("myproc") + uv(0xDEADBEEFCAFEF00D) + uv(0)
            + uv(len(schemas)) + b"".join(schemas) + trailing)


def ev(type_id: int, dt: int, fields: bytes = b"") -> bytes:
    """One event record; ids >= 255 need the 255 escape."""
    tag = bytes([type_id]) if type_id < 255 else b"\xff" + uv(type_id)
    return tag + uv(dt) + fields


def ev_escaped(type_id: int, dt: int, fields: bytes = b"") -> bytes:
    return b"\xff" + uv(type_id) + uv(dt) + fields


def set_worker(dt: int, worker: int | None) -> bytes:
    return b"\x00" + uv(dt) + uv(0 if worker is None else worker + 1)


def chunk(tid: int, worker: int | None, task: int, base: int, records: list[bytes],
          event_count: int | None = None) -> bytes:
    # set_worker records (type id 0, tag byte 0) are not events (§6).
    n = sum(1 for r in records if r[:1] != b"\x00") if event_count is None else event_count
    return (uv(tid) + uv(0 if worker is None else worker + 1) + uv(task) + uv(base)
            + uv(n) + b"".join(records))


class Trace:
    """Builds a file frame by frame, remembering where frames end."""

    def __init__(self, magic: bytes = b"RUNTRACE"):
        self.data = bytearray(magic)
        self.frames: list[tuple[int, int, int]] = []  # (start, end, events in frame)

    def add(self, ftype: int, payload: bytes, events: int = 0, crc: int | None = None) -> int:
        start = len(self.data)
        self.data += frame(ftype, payload, crc)
        self.frames.append((start, len(self.data), events))
        return start

    def bytes(self) -> bytes:
        return bytes(self.data)


SCHEMA_INTS = schema(1, "runtrace", "ints", [("a", U64), ("b", I64), ("c", BOOL)])
SCHEMA_MIXED = schema(2, "runtrace", "mixed", [
    ("f", F64), ("s", STR), ("i", ISTR), ("l", LOC), ("t", TASK), ("w", WORKER)])
SCHEMA_APP = schema(300, "myapp", "app_event", [("n", U64), ("where", LOC), ("w", WORKER)])


def mixed(f: float, text: str, sid: int, lid: int, dtask: int) -> bytes:
    return struct.pack("<d", f) + s(text) + uv(sid) + uv(lid) + zz(dtask)


def ns(ticks: int) -> int:
    return (ticks - ANCHOR) * 10**9 // TPS


def build_sample() -> tuple[Trace, list[dict]]:
    """A sealed file using every frame type and every field type.

    Returns the trace and the expected decoded events (as to_json() dicts).
    """
    t = Trace()
    t.add(HEADER, header_payload([SCHEMA_INTS, SCHEMA_MIXED]))
    t.add(STRINGS, uv(2) + uv(1) + s("hello") + uv(2) + s("wörld"))
    t.add(LOCATIONS, uv(1) + uv(1) + s("src/main.rs") + uv(10) + uv(5))
    t.add(SCHEMA, uv(1) + SCHEMA_APP)
    t.add(THREAD, uv(42) + s("main"))
    t.add(CLOCK, uv(ANCHOR + 100) + uv(1_700_000_000_000_000_333))

    base = ANCHOR - 5  # first event before the anchor: negative ns
    records = [
        ev(1, 0, uv(MASK64) + zz(-5) + b"\x01"),
        ev(2, 7, mixed(1.5, "héllo", 1, 1, -1001)),  # task 1000 - 1001 wraps
        set_worker(3, 7),
        ev(2, 0, mixed(-2.25e300, "", 0, 0, 2)),      # task wraps back to 1
        ev(300, 4, uv(7) + uv(1)),                    # escaped tag, worker 7
        ev_escaped(1, 1, uv(0) + zz(2**63 - 1) + b"\x00"),  # escape for a small id
        set_worker(2, None),
        ev(300, 1, uv(8) + uv(0)),
    ]
    f = "file"
    expected = []
    ts = base

    def add(type_id, provider, name, dt, fields):
        nonlocal ts
        ts += dt
        expected.append({"file": f, "tid": 42, "type_id": type_id, "provider": provider,
                         "name": name, "ticks": ts, "ns": ns(ts), "fields": fields})

    add(1, "runtrace", "ints", 0, {"a": MASK64, "b": -5, "c": True})
    add(2, "runtrace", "mixed", 7, {"f": 1.5, "s": "héllo", "i": "hello",
                                    "l": "src/main.rs:10:5", "t": MASK64, "w": None})
    ts += 3  # set_worker's dt still advances ts
    add(2, "runtrace", "mixed", 0, {"f": -2.25e300, "s": "", "i": "", "l": None,
                                    "t": 1, "w": 7})
    add(300, "myapp", "app_event", 4, {"n": 7, "where": "src/main.rs:10:5", "w": 7})
    add(1, "runtrace", "ints", 1, {"a": 0, "b": 2**63 - 1, "c": False})
    ts += 2
    add(300, "myapp", "app_event", 1, {"n": 8, "where": None, "w": None})
    t.add(CHUNK, chunk(42, None, 1000, base, records), events=6)

    # A second thread's chunk, starting as worker 3 with a string id 2.
    ts2 = ANCHOR + 50
    t.add(CHUNK, chunk(43, 3, 5, ts2, [ev(2, 10, mixed(0.0, "x", 2, 1, 0))]), events=1)
    expected.append({"file": f, "tid": 43, "type_id": 2, "provider": "runtrace",
                     "name": "mixed", "ticks": ts2 + 10, "ns": ns(ts2 + 10),
                     "fields": {"f": 0.0, "s": "x", "i": "wörld", "l": "src/main.rs:10:5",
                                "t": 5, "w": 3}})

    t.add(DROPPED, uv(43) + uv(5) + uv(ANCHOR + 1) + uv(ANCHOR + 90))
    t.add(ROUND, uv(ANCHOR + 80))
    t.add(END, uv(len(records) + 1) + uv(5))
    return t, expected


def decode(data: bytes, name: str = "file"):
    tf, events = rtdecode.decode_bytes(data, name)
    return tf, [e.to_json() for e in events]


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


class RoundTrip(unittest.TestCase):
    def test_values(self):
        t, expected = build_sample()
        tf, events = decode(t.bytes())
        self.assertEqual(tf.errors, [])
        self.assertFalse(tf.truncated)
        self.assertTrue(tf.sealed)
        self.assertEqual(events, expected)
        self.assertEqual(tf.dropped_events, 5)
        self.assertEqual(tf.threads, {42: "main"})
        self.assertEqual(tf.end_totals, (9, 5))
        self.assertEqual(tf.header.process_name, "myproc")
        self.assertEqual(tf.event_counts, {"ints": 2, "mixed": 3, "app_event": 2})

    def test_negative_ns_uses_floor(self):
        _, events = decode(build_sample()[0].bytes())
        self.assertEqual(events[0]["ns"], -17)  # -5 ticks * 10/3 ns = -16.67
        self.assertEqual(events[1]["ns"], 6)    # 2 ticks = 6.67 ns

    def test_unknown_minor_and_trailing_bytes_accepted(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS], minor=9, trailing=b"future"))
        t.add(THREAD, uv(1) + s("x") + b"more fields")
        t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 0, uv(1) + zz(1) + b"\x01")]))
        tf, events = decode(t.bytes())
        self.assertEqual(tf.errors, [])
        self.assertEqual(len(events), 1)
        self.assertFalse(tf.sealed)  # no END, ends at a frame boundary: unsealed


class Truncation(unittest.TestCase):
    def test_every_offset(self):
        t, expected = build_sample()
        data = t.bytes()
        boundaries = {8: 0}
        total = 0
        for _start, end, n in t.frames:
            total += n
            boundaries[end] = total
        for cut in range(len(data) + 1):
            with self.subTest(cut=cut):
                tf, events = decode(data[:cut])  # must not raise
                complete = max(n for end, n in boundaries.items() if end <= cut) if cut >= 8 else 0
                self.assertEqual(events, expected[:complete])
                if cut == len(data):
                    self.assertTrue(tf.sealed)
                    self.assertEqual(tf.errors, [])
                elif cut in boundaries:
                    # §7.2: a clean frame boundary is unsealed, not an error.
                    self.assertFalse(tf.sealed)
                    self.assertFalse(tf.truncated)
                    self.assertEqual(tf.errors, [])
                else:
                    self.assertFalse(tf.sealed)
                    self.assertTrue(tf.truncated)
                    frame_start = max([0] + [e for e in boundaries if e <= cut])
                    self.assertEqual(tf.truncated_at, frame_start)
                    self.assertTrue(any(f"offset {frame_start}:" in e for e in tf.errors),
                                    tf.errors)


class Corruption(unittest.TestCase):
    def two_chunk_file(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS]))
        c1 = t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 1, uv(11) + zz(0) + b"\x00")]))
        t.add(CHUNK, chunk(2, None, 0, ANCHOR, [ev(1, 2, uv(22) + zz(0) + b"\x01")]))
        t.add(END, uv(2) + uv(0))
        return t, c1

    def test_crc_mismatch_reports_offset_and_continues(self):
        t, c1 = self.two_chunk_file()
        data = bytearray(t.bytes())
        data[c1 + 9 + 6] ^= 0x01  # flip a bit in chunk 1's first event (field a)
        tf, events = decode(bytes(data))
        self.assertEqual(len(tf.errors), 1, tf.errors)
        self.assertIn(f"offset {c1}:", tf.errors[0])
        self.assertIn("crc", tf.errors[0])
        self.assertEqual([e["fields"]["a"] for e in events], [22])
        self.assertTrue(tf.sealed)
        self.assertFalse(tf.truncated)

    def test_finish_frame(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS]))
        t.add(14, uv(3) + uv(1) + uv(900) + uv(2) + uv(0))
        t.add(END, uv(0) + uv(0))
        tf, _ = decode(t.bytes())
        self.assertEqual(tf.errors, [])
        self.assertEqual(tf.finish, {"files": 3, "evicted": 1, "events": 900, "dropped": 2, "lost_to_writes": 0})

    def test_unknown_frame_type_skipped_silently(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS]))
        t.add(200, b"\xff" * 40)
        t.add(0, b"")
        t.add(16, b"junk", crc=0)  # even a bad crc is not looked at (11..15: formats 1.1 to 1.3)
        t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 1, uv(11) + zz(0) + b"\x00")]))
        t.add(END, uv(1) + uv(0))
        tf, events = decode(t.bytes())
        self.assertEqual(tf.errors, [])
        self.assertEqual(len(events), 1)
        self.assertTrue(tf.sealed)

    def test_bad_magic(self):
        t, _ = build_sample()
        data = b"RUNTRACX" + t.bytes()[8:]
        tf, events = decode(data)
        self.assertEqual(events, [])
        self.assertEqual(len(tf.errors), 1)
        self.assertIn("offset 0:", tf.errors[0])
        self.assertIn("magic", tf.errors[0])
        tf, _ = decode(b"")  # an empty .active file is short, not foreign
        self.assertTrue(tf.truncated)

    def chunk_file(self, records, event_count=None, extra_frames=()):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS, SCHEMA_MIXED]))
        for ftype, payload in extra_frames:
            t.add(ftype, payload)
        c = t.add(CHUNK, chunk(1, None, 0, ANCHOR, records, event_count))
        t.add(END, uv(0) + uv(0))
        return t.bytes(), c

    def assert_bad_event(self, records, bad_index, event_count=None, text=""):
        good = ev(1, 1, uv(1) + zz(0) + b"\x00")
        records = [good] + records
        data, c = self.chunk_file(records, event_count)
        tf, events = decode(data)
        self.assertEqual(len(events), 1, "events before the bad record are kept")
        self.assertEqual(len(tf.errors), 1, tf.errors)
        err = tf.errors[0]
        self.assertIn(f"offset {c}:", err)
        # Offset of the bad event: frame header + chunk header + earlier records.
        chunk_header = len(chunk(1, None, 0, ANCHOR, [], event_count or len(records)))
        ev_off = c + 9 + chunk_header + sum(len(r) for r in records[:bad_index])
        self.assertIn(f"#{bad_index} at offset {ev_off}:", err)
        self.assertIn(text, err)
        self.assertTrue(tf.sealed)  # the END frame after it is still read

    def test_event_without_schema(self):
        self.assert_bad_event([ev(9, 1, b"")], 1, text="no schema")

    def test_bad_bool(self):
        self.assert_bad_event([ev(1, 1, uv(1) + zz(0) + b"\x02")], 1, text="bool")

    def test_overlong_varint(self):
        self.assert_bad_event([ev(1, 1, b"\x80" * 10 + b"\x00" + zz(0) + b"\x00")], 1,
                              text="varint")
        self.assert_bad_event([ev(1, 1, b"\xff" * 9 + b"\x02" + zz(0) + b"\x00")], 1,
                              text="varint")

    def test_max_varint_ok(self):
        data, _ = self.chunk_file([ev(1, 1, b"\xff" * 9 + b"\x01" + zz(0) + b"\x00")])
        tf, events = decode(data)
        self.assertEqual(tf.errors, [])
        self.assertEqual(events[0]["fields"]["a"], MASK64)

    def test_undefined_string_and_location(self):
        self.assert_bad_event([ev(2, 1, mixed(0.0, "", 5, 0, 0))], 1, text="string id 5")
        self.assert_bad_event([ev(2, 1, mixed(0.0, "", 0, 5, 0))], 1, text="location id 5")

    def test_event_count_mismatch(self):
        self.assert_bad_event([], 1, event_count=2, text="event_count")
        # More events than event_count: all decodable events are reported,
        # then the mismatch (§7.3), as the Rust reader does.
        data, c = self.chunk_file([ev(1, 1, uv(1) + zz(0) + b"\x00")] * 2, event_count=1)
        tf, events = decode(data)
        self.assertEqual(len(events), 2)
        self.assertEqual(len(tf.errors), 1)
        self.assertIn(f"offset {c}:", tf.errors[0])
        self.assertIn("event_count", tf.errors[0])

    def test_field_past_payload(self):
        self.assert_bad_event([ev(2, 1, struct.pack("<d", 1.0)[:4])], 1)

    def test_unknown_field_type_code(self):
        odd = schema(5, "app", "odd", [("x", 42)])
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS, odd]))  # schema itself is fine
        c = t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 1, uv(1) + zz(0) + b"\x00"),
                                                    ev(5, 1, b"\x00")]))
        tf, events = decode(t.bytes())
        self.assertEqual(len(events), 1)
        self.assertEqual(len(tf.errors), 1)
        self.assertIn(f"offset {c}:", tf.errors[0])
        self.assertIn("type code 42", tf.errors[0])

    def test_unknown_major_refused(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS], major=2))
        t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 1, uv(1) + zz(0) + b"\x00")]))
        tf, events = decode(t.bytes())
        self.assertEqual(events, [])
        self.assertTrue(any("major version 2" in e for e in tf.errors), tf.errors)

    def test_corrupt_header_makes_file_unreadable(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS]), crc=0)
        t.add(CHUNK, chunk(1, None, 0, ANCHOR, [ev(1, 1, uv(1) + zz(0) + b"\x00")]))
        tf, events = decode(t.bytes())
        self.assertEqual(events, [])
        self.assertIn("offset 8:", tf.errors[0])

    def test_first_frame_not_header(self):
        t = Trace()
        t.add(THREAD, uv(1) + s("x"))
        tf, events = decode(t.bytes())
        self.assertEqual(events, [])
        self.assertIn("offset 8:", tf.errors[0])

    def test_oversized_len(self):
        t = Trace()
        t.add(HEADER, header_payload([SCHEMA_INTS]))
        start = len(t.data)
        t.data += struct.pack("<BII", CHUNK, 64 * 1024 * 1024 + 1, 0)
        tf, events = decode(t.bytes())
        self.assertTrue(any(f"offset {start}:" in e and "64 MiB" in e for e in tf.errors))

    def test_string_id_zero_defined_is_corrupt(self):
        data, _ = self.chunk_file([], extra_frames=[(STRINGS, uv(1) + uv(0) + s("x"))])
        tf, _ = decode(data)
        self.assertEqual(len(tf.errors), 1)
        self.assertIn("string id 0", tf.errors[0])

    def test_random_damage_never_raises(self):
        rng = random.Random(1234)
        base = build_sample()[0].bytes()
        for _ in range(1500):
            data = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                op = rng.random()
                i = rng.randrange(len(data))
                if op < 0.6:
                    data[i] = rng.randrange(256)
                elif op < 0.8:
                    del data[i:i + rng.randint(1, 8)]
                else:
                    data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            tf, events = decode(bytes(data))
            self.assertIsInstance(tf.errors, list)
            json.dumps([e for e in events])  # output is always serialisable

    def test_damage_with_valid_crc_never_raises(self):
        # Random payload damage with the crc recomputed reaches the payload
        # decoders instead of stopping at the crc check.
        rng = random.Random(99)
        t, _ = build_sample()
        base = t.bytes()
        for _ in range(1500):
            start, end, _n = t.frames[rng.randrange(len(t.frames))]
            payload = bytearray(base[start + 9:end])
            if not payload:
                continue
            for _ in range(rng.randint(1, 3)):
                payload[rng.randrange(len(payload))] = rng.randrange(256)
            data = base[:start] + frame(base[start], bytes(payload)) + base[end:]
            tf, events = decode(data)
            json.dumps(events)


STACKS, MAPPINGS, PROFILE = 11, 12, 13


def stacks_payload(stacks: list[tuple[int, list[int]]]) -> bytes:
    out = uv(len(stacks))
    for sid, addrs in stacks:
        out += uv(sid) + uv(len(addrs))
        prev = 0
        for a in addrs:
            d = (a - prev) & MASK64
            out += zz(d - (1 << 64) if d >= 1 << 63 else d)  # as i64
            prev = a
    return out


def mappings_payload(maps: list[tuple[int, int, int, bytes, str]]) -> bytes:
    out = uv(len(maps))
    for start, end, off, build_id, path in maps:
        out += uv(start) + uv(end) + uv(off) + uv(len(build_id)) + build_id + s(path)
    return out


def profile_payload(mode: int, hz: int, flags: int, message: str) -> bytes:
    return uv(mode) + uv(hz) + uv(flags) + s(message)


SCHEMA_SAMPLE = schema(22, "runtrace", "cpu_sample", [("tid", U64), ("stack", U64)])
KERNELISH = 0xFFFF_FFFF_8100_0010  # far from user addresses: deltas wrap


def build_profile_file() -> Trace:
    """A 1.1 file: PROFILE, two MAPPINGS frames (the second replaces one
    mapping), STACKS and the writer thread's chunk of samples."""
    t = Trace()
    t.add(HEADER, header_payload([SCHEMA_SAMPLE], minor=1))
    t.add(PROFILE, profile_payload(1, 99, 1, ""))
    t.add(MAPPINGS, mappings_payload([(0x1000, 0x2000, 0, b"\xab" * 20, "/old"),
                                      (0x7000, 0x8000, 0x1000, b"", "/lib.so")]))
    t.add(MAPPINGS, mappings_payload([(0x1000, 0x3000, 0, b"\xcd" * 20, "/new")]))
    t.add(STACKS, stacks_payload([(1, [0x1234, 0x1100, KERNELISH, 0x10]), (2, [])]))
    t.add(CHUNK, chunk(77, None, 0, ANCHOR, [ev(22, 1, uv(100) + uv(1)),
                                              ev(22, 2, uv(101) + uv(2))]), events=2)
    t.add(END, uv(2) + uv(0))
    return t


class CpuProfiles(unittest.TestCase):
    def test_frames_decode(self):
        tf, events = decode(build_profile_file().bytes())
        self.assertEqual(tf.errors, [])
        self.assertTrue(tf.sealed)
        self.assertEqual(tf.header.version_minor, 1)
        self.assertEqual(tf.stacks, {1: (0x1234, 0x1100, KERNELISH, 0x10), 2: ()})
        self.assertEqual(tf.profile, rtdecode.Profile(1, 99, 1, ""))
        self.assertEqual([(m.start, m.path, m.build_id) for m in tf.mappings],
                         [(0x1000, "/new", b"\xcd" * 20), (0x7000, "/lib.so", b"")])
        self.assertEqual([e["fields"] for e in events],
                         [{"tid": 100, "stack": 1}, {"tid": 101, "stack": 2}])

    def test_cut_at_every_byte(self):
        t = build_profile_file()
        data = t.bytes()
        for cut in range(len(data) + 1):
            with self.subTest(cut=cut):
                tf, events = decode(data[:cut])  # must not raise
                done = [f for f in t.frames if f[1] <= cut]
                types = [data[f[0]] for f in done]
                self.assertEqual(len(events), sum(f[2] for f in done))
                self.assertEqual(tf.profile is not None, PROFILE in types)
                self.assertEqual(1 in tf.stacks, STACKS in types)
                self.assertEqual(len(tf.mappings), 2 if MAPPINGS in types else 0)
                boundary = cut == 8 or any(f[1] == cut for f in t.frames)
                self.assertEqual(tf.truncated, not boundary)  # a cut magic is short too

    def test_corrupt_frames_define_nothing(self):
        cases = [
            (STACKS, uv(1) + uv(0) + uv(0), "reserved stack id 0"),
            (STACKS, uv(1) + uv(5) + uv(129), "depth 129"),
            (STACKS, stacks_payload([(1, [0x99]), (3, [0x1])])[:-1], "past the end"),
            (MAPPINGS, uv(1) + uv(0x2000) + uv(0x1000) + uv(0) + uv(0) + s("/x"),
             "before it starts"),
            (MAPPINGS, uv(1) + uv(0x1000) + uv(0x2000) + uv(0) + uv(200), "200 bytes needed"),
            (PROFILE, uv(1) + uv(99) + uv(0), "past the end"),
        ]
        for ftype, payload, what in cases:
            with self.subTest(what=what):
                t = Trace()
                t.add(HEADER, header_payload([SCHEMA_SAMPLE], minor=1))
                t.add(STACKS, stacks_payload([(1, [0x42])]))
                t.add(PROFILE, profile_payload(2, 99, 0, "signal"))
                bad = t.add(ftype, payload)
                t.add(CHUNK, chunk(77, None, 0, ANCHOR, [ev(22, 1, uv(100) + uv(1))]))
                tf, events = decode(t.bytes())
                self.assertEqual(len(tf.errors), 1, tf.errors)
                self.assertIn(f"offset {bad}:", tf.errors[0])
                self.assertIn(what, tf.errors[0])
                self.assertEqual(len(events), 1)  # reading went on
                self.assertEqual(tf.stacks, {1: (0x42,)})
                self.assertEqual(tf.mappings, [])
                self.assertEqual(tf.profile, rtdecode.Profile(2, 99, 0, "signal"))


class Cli(unittest.TestCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "rtdecode.py"), *args],
                              capture_output=True, text=True, timeout=30)

    def test_summary_and_events(self):
        t, expected = build_sample()
        data = t.bytes()
        with tempfile.TemporaryDirectory() as d:
            good = os.path.join(d, "trace.0.bin")
            cut = os.path.join(d, "trace.1.bin.active")
            with open(good, "wb") as f:
                f.write(data)
            with open(cut, "wb") as f:
                f.write(data[:-3])

            r = self.run_cli("--summary", good)
            self.assertEqual(r.returncode, 0, r.stderr)
            summary = json.loads(r.stdout)
            self.assertEqual(summary, {
                "files": 1, "events": 7,
                "event_counts": {"ints": 2, "mixed": 3, "app_event": 2},
                "dropped_events": 5, "truncated": False, "sealed": 1, "errors": [], "finish": None})

            r = self.run_cli("--summary", good, cut, os.path.join(d, "missing.bin"))
            self.assertEqual(r.returncode, 1)
            summary = json.loads(r.stdout)
            self.assertEqual(summary["files"], 3)
            self.assertEqual(summary["events"], 14)
            self.assertEqual(summary["dropped_events"], 10)
            self.assertTrue(summary["truncated"])
            self.assertEqual(summary["sealed"], 1)
            self.assertEqual(len(summary["errors"]), 2)
            self.assertIn(cut, summary["errors"][0])

            r = self.run_cli("--events", good)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [json.loads(line) for line in r.stdout.splitlines()]
            for e in expected:
                e["file"] = good
            self.assertEqual(lines, expected)

    def test_profile(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.0.bin")
            with open(path, "wb") as f:
                f.write(build_profile_file().bytes())
            r = self.run_cli("--profile", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["profile"], {"mode": 1, "hz": 99, "flags": 1, "message": ""})
            self.assertEqual(out["stacks"], {"1": ["0x1234", "0x1100", hex(KERNELISH), "0x10"],
                                             "2": []})
            self.assertEqual(out["mappings"][0], {
                "start": "0x1000", "end": "0x3000", "file_offset": "0x0",
                "build_id": "cd" * 20, "path": "/new"})
            self.assertEqual(out["errors"], [])


if __name__ == "__main__":
    unittest.main()
