//! `coldstart profile`: a sampled flame graph of a worker's start-up (py-spy
//! linked as a library samples it: nothing to install); prints where the
//! files went, where start-up time went beside imports, and the top frames.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use harness::profile::{FinishedProfile, ProfileOptions};

use settings::Project;

/// The profile's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// Where to write `profile.txt` (collapsed stacks), `profile.svg` and
    /// `profile.speedscope.json` (default: `bench-out/profile-<time>/`).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Samples per second.
    #[arg(long, default_value_t = 500)]
    rate: u32,
    /// Health round trips after ready (default: the target's).
    #[arg(long)]
    health: Option<usize>,
    /// Native (C) frames: not available (says why).
    #[arg(long)]
    native: bool,
    /// Stop sampling at the ready line: the start-up alone.
    #[arg(long, value_name = "WHEN", value_parser = ["ready"])]
    until: Option<String>,
    /// How many frames to list.
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// How long the worker may take (each replaces the target's).
    #[command(flatten)]
    timeouts: crate::args::TimeoutArgs,
}

/// Runs the profile.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let target = args
        .target
        .resolve_one(project, &args.timeouts.overrides())?;
    let out = args.out.unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        project
            .root
            .join("bench-out")
            .join(format!("profile-{secs}"))
    });
    if args.native {
        anyhow::bail!("--native: {}", harness::profile::NATIVE_UNAVAILABLE);
    }
    let p = harness::profile::profile(
        &target,
        &ProfileOptions {
            out,
            rate: args.rate,
            health: args.health,
            until_ready: args.until.is_some(),
            top: args.top,
        },
    )?;
    print_profile(&target, args.rate, &p)?;
    Ok(ExitCode::SUCCESS)
}

/// What the profile wrote and found, on stdout: the files, the rate used
/// (beside the one asked: the sampler lowers it for a large process), the
/// share of start-up inside imports, and the top frames.
fn print_profile(
    target: &harness::target::Target,
    asked_hz: u32,
    p: &FinishedProfile,
) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "profiled {} ({})",
        target.name,
        target.display_command()
    )?;
    writeln!(
        stdout,
        "lifecycle: ready after {:.1} ms, {} health round trip(s), {}",
        p.ready_ms, p.health, p.exit
    )?;
    writeln!(stdout, "flame graph: {}", p.svg.display())?;
    writeln!(stdout, "speedscope:  {}", p.speedscope.display())?;
    writeln!(stdout, "stacks:      {}", p.raw.display())?;
    writeln!(
        stdout,
        "sampler: {} samples at {:.1} Hz used ({asked_hz} Hz asked), {} late rounds, {:.1}% of the sampled time spent reading the worker",
        p.samples,
        p.sampled.rate_hz(),
        p.late_ticks,
        p.reading_share * 100.0
    )?;
    print_startup(p, &mut stdout)?;
    writeln!(stdout)?;
    let rows: Vec<(&str, u64, u64)> = p
        .top
        .iter()
        .map(|f| (f.frame.as_str(), f.self_samples, f.total_samples))
        .collect();
    report::profile::top_table(&rows, &p.sampled, &mut stdout)?;
    Ok(())
}

/// The start-up's samples (spawn to ready): the share inside imports and
/// the widest frames outside them.
fn print_startup(p: &FinishedProfile, stdout: &mut dyn std::io::Write) -> Result<()> {
    let s = &p.startup;
    writeln!(
        stdout,
        "start-up (spawn to ready): {} samples, {:.0}% inside imports",
        s.samples,
        s.share_inside() * 100.0
    )?;
    if !s.top_outside.is_empty() {
        writeln!(stdout, "  widest frames outside imports (self samples):")?;
        for f in s.top_outside.iter().take(5) {
            writeln!(stdout, "    {:>6}  {}", f.self_samples, f.frame)?;
        }
    }
    Ok(())
}
