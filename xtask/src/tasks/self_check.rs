//! The tool measured against itself, not a user's worker: `cargo xtask
//! probe-check` (bench's ready time against an independent Python probe on
//! the same worker) and `cargo xtask check-cost` (what the whole check, and
//! the recorder alone, cost beside one plain lifecycle). The figures in
//! docs/bench.md come from these.

use std::process::ExitCode;

use anyhow::{Result, bail};
use harness::OnPress;
use harness::probe_check::Agreement;
use settings::Project;

use super::project_root;

/// `probe-check`'s flags.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Which worker: `--target NAME` or `-- CMD...` (default: the reference worker).
    #[command(flatten)]
    target: coldstart::args::TargetArgs,
    /// Warm-up rounds, left out of the figures.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Measured rounds: one bench trial and one probe trial each.
    #[arg(long, default_value_t = 20)]
    trials: usize,
}

/// `check-cost`'s flags.
#[derive(Debug, clap::Args)]
pub struct CostArgs {
    /// Which worker: `--target NAME` or `-- CMD...` (default: the reference worker).
    #[command(flatten)]
    target: coldstart::args::TargetArgs,
    /// Interleaved rounds, after one warm-up of each.
    #[arg(long, default_value_t = 21)]
    rounds: usize,
    /// Fresh processes of the check (overrides the target's; default 3).
    #[arg(long, value_name = "N")]
    processes: Option<usize>,
    /// Make forbidden imports fail with an ImportError, as `check --block`.
    #[arg(long)]
    block: bool,
}

/// Bench against the probe: exit 0 when the ratio's whole interval lies
/// within the band, 1 when it lies outside, 2 when it cannot tell.
pub fn probe_check(args: ProbeArgs) -> Result<ExitCode> {
    let project = Project::workspace(&project_root())?;
    let target = args.target.one_target(&project)?;
    let interrupt = coldstart::signals::interrupt(OnPress::FinishThenKill)?;
    let check = harness::probe_check::probe_check(target, args.warmup, args.trials, &interrupt)?;
    print!("{}", check.render());
    Ok(match check.agreement() {
        Agreement::Agrees => ExitCode::SUCCESS,
        Agreement::Differs => ExitCode::from(1),
        Agreement::CannotTell => ExitCode::from(2),
    })
}

/// The check's cost: medians, ratios and the physical floor, printed.
pub fn check_cost(args: CostArgs) -> Result<ExitCode> {
    let project = Project::workspace(&project_root())?;
    let mut target = args.target.one_target(&project)?;
    match args.processes {
        Some(0) => bail!("--processes must be at least 1"),
        Some(n) => target.processes = n,
        None => {}
    }
    let opts = harness::check::CheckOptions {
        block: args.block,
        tree: false,
    };
    let cost = harness::check::cost::cost(&target, opts, args.rounds)?;
    let mut text = String::new();
    report::check::render_cost(&cost, &mut text);
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
