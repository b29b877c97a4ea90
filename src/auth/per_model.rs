//! Limits a key or a team holds for one model at a time: LiteLLM's `model_rpm_limit`,
//! `model_tpm_limit` (kept in `metadata`) and `model_max_budget`. Each model's limits are a
//! subject of their own ([`Scope::Model`]), counted apart from the holder's own limits and
//! admitted beside them when a request names that model: locally with the same atomics, in a
//! fleet with the same Redis script.
//!
//! A per-model budget's window (`time_period`) has no stored start, so windows are aligned to
//! UTC (`BudgetDuration::aligned_window`): every instance agrees on them without asking. The
//! spend already made in the current window is read back from the spend logs when an
//! instance first builds the subject, so a restart does not hand out a fresh budget.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_core::limits::{nanos, Counters, Limits, Scope, Subject, SubjectKind};
use sluice_store::budget::BudgetDuration;

use super::access::Wanted;

/// The three fields, as LiteLLM names them on keys and teams.
pub const FIELDS: [&str; 3] = ["model_rpm_limit", "model_tpm_limit", "model_max_budget"];

/// One model's limits as a holder's record states them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLimits {
    /// The model group, as requests name it.
    pub model: Arc<str>,
    /// Its requests per minute, tokens per minute and budget.
    pub limits: Limits,
    /// The budget's window (`time_period`); `None`: the budget is never renewed.
    pub period: Option<BudgetDuration>,
}

/// A per-model field the admin API refuses, named for the 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param}: {message}")]
pub struct BadModelLimit {
    /// The field.
    pub param: &'static str,
    /// What is wrong with it.
    pub message: String,
}

fn bad(param: &'static str, message: impl Into<String>) -> BadModelLimit {
    BadModelLimit {
        param,
        message: message.into(),
    }
}

/// A count per minute: a whole number, 0 or more.
fn count(param: &'static str, model: &str, v: &Value) -> Result<u64, BadModelLimit> {
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
                .map(|f| f as u64)
        })
        .ok_or_else(|| {
            bad(
                param,
                format!("the limit for `{model}` must be a whole number, 0 or more"),
            )
        })
}

/// Dollars, as a number or a numeric string (LiteLLM's examples send `"0.0000001"`).
fn usd(param: &'static str, model: &str, v: &Value) -> Result<f64, BadModelLimit> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    n.filter(|n| n.is_finite() && *n >= 0.0).ok_or_else(|| {
        bad(
            param,
            format!("the budget for `{model}` must be a number of USD, 0 or more"),
        )
    })
}

fn models<'a>(param: &'static str, v: &'a Value) -> Result<&'a Map<String, Value>, BadModelLimit> {
    v.as_object()
        .ok_or_else(|| bad(param, "must map each model to its limit"))
}

/// Check one field as an admin call sends it (`null` clears it).
pub fn check(name: &str, value: &Value) -> Result<(), BadModelLimit> {
    if value.is_null() {
        return Ok(());
    }
    let mut m = Map::new();
    m.insert(name.to_owned(), value.clone());
    read(&m).map(drop)
}

/// The per-model limits in a holder's `metadata`, one entry per model named by any of the
/// three fields. A model's `model_rpm_limit` / `model_tpm_limit` win over the `rpm_limit` /
/// `tpm_limit` its `model_max_budget` entry may carry (LiteLLM's order).
pub fn read(metadata: &Map<String, Value>) -> Result<Vec<ModelLimits>, BadModelLimit> {
    let mut out: BTreeMap<&str, ModelLimits> = BTreeMap::new();
    if let Some(v) = field(metadata, "model_max_budget") {
        const P: &str = "model_max_budget";
        for (model, b) in models(P, v)? {
            let e = entry(&mut out, model);
            let Value::Object(o) = b else {
                // A bare number: a budget that is never renewed.
                e.limits.max_budget = Some(nanos(usd(P, model, b)?));
                continue;
            };
            if let Some(l) = member(o, "budget_limit", "max_budget") {
                e.limits.max_budget = Some(nanos(usd(P, model, l)?));
            }
            if let Some(p) = member(o, "time_period", "budget_duration") {
                let text = p.as_str().ok_or_else(|| {
                    bad(
                        P,
                        format!("the time_period of `{model}` must be a string such as \"1d\""),
                    )
                })?;
                let d = text
                    .parse::<BudgetDuration>()
                    .map_err(|d| bad(P, format!("`{model}`: {d}")))?;
                e.period = Some(d);
            }
            if let Some(r) = member(o, "rpm_limit", "rpm_limit") {
                e.limits.rpm = Some(count(P, model, r)?);
            }
            if let Some(t) = member(o, "tpm_limit", "tpm_limit") {
                e.limits.tpm = Some(count(P, model, t)?);
            }
        }
    }
    for param in ["model_rpm_limit", "model_tpm_limit"] {
        let Some(v) = field(metadata, param) else {
            continue;
        };
        for (model, n) in models(param, v)? {
            let n = count(param, model, n)?;
            let e = entry(&mut out, model);
            if param == "model_tpm_limit" {
                e.limits.tpm = Some(n);
            } else {
                e.limits.rpm = Some(n);
            }
        }
    }
    Ok(out.into_values().filter(|e| e.limits.any()).collect())
}

