//! `coldstart diff [REV]`: the worker at a git revision (A, checked out
//! into a temporary worktree) against the worker in the working tree (B),
//! for every target: the bench's interleaved rounds with CPU time as the
//! basis, and the start-up import trees of both sides. Exit codes: 0 pass
//! (faster, equivalent, within `max_slowdown`, or inconclusive without
//! `--strict`); 1 slower beyond `max_slowdown`, a new forbidden module, a
//! budget exceeded; 2 a side could not be run or the tool could not do its
//! job; 128 + the signal when interrupted (130 for Ctrl-C).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use harness::OnPress;
use harness::diff::{self, DiffOptions, Head, git};

use crate::progress::Bar;
use settings::Project;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// A pull-request comment: the verdict line, a table per target, the
    /// details folded.
    Markdown,
    /// The machine-readable report (schema `coldstart.diff/1`).
    Json,
    /// GitHub Actions workflow commands: an error at the line that brought
    /// in the costliest new package, a notice with the verdict.
    Github,
    /// JUnit XML: one test case per target.
    Junit,
}

/// The diff's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The git revision to compare with (e.g. `origin/main`) [default: the
    /// merge base of HEAD with its upstream branch, else HEAD].
    rev: Option<String>,
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// How the report is printed.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write the same run's report in FORMAT to PATH (repeatable),
    /// e.g. `--format github --output markdown=summary.md --output
    /// junit=diff.xml`: one measurement, several renderings.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = crate::outputs::parse::<Format>)]
    output: Vec<crate::outputs::Output<Format>>,
    /// Fail (exit 1) when the comparison stays inconclusive.
    #[arg(long)]
    strict: bool,
    /// Allowed slowdown for every target (0.05 or 5%), instead of each
    /// target's `max_slowdown` [default: 5%].
    #[arg(long, value_parser = crate::args::parse_share)]
    max_slowdown: Option<f64>,
    /// The most interleaved rounds before the run stops undecided.
    #[arg(long, value_name = "N")]
    max_rounds: Option<usize>,
    /// The most seconds of rounds before the run stops undecided.
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
    /// Untimed instrumented processes per side for the import trees.
    #[arg(long, value_name = "N", default_value_t = diff::DEFAULT_INSTRUMENTED,
          value_parser = crate::args::at_least_one)]
    instrumented: usize,
    /// Where each target's bench run goes [default: a new folder under the
    /// system's temporary folder, kept and named in the report].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also store each side's timed rounds in the start-up history: the
    /// base's as its commit's run, the working tree's as HEAD's when it
    /// has no uncommitted change.
    #[command(flatten)]
    record: crate::args::RecordFlagArgs,
}

/// Runs the diff.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let top = git::toplevel(&project.root)?;
    let base = git::resolve(&top, args.rev.as_deref())?;
    let opts = DiffOptions {
        instrumented: args.instrumented,
        out: crate::outputs::run_folder(args.out.as_deref(), "diff")?,
        root: project.root.clone(),
        ..DiffOptions::with_budgets(args.max_rounds, args.max_seconds)
    };
    let targets = args.target.targets(project)?;
    let plan = crate::args::plan(project, targets, args.max_slowdown, &settings::target_names);
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let bar = &mut Bar(indicatif::ProgressBar::hidden());
    let report = diff::run(
        &top,
        base,
        &Head::WorkingTree,
        &plan,
        &opts,
        &interrupt,
        bar,
    )?;
    let render = |format| render(format, &report, project, &top, args.strict);
    print!("{}", render(args.format));
    crate::outputs::write_all(&args.output, |f| Ok(render(f)))?;
    if interrupt.is_set() {
        return Ok(crate::signals::interrupted(
            &interrupt,
            ": the report covers what was compared so far; the base's checkout is removed",
        ));
    }
    if args.record.record {
        record(&args.record, project, &plan, &report)?;
    }
    Ok(ExitCode::from(answers::diff::exit_code(
        &report,
        args.strict,
    )))
}

/// The report in `format`; paths relative to the current folder in text,
/// to the repository's top in Markdown and GitHub's annotations.
fn render(
    format: Format,
    diff: &answers::diff::DiffReport,
    project: &Project,
    top: &std::path::Path,
    strict: bool,
) -> String {
    match format {
        Format::Text => report::diff::text(diff, &project.cwd, strict),
        Format::Markdown => report::diff::markdown(diff, top, strict),
        Format::Json => report::diff::json(diff, strict),
        Format::Github => report::diff::github(diff, top, strict),
        Format::Junit => report::diff::junit(diff, strict),
    }
}

/// `--record`: each side's timed rounds stored as its commit's run.
fn record(
    args: &crate::args::RecordFlagArgs,
    project: &Project,
    plan: &harness::diff::DiffTargets<'_>,
    report: &answers::diff::DiffReport,
) -> Result<()> {
    let top = git::toplevel(&project.root)?;
    let targets: Vec<_> = plan.targets.iter().map(|(t, _)| t.clone()).collect();
    let (runs, left) = harness::history::diff_runs(&top, report, &targets)?;
    for l in left {
        eprintln!("--record: {l}");
    }
    crate::history::store_runs(&args.store, project, &runs)
}
