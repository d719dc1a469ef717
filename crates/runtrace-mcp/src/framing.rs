//! What comes in on standard input before the MCP SDK sees it: one JSON-RPC
//! message per line, at most [`MAX_REQUEST_BYTES`] each. A line the SDK
//! would drop in silence (not JSON, not a JSON-RPC message, too long)
//! gets a JSON-RPC error here instead, so a client never waits forever
//! for an answer that will not come ([`check`]); the id of a request too
//! long to parse is taken from its first bytes where it stands there.
//!
//! ```
//! use runtrace_mcp::framing::{check, Verdict};
//! assert!(matches!(check(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, 0), Verdict::Forward));
//! let Verdict::Reply(r) = check(b"not json", 0) else { panic!() };
//! assert!(r.contains("-32700"));
//! ```

use serde_json::{json, Value};

/// The longest request line accepted (10 MiB): longer ones are answered
/// with a JSON-RPC error, never read whole.
pub const MAX_REQUEST_BYTES: usize = 10 << 20;

/// What to do with one line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the MCP server.
    Forward,
    /// Nothing to do (a blank line).
    Skip,
    /// Answer it with this JSON-RPC error (one line, newline included).
    Reply(String),
}

fn error(id: Value, code: i64, message: String) -> String {
    let mut s = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string();
    s.push('\n');
    s
}

/// Judges one input line (`line` without its newline; `dropped` bytes of
/// it beyond [`MAX_REQUEST_BYTES`] were not kept).
pub fn check(line: &[u8], dropped: usize) -> Verdict {
    if dropped > 0 || line.len() > MAX_REQUEST_BYTES {
        return Verdict::Reply(error(
            leading_id(line),
            -32600,
            format!(
                "invalid request: {} bytes, over the limit of {MAX_REQUEST_BYTES} bytes per message",
                line.len() + dropped
            ),
        ));
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Verdict::Reply(error(Value::Null, -32700, format!("parse error: {e}"))),
    };
    let Value::Object(m) = &v else {
        let what = if v.is_array() {
            "batches are not supported: send one message per line"
        } else {
            "a JSON-RPC message is an object"
        };
        return Verdict::Reply(error(
            Value::Null,
            -32600,
            format!("invalid request: {what}"),
        ));
    };
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Verdict::Reply(error(
            id,
            -32600,
            "invalid request: \"jsonrpc\" must be \"2.0\"".into(),
        ));
    }
    let is_response = m.contains_key("result") || m.contains_key("error");
    match m.get("method") {
        Some(Value::String(_)) => {}
        _ if is_response => {}
        _ => {
            return Verdict::Reply(error(
                id,
                -32600,
                "invalid request: no \"method\" string".into(),
            ))
        }
    }
    if m.get("method").and_then(Value::as_str) == Some("tools/call")
        && !m.get("params").is_some_and(Value::is_object)
    {
        return Verdict::Reply(error(
            id,
            -32602,
            "invalid params: tools/call needs \"params\": {\"name\": ..., \"arguments\": {...}}"
                .into(),
        ));
    }
    Verdict::Forward
}

/// The id of a request whose top-level `"id"` member stands in `head`
/// (the first bytes kept of a message too long to parse), else null.
fn leading_id(head: &[u8]) -> Value {
    // Walk the top-level object only: strings and nesting skipped.
    let (mut depth, mut i) = (0usize, 0usize);
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                i = start;
                while i < head.len() && head[i] != b'"' {
                    i += if head[i] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && head.get(start..i) == Some(b"id") {
                    let rest = &head[(i + 1).min(head.len())..];
                    let rest = rest.strip_prefix(b":").unwrap_or(rest);
                    let mut de = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
                    if let Some(Ok(v @ (Value::Number(_) | Value::String(_)))) = de.next() {
                        return v;
                    }
                    return Value::Null;
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Value::Null
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(v: Verdict) -> Value {
        match v {
            Verdict::Reply(s) => serde_json::from_str(&s).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_bad_line_gets_an_answer() {
        let r = reply(check(b"{oops", 0));
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
        let r = reply(check(b"[1,2]", 0));
        assert_eq!(r["error"]["code"], -32600);
        let r = reply(check(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#, 0));
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(3), json!(-32600))
        );
        let r = reply(check(br#"{"jsonrpc":"2.0","id":"a"}"#, 0));
        assert_eq!(r["id"], "a");
        let r = reply(check(
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call"}"#,
            0,
        ));
        assert_eq!(
            (r["id"].clone(), r["error"]["code"].clone()),
            (json!(4), json!(-32602))
        );
        assert_eq!(check(b"  \r", 0), Verdict::Skip);
        assert_eq!(
            check(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#, 0),
            Verdict::Forward
        );
    }

    #[test]
    fn an_oversized_request_is_answered_by_its_id() {
        let head =
            br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"arguments":{"x":"aaaa"#;
        let r = reply(check(head, 20 << 20));
        assert_eq!(r["id"], 42);
        assert!(r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the limit"));
        // An "id" inside params is not the request's.
        let head = br#"{"jsonrpc":"2.0","params":{"id":7,"x":"aaaa"#;
        assert_eq!(reply(check(head, 1))["id"], Value::Null);
        let head = br#"{"method":"m","id":"q\"1","#;
        assert_eq!(reply(check(head, 1))["id"], "q\"1");
    }
}
