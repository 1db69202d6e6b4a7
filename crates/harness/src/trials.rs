//! The bench's trial loop: a worker's start-up and shutdown, timed phase by
//! phase over repeated fresh trials, the way a skeptic would accept.
//!
//! Each trial starts `concurrency` fresh workers (usually one) and takes
//! each through the one [`Lifecycle`] (ready, health round trips, shutdown
//! and exit), stamping every step on CLOCK_MONOTONIC. Warm-ups run first,
//! are recorded and marked, and stay out of the statistics. With a second
//! side, A and B alternate within each round (A B, then B A, ...), so drift
//! of the machine hits both alike and the rounds can be compared as pairs.
//! Every trial's record is appended to `trials.jsonl` and flushed as soon
//! as it ends; failures are kept and counted. A side that has never
//! completed a trial is given up on at its third failure
//! ([`phases::run::never_completed`]): the run stops there rather than
//! wait out the ready timeout trial after trial. No importtime and no profiler
//! run during timed trials: `PYTHONPROFILEIMPORTTIME` is removed from the
//! workers' environment and `-X importtime` is refused.
//!
//! The [`Interrupt`] token stops the loop after the current trial; a second
//! press kills the running workers, whose records are then marked
//! interrupted. The finished trials are summarised as usual.

use std::path::{Path, PathBuf};
use std::time::Instant;

use phases::Phase;
use phases::memory::MemoryView;
use phases::run::{Configuration, Environment, TargetInfo};
use phases::sequential::{StopReason, StopRule, Stopped};
use phases::serve::{RequestRecord, ServeStats};
use phases::stats::Resampling;
use phases::summary::RunSummary;
use phases::{jsonl, stats, warn};
use spawn::worker_proto::Reply;
use timeline::{Escalation, Outcome, Stage, TrialKind, TrialRecord, Usage, Variant, WorkerRecord};

use crate::env;
use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::lifecycle::{Hooks, Lifecycle, Stop};
use crate::serve::{self, ServeOptions};
use crate::target::Target;

/// Environment variables removed from every worker: no importtime during
/// timed trials.
pub const REMOVED_ENV: &[&str] = &["PYTHONPROFILEIMPORTTIME"];

/// How a bench runs.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Warm-up trials per variant: run and recorded, left out of the statistics.
    pub warmup: usize,
    /// Measured trials per variant; `None` with `precision`.
    pub trials: Option<usize>,
    /// Run until the 95% CI half-width of the median ready time is within
    /// this share of the median, between `min_trials` and `max_trials`.
    pub precision: Option<f64>,
    /// Fewest measured trials per variant with `precision`.
    pub min_trials: usize,
    /// Most measured trials per variant with `precision`.
    pub max_trials: usize,
    /// Health round trips per worker per trial (default: the target's).
    pub health: Option<usize>,
    /// Workers started at once per trial.
    pub concurrency: usize,
    /// Changes within this share are not claimed.
    pub noise_threshold: f64,
    /// Resamples, seed and level of every confidence interval.
    pub bootstrap: Resampling,
    /// With two sides: run interleaved rounds until every compared measure
    /// is decided (faster, slower or equivalent) or a budget runs out,
    /// instead of a fixed count (`trials` and `precision` then unset).
    pub sequential: Option<StopRule>,
    /// The serve phase and memory view after the trials.
    pub serve: ServeOptions,
    /// Where the run's files go (see [`out_dir`]).
    pub out: PathBuf,
    /// The project root, for the tool's git revision in the environment.
    pub root: PathBuf,
}

impl BenchOptions {
    /// A sequential A/B comparison (what `diff` and `lazy` run): interleaved
    /// rounds until `rule` decides or its budget runs out, one worker per
    /// trial, the target's health round trips, no serve phase.
    pub fn sequential(
        rule: StopRule,
        warmup: usize,
        bootstrap: Resampling,
        out: PathBuf,
        root: PathBuf,
    ) -> BenchOptions {
        BenchOptions {
            warmup,
            trials: None,
            precision: None,
            min_trials: rule.min_rounds,
            max_trials: rule.max_rounds,
            health: None,
            concurrency: 1,
            noise_threshold: rule.threshold,
            bootstrap,
            sequential: Some(rule),
            serve: ServeOptions::default(),
            out,
            root,
        }
    }

