//! `runtrace_tokio::layer()` in the application's own subscriber (issue
//! 34): the application's `fmt` layer still writes its log lines, and
//! runtrace records the wakes of plain `tokio::spawn` tasks, each once.
//! Its own process: the subscriber is process-wide.

mod common;

use common::{one_wake, record, two_workers_plain, wakers_of};
use std::io::Write;
use std::sync::{Arc, Mutex};
use tracing_subscriber::prelude::*;

/// A `fmt` layer's output, kept in memory.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_application_keeps_its_logs_and_runtrace_gets_the_wakes() {
    let logs = Logs::default();
    let w = logs.clone();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || w.clone())
                .with_ansi(false),
        )
        .with(runtrace_tokio::layer())
        .try_init()
        .expect("the application's subscriber is the process's");
    assert!(runtrace_tokio::wakes::installed());
    let rt = two_workers_plain();
    let dir = tempfile::tempdir().unwrap();
    let mut pairs = Vec::new();
    let events = record(dir.path(), || {
        for _ in 0..3 {
            pairs.push(rt.block_on(one_wake()));
        }
        tracing::info!(answer = 42, "the application logs");
    });
    drop(rt);
    for (waiter, sender) in pairs {
        assert_eq!(wakers_of(&events, waiter), vec![Some(sender)]);
    }
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("the application logs") && text.contains("answer=42"),
        "{text}"
    );
}
