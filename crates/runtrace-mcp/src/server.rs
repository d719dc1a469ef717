//! The `rmcp` handler: lists [the tools](crate::tools) and runs them off
//! the async threads (loading a large trace takes a second or two), and
//! [`serve_stdio`], the server of `runtrace mcp`.
//!
//! ```no_run
//! // What `runtrace mcp` does: serve on stdin/stdout until the client leaves.
//! runtrace_mcp::serve_stdio().unwrap();
//! ```

use crate::framing::{self, Verdict};
use crate::tools;
use crate::traces::Traces;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The MCP server: the loaded traces of one session.
#[derive(Clone, Default)]
pub struct Server {
    traces: Arc<Traces>,
}

impl Server {
    /// A server with no traces loaded.
    pub fn new() -> Server {
        Server {
            traces: Arc::new(Traces::new()),
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("runtrace", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Analyse runtrace traces: load_trace a recording's directory under an id, \
                 then get_trace_summary, run_all_analyzers, detect_outliers, \
                 query_trace_events, get_task_timeline, get_window (a `runtrace top` window). Times are ns since the recording started.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = tools::list()
            .into_iter()
            .map(|t| {
                let schema = match t.schema {
                    Value::Object(m) => m,
                    _ => Default::default(),
                };
                Tool::new(t.name, t.description, schema)
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let traces = self.traces.clone();
        let name = request.name.to_string();
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let tool = name.clone();
        let answer = tokio::task::spawn_blocking(move || tools::call(&traces, &tool, &args))
            .await
            .unwrap_or_else(|e| Err(format!("tool {name} failed: {e}")));
        let answer = answer.and_then(|v| {
            let text = v.to_string();
            if text.len() > tools::MAX_ANSWER_BYTES {
                return Err(format!(
                    "the answer is {} bytes, over the limit of {} bytes: ask for less (a smaller `limit`, a narrower filter)",
                    text.len(),
                    tools::MAX_ANSWER_BYTES
                ));
            }
            Ok(text)
        });
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(msg) => CallToolResult::error(vec![ContentBlock::text(msg)]),
        }
        .into())
    }
}

/// Serves MCP on standard input and output until the client closes it.
///
/// Standard input goes through [`crate::framing`] first: every line the
/// SDK would drop without a word (not JSON, not JSON-RPC, over
/// [`crate::framing::MAX_REQUEST_BYTES`]) is answered with a JSON-RPC
/// error; the rest reaches the server through an in-memory pipe. One task
/// writes standard output, so the server's answers and those errors never
/// interleave within a line.
pub fn serve_stdio() -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the MCP server's runtime: {e}"))?;
    rt.block_on(async {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (from_server, to_server) = tokio::io::split(ours);
        let (out, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let writer = tokio::spawn(write_stdout(out_rx));
        tokio::spawn(forward_answers(from_server, out.clone()));
        tokio::spawn(forward_requests(to_server, out));
        let service = Server::new()
            .serve(theirs)
            .await
            .map_err(|e| format!("MCP session failed to start: {e}"))?;
        let ended = service
            .waiting()
            .await
            .map_err(|e| format!("MCP session ended with an error: {e}"));
        // Every answer written before leaving.
        let _ = writer.await;
        ended.map(|_| ())
    })
}

/// Writes each line sent to standard output, in order, until every sender
/// is gone.
async fn write_stdout(mut lines: mpsc::UnboundedReceiver<Vec<u8>>) {
    let mut stdout = tokio::io::stdout();
    while let Some(line) = lines.recv().await {
        if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
            return; // The client is gone.
        }
    }
}

/// The server's answers, line by line, to the writer.
async fn forward_answers(from: impl AsyncRead + Unpin, out: mpsc::UnboundedSender<Vec<u8>>) {
    let mut r = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match r.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if out.send(line).is_err() {
                    return;
                }
            }
        }
    }
}

/// Standard input, line by line (at most `MAX_REQUEST_BYTES` of each
/// kept), judged by [`framing::check`]: forwarded to the server or
/// answered at once. At the end of input the server's input ends too.
async fn forward_requests(mut to: impl AsyncWrite + Unpin, out: mpsc::UnboundedSender<Vec<u8>>) {
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let (line, dropped, eof) = match read_line(&mut stdin, framing::MAX_REQUEST_BYTES).await {
            Ok(x) => x,
            Err(_) => break,
        };
        if !line.is_empty() || dropped > 0 {
            match framing::check(&line, dropped) {
                Verdict::Forward => {
                    let mut msg = line;
                    msg.push(b'\n');
                    if to.write_all(&msg).await.is_err() {
                        break;
                    }
                }
                Verdict::Skip => {}
                Verdict::Reply(r) => {
                    let _ = out.send(r.into_bytes());
                }
            }
        }
        if eof {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// One line of `r` without its newline: at most `max` bytes of it kept,
/// the number of bytes dropped beyond them, and whether input ended.
async fn read_line(
    r: &mut (impl AsyncBufRead + Unpin),
    max: usize,
) -> std::io::Result<(Vec<u8>, usize, bool)> {
    let (mut line, mut dropped) = (Vec::new(), 0usize);
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok((line, dropped, true));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = (max + 1).saturating_sub(line.len()).min(chunk.len());
        line.extend_from_slice(&chunk[..room]);
        dropped += chunk.len() - room;
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            if line.len() > max {
                dropped += line.len() - max;
                line.truncate(max);
            }
            return Ok((line, dropped, false));
        }
    }
}
