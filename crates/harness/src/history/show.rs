//! `history show`: a target's stored runs read back as a series along the
//! first-parent history, its change points and drifts found
//! ([`phases::changepoint::findings`] over each commit's median CPU time,
//! the basis the re-measurement judges on, which a loaded machine moves
//! far less than wall time; ready time is the trend shown), and each one **confirmed by re-measuring**: the commits on
//! either side compared again, interleaved, with diff's four verdicts
//! ([`crate::diff::compare_commits`]). Only a change the re-measurement
//! finds the same way is reported as a change; the others stay
//! candidates, with what re-measuring said. For each change, what the two
//! stored import trees say arrived or left, at its first-party line.
//!
//! Runs of other environments are never part of the series (they are
//! counted); a commit stored as failed is a point without a figure and
//! not part of the series either.

use std::collections::BTreeMap;
use std::path::Path;

use answers::bisect::CommitRef;
use answers::history::{
    Change, Confirmation, Confirmed, DriftFound, Estimate, HistoryReport, ImportChange, ImportsAt,
    Point, SeriesChange, TargetHistory,
};
use history::{ModuleTime, Run, RunOutcome, StoredRun};
use importguard::importtime::{stdlib, top_level};
use phases::changepoint::{ChangeRule, drifts, steps};
use phases::compare::Comparison;
use phases::stats::{Resampling, median, median_ci};
use timeline::TrialKind;

use crate::diff::git::git_ok;
use crate::diff::{DiffOptions, DiffTargets, compare_commits};
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::trials::Progress;

/// The commits of `range` (default HEAD) along the first parents, oldest
/// first, with their subjects: the order a series is read in.
pub fn first_parent_commits(top: &Path, range: Option<&str>) -> Result<Vec<CommitRef>> {
    let text = git_ok(
        top,
        &[
            "log",
            "--reverse",
            "--first-parent",
            "--format=%H %s",
            range.unwrap_or("HEAD"),
        ],
    )?;
    Ok(text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (c, s) = l.split_once(' ').unwrap_or((l, ""));
            CommitRef {
                commit: c.to_owned(),
                subject: s.to_owned(),
            }
        })
        .collect())
}

/// Where a change's re-measurement comes from: the seam between reading
/// the series and measuring (the command line compares the two commits
/// now, interleaved; a test can answer from fixed comparisons).
pub trait Remeasure {
    /// The CPU time of `later` over `earlier`'s, compared interleaved, or
    /// why the comparison could not be made.
    fn compare(
        &mut self,
        earlier: &CommitRef,
        later: &CommitRef,
    ) -> Result<std::result::Result<Comparison, String>>;
    /// Whether to stop re-measuring (Ctrl-C).
    fn interrupted(&self) -> bool;
}

/// A point of the series: the run's figures.
pub fn point(commit: CommitRef, run: &Run) -> Point {
    let measured = run.trials.iter().filter(|t| t.kind == TrialKind::Measured);
    let correct: Vec<_> = measured
        .clone()
        .filter(|t| t.outcome.is_correct())
        .collect();
    let ready: Vec<f64> = correct
        .iter()
        .filter_map(|t| t.phases.ready_ns)
        .map(|ns| ns as f64 / 1e6)
        .collect();
    let ready_ms = median(&ready).map(|m| {
        let ci = median_ci(&ready, &Resampling::default()).ok();
        Estimate {
            median: m,
            lo: ci.map_or(m, |c| c.lo),
            hi: ci.map_or(m, |c| c.hi),
        }
    });
    let cpu: Vec<f64> = correct
        .iter()
        .filter_map(|t| t.cpu_ns())
        .map(|(u, s)| (u + s) as f64 / 1e6)
        .collect();
    let peaks: Vec<f64> = correct
        .iter()
        .filter_map(|t| {
            t.workers
                .iter()
                .filter_map(|w| w.usage.map(|u| u.max_rss_bytes))
                .max()
        })
        .map(|b| b as f64)
        .collect();
    Point {
        commit,
        time_unix_s: run.commit.time_unix_s,
        ready_ms,
        cpu_ms: median(&cpu),
        trials: measured.clone().count(),
        failures: measured.filter(|t| !t.outcome.is_correct()).count(),
        peak_rss_bytes: median(&peaks),
        modules: run.modules.len(),
        failed: match &run.outcome {
            RunOutcome::Measured => None,
            RunOutcome::Failed { message } => Some(message.clone()),
        },
    }
}

