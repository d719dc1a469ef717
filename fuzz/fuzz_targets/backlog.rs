#![no_main]
//! Fuzz target `backlog`: see `runtrace_fuzz::backlog`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("backlog", data));
