//! `coldstart diff`: the worker at a base revision (A) against the worker
//! in the working tree (B), per target. This module owns the report's data
//! ([`DiffReport`], filled by `harness::diff`), its JSON schema
//! ([`SCHEMA`]), what fails it ([`TargetDiff::problems`], [`exit_code`])
//! and its renderings: text, Markdown for a pull-request comment, GitHub
//! workflow commands and JUnit XML.
//!
//! # The JSON schema (`coldstart-diff/1`)
//! ```text
//! { "schema": "coldstart-diff/1",
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
//!               "rss", "run_dir", "summary" } | null,   // summary: coldstart-bench-summary/1
//!     "imports": { "processes", "modules_a", "modules_b",
//!                  "added_first_party", "removed_first_party",
//!                  "added_packages", "removed_packages", "packages",
//!                  "forbidden_new", "forbidden_gone", "forbidden_kept" } | null
//!   } ] }
//! ```
//! Comparisons are `phases::compare::Comparison` (ratio B/A, `ci`, `verdict`,
//! `threshold`, ...); times are milliseconds, sizes bytes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use importguard::recorder::Frame;
use phases::compare::{Comparison, Verdict};
use phases::stats::SignedRank;
use phases::summary::RunSummary;
use serde::Serialize;

use crate::bench::{answer_lines, fmt_mib, fmt_ms, fmt_pct, fmt_ratio, fmt_verdict};
use importguard::firstparty::is_first_party as first_party;

use crate::check::ci::{esc_data, esc_prop, relative, xml};

/// The `schema` of the JSON report.
pub const SCHEMA: &str = "coldstart-diff/1";

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
    /// The bench summary of the run (`coldstart-bench-summary/1`).
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
    pub imported_at: Option<Frame>,
    /// ... and the chain from the worker to it.
    pub chain: Vec<String>,
}

/// A module new at B and the first-party line that imports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleLine {
    /// The module.
    pub module: String,
    /// The line that imports it, when the recorder saw it.
    pub imported_at: Option<Frame>,
}

/// A forbidden module that appeared or vanished, with the check's chain.
#[derive(Debug, Clone, Serialize)]
pub struct ForbiddenChange {
    /// The module.
    pub module: String,
    /// The chain from the worker to it.
    pub chain: Vec<String>,
    /// The first-party line that started the chain.
    pub origin: Option<Frame>,
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
    pub fn culprit(&self) -> Option<(&Frame, String)> {
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

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

fn fmt_opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), fmt_ms)
}

fn fmt_change(c: &Option<SignedRank>) -> String {
    match c {
        Some(s) => format!(
            "{}{} [{}, {}]",
            if s.estimate >= 0.0 { "+" } else { "" },
            fmt_ms(s.estimate),
            fmt_ms(s.lo),
            fmt_ms(s.hi)
        ),
        None => "-".to_owned(),
    }
}

fn at(f: &Frame, root: &Path) -> String {
    format!("{}:{}", relative(&f.file, root), f.line)
}

/// The JSON report (schema [`SCHEMA`]).
pub fn json(r: &DiffReport, strict: bool) -> String {
    let targets: Vec<serde_json::Value> = r
        .targets
        .iter()
        .map(|t| {
            let mut v = serde_json::to_value(t).expect("plain data");
            v["problems"] = serde_json::to_value(t.problems(strict)).expect("plain data");
            v
        })
        .collect();
    let value = serde_json::json!({
        "schema": SCHEMA,
        "base": r.base,
        "headline": headline(r, strict),
        "exit_code": exit_code(r, strict),
        "targets": targets,
    });
    let mut s = serde_json::to_string_pretty(&value).expect("plain data");
    s.push('\n');
    s
}