    /// Refuses options that cannot make a run.
    pub fn check(&self) -> Result<()> {
        if self.concurrency == 0 {
            invalid!("--concurrency must be at least 1");
        }
        if self.precision.is_some() && self.min_trials > self.max_trials {
            invalid!(
                "--min-trials ({}) is above --max-trials ({})",
                self.min_trials,
                self.max_trials
            );
        }
        if self.trials == Some(0) {
            invalid!("--trials must be at least 1");
        }
        if let Some(rule) = &self.sequential {
            rule.validate().map_err(|e| {
                Error::Invalid(format!("the stopping rule cannot be followed: {e}"))
            })?;
        }
        Ok(())
    }
}

/// What the caller shows while the trials run.
pub trait Progress {
    /// Before the first trial: the most trials the run can take.
    fn start(&mut self, most_trials: u64);
    /// After each trial, with every record so far.
    fn trial(&mut self, records: &[TrialRecord], variants: &[Variant]);
    /// After the last trial.
    fn finish(&mut self);
    /// After the trials, before each serve phase or memory view starts.
    fn extra(&mut self, extra: &Extra);
}

/// A step of a task beside its timed trials, as [`Progress::extra`]
/// announces it: an untimed step after them (a serve phase, a memory view),
/// or a stage of a comparison (`diff`'s instrumented processes, then its
/// timed rounds).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Extra {
    /// A serve phase of one side on a fresh worker.
    Serve {
        /// The side.
        variant: Variant,
        /// The load, described (`100 requests, closed loop`).
        load: String,
        /// The request, as configured.
        request: serde_json::Value,
    },
    /// A memory view of one side on a separate untimed worker.
    Memory {
        /// The side.
        variant: Variant,
    },
    /// A comparison's untimed instrumented processes of one target, on
    /// both sides (importtime and the recorder).
    Instrumented {
        /// The target.
        target: String,
        /// Processes per side.
        processes: usize,
    },
    /// A comparison's timed rounds of one target: A (the base) and B (the
    /// working tree) interleaved until CPU time decides.
    Timed {
        /// The target.
        target: String,
    },
}

impl std::fmt::Display for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Extra::Serve {
                variant,
                load,
                request,
            } => write!(f, "serve phase ({variant}): {load}, request {request}"),
            Extra::Memory { variant } => write!(
                f,
                "memory view ({variant}): a separate untimed worker with tracemalloc"
            ),
            Extra::Instrumented { target, processes } => write!(
                f,
                "{target}: {processes} instrumented processes per side (untimed: importtime and the recorder)"
            ),
            Extra::Timed { target } => write!(
                f,
                "{target}: timed rounds, A (base) and B (working tree) interleaved, until CPU time decides"
            ),
        }
    }
}

/// A progress that shows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn start(&mut self, _: u64) {}
    fn trial(&mut self, _: &[TrialRecord], _: &[Variant]) {}
    fn finish(&mut self) {}
    fn extra(&mut self, _: &Extra) {}
}

/// A finished bench run, its files written.
#[derive(Debug)]
pub struct BenchRun {
    /// The folder the files went to.
    pub dir: PathBuf,
    /// `summary.json`.
    pub summary: RunSummary,
    /// Every trial, as in `trials.jsonl`.
    pub records: Vec<TrialRecord>,
    /// Every serve request, as in `requests.jsonl`.
    pub requests: Vec<RequestRecord>,
    /// The run was stopped by the interrupt token.
    pub interrupted: bool,
    /// The summary files that could not be written (absent from the
    /// folder); the summary itself is here whole.
    pub missing: Vec<MissingFile>,
}

impl BenchRun {
    /// Whether anything failed: a trial, or the serve phase or memory view.
    pub fn failed(&self) -> bool {
        self.summary.trials.failed > 0 || self.summary.serve_failed()
    }

