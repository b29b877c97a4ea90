//! What every crate's fuzz targets share (fuzz/README.md): cutting an input into frames the
//! same way on every run, and replaying a target's checked-in corpus as a plain test, so that
//! `cargo test` on stable runs every input the fuzzer ever kept.
//!
//! Not part of sluice's API: hidden from the docs, used only by the `fuzz` functions of the
//! crates and by their tests.

use std::ops::Range;
use std::path::Path;

/// The ranges that cut `len` bytes into frames of 1 to 16 bytes, their sizes chosen by
/// `seed`: a stream parser must read the same thing however its input is split, and a fuzz
/// target compares the split reading with the whole one. `seed` 0 gives one frame.
pub fn frames(seed: u8, len: usize) -> Vec<Range<usize>> {
    if seed == 0 {
        return std::iter::once(0..len).collect();
    }
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0usize;
    while at < len {
        let size = 1 + (usize::from(seed) + i * 7) % 16;
        let end = (at + size).min(len);
        out.push(at..end);
        at = end;
        i += 1;
    }
    out
}

/// Run `target` on every file of its checked-in corpus, `fuzz/corpus/<name>` in the first
/// folder at or above `manifest_dir` (a crate's `CARGO_MANIFEST_DIR`) that has one, and
/// return how many there were. Fails when the folder is missing or empty, so a moved corpus
/// cannot pass unnoticed.
pub fn replay(manifest_dir: &str, name: &str, target: fn(&[u8])) -> usize {
    let dir = Path::new(manifest_dir)
        .ancestors()
        .map(|a| a.join("fuzz/corpus").join(name))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| panic!("no fuzz/corpus/{name} at or above {manifest_dir}"));
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut n = 0;
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // A failing input names its file before the target's own message.
        eprintln!("replaying {}", path.display());
        target(&data);
        n += 1;
    }
    assert!(n > 0, "corpus {} is empty", dir.display());
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cover_the_input_in_order() {
        for seed in [0u8, 1, 9, 255] {
            for len in [0usize, 1, 17, 100] {
                let f = frames(seed, len);
                let mut at = 0;
                for r in &f {
                    assert_eq!(r.start, at);
                    assert!(r.end > r.start && r.end - r.start <= 16 || seed == 0);
                    at = r.end;
                }
                assert_eq!(at, len);
            }
        }
        assert_eq!(frames(0, 5), vec![0..5]);
    }
}
