//! Daily stacked bar charts as inline SVG, drawn on the server: the CSP allows no script, and
//! SVG presentation attributes (`fill`, `x`, `height`) are not styles. Each bar segment carries
//! a `<title>` with its figure, so a screen reader (and a hovering mouse) can read it; every
//! label goes through maud's escaping.

use std::collections::BTreeMap;

use maud::{html, Markup};

use super::usd;

/// Series drawn one by one; the rest are summed as "other".
const MAX_SERIES: usize = 6;

/// Colours told apart in the usual forms of colour blindness (Okabe–Ito), "other" grey.
const PALETTE: [&str; MAX_SERIES] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
];
const OTHER: &str = "#999999";

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 170.0;
/// Room for the axis figures on the left and the dates below.
const LEFT: f64 = 64.0;
const BOTTOM: f64 = 18.0;

/// Spend per day of one breakdown: series name → day (`YYYY-MM-DD`) → USD.
pub(super) type Daily = BTreeMap<String, BTreeMap<String, f64>>;

/// The series by total, largest first, cut to [`MAX_SERIES`] with the rest as "other".
fn ranked(data: &Daily) -> Vec<(String, &'static str, BTreeMap<&str, f64>)> {
    let mut totals: Vec<(&String, f64)> = data
        .iter()
        .map(|(name, days)| (name, days.values().sum::<f64>()))
        .collect();
    totals.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut out: Vec<(String, &'static str, BTreeMap<&str, f64>)> = Vec::new();
    let mut other: BTreeMap<&str, f64> = BTreeMap::new();
    for (i, (name, _)) in totals.iter().enumerate() {
        let days = data[*name].iter().map(|(d, v)| (d.as_str(), *v));
        if i < MAX_SERIES {
            out.push(((*name).clone(), PALETTE[i], days.collect()));
        } else {
            for (d, v) in days {
                *other.entry(d).or_default() += v;
            }
        }
    }
    if !other.is_empty() {
        out.push(("other".to_owned(), OTHER, other));
    }
    out
}

/// A stacked bar per day of `days`, one colour per series, with a legend. `title` names the
/// chart for assistive technology.
pub(super) fn daily_bars(title: &str, days: &[String], data: &Daily) -> Markup {
    let series = ranked(data);
    let day_total = |d: &str| -> f64 { series.iter().filter_map(|s| s.2.get(d)).sum() };
    let top = days.iter().map(|d| day_total(d)).fold(0.0_f64, f64::max);
    let plot = HEIGHT - BOTTOM;
    let slot = (WIDTH - LEFT) / days.len().max(1) as f64;
    let bar = (slot * 0.8).max(1.0);
    let scale = if top > 0.0 { (plot - 4.0) / top } else { 0.0 };
    let fmt = |v: f64| format!("{v:.2}");
    // Each day's segments, stacked from the axis up, largest series at the bottom.
    let mut segments: Vec<(f64, f64, f64, &str, String)> = Vec::new();
    for (i, day) in days.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - bar) / 2.0;
        let mut y = plot;
        for (name, colour, values) in &series {
            if let Some(v) = values.get(day.as_str()).filter(|v| **v > 0.0) {
                let h = (v * scale).max(1.0);
                y -= h;
                segments.push((x, y, h, colour, format!("{day} · {name}: {}", usd(*v))));
            }
        }
    }
    let last = days.len().saturating_sub(1);
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } width=(WIDTH) height=(HEIGHT) role="img" {
                title { (title) }
                line x1=(LEFT) y1=(fmt(plot)) x2=(WIDTH) y2=(fmt(plot)) stroke="#8c959f" {}
                text x=(LEFT - 6.0) y=(fmt(plot)) text-anchor="end" font-size="11" fill="#5b6670" { "$0" }
                @if top > 0.0 {
                    text x=(LEFT - 6.0) y="12" text-anchor="end" font-size="11" fill="#5b6670" { (usd(top)) }
                }
                @for (x, y, h, colour, label) in &segments {
                    rect x=(fmt(*x)) y=(fmt(*y)) width=(fmt(bar)) height=(fmt(*h)) fill=(colour) {
                        title { (label) }
                    }
                }
                @for (i, day) in days.iter().enumerate().filter(|(i, _)| *i == 0 || *i == last) {
                    text x=(fmt(LEFT + slot * i as f64 + slot / 2.0)) y=(HEIGHT - 4.0) text-anchor="middle" font-size="11" fill="#5b6670" { (day.get(5..).unwrap_or(day)) }
                }
            }
            @if series.is_empty() {
                figcaption.muted { "No spend in this period." }
            } @else {
                figcaption {
                    ul.legend {
                        @for (name, colour, values) in &series {
                            li {
                                svg width="10" height="10" aria-hidden="true" { rect width="10" height="10" fill=(colour) {} }
                                " " (name) " " span.muted { (usd(values.values().sum())) }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daily(rows: &[(&str, &str, f64)]) -> Daily {
        let mut d = Daily::new();
        for (name, day, v) in rows {
            *d.entry((*name).to_owned())
                .or_default()
                .entry((*day).to_owned())
                .or_default() += v;
        }
        d
    }

    #[test]
    fn bars_carry_their_figure_and_escape_labels() {
        let days = ["2026-03-01".to_owned(), "2026-03-02".to_owned()];
        let data = daily(&[
            ("<script>alert(1)</script>", "2026-03-01", 1.5),
            ("team-b", "2026-03-02", 0.25),
        ]);
        let svg = daily_bars("Spend by team", &days, &data).into_string();
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>2026-03-02 · team-b: $0.25</title>"),
            "{svg}"
        );
        assert_eq!(
            svg.matches("<rect").count(),
            2 + 2,
            "two bars, two legend swatches"
        );
        assert!(
            !svg.contains("style="),
            "the CSP forbids inline styles: {svg}"
        );
    }

    #[test]
    fn past_six_series_the_rest_is_other() {
        let rows: Vec<(String, f64)> = (0..9)
            .map(|i| (format!("m{i}"), f64::from(i + 1)))
            .collect();
        let rows: Vec<(&str, &str, f64)> = rows
            .iter()
            .map(|(n, v)| (n.as_str(), "2026-03-01", *v))
            .collect();
        let d = daily(&rows);
        let r = ranked(&d);
        let names: Vec<&str> = r.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["m8", "m7", "m6", "m5", "m4", "m3", "other"]);
        assert_eq!(r[6].2["2026-03-01"], 1.0 + 2.0 + 3.0);
    }

    #[test]
    fn an_empty_period_draws_an_axis_and_says_so() {
        let svg = daily_bars("x", &["2026-03-01".to_owned()], &Daily::new()).into_string();
        assert!(svg.contains("No spend in this period."));
        assert!(!svg.contains("<rect"));
    }
}
