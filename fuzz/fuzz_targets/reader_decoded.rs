#![no_main]
//! Fuzz target `reader_decoded`: see `runtrace_fuzz::reader_decoded`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("reader_decoded", data));
