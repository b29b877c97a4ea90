//! Typed values from loose leaves, each problem recorded at its exact path.

use std::time::Duration;

use super::{Problems, Scalar};

/// The text of a leaf; blank text is no value.
pub fn text(v: Option<Scalar>) -> Option<String> {
    v.map(|s| s.text()).filter(|s| !s.trim().is_empty())
}

/// A whole number ≥ 0 that fits `T`; anything else is an error at `path`.
pub fn whole<T: TryFrom<i128>>(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<T> {
    let v = v?;
    match v.integer().and_then(|i| T::try_from(i).ok()) {
        Some(n) => Some(n),
        None => {
            p.error(
                path,
                format!("expected a whole number ≥ 0, got {:?}", v.text()),
            );
            None
        }
    }
}

/// A finite number > 0 (or ≥ 0 unless `min_exclusive`); anything else is an error at `path`.
pub fn number(path: &str, v: Option<Scalar>, min_exclusive: bool, p: &mut Problems) -> Option<f64> {
    let v = v?;
    match v.number().filter(|n| n.is_finite()) {
        Some(n) if n > 0.0 || (!min_exclusive && n == 0.0) => Some(n),
        _ => {
            let want = if min_exclusive { "> 0" } else { "≥ 0" };
            p.error(
                path,
                format!("expected a number {want}, got {:?}", v.text()),
            );
            None
        }
    }
}

/// Seconds (a number > 0) as a duration.
pub fn seconds(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<Duration> {
    number(path, v, true, p).map(Duration::from_secs_f64)
}

/// Milliseconds (a whole number) as a duration.
pub fn millis(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<Duration> {
    whole::<u64>(path, v, p).map(Duration::from_millis)
}

/// `true` or `false` (`"yes"`, `1`, ... accepted); anything else is an error at `path`.
pub fn boolean(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<bool> {
    let v = v?;
    let b = v.boolean();
    if b.is_none() {
        p.error(path, format!("expected true or false, got {:?}", v.text()));
    }
    b
}
