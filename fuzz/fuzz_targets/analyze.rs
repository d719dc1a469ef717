#![no_main]
//! Fuzz target `analyze`: see `runtrace_fuzz::analyze`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("analyze", data));
