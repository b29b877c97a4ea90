//! The inputs the console's forms are made of, and a refused form shown again: every problem
//! beside its field (and listed above the form, linked to it), every value as the viewer typed
//! it. Reading a posted form collects every problem, not only the first; the management API's
//! own refusals are put beside the field they name.

use std::borrow::Cow;

use maud::{html, Markup};
use serde_json::{Map, Value};

use crate::console::Form;
use sluice_core::error::ApiError;

/// Problems with a posted form, by field name (`""`: the form as a whole), in the order found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(in crate::console) struct Problems(Vec<(String, String)>);

impl Problems {
    /// Notes a problem with `field`; a field keeps its first.
    pub(super) fn add(&mut self, field: &str, message: impl Into<String>) {
        if !self.0.iter().any(|(f, _)| f == field) {
            self.0.push((field.to_owned(), message.into()));
        }
    }

    /// The problem with `field`.
    pub(super) fn of(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, m)| m.as_str())
    }

    /// Whether there are none.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A management API refusal, beside the field it names when it names one; "already
    /// exists" beside `named_by`, the field that names what the form makes.
    pub(in crate::console) fn from_api(e: &ApiError, named_by: &str) -> Self {
        let mut p = Self::default();
        match e {
            ApiError::InvalidParam { param, message } => p.add(param, message.clone()),
            ApiError::MissingParam(param) => p.add(param, "required"),
            ApiError::Conflict(what) => p.add(named_by, format!("{what} already exists")),
            other => p.add("", other.to_string()),
        }
        p
    }
}

/// A form as a page shows it: empty or from the store (`typed: None`), or as the viewer posted
/// it with its problems.
#[derive(Debug, Default)]
pub(in crate::console) struct Draft<'a> {
    /// The path the refused form posted to (`/teams/update`).
    action: Option<&'a str>,
    typed: Option<&'a Form>,
    problems: Problems,
}

impl<'a> Draft<'a> {
    /// A form shown afresh.
    pub(in crate::console) fn fresh() -> Self {
        Self::default()
    }

    /// `form`, posted to `action`, refused for `problems`.
    pub(in crate::console) fn refused(action: &'a str, form: &'a Form, problems: Problems) -> Self {
        Self {
            action: Some(action),
            typed: Some(form),
            problems,
        }
    }

    /// The value a field shows: as typed, else `stored`.
    pub(super) fn value<'s>(&'s self, name: &str, stored: impl Into<Cow<'s, str>>) -> Cow<'s, str> {
        match self.typed {
            Some(f) => Cow::Borrowed(f.get(name).unwrap_or_default()),
            None => stored.into(),
        }
    }

    /// The values a group of checkboxes shows checked: as typed, else `stored`.
    fn values(&self, name: &str, stored: &[String]) -> Vec<String> {
        match self.typed {
            Some(f) => f.all(name).map(str::to_owned).collect(),
            None => stored.to_vec(),
        }
    }

    /// Whether a checkbox shows checked: as typed, else `stored`.
    pub(super) fn checked(&self, name: &str, stored: bool) -> bool {
        match self.typed {
            Some(f) => f.get(name).is_some(),
            None => stored,
        }
    }

    /// A form whose controls hold their own values (the playground's), with `problems`.
    pub(super) fn with_problems(problems: Problems) -> Self {
        Self {
            problems,
            ..Self::default()
        }
    }

    /// Whether the form was refused.
    pub(super) fn is_refused(&self) -> bool {
        self.typed.is_some()
    }

