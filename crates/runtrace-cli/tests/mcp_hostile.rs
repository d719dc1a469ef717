//! `runtrace mcp` against what careless or hostile clients send (issue 37):
//! every line gets an answer (malformed JSON, a batch, a request over the
//! size limit, `tools/call` without params), a `limit` of 2^64-1 is
//! clamped and said so, a pseudo-file that blocks when read loads as
//! nothing at once, and the traces loaded before stay loaded throughout.
//! Raw JSON-RPC lines on the server's stdin, answers read from its stdout.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn golden(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
        .display()
        .to_string()
}

fn call(id: u64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}})
    .to_string()
}

#[test]
fn every_request_gets_an_answer_and_loaded_traces_survive() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runtrace"))
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start runtrace mcp");
    let mut lines: Vec<String> = vec![
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}).to_string(),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}).to_string(),
        call(2, "load_trace", json!({"trace_id": "q", "file_path": golden("quickstart")})),
        "{not json".into(),
        "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}]".into(),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call"}).to_string(),
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"name\":\"list_traces\",\"arguments\":{{\"pad\":\"{}\"}}}}}}",
            "x".repeat(11 << 20)
        ),
        call(6, "query_trace_events", json!({"trace_id": "q", "limit": u64::MAX})),
        call(7, "load_trace", json!({"trace_id": "k", "file_path": "/proc/kmsg"})),
        call(8, "get_task_timeline", json!({"trace_id": "q", "task_id": 1, "limit": u64::MAX})),
        call(9, "list_traces", json!({})),
    ];
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        for l in lines.drain(..) {
            stdin.write_all(l.as_bytes()).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        // Stdin stays open until the answers are in (dropped at the end).
        std::thread::sleep(Duration::from_secs(30));
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers: Vec<Value> = Vec::new();
    let mut line = String::new();
    while answers.len() < 10 && started.elapsed() < Duration::from_secs(60) {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        answers.push(serde_json::from_str(&line).unwrap());
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(writer);
    let by_id = |id: Value| -> Value {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer with id {id}: {answers:?}"))
    };
    let nulls: Vec<&Value> = answers.iter().filter(|a| a["id"].is_null()).collect();
    assert_eq!(nulls.len(), 2, "parse error and batch: {nulls:?}");
    assert_eq!(nulls[0]["error"]["code"], -32700);
    assert_eq!(nulls[1]["error"]["code"], -32600);
    assert_eq!(by_id(json!(4))["error"]["code"], -32602);
    let big = by_id(json!(5));
    assert_eq!(big["error"]["code"], -32600);
    assert!(big["error"]["message"]
        .as_str()
        .unwrap()
        .contains("over the limit"));
    let text = |a: Value| -> Value {
        assert_eq!(a["result"]["isError"], false, "{a}");
        serde_json::from_str(a["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
    };
    let q = text(by_id(json!(6)));
    assert_eq!(q["limit"], 10_000, "{}", q["limit"]);
    assert!(q["returned"].as_u64().unwrap() <= 10_000);
    let k = by_id(json!(7));
    assert_eq!(k["result"]["isError"], true, "{k}");
    let tl = text(by_id(json!(8)));
    assert!(tl["events"].as_array().unwrap().len() <= 10_000);
    let l = text(by_id(json!(9)));
    assert_eq!(
        l["traces"][0]["trace_id"], "q",
        "the loaded trace survived: {l}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "every answer came (reading /proc/kmsg must not block)"
    );
}
