//! SVG charts of a run: latency added over direct and throughput against concurrency per
//! workload and body size, and peak memory per target.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::report::{Report, Row};

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One line of a chart.
struct Series {
    name: String,
    points: Vec<(usize, f64)>,
}

/// Draw a line chart with concurrency levels on the x axis (evenly spaced).
fn line_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    levels: &[usize],
    series: &[Series],
) -> Result<(), String> {
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.15;
    let y_min = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::min);
    let root = SVGBackend::new(path, (760, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let x_max = levels.len().saturating_sub(1).max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0usize..x_max, y_min..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(levels.len())
        .x_label_formatter(&|i| levels.get(*i).map_or_else(String::new, ToString::to_string))
        .x_desc("concurrency")
        .y_desc(y_label)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn series_by_target(
    rows: &[&Row],
    levels: &[usize],
    value: impl Fn(&Row) -> Option<f64>,
) -> Vec<Series> {
    let mut targets: Vec<&str> = Vec::new();
    for r in rows {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    targets
        .into_iter()
        .map(|t| Series {
            name: t.to_owned(),
            points: rows
                .iter()
                .filter(|r| r.target == t)
                .filter_map(|r| {
                    let x = levels.iter().position(|c| *c == r.concurrency)?;
                    Some((x, value(r)?))
                })
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// Write every chart of `report` into `dir`; returns the files written.
pub fn write_all(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut levels: Vec<usize> = report.rows.iter().map(|r| r.concurrency).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for r in &report.rows {
        if !groups.contains(&(r.workload, r.size)) {
            groups.push((r.workload, r.size));
        }
    }
    let mut written = Vec::new();
    for (w, s) in groups {
        let rows: Vec<&Row> = report
            .rows
            .iter()
            .filter(|r| r.workload == w && r.size == s)
            .collect();
        let added = series_by_target(&rows, &levels, |r| r.added_us.map(|a| a.p50));
        if !added.is_empty() {
            let p = dir.join(format!("added-latency-{w}-{s}.svg"));
            line_chart(
                &p,
                &format!("{w}, {s} body: latency added over direct (p50)"),
                "µs",
                &levels,
                &added,
            )?;
            written.push(p);
        }
        let rps = series_by_target(&rows, &levels, |r| Some(r.rps));
        let p = dir.join(format!("rps-{w}-{s}.svg"));
        line_chart(
            &p,
            &format!("{w}, {s} body: requests per second"),
            "req/s",
            &levels,
            &rps,
        )?;
        written.push(p);
        let rss = series_by_target(&rows, &levels, |r| r.rss_peak_mb);
        if !rss.is_empty() {
            let p = dir.join(format!("rss-{w}-{s}.svg"));
            line_chart(&p, &format!("{w}, {s} body: peak RSS"), "MB", &levels, &rss)?;
            written.push(p);
        }
    }
    Ok(written)
}
