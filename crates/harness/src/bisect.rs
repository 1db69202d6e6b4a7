//! `bisect`: the first commit between a good and a bad one whose start-up
//! is slower than the good one's by more than a threshold.
//!
//! Every step is one comparison of a commit (side B, checked out into its
//! own temporary worktree) against the good commit (side A, checked out
//! once for the whole search), made by [`crate::diff::compare_trees`], the
//! one way two revisions are compared: the interleaved rounds on CPU time
//! with the sequential stop rule, asked the one-sided question
//! ([`phases::sequential::Question::Slower`]): slower by more than the
//! threshold, not slower, or inconclusive once the round or time budget is
//! spent. An inconclusive step is never read as either answer, and a
//! commit whose worker cannot start (or whose side fails) is skipped and
//! named; the search goes on around both, as `git bisect` does around a
//! skipped commit ([`search`]), and ends in a range when they leave the
//! first slow commit undecided.
//!
//! The commits searched are `git rev-list --first-parent --ancestry-path
//! GOOD..BAD`, oldest first. The bad commit is compared first: a bad
//! commit not shown slower ends the search with nothing to find.
//!
//! What arrived at the culprit is the import trees of it and its first
//! parent compared (untimed instrumented processes, diff's import
//! comparison): the forbidden modules, third-party packages and
//! first-party modules at ready in the culprit only, each with the
//! first-party line that imports it.
//!
//! Each step's answer comes from [`StepSource::step`]: measured now by
//! [`Measured`]. A history of stored trials answers through the same seam.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use answers::bisect::{Answer, Arrived, BisectReport, CommitRef, Culprit, Guide, Outcome, Step};
use answers::diff::{DiffStatus, ImportDiff, TargetDiff};
use history::StoredRun;
use importguard::recorder::CallSite;

use crate::diff::{
    DiffOptions, DiffTargets, Trees, Worktree, compare_commits, compare_trees, git::git_ok,
};
use crate::error::{Error, Result, invalid};
use crate::history::show::point;
use crate::interrupt::Interrupt;
use crate::trials::Progress;

/// How the search ended, over indices of the commits searched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The first slow commit.
    One(usize),
    /// The first slow commit is one of these (ascending): the others
    /// between the last good and the first bad were skipped or
    /// inconclusive.
    Range(Vec<usize>),
}

/// The binary search over `n` commits, oldest first, the last known
/// slower and the good commit before the first: `probe(i)` compares
/// commit `i`. A slower commit moves the bad end to it, a commit not
/// slower the good end; a skipped or inconclusive commit is set aside and
/// the candidate nearest the middle of what remains is tried next, as
/// `git bisect` does. Stops when no untried candidate lies between the
/// ends, or when `probe` says to stop (`None`: interrupted).
///
/// `first` are indices to try before the middle, in order, each while it
/// still lies between the ends (a hint: the start-up history's suggested
/// commit and the one before it). A hint changes which commits are
/// compared, never what an answer means.
pub fn search(
    n: usize,
    first: &[usize],
    mut probe: impl FnMut(usize) -> Result<Option<Answer>>,
) -> Result<Found> {
    assert!(n > 0, "the bad commit is one of the commits searched");
    // `good` is one past the last index known good (0: only the good
    // commit itself), `bad` the first known slow.
    let (mut good, mut bad) = (0usize, n - 1);
    let mut set_aside = BTreeSet::new();
    let mut hints = first.iter().copied();
    loop {
        let middle = (good + bad) / 2;
        let open = |i: &usize| (good..bad).contains(i) && !set_aside.contains(i);
        let next = hints.by_ref().find(open).or_else(|| {
            (good..bad)
                .filter(|i| !set_aside.contains(i))
                .min_by_key(|&i| (i.abs_diff(middle), i))
        });
        let Some(i) = next else { break };
        match probe(i)? {
            Some(Answer::Slower) => bad = i,
            Some(Answer::NotSlower) => good = i + 1,
            Some(Answer::Inconclusive | Answer::Skipped) => {
                set_aside.insert(i);
            }
            None => break,
        }
    }
    Ok(if good == bad {
        Found::One(bad)
    } else {
        Found::Range((good..=bad).collect())
    })
}

