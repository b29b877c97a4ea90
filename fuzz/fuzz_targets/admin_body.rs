#![no_main]
//! `sluice::fuzz::admin_body` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzz::admin_body(data));