/// The units an import tree is compared in: each third-party top-level
/// package and each of the project's modules, with the first-party line
/// that imports it (a package's own line, else its first module's).
fn units(
    modules: &[ModuleTime],
) -> BTreeMap<String, (bool, Option<importguard::recorder::CallSite>)> {
    let mut out: BTreeMap<String, (bool, Option<_>)> = BTreeMap::new();
    for m in modules {
        let name = if m.first_party {
            m.module.clone()
        } else {
            let top = top_level(&m.module);
            if stdlib::is_stdlib(top) {
                continue;
            }
            top.to_owned()
        };
        let entry = out.entry(name).or_insert((m.first_party, None));
        if entry.1.is_none() {
            entry.1 = m.imported_at.clone();
        }
    }
    out
}

/// What arrived and left between two stored import trees, or why they
/// cannot be compared (a run without one).
pub fn import_changes(before: &Run, after: &Run) -> std::result::Result<Vec<ImportChange>, String> {
    if before.modules.is_empty() || after.modules.is_empty() {
        return Err(
            "a run on either side kept no import tree (a `bench --record` run keeps none; `history record` does)"
                .to_owned(),
        );
    }
    let (a, b) = (units(&before.modules), units(&after.modules));
    let mut out: Vec<ImportChange> = b
        .iter()
        .filter(|(name, _)| !a.contains_key(*name))
        .map(|(name, (first_party, at))| ImportChange {
            change: "added",
            module: name.clone(),
            first_party: *first_party,
            at: at.clone(),
        })
        .collect();
    out.extend(a.iter().filter(|(name, _)| !b.contains_key(*name)).map(
        |(name, (first_party, at))| ImportChange {
            change: "removed",
            module: name.clone(),
            first_party: *first_party,
            at: at.clone(),
        },
    ));
    Ok(out)
}

/// One target's series in one environment.
#[derive(Debug)]
pub struct Series<'a> {
    /// The target.
    pub target: &'a str,
    /// The environment's fingerprint.
    pub environment: &'a str,
    /// Its interpreter build, for a person.
    pub interpreter: &'a str,
    /// Every stored run of the target, of any environment.
    pub runs: &'a [StoredRun],
    /// The first-parent commits, oldest first ([`first_parent_commits`]).
    pub order: &'a [CommitRef],
}