    /// The first failed trial (not interrupted): the record, the stage, the message.
    pub fn first_failure(&self) -> Option<(&TrialRecord, &Stage, &str)> {
        self.records.iter().find_map(|r| {
            r.outcome
                .failure()
                .map(|(stage, message)| (r, stage, message))
        })
    }
}

/// One side of the benchmark, ready to spawn.
#[derive(Debug)]
pub struct Side {
    /// A or B.
    pub variant: Variant,
    /// Its target.
    pub target: Target,
    /// The command every trial runs.
    pub cmd: spawn::Command,
    /// What the environment record says of it.
    pub info: TargetInfo,
    /// Workers per trial.
    pub concurrency: usize,
    /// Timeouts, health round trips and shutdown policy.
    pub lifecycle: Lifecycle,
}

/// Refuses a target that turns importtime on: it slows every import.
pub fn refuse_importtime(t: &Target) -> Result<()> {
    let args = &t.command;
    let flagged = args
        .windows(2)
        .any(|w| w[0] == "-X" && w[1].starts_with("importtime"))
        || args.iter().any(|a| a.starts_with("-Ximporttime"));
    if flagged || t.env.contains_key("PYTHONPROFILEIMPORTTIME") {
        invalid!(
            "target `{}` turns on importtime; bench times workers without it (it slows every import): remove -X importtime / PYTHONPROFILEIMPORTTIME, and use `coldstart importtime` to read import costs",
            t.name
        );
    }
    Ok(())
}

impl Side {
    /// Prepares a target as side `variant` of a run.
    pub fn new(
        variant: Variant,
        target: Target,
        health: Option<usize>,
        concurrency: usize,
    ) -> Result<Side> {
        refuse_importtime(&target)?;
        let mut cmd = target.spawn_command();
        cmd.stderr_tail_bytes(16 * 1024);
        for k in REMOVED_ENV {
            cmd.env_remove(k);
        }
        let python = env::looks_like_python(&target.command[0])
            .then(|| env::python_info(&target.command[0], &target.env, &target.cwd));
        let info = TargetInfo {
            variant,
            name: target.name.clone(),
            origin: target.origin.as_str().to_owned(),
            command: target.command.clone(),
            display: target.display_command(),
            env: target.env.clone(),
            env_removed: REMOVED_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: target.cwd.display().to_string(),
            python,
        };
        let mut lifecycle = Lifecycle::of(&target);
        if let Some(h) = health {
            lifecycle.health = h;
        }
        Ok(Side {
            variant,
            concurrency,
            cmd,
            info,
            lifecycle,
            target,
        })
    }
}

/// A trial's hooks: a health reply other than `ok` fails the worker.
struct HealthOk;

impl Hooks for HealthOk {
    fn health(&mut self, x: &spawn::Exchange) -> std::result::Result<(), Stop> {
        match &x.reply {
            Reply::Health(h) if h.response.status.is_ok() => Ok(()),
            Reply::Health(h) => Err(Stop::Refused(format!(
                "health answered status `{}`, not `ok`, after the ready line",
                h.response.status.as_str()
            ))),
            other => Err(Stop::Refused(format!(
                "health was answered with `{}`",
                serde_json::to_string(other).unwrap_or_default()
            ))),
        }
    }
}

