//! `coldstart check`: the import-boundary check of every target (its old
//! name `import-boundary` stays as a hidden alias, so scripts written for it
//! keep working), printed as text or JSON. (What the check costs is the
//! workspace's `cargo xtask check-cost`, not a user's flag.) Exit codes: 0 every target holds; 1 a violation; 2
//! a worker could not be checked (crash, timeout, protocol error) or the
//! tool could not do its job; 128 + the signal when SIGINT (130), SIGTERM
//! (143) or SIGHUP (129) cut it short.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use answers::check::JsonReport;
use anyhow::{Result, bail};
use harness::check::{self, CheckOptions};
use harness::check_run::{CheckRun, Checked, RunOptions};
use harness::snapshot::Drift;
use harness::{Interrupt, OnPress};
use report::check::ci;

use settings::Project;

/// How the check's report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people, paths relative to the project root.
    Text,
    /// The machine-readable report.
    Json,
    /// GitHub Actions workflow commands: an error at the first-party line
    /// that started each violation, a notice at each link of its chain.
    Github,
    /// JUnit XML: one test case per target and forbidden pattern.
    Junit,
}

/// A rendering that `--output FORMAT=PATH` writes: one of the report's
/// formats, or the check on one timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The report for people.
    Text,
    /// The machine-readable report.
    Json,
    /// GitHub Actions workflow commands.
    Github,
    /// JUnit XML.
    Junit,
    /// The check on one timeline, Perfetto's protobuf trace: coldstart's
    /// track with each target's check, each process's phases and start-up
    /// imports (forbidden ones in their own category), the protocol's
    /// messages as flows.
    Perfetto,
    /// The same as Chrome's Trace Event JSON (chrome://tracing, speedscope).
    ChromeJson,
}

impl OutputFormat {
    /// The report's format, `None` for a trace.
    fn report(self) -> Option<Format> {
        match self {
            OutputFormat::Text => Some(Format::Text),
            OutputFormat::Json => Some(Format::Json),
            OutputFormat::Github => Some(Format::Github),
            OutputFormat::Junit => Some(Format::Junit),
            OutputFormat::Perfetto | OutputFormat::ChromeJson => None,
        }
    }
}

/// The check's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// Forbidden package prefixes, comma separated (replaces the target's;
    /// default torch,transformers,stanza).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    forbid: Vec<String>,
    /// Check `import PKG` alone, in a fresh interpreter (`--python`).
    #[arg(long, value_name = "PKG", conflicts_with_all = ["log", "target"])]
    module: Option<String>,
    /// The interpreter for `--module`.
    #[arg(
        long,
        value_name = "EXE",
        default_value = "python3",
        requires = "module"
    )]
    python: String,
    /// Judge a recorded importtime log (stderr of `python -X importtime`);
    /// runs nothing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "block"])]
    log: Option<PathBuf>,
    /// Make forbidden imports fail with an ImportError that names the policy.
    #[arg(long)]
    block: bool,
    /// How long a worker may take (each replaces the target's).
    #[command(flatten)]
    timeouts: crate::args::TimeoutArgs,
    /// Fresh processes per target, run concurrently [default: the
    /// target's, else 3].
    #[arg(long, value_name = "N", value_parser = crate::args::at_least_one)]
    processes: Option<usize>,
    /// How to print the report: `text`, `json` (schema in
    /// `report::check`), `github` (workflow commands that annotate the
    /// offending lines), `junit` (JUnit XML for CI test reports).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write the same run's report in FORMAT to PATH (repeatable),
    /// e.g. `--format github --output junit=check.xml`: one measurement,
    /// several renderings; `perfetto=PATH` and `chrome-json=PATH` write
    /// the check on one timeline (each process's phases and start-up
    /// imports, the protocol's messages as flows).
    #[arg(long, value_name = "FORMAT=PATH", value_parser = crate::outputs::parse::<OutputFormat>)]
    output: Vec<crate::outputs::Output<OutputFormat>>,
    /// The same as `--format json` (kept for old scripts; hidden, as
    /// every command's `--json` is).
    #[arg(long, hide = true, conflicts_with = "format")]
    json: bool,
    /// Also print the whole importtime tree of the first process.
    #[arg(long)]
    tree: bool,
    /// For each violation, the smallest safe patch that keeps the module out
    /// of start-up (verified on a copy of the project before it is shown),
    /// as a unified diff `git apply` takes; changes nothing on disk.
    #[arg(long, conflicts_with_all = ["log", "module"])]
    suggest: bool,
    /// With --suggest: write the verified patches, then check again (exit 0
    /// only if the violations are gone).
    #[arg(long, requires = "suggest")]
    fix: bool,
    /// `--record`: each target's start-up import tree also stored as the
    /// current commit's run (no extra process; no trial: a checked
    /// process runs under the recorder).
    #[command(flatten)]
    record: crate::args::RecordFlagArgs,
}

