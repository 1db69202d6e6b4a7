//! `coldstart history show`'s report: text for people, Markdown for a
//! pull request or a job summary, the JSON (`coldstart.history/1`,
//! [`answers::history`]) and one self-contained HTML page ([`html`]).
//! Commit subjects, authors' words and paths are escaped in every format
//! that could read them as markup.

mod html;

use std::fmt::Write as _;

use answers::history::{
    Change, Confirmation, Confirmed, DriftFound, HistoryJson, HistoryReport, ImportChange, Point,
    TargetHistory,
};
use answers::words::{fmt_mib, fmt_ms, fmt_pct, fmt_ratio};

pub use html::html;

/// The JSON report.
pub fn json(r: &HistoryReport) -> String {
    let mut s = serde_json::to_string_pretty(&HistoryJson::of(r)).expect("plain data");
    s.push('\n');
    s
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// What a confirmation said, in words.
pub fn confirmation_words(c: &Confirmation) -> String {
    let with = |w: &str| match &c.comparison {
        Some(cmp) => format!(
            "{w}: CPU time {} in {} rounds, {}",
            fmt_ratio(cmp),
            cmp.n_a.min(cmp.n_b),
            cmp.verdict.words()
        ),
        None => w.to_owned(),
    };
    match c.status {
        Confirmed::Confirmed => with("confirmed by re-measuring"),
        Confirmed::NotConfirmed => with("not confirmed by re-measuring"),
        Confirmed::Inconclusive => with("re-measuring could not tell"),
        Confirmed::NotMeasured => c
            .message
            .clone()
            .unwrap_or_else(|| "not re-measured".to_owned()),
    }
}

/// A change's headline: where, how large on the series.
fn change_line(c: &Change) -> String {
    format!(
        "{} {}: CPU time {} -> {} ({}{}, p {:.3})",
        short(&c.at.commit),
        crate::printable(&c.at.subject),
        fmt_ms(c.series.before_ms),
        fmt_ms(c.series.after_ms),
        if c.series.change >= 0.0 { "+" } else { "" },
        fmt_pct(c.series.change),
        c.series.p
    )
}

/// The import lines under a change.
/// One module that arrived or left, with its line.
fn import_words(i: &ImportChange) -> String {
    let at =
        i.at.as_ref()
            .map_or_else(String::new, |s| format!(" at {s}"));
    format!("{} {}{at}", i.change, crate::printable(&i.module))
}

fn import_lines(c: &Change) -> Vec<String> {
    let mut out: Vec<String> = c.imports.iter().map(import_words).collect();
    if let Some(e) = &c.imports_error {
        out.push(format!("imports not compared: {e}"));
    }
    out
}

/// The commits of a drift whose import tree changed, each with what
/// arrived and left there.
fn drift_import_lines(d: &DriftFound) -> Vec<String> {
    d.imports
        .iter()
        .map(|i| {
            let what: Vec<String> = i.changes.iter().map(import_words).collect();
            format!(
                "imports changed at {} {}: {}",
                short(&i.at.commit),
                crate::printable(&i.at.subject),
                what.join(", ")
            )
        })
        .collect()
}

fn drift_line(d: &DriftFound) -> String {
    format!(
        "drift from {} to {} over {} commits: {}{} in all ({}{} a commit, Mann-Kendall p {:.3})",
        short(&d.from.commit),
        short(&d.to.commit),
        d.commits,
        if d.total >= 0.0 { "+" } else { "" },
        fmt_pct(d.total),
        if d.per_commit >= 0.0 { "+" } else { "" },
        fmt_pct(d.per_commit),
        d.p
    )
}

/// A point's figures: ready with its interval, peak RSS, modules.
fn point_figures(p: &Point) -> String {
    if let Some(f) = &p.failed {
        // One line a commit: the error's first line says what failed
        // (the JSON and the page hold the whole of it).
        let first = f.lines().next().unwrap_or_default();
        let more = if f.trim_end().contains('\n') {
            " (...)"
        } else {
            ""
        };
        return format!("could not be measured: {}{more}", crate::printable(first));
    }
    let ready = p.ready_ms.map_or_else(
        || "no correct trial".to_owned(),
        |e| format!("{} [{}, {}]", fmt_ms(e.median), fmt_ms(e.lo), fmt_ms(e.hi)),
    );
    let mut s = format!("ready {ready}");
    if p.failures > 0 {
        let _ = write!(s, ", {} of {} trials failed", p.failures, p.trials);
    }
    if let Some(c) = p.cpu_ms {
        let _ = write!(s, ", CPU {}", fmt_ms(c));
    }
    if let Some(b) = p.peak_rss_bytes {
        let _ = write!(s, ", peak {}", fmt_mib(b));
    }
    if p.modules > 0 {
        let _ = write!(s, ", {} modules", p.modules);
    }
    s
}

fn target_text(t: &TargetHistory, out: &mut String) {
    let measured = t.points.iter().filter(|p| p.cpu_ms.is_some()).count();
    let _ = writeln!(
        out,
        "`{}` in environment {} ({}): {} commits stored, {measured} with a figure",
        t.target,
        short(&t.environment),
        crate::printable(&t.interpreter),
        t.points.len()
    );
    if t.other_environments > 0 {
        let _ = writeln!(
            out,
            "  ({} runs of other environments are kept and not part of this series)",
            t.other_environments
        );
    }
    if t.changes.is_empty() && t.drifts.is_empty() {
        let _ = writeln!(out, "  no change and no drift found");
    }
    for c in &t.changes {
        let _ = writeln!(out, "  change at {}", change_line(c));
        let _ = writeln!(out, "    {}", confirmation_words(&c.confirmation));
        for l in import_lines(c) {
            let _ = writeln!(out, "    {l}");
        }
    }
    for d in &t.drifts {
        let _ = writeln!(out, "  {}", drift_line(d));
        let _ = writeln!(out, "    {}", confirmation_words(&d.confirmation));
        for l in drift_import_lines(d) {
            let _ = writeln!(out, "    {l}");
        }
    }
    for c in &t.candidates {
        let _ = writeln!(out, "  candidate, not a change: {}", change_line(c));
        let _ = writeln!(out, "    {}", confirmation_words(&c.confirmation));
    }
    for d in &t.drift_candidates {
        let _ = writeln!(
            out,
            "  candidate, not a drift: {}",
            drift_line(d).trim_start_matches("drift ")
        );
        let _ = writeln!(out, "    {}", confirmation_words(&d.confirmation));
    }
    let _ = writeln!(out, "  commits, oldest first:");
    for p in &t.points {
        let _ = writeln!(
            out,
            "    {}  {}  {}",
            short(&p.commit.commit),
            point_figures(p),
            crate::printable(&p.commit.subject)
        );
    }
}

/// The text report: per target, its changes (confirmed), drifts and
/// candidates, then every commit's figures.
pub fn text(r: &HistoryReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "start-up history: change points on each commit's median CPU time by E-Divisive means (p <= {}, at least {} and {} commits a side), each re-measured",
        r.rule.max_p,
        fmt_pct(r.rule.min_magnitude),
        r.rule.min_segment
    );
    if r.targets.is_empty() {
        let _ = writeln!(out, "no target selected");
    }
    for t in &r.targets {
        target_text(t, &mut out);
    }
    out
}