/// One worker's life through the one [`Lifecycle`], as its record.
fn run_worker(p: &Side, interrupt: &Interrupt) -> WorkerRecord {
    let lived = p.lifecycle.drive(&p.cmd, &mut HealthOk);
    let fin = lived.finished();
    let outcome = match &lived.end {
        Ok(_) => Outcome::Correct,
        Err(f) => {
            let (stage, message) = (f.stage.clone(), serve::clip_to(&f.to_string(), 4000));
            // A worker killed by a second Ctrl-C did not fail by itself.
            if interrupt.presses() > 1 {
                Outcome::Interrupted { stage, message }
            } else {
                Outcome::Failed { stage, message }
            }
        }
    };
    let mut marks = lived.timeline.marks();
    marks.connected_ns = fin.and_then(|f| f.connected_ns);
    WorkerRecord {
        pid: lived.pid,
        marks,
        usage: fin.and_then(|f| f.rusage).map(|u| Usage {
            user_ns: u.user.as_nanos() as u64,
            sys_ns: u.sys.as_nanos() as u64,
            max_rss_bytes: u.max_rss_bytes,
        }),
        rss_at_ready_bytes: lived.rss_at_ready_bytes,
        exit: fin.map(|f| f.status),
        escalation: fin.map_or(Escalation::None, |f| f.escalation),
        noise_lines: fin.map_or(0, |f| f.noise.len()),
        outcome,
    }
}

/// One trial: `concurrency` workers at once.
pub(crate) fn run_trial(
    p: &Side,
    trial: usize,
    round: usize,
    kind: TrialKind,
    interrupt: &Interrupt,
) -> TrialRecord {
    let started_unix_ms = env::unix_ms();
    let started_ns = spawn::monotonic_ns();
    let workers = if p.concurrency == 1 {
        vec![run_worker(p, interrupt)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..p.concurrency)
                .map(|_| s.spawn(|| run_worker(p, interrupt)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a worker thread panicked"))
                .collect()
        })
    };
    TrialRecord::new(
        trial,
        round,
        kind,
        p.variant,
        started_unix_ms,
        started_ns,
        workers,
    )
}