/// The commits from `good` (excluded) to `bad` (included) along the first
/// parents, oldest first, each with its subject (`git log --reverse
/// --first-parent --ancestry-path GOOD..BAD`).
pub fn commits_between(top: &Path, good: &str, bad: &str) -> Result<Vec<CommitRef>> {
    let text = git_ok(
        top,
        &[
            "log",
            "--reverse",
            "--first-parent",
            "--ancestry-path",
            "--format=%H %s",
            &format!("{good}..{bad}"),
        ],
    )?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' ').or(Some((l, ""))))
        .filter(|(c, _)| !c.is_empty())
        .map(|(c, s)| CommitRef {
            commit: c.to_owned(),
            subject: s.to_owned(),
        })
        .collect())
}

/// One commit as the report names it: its full hash and subject.
pub fn commit_ref(top: &Path, commit: &str) -> Result<CommitRef> {
    let text = git_ok(top, &["log", "-1", "--format=%H %s", commit])?;
    let (c, s) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
    Ok(CommitRef {
        commit: c.to_owned(),
        subject: s.to_owned(),
    })
}

/// Where a step's answer comes from: the seam between the search and the
/// measurement ([`Measured`] measures now; a history of stored trials can
/// answer a commit it holds through the same calls).
pub trait StepSource {
    /// The target compared.
    fn target(&self) -> String;
    /// The comparison of `at` (`None`: the working tree, for `bisect
    /// --run`) against the good commit, or `Err` with the reason when the
    /// good side could not be run (the search cannot go on).
    fn step(&mut self, at: Option<&CommitRef>) -> Result<std::result::Result<Step, String>>;
    /// What arrived at `at`: the import trees of `parent` (A) and `at`
    /// (B) compared, untimed, with B's checkout (the files' root).
    fn imports(&mut self, parent: &CommitRef, at: &CommitRef) -> Result<(TargetDiff, PathBuf)>;
    /// Whether the search must stop now (Ctrl-C).
    fn interrupted(&self) -> bool;
}

/// Steps measured now: the good commit checked out once, each commit
/// checked out for its step and removed after it.
pub struct Measured<'a> {
    /// The working tree's top.
    pub top: PathBuf,
    /// The good commit's checkout.
    pub good: Worktree,
    /// The good commit.
    pub good_commit: String,
    /// The target, with its threshold as `max_slowdown`.
    pub plan: &'a DiffTargets<'a>,
    /// The comparisons' options (the slower question, the budgets).
    pub opts: DiffOptions,
    /// Ctrl-C.
    pub interrupt: &'a Interrupt,
    /// What the caller is shown.
    pub progress: &'a mut dyn Progress,
}

impl std::fmt::Debug for Measured<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measured")
            .field("top", &self.top)
            .field("good_commit", &self.good_commit)
            .finish_non_exhaustive()
    }
}

impl Measured<'_> {
    /// Compares `at` (`None`: the working tree) against the good commit
    /// with `opts`: the one target's result.
    fn compare(
        &mut self,
        at: Option<&CommitRef>,
        opts: &DiffOptions,
    ) -> Result<(TargetDiff, PathBuf)> {
        let checkout = at
            .map(|c| Worktree::add(&self.top, &c.commit))
            .transpose()?;
        let trees = Trees {
            top: self.top.clone(),
            paths: [
                self.good.path().to_path_buf(),
                checkout
                    .as_ref()
                    .map_or_else(|| self.top.clone(), |w| w.path().to_path_buf()),
            ],
            commits: [Some(self.good_commit.clone()), at.map(|c| c.commit.clone())],
        };
        let plan = self.plan.as_declared_now();
        let mut results = compare_trees(&trees, &plan, opts, self.interrupt, self.progress)?;
        let tree = trees.paths[1].clone();
        match results.pop() {
            Some(r) => Ok((r, tree)),
            None => invalid!("bisect compares one target, and the plan has none"),
        }
    }
}

