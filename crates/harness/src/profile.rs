//! A sampled flame graph of a worker's start-up, with py-spy linked as a
//! library (`pystacks`): nothing to install.
//!
//! The worker is spawned through the one [`Lifecycle`] and sampled from
//! outside from the moment it exists, while the lifecycle drives it as
//! usual: ready, health round trips, shutdown (or only up to ready, with
//! `until_ready`). Idle threads are left out, so a worker blocked reading
//! its next request adds no samples. Each sample carries its
//! CLOCK_MONOTONIC stamp, so the start-up (spawn to ready) is split from
//! the rest, and the share of start-up samples inside imports is counted,
//! with the widest frames outside them (CUDA probing, reading weights,
//! building tokenizers). The sampler measures its own cost. Never part of
//! timed bench trials: a profiler changes what it measures.

use std::fs::File;
use std::path::{Path, PathBuf};

use pystacks::{CollapsedStack, FrameTotal, ImportShare, Sampler, SamplerOptions};

use crate::error::{Error, Result, invalid};
use crate::lifecycle::{Halt, Hooks, Lifecycle, Started};
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
    /// Stop sampling at the ready line.
    pub until_ready: bool,
    /// How many frames to rank.
    pub top: usize,
}

/// A finished `profile` run, its files written (`pystacks::Profile` is
/// what a sampler read).
#[derive(Debug)]
pub struct FinishedProfile {
    /// Spawn to ready, ms.
    pub ready_ms: f64,
    /// Health round trips made.
    pub health: usize,
    /// How the worker ended.
    pub exit: String,
    /// The frames with the most self samples over every sampled stack
    /// (the whole run, or up to ready), ranked.
    pub top: Vec<FrameTotal>,
    /// What those stacks stand for: their samples, the CPU time of those
    /// on CPU, the rounds and time they were taken over.
    pub sampled: report::profile::SampleSummary,
    /// Where the start-up samples (spawn to ready) went.
    pub startup: ImportShare,
    /// Samples taken, and rounds that started late.
    pub samples: u64,
    /// Rounds that started more than one period late.
    pub late_ticks: u64,
    /// The share of the sampled time the sampler spent reading the worker.
    pub reading_share: f64,
    /// The collapsed stacks.
    pub raw: PathBuf,
    /// The flame graph.
    pub svg: PathBuf,
    /// The speedscope file.
    pub speedscope: PathBuf,
}

/// Why `profile --native` is not offered: the worker is this process's own
/// child, which native unwinding (it stops the process) must not read.
pub const NATIVE_UNAVAILABLE: &str = "native (C) frames are not read by `profile`: unwinding stops the process, and the worker is coldstart's own child, whose exit status the stop could take; start the worker yourself and run `coldstart record PID --native` (a build with the `native` feature, which links the system's libunwind)";

/// Profiles `target`'s start-up (and, unless `until_ready`, its health and
/// shutdown).
pub fn profile(target: &Target, opts: &ProfileOptions) -> Result<FinishedProfile> {
    if opts.rate == 0 {
        invalid!("--rate must be at least 1 sample per second");
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::io("create", &opts.out, e))?;
    let mut cmd = target.spawn_command();
    // The profile is of the worker, not of importtime's printing.
    cmd.env_remove("PYTHONPROFILEIMPORTTIME");
    let mut lifecycle = Lifecycle::of(target);
    if let Some(h) = opts.health {
        lifecycle.health = h;
    }
    let mut hooks = Sampling {
        rate: opts.rate,
        until_ready: opts.until_ready,
        sampler: None,
        ready_ns: 0,
    };
    let lived = lifecycle.drive(&cmd, &mut hooks);
    let sampled = hooks.sampler.take().map(Sampler::stop);
    let (ready_ms, ready_ns) = (lived.ready_ms().unwrap_or(f64::NAN), hooks.ready_ns);
    let finished = lived.end.map_err(|f| match f.stage {
        timeline::Stage::Spawn => Error::lifecycle("could not start the worker to profile", f),
        _ if f.refused() && lived.ready.is_none() => Error::lifecycle("cannot profile", f),
        _ => Error::lifecycle("the profiled worker did not complete its lifecycle", f),
    })?;
    let exit = finished.status.to_string();
    let sampled = sampled.expect("a lifecycle that completed was sampled");

    let collapsed = if opts.until_ready {
        sampled.collapsed_before(ready_ns)
    } else {
        sampled.collapsed()
    };
    let startup = pystacks::import_share(&sampled.collapsed_before(ready_ns), 15);
    let raw = opts.out.join("profile.txt");
    write_with(&raw, |w| pystacks::write_collapsed(&collapsed, w))?;
    let stacks = to_report(&collapsed);
    let title = format!("start-up of {}", target.display_command());
    let svg = opts.out.join("profile.svg");
    let speedscope = opts.out.join("profile.speedscope.json");
    write_with(&svg, |w| {
        report::profile::flamegraph_svg(&stacks, &title, w)
    })?;
    write_with(&speedscope, |w| {
        report::profile::speedscope(&stacks, &title, w)
    })?;
    Ok(FinishedProfile {
        ready_ms,
        health: lifecycle.health,
        exit,
        top: pystacks::top_frames(&collapsed, opts.top),
        sampled: crate::live::sample_summary(
            &sampled.time_where(|s| !opts.until_ready || s.t_ns < ready_ns),
            sampled.ticks,
            sampled.cost.wall_ns() as f64 / 1e9,
            // The kernel's count covers the whole run, not a cut at ready.
            sampled.kernel_cpu_ns.filter(|_| !opts.until_ready),
        ),
        startup,
        samples: sampled.sample_count(),
        late_ticks: sampled.late_ticks,
        reading_share: sampled.cost.reading_share(),
        raw,
        svg,
        speedscope,
    })
}

/// The profile's hooks: the sampler attached at spawn, stopped at ready
/// with `until_ready`.
struct Sampling {
    rate: u32,
    until_ready: bool,
    sampler: Option<Sampler>,
    ready_ns: u64,
}

impl Hooks for Sampling {
    fn spawned(&mut self, pid: u32) -> std::result::Result<(), Halt> {
        let options = SamplerOptions {
            rate_hz: self.rate,
            ..SamplerOptions::default()
        };
        let sampler = Sampler::start(pid, options).map_err(|e| Halt::Refused(e.to_string()))?;
        self.sampler = Some(sampler);
        Ok(())
    }

    fn ready(&mut self, w: &mut Started<'_>) -> std::result::Result<(), Halt> {
        self.ready_ns = w.ready.read_at_ns;
        if self.until_ready
            && let Some(s) = &self.sampler
        {
            s.stop_handle().stop();
        }
        Ok(())
    }
}

fn to_report(stacks: &[CollapsedStack]) -> Vec<report::profile::SampledStack> {
    stacks
        .iter()
        .map(|s| report::profile::SampledStack {
            frames: s.frames.clone(),
            samples: s.samples,
        })
        .collect()
}

fn write_with(
    path: &Path,
    f: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut file = File::create(path).map_err(|e| Error::io("create", path, e))?;
    f(&mut file).map_err(|e| Error::io("write", path, e))
}
