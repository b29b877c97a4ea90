//! Budget windows: LiteLLM's `budget_duration` strings (`30s`, `10m`, `24h`, `30d`, `1w`,
//! `1mo`) and the arithmetic of when a spent budget starts again.
//!
//! A reset time is always `start + k × duration` for the smallest `k` that lands after `now`:
//! a gateway that was down for three windows does not reset three times, and resets never drift
//! later by the time the reset job took to run.

use std::fmt;
use std::str::FromStr;

use time::{Duration, OffsetDateTime};

/// A budget window. Months are calendar months (the day of month is kept, clamped to the
/// month's length), everything else a fixed number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetDuration {
    /// A fixed number of seconds (`s`, `m`, `h`, `d`, `w` suffixes).
    Seconds(i64),
    /// A number of calendar months (`mo` suffix).
    Months(u32),
}

/// Why a `budget_duration` string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("budget_duration `{0}` is not a positive number followed by s, m, h, d, w or mo")]
pub struct BadDuration(pub String);

impl FromStr for BudgetDuration {
    type Err = BadDuration;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadDuration(s.to_owned());
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (num, unit) = t.split_at(split);
        let n: i64 = num.parse().map_err(|_| bad())?;
        if n <= 0 {
            return Err(bad());
        }
        let per = match unit {
            "mo" => return u32::try_from(n).map(Self::Months).map_err(|_| bad()),
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            _ => return Err(bad()),
        };
        n.checked_mul(per).map(Self::Seconds).ok_or_else(bad)
    }
}

impl fmt::Display for BudgetDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Months(n) => write!(f, "{n}mo"),
            Self::Seconds(s) if s % 86_400 == 0 => write!(f, "{}d", s / 86_400),
            Self::Seconds(s) if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            Self::Seconds(s) if s % 60 == 0 => write!(f, "{}m", s / 60),
            Self::Seconds(s) => write!(f, "{s}s"),
        }
    }
}

impl BudgetDuration {
    /// Its length in seconds, a month counted as 30 days: for comparing two durations
    /// (`upperbound_key_generate_params`), not for scheduling.
    pub fn approx_seconds(self) -> i64 {
        match self {
            Self::Seconds(s) => s,
            Self::Months(m) => i64::from(m).saturating_mul(30 * 86_400),
        }
    }

    /// `from` plus `k` windows.
    fn add(self, from: OffsetDateTime, k: i64) -> Option<OffsetDateTime> {
        match self {
            Self::Seconds(s) => from.checked_add(Duration::seconds(s.checked_mul(k)?)),
            Self::Months(m) => add_months(from, i64::from(m).checked_mul(k)?),
        }
    }

    /// The first reset after `now` for a window that started at `start`. `None` only when the
    /// date would leave `time`'s range (year 9999).
    pub fn next_reset(self, start: OffsetDateTime, now: OffsetDateTime) -> Option<OffsetDateTime> {
        if now < start {
            return self.add(start, 1);
        }
        // Estimate k without looping through every missed window, then step past `now`.
        let k = match self {
            Self::Seconds(s) => (now - start).whole_seconds() / s,
            Self::Months(m) => {
                let months = (i64::from(now.year()) - i64::from(start.year())) * 12
                    + i64::from(u8::from(now.month()))
                    - i64::from(u8::from(start.month()));
                (months / i64::from(m) - 1).max(0)
            }
        };
        let mut k = k.max(0);
        loop {
            let at = self.add(start, k)?;
            if at > now {
                return Some(at);
            }
            k += 1;
        }
    }
}

impl BudgetDuration {
    /// The window of this length, counted from the Unix epoch, that holds `now`: its start
    /// and end. Windows without a stored start (a key's per-model budgets) are aligned this
    /// way, so every instance of a fleet agrees on them: a day runs from midnight UTC, a month
    /// from the 1st. `None` only past year 9999.
    pub fn aligned_window(self, now: OffsetDateTime) -> Option<(OffsetDateTime, OffsetDateTime)> {
        let end = self.next_reset(OffsetDateTime::UNIX_EPOCH, now)?;
        let start = match self {
            Self::Seconds(s) => end.checked_sub(Duration::seconds(s))?,
            Self::Months(m) => add_months(end, -i64::from(m))?,
        };
        Some((start, end))
    }
}