fn entry<'m, 'a>(
    out: &'m mut BTreeMap<&'a str, ModelLimits>,
    model: &'a str,
) -> &'m mut ModelLimits {
    out.entry(model).or_insert_with(|| ModelLimits {
        model: model.into(),
        limits: Limits::default(),
        period: None,
    })
}

fn field<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    m.get(name).filter(|v| !v.is_null())
}

/// A member under LiteLLM's name or its `BudgetConfig` synonym.
fn member<'a>(o: &'a Map<String, Value>, name: &str, synonym: &str) -> Option<&'a Value> {
    field(o, name).or_else(|| field(o, synonym))
}

/// One model's live subject.
#[derive(Debug)]
struct Item {
    model: Arc<str>,
    subject: Subject,
    period: Option<BudgetDuration>,
}

/// A holder's per-model subjects, built when its record is loaded: few, so a slice searched
/// in order. A request for a model none of them names costs one empty search.
#[derive(Debug)]
pub struct PerModel {
    items: Box<[Item]>,
}

impl PerModel {
    /// The subject that limits a request for `wanted`: the one naming the model as the caller
    /// asked for it, else the group it reached.
    pub fn get(&self, wanted: &Wanted<'_>) -> Option<&Subject> {
        let find = |name: &str| self.items.iter().find(|i| &*i.model == name);
        find(wanted.requested)
            .or_else(|| find(wanted.group))
            .map(|i| &i.subject)
    }

    /// The model a per-model subject of a key limits, for LiteLLM's
    /// `x-litellm-key-remaining-requests-{model}` headers.
    pub fn model_of(subject: &Subject) -> Option<&str> {
        (subject.scope == Scope::Model)
            .then(|| subject.id().split_once(ID_SEPARATOR).map(|(_, m)| m))
            .flatten()
    }
}

/// Between a holder's id and the model in a per-model subject's id (which names its counters
/// in a fleet's Redis). A key's hash is hex and a team id is the admin's, so the first
/// occurrence is the separator for keys.
const ID_SEPARATOR: &str = ":model:";

/// A per-model budget whose spend so far is still to be read from the spend logs.
#[derive(Debug)]
pub struct Unfilled {
    /// Whose (a key by hash, or a team).
    pub kind: SubjectKind,
    /// The key's hash or the team's id.
    pub holder: Arc<str>,
    /// The model group.
    pub model: Arc<str>,
    /// The start of the current window (the epoch for a budget without one).
    pub since: OffsetDateTime,
    /// The counters to set.
    pub counters: Weak<Counters>,
}

/// The per-model budgets an instance holds: those with a window, for the sync task to give
/// each ended window its next end, and those whose spend is still to be read.
#[derive(Debug, Default)]
pub struct Budgets {
    windows: Mutex<Vec<(Weak<Counters>, BudgetDuration)>>,
    unfilled: Mutex<Vec<Unfilled>>,
}