/// Runs the benchmark of `a` (and `b`, interleaved), writes its files and
/// returns the run.
pub fn run(
    a: Target,
    b: Option<Target>,
    opts: &BenchOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<BenchRun> {
    opts.check()?;
    serve::check(&opts.serve, &a)?;
    let mut sides = vec![Side::new(Variant::A, a, opts.health, opts.concurrency)?];
    if let Some(b) = b {
        sides.push(Side::new(Variant::B, b, opts.health, opts.concurrency)?);
    }
    let variants: Vec<Variant> = sides.iter().map(|s| s.variant).collect();
    let boot = opts.bootstrap;
    // An interleaved run follows the stopping rule when one is given.
    let rule = opts.sequential.as_ref().filter(|_| sides.len() > 1);
    let trials = match (opts.precision, rule) {
        (Some(_), _) | (None, Some(_)) => None,
        (None, None) => Some(opts.trials.unwrap_or(10)),
    };
    let first = &sides[0].target;
    let config = Configuration {
        warmup: opts.warmup,
        trials,
        precision: opts.precision,
        min_trials: trials.unwrap_or(rule.map_or(opts.min_trials, |r| r.min_rounds)),
        max_trials: trials.unwrap_or(rule.map_or(opts.max_trials, |r| r.max_rounds)),
        health: sides[0].lifecycle.health,
        concurrency: opts.concurrency,
        interleaved: sides.len() > 1,
        bootstrap: boot,
        noise_threshold: opts.noise_threshold,
        ready_timeout_s: first.ready_timeout.as_secs_f64(),
        request_timeout_s: first.request_timeout.as_secs_f64(),
        shutdown_timeout_s: first.shutdown_timeout.as_secs_f64(),
        grace_s: first.grace.as_secs_f64(),
    };

    let started_unix_ms = env::unix_ms();
    let at_start = env::load();
    let dir = opts.out.clone();
    let mut log = jsonl::Writer::create(&dir.join("trials.jsonl")).map_err(crate::error::jsonl)?;

    let per_variant_max = config.max_trials;
    progress.start(((opts.warmup + per_variant_max) * sides.len()) as u64);
    let mut records: Vec<TrialRecord> = Vec::new();
    let loop_start = Instant::now();
    let mut order_flip = false;
    let mut stopped: Option<Stopped> = None;
    'rounds: for (kind, count) in [
        (TrialKind::Warmup, opts.warmup),
        (TrialKind::Measured, per_variant_max),
    ] {
        for round in 0..count {
            let stop = match config.precision {
                Some(p) if kind == TrialKind::Measured && round >= config.min_trials => {
                    precise_enough(&records, &variants, p, &boot)
                }
                _ => false,
            };
            if stop {
                break 'rounds;
            }
            // A B, then B A: neither side always goes first.
            let order: Vec<&Side> = if order_flip {
                sides.iter().rev().collect()
            } else {
                sides.iter().collect()
            };
            order_flip = !order_flip;
            for side in order {
                if interrupt.is_set() {
                    break 'rounds;
                }
                let rec = run_trial(side, records.len(), round, kind, interrupt);
                log.append(std::slice::from_ref(&rec))
                    .map_err(crate::error::jsonl)?;
                records.push(rec);
                progress.trial(&records, &variants);
                // A side that has never once completed its lifecycle is
                // not started again and again (each can wait the whole
                // ready timeout): the run stops, its failures reported.
                if phases::run::never_completed(&records).is_some() {
                    stopped = rule.map(|_| Stopped {
                        reason: StopReason::GaveUp,
                        rounds: phases::sequential::rounds_run(&records),
                        elapsed_s: loop_start.elapsed().as_secs_f64(),
                    });
                    break 'rounds;
                }
            }
            // After each whole measured round: is the question answered?
            if let Some(rule) = rule.filter(|_| kind == TrialKind::Measured) {
                let elapsed = loop_start.elapsed();
                if let Some(s) =
                    phases::sequential::decided(&records, rule, elapsed).stopped(elapsed)
                {
                    stopped = Some(s);
                    break 'rounds;
                }
            }
        }
    }
    let loop_wall_s = loop_start.elapsed().as_secs_f64();
    progress.finish();
    spawn::kill_all();
    let was_interrupted = interrupt.is_set();
    // The serve phase and memory view: fresh workers after the timed
    // trials, never part of them.
    let extras = if opts.serve.wanted() && !was_interrupted {
        let serve_sides: Vec<serve::Side<'_>> = sides
            .iter()
            .map(|s| serve::Side {
                variant: s.variant,
                target: &s.target,
                lifecycle: &s.lifecycle,
                cmd: &s.cmd,
            })
            .collect();
        let extras = run_extras(&serve_sides, &opts.serve, &dir, &boot, interrupt, progress)?;
        spawn::kill_all();
        extras
    } else {
        Extras::default()
    };

    let environment = Environment {
        tool: env::tool(&opts.root),
        started_at: env::rfc3339(started_unix_ms),
        started_unix_ms,
        duration_s: (env::unix_ms().saturating_sub(started_unix_ms)) as f64 / 1e3,
        cpu_model: env::cpu_model(),
        cpu_count: env::cpu_count(),
        kernel: env::kernel(),
        at_start,
        at_end: env::load(),
        targets: sides.iter().map(|s| s.info.clone()).collect(),
    };
    let built = match rule {
        Some(rule) => {
            let stopped = stopped.unwrap_or(Stopped {
                reason: if was_interrupted {
                    StopReason::Interrupted
                } else {
                    StopReason::RoundBudget
                },
                rounds: phases::sequential::rounds_run(&records),
                elapsed_s: loop_wall_s,
            });
            RunSummary::build_sequential(
                &records,
                environment,
                config,
                was_interrupted,
                loop_wall_s,
                rule,
                stopped,
            )
        }
        None => RunSummary::build(&records, environment, config, was_interrupted, loop_wall_s),
    };
    let mut summary = built.map_err(|cause| Error::Stats {
        context: "could not summarise the trials",
        cause,
    })?;
    summary.serve = extras.serve;
    summary.memory = extras.memory;
    summary.serve_failures = extras.failures;
    let missing = write_outputs(&dir, &summary, &records, &extras.requests)?;
    Ok(BenchRun {
        dir,
        summary,
        records,
        requests: extras.requests,
        interrupted: was_interrupted,
        missing,
    })
}

