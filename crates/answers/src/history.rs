//! `coldstart history show`'s answer: per target, the trend of start-up
//! over the commits stored for one environment, the changes found on it
//! (each confirmed, or not, by re-measuring the commits on either side
//! interleaved), the drifts, and what the import trees say changed. The
//! report's data ([`HistoryReport`], filled by `harness::history`) and
//! its JSON (schema [`SCHEMA`]); `report::history` renders it.
//!
//! # The JSON schema (`coldstart.history/1`)
//! ```text
//! { "schema": "coldstart.history/1",
//!   "rule": { "min_segment", "permutations", "max_p", "min_magnitude", "seed" },
//!   "targets": [ {
//!     "target": "...", "environment": "<fingerprint>", "interpreter": "...",
//!     "other_environments": 0,                 // runs of this target kept for other environments
//!     "points": [ { "commit", "subject", "time_unix_s",
//!                   "ready_ms": { "median", "lo", "hi" } | null,
//!                   "cpu_ms": .. | null,                  // the series' measure
//!                   "trials", "failures", "peak_rss_bytes": .. | null,
//!                   "modules", "failed": "..." | null } ],    // oldest first
//!     "changes": [ Change ],                   // confirmed by re-measuring only
//!     "candidates": [ Change ],                // found on the series, not confirmed
//!     "drifts": [ Drift ],                     // confirmed by re-measuring only
//!     "drift_candidates": [ Drift ] } ] }      // found on the series, not confirmed
//! Drift = { "from", "to",                         // the last commit on the level before, the ramp's last
//!           "commits", "total", "per_commit", "p", "confirmation",
//!           "imports": [ { "at", "changes": [ ImportChange ] } ] }
//! Change = { "commit", "subject", "parent",       // full hashes; parent: the commit measured before
//!            "series": { "before_ms", "after_ms", "change", "p" },   // CPU time
//!            "confirmation": { "status": "confirmed" | "not_confirmed" | "inconclusive" | "not_measured",
//!                              "comparison": Comparison | null, "message": "..." | null },
//!            "imports": [ { "change": "added" | "removed", "module", "first_party",
//!                           "at": { "file", "line", "func" } | null } ],
//!            "imports_error": "..." | null }
//! ```
//! A confirmation's comparison is diff's (`phases::compare::Comparison`:
//! the CPU time of the later commit over the earlier one's, interleaved
//! rounds, its interval and one of the four verdicts).

use importguard::recorder::CallSite;
use phases::changepoint::ChangeRule;
use phases::compare::{Comparison, Verdict};
use serde::Serialize;

use crate::bisect::CommitRef;

/// The `schema` of the JSON report.
pub const SCHEMA: &str = "coldstart.history/1";

/// A median with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// The median.
    pub median: f64,
    /// The interval's low end.
    pub lo: f64,
    /// The interval's high end.
    pub hi: f64,
}

/// One stored commit of the series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// The commit, by full hash, with its subject.
    #[serde(flatten)]
    pub commit: CommitRef,
    /// Its committer time, seconds since the Unix epoch.
    pub time_unix_s: i64,
    /// The median time to ready of its correct measured trials, ms, with
    /// its bootstrap interval (`None`: no correct trial).
    pub ready_ms: Option<Estimate>,
    /// The median CPU time (user + system, `wait4`) of its correct
    /// measured trials' workers, ms: the measure change points are
    /// searched on (diff's basis, which the re-measurement uses too, and
    /// which a loaded machine moves far less than wall time).
    pub cpu_ms: Option<f64>,
    /// Its measured trials.
    pub trials: usize,
    /// Those that failed.
    pub failures: usize,
    /// The median peak RSS of its correct measured trials, bytes.
    pub peak_rss_bytes: Option<f64>,
    /// The modules its start-up imported (0 when the run kept no import
    /// tree, as `bench --record`'s).
    pub modules: usize,
    /// Why the commit could not be measured, when it could not.
    pub failed: Option<String>,
}

/// A module that arrived or left at a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportChange {
    /// `added` or `removed`.
    pub change: &'static str,
    /// The module (a top-level package, or one of the project's modules).
    pub module: String,
    /// Whether it is the project's own.
    pub first_party: bool,
    /// The first-party line that imports it (at the later commit when
    /// added, at the earlier one when removed).
    pub at: Option<CallSite>,
}

/// What re-measuring the two commits of a change said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmed {
    /// The interleaved comparison found a change the same way.
    Confirmed,
    /// It found the two equivalent, or a change the other way.
    NotConfirmed,
    /// It could not tell within its budget.
    Inconclusive,
    /// Nothing was re-measured (`--no-confirm`, an interruption, or a side
    /// that could not run: the message says which).
    NotMeasured,
}

/// A confirmation and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confirmation {
    /// What it said.
    pub status: Confirmed,
    /// The comparison (the later commit over the earlier), when measured.
    pub comparison: Option<Comparison>,
    /// Why nothing was measured, or a warning of the comparison.
    pub message: Option<String>,
}

