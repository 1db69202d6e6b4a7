//! `coldstart lazy`'s answer: one [`LazyRow`] per costly first-party
//! import, the [`LazyReport`] of a target, and with `--fix` the report
//! before and after the fix ([`LazyFixJson`]). `report::lazy` renders it.
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
//!               "saving": Comparison | null,  // ready, patched copy (B) against the original (A)
//!               "alternatives": [ {             // the statement's other cuts, each verified on its
//!                   "cut": {...}, "verified": bool, "why": str | null } ]  // own copy (omitted when none)
//!   } ] }
//! ```
//! With `--fix`, when cuts were written and priced again:
//! `{ "schema": "coldstart.lazy-fix/1", "before": <coldstart.lazy/1>, "after": <coldstart.lazy/1> }`.

use std::path::PathBuf;

use importguard::verdict::CostlyImport;
use phases::compare::Comparison;
use serde::Serialize;

/// JSON schema name and version.
pub const SCHEMA: &str = "coldstart.lazy/1";

/// The schema of `--fix`'s answer when the fix was priced again.
pub const FIX_SCHEMA: &str = "coldstart.lazy-fix/1";

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
    /// The statement's other cuts (another scope, PEP 810 `lazy` on 3.15),
    /// each verified on its own patched copy; its saving is not measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<LazyAlternative>,
}

/// Another cut of a row's statement and its own verification.
#[derive(Debug, Clone, Serialize)]
pub struct LazyAlternative {
    /// The cut.
    pub cut: LazyCut,
    /// Whether it passed its verification on its own patched copy.
    pub verified: bool,
    /// Rejected: the step that failed and its output.
    pub why: Option<String>,
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

/// `--fix`'s answer when cuts were written and the target priced again:
/// the report before and after.
#[derive(Debug, Clone, Serialize)]
pub struct LazyFixJson<'a> {
    /// [`FIX_SCHEMA`].
    pub schema: &'static str,
    /// The report that wrote the cuts.
    pub before: &'a LazyReport,
    /// The target priced again with the cuts in place.
    pub after: &'a LazyReport,
}

impl<'a> LazyFixJson<'a> {
    /// The answer of a fix and its second pricing.
    pub fn new(before: &'a LazyReport, after: &'a LazyReport) -> Self {
        LazyFixJson {
            schema: FIX_SCHEMA,
            before,
            after,
        }
    }
}
