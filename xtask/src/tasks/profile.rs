//! `cargo xtask profile`: a sampled flame graph of a worker's start-up.
//!
//! The worker runs under `py-spy record` (subprocesses followed, native
//! frames where supported) while the harness drives it over the protocol as
//! usual: ready, health round trips, shutdown. py-spy leaves out idle
//! threads, so a worker blocked reading its next request adds no samples:
//! what is sampled is the start-up path, the requests and the shutdown.
//! Never part of timed bench trials: a profiler changes what it measures.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use worker_proto::Request;

use crate::config::{self, Target};
use crate::pyspy::{self, PySpy};
use crate::tasks::project_root;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A target from coldstart.toml (default: every target, or the built-in reference worker).
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

pub fn run(args: Args) -> Result<ExitCode> {
    let root = project_root();
    let targets = config::resolve(&root, args.target.as_deref(), &args.command)?;
    if targets.len() > 1 {
        let names: Vec<_> = targets.iter().map(|t| t.name.as_str()).collect();
        bail!(
            "coldstart.toml has {} targets ({}); profile one at a time with --target NAME",
            targets.len(),
            names.join(", ")
        );
    }
    let mut target = targets
        .into_iter()
        .next()
        .expect("resolve gives at least one target");
    if let Some(s) = args.ready_timeout {
        anyhow::ensure!(
            s.is_finite() && s > 0.0,
            "--ready-timeout must be a positive number of seconds"
        );
        target.ready_timeout = Duration::from_secs_f64(s);
    }
    let Some(spy) = pyspy::locate(&target, &root) else {
        bail!(
            "{}",
            pyspy::missing_hint().replacen("no Python stack: ", "cannot profile: ", 1)
        );
    };
    anyhow::ensure!(args.rate > 0, "--rate must be at least 1 sample per second");
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => root
            .join("bench-out")
            .join(format!("profile-{}", timestamp())),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("could not create {}", out.display()))?;

    let native = !args.no_native;
    let mut result = record(&spy, &target, &args, &out, native);
    if native
        && let Err(e) = &result
        && format!("{e:#}").contains("--native")
    {
        eprintln!("note: py-spy cannot sample native frames here; profiling without them");
        result = record(&spy, &target, &args, &out, false);
    }
    let lifecycle = result?;

    let raw_path = out.join("profile.txt");
    let raw = std::fs::read_to_string(&raw_path).with_context(|| {
        format!(
            "py-spy wrote no profile at {}; its output was:\n{}",
            raw_path.display(),
            lifecycle.stderr_tail
        )
    })?;
    let (stacks, problems) = report::profile::parse_collapsed(&raw);
    for (line, text) in &problems {
        eprintln!(
            "warning: {}:{line}: not a collapsed stack line, left out: {text}",
            raw_path.display()
        );
    }
    let title = format!("start-up of {}", target.display_command());
    let svg = out.join("profile.svg");
    let speedscope = out.join("profile.speedscope.json");
    write_with(&svg, |w| {
        report::profile::flamegraph_svg(&stacks, &title, w)
    })?;
    write_with(&speedscope, |w| {
        report::profile::speedscope(&stacks, &title, w)
    })?;

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
        lifecycle.ready_ms, lifecycle.health, lifecycle.exit
    )?;
    writeln!(stdout, "flame graph: {}", svg.display())?;
    writeln!(stdout, "speedscope:  {}", speedscope.display())?;
    writeln!(stdout, "stacks:      {}", raw_path.display())?;
    writeln!(stdout)?;
    report::profile::top_table(&stacks, args.top, args.rate, &mut stdout)?;
    Ok(ExitCode::SUCCESS)
}

struct Lifecycle {
    ready_ms: f64,
    health: usize,
    exit: String,
    stderr_tail: String,
}

/// Runs the target under `py-spy record` and drives it through ready,
/// health and shutdown.
fn record(
    spy: &PySpy,
    target: &Target,
    args: &Args,
    out: &Path,
    native: bool,
) -> Result<Lifecycle> {
    let mut cmd = spawn::Command::new(&spy.path);
    cmd.args([
        "record",
        "--subprocesses",
        "--function",
        "--format",
        "raw",
        "--rate",
    ])
    .arg(args.rate.to_string())
    .arg("--output")
    .arg(out.join("profile.txt"));
    if native {
        cmd.arg("--native");
    }
    cmd.arg("--").args(&target.command).current_dir(&target.cwd);
    for (k, v) in &target.env {
        cmd.env(k, v);
    }
    // The profile is of the worker, not of importtime's printing.
    cmd.env_remove("PYTHONPROFILEIMPORTTIME");
    // py-spy's own progress lines go to stderr, beside the worker's.
    let mut worker = spawn::Worker::spawn(&cmd)
        .with_context(|| format!("could not start py-spy ({})", spy.path.display()))?;
    pyspy::arm_timeout_dump(&mut worker, target, &project_root());
    let ready = worker
        .wait_ready(target.ready_timeout)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("the profiled worker did not become ready")?;
    let ready_ms = ready.read_at_ns.saturating_sub(worker.spawned_at_ns()) as f64 / 1e6;
    let health = args.health.unwrap_or(target.health);
    for k in 0..health {
        worker
            .request(&Request::health(), target.request_timeout)
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| format!("health round trip {} of {health} failed", k + 1))?;
    }
    let mut policy = target.shutdown_policy();
    // py-spy writes its file after the worker exits: give it time.
    policy.exit_timeout += Duration::from_secs(10);
    let finished = worker
        .shutdown(&policy)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("the profiled worker did not shut down cleanly")?;
    Ok(Lifecycle {
        ready_ms,
        health,
        exit: finished.status.to_string(),
        stderr_tail: finished.stderr_tail,
    })
}

fn write_with(
    path: &Path,
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut file =
        File::create(path).with_context(|| format!("could not create {}", path.display()))?;
    f(&mut file).with_context(|| format!("could not write {}", path.display()))
}

fn timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    secs.to_string()
}
