"""Perfetto's trace processor from its WebAssembly build, queried from Python.

The native `trace_processor_shell` is distributed only from Perfetto's own
storage, which a machine limited to package registries cannot reach. The
Perfetto UI's build of the same trace processor, compiled to WebAssembly, is
on npm (.ci/run fetches a pinned one; docs/visual.md says which). This module
runs that build under Node (tools/tp_wasm.js, a byte pipe) and speaks the
trace processor's RPC protocol to it, with the `perfetto` package's own
protos and result decoder:

    tp = WasmTraceProcessor("/path/to/perfetto-ui/package", "out.pftrace")
    for row in tp.query("select count(*) as n from perf_sample"):
        print(row.n)
    tp.close()

A request is a TraceProcessorRpcStream holding one TraceProcessorRpc with
the next sequence number (the trace processor refuses a request out of
order); each reply is one TraceProcessorRpc, framed as a length-delimited
field 1 of the stream.
"""
import os
import subprocess

from perfetto.common.query_result_iterator import QueryResultIterator
from perfetto.trace_processor.platform import PlatformDelegate
from perfetto.trace_processor.protos import ProtoFactory

# Bytes of trace per append request (the bridge copies each request into a
# 32 MiB buffer of the module's).
CHUNK = 1 << 20


class TraceProcessorError(Exception):
    """The trace processor refused a request or could not be run."""


class WasmTraceProcessor:
    """One trace processor instance holding the trace at `trace`."""

    def __init__(self, build_dir, trace):
        for f in ("engine_bundle.js", "trace_processor.wasm"):
            if not os.path.isfile(os.path.join(build_dir, f)):
                raise TraceProcessorError(f"{build_dir}: no {f} (not a Perfetto UI build)")
        js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tp_wasm.js")
        try:
            self._p = subprocess.Popen(
                ["node", js, build_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        except FileNotFoundError as e:
            raise TraceProcessorError(f"node cannot be run: {e}") from e
        self._protos = ProtoFactory(PlatformDelegate())
        self._rpc = self._protos.TraceProcessorRpc
        self._seq = 0
        try:
            self._load(trace)
        except BaseException:
            self.close()
            raise

    def _send(self, fill):
        stream = self._protos.TraceProcessorRpcStream()
        msg = stream.msg.add()
        self._seq += 1
        msg.seq = self._seq
        fill(msg)
        try:
            self._p.stdin.write(stream.SerializeToString())
            self._p.stdin.flush()
        except BrokenPipeError as e:
            raise TraceProcessorError(f"the trace processor exited ({self._p.wait()})") from e

    def _read(self, n):
        b = self._p.stdout.read(n)
        if len(b) != n:
            raise TraceProcessorError(f"the trace processor exited ({self._p.wait()})")
        return b

    def _varint(self):
        value = shift = 0
        while True:
            byte = self._read(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def _reply(self):
        tag = self._read(1)[0]
        if tag != 0x0A:
            raise TraceProcessorError(f"unexpected tag {tag:#x} in the reply stream")
        msg = self._rpc()
        msg.MergeFromString(self._read(self._varint()))
        if msg.HasField("fatal_error"):
            raise TraceProcessorError(msg.fatal_error)
        if msg.HasField("invalid_request"):
            raise TraceProcessorError(f"request {msg.invalid_request} not supported")
        return msg

    def _load(self, trace):
        with open(trace, "rb") as f:
            data = f.read()
        for at in range(0, len(data), CHUNK):
            chunk = data[at : at + CHUNK]

            def append(m, chunk=chunk):
                m.request = self._rpc.TPM_APPEND_TRACE_DATA
                m.append_trace_data = chunk

            self._send(append)
            r = self._reply()
            if r.append_result.error:
                raise TraceProcessorError(f"{trace}: {r.append_result.error}")
        self._send(lambda m: setattr(m, "request", self._rpc.TPM_FINALIZE_TRACE_DATA))
        self._reply()

    def query(self, sql):
        """The rows of `sql`, each with the columns as attributes."""

        def ask(m):
            m.request = self._rpc.TPM_QUERY_STREAMING
            m.query_args.sql_query = sql

        self._send(ask)
        result = None
        while True:
            part = self._reply().query_result
            if result is None:
                result = part
            else:
                result.batch.extend(part.batch)
            if result.error:
                raise TraceProcessorError(f"{result.error.strip()} (in: {sql.strip()})")
            if result.batch and result.batch[-1].is_last_batch:
                return list(QueryResultIterator(result.column_names, result.batch))

    def close(self):
        if self._p.poll() is None:
            self._p.stdin.close()
            try:
                self._p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._p.kill()
                self._p.wait()
        self._p.stdout.close()
