//! `coldstart diff`'s answer: the worker at a base revision (A) against the
//! worker in the working tree (B), per target. The report's data
//! ([`DiffReport`], filled by `harness::diff`), its JSON ([`DiffJson`],
//! schema [`SCHEMA`]), the budgets a target is held to ([`Budgets`]), what
//! fails it ([`TargetDiff::problems`], [`exit_code`]) and its one-line
//! verdict ([`headline`]). `report::diff` renders it.
//!
//! # The JSON schema (`coldstart.diff/1`)
//! ```text
//! { "schema": "coldstart.diff/1",
//!   "base": { "rev", "commit", "how", "dirty" },
//!   "headline": "...",                       // the verdict line
//!   "exit_code": 0 | 1 | 2,
//!   "targets": [ {
//!     "name", "status": "compared" | "new" | "error",
//!     "error": { "side": "A" | "B", "message" } | null,
//!     "budgets": { "max_slowdown", "max_modules", "max_ready_ms" },
//!     "problems": [ { "kind", "message" } ],  // what fails the target
//!     "warnings": [ "..." ],
//!     "time": { "basis", "cpu", "wall_ready", "disagree", "ready_ms_b",
//!               "rss", "run_dir", "summary" } | null,   // summary: coldstart.bench-summary/1
//!     "imports": { "processes", "modules_a", "modules_b",
//!                  "added_first_party", "removed_first_party",
//!                  "added_packages", "removed_packages", "packages",
//!                  "forbidden_new", "forbidden_gone", "forbidden_kept" } | null
//!   } ] }
//! ```
//! Comparisons are `phases::compare::Comparison` (ratio B/A, `ci`, `verdict`,
//! `threshold`, ...); times are milliseconds, sizes bytes.

use std::path::PathBuf;

use importguard::recorder::CallSite;
use phases::compare::{Comparison, Verdict};
use phases::stats::SignedRank;
use phases::summary::RunSummary;
use serde::Serialize;

use crate::words::{fmt_ms, fmt_pct, fmt_ratio, fmt_verdict};

/// The `schema` of the JSON report.
pub const SCHEMA: &str = "coldstart.diff/1";

/// What the whole run compared.
#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    /// The revision side A was checked out from.
    pub base: BaseInfo,
    /// One per target, in the config's order.
    pub targets: Vec<TargetDiff>,
}

/// The base revision and how it was chosen.
#[derive(Debug, Clone, Serialize)]
pub struct BaseInfo {
    /// As given or chosen (`origin/main`, `HEAD`).
    pub rev: String,
    /// The commit it names.
    pub commit: String,
    /// How it was chosen: `given`, `merge base of HEAD and UPSTREAM`, `HEAD`.
    pub how: String,
    /// Whether the working tree had uncommitted changes (they are side B).
    pub dirty: bool,
}

/// The per-target budgets `diff` judges.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budgets {
    /// B may be this much slower (0.05 is 5%), judged on the interval: B
    /// fails when the whole interval of B/A lies above `1 + max_slowdown`.
    /// It is also the comparison's noise band.
    pub max_slowdown: f64,
    /// The most modules imported at ready (B), if set.
    pub max_modules: Option<usize>,
    /// B's ready time (wall, ms) exceeds this when the lower bound of its
    /// median's interval lies above it; depends on the machine.
    pub max_ready_ms: Option<f64>,
}

/// The default `max_slowdown`: 5%.
pub const DEFAULT_MAX_SLOWDOWN: f64 = 0.05;

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            max_slowdown: DEFAULT_MAX_SLOWDOWN,
            max_modules: None,
            max_ready_ms: None,
        }
    }
}

/// How far one target got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffStatus {
    /// Both sides ran and were compared.
    Compared,
    /// The target does not exist at the base: nothing to compare.
    New,
    /// A side could not be run.
    Error,
}

/// A side that could not be run.
#[derive(Debug, Clone, Serialize)]
pub struct SideError {
    /// `A` (the base) or `B` (the working tree).
    pub side: &'static str,
    /// What happened.
    pub message: String,
}