    /// This draft for the form posting to `action` (`/teams/update`) when that form was the
    /// one refused; a fresh one for any other form on the same page.
    pub(super) fn for_form(&self, action: &str) -> Draft<'a> {
        match self.action {
            Some(a) if a == action => Draft {
                action: self.action,
                typed: self.typed,
                problems: self.problems.clone(),
            },
            _ => Draft::fresh(),
        }
    }

    /// The problems as one line, for a page that cannot show the form again.
    pub(super) fn plain(&self) -> String {
        self.problems
            .0
            .iter()
            .map(|(f, m)| {
                if f.is_empty() {
                    m.clone()
                } else {
                    format!("{f}: {m}")
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The list of problems above a refused form, each linked to its field.
    pub(super) fn summary(&self) -> Markup {
        html! {
            @if !self.problems.is_empty() {
                div.summary #problems role="alert" {
                    strong { "Not saved: " (self.problems.0.len()) @if self.problems.0.len() == 1 { " problem" } @else { " problems" } }
                    ul {
                        @for (field, message) in &self.problems.0 {
                            @if field.is_empty() {
                                li { (message) }
                            } @else {
                                li { a href={ "#" (field) } { (field) } ": " (message) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One labelled field: its name (also its id), label and hint (the placeholder).
#[derive(Debug, Clone, Copy)]
pub(super) struct Field<'f> {
    /// The form's name for it, and its element id.
    pub name: &'f str,
    /// What the label says.
    pub label: &'f str,
    /// What an empty field means ("no limit").
    pub hint: &'f str,
}

/// A field named `name`, labelled `label`, with no hint.
pub(super) fn field<'f>(name: &'f str, label: &'f str) -> Field<'f> {
    Field {
        name,
        label,
        hint: "",
    }
}

impl<'f> Field<'f> {
    /// The same field with a hint.
    pub(super) fn hint(self, hint: &'f str) -> Self {
        Self { hint, ..self }
    }
}

/// The label, then the control beside its problem (if any); `control` is told whether there
/// is one (for `aria-invalid`).
pub(super) fn row(d: &Draft<'_>, f: Field<'_>, control: impl FnOnce(bool) -> Markup) -> Markup {
    let problem = d.problems.of(f.name);
    html! {
        label for=(f.name) { (f.label) }
        div.field.invalid[problem.is_some()] {
            (control(problem.is_some()))
            @if let Some(p) = problem { span.field-error id={ (f.name) "-error" } { (p) } }
        }
    }
}

/// The id of a field's problem, for `aria-describedby`.
fn described(f: Field<'_>, invalid: bool) -> Option<String> {
    invalid.then(|| format!("{}-error", f.name))
}

/// A text field.
pub(super) fn text(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    input(d, f, "text", stored, None)
}

/// A required text field.
pub(super) fn required(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    row(d, f, |invalid| {
        html! {
            input id=(f.name) name=(f.name) required value=(d.value(f.name, stored))
                placeholder=[(!f.hint.is_empty()).then_some(f.hint)]
                aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)];
        }
    })
}

/// An email field.
pub(super) fn email(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    input(d, f, "email", stored, None)
}

/// An amount in USD, 0 or more, any fraction of a cent.
pub(super) fn usd(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    input(d, f, "number", stored, Some(("0", "any")))
}

/// A whole number, 0 or more (a limit per minute).
pub(super) fn count(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    input(d, f, "number", stored, Some(("0", "1")))
}

fn input(
    d: &Draft<'_>,
    f: Field<'_>,
    kind: &str,
    stored: &str,
    range: Option<(&str, &str)>,
) -> Markup {
    row(d, f, |invalid| {
        html! {
            input id=(f.name) name=(f.name) type=(kind) value=(d.value(f.name, stored))
                min=[range.map(|r| r.0)] step=[range.map(|r| r.1)]
                inputmode=[(range.is_some_and(|r| r.1 == "any")).then_some("decimal")]
                placeholder=[(!f.hint.is_empty()).then_some(f.hint)]
                aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)];
        }
    })
}

/// A password field: never filled in again (a refused form asks for it anew).
pub(super) fn password(d: &Draft<'_>, f: Field<'_>) -> Markup {
    row(d, f, |invalid| {
        html! {
            input id=(f.name) name=(f.name) type="password" autocomplete="new-password"
                placeholder=[(!f.hint.is_empty()).then_some(f.hint)]
                aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)];
        }
    })
}

/// Budget periods offered as suggestions (any LiteLLM duration may be typed).
const PERIODS: &[&str] = &["1h", "1d", "7d", "30d", "1mo"];

/// A duration (`30d`, `1mo`), typed or picked from the usual ones.
pub(super) fn period(d: &Draft<'_>, f: Field<'_>, stored: &str) -> Markup {
    let list = format!("{}-periods", f.name);
    row(d, f, |invalid| {
        html! {
            input id=(f.name) name=(f.name) list=(list) value=(d.value(f.name, stored))
                pattern="[0-9]+(s|m|h|d|w|mo)"
                title="a number and a unit: s, m, h, d, w or mo (30d, 1mo)"
                placeholder=[(!f.hint.is_empty()).then_some(f.hint)]
                aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)];
            datalist id=(list) { @for p in PERIODS { option value=(p) {} } }
        }
    })
}

/// One choice of a select list: value and what it shows.
pub(super) type Choice = (String, String);

/// A select list of `choices`, with `none` (its label) first when the field may be empty; a
/// stored value the choices lack (a team since deleted) stays listed, so saving keeps it.
pub(super) fn pick(
    d: &Draft<'_>,
    f: Field<'_>,
    choices: &[Choice],
    stored: &str,
    none: Option<&str>,
) -> Markup {
    let chosen = d.value(f.name, stored);
    let missing = !chosen.is_empty() && !choices.iter().any(|(v, _)| *v == *chosen);
    row(d, f, |invalid| {
        html! {
            select id=(f.name) name=(f.name)
                aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)] {
                @if let Some(none) = none { option value="" selected[chosen.is_empty()] { (none) } }
                @if missing { option value=(chosen) selected { (chosen) " (not found)" } }
                @for (value, label) in choices {
                    option value=(value) selected[*value == *chosen] { (label) }
                }
            }
        }
    })
}

