//! `#[runtrace::main]` and `#[runtrace::test]`: drop-ins for
//! `#[tokio::main]` and `#[tokio::test]` that build the runtime through
//! runtrace's instrumentation, record it when asked (`RUNTRACE_PATH`, or
//! `runtrace(path = ...)`), and seal the recording after the runtime has
//! shut down. Re-exported by the facade (`runtrace::main`, feature
//! `tokio`); the generated code calls `runtrace::__entry`.
//!
//! Arguments (tokio's, same meaning): `flavor = "multi_thread"` (the
//! default for `main`) or `"current_thread"` (the default for `test`),
//! `worker_threads = N`, `start_paused = true` (tokio's `test-util`);
//! and `runtrace(...)`: `path = "traces/app"` (record there always),
//! `cpu_hz = 99` (CPU profile), `name = "api"` (the runtime's name in the
//! trace), `config = my_fn` (a `fn(RecorderBuilder) -> RecorderBuilder`
//! applied to the recorder's settings).
//!
//! Structure (as tokio-macros): `parse` turns the arguments into a
//! `parse::Config`, one error per unknown or repeated key, spanned at
//! the key; `expand` writes the function. On an error the function is
//! emitted unchanged beside a `compile_error!`, so the user sees one clear
//! error, not a cascade.
//!
//! ```ignore
//! #[runtrace::main(worker_threads = 2, runtrace(name = "api"))]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     Ok(())
//! }
//! ```

mod expand;
mod parse;

use proc_macro::TokenStream;

/// Runs `async fn main` on a tokio runtime instrumented by runtrace,
/// recording it when `RUNTRACE_PATH` (or `runtrace(path = ...)`) is set.
/// See the crate docs for the arguments.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::entry(args.into(), item.into(), false).into()
}

/// Runs an `async fn` test on a tokio runtime instrumented by runtrace (a
/// current-thread runtime unless `flavor` says otherwise). See the crate
/// docs for the arguments.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::entry(args.into(), item.into(), true).into()
}
