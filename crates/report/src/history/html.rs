//! The history as one self-contained HTML page: no network, no file
//! beside it. Per target, the trend of ready time (the median of each
//! commit with its interval as a band), the confirmed changes marked
//! (red slower, green faster), the candidates dashed, the drifts shaded,
//! peak RSS and the import count below; a commit's details on hover
//! (an SVG `<title>` without script, a tooltip with it); then the tables.
//!
//! Everything a commit brings (its subject, module names, paths) is
//! escaped: as text in the markup, and in the page's embedded data with
//! `<`, `>` and `&` as JSON escapes, which the script only ever sets as
//! `textContent`.

use std::fmt::Write as _;

use answers::history::{Confirmed, HistoryReport, Point, TargetHistory};
use answers::words::fmt_pct;

use super::{
    change_line, confirmation_words, drift_import_lines, drift_line, import_lines, point_figures,
    short,
};
use crate::check::ci::xml;

const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;

fn esc(s: &str) -> String {
    xml(&crate::printable(s))
}

/// JSON for a `<script type="application/json">` block: no sequence in
/// it can end the block or start markup.
fn script_json(v: &serde_json::Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The x of point `i` of `n`.
fn x_of(i: usize, n: usize) -> f64 {
    let span = WIDTH - LEFT - RIGHT;
    if n <= 1 {
        LEFT + span / 2.0
    } else {
        LEFT + span * i as f64 / (n - 1) as f64
    }
}

/// A y scale over `[lo, hi]` into `[top, top + height]`, inverted.
struct Scale {
    lo: f64,
    hi: f64,
    top: f64,
    height: f64,
}

impl Scale {
    fn over(values: impl Iterator<Item = f64>, top: f64, height: f64) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.02).max(1e-9);
        Scale {
            lo: (lo - pad).max(0.0),
            hi: hi + pad,
            top,
            height,
        }
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.height * (1.0 - (v - self.lo) / (self.hi - self.lo))
    }

    /// The axis: three labelled lines, with `decimals` digits.
    fn axis(&self, unit: &str, decimals: usize, out: &mut String) {
        for k in 0..3 {
            let v = self.lo + (self.hi - self.lo) * k as f64 / 2.0;
            let y = self.y(v);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{v:.decimals$} {unit}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0
            );
        }
    }
}

/// A polyline through the values that are there.
fn line(points: &[(usize, f64)], n: usize, s: &Scale, colour: &str) -> String {
    let d: Vec<String> = points
        .iter()
        .map(|&(i, v)| format!("{:.1},{:.1}", x_of(i, n), s.y(v)))
        .collect();
    format!(
        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
        d.join(" ")
    )
}