/// A check cut short by a signal: the reports of the targets it finished
/// (in the text format), then on stderr what was cut short; no verdict.
fn interrupted(
    interrupt: &Interrupt,
    done: &[Checked],
    cut: &[harness::Target],
    format: Format,
) -> Result<ExitCode> {
    if format == Format::Text {
        let mut text = String::new();
        for c in done {
            report::check::render(&c.report, &c.root, &mut text);
        }
        print!("{text}");
    }
    let names: Vec<String> = cut.iter().map(|t| format!("`{}`", t.name)).collect();
    eprintln!(
        "interrupted by {}: the check of {} was cut short (its workers killed), no verdict{}",
        crate::signals::signal_name(interrupt),
        names.join(", "),
        if done.is_empty() {
            String::new()
        } else {
            format!(
                "; {} target(s) checked before it are shown above",
                done.len()
            )
        }
    );
    Ok(crate::signals::interrupted_code(interrupt))
}

/// Runs the check: flags in, one harness call, a rendering out.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let format = if args.json { Format::Json } else { args.format };
    refuse_trace_with(&args)?;
    let outcome = match checked(&args, project, format)? {
        Ok(outcome) => outcome,
        Err(interrupted) => return Ok(interrupted),
    };
    print_notes(&outcome);
    let render = |format: Format| render(format, &outcome, &project.root);
    print!("{}", render(format));
    crate::outputs::write_all(&args.output, |f| {
        Ok(match f.report() {
            Some(format) => render(format).into_bytes(),
            None => {
                let trace = outcome.trace(std::process::id());
                match f {
                    OutputFormat::Perfetto => ::trace::perfetto::to_protobuf(&trace)?,
                    _ => ::trace::chrome::to_json(&trace)?.into_bytes(),
                }
            }
        })
    })?;
    if format == Format::Text {
        print_suggestions(&outcome, args.fix);
    }
    Ok(ExitCode::from(outcome.exit_code()))
}

/// A trace output (`perfetto=`, `chrome-json=`) where it would draw
/// nothing true: `--log` runs no worker, `--fix` checks twice with the
/// files changed between.
fn refuse_trace_with(args: &Args) -> Result<()> {
    let Some(trace) = args.output.iter().find(|o| o.format.report().is_none()) else {
        return Ok(());
    };
    let name = match trace.format {
        OutputFormat::Perfetto => "perfetto",
        _ => "chrome-json",
    };
    if args.log.is_some() {
        bail!(
            "--output {name}= draws the workers a check runs, and --log runs none (it judges a recorded log): drop --log, or the trace output"
        );
    }
    if args.fix {
        bail!(
            "--output {name}= draws one check of each target, and --fix checks twice with the files changed between: trace the check without --fix (--suggest alone changes nothing)"
        );
    }
    Ok(())
}

/// The check itself: a recorded log judged (`--log`), or the targets run
/// through `harness::check_run::run`; `Err` with the exit code when a
/// signal cut it short (what it finished is printed then).
fn checked(
    args: &Args,
    project: &Project,
    format: Format,
) -> Result<std::result::Result<CheckRun, ExitCode>> {
    if let Some(log) = &args.log {
        return judged_log(args, project, log).map(Ok);
    }
    if args.record.record && (args.fix || args.module.is_some()) {
        bail!(
            "--record stores what was checked as the current commit's run: drop --fix (it changes the files checked) and --module (no target of the project)"
        );
    }
    let opts = RunOptions {
        check: CheckOptions {
            block: args.block,
            tree: args.tree,
        },
        suggest: args.suggest,
        fix: args.fix,
    };
    let targets = targets(args, project)?;
    let gated = gated_targets(args, project)?;
    // SIGINT, SIGTERM or SIGHUP kills every worker at once; the check
    // then shows the targets it finished, says which one it cut short,
    // and exits 128 + the signal's number without a verdict.
    let interrupt = crate::signals::interrupt(OnPress::KillNow).unwrap_or_default();
    let outcome = harness::check_run::run(&targets, opts, &gated, &project.root, &interrupt)?;
    if let Some(cut) = &outcome.interrupted {
        return Ok(Err(interrupted(&interrupt, &outcome.checked, cut, format)?));
    }
    if args.record.record {
        record(&args.record, project, &targets, &outcome)?;
    }
    Ok(Ok(outcome))
}

/// `--log`: a recorded importtime log judged alone, as one checked target.
fn judged_log(args: &Args, project: &Project, log: &std::path::Path) -> Result<CheckRun> {
    if !args.target.command.is_empty() || args.module.is_some() {
        bail!("--log judges a recorded log alone: give no command and no --module");
    }
    let report = check::judge_log(&project.cwd.join(log), &args.forbid, args.tree)?;
    Ok(CheckRun {
        checked: vec![Checked {
            report,
            root: project.cwd.clone(),
            suggestions: Vec::new(),
            written: Vec::new(),
            workers: Vec::new(),
        }],
        ..CheckRun::default()
    })
}

