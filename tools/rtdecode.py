#!/usr/bin/env python3
"""Independent decoder for the runtrace trace format, version 1 (1.1).

Written from docs/format.md alone (no knowledge of the Rust reader or
writer), to show that the specification is sufficient. Python 3.11 standard
library only.

Usage:
    python3 tools/rtdecode.py --summary FILE...
    python3 tools/rtdecode.py --events FILE...
    python3 tools/rtdecode.py --profile FILE...   # PROFILE, MAPPINGS, STACKS

As a module:
    tf, events = decode_bytes(data, name="x.bin")   # whole file in memory
    tf = TraceFile(path)
    for ev in tf.iter_events(): ...                  # streaming
    tf.errors, tf.truncated, tf.sealed, ...          # filled in as it goes
    tf.stacks, tf.mappings, tf.profile               # CPU profiles (1.1)

Section numbers in comments (§N) refer to docs/format.md.
"""

from __future__ import annotations

import argparse
import binascii
import io
import json
import math
import os
import struct
import sys
from dataclasses import dataclass
from typing import BinaryIO, Iterator

MAGIC = b"RUNTRACE"
FRAME_HEADER = struct.Struct("<BII")  # type:u8 len:u32 crc:u32 (§2)
MAX_FRAME_LEN = 64 * 1024 * 1024  # §7.3, §9
SUPPORTED_MAJOR = 1
WORKER_NONE = 0xFFFFFFFF
U64_MASK = (1 << 64) - 1

# Frame types (§2).
HEADER, SCHEMA, STRINGS, LOCATIONS, THREAD, CLOCK, CHUNK, DROPPED, ROUND, END = range(1, 11)
STACKS, MAPPINGS, PROFILE = range(11, 14)  # version 1.1: CPU profiles
FINISH = 14  # version 1.2: the recording ended cleanly (§11)
DCHUNK = 15  # version 1.3: a CHUNK with dense records (§6.1)
FRAME_NAMES = {
    HEADER: "HEADER", SCHEMA: "SCHEMA", STRINGS: "STRINGS",
    LOCATIONS: "LOCATIONS", THREAD: "THREAD", CLOCK: "CLOCK", CHUNK: "CHUNK",
    DROPPED: "DROPPED", ROUND: "ROUND", END: "END",
    STACKS: "STACKS", MAPPINGS: "MAPPINGS", PROFILE: "PROFILE",
    FINISH: "FINISH", DCHUNK: "DCHUNK",
}
MAX_STACK_DEPTH = 128  # §2, STACKS

# Field type codes (§5).
F_U64, F_I64, F_BOOL, F_F64, F_STR, F_ISTR, F_LOC, F_TASK, F_WORKER = range(1, 10)

SET_WORKER_TYPE_ID = 0  # §6: type id 0 is the set_worker record, not an event
ESCAPE_TAG = 255  # §6: the type id follows as a varint

# §6.1 (1.3): the slots of dense records, 1 to 15: (type id, fixed fields as
# (catalog position, field name, type code, the field's one encoded byte)).
DENSE_SLOT_BITS = 4
DENSE_SLOTS = [
    (2, ((2, "queue", F_ISTR, 0), (3, "local_q", F_U64, 0))),  # task_poll_start
    (2, ((2, "queue", F_ISTR, 0),)),
    (2, ()),
    (3, ((0, "task_id", F_TASK, 0), (2, "ready", F_BOOL, 0))),  # task_poll_end
    (3, ((0, "task_id", F_TASK, 0), (2, "ready", F_BOOL, 1))),
    (3, ()),
    (4, ((1, "waker_task_id", F_U64, 0),)),  # task_wake
    (4, ()),
    (1, ((0, "task_id", F_TASK, 2), (1, "parent_task_id", F_U64, 0), (3, "queue", F_ISTR, 0))),  # task_spawn
    (1, ()),
    (5, ((0, "task_id", F_TASK, 0),)),  # task_terminate
    (5, ()),
    (6, ((1, "local_q", F_U64, 0),)),  # worker_park
    (7, ()),  # worker_unpark
    (22, ()),  # cpu_sample
]