/// The target's history: its points, its changes and drifts found with
/// `rule`, each re-measured by `remeasure` when it is given (else
/// reported as not measured, never as a change).
pub fn target_history(
    s: &Series<'_>,
    rule: &ChangeRule,
    mut remeasure: Option<&mut dyn Remeasure>,
) -> Result<TargetHistory> {
    let mine: BTreeMap<&str, &Run> = s
        .runs
        .iter()
        .map(|r| &r.run)
        .filter(|r| r.target == s.target && r.environment.fingerprint() == s.environment)
        .map(|r| (r.commit.sha.as_str(), r))
        .collect();
    let other_environments = s
        .runs
        .iter()
        .filter(|r| r.run.target == s.target && r.run.environment.fingerprint() != s.environment)
        .count();
    let stored: Vec<(&CommitRef, &Run)> = s
        .order
        .iter()
        .filter_map(|c| mine.get(c.commit.as_str()).map(|r| (c, *r)))
        .collect();
    let points: Vec<Point> = stored.iter().map(|(c, r)| point((*c).clone(), r)).collect();
    // The series: the points with a figure, and where each sits in `stored`.
    let at: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].failed.is_none() && points[i].cpu_ms.is_some())
        .collect();
    let values: Vec<f64> = at.iter().filter_map(|&i| points[i].cpu_ms).collect();
    let mut history = TargetHistory {
        target: s.target.to_owned(),
        environment: s.environment.to_owned(),
        interpreter: s.interpreter.to_owned(),
        other_environments,
        points,
        changes: Vec::new(),
        candidates: Vec::new(),
        drifts: Vec::new(),
        drift_candidates: Vec::new(),
    };
    let mut confirm = |earlier: usize, later: usize, direction: f64| -> Result<Confirmation> {
        let Some(m) = remeasure.as_deref_mut() else {
            return Ok(Confirmation::not_measured(
                "not re-measured (--no-confirm): a change the series shows is a candidate until the two commits are compared again",
            ));
        };
        if m.interrupted() {
            return Ok(Confirmation::not_measured("not re-measured: interrupted"));
        }
        Ok(match m.compare(stored[earlier].0, stored[later].0)? {
            Ok(c) => Confirmation::of(c, direction),
            Err(why) => Confirmation::not_measured(format!("could not be re-measured: {why}")),
        })
    };
    // Steps first: each re-measured, the confirmed kept as the stretches'
    // edges; a drift is then searched for between confirmed steps only,
    // so a noisy commit inside a drift that re-measuring does not confirm
    // no longer cuts the drift in two.
    let mut kept = Vec::new();
    for cp in steps(&values, rule) {
        let (b, a, confirmation) =
            confirmed_pair(cp.index, at.len(), |b, a| confirm(at[b], at[a], cp.change))?;
        let change = change_of(&stored, &cp, (at[b], at[a]), confirmation);
        if change.confirmation.status == Confirmed::Confirmed {
            kept.push(a);
            history.changes.push(change);
        } else {
            history.candidates.push(change);
        }
    }
    for d in drifts(&values, &kept, rule) {
        // The ramp's first point is the last on the level before: the
        // re-measurement compares it with the ramp's last, both inside
        // the stretch (never across a step at its edge).
        let (from, to) = (at[d.start], at[d.end]);
        let found = DriftFound {
            imports: imports_between(&stored, from, to),
            from: stored[from].0.clone(),
            to: stored[to].0.clone(),
            commits: d.end - d.start,
            total: d.total,
            per_commit: d.per_commit,
            p: d.p,
            confirmation: confirm(from, to, d.total)?,
        };
        if found.confirmation.status == Confirmed::Confirmed {
            history.drifts.push(found);
        } else {
            history.drift_candidates.push(found);
        }
    }
    Ok(history)
}

/// The pair of series indices whose re-measurement stands for the change
/// point at `index` (of `len`): the commits on either side first; when
/// `confirm` does not confirm them, the pairs one commit earlier and one
/// later (a noisy median can put a step one commit off its commit). The
/// first confirmed pair is the step; else the first pair's answer stands.
fn confirmed_pair(
    index: usize,
    len: usize,
    mut confirm: impl FnMut(usize, usize) -> Result<Confirmation>,
) -> Result<(usize, usize, Confirmation)> {
    let pairs = [
        Some((index - 1, index)),
        (index >= 2).then(|| (index - 2, index - 1)),
        (index + 1 < len).then_some((index, index + 1)),
    ];
    let mut answer: Option<(usize, usize, Confirmation)> = None;
    for (b, a) in pairs.into_iter().flatten() {
        let c = confirm(b, a)?;
        let done = c.status == Confirmed::Confirmed || c.status == Confirmed::NotMeasured;
        if answer.is_none() || c.status == Confirmed::Confirmed {
            answer = Some((b, a, c));
        }
        if done {
            break;
        }
    }
    Ok(answer.expect("the pair on either side is always tried"))
}

