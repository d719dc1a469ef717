#![no_main]
//! Fuzz target `reader_raw`: see `runtrace_fuzz::reader_raw`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("reader_raw", data));