/// The ready chart: band, median line, marks, points.
fn ready_chart(t: &TargetHistory, index: usize) -> String {
    let n = t.points.len();
    let est: Vec<(usize, answers::history::Estimate)> = t
        .points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.failed.is_none())
        .filter_map(|(i, p)| p.ready_ms.map(|e| (i, e)))
        .collect();
    let s = Scale::over(est.iter().flat_map(|(_, e)| [e.lo, e.hi]), 20.0, 220.0);
    let mut out = format!(
        r#"<svg class="chart" data-target="{index}" viewBox="0 0 {WIDTH} 270" width="{WIDTH}" height="270" role="img"><title>ready time of {} by commit</title>"#,
        esc(&t.target)
    );
    s.axis("ms", 1, &mut out);
    let at = |commit: &str| t.points.iter().position(|p| p.commit.commit == commit);
    for d in &t.drifts {
        if let (Some(a), Some(b)) = (at(&d.from.commit), at(&d.to.commit)) {
            let _ = write!(
                out,
                r##"<rect class="drift" x="{:.1}" y="20" width="{:.1}" height="220" fill="#f5d08a" opacity="0.4"><title>{}</title></rect>"##,
                x_of(a, n),
                x_of(b, n) - x_of(a, n),
                esc(&drift_line(d))
            );
        }
    }
    if !est.is_empty() {
        let upper: Vec<String> = est
            .iter()
            .map(|(i, e)| format!("{:.1},{:.1}", x_of(*i, n), s.y(e.hi)))
            .collect();
        let lower: Vec<String> = est
            .iter()
            .rev()
            .map(|(i, e)| format!("{:.1},{:.1}", x_of(*i, n), s.y(e.lo)))
            .collect();
        let _ = write!(
            out,
            r##"<polygon class="band" fill="#9ecae1" opacity="0.5" points="{} {}"/>"##,
            upper.join(" "),
            lower.join(" ")
        );
        let medians: Vec<(usize, f64)> = est.iter().map(|(i, e)| (*i, e.median)).collect();
        out.push_str(&line(&medians, n, &s, "#08519c"));
    }
    for (c, confirmed) in t
        .changes
        .iter()
        .map(|c| (c, true))
        .chain(t.candidates.iter().map(|c| (c, false)))
    {
        let Some(i) = at(&c.at.commit) else { continue };
        let x = x_of(i, n);
        let (class, colour, dash) = match (confirmed, c.series.change >= 0.0) {
            (true, true) => ("change slower", "#d62728", ""),
            (true, false) => ("change faster", "#2ca02c", ""),
            (false, _) => ("candidate", "#888", r#" stroke-dasharray="4 3""#),
        };
        let _ = write!(
            out,
            r#"<line class="{class}" x1="{x:.1}" x2="{x:.1}" y1="14" y2="240" stroke="{colour}" stroke-width="2"{dash}><title>{}: {}</title></line><text x="{x:.1}" y="12" text-anchor="middle" font-size="11" fill="{colour}">{}{}</text>"#,
            esc(&change_line(c)),
            esc(&confirmation_words(&c.confirmation)),
            if c.series.change >= 0.0 { "+" } else { "" },
            fmt_pct(c.series.change)
        );
    }
    for (i, p) in t.points.iter().enumerate() {
        let x = x_of(i, n);
        let title = format!(
            "{} {}: {}",
            short(&p.commit.commit),
            p.commit.subject,
            point_figures(p)
        );
        match p.ready_ms.filter(|_| p.failed.is_none()) {
            Some(e) => {
                let _ = write!(
                    out,
                    r##"<circle class="pt" data-i="{i}" cx="{x:.1}" cy="{:.1}" r="4" fill="#08519c"><title>{}</title></circle>"##,
                    s.y(e.median),
                    esc(&title)
                );
            }
            None => {
                let _ = write!(
                    out,
                    r##"<path class="pt failed" data-i="{i}" d="M{:.1} 247l6 6m0 -6l-6 6" stroke="#d62728" stroke-width="2"><title>{}</title></path>"##,
                    x - 3.0,
                    esc(&title)
                );
            }
        }
    }
    out.push_str("</svg>");
    out
}

/// A small chart of one figure per point (peak RSS, modules).
fn small_chart(
    t: &TargetHistory,
    (what, unit, decimals): (&str, &str, usize),
    f: impl Fn(&Point) -> Option<f64>,
) -> String {
    let n = t.points.len();
    let values: Vec<(usize, f64)> = t
        .points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| f(p).map(|v| (i, v)))
        .collect();
    let s = Scale::over(values.iter().map(|v| v.1), 10.0, 80.0);
    let mut out = format!(
        r#"<svg class="small" viewBox="0 0 {WIDTH} 110" width="{WIDTH}" height="110" role="img"><title>{what} by commit</title><text x="{LEFT}" y="106" font-size="11">{what}</text>"#
    );
    s.axis(unit, decimals, &mut out);
    if !values.is_empty() {
        out.push_str(&line(&values, n, &s, "#6a51a3"));
    }
    out.push_str("</svg>");
    out
}

