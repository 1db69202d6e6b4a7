//! `coldstart profile`: a sampled flame graph of a worker's start-up (the
//! harness runs it under py-spy); prints where the files went and the top
//! frames.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use harness::profile::ProfileOptions;

use crate::Project;

/// The profile's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A target from the config (default: its only target, or the built-in reference worker).
    #[arg(long)]
    target: Option<String>,
    /// Where to write `profile.txt` (collapsed stacks), `profile.svg` and
    /// `profile.speedscope.json` (default: bench-out/profile-<time>/).
    #[arg(long, short = 'o')]
    out: Option<PathBuf>,
    /// Samples per second.
    #[arg(long, default_value_t = 500)]
    rate: u32,
    /// Health round trips after ready (default: the target's).
    #[arg(long)]
    health: Option<usize>,
    /// Leave out native (C) frames.
    #[arg(long)]
    no_native: bool,
    /// How many frames to list.
    #[arg(long, default_value_t = 15)]
    top: usize,
    /// Seconds to wait for the ready line (default: the target's).
    #[arg(long)]
    ready_timeout: Option<f64>,
    /// The worker command to profile instead of a configured target.
    #[arg(last = true)]
    command: Vec<String>,
}

/// Runs the profile.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let mut target = project.one_target(args.target.as_deref(), &args.command)?;
    if let Some(d) = crate::secs(args.ready_timeout, "--ready-timeout")? {
        target.ready_timeout = d;
    }
    let out = args.out.unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        project
            .root
            .join("bench-out")
            .join(format!("profile-{secs}"))
    });
    let p = harness::profile::profile(
        &target,
        &ProfileOptions {
            out,
            rate: args.rate,
            health: args.health,
            native: !args.no_native,
        },
    )?;
    if p.native_unavailable {
        eprintln!("note: py-spy cannot sample native frames here; profiled without them");
    }
    for (line, text) in &p.problems {
        eprintln!(
            "warning: {}:{line}: not a collapsed stack line, left out: {text}",
            p.raw.display()
        );
    }
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
    writeln!(stdout)?;
    report::profile::top_table(&p.stacks, args.top, args.rate, &mut stdout)?;
    Ok(ExitCode::SUCCESS)
}
