#![no_main]
//! Fuzz target `check`: see `runtrace_fuzz::check`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("check", data));
