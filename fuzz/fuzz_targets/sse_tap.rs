#![no_main]
//! `sluice_translate::fuzz::sse_tap` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_translate::fuzz::sse_tap(data));
