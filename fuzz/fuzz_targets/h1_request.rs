#![no_main]
//! `sluice_net::h1::server::fuzz::h1_request` under libFuzzer (fuzz/README.md).
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_net::h1::server::fuzz::h1_request(data));