impl Budgets {
    /// Build `holder`'s per-model subjects from `specs`, keeping the counters of `old`'s for a
    /// model whose budget window is unchanged. `None` when there are none.
    pub fn build(
        &self,
        kind: SubjectKind,
        holder: &Arc<str>,
        specs: &[ModelLimits],
        old: Option<&PerModel>,
        now: OffsetDateTime,
    ) -> Option<Arc<PerModel>> {
        if specs.is_empty() {
            return None;
        }
        let items = specs
            .iter()
            .map(|spec| {
                let kept = old
                    .and_then(|o| o.items.iter().find(|i| i.model == spec.model))
                    .filter(|i| {
                        i.period == spec.period
                            && i.subject.limits.max_budget.is_some()
                                == spec.limits.max_budget.is_some()
                    });
                let counters = match kept {
                    Some(i) => i.subject.counters.clone(),
                    None => self.fresh(kind, holder, spec, now),
                };
                Item {
                    model: spec.model.clone(),
                    subject: Subject {
                        kind,
                        scope: Scope::Model,
                        limits: Arc::new(spec.limits),
                        counters,
                    },
                    period: spec.period,
                }
            })
            .collect();
        Some(Arc::new(PerModel { items }))
    }

    /// New counters for `spec`: its window's end set and registered for renewal, and, with a
    /// budget, queued for its spend so far.
    fn fresh(
        &self,
        kind: SubjectKind,
        holder: &Arc<str>,
        spec: &ModelLimits,
        now: OffsetDateTime,
    ) -> Arc<Counters> {
        let window = spec.period.and_then(|p| p.aligned_window(now));
        let id: Arc<str> = format!("{holder}{ID_SEPARATOR}{}", spec.model).into();
        let counters = Arc::new(Counters::with_spend(id, 0, window.map(|(_, end)| ms(end))));
        if spec.limits.max_budget.is_none() {
            return counters;
        }
        if let Some(p) = spec.period {
            lock(&self.windows).push((Arc::downgrade(&counters), p));
        }
        lock(&self.unfilled).push(Unfilled {
            kind,
            holder: holder.clone(),
            model: spec.model.clone(),
            since: window.map_or(OffsetDateTime::UNIX_EPOCH, |(start, _)| start),
            counters: Arc::downgrade(&counters),
        });
        counters
    }

    /// Give every per-model budget whose window has ended (and been renewed by a request) its
    /// next end; forget those no holder uses any more. Run by the sync task, off the request
    /// path.
    pub fn renew(&self, now: OffsetDateTime) {
        lock(&self.windows).retain(|(c, period)| {
            let Some(c) = c.upgrade() else {
                return false;
            };
            if c.renewing() {
                c.set_window_end(period.aligned_window(now).map(|(_, end)| ms(end)));
            }
            true
        });
    }

    /// The budgets whose spend so far is still to be read.
    pub fn take_unfilled(&self) -> Vec<Unfilled> {
        std::mem::take(&mut *lock(&self.unfilled))
    }

    /// Put back a budget whose spend could not be read, for the next try.
    pub fn requeue(&self, u: Unfilled) {
        lock(&self.unfilled).push(u);
    }
}

use sluice_core::lock::lock;

