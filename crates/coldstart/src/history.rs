//! `coldstart history record [REV_RANGE]`: each commit of the range
//! measured in its own checkout and stored in the start-up history
//! (`harness::history`); commits already stored for this environment are
//! skipped, so an interrupted recording resumes. A progress bar on a
//! terminal (commit k of n, the trials, the time left), a line per commit
//! elsewhere. Exit codes: 0 every commit stored or skipped (a commit that
//! could not be measured is stored as failed, and said); 2 the tool could
//! not do its job; 128 + the signal when interrupted.
//!
//! `coldstart history show [REV_RANGE]`: each target's series read back,
//! its change points and drifts, each re-measured
//! (`harness::history::show`), in text, Markdown, JSON or one HTML page.
//! Exit codes: 0 the report was made (whatever it found); 2 the tool
//! could not do its job; 128 + the signal when interrupted.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use harness::OnPress;
use harness::diff::DiffOptions;
use harness::diff::git;
use harness::history::show::{self, Confirm};
use harness::history::{self as record, HistoryOptions, Recorded, Shard};
use history::{RunOutcome, Store};
use phases::changepoint::ChangeRule;
use settings::Project;

/// `coldstart history`'s subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum HistoryCommand {
    /// Measure each commit of a range in its own checkout and store it
    /// (commits already stored for this environment are skipped).
    Record(HistoryRecordArgs),
    /// Per target, the trend of start-up over the stored commits, its
    /// changes (each confirmed by re-measuring its two commits) and
    /// drifts, and what the import trees say changed.
    Show(HistoryShowArgs),
}

/// How `history show`'s report is printed or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShowFormat {
    /// For people.
    Text,
    /// For a pull request or a job summary.
    Markdown,
    /// `coldstart.history/1`.
    Json,
    /// One self-contained page (only with `--output html=PATH`).
    Html,
}

/// `coldstart history show`'s flags.
#[derive(Debug, clap::Args)]
pub struct HistoryShowArgs {
    /// The commits read: a `git log` range along the first parents
    /// [default: HEAD's whole first-parent history].
    range: Option<String>,
    /// Which worker: `--target NAME` or `-- CMD...` [default: every target].
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// Where the runs are stored.
    #[command(flatten)]
    store: crate::args::HistoryArgs,
    /// The smallest change reported, and the noise band a re-measurement
    /// judges it against (0.05 or 5%).
    #[arg(long, value_name = "SHARE", value_parser = crate::args::parse_share, default_value = "5%")]
    min_change: f64,
    /// Do not re-measure: every change the series shows stays a candidate.
    #[arg(long)]
    no_confirm: bool,
    /// The most interleaved rounds of one re-measurement.
    #[arg(long, value_name = "N")]
    max_rounds: Option<usize>,
    /// The most seconds of rounds of one re-measurement.
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
    /// Where each re-measurement's bench run goes [default: a new folder
    /// under the system's temporary folder].
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// How the report is printed.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    format: ShowFormat,
    /// Also write the report as FORMAT to PATH (repeatable), e.g.
    /// `--output html=history.html --output json=history.json`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = crate::outputs::parse::<ShowFormat>)]
    output: Vec<crate::outputs::Output<ShowFormat>>,
}

/// `coldstart history record`'s flags.
#[derive(Debug, clap::Args)]
pub struct HistoryRecordArgs {
    /// The commits: a `git rev-list` range (`main~5..main`, oldest first)
    /// or one revision [default: the current commit].
    range: Option<String>,
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// Where the runs are stored.
    #[command(flatten)]
    store: crate::args::HistoryArgs,
    /// Only this shard of the range, for CI jobs sharing it: K/N takes
    /// every N-th commit from the K-th.
    #[arg(long, value_name = "K/N")]
    shard: Option<Shard>,
    /// Measured trials per commit.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = crate::args::at_least_one)]
    trials: usize,
    /// Warm-up trials per commit (stored, marked as warm-ups).
    #[arg(long, value_name = "N", default_value_t = 1)]
    warmup: usize,
}

/// Runs a `history` subcommand.
pub fn run(command: HistoryCommand, project: &Project) -> Result<ExitCode> {
    match command {
        HistoryCommand::Record(args) => record_range(args, project),
        HistoryCommand::Show(args) => show(args, project),
    }
}