/// Calendar month arithmetic on the UTC date, keeping the time of day; the 31st becomes the
/// month's last day where the month is shorter.
fn add_months(t: OffsetDateTime, months: i64) -> Option<OffsetDateTime> {
    let total = i64::from(t.year()) * 12 + i64::from(u8::from(t.month())) - 1 + months;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = time::Month::try_from(u8::try_from(total.rem_euclid(12) + 1).ok()?).ok()?;
    let day = t.day().min(month.length(year));
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    Some(t.replace_date(date))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn aligned_windows_start_at_midnight_and_on_the_first() {
        let now = datetime!(2026-11-29 20:15:07 UTC);
        let day = BudgetDuration::Seconds(86_400).aligned_window(now);
        assert_eq!(
            day,
            Some((
                datetime!(2026-11-29 0:00 UTC),
                datetime!(2026-11-30 0:00 UTC)
            ))
        );
        let month = BudgetDuration::Months(1).aligned_window(now);
        assert_eq!(
            month,
            Some((
                datetime!(2026-11-01 0:00 UTC),
                datetime!(2026-12-01 0:00 UTC)
            ))
        );
        let edge = BudgetDuration::Seconds(3600).aligned_window(datetime!(2026-11-29 20:00 UTC));
        assert_eq!(
            edge,
            Some((
                datetime!(2026-11-29 20:00 UTC),
                datetime!(2026-11-29 21:00 UTC)
            ))
        );
    }

    #[test]
    fn parses_litellm_spellings() {
        let p = |s: &str| s.parse::<BudgetDuration>();
        assert_eq!(p("30s"), Ok(BudgetDuration::Seconds(30)));
        assert_eq!(p("10m"), Ok(BudgetDuration::Seconds(600)));
        assert_eq!(p("24h"), Ok(BudgetDuration::Seconds(86_400)));
        assert_eq!(p("30d"), Ok(BudgetDuration::Seconds(30 * 86_400)));
        assert_eq!(p("1w"), Ok(BudgetDuration::Seconds(604_800)));
        assert_eq!(p("1mo"), Ok(BudgetDuration::Months(1)));
        for bad in ["", "d", "0d", "-1d", "5y", "1.5h", "99999999999999999999s"] {
            assert!(p(bad).is_err(), "{bad} should be refused");
        }
        assert_eq!(BudgetDuration::Seconds(86_400).to_string(), "1d");
        assert_eq!(BudgetDuration::Seconds(90).to_string(), "90s");
        assert_eq!(BudgetDuration::Months(3).to_string(), "3mo");
    }

    #[test]
    fn next_reset_skips_missed_windows_without_drift() {
        let d: BudgetDuration = "1d".parse().unwrap();
        let start = datetime!(2026-01-01 00:00 UTC);
        // Before the first window ends: one window after start.
        assert_eq!(
            d.next_reset(start, datetime!(2026-01-01 13:00 UTC)),
            Some(datetime!(2026-01-02 00:00 UTC))
        );
        // Exactly on a boundary: the next one (a reset at `now` is already due).
        assert_eq!(
            d.next_reset(start, datetime!(2026-01-02 00:00 UTC)),
            Some(datetime!(2026-01-03 00:00 UTC))
        );
        // Down for three days and a bit: one reset, aligned to the original start.
        assert_eq!(
            d.next_reset(start, datetime!(2026-01-04 05:30 UTC)),
            Some(datetime!(2026-01-05 00:00 UTC))
        );
        // A start in the future (clock skew between instances): one window after it.
        assert_eq!(
            d.next_reset(start, datetime!(2025-12-31 23:00 UTC)),
            Some(datetime!(2026-01-02 00:00 UTC))
        );
    }

    #[test]
    fn months_are_calendar_months() {
        let d = BudgetDuration::Months(1);
        let start = datetime!(2026-01-31 08:00 UTC);
        assert_eq!(
            d.next_reset(start, datetime!(2026-02-10 00:00 UTC)),
            Some(datetime!(2026-02-28 08:00 UTC))
        );
        assert_eq!(
            d.next_reset(start, datetime!(2026-03-30 00:00 UTC)),
            Some(datetime!(2026-03-31 08:00 UTC))
        );
        let q = BudgetDuration::Months(3);
        assert_eq!(
            q.next_reset(
                datetime!(2025-11-15 00:00 UTC),
                datetime!(2026-06-01 00:00 UTC)
            ),
            Some(datetime!(2026-08-15 00:00 UTC))
        );
    }
}
