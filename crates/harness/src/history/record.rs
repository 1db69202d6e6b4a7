//! `history record`: each commit of a range measured in its own checkout
//! and stored in the start-up history ([`history::Store`]).
//!
//! A commit is checked out into a temporary worktree ([`Worktree`],
//! removed on drop, after a SIGKILL by the next run) and prepared exactly
//! as `diff` prepares its base ([`outputs::prepare`]: the target's
//! `setup`, or the ignored build outputs carried and the project's
//! virtual environments linked), its import roots first on its path.
//! Then one instrumented process gives the import tree and proves the
//! worker ran that checkout's code ([`crate::provenance`]), and the
//! bench's fresh trials ([`crate::trials`]) give the raw figures. Each
//! run is stored as soon as it is measured, in one transaction, so an
//! interrupted or killed recording keeps every commit it finished, and
//! the next skips them: a run already stored for the same commit, target
//! and environment is never measured again.

use std::path::{Path, PathBuf};

use history::{Commit, Environment, ModuleTime, Run, RunKey, RunOutcome, Store};
use importguard::importtime::{ImportLog, NodeKind, stdlib, top_level};
use importguard::verdict::Policy;
use timeline::TrialRecord;

use crate::check::{Instrumented, instrumented_process, policy_of};
use crate::diff::git::{self, git_ok};
use crate::diff::{Worktree, imports, outputs};
use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::lifecycle::Lifecycle;
use crate::target::Target;
use crate::trials::{self, BenchOptions, Progress};

/// One shard of a range split over CI jobs: the `index`-th (1-based) of
/// `count`, taking every `count`-th commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// K, 1-based.
    pub index: usize,
    /// N.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `K/N` with 1 <= K <= N.
    fn from_str(s: &str) -> std::result::Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: write K/N with 1 <= K <= N, e.g. 2/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// This shard's commits of `all` (every N-th, from the K-th).
    pub fn pick(self, all: Vec<String>) -> Vec<String> {
        all.into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, c)| c)
            .collect()
    }
}

/// How each commit is measured.
#[derive(Debug, Clone)]
pub struct HistoryOptions {
    /// Measured trials per commit.
    pub trials: usize,
    /// Warm-up trials per commit, stored and marked as warm-ups.
    pub warmup: usize,
    /// The project root, for the tool's revision in each bench run.
    pub root: PathBuf,
}

/// What happened to one commit of one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Already stored for this environment: not measured again.
    Skipped,
    /// Measured and stored (its run says whether it ran).
    Stored(RunOutcome),
    /// The target does not exist at that commit: nothing stored.
    Absent,
}

/// What a recording shows as it goes (the command line's bar).
pub trait RecordProgress {
    /// Before commit `k` (1-based) of `n`, for `target`.
    fn commit(&mut self, k: usize, n: usize, commit: &str, target: &str);
    /// After it.
    fn recorded(&mut self, commit: &str, target: &str, what: &Recorded);
    /// The progress of the commit's trials.
    fn trials(&mut self) -> &mut dyn Progress;
}

/// The commits of `range`, oldest first: `A..B` (or any `git rev-list`
/// range) as rev-list gives it, a single revision alone, HEAD without one.
pub fn commits(top: &Path, range: Option<&str>) -> Result<Vec<String>> {
    let lines = |s: String| s.lines().map(str::to_owned).collect::<Vec<_>>();
    let Some(range) = range.filter(|r| r.contains("..") || r.starts_with('^')) else {
        let rev = format!("{}^{{commit}}", range.unwrap_or("HEAD"));
        return Ok(lines(git_ok(top, &["rev-parse", "--verify", &rev])?));
    };
    let all = lines(git_ok(top, &["rev-list", "--reverse", range])?);
    if all.is_empty() {
        invalid!("the range {range} holds no commit; name one like HEAD~3..HEAD");
    }
    Ok(all)
}

/// A commit's keys: its first parent, its committer time, and the branch
/// being recorded on (the checked-out one, when HEAD is on a branch).
pub fn commit_info(top: &Path, sha: &str) -> Result<Commit> {
    let text = git_ok(top, &["show", "-s", "--format=%H %ct %P", sha])?;
    let mut fields = text.split_whitespace();
    let sha = fields.next().unwrap_or(sha).to_owned();
    let time_unix_s = fields.next().and_then(|t| t.parse().ok()).unwrap_or(0);
    let parent = fields.next().map(str::to_owned);
    let branch = git_ok(top, &["rev-parse", "--abbrev-ref", "HEAD"])
        .ok()
        .map(|b| b.trim().to_owned())
        .filter(|b| b != "HEAD" && !b.is_empty());
    Ok(Commit {
        sha,
        parent,
        branch,
        time_unix_s,
    })
}

