//! `diff`: the worker at a base revision (side A, checked out into a
//! temporary `git worktree`, [`git`]) against the worker in the working
//! tree (side B), per target.
//!
//! There is one comparison path: the bench's interleaved trial loop
//! ([`crate::trials::run`]) with the base as side A, exactly as `bench
//! --vs` runs it, following the sequential stopping rule, with the same
//! analysis (`phases`). Only the rule's question differs: its basis is the
//! workers' CPU time (user + system from `wait4`), which under load is far
//! steadier than wall time, with wall time compared beside it and a
//! warning when the two settle on different verdicts; and its noise band
//! is the target's `max_slowdown`, so `slower` means slower by more than
//! the budget, judged on the interval. Before the timed rounds, untimed
//! instrumented processes of both sides (importtime and the recorder)
//! give the start-up import trees (`imports`), and show that both sides
//! run at all.
//!
//! The project paths of a target are mapped into the checkout with
//! [`Target::moved`], the mapping `check --suggest` uses for its patched
//! copy.

pub mod environment;
pub mod git;
pub(crate) mod imports;
pub mod outputs;

use std::path::PathBuf;

use answers::diff::{
    BaseInfo, Budgets, DiffReport, DiffStatus, Rss, SideError, TargetDiff, TimeDiff,
};
use phases::sequential::{Question, StopRule};
use phases::stats::Resampling;
use phases::{Measure, Phase};
use timeline::Variant;

use crate::check::Instrumented;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::target::Target;
use crate::trials::{self, BenchOptions, BenchRun, Progress};
use imports::SideImports;

pub use git::{BaseRev, Worktree};

/// Instrumented rounds per side by default: six pairs give a 95% interval
/// (coverage 96.9%) for each package's change.
pub const DEFAULT_INSTRUMENTED: usize = 6;

/// How a diff runs, beyond its targets.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// Warm-up rounds before the timed ones.
    pub warmup: usize,
    /// The most timed rounds.
    pub max_rounds: usize,
    /// The most seconds of timed rounds.
    pub max_seconds: f64,
    /// Instrumented processes per side (untimed).
    pub instrumented: usize,
    /// Resamples, seed and level of the bootstrap intervals.
    pub bootstrap: Resampling,
    /// The folder each target's bench run goes into (`<out>/<target>/`).
    pub out: PathBuf,
    /// The project root, for the tool's git revision in the environment.
    pub root: PathBuf,
    /// The noise band's question: any change (diff's four verdicts), or
    /// slower or not (a bisect step).
    pub question: Question,
    /// Whether the timed rounds run; without them only the import trees
    /// are compared (what arrived at a commit).
    pub timed: bool,
}

impl DiffOptions {
    /// The defaults with the round and time budgets, where given.
    pub fn with_budgets(max_rounds: Option<usize>, max_seconds: Option<f64>) -> DiffOptions {
        let d = DiffOptions::default();
        DiffOptions {
            max_rounds: max_rounds.unwrap_or(d.max_rounds),
            max_seconds: max_seconds.unwrap_or(d.max_seconds),
            ..d
        }
    }
}

/// Where each side's code is: the trees the comparison runs in.
#[derive(Debug, Clone, Default)]
pub struct Trees {
    /// The working tree's top folder, where the targets' paths point and
    /// where build outputs and virtual environments come from.
    pub top: PathBuf,
    /// The tree each side runs its own code from (A, B): every project
    /// module a side imports is checked to come from its own
    /// ([`crate::provenance`]). Empty: each side's target root.
    pub paths: [PathBuf; 2],
    /// The commit checked out at each side's path; `None`: that side is
    /// the working tree (B only), or the trees are not prepared at all
    /// (both `None`).
    pub commits: [Option<String>; 2],
}

impl Default for DiffOptions {
    fn default() -> Self {
        let rule = StopRule::default();
        DiffOptions {
            warmup: 1,
            max_rounds: rule.max_rounds,
            max_seconds: rule.max_seconds,
            instrumented: DEFAULT_INSTRUMENTED,
            bootstrap: Resampling::default(),
            out: PathBuf::new(),
            root: PathBuf::new(),
            question: Question::Change,
            timed: true,
        }
    }
}

/// Side B of a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// The working tree at the top, uncommitted changes and all.
    WorkingTree,
    /// A commit, checked out into its own temporary worktree.
    Commit(BaseRev),
}

