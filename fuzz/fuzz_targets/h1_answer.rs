#![no_main]
//! `sluice_net::h1::fuzz::h1_answer` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_net::h1::fuzz::h1_answer(data));