/// The environment `target` is measured in: its interpreter's build, its
/// installed distributions, the CPU, its limits. A command whose first
/// word is no interpreter that answers (a launcher) is keyed by that word.
pub fn environment(target: &Target) -> Environment {
    let program = target.command.first().map_or("", String::as_str);
    let info = crate::env::python_info(program, &target.env, &target.cwd);
    let interpreter = match (&info.implementation, &info.version, &info.executable) {
        (Some(i), Some(v), Some(exe)) => format!(
            "{i} {v} {} {exe}",
            if info.free_threaded == Some(true) {
                "free-threaded"
            } else {
                "GIL"
            }
        ),
        _ => format!("`{program}` (not asked: {})", info.note.unwrap_or_default()),
    };
    let packages = info
        .executable
        .as_deref()
        .and_then(|exe| {
            crate::env::installed_packages(Path::new(exe), &target.env, &target.cwd).ok()
        })
        .map_or_else(
            || "unknown".to_owned(),
            |p| history::content_hash(p.iter().map(String::as_str)),
        );
    Environment {
        interpreter,
        packages_hash: packages,
        cpu_model: crate::env::cpu_model().unwrap_or_else(|| "unknown".to_owned()),
        limits: target.limits.to_string(),
    }
}

/// Records `commits` of every one of `targets` (the working tree's, at
/// `top`) into `store`, skipping what it holds; stops after the commit in
/// progress when `interrupt` is set. Each commit's checkout is removed
/// before the next is made, and those of killed runs first.
pub fn record(
    store: &mut Store,
    top: &Path,
    targets: &[Target],
    commits: &[String],
    opts: &HistoryOptions,
    interrupt: &Interrupt,
    progress: &mut dyn RecordProgress,
) -> Result<Vec<(String, String, Recorded)>> {
    // A killed recording's checkout goes now, even when every commit is
    // stored and no checkout is made.
    git::remove_orphans();
    let envs: Vec<Environment> = targets.iter().map(environment).collect();
    let mut out = Vec::new();
    for (k, sha) in commits.iter().enumerate() {
        let mut tree: Option<Worktree> = None;
        for (t, env) in targets.iter().zip(&envs) {
            if interrupt.is_set() {
                return Ok(out);
            }
            progress.commit(k + 1, commits.len(), sha, &t.name);
            let key = RunKey {
                commit: sha.clone(),
                target: t.name.clone(),
                environment: env.fingerprint(),
            };
            let what = if store.contains(&key)? {
                Recorded::Skipped
            } else {
                let tree = match &tree {
                    Some(w) => w,
                    None => tree.insert(Worktree::add(top, sha)?),
                };
                let at = At {
                    top,
                    tree: tree.path(),
                    sha,
                };
                match measure(&at, t, env, opts, interrupt, progress)? {
                    None if interrupt.is_set() => return Ok(out),
                    None => Recorded::Absent,
                    Some(run) => {
                        // Existing: another shard's writer stored it first.
                        store.record(&run)?;
                        Recorded::Stored(run.outcome)
                    }
                }
            };
            progress.recorded(sha, &t.name, &what);
            out.push((sha.clone(), t.name.clone(), what));
        }
    }
    Ok(out)
}

/// A commit and its checkout.
struct At<'a> {
    /// The working tree's top.
    top: &'a Path,
    /// The commit's checkout.
    tree: &'a Path,
    /// The commit.
    sha: &'a str,
}

/// One commit of one target measured in its checkout: `None` when the
/// target does not exist there or the trials were interrupted.
fn measure(
    at: &At<'_>,
    head: &Target,
    env: &Environment,
    opts: &HistoryOptions,
    interrupt: &Interrupt,
    progress: &mut dyn RecordProgress,
) -> Result<Option<Run>> {
    let At { top, tree, sha } = *at;
    let target = head.moved(top, tree).own_roots_first();
    if !target.cwd.is_dir() {
        return Ok(None);
    }
    // A failure under an interrupt (a second Ctrl-C kills the worker) is
    // not the commit's: nothing is stored, and the next recording measures it.
    let failed = |message: String| (!interrupt.is_set()).then_some(RunOutcome::Failed { message });
    let mut run = Run {
        commit: commit_info(top, sha)?,
        target: head.name.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        environment: env.clone(),
        recorded_unix_ms: crate::env::unix_ms() as i64,
        outcome: RunOutcome::Measured,
        trials: Vec::new(),
        modules: Vec::new(),
    };
    let trees = crate::diff::Trees {
        top: top.to_path_buf(),
        paths: [tree.to_path_buf(), top.to_path_buf()],
        commits: [Some(sha.to_owned()), None],
    };
    match outputs::prepare(&target, head, &trees) {
        Ok(_) => {}
        Err(Error::Side { cause, .. }) => {
            let outcome = failed(format!("its checkout could not be prepared: {cause}"));
            return Ok(outcome.map(|o| Run { outcome: o, ..run }));
        }
        Err(other) => return Err(other),
    }
    match import_tree(&target, tree)? {
        Ok(modules) => run.modules = modules,
        Err(message) => return Ok(failed(message).map(|o| Run { outcome: o, ..run })),
    }
    match timed_trials(&target, opts, interrupt, progress.trials())? {
        Some(trials) => run.trials = trials,
        None => return Ok(None),
    }
    Ok(Some(run))
}