impl Confirmation {
    /// Reads `c` against the series' `direction` (`> 0`: slower).
    pub fn of(c: Comparison, direction: f64) -> Confirmation {
        let status = match c.verdict {
            Verdict::Slower if direction > 0.0 => Confirmed::Confirmed,
            Verdict::Faster if direction < 0.0 => Confirmed::Confirmed,
            Verdict::Inconclusive => Confirmed::Inconclusive,
            _ => Confirmed::NotConfirmed,
        };
        Confirmation {
            status,
            comparison: Some(c),
            message: None,
        }
    }

    /// Nothing measured, for `why`.
    pub fn not_measured(why: impl Into<String>) -> Confirmation {
        Confirmation {
            status: Confirmed::NotMeasured,
            comparison: None,
            message: Some(why.into()),
        }
    }
}

/// The series' side of a change: the medians of the per-commit CPU times
/// of the segments around it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SeriesChange {
    /// The median CPU time of the segment before, ms.
    pub before_ms: f64,
    /// The median CPU time of the segment from the change on, ms.
    pub after_ms: f64,
    /// `after / before - 1`.
    pub change: f64,
    /// The permutation test's p-value.
    pub p: f64,
}

/// A change found at one commit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The commit the new level starts at.
    #[serde(flatten)]
    pub at: CommitRef,
    /// The commit measured before it (its full hash).
    pub parent: String,
    /// What the series says.
    pub series: SeriesChange,
    /// What re-measuring the two said.
    pub confirmation: Confirmation,
    /// The modules that arrived or left between the two stored import
    /// trees.
    pub imports: Vec<ImportChange>,
    /// Why the import trees could not be compared.
    pub imports_error: Option<String>,
}

/// A slow change over a window that no single commit explains.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftFound {
    /// The last commit on the level before the ramp.
    pub from: CommitRef,
    /// The ramp's last commit.
    pub to: CommitRef,
    /// The commits that moved: those after `from`, up to `to`.
    pub commits: usize,
    /// The level after over the level before, less 1.
    pub total: f64,
    /// The change per commit.
    pub per_commit: f64,
    /// The Mann-Kendall test's p-value.
    pub p: f64,
    /// What re-measuring `from` against `to` said.
    pub confirmation: Confirmation,
    /// The commits of the window whose import tree differs from the
    /// commit's before it, with what arrived and left: where within a
    /// drift to look (a step that noise spread over its neighbours shows
    /// here as the one commit where a package left or arrived).
    pub imports: Vec<ImportsAt>,
}

/// A commit's import changes against the commit before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportsAt {
    /// The commit.
    pub at: CommitRef,
    /// What arrived and left there.
    pub changes: Vec<ImportChange>,
}

/// One target's history in one environment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetHistory {
    /// The target.
    pub target: String,
    /// The environment's fingerprint.
    pub environment: String,
    /// Its interpreter build, for a person.
    pub interpreter: String,
    /// Runs of this target stored for other environments (not shown).
    pub other_environments: usize,
    /// The stored commits, oldest first.
    pub points: Vec<Point>,
    /// The changes confirmed by re-measuring.
    pub changes: Vec<Change>,
    /// The changes the series shows that re-measuring did not confirm.
    pub candidates: Vec<Change>,
    /// The drifts confirmed by re-measuring their window's ends.
    pub drifts: Vec<DriftFound>,
    /// The drifts the series shows that re-measuring did not confirm.
    pub drift_candidates: Vec<DriftFound>,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryReport {
    /// The change-point rule used.
    pub rule: ChangeRule,
    /// Each target.
    pub targets: Vec<TargetHistory>,
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct HistoryJson<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The report.
    #[serde(flatten)]
    pub report: &'a HistoryReport,
}

impl<'a> HistoryJson<'a> {
    /// The JSON form of `r`.
    pub fn of(r: &'a HistoryReport) -> HistoryJson<'a> {
        HistoryJson {
            schema: SCHEMA,
            report: r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phases::compare::Method;
    use phases::stats::Interval;

    fn comparison(verdict: Verdict) -> Comparison {
        Comparison {
            ratio: 1.3,
            ci: Interval {
                lo: 1.2,
                hi: 1.4,
                level: 0.95,
            },
            verdict,
            threshold: 0.02,
            paired: true,
            n_a: 10,
            n_b: 10,
            method: Method::default(),
            unsettled: None,
        }
    }

    #[test]
    fn a_change_is_confirmed_only_by_a_verdict_in_its_own_direction() {
        let status = |v, d| Confirmation::of(comparison(v), d).status;
        assert_eq!(status(Verdict::Slower, 0.4), Confirmed::Confirmed);
        assert_eq!(status(Verdict::Faster, -0.3), Confirmed::Confirmed);
        assert_eq!(status(Verdict::Faster, 0.4), Confirmed::NotConfirmed);
        assert_eq!(status(Verdict::Equivalent, 0.4), Confirmed::NotConfirmed);
        assert_eq!(status(Verdict::Inconclusive, 0.4), Confirmed::Inconclusive);
    }
}
