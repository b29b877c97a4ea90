#![no_main]
//! `sluice_net::fuzz::sigv4` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_net::fuzz::sigv4(data));