impl StepSource for Measured<'_> {
    fn target(&self) -> String {
        self.plan
            .targets
            .first()
            .map(|(t, _)| t.name.clone())
            .unwrap_or_default()
    }

    fn interrupted(&self) -> bool {
        self.interrupt.is_set()
    }

    fn imports(&mut self, parent: &CommitRef, at: &CommitRef) -> Result<(TargetDiff, PathBuf)> {
        let opts = DiffOptions {
            timed: false,
            out: self.opts.out.join("imports"),
            ..self.opts.clone()
        };
        let (mut r, tree) = compare_commits(
            &self.top,
            [&parent.commit, &at.commit],
            &self.plan.as_declared_now(),
            &opts,
            self.interrupt,
            self.progress,
        )?;
        r.pop().map(|r| (r, tree)).ok_or_else(|| {
            Error::Invalid("bisect compares one target, and the plan has none".to_owned())
        })
    }

    fn step(&mut self, at: Option<&CommitRef>) -> Result<std::result::Result<Step, String>> {
        let opts = DiffOptions {
            out: self.opts.out.join(at.map_or("working-tree", |c| c.short())),
            ..self.opts.clone()
        };
        self.progress.announce(&crate::trials::Event::Sides {
            base: format!(
                "the good commit {}",
                &self.good_commit[..self.good_commit.len().min(12)]
            ),
            head: at.map_or_else(
                || "the working tree".to_owned(),
                |c| format!("{} {}", c.short(), c.subject),
            ),
        });
        let (r, _) = self.compare(at, &opts)?;
        let at = at.cloned().unwrap_or_else(|| CommitRef {
            commit: String::new(),
            subject: "the working tree".to_owned(),
        });
        if let Some(e) = r.error.as_ref().filter(|e| e.side == "A") {
            return Ok(Err(e.message.clone()));
        }
        Ok(Ok(step_of(at, &r)))
    }
}

/// A step from one target's comparison.
fn step_of(at: CommitRef, r: &TargetDiff) -> Step {
    let skipped = |message: String| Step {
        at: at.clone(),
        answer: Answer::Skipped,
        change: None,
        rounds: 0,
        message: Some(message),
        run_dir: None,
    };
    match (r.status, &r.error) {
        (DiffStatus::New, _) => {
            return skipped(format!(
                "the target `{}`'s folder does not exist at this commit",
                r.name
            ));
        }
        (_, Some(e)) => return skipped(format!("the worker could not be run: {}", e.message)),
        _ => {}
    }
    let time = r.time.as_ref();
    let change = r.answer().cloned();
    Step {
        answer: change.as_ref().map_or(Answer::Inconclusive, Answer::of),
        rounds: change.as_ref().map_or(0, |c| c.n_a.min(c.n_b)),
        change,
        message: r.warnings.first().cloned(),
        run_dir: time.map(|t| t.run_dir.clone()),
        at,
    }
}

