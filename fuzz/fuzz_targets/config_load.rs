#![no_main]
//! `sluice_config::fuzz::config_load` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_config::fuzz::config_load(data));