/// One target's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct TargetDiff {
    /// The target's name.
    pub name: String,
    /// How far it got.
    pub status: DiffStatus,
    /// Set with [`DiffStatus::Error`].
    pub error: Option<SideError>,
    /// What it is judged against.
    pub budgets: Budgets,
    /// The timed comparison.
    pub time: Option<TimeDiff>,
    /// The import trees' comparison.
    pub imports: Option<ImportDiff>,
    /// Things the reader should know that fail nothing.
    pub warnings: Vec<String>,
    /// What was done to the trees before anything was measured: a build
    /// output carried into the base, the target's `setup` run (or taken
    /// from its cache).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prepared: Vec<String>,
}

/// Peak RSS and RSS at ready of one side (medians of the timed trials).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rss {
    /// Peak RSS (`wait4`), bytes.
    pub peak_bytes: Option<f64>,
    /// RSS right after the ready line, bytes.
    pub at_ready_bytes: Option<f64>,
}

/// The timed comparison: plain lifecycles, A and B interleaved by round.
#[derive(Debug, Clone, Serialize)]
pub struct TimeDiff {
    /// What the verdict rests on (`cpu`: user + system from `wait4`).
    pub basis: phases::Measure,
    /// CPU time B/A.
    pub cpu: Option<Comparison>,
    /// Wall time of `ready` B/A, beside it.
    pub wall_ready: Option<Comparison>,
    /// Set when CPU and wall time settle on different verdicts.
    pub disagree: Option<String>,
    /// B's median ready time (wall) with its interval, ms.
    pub ready_ms_b: Option<(f64, f64, f64)>,
    /// A's and B's memory.
    pub rss: [Rss; 2],
    /// The bench run's folder (`summary.json`, `trials.jsonl`, ...).
    pub run_dir: PathBuf,
    /// The bench summary of the run (`coldstart.bench-summary/1`).
    pub summary: RunSummary,
}

/// Modules of a top-level package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageCount {
    /// The top-level package.
    pub package: String,
    /// Its modules imported at ready.
    pub modules: usize,
}

/// One package's cumulative import time at start-up on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct PackageTime {
    /// The top-level package (or first-party module).
    pub package: String,
    /// Whether it is the project's own code.
    pub first_party: bool,
    /// A's median cumulative time, ms (`None`: not imported at A).
    pub a_ms: Option<f64>,
    /// B's median cumulative time, ms (`None`: not imported at B).
    pub b_ms: Option<f64>,
    /// B - A in ms over the instrumented rounds (Hodges-Lehmann with its
    /// signed-rank interval), paired by round.
    pub change: Option<SignedRank>,
    /// For a package new at B: the first-party line that imports it.
    pub imported_at: Option<CallSite>,
    /// ... and the chain from the worker to it.
    pub chain: Vec<String>,
}

/// A module new at B and the first-party line that imports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleLine {
    /// The module.
    pub module: String,
    /// The line that imports it, when the recorder saw it.
    pub imported_at: Option<CallSite>,
}

/// A forbidden module that appeared or vanished, with the check's chain.
#[derive(Debug, Clone, Serialize)]
pub struct ForbiddenChange {
    /// The module.
    pub module: String,
    /// The chain from the worker to it.
    pub chain: Vec<String>,
    /// The first-party line that started the chain.
    pub origin: Option<CallSite>,
    /// Its cumulative import time, µs.
    pub cumulative_us: Option<i64>,
}

/// The start-up import trees of both sides compared.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImportDiff {
    /// Instrumented processes per side.
    pub processes: usize,
    /// Modules imported at ready, A (median over the processes).
    pub modules_a: Option<usize>,
    /// Modules imported at ready, B.
    pub modules_b: Option<usize>,
    /// First-party modules at ready in B only, each with the line that
    /// imports it.
    pub added_first_party: Vec<ModuleLine>,
    /// First-party modules at ready in A only.
    pub removed_first_party: Vec<String>,
    /// Third-party modules at ready in B only, by top-level package.
    pub added_packages: Vec<PackageCount>,
    /// Third-party modules at ready in A only, by top-level package.
    pub removed_packages: Vec<PackageCount>,
    /// Every package's cumulative time at start-up, largest change first.
    pub packages: Vec<PackageTime>,
    /// Forbidden modules at B only.
    pub forbidden_new: Vec<ForbiddenChange>,
    /// Forbidden modules at A only.
    pub forbidden_gone: Vec<ForbiddenChange>,
    /// Forbidden modules on both sides.
    pub forbidden_kept: Vec<String>,
}

