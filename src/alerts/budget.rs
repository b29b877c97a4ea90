//! Which budget alerts are due: every key and holder with a budget or a soft budget, read
//! from the directory's live counters (no store query, no request path), and the levels
//! LiteLLM alerts at: the soft budget reached, 15% and 5% of the budget left, the budget
//! crossed. Each level of each budget window is one alert ([`Crossing::claim`] names it).

use sluice_core::limits::{dollars, Nanos, SubjectKind};

use crate::auth::{Budgeted, Directory};

/// The levels, in LiteLLM's words (`event` in its webhook payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `soft_budget_crossed`: spend reached the soft budget.
    SoftBudget,
    /// `threshold_crossed`: 15% or less of the budget left.
    Left15,
    /// `threshold_crossed`: 5% or less left.
    Left5,
    /// `budget_crossed`: spend reached the budget.
    Crossed,
}

impl Level {
    /// LiteLLM's `event`.
    pub fn event(self) -> &'static str {
        match self {
            Self::SoftBudget => "soft_budget_crossed",
            Self::Left15 | Self::Left5 => "threshold_crossed",
            Self::Crossed => "budget_crossed",
        }
    }

    /// The line that says what happened.
    pub fn message(self) -> &'static str {
        match self {
            Self::SoftBudget => "Soft budget crossed",
            Self::Left15 => "15% or less of budget remaining",
            Self::Left5 => "5% or less of budget remaining",
            Self::Crossed => "Budget crossed",
        }
    }

    /// A short name for the claim key.
    fn short(self) -> &'static str {
        match self {
            Self::SoftBudget => "soft",
            Self::Left15 => "15",
            Self::Left5 => "5",
            Self::Crossed => "max",
        }
    }
}

/// One alert due: who, which level, and the figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    /// Key, team, user, end user or organization.
    pub kind: SubjectKind,
    /// Its id (a key's hash).
    pub id: String,
    /// The name people know it by.
    pub alias: Option<String>,
    /// A key's team, or a team's own id.
    pub team: Option<String>,
    /// A key's user, or a user's own id.
    pub user: Option<String>,
    /// What was reached.
    pub level: Level,
    /// Spend in the window, USD.
    pub spend: f64,
    /// The budget, USD.
    pub max_budget: Option<f64>,
    /// The soft budget, USD.
    pub soft_budget: Option<f64>,
    /// Where e-mail alerts go.
    pub emails: Vec<String>,
    /// The end of the budget window (ms since the epoch; 0: the budget never renews).
    pub window_end_ms: u64,
}

impl Crossing {
    /// The name of this alert, the same on every instance: one per level per budget window.
    pub fn claim(&self) -> String {
        format!(
            "alert:{}:{}:{}:{}",
            self.kind.name().replace(' ', "_"),
            self.id,
            self.level.short(),
            self.window_end_ms
        )
    }

    /// LiteLLM's `event_group`.
    pub fn group(&self) -> &'static str {
        match self.kind {
            SubjectKind::Key => "key",
            SubjectKind::Team => "team",
            SubjectKind::User => "user",
            SubjectKind::EndUser => "customer",
            SubjectKind::Organization => "organization",
            SubjectKind::Tag => "tag",
        }
    }
}

/// Every alert due now: for each budget, the highest level its spend has reached (levels
/// below it were due earlier; a budget first seen past several levels sends only the
/// highest), and the soft budget apart.
pub fn due(dir: &Directory, now_ms: u64) -> Vec<Crossing> {
    let mut out = Vec::new();
    dir.budgeted(|b| {
        let spent = b.subject.counters.spent(now_ms);
        let max = b.subject.limits.max_budget;
        if let Some(level) = max.and_then(|m| max_level(spent, m)) {
            out.push(crossing(&b, level, spent));
        }
        if b.facts.soft_budget.is_some_and(|s| spent >= s) {
            out.push(crossing(&b, Level::SoftBudget, spent));
        }
    });
    out
}

/// The level `spent` has reached of budget `max`, if any.
fn max_level(spent: Nanos, max: Nanos) -> Option<Level> {
    if spent >= max {
        return Some(Level::Crossed);
    }
    let left = max - spent;
    // left/max ≤ 5% ⇔ 20·left ≤ max (integers: no rounding at the edge).
    if left.saturating_mul(20) <= max {
        Some(Level::Left5)
    } else if left.saturating_mul(100) <= max.saturating_mul(15) {
        Some(Level::Left15)
    } else {
        None
    }
}

fn crossing(b: &Budgeted<'_>, level: Level, spent: Nanos) -> Crossing {
    Crossing {
        kind: b.subject.kind,
        id: b.subject.id().to_string(),
        alias: b.facts.alias.clone(),
        team: b.team.map(str::to_owned),
        user: b.user.map(str::to_owned),
        level,
        spend: dollars(spent),
        max_budget: b.subject.limits.max_budget.map(dollars),
        soft_budget: b.facts.soft_budget.map(dollars),
        emails: b.facts.emails.clone(),
        window_end_ms: b.subject.counters.window_end().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::limits::nanos;

    #[test]
    fn levels_are_litellms_thresholds() {
        let max = nanos(100.0);
        assert_eq!(max_level(nanos(84.0), max), None);
        assert_eq!(max_level(nanos(85.0), max), Some(Level::Left15));
        assert_eq!(max_level(nanos(94.9), max), Some(Level::Left15));
        assert_eq!(max_level(nanos(95.0), max), Some(Level::Left5));
        assert_eq!(max_level(nanos(100.0), max), Some(Level::Crossed));
        assert_eq!(max_level(nanos(150.0), max), Some(Level::Crossed));
        assert_eq!(
            max_level(0, 0),
            Some(Level::Crossed),
            "a zero budget is spent"
        );
    }
}
