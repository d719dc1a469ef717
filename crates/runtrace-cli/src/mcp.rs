//! `runtrace mcp`: the MCP server (`runtrace_mcp`) on standard input and
//! output; docs/mcp.md shows how to register it with an MCP client.

use crate::output::fail;
use std::process::ExitCode;

/// Serves until the client closes standard input; exit code 1 when the
/// session fails (the message goes to standard error: standard output is
/// the protocol's).
pub fn run() -> ExitCode {
    match runtrace_mcp::serve_stdio() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}