/// What fails a target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// `slower`, `forbidden`, `max_modules`, `max_ready_ms`,
    /// `inconclusive` (with `--strict`), `error`.
    pub kind: &'static str,
    /// What happened and what to do.
    pub message: String,
}

impl TargetDiff {
    /// The comparison the verdict rests on.
    pub fn answer(&self) -> Option<&Comparison> {
        self.time.as_ref().and_then(|t| match t.basis {
            phases::Measure::Cpu => t.cpu.as_ref(),
            _ => t.wall_ready.as_ref(),
        })
    }

    /// What fails this target; `strict` fails an inconclusive comparison.
    pub fn problems(&self, strict: bool) -> Vec<Problem> {
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(Problem {
                kind: "error",
                message: format!(
                    "{} ({}) could not be run: {}",
                    side_name(e.side),
                    e.side,
                    e.message
                ),
            });
            return out;
        }
        if let Some(c) = self.answer() {
            let max = self.budgets.max_slowdown;
            if c.verdict == Verdict::Slower && c.ci.lo > 1.0 + max {
                out.push(Problem {
                    kind: "slower",
                    message: format!(
                        "start-up is slower: B/A {} , the whole interval above the {} allowed (max_slowdown)",
                        fmt_ratio(c),
                        fmt_pct(max)
                    ),
                });
            }
            if strict && c.verdict == Verdict::Inconclusive {
                out.push(Problem {
                    kind: "inconclusive",
                    message: format!("the comparison is {} (--strict)", fmt_verdict(c)),
                });
            }
        }
        if let Some(i) = &self.imports {
            for f in &i.forbidden_new {
                out.push(Problem {
                    kind: "forbidden",
                    message: format!(
                        "forbidden module `{}` is imported at start-up now: {}",
                        f.module,
                        f.chain.join(" -> ")
                    ),
                });
            }
            if let (Some(max), Some(n)) = (self.budgets.max_modules, i.modules_b)
                && n > max
            {
                out.push(Problem {
                    kind: "max_modules",
                    message: format!("{n} modules are imported at ready, over max_modules = {max}"),
                });
            }
        }
        if let (Some(max), Some((_, lo, _))) = (
            self.budgets.max_ready_ms,
            self.time.as_ref().and_then(|t| t.ready_ms_b),
        ) && lo > max
        {
            out.push(Problem {
                kind: "max_ready_ms",
                message: format!(
                    "ready takes over max_ready_ms = {}: the lower bound of its median's interval is {} (this budget depends on the machine)",
                    fmt_ms(max),
                    fmt_ms(lo)
                ),
            });
        }
        out
    }

    /// The one-line verdict of this target.
    pub fn verdict_line(&self) -> String {
        match self.status {
            DiffStatus::New => format!(
                "{}: new, it does not exist at the base; nothing to compare",
                self.name
            ),
            DiffStatus::Error => format!(
                "{}: could not compare: {}",
                self.name,
                self.error.as_ref().map_or("", |e| e.message.as_str())
            ),
            DiffStatus::Compared => match self.answer() {
                Some(c) => format!(
                    "{}: {} ({} B/A {})",
                    self.name,
                    c.verdict,
                    self.time.as_ref().map_or("cpu", |t| t.basis.name()),
                    fmt_ratio(c)
                ),
                None => format!("{}: no timed comparison", self.name),
            },
        }
    }

    /// The new package that costs B the most at start-up, with the line
    /// that imports it.
    pub fn costliest_new(&self) -> Option<&PackageTime> {
        self.imports.as_ref().and_then(|i| {
            i.packages
                .iter()
                .filter(|p| p.a_ms.is_none() && p.b_ms.is_some() && p.imported_at.is_some())
                .max_by(|a, b| a.b_ms.unwrap_or(0.0).total_cmp(&b.b_ms.unwrap_or(0.0)))
        })
    }

    /// Where a slowdown is annotated, and what is there: the line that
    /// imports the costliest new package, else the line that imports the
    /// first new first-party module.
    pub fn culprit(&self) -> Option<(&CallSite, String)> {
        if let Some(p) = self.costliest_new() {
            return p.imported_at.as_ref().map(|f| {
                (
                    f,
                    format!(
                        "the costliest new package is {} ({} at start-up)",
                        p.package,
                        fmt_opt_ms(p.b_ms)
                    ),
                )
            });
        }
        self.imports.as_ref().and_then(|i| {
            i.added_first_party.iter().find_map(|m| {
                m.imported_at
                    .as_ref()
                    .map(|f| (f, format!("{} is new at start-up", m.module)))
            })
        })
    }
}

