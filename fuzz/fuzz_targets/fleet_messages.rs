#![no_main]
//! `sluice::fuzz::fleet_messages` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzz::fleet_messages(data));
