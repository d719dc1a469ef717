//! The attributes' compile errors (trybuild): each bad argument gets one
//! error naming it, at the argument, and nothing else (no cascade from the
//! function). Expected output in `ui/*.stderr`; after an intended change,
//! regenerate with `TRYBUILD=overwrite cargo test -p runtrace-macros --test ui`.
//!
//! The cases use `runtrace_macros` directly: an error is reported before
//! any code referring to the facade is written, and trybuild builds the
//! cases without the workspace's `--cfg tokio_unstable` (which the
//! facade's tokio support needs).

#[test]
fn compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
