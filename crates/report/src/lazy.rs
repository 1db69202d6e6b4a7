//! `coldstart lazy`'s text: a table (statement, file:line, cost in ms and
//! MiB, cut, verdict, saving with its interval), each unsafe cut's failing
//! step, and the verified patch. The answer itself is
//! [`answers::lazy`]'s.

use std::fmt::Write as _;

use answers::lazy::{LazyReport, LazyVerdict};
use phases::compare::{Comparison, Verdict};

fn saving_text(c: &Comparison) -> String {
    let pct = |r: f64| (r - 1.0) * 100.0;
    format!(
        "{:+.1}% [{:+.1}, {:+.1}] {}",
        pct(c.ratio),
        pct(c.ci.lo),
        pct(c.ci.hi),
        match c.verdict {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Equivalent => "equivalent",
            Verdict::Inconclusive => "inconclusive",
        }
    )
}

/// `coldstart lazy`'s text: the report, and after a `--fix` that wrote
/// cuts, the ready time before and after and the second report.
pub fn render_run(before: &LazyReport, after: Option<&LazyReport>, out: &mut String) {
    render(before, out);
    if let Some(a) = after {
        let _ = writeln!(
            out,
            "\nafter the fix: ready in {:.1} ms (median of {} instrumented processes), before {:.1} ms; the timed, interleaved saving of each cut written is its row above",
            a.ready_ms, a.processes, before.ready_ms
        );
        render(a, out);
    }
}

