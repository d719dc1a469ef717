//! An application that builds its tokio runtime by hand, recorded
//! (docs/recorder.md, "Apps that build their runtime by hand"). The code
//! between the markers is the guide's, checked by `tests/entry.rs` to be
//! the same; it compiles whatever the application's error type is (here
//! `Box<dyn Error + Send + Sync>`, as in tokio's mini-redis), since no
//! runtrace error goes through the application's `?`.
//!
//! ```text
//! RUNTRACE_PATH=traces/app cargo run --example manual_runtime --features tokio,record
//! ```

// guide: begin
type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    // 1. Start recording first, when RUNTRACE_PATH asks for it; a bad
    //    setting is reported and the application runs unrecorded.
    let recording = match std::env::var_os("RUNTRACE_PATH") {
        Some(_) => runtrace::Recorder::builder()
            .start()
            .map_err(|e| eprintln!("runtrace: not recording: {e}"))
            .ok(),
        None => None,
    };
    // 2. The runtime, built through runtrace's hooks.
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    runtrace::tokio::instrument(builder.enable_all());
    let runtime = builder.build().expect("failed to build the tokio runtime");
    // 3. The old body of `main`, unchanged, as an async function.
    let result = runtime.block_on(app());
    // 4. Shut the runtime down (its workers record their end), then seal
    //    the recording; the application's result is returned as it was.
    drop(runtime);
    if let Some(recording) = recording {
        if let Err(e) = recording.finish() {
            eprintln!("runtrace: {e}");
        }
    }
    result
}
// guide: end

async fn app() -> Result<(), Error> {
    let n: u64 = "21".parse()?;
    let doubled = tokio::spawn(async move { n * 2 }).await?;
    println!("{doubled}");
    Ok(())
}
