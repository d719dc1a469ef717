#![no_main]
//! Fuzz target `jsonl`: see `runtrace_fuzz::jsonl`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("jsonl", data));
