#![no_main]
//! `sluice_cache::fuzz::cache_wire` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_cache::fuzz::cache_wire(data));