/// The serve phases and memory views of a bench run.
#[derive(Debug, Clone, Default)]
struct Extras {
    /// One per side that served.
    pub serve: Vec<ServeStats>,
    /// One per side with a memory view.
    pub memory: Vec<MemoryView>,
    /// A serve phase or memory view that could not be run, and why.
    pub failures: Vec<String>,
    /// Every request of every serve phase (also in `requests.jsonl`).
    pub requests: Vec<RequestRecord>,
}

/// After the timed trials: for each side, a serve phase on a fresh worker
/// (when asked for), then a memory view on another. Request records go to
/// `dir/requests.jsonl`.
fn run_extras(
    sides: &[serve::Side<'_>],
    opts: &ServeOptions,
    dir: &Path,
    boot: &Resampling,
    stop: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Extras> {
    let mut extras = Extras::default();
    let load = opts.load()?;
    let mut log = match load {
        Some(_) => {
            Some(jsonl::Writer::create(&dir.join("requests.jsonl")).map_err(crate::error::jsonl)?)
        }
        None => None,
    };
    for side in sides {
        if stop.is_set() {
            break;
        }
        let plan = match load {
            Some(load) => Some(serve::Plan::new(
                load,
                opts.request.as_deref(),
                side.target,
            )?),
            None => None,
        };
        if let (Some(plan), Some(log)) = (&plan, log.as_mut()) {
            progress.extra(&Extra::Serve {
                variant: side.variant,
                load: plan.load.describe(),
                request: plan.describe(),
            });
            match serve::run_serve(
                side.lifecycle,
                side.cmd,
                side.variant,
                plan,
                log,
                boot,
                stop,
            ) {
                Ok((s, records)) => {
                    extras.serve.push(s);
                    extras.requests.extend(records);
                }
                Err(e) => extras
                    .failures
                    .push(format!("serve phase ({}): {e}", side.variant)),
            }
        }
        if opts.memory {
            progress.extra(&Extra::Memory {
                variant: side.variant,
            });
            match crate::memory::run_memory(side, plan.as_ref(), stop) {
                Ok(m) => extras.memory.push(m),
                Err(e) => extras
                    .failures
                    .push(format!("memory view ({}): {e}", side.variant)),
            }
        }
    }
    Ok(extras)
}

/// A summary file of the run's folder that could not be written: it is
/// absent (never cut short), the rest of the run is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingFile {
    /// Its name in the folder (`summary.json`, ...).
    pub name: &'static str,
    /// Why: the error of the write, as the system gave it.
    pub error: String,
}

/// Writes the summary files, each whole or not at all: to a temporary
/// file in the folder, flushed to disk, then renamed over its name. A
/// file that could not be written (a full disk, a file-size limit) is
/// removed, a stale one from an earlier run at the same place included,
/// and returned as missing; the others are still written.
fn write_outputs(
    dir: &Path,
    summary: &RunSummary,
    records: &[TrialRecord],
    requests: &[RequestRecord],
) -> Result<Vec<MissingFile>> {
    let mut json = serde_json::to_string_pretty(summary).map_err(|cause| Error::Json {
        context: "the summary did not serialise".to_owned(),
        cause,
    })?;
    json.push('\n');
    let files = [
        ("summary.json", json),
        ("summary.md", report::bench::markdown::render(summary)),
        (
            "hyperfine.json",
            report::bench::hyperfine::render(summary, records),
        ),
        (
            "phases.svg",
            report::bench::svg::render(summary, records, requests),
        ),
    ];
    let mut missing = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(e) = write_whole(&path, text.as_bytes()) {
            let _ = std::fs::remove_file(&path);
            missing.push(MissingFile {
                name,
                error: e.to_string(),
            });
        }
    }
    Ok(missing)
}

/// `bytes` at `path`, whole or not at all (a temporary file beside it,
/// synced, renamed; removed on failure), with the mode `std::fs::write`
/// gives (0666 less the umask).
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".coldstart-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    // Through the file itself: the error is the system's, without the
    // temporary name.
    tmp.as_file_mut().write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A saved run, read back from the folder [`run`] wrote.