/// The tables under the charts.
fn tables(t: &TargetHistory, out: &mut String) {
    out.push_str("<h3>Changes</h3>");
    if t.changes.is_empty() && t.drifts.is_empty() {
        out.push_str("<p>No change and no drift found.</p>");
    }
    out.push_str("<ul class=\"changes\">");
    for (c, kind) in t
        .changes
        .iter()
        .map(|c| (c, "change"))
        .chain(t.candidates.iter().map(|c| (c, "candidate")))
    {
        // A confirmed change in the chart's colour: red up, green down.
        let class = match (kind, c.series.change >= 0.0) {
            ("change", true) => "change rise",
            ("change", false) => "change fall",
            _ => kind,
        };
        let _ = write!(
            out,
            "<li class=\"{class}\"><b>{kind}</b> at <code>{}</code> {}<br>{}",
            esc(&c.at.commit),
            esc(&change_line(c)),
            esc(&confirmation_words(&c.confirmation))
        );
        for l in import_lines(c) {
            let _ = write!(out, "<br><code>{}</code>", esc(&l));
        }
        out.push_str("</li>");
    }
    for (d, kind) in t
        .drifts
        .iter()
        .map(|d| (d, "drift"))
        .chain(t.drift_candidates.iter().map(|d| (d, "drift candidate")))
    {
        let _ = write!(
            out,
            "<li class=\"{}\"><b>{kind}</b> {}<br>{}",
            kind.replace(' ', "-"),
            esc(&drift_line(d)),
            esc(&confirmation_words(&d.confirmation))
        );
        for l in drift_import_lines(d) {
            let _ = write!(out, "<br><code>{}</code>", esc(&l));
        }
        out.push_str("</li>");
    }
    out.push_str("</ul><h3>Commits, oldest first</h3><table><tr><th>commit</th><th>subject</th><th>figures</th></tr>");
    for p in &t.points {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(short(&p.commit.commit)),
            esc(&p.commit.subject),
            esc(&point_figures(p))
        );
    }
    out.push_str("</table>");
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:left}#tip{position:fixed;display:none;background:#fff;border:1px solid #888;padding:6px;font-size:12px;max-width:420px;pointer-events:none;white-space:pre-line}li.change{color:#a00}li.change.fall{color:#080}li.candidate{color:#666}";

/// Shows a point's details beside the pointer; text only.
const SCRIPT: &str = r#"(function(){var data=JSON.parse(document.getElementById('history-data').textContent);var tip=document.getElementById('tip');document.querySelectorAll('svg.chart').forEach(function(svg){var t=data[+svg.dataset.target];svg.querySelectorAll('.pt').forEach(function(el){el.addEventListener('mouseenter',function(ev){var p=t.points[+el.dataset.i];tip.textContent=p.commit+'\n'+p.subject+'\n'+p.figures;tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';tip.style.display='block';});el.addEventListener('mouseleave',function(){tip.style.display='none';});});});document.body.dataset.ready='1';})();"#;

/// The whole page.
pub fn html(r: &HistoryReport) -> String {
    let mut body = String::new();
    let data: Vec<serde_json::Value> = r
        .targets
        .iter()
        .map(|t| {
            serde_json::json!({
                "target": t.target,
                "points": t.points.iter().map(|p| serde_json::json!({
                    "commit": p.commit.commit,
                    "subject": crate::printable(&p.commit.subject),
                    "figures": point_figures(p),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    for (k, t) in r.targets.iter().enumerate() {
        let confirmed = t
            .changes
            .iter()
            .filter(|c| c.confirmation.status == Confirmed::Confirmed)
            .count();
        let _ = write!(
            body,
            "<section><h2>{}</h2><p>Environment <code>{}</code> ({}), {} commits, {confirmed} confirmed change(s), {} drift(s), {} candidate(s).</p>",
            esc(&t.target),
            esc(short(&t.environment)),
            esc(&t.interpreter),
            t.points.len(),
            t.drifts.len(),
            t.candidates.len() + t.drift_candidates.len()
        );
        body.push_str(&ready_chart(t, k));
        body.push_str(&small_chart(t, ("peak RSS", "MiB", 1), |p| {
            p.peak_rss_bytes.map(|b| b / (1024.0 * 1024.0))
        }));
        body.push_str(&small_chart(
            t,
            ("modules imported at start-up", "", 0),
            |p| (p.modules > 0).then_some(p.modules as f64),
        ));
        tables(t, &mut body);
        body.push_str("</section>");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>coldstart: start-up history</title><style>{STYLE}</style></head><body><h1>Start-up history</h1><p>Ready time per commit: the median of its trials, with its interval as the band. Changes are searched for on each commit's median CPU time (E-Divisive means, p &lt;= {}, at least {}), and one is marked only when re-measuring its two commits interleaved confirmed it.</p>{body}<div id=\"tip\"></div><script type=\"application/json\" id=\"history-data\">{}</script><script>{SCRIPT}</script></body></html>\n",
        r.rule.max_p,
        fmt_pct(r.rule.min_magnitude),
        script_json(&serde_json::Value::Array(data))
    )
}