fn imports_text(i: &ImportDiff, root: &Path, out: &mut String) {
    let _ = writeln!(
        out,
        "modules at ready: A {}, B {} (instrumented, {} processes per side)",
        i.modules_a.map_or("-".into(), |n| n.to_string()),
        i.modules_b.map_or("-".into(), |n| n.to_string()),
        i.processes
    );
    for m in &i.added_first_party {
        let _ = writeln!(
            out,
            "first-party added: {}{}",
            m.module,
            m.imported_at
                .as_ref()
                .map_or(String::new(), |f| format!(", imported at {}", at(f, root)))
        );
    }
    if !i.removed_first_party.is_empty() {
        let _ = writeln!(
            out,
            "first-party removed: {}",
            i.removed_first_party.join(", ")
        );
    }
    let counts = |v: &[PackageCount]| {
        v.iter()
            .map(|p| format!("{} ({} modules)", p.package, p.modules))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !i.added_packages.is_empty() {
        let _ = writeln!(out, "third-party added: {}", counts(&i.added_packages));
    }
    if !i.removed_packages.is_empty() {
        let _ = writeln!(out, "third-party removed: {}", counts(&i.removed_packages));
    }
    for f in &i.forbidden_new {
        let _ = writeln!(
            out,
            "forbidden NEW: {} via {}{}",
            f.module,
            f.chain.join(" -> "),
            f.origin
                .as_ref()
                .map_or(String::new(), |o| format!(", started at {}", at(o, root)))
        );
    }
    for f in &i.forbidden_gone {
        let _ = writeln!(
            out,
            "forbidden gone: {} (was {})",
            f.module,
            f.chain.join(" -> ")
        );
    }
    if !i.forbidden_kept.is_empty() {
        let _ = writeln!(
            out,
            "forbidden on both sides: {}",
            i.forbidden_kept.join(", ")
        );
    }
    let changed: Vec<&PackageTime> = i
        .packages
        .iter()
        .filter(|p| p.a_ms != p.b_ms)
        .take(10)
        .collect();
    if !changed.is_empty() {
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>10}  {:<32} imported at",
            "package (cumulative)", "A", "B", "B - A [95% CI]"
        );
        for p in changed {
            let _ = writeln!(
                out,
                "{:<24} {:>10} {:>10}  {:<32} {}",
                format!("{}{}", p.package, if p.first_party { " *" } else { "" }),
                fmt_opt_ms(p.a_ms),
                fmt_opt_ms(p.b_ms),
                fmt_change(&p.change),
                p.imported_at
                    .as_ref()
                    .map_or(String::new(), |f| at(f, root))
            );
        }
        let _ = writeln!(out, "(* first-party)");
    }
}

/// Every phase's wall-time ratio with its interval and verdict.
fn phase_lines(t: &TimeDiff) -> Vec<String> {
    t.summary
        .phases
        .iter()
        .filter_map(|p| {
            p.ratio.as_ref().map(|c| {
                format!(
                    "{} (wall): B/A {} {}",
                    p.phase(),
                    fmt_ratio(c),
                    fmt_verdict(c)
                )
            })
        })
        .collect()
}

fn rss_line(t: &TimeDiff) -> String {
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_mib);
    format!(
        "peak RSS A {} B {}; RSS at ready A {} B {}",
        f(t.rss[0].peak_bytes),
        f(t.rss[1].peak_bytes),
        f(t.rss[0].at_ready_bytes),
        f(t.rss[1].at_ready_bytes)
    )
}

/// The terminal report; paths relative to `root`.
pub fn text(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "base (A): {} = {} ({}){}; B: the working tree",
        r.base.rev,
        short(&r.base.commit),
        r.base.how,
        if r.base.dirty {
            ", uncommitted changes included in B"
        } else {
            ""
        }
    );
    for t in &r.targets {
        let _ = writeln!(out, "\n== {}", t.verdict_line());
        if let Some(time) = &t.time {
            for l in answer_lines(&time.summary) {
                let _ = writeln!(out, "{l}");
            }
            for l in phase_lines(time) {
                let _ = writeln!(out, "  {l}");
            }
            let _ = writeln!(out, "{}", rss_line(time));
            let _ = writeln!(out, "trials written to {}", time.run_dir.display());
        }
        if let Some(i) = &t.imports {
            imports_text(i, root, &mut out);
        }
        for n in &t.prepared {
            let _ = writeln!(out, "note: {n}");
        }
        for w in &t.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for p in t.problems(strict) {
            let _ = writeln!(out, "FAIL ({}): {}", p.kind, p.message);
        }
    }
    let _ = writeln!(out, "\n{}", headline(r, strict));
    out
}