/// What to compare, beyond the two revisions: the targets as the working
/// tree's config gives them, each with its budgets, and how to tell
/// whether a checkout's own config names a target (the config's format
/// belongs to a crate above this one, so the caller reads it).
pub struct DiffTargets<'a> {
    /// The targets, in the working tree, with their budgets.
    pub targets: Vec<(Target, Budgets)>,
    /// The config file in the working tree; `None`: the targets come from
    /// no config (a command line), and exist on every side.
    pub config: Option<PathBuf>,
    /// The names of the targets the config at a path (the working tree's
    /// config moved into a checkout) declares; empty when it has none.
    pub names_at: &'a dyn Fn(&std::path::Path) -> Vec<String>,
}

impl std::fmt::Debug for DiffTargets<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiffTargets")
            .field("targets", &self.targets)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl DiffTargets<'_> {
    /// The same targets, measured at every commit as the working tree
    /// declares them, whether or not that commit's own config names them
    /// (their folder must still be there): the rule of `history record`,
    /// `history show`'s re-measuring and `bisect`, whose commits mostly
    /// predate the config.
    pub fn as_declared_now(&self) -> DiffTargets<'_> {
        DiffTargets {
            targets: self.targets.clone(),
            config: None,
            names_at: self.names_at,
        }
    }

    /// Whether the target `name` exists in the checkout at `tree`: its
    /// config names it (when there is a config) and its folder is there.
    pub fn exists_at(
        &self,
        name: &str,
        top: &std::path::Path,
        tree: &std::path::Path,
        cwd: &std::path::Path,
    ) -> bool {
        let named = self.config.as_ref().is_none_or(|c| {
            (self.names_at)(&crate::target::moved_path(c, top, tree))
                .iter()
                .any(|n| n == name)
        });
        named && cwd.is_dir()
    }
}

