#![no_main]
//! Fuzz target `event_stream`: see `runtrace_fuzz::event_stream`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("event_stream", data));
