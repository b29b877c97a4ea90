//! Build script: deflates the built-in model registry (LiteLLM's `model_prices_and_context_window.json`,
//! 3.5 MB of JSON) into `OUT_DIR`, so the binary carries ~175 KB; `prices.rs` inflates it once,
//! at the first config load.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = "data/model_prices_and_context_window.json";
    println!("cargo:rerun-if-changed={source}");
    let json = std::fs::read(source).map_err(|e| format!("{source}: {e}"))?;
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 10);
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    std::fs::write(out.join("model_prices.json.deflate"), deflated)?;
    Ok(())
}