/// The report as text: the table, the reasons, then the patch of the
/// safe cuts (unless they were written).
pub fn render(r: &LazyReport, out: &mut String) {
    let _ = writeln!(
        out,
        "lazy: target {}, ready in {:.1} ms (median of {} instrumented processes); imports of the project's own code costing at least {:.1} ms",
        r.target, r.ready_ms, r.processes, r.min_ms
    );
    if r.rows.is_empty() {
        let _ = writeln!(out, "  none: nothing to defer at this threshold");
        return;
    }
    let _ = writeln!(
        out,
        "  {:<28} {:<24} {:>22} {:>8} {:<20} {:<8} saving (ready, B/A - 1, 95% CI)",
        "import", "file:line", "cost ms (range)", "MiB", "cut", "verdict"
    );
    for row in &r.rows {
        let at = match (&row.file, row.line) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            _ => format!("in {}", row.cost.importer),
        };
        let cost = format!(
            "{:.1} ({:.1}..{:.1})",
            row.cost.median_ms, row.cost.min_ms, row.cost.max_ms
        );
        let mib = row
            .rss_mib
            .map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"));
        let cut = row.cut.as_ref().map_or("-", |c| c.kind.as_str());
        let saving = row
            .saving
            .as_ref()
            .map_or_else(|| "-".to_owned(), saving_text);
        let _ = writeln!(
            out,
            "  {:<28} {:<24} {:>22} {:>8} {:<20} {:<8} {}",
            row.cost.module,
            at,
            cost,
            mib,
            cut,
            row.verdict.as_str(),
            saving
        );
    }
    for row in &r.rows {
        if let Some(why) = &row.why {
            let _ = writeln!(
                out,
                "\n  {} ({}): {}",
                row.cost.module,
                row.verdict.as_str(),
                why
            );
        }
        for alt in &row.alternatives {
            let what = match (&alt.why, alt.verified) {
                (_, true) => format!("verified too: {}", alt.cut.summary),
                (Some(why), false) => format!("rejected: {why}"),
                (None, false) => "rejected".to_owned(),
            };
            let _ = writeln!(
                out,
                "\n  {} (another cut, {} at {}): {what}",
                row.cost.module, alt.cut.kind, alt.cut.at
            );
        }
    }
    if r.interrupted {
        let _ = writeln!(
            out,
            "\n  interrupted: the rows after the last one tried are priced, their cuts not tried; nothing was written"
        );
    }
    for w in &r.warnings {
        let _ = writeln!(out, "\n  warning: {w}");
    }
    let patch: String = r
        .rows
        .iter()
        .filter(|row| row.verdict == LazyVerdict::Safe)
        .filter_map(|row| row.cut.as_ref().map(|c| c.diff.as_str()))
        .collect();
    if !r.written.is_empty() {
        for f in &r.written {
            let _ = writeln!(out, "\nwrote {}", f.display());
        }
        for cut in &r.not_written {
            let _ = writeln!(
                out,
                "not written: {cut}: an earlier cut changed its file; run `coldstart lazy --fix` again to write it"
            );
        }
    } else if !patch.is_empty() {
        let _ = write!(
            out,
            "\nthe verified patch of the safe cuts (from the project root: `git apply`; `--fix` writes it):\n{patch}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use answers::lazy::{LazyCut, LazyRow, SCHEMA};
    use importguard::verdict::CostlyImport;

    fn row(module: &str, verdict: LazyVerdict, why: Option<&str>) -> LazyRow {
        LazyRow {
            cost: CostlyImport {
                importer: "app".into(),
                module: module.into(),
                median_ms: 150.0,
                min_ms: 140.0,
                max_ms: 160.0,
                processes: 3,
                of: 3,
            },
            rss_mib: Some(12.5),
            file: Some("app/main.py".into()),
            line: Some(4),
            statement: Some(format!("import {module}")),
            cut: Some(LazyCut {
                kind: "move into functions".into(),
                summary: "s".into(),
                diff: format!("--- a/app/main.py\n+++ b/app/main.py\n@@ {module} @@\n"),
                at: "app/main.py:4".into(),
            }),
            verdict,
            why: why.map(str::to_owned),
            saving: None,
            alternatives: Vec::new(),
        }
    }

    #[test]
    fn the_table_lists_each_row_the_reasons_and_only_the_safe_patch() {
        let r = LazyReport {
            schema: SCHEMA,
            target: "w".into(),
            ready_ms: 400.0,
            min_ms: 20.0,
            processes: 3,
            rows: vec![
                row("fmt", LazyVerdict::Safe, None),
                row(
                    "plug",
                    LazyVerdict::Unsafe,
                    Some("verify request 1 (`load`) failed"),
                ),
            ],
            written: Vec::new(),
            not_written: Vec::new(),
            interrupted: false,
            warnings: Vec::new(),
        };
        let mut text = String::new();
        render(&r, &mut text);
        assert!(text.contains("fmt "), "{text}");
        assert!(text.contains("app/main.py:4"), "{text}");
        assert!(text.contains("150.0 (140.0..160.0)     12.5"), "{text}");
        assert!(text.contains("plug (unsafe): verify request 1"), "{text}");
        assert!(
            text.contains("@@ fmt @@") && !text.contains("@@ plug @@"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["rows"][1]["verdict"], "unsafe");
        assert_eq!(json["rows"][0]["median_ms"], 150.0);
    }

    #[test]
    fn a_rows_other_cuts_are_listed_with_their_own_verification() {
        let mut fmt = row("fmt", LazyVerdict::Safe, None);
        let mut alt = fmt.cut.clone().unwrap();
        alt.kind = "lazy import".into();
        alt.summary = "make `import fmt` (app/main.py:4) a `lazy` import (PEP 810)".into();
        let mut wide = alt.clone();
        wide.kind = "move into functions".into();
        fmt.alternatives = vec![
            answers::lazy::LazyAlternative {
                cut: alt,
                verified: true,
                why: None,
            },
            answers::lazy::LazyAlternative {
                cut: wide,
                verified: false,
                why: Some("start-up still imports it".into()),
            },
        ];
        let r = LazyReport {
            schema: SCHEMA,
            target: "w".into(),
            ready_ms: 400.0,
            min_ms: 20.0,
            processes: 3,
            rows: vec![fmt],
            written: Vec::new(),
            not_written: Vec::new(),
            interrupted: false,
            warnings: Vec::new(),
        };
        let mut text = String::new();
        render(&r, &mut text);
        assert!(
            text.contains(
                "fmt (another cut, lazy import at app/main.py:4): verified too: make `import fmt`"
            ),
            "{text}"
        );
        assert!(
            text.contains("fmt (another cut, move into functions at app/main.py:4): rejected: start-up still imports it"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["rows"][0]["alternatives"][0]["verified"], true);
        assert_eq!(
            json["rows"][0]["alternatives"][0]["cut"]["kind"],
            "lazy import"
        );
    }

    #[test]
    fn a_safe_cut_fix_could_not_write_is_named_not_dropped() {
        let r = LazyReport {
            schema: SCHEMA,
            target: "w".into(),
            ready_ms: 400.0,
            min_ms: 20.0,
            processes: 3,
            rows: vec![
                row("fmt", LazyVerdict::Safe, None),
                row("yaml", LazyVerdict::Safe, None),
            ],
            written: vec!["app/main.py".into()],
            not_written: vec!["yaml (app/main.py:9)".into()],
            interrupted: false,
            warnings: Vec::new(),
        };
        let mut text = String::new();
        render(&r, &mut text);
        assert!(text.contains("wrote app/main.py"), "{text}");
        assert!(
            text.contains("not written: yaml (app/main.py:9): an earlier cut changed its file"),
            "{text}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["not_written"][0], "yaml (app/main.py:9)");
    }
}
