//! `instrument` sets no global tracing subscriber (issue 34): an
//! application's own subscriber, set after it (as mini-redis does, inside
//! its main), is the process's, and nothing of runtrace's claims the slot.
//! Its own process: the subscriber is process-wide.

#[test]
fn instrument_leaves_the_global_subscriber_to_the_application() {
    let mut b = tokio::runtime::Builder::new_current_thread();
    runtrace_tokio::instrument(&mut b);
    assert!(!runtrace_tokio::wakes::installed());
    let rt = b.build().unwrap();
    rt.block_on(async { tokio::spawn(async {}).await.unwrap() });
    // The application's own subscriber, set after the runtime ran, is taken.
    let app = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    assert!(tracing::dispatcher::set_global_default(app).is_ok());
}