/// Markdown for a pull-request comment: the headline, a table per target,
/// the details folded.
pub fn markdown(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut o = String::new();
    let code = exit_code(r, strict);
    let mark = match code {
        0 => "✅",
        1 => "❌",
        _ => "⚠️",
    };
    let _ = writeln!(o, "### {mark} {}\n", headline(r, strict));
    let _ = writeln!(
        o,
        "Base (A): `{}` = `{}` ({}); B: the working tree{}.\n",
        r.base.rev,
        short(&r.base.commit),
        r.base.how,
        if r.base.dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    );
    for t in &r.targets {
        let _ = writeln!(o, "#### `{}`\n", t.name);
        let Some(time) = &t.time else {
            let _ = writeln!(o, "{}\n", t.verdict_line());
            continue;
        };
        let _ = writeln!(o, "| measure | B/A | 95%+ interval | verdict |");
        let _ = writeln!(o, "|---|---|---|---|");
        for (name, c) in [
            ("CPU time (user + sys), the basis", &time.cpu),
            ("ready (wall time)", &time.wall_ready),
        ] {
            match c {
                Some(c) => {
                    let _ = writeln!(
                        o,
                        "| {name} | {:.3} | [{:.3}, {:.3}] | {} |",
                        c.ratio,
                        c.ci.lo,
                        c.ci.hi,
                        fmt_verdict(c)
                    );
                }
                None => {
                    let _ = writeln!(o, "| {name} | - | - | no comparison |");
                }
            }
        }
        if let Some(i) = &t.imports {
            let _ = writeln!(
                o,
                "| modules at ready | A {} | B {} | |",
                i.modules_a.map_or("-".into(), |n| n.to_string()),
                i.modules_b.map_or("-".into(), |n| n.to_string())
            );
        }
        let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_mib);
        let _ = writeln!(
            o,
            "| peak RSS | A {} | B {} | |\n| RSS at ready | A {} | B {} | |\n",
            f(time.rss[0].peak_bytes),
            f(time.rss[1].peak_bytes),
            f(time.rss[0].at_ready_bytes),
            f(time.rss[1].at_ready_bytes)
        );
        for p in t.problems(strict) {
            let _ = writeln!(o, "- **{}**: {}", p.kind, p.message);
        }
        for n in &t.prepared {
            let _ = writeln!(o, "- note: {n}");
        }
        for w in &t.warnings {
            let _ = writeln!(o, "- warning: {w}");
        }
        let _ = writeln!(o, "\n<details><summary>details</summary>\n");
        for l in answer_lines(&time.summary) {
            let _ = writeln!(o, "- {l}");
        }
        for l in phase_lines(time) {
            let _ = writeln!(o, "- {l}");
        }
        let _ = writeln!(o, "- trials: `{}`", time.run_dir.display());
        if let Some(i) = &t.imports {
            let _ = writeln!(o, "\n```text");
            imports_text(i, root, &mut o);
            let _ = writeln!(o, "```");
        }
        let _ = writeln!(o, "\n</details>\n");
    }
    o
}