#[derive(Debug)]
pub struct SavedRun {
    /// `summary.json`.
    pub summary: RunSummary,
    /// `trials.jsonl`.
    pub records: Vec<TrialRecord>,
    /// What the caller should be told about the files (a last line cut short).
    pub warnings: Vec<String>,
}

/// A saved run (a folder `run` wrote): its summary and its records.
pub fn load_run(dir: &Path) -> Result<SavedRun> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Invalid(format!(
            "could not read {} ({e}); give a folder written by `coldstart bench`",
            path.display()
        ))
    })?;
    let summary: RunSummary = serde_json::from_str(&text).map_err(|cause| Error::Json {
        context: format!("{} is not a bench summary", path.display()),
        cause,
    })?;
    let path = dir.join("trials.jsonl");
    let read = jsonl::read(&path).map_err(crate::error::jsonl)?;
    let warnings = read
        .cut_short_line
        .map(|n| {
            format!(
                "{} line {n} is cut short (the run was killed while writing it); it is skipped",
                path.display()
            )
        })
        .into_iter()
        .collect();
    Ok(SavedRun {
        summary,
        records: read.records,
        warnings,
    })
}

/// The output folder: `out`, or a fresh `bench-out/<UTC stamp>/` under
/// `root`; refused when it already holds a run.
pub fn out_dir(root: &Path, out: Option<&Path>, started_ms: u64) -> Result<PathBuf> {
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => {
            let base = root.join("bench-out").join(env::folder_stamp(started_ms));
            let mut dir = base.clone();
            let mut i = 2;
            while dir.exists() {
                dir = PathBuf::from(format!("{}-{i}", base.display()));
                i += 1;
            }
            dir
        }
    };
    if dir.join("trials.jsonl").exists() {
        invalid!(
            "{} already holds a run (trials.jsonl); pick another --out or remove it",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
    Ok(dir)
}

/// The live line: median ready time and its CI half-width per variant.
pub fn live_message(records: &[TrialRecord], variants: &[Variant]) -> String {
    let boot = Resampling {
        resamples: 2_000,
        ..Resampling::default()
    };
    let parts: Vec<String> = variants
        .iter()
        .filter_map(|&v| {
            let (vals, _) = phases::phase::series(records, Phase::Ready, v);
            let s = stats::summarize(&vals, &boot).ok()?;
            Some(if s.n < 2 {
                format!("{v} ready {}", report::bench::fmt_ms(s.median))
            } else {
                format!(
                    "{v} ready {} ± {}",
                    report::bench::fmt_ms(s.median),
                    report::bench::fmt_ms(s.median_ci.half_width())
                )
            })
        })
        .collect();
    let failed = records.iter().filter(|r| !r.outcome.is_correct()).count();
    let mut msg = parts.join(", ");
    if failed > 0 {
        msg.push_str(&format!(", {failed} failed"));
    }
    msg
}

/// Whether `--precision` is reached for every variant.
fn precise_enough(
    records: &[TrialRecord],
    variants: &[Variant],
    want: f64,
    boot: &Resampling,
) -> bool {
    variants.iter().all(|&v| {
        let (vals, _) = phases::phase::series(records, Phase::Ready, v);
        stats::summarize(&vals, boot).is_ok_and(|s| warn::relative_half_width(&s) <= want)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importtime_is_refused() {
        let root = Path::new("/");
        let t =
            |cmd: &[&str]| Target::ad_hoc(root, cmd.iter().map(|s| s.to_string()).collect(), "t");
        assert!(refuse_importtime(&t(&["python3", "-X", "importtime", "-m", "w"])).is_err());
        assert!(refuse_importtime(&t(&["python3", "-Ximporttime"])).is_err());
        assert!(refuse_importtime(&t(&["python3", "-X", "dev", "-m", "w"])).is_ok());
        let mut with_env = t(&["python3"]);
        with_env
            .env
            .insert("PYTHONPROFILEIMPORTTIME".into(), "1".into());
        let err = refuse_importtime(&with_env).unwrap_err().to_string();
        assert!(err.contains("coldstart importtime"), "{err}");
    }
}