/// What arrived at a commit: the import trees of its parent (A) and it
/// (B) compared, files made relative to B's checkout `tree`.
fn arrived(imports: &ImportDiff, tree: &Path) -> Vec<Arrived> {
    let relative = |c: &Option<CallSite>| {
        c.clone().map(|mut c| {
            if let Ok(rel) = Path::new(&c.file).strip_prefix(tree) {
                c.file = rel.display().to_string();
            }
            c
        })
    };
    let mut out: Vec<Arrived> = imports
        .forbidden_new
        .iter()
        .map(|f| Arrived {
            kind: "forbidden",
            module: f.module.clone(),
            at: relative(&f.origin),
        })
        .collect();
    let forbidden_top: BTreeSet<&str> = imports
        .forbidden_new
        .iter()
        .map(|f| f.module.split('.').next().unwrap_or(&f.module))
        .collect();
    out.extend(
        imports
            .packages
            .iter()
            .filter(|p| !p.first_party && p.a_ms.is_none() && p.b_ms.is_some())
            .filter(|p| !forbidden_top.contains(p.package.as_str()))
            .map(|p| Arrived {
                kind: "package",
                module: p.package.clone(),
                at: relative(&p.imported_at),
            }),
    );
    out.extend(imports.added_first_party.iter().map(|m| Arrived {
        kind: "first_party",
        module: m.module.clone(),
        at: relative(&m.imported_at),
    }));
    out
}