fn side_name(side: &str) -> &'static str {
    if side == "A" {
        "the base"
    } else {
        "the working tree"
    }
}

/// The exit code: 2 when a side of any target could not be run, else 1
/// when any target has a problem, else 0.
pub fn exit_code(r: &DiffReport, strict: bool) -> u8 {
    if r.targets.iter().any(|t| t.status == DiffStatus::Error) {
        2
    } else if r.targets.iter().any(|t| !t.problems(strict).is_empty()) {
        1
    } else {
        0
    }
}

/// The headline: the run's verdict in one line.
pub fn headline(r: &DiffReport, strict: bool) -> String {
    let failed: Vec<&TargetDiff> = r
        .targets
        .iter()
        .filter(|t| !t.problems(strict).is_empty())
        .collect();
    let base = format!("{} ({})", r.base.rev, short(&r.base.commit));
    if failed.is_empty() {
        let words: Vec<String> = r.targets.iter().map(|t| t.verdict_line()).collect();
        format!("coldstart diff against {base}: pass; {}", words.join("; "))
    } else {
        let words: Vec<String> = failed
            .iter()
            .map(|t| {
                let kinds: Vec<&str> = t.problems(strict).iter().map(|p| p.kind).collect();
                format!("{} ({})", t.name, kinds.join(", "))
            })
            .collect();
        format!(
            "coldstart diff against {base}: FAIL, {} of {} targets: {}",
            failed.len(),
            r.targets.len(),
            words.join("; ")
        )
    }
}

/// A commit id cut to its first 12 characters.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// A duration, or `-` when there is none.
pub fn fmt_opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), fmt_ms)
}

/// The JSON report as `--format json` prints it: [`SCHEMA`], the base, the
/// headline, the exit code and each target with its problems.
#[derive(Debug, Clone, Serialize)]
pub struct DiffJson<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// What the run compared against.
    pub base: &'a BaseInfo,
    /// [`headline`].
    pub headline: String,
    /// [`exit_code`].
    pub exit_code: u8,
    /// Each target, with what fails it.
    pub targets: Vec<TargetJson<'a>>,
}

/// One target of [`DiffJson`]: the target's fields and its problems.
#[derive(Debug, Clone, Serialize)]
pub struct TargetJson<'a> {
    /// The target's comparison.
    #[serde(flatten)]
    pub target: &'a TargetDiff,
    /// [`TargetDiff::problems`].
    pub problems: Vec<Problem>,
}

impl<'a> DiffJson<'a> {
    /// The JSON answer of `r`; `strict` fails an inconclusive comparison.
    pub fn new(r: &'a DiffReport, strict: bool) -> Self {
        DiffJson {
            schema: SCHEMA,
            base: &r.base,
            headline: headline(r, strict),
            exit_code: exit_code(r, strict),
            targets: r
                .targets
                .iter()
                .map(|t| TargetJson {
                    target: t,
                    problems: t.problems(strict),
                })
                .collect(),
        }
    }
}
