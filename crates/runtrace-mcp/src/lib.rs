//! runtrace's MCP server (`runtrace mcp`): AI agents and tools load traces
//! and ask for their summary, every analysis, outliers, events and task
//! timelines, over stdio (JSON-RPC 2.0, on the official Rust MCP SDK,
//! `rmcp`). docs/mcp.md lists the tools and shows how to register the
//! server with an MCP client.
//!
//! Layers: [`framing`] answers input lines the SDK would drop (not JSON,
//! too long) with JSON-RPC errors; [`traces`] holds the loaded traces by id; [`args`] reads tool
//! arguments; [`tools`] names and dispatches the tools (each analysis's
//! tool and answer come from `runtrace_analyze::registry`);
//! [`server`] is the `rmcp` handler. A tool that fails answers with an MCP
//! tool error (`isError`) naming what went wrong; the server keeps running.
//!
//! ```
//! use runtrace_mcp::{tools, traces::Traces};
//! let traces = Traces::new();
//! let err = tools::call(&traces, "get_trace_summary", &serde_json::json!({"trace_id": "t"}))
//!     .unwrap_err();
//! assert!(err.contains("unknown trace_id \"t\""));
//! ```

#![warn(missing_docs)]

pub mod args;
pub mod framing;
pub mod server;
pub mod tools;
pub mod traces;

pub use server::serve_stdio;