/// The targets with `snapshot = true` in the config: their start-up tree
/// must not drift.
fn gated_targets(args: &Args, project: &Project) -> Result<Vec<harness::Target>> {
    Ok(match &project.config {
        Some(config) => targets_for_snapshot(args, project)?
            .into_iter()
            .filter(|t| config.snapshot.contains(&t.name))
            .collect(),
        None => Vec::new(),
    })
}

/// `--record`: each checked target's import tree stored as the current
/// commit's run; a target whose check kept no log is said and left out.
fn record(
    args: &crate::args::RecordFlagArgs,
    project: &Project,
    targets: &[harness::Target],
    outcome: &CheckRun,
) -> Result<()> {
    let top = harness::diff::git::toplevel(&project.root)?;
    let mut runs = Vec::new();
    for c in &outcome.checked {
        let Some(target) = targets.iter().find(|t| t.name == c.report.name) else {
            continue;
        };
        match harness::history::check_run(&top, target, &c.report)? {
            Some(run) => runs.push(run),
            None => eprintln!(
                "--record: `{}` not recorded: its check kept no import log (its worker did not start)",
                target.name
            ),
        }
    }
    crate::history::store_runs(&args.store, project, &runs)
}

/// On stderr: the files `--fix` wrote and each gated snapshot's drift.
fn print_notes(outcome: &CheckRun) {
    for c in &outcome.checked {
        for f in &c.written {
            eprintln!("wrote {}", f.display());
        }
    }
    for r in &outcome.snapshots {
        match &r.drift {
            Drift::Same => {}
            Drift::New => eprintln!(
                "snapshot of `{}`: none stored at {}; run `coldstart snapshot` and commit it",
                r.target,
                r.path.display()
            ),
            Drift::Changed(diff) => eprintln!(
                "snapshot of `{}`: the start-up import tree drifted ({}):\n{diff}review it with `coldstart snapshot --check`, then `--accept`",
                r.target,
                r.path.display()
            ),
        }
    }
}

/// The check's report in `format`.
fn render(format: Format, outcome: &CheckRun, project_root: &Path) -> String {
    let mut text = String::new();
    match format {
        Format::Json => {
            text = serde_json::to_string_pretty(&JsonReport::new(&outcome.reports()))
                .expect("the check's report serialises");
            text.push('\n');
        }
        Format::Text => {
            for c in &outcome.checked {
                report::check::render(&c.report, &c.root, &mut text);
            }
        }
        Format::Github => {
            for c in &outcome.checked {
                ci::github(&c.report, &c.root, &mut text);
            }
        }
        Format::Junit => {
            let root = outcome.checked.first().map_or(project_root, |c| &c.root);
            text = ci::junit(&outcome.reports(), root);
        }
    }
    text
}

/// After the text report: the suggestions, then the verified cuts as one
/// patch that `git apply` takes (not when `--fix` wrote them).
fn print_suggestions(outcome: &CheckRun, fix: bool) {
    let mut patch = String::new();
    for c in &outcome.checked {
        for sug in &c.suggestions {
            print!("\n{sug}");
            if let Some(cut) = sug.cut.as_ref().filter(|_| !fix) {
                patch.push_str(&cut.diff);
            }
        }
    }
    if !patch.is_empty() {
        print!(
            "\nthe patch (from the project root: `git apply` or `patch -p1`; `--fix` writes it):\n{patch}"
        );
    }
}

/// The configured targets this check ran, for their snapshots.
fn targets_for_snapshot(args: &Args, project: &Project) -> Result<Vec<harness::Target>> {
    if args.module.is_some() || !args.target.command.is_empty() {
        return Ok(Vec::new());
    }
    Ok(project.targets(args.target.target.as_deref(), &[])?)
}

/// The targets to check, with the command line's overrides put over them.
fn targets(args: &Args, project: &Project) -> Result<Vec<harness::Target>> {
    let overrides = settings::Overrides {
        forbidden: (!args.forbid.is_empty()).then(|| args.forbid.clone()),
        processes: args.processes,
        ..args.timeouts.overrides()
    };
    match &args.module {
        Some(pkg) => {
            if !args.target.command.is_empty() {
                bail!("give either --module or a command after `--`, not both");
            }
            // --module runs in the caller's folder, like `python -c` would.
            let t = check::module_target(pkg, &args.python, &project.cwd)?;
            Ok(vec![overrides.apply(t)])
        }
        None => Ok(args.target.resolve(project, &overrides)?),
    }
}
