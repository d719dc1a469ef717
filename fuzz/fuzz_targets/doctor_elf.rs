#![no_main]
//! Fuzz target `doctor_elf`: see `runtrace_fuzz::doctor_elf`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| runtrace_fuzz::run("doctor_elf", data));