/// The change at `cp` between the stored runs `before` and `after`, with
/// what their import trees say arrived and left.
fn change_of(
    stored: &[(&CommitRef, &Run)],
    cp: &phases::changepoint::ChangePoint,
    (before, after): (usize, usize),
    confirmation: Confirmation,
) -> Change {
    let (imports, imports_error) = match import_changes(stored[before].1, stored[after].1) {
        Ok(i) => (i, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    Change {
        at: stored[after].0.clone(),
        parent: stored[before].0.commit.clone(),
        series: SeriesChange {
            before_ms: cp.before,
            after_ms: cp.after,
            change: cp.change,
            p: cp.p,
        },
        confirmation,
        imports,
        imports_error,
    }
}

/// The stored runs after `from` up to `to` whose import tree differs from
/// the run's before it, with what arrived and left.
fn imports_between(stored: &[(&CommitRef, &Run)], from: usize, to: usize) -> Vec<ImportsAt> {
    (from + 1..=to)
        .filter_map(|i| {
            let changes = import_changes(stored[i - 1].1, stored[i].1).ok()?;
            (!changes.is_empty()).then(|| ImportsAt {
                at: stored[i].0.clone(),
                changes,
            })
        })
        .collect()
}

/// How the changes found are re-measured: with these options, stopped by
/// `interrupt`, shown through `progress`.
pub struct Confirm<'a> {
    /// The comparisons' options; each goes into its own folder under
    /// `opts.out`.
    pub opts: DiffOptions,
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// What the caller is shown.
    pub progress: &'a mut dyn Progress,
}

impl std::fmt::Debug for Confirm<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confirm")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// The whole `history show`: for each plan's one target, its runs in
/// `store` read along the first parents of `range` (default HEAD) in the
/// environment it runs in now ([`super::environment`]), its changes found
/// with `rule`, and each re-measured with `confirm` (none: reported as not
/// measured, never as a change).
pub fn run(
    store: &mut history::Store,
    top: &Path,
    range: Option<&str>,
    plans: &[DiffTargets<'_>],
    rule: &ChangeRule,
    mut confirm: Option<Confirm<'_>>,
) -> Result<HistoryReport> {
    let order = first_parent_commits(top, range)?;
    let mut report = HistoryReport {
        rule: *rule,
        targets: Vec::new(),
    };
    for plan in plans {
        let Some((target, _)) = plan.targets.first() else {
            continue;
        };
        let runs = store.runs(&history::RunFilter {
            target: Some(target.name.clone()),
            ..history::RunFilter::default()
        })?;
        let env = super::environment(target);
        let fingerprint = env.fingerprint();
        let series = Series {
            target: &target.name,
            environment: &fingerprint,
            interpreter: &env.interpreter,
            runs: &runs,
            order: &order,
        };
        let mut now = confirm.as_mut().map(|c| Remeasured {
            top: top.to_path_buf(),
            plan,
            opts: c.opts.clone(),
            interrupt: c.interrupt,
            progress: &mut *c.progress,
        });
        let remeasure = now.as_mut().map(|m| m as &mut dyn Remeasure);
        report
            .targets
            .push(target_history(&series, rule, remeasure)?);
        if confirm.as_ref().is_some_and(|c| c.interrupt.is_set()) {
            break;
        }
    }
    Ok(report)
}

/// Re-measurement now: the two commits checked out and compared as
/// `diff` compares a base with a head (interleaved rounds on CPU time,
/// the four verdicts, the target's noise band), the checkouts removed
/// after each comparison.
pub struct Remeasured<'a> {
    /// The working tree's top.
    pub top: std::path::PathBuf,
    /// The one target compared, with its noise band as `max_slowdown`.
    pub plan: &'a DiffTargets<'a>,
    /// The comparisons' options (their budgets, their folder).
    pub opts: DiffOptions,
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// What the caller is shown.
    pub progress: &'a mut dyn Progress,
}

impl std::fmt::Debug for Remeasured<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remeasured")
            .field("top", &self.top)
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Remeasure for Remeasured<'_> {
    fn compare(
        &mut self,
        earlier: &CommitRef,
        later: &CommitRef,
    ) -> Result<std::result::Result<Comparison, String>> {
        self.progress.announce(&crate::trials::Event::Sides {
            base: format!("{} {}", earlier.short(), earlier.subject),
            head: format!("{} {}", later.short(), later.subject),
        });
        let opts = DiffOptions {
            out: self
                .opts
                .out
                .join(format!("{}-{}", earlier.short(), later.short())),
            ..self.opts.clone()
        };
        let (mut results, _) = compare_commits(
            &self.top,
            [&earlier.commit, &later.commit],
            // As `record` measured them: the working tree's target.
            &self.plan.as_declared_now(),
            &opts,
            self.interrupt,
            self.progress,
        )?;
        let Some(r) = results.pop() else {
            return Ok(Err("the target is not in the plan".to_owned()));
        };
        if let Some(e) = &r.error {
            let side = if e.side == "A" { earlier } else { later };
            return Ok(Err(format!(
                "{} could not be run: {}",
                side.short(),
                e.message
            )));
        }
        Ok(r.answer()
            .cloned()
            .ok_or_else(|| format!("the target `{}`'s folder is not at both commits", r.name)))
    }

    fn interrupted(&self) -> bool {
        self.interrupt.is_set()
    }
}

#[cfg(test)]
mod tests;
