//! `coldstart lazy`: every import the project's own code makes at start-up
//! that costs at least `--min-ms` (default: 5% of ready or 20 ms), priced
//! over instrumented processes, with the cut that defers it, verified on a
//! patched copy (ready, health, the evidence, the target's `verify`
//! requests and `verify_command`) and its saving measured against the
//! original, interleaved: `safe`, `no-win` or `unsafe`. `--fix` writes the
//! safe cuts. Exit 0 when it ran (whatever it found), 2 when it could not;
//! 128 + the signal when interrupted (130 for Ctrl-C), after the rows tried
//! so far, with nothing written.

use std::process::ExitCode;

use anyhow::Result;
use harness::OnPress;
use harness::lazy::LazyOptions;
use settings::Project;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The table, the reasons and the patch.
    Text,
    /// The machine-readable report (schema in `answers::lazy`).
    Json,
}

/// The flags of `lazy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// The least cost, ms, of an import to list (default: 5% of the ready
    /// time or 20 ms, whichever is larger).
    #[arg(long, value_name = "MS")]
    min_ms: Option<f64>,
    /// Write the safe cuts to the project, then price it again.
    #[arg(long)]
    fix: bool,
    /// Instrumented processes to price over.
    #[arg(long, value_name = "N", default_value_t = 3)]
    processes: usize,
    /// The most interleaved rounds of each saving's measurement.
    #[arg(long, value_name = "N", default_value_t = 60)]
    max_rounds: usize,
    /// The most seconds of each saving's measurement.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    max_seconds: f64,
    /// How to print the report.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Runs `lazy`: flags in, one harness call (two with `--fix`: the project
/// priced again after the cuts are written), a rendering out.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let t = args.target.one_target(project)?;
    let opts = LazyOptions {
        processes: args.processes,
        min_ms: args.min_ms,
        fix: args.fix,
        max_rounds: args.max_rounds,
        max_seconds: args.max_seconds,
        root: project.root.clone(),
    };
    // Ctrl-C finishes the step under way (a trial, a verification) and
    // stops: the copies are removed and nothing is written; a second press
    // (or SIGTERM) kills every worker at once.
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let run = match harness::lazy::run(&t, &opts, &interrupt) {
        Ok(r) => r,
        Err(e) if interrupt.is_set() => {
            return Ok(crate::signals::interrupted(
                &interrupt,
                &format!(" before anything could be reported ({e}); nothing was written"),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", render(args.format, &run)?);
    if interrupt.is_set() {
        return Ok(crate::signals::interrupted(
            &interrupt,
            ": the report covers the imports tried so far; nothing was written",
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// The run's report in `format`: the pricing, and with `--fix` the
/// project priced again after the cuts.
fn render(format: Format, run: &harness::lazy::LazyRun) -> Result<String> {
    let mut text = String::new();
    match format {
        Format::Json => {
            text = match &run.after {
                Some(a) => {
                    serde_json::to_string_pretty(&answers::lazy::LazyFixJson::new(&run.before, a))?
                }
                None => serde_json::to_string_pretty(&run.before)?,
            };
            text.push('\n');
        }
        Format::Text => report::lazy::render_run(&run.before, run.after.as_ref(), &mut text),
    }
    Ok(text)
}
