//! Issue 17 item 7: a task keeps its spawn location in JSON Lines until its
//! last event. tokio fires TaskTerminate inside the task's last poll, so
//! that poll's PollEnd comes after it; at runtime shutdown it may even poll
//! the task once more, on another worker.

use runtrace_export::jsonl::JsonlEncoder;
use runtrace_format::schema::{builtin_by_name, FieldType};
use runtrace_format::{Event, Value};
use std::sync::Arc;

/// Built-in event `name` for task 7 (every other field zero).
fn ev(name: &str, ticks: u64) -> Event {
    let schema = Arc::new(builtin_by_name(name).unwrap().schema());
    let values = schema
        .fields
        .iter()
        .map(|f| match f.ty {
            FieldType::Task => Value::U(7),
            FieldType::Loc => Value::Loc {
                id: 3,
                text: Some(Arc::from("src/main.rs:3:9")),
            },
            FieldType::Bool => Value::Bool(false),
            FieldType::F64 => Value::F(0.0),
            FieldType::Str | FieldType::Istr => Value::Str(Arc::from("")),
            FieldType::Worker => Value::Worker(Some(0)),
            FieldType::I64 | FieldType::I32 => Value::I(0),
            _ => Value::U(0),
        })
        .collect();
    Event {
        ticks,
        ns: ticks as i64,
        tid: 1,
        schema,
        values,
    }
}

#[test]
fn spawn_loc_survives_terminate_until_the_last_poll_end() {
    let mut enc = JsonlEncoder::new();
    let mut out = Vec::new();
    for (i, name) in [
        "task_spawn",
        "task_poll_start",
        "task_terminate", // inside the last poll
        "task_poll_end",
        "task_poll_start", // tokio's poll after terminate, at shutdown
        "task_poll_end",
    ]
    .iter()
    .enumerate()
    {
        enc.write_event(&ev(name, i as u64), &mut out).unwrap();
    }
    let text = String::from_utf8(out).unwrap();
    for line in text.lines().skip(1) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["spawn_loc"], "src/main.rs:3:9", "{line}");
        assert_eq!(v["spawn_loc_id"], 3, "{line}");
    }
    assert_eq!(enc.live_tasks(), 0);
    // A wake of the dead task names no location.
    let mut out = Vec::new();
    enc.write_event(&ev("task_wake", 9), &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["spawn_loc"], serde_json::Value::Null, "{v}");
}
