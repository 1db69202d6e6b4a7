//! `coldstart lazy`'s report: its data (one [`LazyRow`] per costly
//! first-party import, the [`LazyReport`] of a target), its JSON schema and
//! its text: a table (statement, file:line, cost in ms and MiB, cut, verdict, saving with
//! its interval), each unsafe cut's failing step, and the verified patch.
//!
//! # JSON schema (`"schema": "coldstart.lazy/1"`)
//!
//! ```text
//! { "schema": "coldstart.lazy/1", "target": str, "ready_ms": number, "min_ms": number,
//!   "processes": int, "written": [str],
//!   "not_written": [str],   // --fix: safe cuts of a file an earlier cut changed
//!   "interrupted": bool,    // stopped by a signal: later rows' cuts not tried, nothing written
//!                           // ("module (file:line)"); the next --fix writes them
//!   "rows": [ { "importer": str, "module": str, "median_ms": number, "min_ms": number,
//!               "max_ms": number, "processes": int, "of": int, "rss_mib": number | null,
//!               "file": str | null, "line": int | null, "statement": str | null,
//!               "cut": {"kind": str, "summary": str, "diff": str} | null,
//!               "verdict": "safe" | "no_win" | "unsafe" | "no_cut",
//!               "why": str | null,            // unsafe: the failing step and its output; no_cut: why
//!               "saving": Comparison | null   // ready, patched copy (B) against the original (A)
//!   } ] }
//! ```

use std::fmt::Write as _;
use std::path::PathBuf;

use importguard::verdict::CostlyImport;
use phases::compare::{Comparison, Verdict};
use serde::Serialize;

/// JSON schema name and version.
pub const SCHEMA: &str = "coldstart.lazy/1";

/// What became of a costly import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LazyVerdict {
    /// Verified on a patched copy, and ready is faster beyond noise.
    Safe,
    /// Verified, but the change of ready is within noise: not offered.
    NoWin,
    /// Every cut tried failed a verification step: not offered.
    Unsafe,
    /// No cut applies to the statement.
    NoCut,
}

impl LazyVerdict {
    /// The word in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            LazyVerdict::Safe => "safe",
            LazyVerdict::NoWin => "no-win",
            LazyVerdict::Unsafe => "unsafe",
            LazyVerdict::NoCut => "no cut",
        }
    }
}

/// A cut as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LazyCut {
    /// Its kind, in words (`move into functions`, ...).
    pub kind: String,
    /// One sentence for people.
    pub summary: String,
    /// Its unified diff, from the project root.
    pub diff: String,
    /// The line it edits (`file:line`, from the project root): the row's
    /// own statement, or a link further down the chain when that one
    /// could not be cut.
    pub at: String,
}

/// One costly import of the project's own code.
#[derive(Debug, Clone, Serialize)]
pub struct LazyRow {
    /// Its price over the processes.
    #[serde(flatten)]
    pub cost: CostlyImport,
    /// The RSS its module's body added in one untimed start-up, MiB.
    pub rss_mib: Option<f64>,
    /// The file of the import statement, relative to the project root.
    pub file: Option<String>,
    /// Its line.
    pub line: Option<u32>,
    /// The statement, on one line.
    pub statement: Option<String>,
    /// The cut verified (or, unsafe, the best one tried).
    pub cut: Option<LazyCut>,
    /// What became of it.
    pub verdict: LazyVerdict,
    /// Unsafe: the step that failed and its output; no cut: why.
    pub why: Option<String>,
    /// The ready time of the patched copy (B) against the original (A),
    /// interleaved.
    pub saving: Option<Comparison>,
}

/// A target's costly imports.
#[derive(Debug, Clone, Serialize)]
pub struct LazyReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The target's name.
    pub target: String,
    /// Median spawn-to-ready over the instrumented processes, ms.
    pub ready_ms: f64,
    /// The least cost listed, ms.
    pub min_ms: f64,
    /// Instrumented processes priced.
    pub processes: usize,
    /// One per import at or above `min_ms`, costliest first.
    pub rows: Vec<LazyRow>,
    /// With `--fix`: the files written.
    pub written: Vec<PathBuf>,
    /// With `--fix`: the safe cuts not written because an earlier cut had
    /// changed their file (each was computed from the file's old bytes),
    /// as `module (file:line)`; the next `--fix` writes them.
    pub not_written: Vec<String>,
    /// Stopped by Ctrl-C or a signal: the rows after the one it was on are
    /// priced but their cuts were not tried, and nothing was written.
    pub interrupted: bool,
    /// What makes the pricing less than whole without stopping it (a
    /// worker that failed at its end, after its start-up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

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
