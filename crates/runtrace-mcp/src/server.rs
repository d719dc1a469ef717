//! The `rmcp` handler: lists [the tools](crate::tools) and runs them off
//! the async threads (loading a large trace takes a second or two), and
//! [`serve_stdio`], the server of `runtrace mcp`.
//!
//! ```no_run
//! // What `runtrace mcp` does: serve on stdin/stdout until the client leaves.
//! runtrace_mcp::serve_stdio().unwrap();
//! ```

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
                 query_trace_events, get_task_timeline. Times are ns since the recording started.",
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
        Ok(match answer {
            Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            Err(msg) => CallToolResult::error(vec![ContentBlock::text(msg)]),
        }
        .into())
    }
}

/// Serves MCP on standard input and output until the client closes it.
pub fn serve_stdio() -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the MCP server's runtime: {e}"))?;
    rt.block_on(async {
        let service = Server::new()
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| format!("MCP session failed to start: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| format!("MCP session ended with an error: {e}"))?;
        Ok(())
    })
}
