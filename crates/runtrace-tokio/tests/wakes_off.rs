//! `RUNTRACE_TOKIO_WAKES=off` leaves the global tracing subscriber to the
//! application (its own process: the subscriber is process-wide).

#[test]
fn wakes_off_leaves_the_global_subscriber_to_the_application() {
    // Before any runtime exists (set_var is only unsound with other threads
    // reading the environment; this test binary has one test).
    // SAFETY: no other thread of this process reads the environment now.
    unsafe { std::env::set_var("RUNTRACE_TOKIO_WAKES", "off") };
    let mut b = tokio::runtime::Builder::new_current_thread();
    runtrace_tokio::instrument(&mut b);
    assert!(!runtrace_tokio::wakes::installed());
    // The application's own subscriber, set after `instrument`, is taken.
    let app = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    assert!(tracing::dispatcher::set_global_default(app).is_ok());
    let rt = b.build().unwrap();
    rt.block_on(async { tokio::spawn(async {}).await.unwrap() });
}