class DecodeError(Exception):
    """A payload that does not decode; `offset` is an absolute file offset."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


class _ChunkEventError(Exception):
    """A bad event record inside a CHUNK (§7.3 wants the event's offset too)."""

    def __init__(self, index: int, event_offset: int, cause: DecodeError):
        super().__init__(str(cause))
        self.index = index
        self.event_offset = event_offset
        self.cause = cause


class _Payload:
    """Cursor over one frame payload.

    Every read is bounds-checked against the payload, never the file, so a
    field "running past the payload" is a DecodeError (§7.3) rather than a
    silent read into the next frame.
    """

    __slots__ = ("data", "pos", "base")

    def __init__(self, data: bytes, base: int):
        self.data = data
        self.pos = 0
        self.base = base  # file offset of data[0]

    def at(self) -> int:
        return self.base + self.pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def u8(self) -> int:
        if self.pos >= len(self.data):
            raise DecodeError("byte runs past the end of the payload", self.at())
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        data, pos, start = self.data, self.pos, self.at()
        result = 0
        for i in range(10):
            if pos >= len(data):
                raise DecodeError("varint runs past the end of the payload", start)
            b = data[pos]
            pos += 1
            # §1: the 10th byte may only carry the 64th bit.
            if i == 9 and b > 1:
                raise DecodeError("varint longer than 10 bytes" if b & 0x80
                                  else "varint overflows 64 bits", start)
            result |= (b & 0x7F) << (7 * i)
            if b < 0x80:
                self.pos = pos
                return result
        raise DecodeError("varint longer than 10 bytes", start)

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n: int) -> bytes:
        # Check before slicing: a corrupt length must not allocate or wrap.
        if n > self.remaining():
            raise DecodeError(
                f"{n} bytes needed but only {self.remaining()} left in the payload",
                self.at())
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def str(self) -> str:
        start = self.at()
        n = self.varint()
        try:
            return self.raw(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not valid UTF-8 ({e.reason})", start) from None

    def f64(self) -> float:
        return struct.unpack("<d", self.raw(8))[0]


@dataclass(frozen=True)
class Schema:
    type_id: int
    provider: str
    name: str
    fields: tuple[tuple[str, int], ...]  # (field name, type code)


@dataclass(frozen=True)
class Header:
    version_major: int
    version_minor: int
    ticks_per_sec: int
    anchor_ticks: int
    anchor_wall_ns: int
    pid: int
    process_name: str
    recording_id: int
    file_index: int


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    file_offset: int
    build_id: bytes
    path: str

    def to_json(self) -> dict:
        return {"start": hex(self.start), "end": hex(self.end),
                "file_offset": hex(self.file_offset),
                "build_id": self.build_id.hex(), "path": self.path}


@dataclass(frozen=True)
class Profile:
    mode: int
    hz: int
    flags: int
    message: str

    def to_json(self) -> dict:
        return {"mode": self.mode, "hz": self.hz, "flags": self.flags,
                "message": self.message}


@dataclass
class Event:
    file: str
    tid: int
    type_id: int
    provider: str
    name: str
    ticks: int
    ns: int
    fields: dict

    def to_json(self) -> dict:
        fields = {}
        for k, v in self.fields.items():
            # JSON has no NaN/Infinity; emit null (as serde_json does) so the
            # output stays strict JSON.
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            fields[k] = v
        return {
            "file": self.file, "tid": self.tid, "type_id": self.type_id,
            "provider": self.provider, "name": self.name, "ticks": self.ticks,
            "ns": self.ns, "fields": fields,
        }


def _defined_id(buf: _Payload, frame: str, what: str) -> int:
    """The id of a definition; id 0 is reserved in every table (§7.5)."""
    at = buf.at()
    value = buf.varint()
    if value == 0:
        raise DecodeError(f"{frame} defines the reserved {what} id 0", at)
    return value


class TraceFile:
    """Decoder state and results for one trace file.

    `iter_events()` yields events as frames are read and records every
    problem in `errors` ("NAME: offset N: message") instead of raising.
    """

    def __init__(self, name: str):
        self.name = name
        self.header: Header | None = None
        self.schemas: dict[int, Schema] = {}
        self.strings: dict[int, str] = {0: ""}  # §2: id 0 is always ""
        self.locations: dict[int, str] = {}     # id -> "file:line:col"
        self.threads: dict[int, str] = {}
        self.stacks: dict[int, tuple[int, ...]] = {}  # id -> addresses, leaf first
        self.mappings: list[Mapping] = []
        self.profile: Profile | None = None
        self.clocks: list[tuple[int, int]] = []  # (ticks, wall_ns)
        self.last_round: int | None = None
        self.dropped_events = 0
        self.end_totals: tuple[int, int] | None = None  # (events, dropped) from END
        self.finish: dict | None = None  # the FINISH frame (§11), if any
        self.sealed = False
        self.truncated = False
        self.truncated_at: int | None = None
        self.errors: list[str] = []
        self.event_count = 0  # events reported (set_worker records excluded)
        self.event_counts: dict[str, int] = {}

    # -- reporting -------------------------------------------------------

    def _error(self, offset: int, message: str) -> None:
        self.errors.append(f"{self.name}: offset {offset}: {message}")

    def _truncate(self, offset: int, what: str) -> None:
        self.truncated = True
        self.truncated_at = offset
        self._error(offset, f"file truncated: {what} extends past the end of the file")

    # -- entry point ---------------------------------------------------------

    def iter_events(self, data: bytes | None = None) -> Iterator[Event]:
        """Decode the file (or `data`, if given) and yield its events.

        Never raises for bad input: anything unexpected becomes an error.
        """
        try:
            if data is not None:
                yield from self._read(io.BytesIO(data), len(data))
            else:
                with open(self.name, "rb") as f:
                    yield from self._read(f, os.fstat(f.fileno()).st_size)
        except OSError as e:
            self._error(0, f"cannot read file: {e.strerror or e}")
        except Exception as e:  # noqa: BLE001 - rule §7.1: never crash
            self._error(0, f"internal decoder error: {e!r}")

    # -- frame layer (§2, §7) ------------------------------------------------

    def _read(self, f: BinaryIO, size: int) -> Iterator[Event]:
        magic = f.read(len(MAGIC))
        if magic != MAGIC:
            if len(magic) < len(MAGIC) and MAGIC.startswith(magic):
                # A file cut inside the magic (e.g. an `.active` file just
                # created) is short, not foreign.
                self._truncate(0, "magic")
            else:
                self._error(0, "bad magic: not a runtrace file")
            return

        pos = len(MAGIC)
        last_was_end = False
        while True:
            hdr = f.read(FRAME_HEADER.size)
            if not hdr:
                break  # clean end at a frame boundary
            if len(hdr) < FRAME_HEADER.size:
                self._truncate(pos, "frame header")
                return
            ftype, flen, crc = FRAME_HEADER.unpack(hdr)
            first = self.header is None
            frame_end = pos + FRAME_HEADER.size + flen
            fname = FRAME_NAMES.get(ftype, f"type {ftype}")

            if flen > MAX_FRAME_LEN:
                self._error(pos, f"corrupt frame: {fname} length {flen} exceeds 64 MiB")
                if first:
                    self._error(pos, "HEADER unreadable; file skipped")
                    return
                if frame_end > size:
                    # §7.3 says `len` still delimits a corrupt frame, but a
                    # len this large cannot be trusted to find the next one.
                    self._error(pos, "cannot resynchronise after oversized frame; rest of file skipped")
                    return
                f.seek(frame_end)
                pos = frame_end
                last_was_end = False
                continue

            payload = f.read(flen)
            if len(payload) < flen:
                self._truncate(pos, f"{fname} frame payload")
                return

            # §2: the first frame must be HEADER, and only the first.
            if first and ftype != HEADER:
                self._error(pos, f"first frame is {fname}, not HEADER; file unreadable")
                return
            if not first and ftype == HEADER:
                self._error(pos, "unexpected second HEADER frame; skipped")
                pos, last_was_end = frame_end, False
                continue

            if ftype not in FRAME_NAMES:
                # §7.4: unknown frame types are skipped silently (not even crc-checked).
                pos, last_was_end = frame_end, False
                continue

            ok = False
            actual_crc = binascii.crc32(payload)
            if actual_crc != crc:
                self._error(pos, f"corrupt {fname} frame: crc32 mismatch "
                                 f"(stored {crc:#010x}, computed {actual_crc:#010x})")
            else:
                buf = _Payload(payload, pos + FRAME_HEADER.size)
                try:
                    if ftype == DCHUNK:
                        # §6.1: read as the CHUNK it stands for (offsets in
                        # errors are then positions in that expansion).
                        plain = expand_dense(payload, self.schemas, pos + FRAME_HEADER.size)
                        yield from self._chunk(_Payload(plain, pos + FRAME_HEADER.size))
                    elif ftype == CHUNK:
                        yield from self._chunk(buf)
                    else:
                        self._frame(ftype, buf)
                    ok = True
                except _ChunkEventError as e:
                    self._error(pos, f"corrupt CHUNK frame: event record #{e.index} "
                                     f"at offset {e.event_offset}: {e} "
                                     f"(detected at offset {e.cause.offset})")
                except DecodeError as e:
                    self._error(pos, f"corrupt {fname} frame: {e} (at offset {e.offset})")
                except Exception as e:  # noqa: BLE001 - §7.1: never crash
                    self._error(pos, f"internal decoder error in {fname} frame: {e!r}")

            if first and not ok:
                # §7.3: a corrupt HEADER makes the whole file unreadable.
                self._error(pos, "HEADER unreadable; file skipped")
                return
            last_was_end = ok and ftype == END
            pos = frame_end

        # §2: sealed means the file *ends* with an END frame, so any frame
        # after END (even an unknown one) leaves the file unsealed.
        self.sealed = last_was_end

    # -- non-CHUNK frames ------------------------------------------------------

    def _frame(self, ftype: int, buf: _Payload) -> None:
        """Decode one non-CHUNK frame.

        Each frame is fully decoded before any state changes, so a corrupt
        frame contributes nothing. Trailing bytes are ignored (§10: later
        minor versions may append fields).
        """
        if ftype == HEADER:
            header, schemas = self._header(buf)
            self.header = header
            self.schemas.update((s.type_id, s) for s in schemas)
        elif ftype == SCHEMA:
            schemas = self._schema_list(buf)
            self.schemas.update((s.type_id, s) for s in schemas)
        elif ftype == STRINGS:
            entries = []
            for _ in range(buf.varint()):
                sid = _defined_id(buf, "STRINGS", "string")
                entries.append((sid, buf.str()))
            self.strings.update(entries)
        elif ftype == LOCATIONS:
            entries = []
            for _ in range(buf.varint()):
                lid = _defined_id(buf, "LOCATIONS", "location")
                file = buf.str()
                line = buf.varint()
                col = buf.varint()
                entries.append((lid, f"{file}:{line}:{col}"))
            self.locations.update(entries)
        elif ftype == THREAD:
            tid = buf.varint()
            self.threads[tid] = buf.str()
        elif ftype == CLOCK:
            ticks = buf.varint()
            self.clocks.append((ticks, buf.varint()))
        elif ftype == DROPPED:
            _tid, count, _since, _until = (buf.varint() for _ in range(4))
            self.dropped_events += count
        elif ftype == ROUND:
            self.last_round = buf.varint()
        elif ftype == END:
            events = buf.varint()
            self.end_totals = (events, buf.varint())
        elif ftype == STACKS:
            entries = []
            for _ in range(buf.varint()):
                sid = _defined_id(buf, "STACKS", "stack")
                at = buf.at()
                depth = buf.varint()
                if depth > MAX_STACK_DEPTH:
                    raise DecodeError(f"stack {sid} has depth {depth} (at most {MAX_STACK_DEPTH})", at)
                addrs, prev = [], 0
                for _ in range(depth):
                    # zigzag delta from the previous address (0 first), u64 wrapping
                    prev = (prev + buf.zigzag()) & U64_MASK
                    addrs.append(prev)
                entries.append((sid, tuple(addrs)))
            self.stacks.update(entries)
        elif ftype == MAPPINGS:
            entries = []
            for _ in range(buf.varint()):
                at = buf.at()
                start, end, offset = buf.varint(), buf.varint(), buf.varint()
                if end < start:
                    raise DecodeError(f"mapping ends ({end:#x}) before it starts ({start:#x})", at)
                build_id = buf.raw(buf.varint())
                entries.append(Mapping(start, end, offset, build_id, buf.str()))
            for m in entries:
                # A mapping with the same start replaces the earlier one.
                same = [i for i, x in enumerate(self.mappings) if x.start == m.start]
                if same:
                    self.mappings[same[0]] = m
                else:
                    self.mappings.append(m)
        elif ftype == PROFILE:
            mode, hz, flags = buf.varint(), buf.varint(), buf.varint()
            self.profile = Profile(mode, hz, flags, buf.str())
        elif ftype == FINISH:
            keys = ("files", "evicted", "events", "dropped", "lost_to_writes")
            self.finish = {k: buf.varint() for k in keys}

    def _header(self, buf: _Payload) -> tuple[Header, list[Schema]]:
        at = buf.at()
        major = buf.varint()
        if major != SUPPORTED_MAJOR:
            raise DecodeError(f"unsupported major version {major} (this reader knows {SUPPORTED_MAJOR})", at)
        minor = buf.varint()  # §3: any minor version is accepted
        at = buf.at()
        tps = buf.varint()
        if tps == 0:
            # Not stated by the spec, but §4's ns conversion divides by it.
            raise DecodeError("ticks_per_sec is 0", at)
        header = Header(
            version_major=major, version_minor=minor, ticks_per_sec=tps,
            anchor_ticks=buf.varint(), anchor_wall_ns=buf.varint(),
            pid=buf.varint(), process_name=buf.str(),
            recording_id=buf.varint(), file_index=buf.varint())
        return header, self._schema_list(buf)

    @staticmethod
    def _schema_list(buf: _Payload) -> list[Schema]:
        out = []
        # Loop counts come from the file; each iteration consumes bytes or
        # raises, so a huge count cannot hang the reader.
        for _ in range(buf.varint()):
            type_id = buf.varint()
            provider = buf.str()
            name = buf.str()
            fields = []
            for _ in range(buf.varint()):
                fname = buf.str()
                # Unknown codes are kept: §5 makes them an error only when
                # an event of this type is actually decoded.
                fields.append((fname, buf.u8()))
            out.append(Schema(type_id, provider, name, tuple(fields)))
        return out

    # -- CHUNK (§6) -------------------------------------------------------------

    @staticmethod
    def _worker_reg(encoded: int, at: int) -> int:
        # Stored as worker_reg + 1 so that 0 means "none".
        if encoded == 0:
            return WORKER_NONE
        if encoded - 1 > WORKER_NONE:
            raise DecodeError(f"worker {encoded} - 1 does not fit in u32", at)
        return encoded - 1

    def _chunk(self, buf: _Payload) -> Iterator[Event]:
        tid = buf.varint()
        at = buf.at()
        worker_reg = self._worker_reg(buf.varint(), at)
        task_reg = buf.varint()
        ts = buf.varint()
        event_count = buf.varint()
        header = self.header
        anchor, tps = header.anchor_ticks, header.ticks_per_sec

        # Events decoded before a bad record are still yielded: §5 says a bad
        # event makes the chunk undecodable "from that event on". The records
        # run to the end of the payload; event_count counts the events among
        # them (set_worker records are not events, §6) and is checked after.
        index = 0
        while buf.remaining():
            ev_at = buf.at()
            try:
                tag = buf.u8()
                type_id = buf.varint() if tag == ESCAPE_TAG else tag
                # ts is a u64 register; wrap like one.
                ts = (ts + buf.varint()) & U64_MASK
                if type_id == SET_WORKER_TYPE_ID:
                    at = buf.at()
                    worker_reg = self._worker_reg(buf.varint(), at)
                    continue
                schema = self.schemas.get(type_id)
                if schema is None:
                    raise DecodeError(f"event type {type_id} has no schema", ev_at)
                fields = {}
                for fname, code in schema.fields:
                    at = buf.at()
                    if code == F_U64:
                        value = buf.varint()
                    elif code == F_I64:
                        value = buf.zigzag()
                    elif code == F_BOOL:
                        b = buf.u8()
                        if b > 1:
                            raise DecodeError(f"bool field {fname!r} has value {b}", at)
                        value = b == 1
                    elif code == F_F64:
                        value = buf.f64()
                    elif code == F_STR:
                        value = buf.str()
                    elif code == F_ISTR:
                        sid = buf.varint()
                        if sid not in self.strings:
                            raise DecodeError(f"string id {sid} was never defined", at)
                        value = self.strings[sid]
                    elif code == F_LOC:
                        lid = buf.varint()
                        if lid == 0:
                            value = None  # unknown location
                        elif lid in self.locations:
                            value = self.locations[lid]
                        else:
                            raise DecodeError(f"location id {lid} was never defined", at)
                    elif code == F_TASK:
                        # Delta against the task register, wrapping as u64.
                        task_reg = (task_reg + buf.zigzag()) & U64_MASK
                        value = task_reg
                    elif code == F_WORKER:
                        value = None if worker_reg == WORKER_NONE else worker_reg
                    else:
                        raise DecodeError(
                            f"schema {type_id} field {fname!r} has unknown type code {code}", ev_at)
                    fields[fname] = value
            except DecodeError as e:
                raise _ChunkEventError(index, ev_at, e) from None

            # §4: 128-bit intermediate in the spec; Python ints are unbounded.
            # Floor division, so ticks before the anchor round toward -inf.
            ns = (ts - anchor) * 1_000_000_000 // tps
            index += 1
            self.event_count += 1
            self.event_counts[schema.name] = self.event_counts.get(schema.name, 0) + 1
            yield Event(self.name, tid, type_id, schema.provider, schema.name, ts, ns, fields)

        if index != event_count:
            # §7.3: fewer or more events than event_count.
            raise _ChunkEventError(index, buf.at(), DecodeError(
                f"chunk holds {index} events but its event_count says {event_count}",
                buf.at()))


def _skip_field(buf: _Payload, code: int) -> None:
    if code in (F_U64, F_I64, F_ISTR, F_LOC, F_TASK):
        buf.varint()
    elif code == F_BOOL:
        buf.u8()
    elif code == F_F64:
        buf.raw(8)
    elif code == F_STR:
        buf.str()
    elif code == F_WORKER:
        pass
    else:
        raise DecodeError(f"unknown field type code {code}", buf.at())


def _put_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def expand_dense(payload: bytes, schemas: dict, base: int) -> bytes:
    """§6.1: the CHUNK payload a DCHUNK payload stands for (same chunk
    header, each dense record rewritten as a §6 record)."""
    buf = _Payload(payload, base)
    for _ in range(5):  # tid, worker, task_reg, base_ticks, event_count
        buf.varint()
    out = bytearray(payload[:buf.pos])
    while buf.remaining():
        rec_at = buf.at()
        head = buf.varint()
        dt, slot = head >> DENSE_SLOT_BITS, head & ((1 << DENSE_SLOT_BITS) - 1)
        if slot == 0:
            type_id = buf.varint()
            fixed = ()
        else:
            type_id, fixed = DENSE_SLOTS[slot - 1]
        if type_id < ESCAPE_TAG:
            out.append(type_id)
        else:
            out.append(ESCAPE_TAG)
            _put_varint(out, type_id)
        _put_varint(out, dt)
        start = buf.pos
        if type_id == SET_WORKER_TYPE_ID and slot == 0:
            buf.varint()
            out += payload[start:buf.pos]
            continue
        schema = schemas.get(type_id)
        if schema is None:
            raise DecodeError(f"dense record: event type {type_id} has no schema", rec_at)
        fixed_at = {pos: (name, code, byte) for pos, name, code, byte in fixed}
        for pos, _name, code, _byte in fixed:
            f = schema.fields[pos] if pos < len(schema.fields) else None
            # Type codes compare as the wire does: u32/u16/u8 are code 1 too.
            if f is None or f[0] != _name or f[1] != code:
                raise DecodeError(
                    f"dense record: slot {slot} needs field {_name!r} at {pos} of type {type_id}",
                    rec_at)
        for i, (_fname, code) in enumerate(schema.fields):
            if i in fixed_at:
                out.append(fixed_at[i][2])
                continue
            a = buf.pos
            _skip_field(buf, code)
            out += payload[a:buf.pos]
    return bytes(out)


# -- convenience API -------------------------------------------------------------


def decode_bytes(data: bytes, name: str = "<bytes>") -> tuple[TraceFile, list[Event]]:
    tf = TraceFile(name)
    return tf, list(tf.iter_events(data))


def decode_file(path: str) -> tuple[TraceFile, list[Event]]:
    tf = TraceFile(path)
    return tf, list(tf.iter_events())


def summarize(files: list[TraceFile]) -> dict:
    counts: dict[str, int] = {}
    for tf in files:
        for k, v in tf.event_counts.items():
            counts[k] = counts.get(k, 0) + v
    return {
        "files": len(files),
        "events": sum(tf.event_count for tf in files),
        "event_counts": counts,
        "dropped_events": sum(tf.dropped_events for tf in files),
        "truncated": any(tf.truncated for tf in files),
        "sealed": sum(1 for tf in files if tf.sealed),
        "errors": [e for tf in files for e in tf.errors],
        # §11: the FINISH frame of the recording's last file, if given.
        "finish": next((tf.finish for tf in files if tf.finish), None),
    }


def profile_json(tf: TraceFile) -> dict:
    """A file's CPU profile context: stacks as lists of hex addresses."""
    return {
        "file": tf.name,
        "profile": tf.profile.to_json() if tf.profile else None,
        "mappings": [m.to_json() for m in tf.mappings],
        "stacks": {str(k): [hex(a) for a in v] for k, v in sorted(tf.stacks.items())},
        "errors": tf.errors,
    }


# -- CLI ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rtdecode.py",
        description="Decode runtrace trace files (format version 1.3, docs/format.md).")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--summary", action="store_true",
                      help="print one JSON object summarising all FILEs")
    mode.add_argument("--events", action="store_true",
                      help="print one JSON object per event (errors go to stderr)")
    mode.add_argument("--profile", action="store_true",
                      help="print one JSON object per FILE: its PROFILE, MAPPINGS and STACKS")
    parser.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)

    decoded: list[TraceFile] = []
    try:
        for path in args.files:
            tf = TraceFile(path)
            decoded.append(tf)
            if args.events:
                for ev in tf.iter_events():
                    sys.stdout.write(json.dumps(ev.to_json()) + "\n")
                for err in tf.errors:
                    print(f"rtdecode: {err}", file=sys.stderr)
            else:
                for _ in tf.iter_events():
                    pass
            if args.profile:
                sys.stdout.write(json.dumps(profile_json(tf)) + "\n")
        if args.summary:
            print(json.dumps(summarize(decoded)))
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into e.g. `head`: not a decode failure, just stop.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    failed = any(tf.errors or tf.truncated for tf in decoded)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
