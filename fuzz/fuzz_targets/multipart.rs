#![no_main]
//! `sluice_translate::fuzz::multipart` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_translate::fuzz::multipart(data));
