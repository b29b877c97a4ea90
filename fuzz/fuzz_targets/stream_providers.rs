#![no_main]
//! `sluice_providers::fuzz::stream_providers` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_providers::fuzz::stream_providers(data));
