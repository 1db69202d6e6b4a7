//! `coldstart bisect`'s answer: the first commit between a good and a bad
//! one whose start-up is slower than the good one's by more than a
//! threshold. The report's data ([`BisectReport`], filled by
//! `harness::bisect`), its JSON (schema [`SCHEMA`]), its exit rule
//! ([`exit_code`]) and the exit rule of one `--run` step ([`run_code`]).
//! `report::bisect` renders it.
//!
//! # The JSON schema (`coldstart.bisect/1`)
//! ```text
//! { "schema": "coldstart.bisect/1",
//!   "target": "...", "threshold": 0.1, "basis": "cpu",
//!   "good": { "commit", "subject" }, "bad": { "commit", "subject" },
//!   "outcome": "found" | "range" | "not_slower" | "good_failed",
//!   "culprit": { "commit", "subject", "parent",          // full hashes
//!                "change": Comparison,                   // at the culprit against good
//!                "imports": [ { "kind", "module", "at": { "file", "line", "func" } | null } ],
//!                "imports_error": "..." | null } | null,
//!   "range": [ { "commit", "subject" } ],   // outcome "range": the first slow commit is one of these
//!   "steps": [ { "commit", "subject", "answer", "change": Comparison | null,
//!                "rounds", "message", "run_dir" } ],
//!   "error": "..." | null,                  // outcome "good_failed": why
//!   "history": { "store", "stored", "suggested": { "commit", "subject" } | null } | null,
//!                                           // the start-up history's hint: tried first, never an answer
//!   "skipped": [ { "commit", "subject", "answer", "message", ... } ],
//!   "exit_code": 0 | 1 | 2 }
//! ```
//! A step's `answer` is `slower`, `not_slower`, `inconclusive` or
//! `skipped` (its worker could not start, or a side failed: `message`
//! says why). Comparisons are `phases::compare::Comparison` (ratio of the
//! commit's to the good commit's, `ci`, `verdict`, `threshold`, ...).

use std::path::PathBuf;

use importguard::recorder::CallSite;
use phases::compare::{Comparison, Slowdown};
use serde::Serialize;

/// The `schema` of the JSON report.
pub const SCHEMA: &str = "coldstart.bisect/1";

/// A commit, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommitRef {
    /// The full hash.
    pub commit: String,
    /// The first line of its message.
    pub subject: String,
}

impl CommitRef {
    /// The hash's first 12 characters.
    pub fn short(&self) -> &str {
        &self.commit[..self.commit.len().min(12)]
    }
}

/// What one step found at its commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Slower than the good commit by more than the threshold.
    Slower,
    /// Not slower by more than the threshold.
    NotSlower,
    /// The trial budget ran out before the interval settled.
    Inconclusive,
    /// The commit's worker could not start, or a side failed.
    Skipped,
}

impl Answer {
    /// The answer of a comparison's interval against the threshold.
    pub fn of(c: &Comparison) -> Answer {
        match Slowdown::of(&c.ci, c.threshold) {
            Slowdown::Slower => Answer::Slower,
            Slowdown::NotSlower => Answer::NotSlower,
            Slowdown::Inconclusive => Answer::Inconclusive,
        }
    }

    /// The words a person reads.
    pub fn words(self) -> &'static str {
        match self {
            Answer::Slower => "slower",
            Answer::NotSlower => "not slower",
            Answer::Inconclusive => "inconclusive",
            Answer::Skipped => "skipped",
        }
    }
}

/// One comparison of a commit against the good one.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The commit compared (side B; the good commit is side A).
    #[serde(flatten)]
    pub at: CommitRef,
    /// What it found.
    pub answer: Answer,
    /// The comparison its answer rests on; `None` when skipped.
    pub change: Option<Comparison>,
    /// Interleaved rounds run (each one trial per side).
    pub rounds: usize,
    /// Why a skipped step was skipped, or what else to know.
    pub message: Option<String>,
    /// The step's bench run folder.
    pub run_dir: Option<PathBuf>,
}

/// An import that arrived at the culprit: at ready in the culprit's
/// worker, not in its parent's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Arrived {
    /// `forbidden` (a module of the target's forbidden list), `package`
    /// (a third-party top-level package), `first_party` (a module of the
    /// project).
    pub kind: &'static str,
    /// The module or package.
    pub module: String,
    /// The first-party line that imports it, its file relative to the
    /// repository's top.
    pub at: Option<CallSite>,
}

/// The first slow commit.
#[derive(Debug, Clone, Serialize)]
pub struct Culprit {
    /// The commit itself.
    #[serde(flatten)]
    pub at: CommitRef,
    /// Its first parent (the last commit not slower), full hash.
    pub parent: String,
    /// Its start-up against the good commit's.
    pub change: Option<Comparison>,
    /// What arrived at it, forbidden modules first.
    pub imports: Vec<Arrived>,
    /// Why the imports could not be compared, when they could not.
    pub imports_error: Option<String>,
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// One commit is the first slow one.
    Found,
    /// The first slow commit is one of [`BisectReport::range`]: steps in
    /// between were skipped or inconclusive.
    Range,
    /// The bad commit is not shown slower than the good one: nothing to
    /// search (or its comparison was inconclusive, said in its step).
    NotSlower,
    /// The good commit's worker could not be compared at all.
    GoodFailed,
}