/// The model groups and access groups a key, team or user may be limited to: a checkbox
/// each (none checked: all), a stored name the lists lack kept and checked, and a text field
/// (`<name>_other`) for more names or wildcards, comma-separated.
pub(super) fn models(d: &Draft<'_>, f: Field<'_>, offered: &Offered, stored: &[String]) -> Markup {
    let checked = d.values(f.name, stored);
    let other_name = format!("{}_other", f.name);
    let known = |m: &String| offered.models.contains(m) || offered.access_groups.contains(m);
    let kept: Vec<&String> = checked.iter().filter(|m| !known(m)).collect();
    let typed_other = d.value(&other_name, "");
    row(d, f, |invalid| {
        html! {
            fieldset.picks id=(f.name) aria-invalid=[invalid.then_some("true")] aria-describedby=[described(f, invalid)] {
                legend.muted { "none checked: all" }
                @for m in &offered.models {
                    label { input type="checkbox" name=(f.name) value=(m) checked[checked.contains(m)]; " " (m) }
                }
                @for g in &offered.access_groups {
                    label { input type="checkbox" name=(f.name) value=(g) checked[checked.contains(g)]; " " (g) span.muted { " (access group)" } }
                }
                @if !d.is_refused() {
                    @for m in &kept {
                        label { input type="checkbox" name=(f.name) value=(m) checked; " " (m) span.muted { " (not served now)" } }
                    }
                }
            }
            input id=(other_name) name=(other_name) value=(typed_other)
                placeholder="other names or wildcards, comma-separated" aria-label="Other models";
        }
    })
}

/// What a models picker offers: the model groups served and the access groups their
/// deployments name.
#[derive(Debug, Default)]
pub(in crate::console) struct Offered {
    /// Model group names, in config order.
    pub models: Vec<String>,
    /// Access group names, in name order.
    pub access_groups: Vec<String>,
}

/// Reads a posted form into the management API's values, collecting every problem.
pub(super) struct Reader<'a> {
    form: &'a Form,
    problems: Problems,
}

impl<'a> Reader<'a> {
    pub(super) fn new(form: &'a Form) -> Self {
        Self {
            form,
            problems: Problems::default(),
        }
    }

