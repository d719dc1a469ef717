// Perfetto's trace processor, compiled to WebAssembly for the Perfetto UI,
// run under Node as a byte pipe: standard input carries the trace processor
// RPC requests (serialized TraceProcessorRpcStream messages), standard
// output its replies, framed as the native RPC's are. tools/tp_wasm.py
// speaks the protocol; this file only hosts the module.
//
// Usage: node tools/tp_wasm.js DIR
// where DIR holds a Perfetto UI build's engine_bundle.js and
// trace_processor.wasm (.ci/run fetches one: docs/visual.md).
//
// engine_bundle.js is the UI's engine worker: Emscripten's loader for the
// module, and a WasmBridge that hands each request to the module's
// trace_processor_on_rpc_request and posts each reply on a MessagePort. Here
// the worker scope (`self`) and the port are stand-ins.
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: node tp_wasm.js DIR (a Perfetto UI build)\n");
  process.exit(2);
}
const bundle = path.join(dir, "engine_bundle.js");
let code;
try {
  code = fs.readFileSync(bundle, "utf8");
} catch (e) {
  process.stderr.write(`cannot read ${bundle}: ${e.message}\n`);
  process.exit(2);
}

// The bundle runs as a classic script in a worker: it reads `self`, and
// Emscripten's Node path reads `require`, `__dirname` and `__filename`.
// Its loader finds trace_processor.wasm relative to the working directory.
// Standard output carries the replies only: the module's own printing
// (its `print` is console.log) goes to standard error.
console.log = console.error;
global.self = {};
global.require = require;
global.__dirname = dir;
global.__filename = bundle;
process.chdir(dir);
vm.runInThisContext(code, { filename: bundle });
// This build compiles and starts the module synchronously, inside the
// bridge's constructor; the bridge then sets up its request buffer in a
// promise callback (a request delivered before would be copied to address
// 0). Requests wait for the next task, when that callback has run.
const ready = new Promise((resolve) => setTimeout(resolve, 0));

// Replies are written in order; the trace processor answers each request
// synchronously, from inside the call that delivers it.
const port = {
  postMessage: (data) => process.stdout.write(Buffer.from(data)),
};
global.self.onmessage({ data: { enginePort: port } });
ready.then(() => {
  process.stdin.on("data", (chunk) => port.onmessage({ data: new Uint8Array(chunk) }));
  process.stdin.on("end", () => process.exit(0));
});