/// The whole search.
#[derive(Debug, Clone, Serialize)]
pub struct BisectReport {
    /// The target compared.
    pub target: String,
    /// Slower means slower by more than this share.
    pub threshold: f64,
    /// What is compared: the workers' CPU time to the end of their life
    /// (`cpu`), diff's basis.
    pub basis: phases::Measure,
    /// The good commit.
    pub good: CommitRef,
    /// The bad commit.
    pub bad: CommitRef,
    /// How the search ended.
    pub outcome: Outcome,
    /// The first slow commit, when the search found one.
    pub culprit: Option<Culprit>,
    /// When the search ended in a range: the commits, oldest first, one of
    /// which is the first slow one.
    pub range: Vec<CommitRef>,
    /// Every comparison made, in order (the bad commit's first).
    pub steps: Vec<Step>,
    /// Why the good commit could not be run (outcome `good_failed`).
    pub error: Option<String>,
    /// What the start-up history said before the search, when one was
    /// read.
    pub history: Option<Guide>,
}

/// The start-up history's hint to a bisect: the stored runs of the target
/// in this environment over the good commit and the commits searched, and
/// the commit their figures point at. The suggested commit and the one
/// before it are compared first; every step is still measured, so the
/// hint saves steps when it is right and costs at most two when it is
/// not, and never decides an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Guide {
    /// The store read, a password redacted.
    pub store: String,
    /// The commits (the good one among them) with a stored figure.
    pub stored: usize,
    /// The first commit whose stored figure (and the next stored one's)
    /// is above the good commit's by more than the threshold.
    pub suggested: Option<CommitRef>,
}

impl BisectReport {
    /// The steps skipped, each naming its commit and why.
    pub fn skipped(&self) -> Vec<&Step> {
        self.steps
            .iter()
            .filter(|s| s.answer == Answer::Skipped)
            .collect()
    }
}

/// The exit code: 0 a culprit found; 1 the search ended in a range (a
/// step skipped or inconclusive kept it from one commit); 2 nothing to
/// search (the bad commit is not shown slower) or the good commit could
/// not be run.
pub fn exit_code(r: &BisectReport) -> u8 {
    match r.outcome {
        Outcome::Found => 0,
        Outcome::Range => 1,
        Outcome::NotSlower | Outcome::GoodFailed => 2,
    }
}

/// The exit code of `bisect --run`, as `git bisect run` reads a script's:
/// 0 not slower (good), 1 slower (bad), 125 cannot tell (the worker
/// cannot start, or the comparison stayed inconclusive: skip).
pub fn run_code(step: &Step) -> u8 {
    match step.answer {
        Answer::NotSlower => 0,
        Answer::Slower => 1,
        Answer::Inconclusive | Answer::Skipped => 125,
    }
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct BisectJson<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The report.
    #[serde(flatten)]
    pub report: &'a BisectReport,
    /// The skipped steps.
    pub skipped: Vec<&'a Step>,
    /// [`exit_code`].
    pub exit_code: u8,
}

impl<'a> BisectJson<'a> {
    /// The JSON form of `r`.
    pub fn of(r: &'a BisectReport) -> BisectJson<'a> {
        BisectJson {
            schema: SCHEMA,
            report: r,
            skipped: r.skipped(),
            exit_code: exit_code(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phases::compare::{Method, Verdict};
    use phases::stats::Interval;

    fn comparison(lo: f64, hi: f64) -> Comparison {
        Comparison {
            ratio: (lo + hi) / 2.0,
            ci: Interval {
                lo,
                hi,
                level: 0.995,
            },
            verdict: Verdict::of(
                &Interval {
                    lo,
                    hi,
                    level: 0.995,
                },
                0.1,
            ),
            threshold: 0.1,
            paired: true,
            n_a: 12,
            n_b: 12,
            method: Method::default(),
            unsettled: None,
        }
    }

    fn step(answer: Answer) -> Step {
        Step {
            at: CommitRef {
                commit: "0".repeat(40),
                subject: "s".to_owned(),
            },
            answer,
            change: None,
            rounds: 12,
            message: None,
            run_dir: None,
        }
    }

    #[test]
    fn a_step_answers_as_a_git_bisect_run_script() {
        assert_eq!(Answer::of(&comparison(1.3, 1.5)), Answer::Slower);
        assert_eq!(Answer::of(&comparison(0.8, 1.05)), Answer::NotSlower);
        assert_eq!(Answer::of(&comparison(1.02, 1.3)), Answer::Inconclusive);
        assert_eq!(run_code(&step(Answer::NotSlower)), 0);
        assert_eq!(run_code(&step(Answer::Slower)), 1);
        assert_eq!(run_code(&step(Answer::Inconclusive)), 125);
        assert_eq!(run_code(&step(Answer::Skipped)), 125);
    }
}