    /// A trimmed field, `None` when absent or blank.
    pub(super) fn filled(&self, name: &str) -> Option<&'a str> {
        self.form.filled(name)
    }

    /// A field that must be filled.
    pub(super) fn required(&mut self, name: &str) -> Option<&'a str> {
        let v = self.form.filled(name);
        if v.is_none() {
            self.problems.add(name, "required");
        }
        v
    }

    /// A text field as a JSON value: `null` when blank.
    pub(super) fn text_or_null(&self, name: &str) -> Value {
        self.form.filled(name).map_or(Value::Null, Into::into)
    }

    /// An amount in USD, 0 or more; `null` when blank.
    pub(super) fn usd(&mut self, name: &str) -> Value {
        self.number(name, false, "an amount")
    }

    /// A whole number, 0 or more; `null` when blank.
    pub(super) fn count(&mut self, name: &str) -> Value {
        self.number(name, true, "a whole number")
    }

    /// A price per token in USD, 0 or more; `null` when blank.
    pub(super) fn price(&mut self, name: &str) -> Value {
        self.number(name, false, "a price")
    }

    fn number(&mut self, name: &str, whole: bool, noun: &str) -> Value {
        let Some(v) = self.form.filled(name) else {
            return Value::Null;
        };
        match parse_number(v, whole) {
            Some(n) => n,
            None => {
                let what = if whole {
                    "0 or more, no fraction"
                } else {
                    "0 or more"
                };
                self.problems
                    .add(name, format!("`{v}` is not {noun}: {what}"));
                Value::Null
            }
        }
    }

    /// A budget period (`30d`, `1mo`, `12h`), as the store reads it; `null` when blank.
    pub(super) fn period(&mut self, name: &str) -> Value {
        let Some(v) = self.form.filled(name) else {
            return Value::Null;
        };
        match v.parse::<sluice_store::BudgetDuration>() {
            Ok(_) => v.into(),
            Err(_) => {
                self.problems.add(
                    name,
                    format!("`{v}` is not a period: a number and s, m, h, d, w or mo (30d, 1mo)"),
                );
                Value::Null
            }
        }
    }

    /// A password of 8 characters or more; `None` when blank.
    pub(super) fn password(&mut self, name: &str) -> Option<&'a str> {
        let v = self.form.get(name).filter(|p| !p.is_empty())?;
        if v.chars().count() < 8 {
            self.problems
                .add(name, "8 characters or more (type it again)");
        }
        Some(v)
    }

    /// The models picker's names: the boxes checked and the names typed beside them.
    pub(super) fn models(&self, name: &str) -> Vec<Value> {
        let other = format!("{name}_other");
        let mut out: Vec<String> = Vec::new();
        let typed = self.form.filled(&other).unwrap_or_default();
        // A posted value may itself list several, comma-separated (a form of an older page).
        let names = self
            .form
            .all(name)
            .chain([typed])
            .flat_map(|v| v.split(','));
        for m in names.map(str::trim) {
            if !m.is_empty() && !out.iter().any(|o| o == m) {
                out.push(m.to_owned());
            }
        }
        out.into_iter().map(Value::from).collect()
    }

    /// Notes a problem found otherwise.
    pub(super) fn problem(&mut self, name: &str, message: impl Into<String>) {
        self.problems.add(name, message);
    }

    /// The problems found, or `Ok` when there are none.
    pub(super) fn finish(self) -> Result<(), Problems> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(self.problems)
        }
    }
}

/// Puts each of `values` that is not `null` into `body` (a new thing's body: a blank field is
/// left to the API's default).
pub(super) fn given<'n>(
    body: &mut Map<String, Value>,
    values: impl IntoIterator<Item = (&'n str, Value)>,
) {
    for (name, v) in values {
        if !v.is_null() {
            body.insert(name.into(), v);
        }
    }
}