fn ms(t: OffsetDateTime) -> u64 {
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_core::limits::{admit, Subjects};

    fn read_json(v: Value) -> Result<Vec<ModelLimits>, BadModelLimit> {
        read(v.as_object().expect("object"))
    }

    #[test]
    fn reads_litellms_three_fields_into_one_entry_per_model() {
        let got = read_json(json!({
            "model_rpm_limit": {"gpt-4": 2, "cheap": 100},
            "model_tpm_limit": {"gpt-4": 1000},
            "model_max_budget": {
                "gpt-4": {"budget_limit": "0.5", "time_period": "1d", "rpm_limit": 9},
                "legacy": 3.0
            },
            "other": 1
        }))
        .expect("valid");
        let by = |m: &str| got.iter().find(|e| &*e.model == m).expect(m);
        let g = by("gpt-4");
        assert_eq!(
            g.limits.rpm,
            Some(2),
            "model_rpm_limit wins over the budget's rpm_limit"
        );
        assert_eq!(g.limits.tpm, Some(1000));
        assert_eq!(g.limits.max_budget, Some(nanos(0.5)));
        assert_eq!(g.period, Some(BudgetDuration::Seconds(86_400)));
        assert_eq!(by("cheap").limits.rpm, Some(100));
        assert_eq!(by("legacy").limits.max_budget, Some(nanos(3.0)));
        assert_eq!(by("legacy").period, None);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn refuses_wrong_shapes_naming_the_field() {
        for (v, param) in [
            (json!({"model_rpm_limit": [1]}), "model_rpm_limit"),
            (json!({"model_rpm_limit": {"m": -1}}), "model_rpm_limit"),
            (json!({"model_tpm_limit": {"m": "many"}}), "model_tpm_limit"),
            (
                json!({"model_max_budget": {"m": {"budget_limit": "x"}}}),
                "model_max_budget",
            ),
            (
                json!({"model_max_budget": {"m": {"budget_limit": 1, "time_period": "5y"}}}),
                "model_max_budget",
            ),
            (json!({"model_max_budget": {"m": true}}), "model_max_budget"),
        ] {
            let e = read_json(v.clone()).expect_err(&v.to_string());
            assert_eq!(e.param, param, "{v}");
        }
        assert!(check("model_rpm_limit", &Value::Null).is_ok());
        assert!(read_json(json!({"model_rpm_limit": {}}))
            .expect("empty")
            .is_empty());
    }

    fn wanted<'a>(requested: &'a str, group: &'a str) -> Wanted<'a> {
        Wanted {
            requested,
            group,
            resolved: None,
        }
    }

    #[test]
    fn a_models_subject_counts_apart_and_keeps_its_counters_across_reloads() {
        let budgets = Budgets::default();
        let now = OffsetDateTime::now_utc();
        let holder: Arc<str> = "abc".into();
        let specs = read_json(json!({"model_rpm_limit": {"gpt-4": 1}})).unwrap();
        let pm = budgets
            .build(SubjectKind::Key, &holder, &specs, None, now)
            .expect("built");
        let s = pm.get(&wanted("gpt-4", "gpt-4")).expect("limited").clone();
        assert_eq!(s.scope, Scope::Model);
        assert_eq!(PerModel::model_of(&s), Some("gpt-4"));
        assert!(pm.get(&wanted("other", "other")).is_none());
        assert!(
            pm.get(&wanted("alias", "gpt-4")).is_some(),
            "by the group it reached"
        );
        let permit = admit(Subjects::from([s]), 0).expect("first");
        let again = pm.get(&wanted("gpt-4", "gpt-4")).unwrap().clone();
        let e = admit(Subjects::from([again]), 1).expect_err("second in the minute");
        assert_eq!(e.scope, Scope::Model);
        assert!(e.to_string().contains("for this model"), "{e}");
        drop(permit);
        // A reload with a new limit keeps the minute's count.
        let specs = read_json(json!({"model_rpm_limit": {"gpt-4": 2}})).unwrap();
        let pm2 = budgets
            .build(SubjectKind::Key, &holder, &specs, Some(&pm), now)
            .unwrap();
        let s2 = pm2.get(&wanted("gpt-4", "gpt-4")).unwrap().clone();
        assert!(Arc::ptr_eq(
            &s2.counters,
            &pm.get(&wanted("gpt-4", "gpt-4")).unwrap().counters
        ));
        assert!(admit(Subjects::from([s2.clone()]), 2).is_ok());
        assert!(admit(Subjects::from([s2]), 3).is_err());
    }

    #[test]
    fn budgets_with_a_window_are_queued_for_their_spend_and_renewed() {
        let budgets = Budgets::default();
        let now = OffsetDateTime::now_utc();
        let holder: Arc<str> = "team-1".into();
        let specs =
            read_json(json!({"model_max_budget": {"m": {"budget_limit": 1, "time_period": "1h"}}}))
                .unwrap();
        let pm = budgets
            .build(SubjectKind::Team, &holder, &specs, None, now)
            .unwrap();
        let s = pm.get(&wanted("m", "m")).unwrap();
        let (start, end) = BudgetDuration::Seconds(3600).aligned_window(now).unwrap();
        assert_eq!(s.counters.window_end(), Some(ms(end)));
        let queued = budgets.take_unfilled();
        assert_eq!(queued.len(), 1);
        assert_eq!(
            (&*queued[0].holder, &*queued[0].model, queued[0].since),
            ("team-1", "m", start)
        );
        assert!(budgets.take_unfilled().is_empty());
        // The window ends: a request's check renews it (spend back to 0), the sync task
        // gives it its next end.
        s.counters.charge(5);
        assert_eq!(s.counters.spent(ms(end)), 0);
        assert!(s.counters.renewing());
        budgets.renew(end);
        assert_eq!(s.counters.window_end(), Some(ms(end) + 3_600_000));
        drop(pm);
        budgets.renew(end);
        assert!(
            lock(&budgets.windows).is_empty(),
            "a budget no holder uses is forgotten"
        );
    }
}