fn show(args: HistoryShowArgs, project: &Project) -> Result<ExitCode> {
    if args.format == ShowFormat::Html {
        bail!("--format html would print a page on the terminal; write it with --output html=PATH");
    }
    let top = git::toplevel(&project.root)?;
    let plans = plans(&args, project)?;
    let location = args.store.location(project);
    let mut store =
        Store::open(&location).with_context(|| "could not open the start-up history")?;
    let rule = ChangeRule {
        min_magnitude: args.min_change,
        ..ChangeRule::default()
    };
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let bar = &mut crate::progress::Bar(indicatif::ProgressBar::hidden());
    let confirm = confirming(&args, &interrupt, bar)?;
    let report = show::run(
        &mut store,
        &top,
        args.range.as_deref(),
        &plans,
        &rule,
        confirm,
    )?;
    let render = |f| render_show(f, &report);
    print!("{}", render(args.format));
    crate::outputs::write_all(&args.output, |f| Ok(render(f)))?;
    if interrupt.is_set() {
        return Ok(crate::signals::interrupted(
            &interrupt,
            ": the changes it had not re-measured are reported as not re-measured",
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The targets `show` reads, one plan each: each is read and confirmed on
/// its own, its budgets the config's with `--min-change` as the slowdown.
fn plans<'a>(
    args: &HistoryShowArgs,
    project: &Project,
) -> Result<Vec<harness::diff::DiffTargets<'a>>> {
    Ok(args
        .target
        .targets(project)?
        .into_iter()
        .map(|t| {
            crate::args::plan(
                project,
                vec![t],
                Some(args.min_change),
                &settings::target_names,
            )
        })
        .collect())
}

/// How `show` re-measures each change it finds: none with `--no-confirm`.
fn confirming<'a>(
    args: &HistoryShowArgs,
    interrupt: &'a harness::Interrupt,
    progress: &'a mut crate::progress::Bar,
) -> Result<Option<Confirm<'a>>> {
    if args.no_confirm {
        return Ok(None);
    }
    Ok(Some(Confirm {
        opts: DiffOptions {
            out: crate::outputs::run_folder(args.out.as_deref(), "history")?,
            ..DiffOptions::with_budgets(args.max_rounds, args.max_seconds)
        },
        interrupt,
        progress,
    }))
}

/// `history show`'s report in `format`.
fn render_show(format: ShowFormat, shown: &answers::history::HistoryReport) -> String {
    match format {
        ShowFormat::Text => report::history::text(shown),
        ShowFormat::Markdown => report::history::markdown(shown),
        ShowFormat::Json => report::history::json(shown),
        ShowFormat::Html => report::history::html(shown),
    }
}

fn record_range(args: HistoryRecordArgs, project: &Project) -> Result<ExitCode> {
    let targets = args.target.targets(project)?;
    let top = git::toplevel(&project.root)?;
    let mut commits = record::commits(&top, args.range.as_deref())?;
    if let Some(shard) = args.shard {
        commits = shard.pick(commits);
    }
    if args.range.is_none() && record::dirty(&top)? {
        eprintln!(
            "note: the working tree has uncommitted changes; they are not recorded (each commit is measured from its own checkout)"
        );
    }
    let location = args.store.location(project);
    let mut store =
        Store::open(&location).with_context(|| "could not open the start-up history")?;
    eprintln!(
        "recording {} commit(s) of {} target(s) into {location}",
        commits.len(),
        targets.len()
    );
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let opts = HistoryOptions {
        trials: args.trials,
        warmup: args.warmup,
        root: project.root.clone(),
    };
    let mut bar = crate::progress::CommitBar::new((commits.len() * targets.len()) as u64);
    let done = record::record(
        &mut store, &top, &targets, &commits, &opts, &interrupt, &mut bar,
    )?;
    bar.0.finish_and_clear();
    print_recorded(&done);
    if interrupt.is_set() {
        return Ok(crate::signals::interrupted(
            &interrupt,
            ": every commit finished before it is stored; run the same command again to go on",
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// What `history record` did, in one line.
fn print_recorded<A, B>(done: &[(A, B, Recorded)]) {
    let count = |f: fn(&Recorded) -> bool| done.iter().filter(|(_, _, r)| f(r)).count();
    println!(
        "{} stored ({} could not be measured), {} already stored, {} absent at their commit",
        count(|r| matches!(r, Recorded::Stored(_))),
        count(|r| matches!(r, Recorded::Stored(RunOutcome::Failed { .. }))),
        count(|r| matches!(r, Recorded::Skipped)),
        count(|r| matches!(r, Recorded::Absent)),
    );
}

/// `--record`: `runs` stored in the history `store` names, a line each
/// on stderr saying whether it was stored or kept as it was.
pub(crate) fn store_runs(
    store: &crate::args::HistoryArgs,
    project: &Project,
    runs: &[history::Run],
) -> Result<()> {
    let location = store.location(project);
    let mut store =
        Store::open(&location).with_context(|| "--record: could not open the start-up history")?;
    for run in runs {
        let what = match store.record(run)? {
            history::Written::Stored(_) => "recorded",
            history::Written::Existing(_) => "already recorded (kept as it was)",
            history::Written::Completed(_) => "added to the run already recorded, which lacked it",
        };
        let commit = &run.commit.sha;
        eprintln!(
            "{} at {}: {what} in {location}",
            run.target,
            &commit[..12.min(commit.len())]
        );
    }
    Ok(())
}