/// `v` as a JSON number of 0 or more (whole: an integer).
fn parse_number(v: &str, whole: bool) -> Option<Value> {
    if whole {
        return v.parse::<u64>().ok().map(Value::from);
    }
    v.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .and_then(serde_json::Number::from_f64)
        .map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Form {
        let mut s = form_urlencoded::Serializer::new(String::new());
        for (k, v) in pairs {
            s.append_pair(k, v);
        }
        Form::parse(s.finish().as_bytes())
    }

    #[test]
    fn every_problem_is_collected_by_its_field() {
        let f = form(&[
            ("max_budget", "ten"),
            ("rpm_limit", "1.5"),
            ("tpm_limit", "-3"),
            ("budget_duration", "monthly"),
            ("password", "short"),
            ("user_id", " "),
        ]);
        let mut r = Reader::new(&f);
        assert_eq!(r.usd("max_budget"), Value::Null);
        assert_eq!(r.count("rpm_limit"), Value::Null);
        assert_eq!(r.count("tpm_limit"), Value::Null);
        assert_eq!(r.period("budget_duration"), Value::Null);
        assert_eq!(r.password("password"), Some("short"));
        assert_eq!(r.required("user_id"), None);
        let problems = r.finish().unwrap_err();
        let fields: Vec<&str> = problems.0.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "max_budget",
                "rpm_limit",
                "tpm_limit",
                "budget_duration",
                "password",
                "user_id"
            ]
        );
        assert!(problems.of("max_budget").unwrap().contains("`ten`"));
    }

    #[test]
    fn good_values_become_the_apis() {
        let f = form(&[
            ("max_budget", "12.5"),
            ("rpm_limit", "60"),
            ("tpm_limit", ""),
            ("budget_duration", "1mo"),
            ("models", "gpt-4o"),
            ("models", "search-group"),
            ("models_other", "openai/*, gpt-4o ,"),
        ]);
        let mut r = Reader::new(&f);
        assert_eq!(r.usd("max_budget"), serde_json::json!(12.5));
        assert_eq!(r.count("rpm_limit"), serde_json::json!(60));
        assert_eq!(r.count("tpm_limit"), Value::Null);
        assert_eq!(r.period("budget_duration"), serde_json::json!("1mo"));
        assert_eq!(
            r.models("models"),
            [
                Value::from("gpt-4o"),
                Value::from("search-group"),
                Value::from("openai/*")
            ]
        );
        assert!(r.finish().is_ok());
    }

    #[test]
    fn a_refused_form_shows_what_was_typed_and_each_problem_beside_its_field() {
        let f = form(&[("max_budget", "ten"), ("key_alias", "kept <b>")]);
        let mut p = Problems::default();
        p.add("max_budget", "`ten` is not an amount");
        let d = Draft::refused("/keys/new", &f, p);
        let html = html! {
            (text(&d, field("key_alias", "Alias"), "stored"))
            (usd(&d, field("max_budget", "Budget"), "1.0"))
        }
        .into_string();
        assert!(html.contains(r#"value="kept &lt;b&gt;""#), "{html}");
        assert!(html.contains(r#"value="ten""#), "{html}");
        assert!(
            html.contains(
                r#"<span class="field-error" id="max_budget-error">`ten` is not an amount</span>"#
            ),
            "{html}"
        );
        assert!(html.contains(r#"aria-invalid="true""#));
        assert!(
            html.contains(r#"type="number" value="ten" min="0" step="any""#),
            "{html}"
        );

        let fresh = Draft::fresh();
        let html = usd(&fresh, field("max_budget", "Budget"), "1.0").into_string();
        assert!(html.contains(r#"value="1.0""#) && !html.contains("field-error"));
    }

    #[test]
    fn the_apis_refusal_goes_beside_the_field_it_names() {
        let p = Problems::from_api(
            &ApiError::InvalidParam {
                param: "team_id",
                message: "no such team".into(),
            },
            "key_alias",
        );
        assert_eq!(p.of("team_id"), Some("no such team"));
        let p = Problems::from_api(&ApiError::Conflict("team `a`".into()), "team_id");
        assert_eq!(p.of("team_id"), Some("team `a` already exists"));
        let p = Problems::from_api(&ApiError::StoreUnavailable, "team_id");
        assert!(p.of("").is_some());
    }
}