/// GitHub workflow commands: an `::error` at the first-party line that
/// brought in the costliest new package (or at the start of a new
/// forbidden module's chain) of a failing target, and a `::notice` with
/// the headline.
pub fn github(r: &DiffReport, root: &Path, strict: bool) -> String {
    let mut o = String::new();
    for t in &r.targets {
        let problems = t.problems(strict);
        if let Some(i) = &t.imports {
            for f in &i.forbidden_new {
                let loc = f
                    .origin
                    .as_ref()
                    .filter(|o| first_party(&o.file, root))
                    .map_or(String::new(), |o| {
                        format!(
                            " file={},line={}",
                            esc_prop(&relative(&o.file, root)),
                            o.line
                        )
                    });
                let _ = writeln!(
                    o,
                    "::error{loc},title={}::{}",
                    esc_prop(&format!("{}: forbidden module at start-up", t.name)),
                    esc_data(&format!(
                        "{} is imported at start-up now: {}",
                        f.module,
                        f.chain.join(" -> ")
                    ))
                );
            }
        }
        for p in problems.iter().filter(|p| p.kind != "forbidden") {
            let culprit = t.culprit();
            let loc = culprit
                .as_ref()
                .map(|(f, _)| *f)
                .filter(|f| first_party(&f.file, root))
                .map_or(String::new(), |f| {
                    format!(
                        " file={},line={}",
                        esc_prop(&relative(&f.file, root)),
                        f.line
                    )
                });
            let cause = culprit.map_or(String::new(), |(_, why)| format!("; {why}"));
            let _ = writeln!(
                o,
                "::error{loc},title={}::{}",
                esc_prop(&format!("{}: {}", t.name, p.kind)),
                esc_data(&format!("{}{cause}", p.message))
            );
        }
        for n in &t.prepared {
            let _ = writeln!(o, "::notice title={}::{}", esc_prop(&t.name), esc_data(n));
        }
        for w in &t.warnings {
            let _ = writeln!(o, "::warning title={}::{}", esc_prop(&t.name), esc_data(w));
        }
    }
    let _ = writeln!(
        o,
        "::notice title=coldstart diff::{}",
        esc_data(&headline(r, strict))
    );
    o
}

