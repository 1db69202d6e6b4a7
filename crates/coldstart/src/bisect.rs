//! `coldstart bisect GOOD BAD`: the first commit whose start-up is slower
//! than GOOD's by more than `--threshold`, each step an interleaved
//! comparison against GOOD (`harness::bisect`). Exit codes: 0 the culprit
//! found; 1 the search ended in a range (skipped or inconclusive steps);
//! 2 nothing to search (BAD not shown slower), GOOD could not be run, or
//! the tool could not do its job; 128 + the signal when interrupted.
//!
//! `coldstart bisect --run GOOD`, as the script of `git bisect run`:
//! compares the checked-out working tree with GOOD once and exits 0 (not
//! slower), 1 (slower), 125 (cannot start, or inconclusive: skip), or 128
//! when the tool cannot do its job (git stops the bisection).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use harness::OnPress;
use harness::bisect::{Measured, StepSource, commit_ref};
use harness::diff::{DiffOptions, Worktree, git};
use phases::sequential::Question;

use crate::args::{TextOrJson, TextOrJsonArgs};
use crate::progress::Bar;
use settings::Project;

/// The bisect's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A commit whose start-up is good: the one every step compares with.
    good: String,
    /// A later commit whose start-up is slower (not with `--run`).
    #[arg(required_unless_present = "run")]
    bad: Option<String>,
    /// Slower means slower than GOOD by more than this share (0.1 or 10%).
    #[arg(long, value_parser = crate::args::parse_share, default_value = "10%")]
    threshold: f64,
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// The most interleaved rounds of one step before it is inconclusive.
    #[arg(long, value_name = "N")]
    max_rounds: Option<usize>,
    /// The most seconds of rounds of one step before it is inconclusive.
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
    /// Untimed instrumented processes per side for the culprit's imports.
    #[arg(long, value_name = "N", default_value_t = harness::diff::DEFAULT_INSTRUMENTED,
          value_parser = crate::args::at_least_one)]
    instrumented: usize,
    /// Where each step's bench run goes [default: a new folder under the
    /// system's temporary folder].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Answer as a `git bisect run` script: the checked-out working tree
    /// against GOOD, exit 0 good, 1 bad, 125 skip.
    #[arg(long)]
    run: bool,
    /// How the report is printed.
    #[command(flatten)]
    format: TextOrJsonArgs,
    /// The start-up history read for a hint: the commit its stored
    /// figures point at is compared first (every step is still measured).
    #[command(flatten)]
    store: crate::args::HistoryArgs,
    /// Do not read the start-up history: halve the range from the start.
    #[arg(long, conflicts_with = "history")]
    no_history: bool,
}

/// The stored runs of `target` that `args` name, for the search's hint:
/// `None` with `--no-history`, or when no store exists at the default
/// place (one is never made here). A store that cannot be read is said
/// on stderr and the search goes on without it: a hint is never worth
/// failing for.
fn stored(
    args: &Args,
    project: &Project,
    target: &harness::Target,
) -> Option<harness::bisect::Stored> {
    if args.no_history {
        return None;
    }
    let location = args.store.location(project);
    if let history::Location::Sqlite(path) = &location
        && args.store.history.is_none()
        && !path.exists()
    {
        return None;
    }
    let read = || -> Result<Vec<history::StoredRun>> {
        let mut store = history::Store::open(&location)?;
        Ok(store.runs(&history::RunFilter {
            target: Some(target.name.clone()),
            ..Default::default()
        })?)
    };
    match read() {
        Ok(runs) => Some(harness::bisect::Stored {
            store: location.to_string(),
            environment: harness::history::environment(target).fingerprint(),
            runs,
        }),
        Err(e) => {
            eprintln!(
                "the start-up history at {location} could not be read, so the search halves the range from the start: {e:#}"
            );
            None
        }
    }
}

/// Runs the bisect (or, with `--run`, one step of `git bisect run`).
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    if !args.run {
        return search(args, project);
    }
    match step(&args, project) {
        Ok(code) => Ok(code),
        Err(e) => {
            // Any code from 1 to 127 but 125 would mark the commit bad.
            eprintln!("error: {e:#}\nstopping the bisection (exit 128)");
            Ok(ExitCode::from(128))
        }
    }
}

/// The good commit checked out, and the steps' measurer around it.
fn measured<'a>(
    args: &Args,
    top: &std::path::Path,
    plan: &'a harness::diff::DiffTargets<'a>,
    interrupt: &'a harness::Interrupt,
    bar: &'a mut Bar,
) -> Result<Measured<'a>> {
    let good = git::resolve(top, Some(&args.good))?.commit;
    Ok(Measured {
        top: top.to_path_buf(),
        good: Worktree::add(top, &good)?,
        good_commit: good,
        plan,
        opts: DiffOptions {
            instrumented: args.instrumented,
            out: crate::outputs::run_folder(args.out.as_deref(), "bisect")?,
            question: Question::Slower,
            ..DiffOptions::with_budgets(args.max_rounds, args.max_seconds)
        },
        interrupt,
        progress: bar,
    })
}

/// The whole search.
fn search(args: Args, project: &Project) -> Result<ExitCode> {
    let top = git::toplevel(&project.root)?;
    let bad = args
        .bad
        .as_deref()
        .expect("clap requires BAD without --run");
    let (good, bad) = (
        commit_ref(&top, &git::resolve(&top, Some(&args.good))?.commit)?,
        commit_ref(&top, &git::resolve(&top, Some(bad))?.commit)?,
    );
    let target = args.target.one_target(project)?;
    let stored = stored(&args, project, &target);
    let plan = crate::args::plan(
        project,
        vec![target],
        Some(args.threshold),
        &settings::target_names,
    );
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let bar = &mut Bar(indicatif::ProgressBar::hidden());
    let mut m = measured(&args, &top, &plan, &interrupt, bar)?;
    let report = harness::bisect::run(&top, &good, &bad, args.threshold, &mut m, stored.as_ref())?;
    drop(m);
    print!(
        "{}",
        match args.format.format() {
            TextOrJson::Text => report::bisect::text(&report),
            TextOrJson::Json => report::bisect::json(&report),
        }
    );
    if interrupt.is_set() {
        return Ok(crate::signals::interrupted_code(&interrupt));
    }
    Ok(ExitCode::from(answers::bisect::exit_code(&report)))
}

/// One `git bisect run` step: the working tree against GOOD.
fn step(args: &Args, project: &Project) -> Result<ExitCode> {
    let top = git::toplevel(&project.root)?;
    let target = vec![args.target.one_target(project)?];
    let plan = crate::args::plan(
        project,
        target,
        Some(args.threshold),
        &settings::target_names,
    );
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let bar = &mut Bar(indicatif::ProgressBar::hidden());
    let mut m = measured(args, &top, &plan, &interrupt, bar)?;
    let step = match m.step(None)? {
        Ok(s) => s,
        Err(e) => bail!("the good commit {} could not be run: {e}", args.good),
    };
    eprintln!("{}", report::bisect::step_line(&step));
    Ok(ExitCode::from(answers::bisect::run_code(&step)))
}