/// The culprit at index `i` of `commits`: its parent, its change against
/// the good commit (from its step), and what arrived at it (`imports`:
/// its parent's import tree against its own, [`StepSource::imports`]).
fn culprit(
    commits: &[CommitRef],
    good: &CommitRef,
    i: usize,
    steps: &[Step],
    imports: Result<(TargetDiff, PathBuf)>,
) -> Culprit {
    let at = commits[i].clone();
    let parent = if i == 0 { good } else { &commits[i - 1] };
    let change = steps
        .iter()
        .find(|s| s.at.commit == at.commit)
        .and_then(|s| s.change.clone());
    let (imports, imports_error) = match imports {
        Ok((r, tree)) => match (&r.imports, &r.error) {
            (Some(d), _) => (arrived(d, &tree), None),
            (None, Some(e)) => (Vec::new(), Some(e.message.clone())),
            (None, None) => (Vec::new(), Some("no import tree was recorded".to_owned())),
        },
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Culprit {
        at,
        parent: parent.commit.clone(),
        change,
        imports,
        imports_error,
    }
}

/// The start-up history a bisect reads for its hint: the runs stored in
/// `store` (its name, redacted) of the target in `environment` (the
/// fingerprint of the environment the steps run in).
#[derive(Debug)]
pub struct Stored {
    /// The store's name as the report gives it.
    pub store: String,
    /// The environment's fingerprint.
    pub environment: String,
    /// The stored runs (of any target and environment: those of others
    /// are left out here).
    pub runs: Vec<StoredRun>,
}

/// The index in `commits` of the commit the stored history points at,
/// with how many of the good commit and `commits` have a stored figure;
/// `None` without the good commit's figure or when no commit stands out.
///
/// The stored median CPU times, the good commit's first, are searched
/// for steps as `history show` finds them
/// ([`phases::changepoint::steps`]): the first step up to a level above
/// the good commit's by more than `threshold` is the commit pointed at.
/// Stored figures of a few trials each, taken on a loaded machine, can
/// cross the threshold a commit or two before a step (+11% and +14% of
/// CPU time before a +40% step, in one run at load 4): the step stands
/// out of that noise where a first crossing does not. Without such a step
/// (a slow drift, a short history), the first commit whose figure, and
/// the next stored commit's when there is one, is above the good
/// commit's by more than `threshold`: two in a row, so one noisy run does
/// not send the search astray.
pub fn suggest(
    stored: &Stored,
    target: &str,
    good: &CommitRef,
    commits: &[CommitRef],
    threshold: f64,
) -> (usize, Option<usize>) {
    let figures: std::collections::BTreeMap<&str, f64> = stored
        .runs
        .iter()
        .map(|r| &r.run)
        .filter(|r| r.target == target && r.environment.fingerprint() == stored.environment)
        .filter(|r| matches!(r.outcome, history::RunOutcome::Measured))
        .filter_map(|r| {
            let c = CommitRef {
                commit: r.commit.sha.clone(),
                subject: String::new(),
            };
            Some((r.commit.sha.as_str(), point(c, r).cpu_ms?))
        })
        .collect();
    let at: Vec<(usize, f64)> = commits
        .iter()
        .enumerate()
        .filter_map(|(i, c)| Some((i, *figures.get(c.commit.as_str())?)))
        .collect();
    let Some(base) = figures.get(good.commit.as_str()) else {
        return (at.len(), None);
    };
    let slow = |v: f64| v > base * (1.0 + threshold);
    let series: Vec<f64> = std::iter::once(*base)
        .chain(at.iter().map(|&(_, v)| v))
        .collect();
    let step = phases::changepoint::steps(&series, &phases::changepoint::ChangeRule::default())
        .into_iter()
        .find(|c| c.change > 0.0 && slow(c.after))
        // series[0] is the good commit's: the step's first value is at[index - 1].
        .and_then(|c| at.get(c.index.checked_sub(1)?))
        .map(|&(i, _)| i);
    let found = step.or_else(|| {
        (0..at.len())
            .find(|&k| slow(at[k].1) && at.get(k + 1).is_none_or(|n| slow(n.1)))
            .map(|k| at[k].0)
    });
    (at.len() + 1, found)
}

/// The whole search from `good` to `bad` in the repository at `top`
/// ([`search`] over [`commits_between`], each step answered by `m`),
/// then what arrived at the culprit. With `stored`, the commit the
/// start-up history suggests ([`fn@suggest`]) and the one before it are
/// compared first.
pub fn run(
    top: &Path,
    good: &CommitRef,
    bad: &CommitRef,
    threshold: f64,
    m: &mut dyn StepSource,
    stored: Option<&Stored>,
) -> Result<BisectReport> {
    let commits = commits_between(top, &good.commit, &bad.commit)?;
    if commits.last().is_none_or(|c| c.commit != bad.commit) {
        invalid!(
            "{} is not a descendant of {} along first parents; give a good commit that is an ancestor of the bad one",
            bad.short(),
            good.short()
        );
    }
    let mut report = BisectReport {
        target: m.target(),
        threshold,
        basis: phases::Measure::Cpu,
        good: good.clone(),
        bad: bad.clone(),
        outcome: Outcome::NotSlower,
        culprit: None,
        range: Vec::new(),
        steps: Vec::new(),
        error: None,
        history: None,
    };
    let mut hints = Vec::new();
    if let Some(stored) = stored {
        let (count, found) = suggest(stored, &report.target, good, &commits, threshold);
        if let Some(i) = found {
            hints = vec![i, i.saturating_sub(1)];
        }
        report.history = Some(Guide {
            store: stored.store.clone(),
            stored: count,
            suggested: found.map(|i| commits[i].clone()),
        });
    }
    let first = match m.step(Some(bad))? {
        Ok(s) => s,
        Err(e) => {
            report.outcome = Outcome::GoodFailed;
            report.error = Some(e);
            return Ok(report);
        }
    };
    let bad_slower = first.answer == Answer::Slower;
    report.steps.push(first);
    if !bad_slower {
        return Ok(report);
    }
    let mut good_failed = None;
    let found = search(commits.len(), &hints, |i| {
        if m.interrupted() {
            return Ok(None);
        }
        match m.step(Some(&commits[i]))? {
            Ok(s) => {
                let a = s.answer;
                report.steps.push(s);
                Ok(Some(a))
            }
            Err(e) => {
                good_failed = Some(e);
                Ok(None)
            }
        }
    })?;
    if let Some(e) = good_failed {
        report.outcome = Outcome::GoodFailed;
        report.error = Some(e);
        return Ok(report);
    }
    match found {
        Found::One(i) => {
            let parent = if i == 0 { good } else { &commits[i - 1] };
            let imports = m.imports(parent, &commits[i]);
            report.culprit = Some(culprit(&commits, good, i, &report.steps, imports));
            report.outcome = Outcome::Found;
        }
        Found::Range(ix) => {
            report.range = ix.into_iter().map(|i| commits[i].clone()).collect();
            report.outcome = Outcome::Range;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answers of a history whose first slow commit is `first`, with
    /// `unknown` commits answering `unknown_as`; the indices probed.
    fn bisect(n: usize, first: usize, unknown: &[usize], as_: Answer) -> (Found, Vec<usize>) {
        searched(n, &[], first, unknown, as_)
    }

    /// [`bisect`], trying `hints` first.
    fn searched(
        n: usize,
        hints: &[usize],
        first: usize,
        unknown: &[usize],
        as_: Answer,
    ) -> (Found, Vec<usize>) {
        let mut probed = Vec::new();
        let found = search(n, hints, |i| {
            probed.push(i);
            Ok(Some(if unknown.contains(&i) {
                as_
            } else if i >= first {
                Answer::Slower
            } else {
                Answer::NotSlower
            }))
        })
        .unwrap();
        (found, probed)
    }

    #[test]
    fn the_first_slow_commit_is_found_in_log_steps() {
        for n in 1..20 {
            for first in 0..n {
                let (found, probed) = bisect(n, first, &[], Answer::Skipped);
                assert_eq!(found, Found::One(first), "n {n} first {first}");
                let most = (n as f64).log2().ceil() as usize + 1;
                assert!(probed.len() <= most, "n {n}: {probed:?}");
                assert!(!probed.contains(&(n - 1)), "the bad commit is known");
            }
        }
    }

    #[test]
    fn a_skipped_commit_is_searched_around_and_leaves_a_range_only_when_it_must() {
        // The skipped commit is not next to the change: still one commit.
        let (found, probed) = bisect(12, 7, &[5], Answer::Skipped);
        assert_eq!(found, Found::One(7));
        assert!(probed.contains(&5), "{probed:?}");
        // The skipped commit is the first slow one: its neighbours bound it.
        let (found, _) = bisect(12, 7, &[7], Answer::Skipped);
        assert_eq!(found, Found::Range(vec![7, 8]));
        // An inconclusive one just before it: the range holds both ends.
        let (found, _) = bisect(12, 7, &[6], Answer::Inconclusive);
        assert_eq!(found, Found::Range(vec![6, 7]));
    }

    /// Answers from a table: commits from `first` on are slower, those in
    /// `broken` cannot start; the imports say `torch` arrived.
    struct Table {
        commits: Vec<String>,
        first: usize,
        broken: Vec<usize>,
        asked: Vec<String>,
    }

    impl StepSource for Table {
        fn target(&self) -> String {
            "w".to_owned()
        }

        fn step(&mut self, at: Option<&CommitRef>) -> Result<std::result::Result<Step, String>> {
            let at = at.expect("a search names its commits").clone();
            self.asked.push(at.commit.clone());
            let i = self.commits.iter().position(|c| *c == at.commit).unwrap();
            let answer = if self.broken.contains(&i) {
                Answer::Skipped
            } else if i >= self.first {
                Answer::Slower
            } else {
                Answer::NotSlower
            };
            Ok(Ok(Step {
                at,
                answer,
                change: None,
                rounds: 12,
                message: (answer == Answer::Skipped).then(|| "cannot start".to_owned()),
                run_dir: None,
            }))
        }

        fn imports(&mut self, _: &CommitRef, _: &CommitRef) -> Result<(TargetDiff, PathBuf)> {
            Err(Error::Invalid("no import trees in this table".to_owned()))
        }

        fn interrupted(&self) -> bool {
            false
        }
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        test_history::git(dir, args).unwrap()
    }

    /// A repository of `n` commits after the good one; their hashes.
    fn history(dir: &Path, n: usize) -> (CommitRef, Vec<CommitRef>) {
        git(dir, &["init", "-q", "-b", "main"]);
        let commit = |msg: &str| {
            std::fs::write(dir.join("f"), msg).unwrap();
            git(dir, &["add", "-A"]);
            git(dir, &["commit", "-q", "-m", msg]);
            commit_ref(dir, "HEAD").unwrap()
        };
        let good = commit("good");
        let after = (0..n).map(|i| commit(&format!("change {i}"))).collect();
        (good, after)
    }

    #[test]
    fn a_search_over_a_history_names_the_culprit_and_the_commit_it_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (good, after) = history(dir.path(), 10);
        let bad = after[9].clone();
        let mut table = Table {
            commits: after.iter().map(|c| c.commit.clone()).collect(),
            first: 6,
            broken: vec![4],
            asked: Vec::new(),
        };
        let r = run(dir.path(), &good, &bad, 0.1, &mut table, None).unwrap();
        assert_eq!(r.outcome, Outcome::Found);
        let c = r.culprit.as_ref().unwrap();
        assert_eq!(c.at.commit, after[6].commit);
        assert_eq!(c.at.subject, "change 6");
        assert_eq!(c.parent, after[5].commit);
        assert!(
            c.imports_error
                .as_deref()
                .unwrap()
                .contains("no import trees")
        );
        assert_eq!(
            table.asked[0], bad.commit,
            "the bad commit is confirmed first"
        );
        let skipped = r.skipped();
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].at.commit, after[4].commit);
        assert_eq!(answers::bisect::exit_code(&r), 0);

        // The skipped commit is the first slow one: a range, not a guess.
        table.first = 4;
        let r = run(dir.path(), &good, &bad, 0.1, &mut table, None).unwrap();
        assert_eq!(r.outcome, Outcome::Range);
        let range: Vec<&str> = r.range.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(range, ["change 4", "change 5"]);
        assert!(r.culprit.is_none());
        assert_eq!(answers::bisect::exit_code(&r), 1);

        // A bad commit that is not slower: nothing searched.
        table.first = 10;
        let r = run(dir.path(), &good, &bad, 0.1, &mut table, None).unwrap();
        assert_eq!((r.outcome, r.steps.len()), (Outcome::NotSlower, 1));
        assert_eq!(answers::bisect::exit_code(&r), 2);

        // Bad before good: said, not searched.
        let e = run(dir.path(), &bad, &good, 0.1, &mut table, None).unwrap_err();
        assert!(e.to_string().contains("is not a descendant of"), "{e}");
    }

    #[test]
    fn an_interrupted_search_ends_in_the_range_left() {
        let found = search(8, &[], |_| Ok(None)).unwrap();
        assert_eq!(found, Found::Range((0..8).collect()));
    }

    /// The search over `n` commits whose first slow one is `first`, tried
    /// first at `hint` and the commit before it.
    fn hinted(n: usize, first: usize, hint: usize) -> (Found, Vec<usize>) {
        searched(
            n,
            &[hint, hint.saturating_sub(1)],
            first,
            &[],
            Answer::Skipped,
        )
    }

    #[test]
    fn a_hint_right_ends_the_search_in_two_steps_and_a_wrong_one_costs_at_most_two() {
        for n in 2usize..24 {
            let most = (n as f64).log2().ceil() as usize + 3;
            for first in 0..n {
                let (found, probed) = hinted(n, first, first);
                assert_eq!(found, Found::One(first), "n {n} first {first}");
                assert!(probed.len() <= 2, "n {n} first {first}: {probed:?}");
                for wrong in (0..n).filter(|&w| w != first) {
                    let (found, probed) = hinted(n, first, wrong);
                    assert_eq!(found, Found::One(first), "n {n} first {first} hint {wrong}");
                    assert!(probed.len() <= most, "n {n} hint {wrong}: {probed:?}");
                }
            }
        }
    }

    #[test]
    fn a_step_in_the_stored_figures_is_pointed_at_before_an_early_noisy_crossing() {
        use crate::history::testruns::{env, run as stored_run};
        let dir = tempfile::tempdir().unwrap();
        let (good, after) = history(dir.path(), 15);
        // A whole run's stored CPU medians at load 4: commits 6 and 7
        // cross +10% (+11%, +14%) before the +40% step at 8.
        let ms = [
            142.9, 141.0, 152.4, 143.5, 142.8, 157.2, 161.4, 205.5, 196.0, 201.3, 198.7, 203.1,
            199.4, 200.8, 197.9,
        ];
        // The good commit at 141.5 ms, then `ms` for the 15 after it.
        let stored = |ms: &[f64]| {
            let at = |i: usize, sha: &str, ms: f64| {
                let mut r = stored_run(i, ms, false, env("A"));
                r.run.commit.sha = sha.to_owned();
                r
            };
            let runs = std::iter::once(at(0, &good.commit, 141.5))
                .chain(
                    after
                        .iter()
                        .zip(ms)
                        .enumerate()
                        .map(|(i, (c, &ms))| at(i + 1, &c.commit, ms)),
                )
                .collect();
            Stored {
                store: "history.db".to_owned(),
                environment: env("A").fingerprint(),
                runs,
            }
        };
        // after[7] is commit 8.
        assert_eq!(
            suggest(&stored(&ms), "worker", &good, &after, 0.1),
            (16, Some(7))
        );
        // Without a step (a drift of 3% a commit, +12% at 5), the
        // first two in a row.
        let drift: Vec<f64> = (0..15).map(|i| 141.5 * (1.0 + 0.03 * i as f64)).collect();
        assert_eq!(
            suggest(&stored(&drift), "worker", &good, &after, 0.1),
            (16, Some(4))
        );
    }

    #[test]
    fn the_stored_history_points_the_search_at_its_commit_first() {
        use crate::history::testruns::{env, run as stored_run};
        let dir = tempfile::tempdir().unwrap();
        let (good, after) = history(dir.path(), 12);
        let bad = after[11].clone();
        // Stored: the good commit and every other commit; the step at 7
        // (+40%), one noisy commit at 3 (+30%, alone: not two in a row),
        // and a run of another environment that would point at 1.
        let mut runs = vec![stored_run(0, 100.0, false, env("A"))];
        runs[0].run.commit.sha = good.commit.clone();
        for (i, c) in after
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == 1 || *i == 8)
        {
            let ms = match i {
                3 => 130.0,
                i if i >= 7 => 140.0,
                _ => 100.0,
            };
            let mut r = stored_run(i + 1, ms, false, env("A"));
            r.run.commit.sha = c.commit.clone();
            runs.push(r);
        }
        let mut other = stored_run(99, 300.0, false, env("B"));
        other.run.commit.sha = after[1].commit.clone();
        runs.push(other);
        let stored = Stored {
            store: "history.db".to_owned(),
            environment: env("A").fingerprint(),
            runs,
        };
        let (count, found) = suggest(&stored, "worker", &good, &after, 0.1);
        assert_eq!((count, found), (8, Some(7)));
        let mut table = Table {
            commits: after.iter().map(|c| c.commit.clone()).collect(),
            first: 7,
            broken: Vec::new(),
            asked: Vec::new(),
        };
        // The table's target is `w`: name the stored runs so.
        let stored = Stored {
            runs: stored
                .runs
                .into_iter()
                .map(|mut r| {
                    r.run.target = "w".to_owned();
                    r
                })
                .collect(),
            ..stored
        };
        let r = run(dir.path(), &good, &bad, 0.1, &mut table, Some(&stored)).unwrap();
        assert_eq!(r.outcome, Outcome::Found);
        assert_eq!(r.culprit.unwrap().at.commit, after[7].commit);
        assert_eq!(
            table.asked,
            [
                bad.commit.clone(),
                after[7].commit.clone(),
                after[6].commit.clone()
            ],
            "the bad commit, then the suggested commit and the one before it"
        );
        let guide = r.history.unwrap();
        assert_eq!(guide.suggested.unwrap().commit, after[7].commit);
        assert_eq!(guide.stored, 8);
    }
}