/// Compares every target of `plan` between the trees: each side's own
/// import roots first on its path (an editable install of the project
/// points at the working tree, and would otherwise serve a checkout the
/// working tree's code), a target absent from a checkout reported as new
/// rather than compared. Stops after the target at which `interrupt` is
/// set.
pub fn compare_trees(
    trees: &Trees,
    plan: &DiffTargets<'_>,
    opts: &DiffOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Vec<TargetDiff>> {
    let top = trees.top.as_path();
    let mut results = Vec::new();
    for (t, budgets) in &plan.targets {
        let side = |i: usize| match trees.commits[i] {
            Some(_) => t.moved(top, &trees.paths[i]).own_roots_first(),
            None => t.own_roots_first(),
        };
        let (a, b) = (side(0), side(1));
        let exists = [(&a, 0), (&b, 1)].iter().all(|(s, i)| {
            trees.commits[*i].is_none() || plan.exists_at(&t.name, top, &trees.paths[*i], &s.cwd)
        });
        if !exists {
            results.push(new_target(&t.name, *budgets));
            continue;
        }
        results.push(compare_target(
            &a, &b, *budgets, opts, trees, interrupt, progress,
        )?);
        if interrupt.is_set() {
            break;
        }
    }
    Ok(results)
}

/// Compares every target of `plan` between two commits, each checked out
/// into its own temporary worktree for the comparison and removed after
/// it (also on an error or an interrupt). With the results comes the path
/// B's checkout had: gone by then, it is the root the import lines of B
/// are to be made relative to.
pub fn compare_commits(
    top: &std::path::Path,
    [a, b]: [&str; 2],
    plan: &DiffTargets<'_>,
    opts: &DiffOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<(Vec<TargetDiff>, PathBuf)> {
    let (wa, wb) = (Worktree::add(top, a)?, Worktree::add(top, b)?);
    let trees = Trees {
        top: top.to_path_buf(),
        paths: [wa.path().to_path_buf(), wb.path().to_path_buf()],
        commits: [Some(a.to_owned()), Some(b.to_owned())],
    };
    let results = compare_trees(&trees, plan, opts, interrupt, progress)?;
    Ok((results, wb.path().to_path_buf()))
}

/// The whole diff: the base (A) checked out into a temporary worktree,
/// `head` (B) the working tree or another checkout, every target of
/// `plan` compared ([`compare_trees`]), the checkouts removed on the way
/// out (also on an error or an interrupt). The caller parses flags,
/// prints the report and picks the exit code.
pub fn run(
    top: &std::path::Path,
    base: BaseRev,
    head: &Head,
    plan: &DiffTargets<'_>,
    opts: &DiffOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<DiffReport> {
    let dirty = *head == Head::WorkingTree && git::dirty(top)?;
    let short = |c: &str| c[..c.len().min(12)].to_owned();
    progress.announce(&crate::trials::Event::Sides {
        base: format!("{} = {} ({})", base.rev, short(&base.commit), base.how),
        head: match head {
            Head::WorkingTree if dirty => {
                "the working tree with its uncommitted changes".to_owned()
            }
            Head::WorkingTree => "the working tree".to_owned(),
            Head::Commit(rev) => format!("{} = {}", rev.rev, short(&rev.commit)),
        },
    });
    let a = Worktree::add(top, &base.commit)?;
    let b = match head {
        Head::WorkingTree => None,
        Head::Commit(rev) => Some(Worktree::add(top, &rev.commit)?),
    };
    let trees = Trees {
        top: top.to_path_buf(),
        paths: [
            a.path().to_path_buf(),
            b.as_ref()
                .map_or_else(|| top.to_path_buf(), |w| w.path().to_path_buf()),
        ],
        commits: [
            Some(base.commit.clone()),
            match head {
                Head::WorkingTree => None,
                Head::Commit(rev) => Some(rev.commit.clone()),
            },
        ],
    };
    let targets = compare_trees(&trees, plan, opts, interrupt, progress)?;
    Ok(DiffReport {
        base: BaseInfo {
            rev: base.rev,
            commit: base.commit,
            how: base.how,
            dirty,
        },
        targets,
    })
}

/// The stopping rule of a diff ([`StopRule::cpu_basis`]: CPU time as the
/// basis, the target's `max_slowdown` as the noise band) with the run's
/// budgets.
pub fn stop_rule(budgets: &Budgets, opts: &DiffOptions) -> StopRule {
    StopRule {
        max_rounds: opts.max_rounds,
        max_seconds: opts.max_seconds,
        question: opts.question,
        ..StopRule::cpu_basis(budgets.max_slowdown)
    }
}

fn error(name: &str, budgets: Budgets, side: Variant, message: String) -> TargetDiff {
    TargetDiff {
        name: name.to_owned(),
        status: DiffStatus::Error,
        error: Some(SideError {
            side: if side == Variant::A { "A" } else { "B" },
            message,
        }),
        budgets,
        time: None,
        imports: None,
        warnings: Vec::new(),
        prepared: Vec::new(),
    }
}

/// A target that does not exist at the base.
pub fn new_target(name: &str, budgets: Budgets) -> TargetDiff {
    TargetDiff {
        name: name.to_owned(),
        status: DiffStatus::New,
        error: None,
        budgets,
        time: None,
        imports: None,
        warnings: Vec::new(),
        prepared: Vec::new(),
    }
}

/// When CPU and wall time settle on different verdicts, what that means.
fn disagreement(
    cpu: Option<&phases::compare::Comparison>,
    wall: Option<&phases::compare::Comparison>,
) -> Option<String> {
    let (c, w) = (cpu?, wall?);
    if !(c.verdict.is_settled() && w.verdict.is_settled()) || c.verdict == w.verdict {
        return None;
    }
    Some(format!(
        "CPU time says {} (B/A {:.3}) but wall time of ready says {} (B/A {:.3}): {}",
        c.verdict,
        c.ratio,
        w.verdict,
        w.ratio,
        if w.ratio > c.ratio {
            "B waits more (I/O, sleep, a lock, a child process), which CPU time does not count"
        } else {
            "B does more work in parallel or A waits more; read both"
        }
    ))
}

/// Compares `base` (side A) with `head` (side B): the trees prepared
/// first ([`outputs`]: the target's `setup`, or the ignored extension
/// modules carried into each checkout), then the instrumented processes,
/// then the timed interleaved rounds. A side that cannot be run is
/// reported as such, not as an error.
pub fn compare_target(
    base: &Target,
    head: &Target,
    budgets: Budgets,
    opts: &DiffOptions,
    trees: &Trees,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<TargetDiff> {
    let prepared = match outputs::prepare(base, head, trees) {
        Ok(p) => p,
        Err(crate::error::Error::Side { side, cause, .. }) => {
            return Ok(error(&head.name, budgets, side, cause.to_string()));
        }
        Err(other) => return Err(other),
    };
    let sides = Sides {
        base,
        head,
        opts,
        trees,
        prepared: &prepared,
    };
    let mut r = compare_prepared(&sides, budgets, interrupt, progress)?;
    // B's notes first: a setup runs in the head's tree before the base's.
    let [a, b] = prepared;
    r.prepared = b.notes.into_iter().chain(a.notes).collect();
    Ok(r)
}

/// A target's two sides, ready to run.
struct Sides<'a> {
    base: &'a Target,
    head: &'a Target,
    opts: &'a DiffOptions,
    trees: &'a Trees,
    prepared: &'a [outputs::Prepared; 2],
}

/// [`compare_target`] once the trees are prepared: the import trees,
/// then the timed rounds (unless [`DiffOptions::timed`] is off).
fn compare_prepared(
    sides: &Sides<'_>,
    budgets: Budgets,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<TargetDiff> {
    let (base, head, opts) = (sides.base, sides.head, sides.opts);
    let name = head.name.as_str();
    let (sa, sb) = match instrumented_sides(sides, progress)? {
        Ok(s) => s,
        Err((variant, message)) => return Ok(error(name, budgets, variant, message)),
    };
    let import_diff = imports::diff(&sa, &sb, base, head);
    if interrupt.is_set() || !opts.timed {
        let warnings = if opts.timed {
            vec!["interrupted before the timed rounds: no time was compared".to_owned()]
        } else {
            Vec::new()
        };
        return Ok(TargetDiff {
            status: DiffStatus::Compared,
            imports: Some(import_diff),
            warnings,
            ..new_target(name, budgets)
        });
    }
    let run = timed_rounds(base, head, &budgets, opts, interrupt, progress)?;
    if let Some((r, stage, message)) = run.first_failure() {
        return Ok(error(
            name,
            budgets,
            r.variant,
            format!("trial {} failed at {stage}: {message}", r.trial),
        ));
    }
    let time = time_diff(&run);
    let warnings = time_warnings(&time, run.interrupted());
    Ok(TargetDiff {
        name: name.to_owned(),
        status: DiffStatus::Compared,
        error: None,
        budgets,
        time: Some(time),
        imports: Some(import_diff),
        warnings,
        prepared: Vec::new(),
    })
}

/// Both sides' import trees from their instrumented processes, or the
/// side that failed and why: it could not start (with what its checkout
/// lacks, if it does), or it ran code from outside its tree.
fn instrumented_sides(
    sides: &Sides<'_>,
    progress: &mut dyn Progress,
) -> Result<std::result::Result<(SideImports, SideImports), (Variant, String)>> {
    let (base, head, opts) = (sides.base, sides.head, sides.opts);
    progress.announce(&crate::trials::Event::Instrumented {
        target: head.name.clone(),
        processes: opts.instrumented.max(1),
    });
    let (xa, xb) = imports::run_both(base, head, opts.instrumented.max(1))?;
    let mut found = Vec::with_capacity(2);
    for (variant, xs, prepared) in [
        (Variant::A, &xa, &sides.prepared[0]),
        (Variant::B, &xb, &sides.prepared[1]),
    ] {
        match imports::side(xs) {
            Ok(s) => found.push(s),
            Err(e) => {
                // A checkout that cannot start is told what it lacks, if it does.
                let message = outputs::advice(prepared, variant)
                    .map_or_else(|| e.clone(), |a| format!("{e}\n{a}"));
                return Ok(Err((variant, message)));
            }
        }
    }
    if let Some(foreign) = foreign_side(
        base,
        head,
        [xa.as_slice(), xb.as_slice()],
        &sides.trees.paths,
    ) {
        return Ok(Err(foreign));
    }
    let (sb, sa) = (
        found.pop().expect("two sides"),
        found.pop().expect("two sides"),
    );
    Ok(Ok((sa, sb)))
}

/// The first side whose processes imported the project's code from
/// outside its own tree, and what they imported: never a verdict from two
/// sides that ran the same code.
fn foreign_side(
    base: &Target,
    head: &Target,
    [xa, xb]: [&[Instrumented]; 2],
    trees: &[PathBuf; 2],
) -> Option<(Variant, String)> {
    [
        (Variant::A, base, xa, &trees[0]),
        (Variant::B, head, xb, &trees[1]),
    ]
    .into_iter()
    .find_map(|(variant, side, xs, tree)| {
        let tree = if tree.as_os_str().is_empty() {
            &side.root
        } else {
            tree
        };
        imports::foreign(xs, &[base, head], side, tree).map(|f| (variant, f.to_string()))
    })
}

/// The timed interleaved rounds, base as A and head as B, into the
/// target's folder under the diff's.
fn timed_rounds(
    base: &Target,
    head: &Target,
    budgets: &Budgets,
    opts: &DiffOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<BenchRun> {
    let rule = stop_rule(budgets, opts);
    let dir = opts.out.join(&head.name);
    std::fs::create_dir_all(&dir).map_err(|e| crate::error::Error::io("create", &dir, e))?;
    let bench = BenchOptions::sequential(rule, opts.warmup, opts.bootstrap, dir, opts.root.clone());
    progress.announce(&crate::trials::Event::Timed {
        target: head.name.clone(),
    });
    trials::run(
        base.clone(),
        Some(head.clone()),
        &bench,
        interrupt,
        progress,
    )
}

/// What the timed rounds say: CPU and wall time of ready compared, B's
/// ready time, both sides' memory.
fn time_diff(run: &BenchRun) -> TimeDiff {
    let s = &run.summary;
    let cpu = s.ab.as_ref().and_then(|ab| ab.cpu.clone());
    let wall_ready = s.phase(Phase::Ready).and_then(|p| p.ratio.clone());
    let ready_ms_b = s
        .phase(Phase::Ready)
        .and_then(|p| p.variant(Variant::B))
        .map(|b| (b.stats.median, b.stats.median_ci.lo, b.stats.median_ci.hi));
    let rss = |v: Variant| {
        let r = s.resources.iter().find(|r| r.variant == v);
        Rss {
            peak_bytes: r.and_then(|r| r.max_rss_bytes),
            at_ready_bytes: r.and_then(|r| r.rss_at_ready_bytes),
        }
    };
    let disagree = disagreement(cpu.as_ref(), wall_ready.as_ref());
    TimeDiff {
        basis: Measure::Cpu,
        cpu,
        wall_ready,
        disagree,
        ready_ms_b,
        rss: [rss(Variant::A), rss(Variant::B)],
        run_dir: run.dir.clone(),
        summary: run.summary.clone(),
    }
}

/// The warning of an inconclusive CPU comparison: what the run could have
/// detected, and what it does to the exit code. The warning is written
/// once for every output, `--strict` or not, so it states the rule for
/// both: only `--strict` fails a diff on an inconclusive comparison.
fn inconclusive_warning(c: &phases::compare::Comparison) -> String {
    format!(
        "inconclusive: {}; it fails the diff only under --strict",
        c.detectable().map_or_else(
            || "the run could not bound the change".to_owned(),
            |d| format!(
                "this run could have detected a change of {} or more",
                report::bench::fmt_pct(d)
            )
        )
    )
}

/// The warnings of a time comparison: CPU and wall time disagree, the
/// verdict is inconclusive, the rounds were interrupted.
fn time_warnings(time: &TimeDiff, interrupted: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(d) = &time.disagree {
        warnings.push(d.clone());
    }
    if let Some(c) = time
        .cpu
        .as_ref()
        .filter(|c| c.verdict == phases::compare::Verdict::Inconclusive)
    {
        warnings.push(inconclusive_warning(c));
    }
    if interrupted {
        warnings.push("interrupted: the comparison covers the rounds run so far".to_owned());
    }
    warnings
}

#[cfg(test)]
mod tests {
    use phases::compare::{Comparison, Method, Verdict};
    use phases::stats::Interval;

    use super::inconclusive_warning;

    /// An inconclusive CPU comparison of 20 paired rounds, its interval
    /// straddling the 2% band.
    fn inconclusive() -> Comparison {
        Comparison {
            ratio: 1.01,
            ci: Interval {
                lo: 0.97,
                hi: 1.05,
                level: 0.95,
            },
            verdict: Verdict::Inconclusive,
            threshold: 0.02,
            paired: true,
            n_a: 20,
            n_b: 20,
            method: Method::default(),
            unsettled: None,
        }
    }

    #[test]
    fn the_inconclusive_warning_is_true_with_and_without_strict() {
        let w = inconclusive_warning(&inconclusive());
        // The same line is printed under --strict, which exits 1 on it.
        assert!(!w.contains("exits 0"), "{w}");
        assert!(w.ends_with("it fails the diff only under --strict"), "{w}");
        assert!(
            w.starts_with("inconclusive: this run could have detected a change of "),
            "{w}"
        );
    }
}