/// The start-up import tree of one instrumented process of `target` in
/// its checkout at `tree`, with the first-party line of each package and
/// own module; or why the commit cannot be measured (its worker did not
/// start, or it ran code from outside its checkout). A package whose
/// own modules were imported has no line of its own: theirs are kept.
fn import_tree(
    target: &Target,
    tree: &Path,
) -> Result<std::result::Result<Vec<ModuleTime>, String>> {
    let p = instrumented_process(
        target,
        &Lifecycle::of(target),
        &policy_of(target)?,
        false,
        1,
    )?;
    if let Some(e) = &p.report.error {
        return Ok(Err(format!("its worker could not be run: {e}")));
    }
    let processes = std::slice::from_ref(&p);
    if let Some(f) = imports::foreign(processes, &[target], target, tree) {
        return Ok(Err(format!("it ran code from outside its checkout: {f}")));
    }
    let own = imports::own_names(&[target]);
    let mut modules = modules_of(&p, &own);
    let mut wanted: Vec<String> = modules
        .iter()
        .filter(|m| m.first_party || !m.module.contains('.'))
        .filter(|m| !stdlib::is_stdlib(&m.module))
        .map(|m| m.module.clone())
        .collect();
    // A name covers its submodules in the policy: a package whose own
    // modules are asked for is left out, or its line would stand for theirs.
    let asked = wanted.clone();
    wanted.retain(|w| !asked.iter().any(|o| o.starts_with(&format!("{w}."))));
    // The lines, when the policy takes the names (it refuses none that
    // the importtime log holds, but a refusal only costs the lines).
    if Policy::new(wanted.clone(), Vec::new()).is_ok() {
        let lines = imports::importing_lines(target, &wanted);
        // Relative to the checkout, which is gone once the run is stored.
        for m in &mut modules {
            m.imported_at = imports::line_of(&lines, &m.module).map(|mut c| {
                if let Ok(rel) = Path::new(&c.file).strip_prefix(tree) {
                    c.file = rel.display().to_string();
                }
                c
            });
        }
    }
    Ok(Ok(modules))
}

/// Every module the importtime log timed, in import order, once each.
fn modules_of(p: &Instrumented, own: &std::collections::BTreeSet<String>) -> Vec<ModuleTime> {
    p.report
        .log
        .as_ref()
        .map_or_else(Vec::new, |log| modules_in(log, own))
}

/// Every module `log` timed, in import order, once each; first-party when
/// its top-level name is one of `own`.
fn modules_in(log: &ImportLog, own: &std::collections::BTreeSet<String>) -> Vec<ModuleTime> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (i, n) in log.nodes().iter().enumerate() {
        if n.kind != NodeKind::Entry {
            continue;
        }
        let name = log.name(importguard::importtime::NodeId(i as u32));
        if !seen.insert(name.to_owned()) {
            continue;
        }
        out.push(ModuleTime {
            module: name.to_owned(),
            cumulative_us: n.cumulative_us.max(0) as u64,
            self_us: n.self_us.max(0) as u64,
            first_party: own.contains(top_level(name)),
            imported_at: None,
        });
    }
    out
}