/// JUnit XML: a test case per target, failed by its problems, errored
/// when a side could not be run.
pub fn junit(r: &DiffReport, strict: bool) -> String {
    let mut cases = String::new();
    let (mut failures, mut errors) = (0, 0);
    for t in &r.targets {
        let _ = write!(
            cases,
            "    <testcase classname=\"coldstart.diff\" name=\"{}\"",
            xml(&t.name)
        );
        let problems = t.problems(strict);
        if t.status == DiffStatus::Error {
            errors += 1;
            let _ = writeln!(
                cases,
                ">\n      <error message=\"{}\"/>\n    </testcase>",
                xml(&t.verdict_line())
            );
        } else if problems.is_empty() {
            let _ = writeln!(
                cases,
                ">\n      <system-out>{}</system-out>\n    </testcase>",
                xml(&t.verdict_line())
            );
        } else {
            failures += 1;
            let body: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
            let _ = writeln!(
                cases,
                ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                xml(&problems[0].message),
                xml(&body.join("\n"))
            );
        }
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"coldstart diff\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"coldstart diff\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n{cases}  </testsuite>\n</testsuites>\n",
        n = r.targets.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(ratio: f64, lo: f64, hi: f64, verdict: Verdict) -> Comparison {
        Comparison {
            ratio,
            ci: phases::stats::Interval {
                lo,
                hi,
                level: 0.995,
            },
            verdict,
            threshold: 0.05,
            paired: true,
            n_a: 12,
            n_b: 12,
            method: phases::compare::Method::HodgesLehmann,
            unsettled: None,
        }
    }

    fn target(c: Option<Comparison>, imports: Option<ImportDiff>) -> TargetDiff {
        TargetDiff {
            name: "w".into(),
            status: DiffStatus::Compared,
            error: None,
            budgets: Budgets::default(),
            time: c.map(|c| TimeDiff {
                basis: phases::Measure::Cpu,
                cpu: Some(c),
                wall_ready: None,
                disagree: None,
                ready_ms_b: Some((100.0, 90.0, 110.0)),
                rss: [Rss {
                    peak_bytes: None,
                    at_ready_bytes: None,
                }; 2],
                run_dir: PathBuf::from("/tmp/x"),
                summary: {
                    let recs = crate::bench::fixture::wobbly_records();
                    let (env, config) = crate::bench::fixture::parts(&recs);
                    RunSummary::build(&recs, env, config, false, 1.0).unwrap()
                },
            }),
            imports,
            warnings: Vec::new(),
            prepared: Vec::new(),
        }
    }

    fn report(t: TargetDiff) -> DiffReport {
        DiffReport {
            base: BaseInfo {
                rev: "HEAD".into(),
                commit: "0123456789abcdef".into(),
                how: "given".into(),
                dirty: false,
            },
            targets: vec![t],
        }
    }

    #[test]
    fn slower_fails_only_when_the_whole_interval_exceeds_the_budget() {
        let over = report(target(Some(cmp(1.12, 1.08, 1.16, Verdict::Slower)), None));
        assert_eq!(exit_code(&over, false), 1);
        let within = report(target(Some(cmp(1.06, 1.03, 1.09, Verdict::Slower)), None));
        assert_eq!(exit_code(&within, false), 0);
        let same = report(target(
            Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)),
            None,
        ));
        assert_eq!(exit_code(&same, false), 0);
        let open = report(target(
            Some(cmp(1.03, 0.9, 1.2, Verdict::Inconclusive)),
            None,
        ));
        assert_eq!(exit_code(&open, false), 0);
        assert_eq!(exit_code(&open, true), 1);
    }

    #[test]
    fn a_new_forbidden_module_and_a_module_budget_fail() {
        let imports = ImportDiff {
            modules_b: Some(120),
            forbidden_new: vec![ForbiddenChange {
                module: "torch".into(),
                chain: vec!["w".into(), "w.model".into(), "torch".into()],
                origin: Some(Frame {
                    file: "/p/w/__init__.py".into(),
                    line: 3,
                    func: "<module>".into(),
                }),
                cumulative_us: Some(1000),
            }],
            ..ImportDiff::default()
        };
        let mut t = target(
            Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)),
            Some(imports),
        );
        t.budgets.max_modules = Some(100);
        let r = report(t);
        let kinds: Vec<&str> = r.targets[0]
            .problems(false)
            .iter()
            .map(|p| p.kind)
            .collect();
        assert_eq!(kinds, ["forbidden", "max_modules"]);
        assert_eq!(exit_code(&r, false), 1);
        let gh = github(&r, Path::new("/p"), false);
        assert!(gh.contains("::error file=w/__init__.py,line=3"), "{gh}");
        assert!(gh.contains("::notice"), "{gh}");
        assert!(junit(&r, false).contains("failures=\"1\""));
        let j: serde_json::Value = serde_json::from_str(&json(&r, false)).unwrap();
        assert_eq!(j["schema"], SCHEMA);
        assert_eq!(j["exit_code"], 1);
        assert_eq!(j["targets"][0]["problems"][0]["kind"], "forbidden");
    }

    #[test]
    fn an_absolute_budget_is_judged_on_the_lower_bound() {
        let mut t = target(Some(cmp(1.0, 0.98, 1.02, Verdict::Equivalent)), None);
        t.budgets.max_ready_ms = Some(95.0);
        assert!(
            t.problems(false).is_empty(),
            "lower bound 90 ms is under 95"
        );
        t.budgets.max_ready_ms = Some(85.0);
        assert_eq!(t.problems(false)[0].kind, "max_ready_ms");
    }

    #[test]
    fn a_side_that_could_not_run_exits_2_and_says_which() {
        let mut t = target(None, None);
        t.status = DiffStatus::Error;
        t.error = Some(SideError {
            side: "A",
            message: "no ready line".into(),
        });
        let r = report(t);
        assert_eq!(exit_code(&r, false), 2);
        assert!(text(&r, Path::new("/"), false).contains("the base (A) could not be run"));
        assert!(markdown(&r, Path::new("/"), false).contains("could not compare"));
    }
}
