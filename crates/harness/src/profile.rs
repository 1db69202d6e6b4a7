//! A sampled flame graph of a worker's start-up.
//!
//! The worker runs under `py-spy record` (subprocesses followed, native
//! frames where supported) while the one [`Lifecycle`] drives it over the
//! protocol as usual: ready, health round trips, shutdown. py-spy leaves
//! out idle threads, so a worker blocked reading its next request adds no
//! samples: what is sampled is the start-up path, the requests and the
//! shutdown. Never part of timed bench trials: a profiler changes what it
//! measures.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{Error, Result, invalid};
use crate::lifecycle::Lifecycle;
use crate::pyspy::{self, PySpy};
use crate::target::Target;

/// How to profile.
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    /// Where `profile.txt`, `profile.svg` and `profile.speedscope.json` go.
    pub out: PathBuf,
    /// Samples per second.
    pub rate: u32,
    /// Health round trips after ready (default: the target's).
    pub health: Option<usize>,
    /// Sample native (C) frames too, where py-spy can.
    pub native: bool,
}

/// A finished profile, its files written.
#[derive(Debug)]
pub struct Profile {
    /// Spawn to ready, ms.
    pub ready_ms: f64,
    /// Health round trips made.
    pub health: usize,
    /// How the worker ended.
    pub exit: String,
    /// The sampled stacks.
    pub stacks: Vec<report::profile::SampledStack>,
    /// Lines of the raw file that were not stacks: (line, text).
    pub problems: Vec<(usize, String)>,
    /// The collapsed stacks py-spy wrote.
    pub raw: PathBuf,
    /// The flame graph.
    pub svg: PathBuf,
    /// The speedscope file.
    pub speedscope: PathBuf,
    /// Native frames were asked for and py-spy could not sample them here.
    pub native_unavailable: bool,
}

/// Profiles `target`'s start-up, health and shutdown.
pub fn profile(target: &Target, opts: &ProfileOptions) -> Result<Profile> {
    let Some(spy) = pyspy::locate(target) else {
        invalid!(
            "{}",
            pyspy::missing_hint().replacen("no Python stack: ", "cannot profile: ", 1)
        );
    };
    if opts.rate == 0 {
        invalid!("--rate must be at least 1 sample per second");
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::io("create", &opts.out, e))?;
    let mut native_unavailable = false;
    let mut result = record(&spy, target, opts, opts.native);
    if opts.native
        && let Err(e) = &result
        && e.to_string().contains("--native")
    {
        native_unavailable = true;
        result = record(&spy, target, opts, false);
    }
    let lifecycle = result?;

    let raw_path = opts.out.join("profile.txt");
    let raw = std::fs::read_to_string(&raw_path).map_err(|_| {
        Error::Invalid(format!(
            "py-spy wrote no profile at {}; its output was:\n{}",
            raw_path.display(),
            lifecycle.stderr_tail
        ))
    })?;
    let (stacks, problems) = report::profile::parse_collapsed(&raw);
    let title = format!("start-up of {}", target.display_command());
    let svg = opts.out.join("profile.svg");
    let speedscope = opts.out.join("profile.speedscope.json");
    write_with(&svg, |w| {
        report::profile::flamegraph_svg(&stacks, &title, w)
    })?;
    write_with(&speedscope, |w| {
        report::profile::speedscope(&stacks, &title, w)
    })?;
    Ok(Profile {
        ready_ms: lifecycle.ready_ms,
        health: lifecycle.health,
        exit: lifecycle.exit,
        stacks,
        problems,
        raw: raw_path,
        svg,
        speedscope,
        native_unavailable,
    })
}

struct Ran {
    ready_ms: f64,
    health: usize,
    exit: String,
    stderr_tail: String,
}

/// Runs the target under `py-spy record` and drives it through ready,
/// health and shutdown.
fn record(spy: &PySpy, target: &Target, opts: &ProfileOptions, native: bool) -> Result<Ran> {
    let mut cmd = spawn::Command::new(&spy.path);
    cmd.args([
        "record",
        "--subprocesses",
        "--function",
        "--format",
        "raw",
        "--rate",
    ])
    .arg(opts.rate.to_string())
    .arg("--output")
    .arg(opts.out.join("profile.txt"));
    if native {
        cmd.arg("--native");
    }
    cmd.arg("--").args(&target.command).current_dir(&target.cwd);
    for (k, v) in &target.env {
        cmd.env(k, v);
    }
    // The profile is of the worker, not of importtime's printing.
    cmd.env_remove("PYTHONPROFILEIMPORTTIME");
    let mut lifecycle = Lifecycle::of(target);
    if let Some(h) = opts.health {
        lifecycle.health = h;
    }
    // py-spy's own progress lines go to stderr, beside the worker's.
    let mut w = lifecycle
        .spawn(&cmd)
        .map_err(|e| {
            Error::worker(
                format!("could not start py-spy ({})", spy.path.display()),
                e,
            )
        })?
        .wait_ready()
        .map_err(|e| Error::worker("the profiled worker did not become ready", e))?;
    let ready_ms = w.ready_ms();
    for k in 0..lifecycle.health {
        w.health().map_err(|e| {
            Error::worker(
                format!("health round trip {} of {} failed", k + 1, lifecycle.health),
                e,
            )
        })?;
    }
    // py-spy writes its file after the worker exits: give it time.
    let finished = w
        .shutdown_with_extra_exit_time(Duration::from_secs(10))
        .map_err(|e| Error::worker("the profiled worker did not shut down cleanly", e))?;
    Ok(Ran {
        ready_ms,
        health: lifecycle.health,
        exit: finished.status.to_string(),
        stderr_tail: finished.stderr_tail,
    })
}

fn write_with(
    path: &Path,
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut file = File::create(path).map_err(|e| Error::io("create", path, e))?;
    f(&mut file).map_err(|e| Error::io("write", path, e))
}