/// The bench's fresh trials of `target`, or `None` when interrupted.
fn timed_trials(
    target: &Target,
    opts: &HistoryOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Option<Vec<TrialRecord>>> {
    let dir = tempfile::Builder::new()
        .prefix("coldstart-history-")
        .tempdir()
        .map_err(|e| Error::io("create", &std::env::temp_dir(), e))?;
    let bench = BenchOptions {
        warmup: opts.warmup,
        trials: Some(opts.trials),
        sequential: None,
        ..BenchOptions::sequential(
            phases::sequential::StopRule::default(),
            opts.warmup,
            phases::stats::Resampling::default(),
            dir.path().to_path_buf(),
            opts.root.clone(),
        )
    };
    let run = trials::run(target.clone(), None, &bench, interrupt, progress)?;
    Ok((!run.interrupted()).then_some(run.records))
}

/// The current commit's run of `target` from trials already measured in
/// the working tree at `top` (`bench --record`: no extra trial, no import
/// tree; [`check_run`] gives the tree); refused when the tree has uncommitted changes, whose figures
/// are not the commit's.
pub fn current_run(top: &Path, target: &Target, trials: Vec<TrialRecord>) -> Result<Run> {
    if dirty(top)? {
        invalid!(
            "--record: the working tree at {} has uncommitted changes to tracked files, so what was measured is not the current commit's; commit them (or stash them) and run again, or drop --record",
            top.display()
        );
    }
    let sha = git_ok(top, &["rev-parse", "HEAD"])?;
    Ok(Run {
        commit: commit_info(top, sha.trim())?,
        target: target.name.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        environment: environment(target),
        recorded_unix_ms: crate::env::unix_ms() as i64,
        outcome: RunOutcome::Measured,
        trials,
        modules: Vec::new(),
    })
}

/// The current commit's run of `target` from what `check` found in the
/// working tree at `top` (`check --record`: no extra process): the import
/// tree of its first process with a log, the forbidden modules at the
/// first-party line that imported them (the only lines a check traces;
/// `history record` finds every package's), and no trial, since a
/// checked process runs under the recorder and its times are not a plain
/// start-up's. `None` when the check kept no log (its worker did not get
/// that far). Refused when the tree has uncommitted changes.
pub fn check_run(
    top: &Path,
    target: &Target,
    report: &answers::check::TargetReport,
) -> Result<Option<Run>> {
    let Some(log) = report.processes.iter().find_map(|p| p.log.as_ref()) else {
        return Ok(None);
    };
    let mut run = current_run(top, target, Vec::new())?;
    run.modules = modules_in(log, &imports::own_names(&[target]));
    for m in &mut run.modules {
        m.imported_at = report
            .violations
            .iter()
            .find(|v| v.first.module == m.module)
            .and_then(|v| v.first.origin.clone())
            .map(|mut c| {
                if let Ok(rel) = Path::new(&c.file).strip_prefix(top) {
                    c.file = rel.display().to_string();
                }
                c
            });
    }
    Ok(Some(run))
}

/// The runs a diff measured, for `diff --record`: each target's timed
/// rounds split by side, side A's stored as the base commit's run and
/// side B's as HEAD's (no import tree: the diff keeps its import trees as
/// a comparison, not as two trees). Side B is left out when the working
/// tree had uncommitted changes (its figures are not HEAD's), each with
/// why in the second list.
pub fn diff_runs(
    top: &Path,
    report: &answers::diff::DiffReport,
    targets: &[Target],
) -> Result<(Vec<Run>, Vec<String>)> {
    let head = git_ok(top, &["rev-parse", "HEAD"])?.trim().to_owned();
    let (mut runs, mut left) = (Vec::new(), Vec::new());
    for d in &report.targets {
        let (Some(time), Some(target)) = (&d.time, targets.iter().find(|t| t.name == d.name))
        else {
            left.push(format!("{}: no timed rounds to store", d.name));
            continue;
        };
        let saved = trials::load_run(&time.run_dir)?;
        let env = environment(target);
        for (variant, sha) in [
            (timeline::Variant::A, &report.base.commit),
            (timeline::Variant::B, &head),
        ] {
            if variant == timeline::Variant::B && report.base.dirty {
                left.push(format!(
                    "{}: side B not stored: the working tree had uncommitted changes, so its figures are not HEAD's",
                    d.name
                ));
                continue;
            }
            runs.push(Run {
                commit: commit_info(top, sha)?,
                target: target.name.clone(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                environment: env.clone(),
                recorded_unix_ms: crate::env::unix_ms() as i64,
                outcome: RunOutcome::Measured,
                trials: saved
                    .records
                    .iter()
                    .filter(|r| r.variant == variant)
                    .cloned()
                    .collect(),
                modules: Vec::new(),
            });
        }
    }
    Ok((runs, left))
}

/// Whether the working tree at `top` has uncommitted changes to tracked
/// files (which a recording, measuring commits in their own checkouts,
/// leaves out). Untracked files do not count: coldstart's own outputs
/// (`bench-out/`, `.coldstart/history.db`) are among them.
pub fn dirty(top: &Path) -> Result<bool> {
    let status = git_ok(top, &["status", "--porcelain", "--untracked-files=no"])?;
    Ok(!status.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn a_shard_takes_every_nth_commit_from_the_kth_and_the_shards_cover_the_range_once() {
        let all: Vec<String> = (1..=7).map(|i| format!("c{i}")).collect();
        let s = |t: &str| t.parse::<Shard>();
        assert_eq!(s("2/3").unwrap().pick(all.clone()), ["c2", "c5"]);
        let mut covered: Vec<String> = (1..=3)
            .flat_map(|k| Shard { index: k, count: 3 }.pick(all.clone()))
            .collect();
        covered.sort();
        assert_eq!(covered, all);
        for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
            let err = s(bad).unwrap_err();
            assert!(err.contains("K/N"), "{bad}: {err}");
        }
    }
}