/// `s` for a Markdown table cell or line: no markup, no line break, no
/// cell border.
fn md(s: &str) -> String {
    crate::printable(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace('`', "\\`")
        .replace('*', "\\*")
        .replace('_', "\\_")
        .replace('[', "\\[")
}

fn change_row(c: &Change, label: &str) -> String {
    let imports = c
        .imports
        .iter()
        .map(|i| {
            let at =
                i.at.as_ref()
                    .map_or_else(String::new, |s| format!(" at {}", md(&s.to_string())));
            format!("{} {}{at}", i.change, md(&i.module))
        })
        .collect::<Vec<_>>()
        .join("<br>");
    format!(
        "| {label}`{}` {} | {} → {} | {}{} | {} | {} |",
        short(&c.at.commit),
        md(&c.at.subject),
        fmt_ms(c.series.before_ms),
        fmt_ms(c.series.after_ms),
        if c.series.change >= 0.0 { "+" } else { "" },
        fmt_pct(c.series.change),
        md(&confirmation_words(&c.confirmation)),
        if imports.is_empty() {
            c.imports_error.as_deref().map_or("none".to_owned(), md)
        } else {
            imports
        }
    )
}

/// The Markdown report: per target, a table of the changes, the drifts
/// and the candidates, and the commits in a collapsed section.
pub fn markdown(r: &HistoryReport) -> String {
    let mut out = String::from("## coldstart: start-up history\n\n");
    for t in &r.targets {
        let _ = writeln!(
            out,
            "### `{}`\n\nEnvironment `{}` ({}), {} commits stored.\n",
            md(&t.target),
            short(&t.environment),
            md(&t.interpreter),
            t.points.len()
        );
        if !t.changes.is_empty() || !t.candidates.is_empty() {
            out.push_str(
                "| commit | CPU time | series | re-measured | imports |\n|---|---|---|---|---|\n",
            );
            for c in &t.changes {
                let _ = writeln!(out, "{}", change_row(c, ""));
            }
            for c in &t.candidates {
                let _ = writeln!(out, "{}", change_row(c, "candidate: "));
            }
            out.push('\n');
        }
        for (d, label) in t.drifts.iter().map(|d| (d, "")).chain(
            t.drift_candidates
                .iter()
                .map(|d| (d, "candidate, not a drift: ")),
        ) {
            let line = drift_line(d);
            let line = if label.is_empty() {
                line.as_str()
            } else {
                line.trim_start_matches("drift ")
            };
            let _ = writeln!(
                out,
                "- {label}{}; {}",
                md(line),
                md(&confirmation_words(&d.confirmation))
            );
            for l in drift_import_lines(d) {
                let _ = writeln!(out, "  - {}", md(&l));
            }
        }
        if t.changes.is_empty() && t.drifts.is_empty() {
            out.push_str("No change and no drift found.\n");
        }
        out.push_str("\n<details><summary>Commits, oldest first</summary>\n\n| commit | figures |\n|---|---|\n");
        for p in &t.points {
            let _ = writeln!(
                out,
                "| `{}` {} | {} |",
                short(&p.commit.commit),
                md(&p.commit.subject),
                md(&point_figures(p))
            );
        }
        out.push_str("\n</details>\n\n");
    }
    out
}

#[cfg(test)]
mod tests;
