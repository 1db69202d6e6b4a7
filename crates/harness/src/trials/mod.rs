//! The bench's trial loop: a worker's start-up and shutdown, timed phase by
//! phase over repeated fresh trials, the way a skeptic would accept.
//!
//! Each trial starts `concurrency` fresh workers (usually one) and takes
//! each through the one [`Lifecycle`](crate::lifecycle::Lifecycle) (ready, health round trips, shutdown
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
//!
//! Its files, one job each: [`progress`] (what a caller is shown while a
//! run goes), `trial` (one trial's workers and their records), `untimed`
//! (the serve phase and memory view after the trials), [`files`] (the
//! run's folder, written and read back). The side a run times is
//! [`Side`].

use std::path::PathBuf;
use std::time::Instant;

use phases::Phase;
use phases::run::{Configuration, Environment};
use phases::sequential::{StopReason, StopRule, Stopped};
use phases::serve::RequestRecord;
use phases::stats::Resampling;
use phases::summary::RunSummary;
use phases::{jsonl, stats, warn};
use timeline::{Stage, TrialKind, TrialRecord, Variant};

use crate::env;
use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::serve::{self, ServeOptions};
use crate::side::Side;
use crate::target::Target;

pub mod files;
pub mod progress;
pub mod trace;
mod trial;
mod untimed;

pub use files::{MissingFile, SavedRun, load_run, out_dir};
pub use progress::{Event, Progress, Quiet, live_message};
pub(crate) use trial::run_trial;

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
    /// instead of a fixed count. Ignored with one side, with `trials` or
    /// with `precision`.
    pub sequential: Option<StopRule>,
    /// The serve phase and memory view after the trials.
    pub serve: ServeOptions,
    /// Where the run's files go (see [`out_dir`]; [`Bench::write_to`]).
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
    pub fn validate(&self) -> Result<()> {
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

/// A bench run checked and ready: every option validated, each side
/// prepared (its importtime refused, its command built). Nothing has run
/// and no folder is made until [`Bench::run`].
#[derive(Debug)]
pub struct Bench {
    sides: Vec<Side>,
    opts: BenchOptions,
}

impl Bench {
    /// Checks `opts` against `a` (and `b`, the side compared with it) and
    /// prepares the sides: every error a run can know of before it starts.
    pub fn new(a: Target, b: Option<Target>, mut opts: BenchOptions) -> Result<Bench> {
        if opts.trials.is_some() || opts.precision.is_some() || b.is_none() {
            opts.sequential = None;
        }
        opts.validate()?;
        serve::validate(&opts.serve, &a)?;
        // With two sides, an error names the side it is of.
        let compared = b.is_some();
        let side = |variant: Variant, t: Target| {
            let name = t.name.clone();
            Side::new(variant, t, opts.health, opts.concurrency).map_err(|cause| {
                if compared {
                    Error::Side {
                        side: variant,
                        name,
                        cause: Box::new(cause),
                    }
                } else {
                    cause
                }
            })
        };
        let mut sides = vec![side(Variant::A, a)?];
        if let Some(b) = b {
            sides.push(side(Variant::B, b)?);
        }
        Ok(Bench { sides, opts })
    }

    /// The same run, its files going to `dir`.
    pub fn write_to(mut self, dir: PathBuf) -> Bench {
        self.opts.out = dir;
        self
    }

    /// Runs the timed trials, then the serve phase and memory view when
    /// asked for, writes the run's files and returns the run.
    pub fn run(self, interrupt: &Interrupt, progress: &mut dyn Progress) -> Result<BenchRun> {
        let Bench { sides, opts } = self;
        let rule = opts.sequential.as_ref();
        let config = configuration(&opts, &sides, rule);
        let started_unix_ms = env::unix_ms();
        let at_start = env::load();
        let dir = opts.out.clone();
        let timed = timed_rounds(&opts, &sides, &config, rule, interrupt, progress)?;
        let interrupted = interrupt.is_set();
        let untimed = if opts.serve.wanted() && !interrupted {
            let u = untimed::run_untimed(
                &sides,
                &opts.serve,
                &dir,
                &opts.bootstrap,
                interrupt,
                progress,
            )?;
            spawn::kill_all();
            u
        } else {
            untimed::Untimed::default()
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
        let mut summary = summarise(&timed, environment, config, rule, interrupted)?;
        summary.placement = Some(unpinned());
        summary.serve = untimed.serve;
        summary.memory = untimed.memory;
        summary.serve_failures = untimed.failures;
        summary.advise_probes(&timed.records, &untimed.requests);
        summary.pool = untimed.pool;
        let missing = files::write_outputs(&dir, &summary, &timed.records, &untimed.requests)?;
        Ok(BenchRun {
            dir,
            summary,
            records: timed.records,
            requests: untimed.requests,
            serve_workers: untimed.serve_workers,
            // A press during the serve phase or a pool run stops the run too.
            interrupted_by: interrupt.is_set().then(|| {
                interrupt
                    .signal()
                    .unwrap_or(crate::interrupt::Signal::Interrupt)
            }),
            missing,
        })
    }
}

/// Runs the benchmark of `a` (and `b`, interleaved), writes its files and
/// returns the run: [`Bench::new`], then [`Bench::run`].
pub fn run(
    a: Target,
    b: Option<Target>,
    opts: &BenchOptions,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<BenchRun> {
    Bench::new(a, b, opts.clone())?.run(interrupt, progress)
}

/// The run's configuration, as its summary records it.
fn configuration(opts: &BenchOptions, sides: &[Side], rule: Option<&StopRule>) -> Configuration {
    let trials = match (opts.precision, rule) {
        (Some(_), _) | (None, Some(_)) => None,
        (None, None) => Some(opts.trials.unwrap_or(10)),
    };
    let first = &sides[0].target;
    Configuration {
        warmup: opts.warmup,
        trials,
        precision: opts.precision,
        min_trials: trials.unwrap_or(rule.map_or(opts.min_trials, |r| r.min_rounds)),
        max_trials: trials.unwrap_or(rule.map_or(opts.max_trials, |r| r.max_rounds)),
        health: sides[0].lifecycle.health,
        concurrency: opts.concurrency,
        interleaved: sides.len() > 1,
        bootstrap: opts.bootstrap,
        noise_threshold: opts.noise_threshold,
        ready_timeout_s: first.ready_timeout.as_secs_f64(),
        request_timeout_s: first.request_timeout.as_secs_f64(),
        shutdown_timeout_s: first.shutdown_timeout.as_secs_f64(),
        grace_s: first.grace.as_secs_f64(),
    }
}

/// What the timed rounds left: every record, why a sequential run
/// stopped, and the loop's wall time.
struct Timed {
    records: Vec<TrialRecord>,
    stopped: Option<Stopped>,
    loop_wall_s: f64,
}

/// The warm-up, then the measured rounds, A B then B A, each trial's record
/// appended to `trials.jsonl` as it ends; stopped by the precision asked
/// for, the stopping rule, a side that never completes, or the interrupt.
fn timed_rounds(
    opts: &BenchOptions,
    sides: &[Side],
    config: &Configuration,
    rule: Option<&StopRule>,
    interrupt: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Timed> {
    let variants: Vec<Variant> = sides.iter().map(|s| s.variant).collect();
    let mut log =
        jsonl::Writer::create(&opts.out.join("trials.jsonl")).map_err(crate::error::jsonl)?;
    progress.start(((opts.warmup + config.max_trials) * sides.len()) as u64);
    let mut records: Vec<TrialRecord> = Vec::new();
    let loop_start = Instant::now();
    let mut order_flip = false;
    let mut stopped: Option<Stopped> = None;
    'rounds: for (kind, count) in [
        (TrialKind::Warmup, opts.warmup),
        (TrialKind::Measured, config.max_trials),
    ] {
        for round in 0..count {
            let precise = match config.precision {
                Some(p) if kind == TrialKind::Measured && round >= config.min_trials => {
                    precise_enough(&records, &variants, p, &opts.bootstrap)
                }
                _ => false,
            };
            if precise {
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
    Ok(Timed {
        records,
        stopped,
        loop_wall_s,
    })
}

/// Where the workers ran: a bench starts them as a plain parent does, on
/// any CPU the harness may use (no pinning), so its start-up is the one
/// such a parent sees; limits, when a side has them, are its own record.
fn unpinned() -> timeline::Placement {
    timeline::Placement {
        available: spawn::affinity::current_cpus().unwrap_or_default(),
        workers: Vec::new(),
        harness: None,
        note: Some("started as a plain parent starts them".to_owned()),
    }
}

/// The summary of the timed rounds (without the untimed steps).
fn summarise(
    timed: &Timed,
    environment: Environment,
    config: Configuration,
    rule: Option<&StopRule>,
    interrupted: bool,
) -> Result<RunSummary> {
    let Timed {
        records,
        stopped,
        loop_wall_s,
    } = timed;
    let built = match rule {
        Some(rule) => {
            let stopped = stopped.unwrap_or(Stopped {
                reason: if interrupted {
                    StopReason::Interrupted
                } else {
                    StopReason::RoundBudget
                },
                rounds: phases::sequential::rounds_run(records),
                elapsed_s: *loop_wall_s,
            });
            RunSummary::build_sequential(
                records,
                environment,
                config,
                interrupted,
                *loop_wall_s,
                rule,
                stopped,
            )
        }
        None => RunSummary::build(records, environment, config, interrupted, *loop_wall_s),
    };
    built.map_err(|cause| Error::Stats {
        context: "could not summarise the trials",
        cause,
    })
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
    /// The worker of each serve phase (a pool's are not kept).
    pub serve_workers: Vec<serve::ServeWorker>,
    /// The signal that stopped the run through the interrupt token (SIGINT
    /// for a press from elsewhere); `None` when it ran to its end.
    pub interrupted_by: Option<crate::interrupt::Signal>,
    /// The summary files that could not be written (absent from the
    /// folder); the summary itself is here whole.
    pub missing: Vec<MissingFile>,
}

impl BenchRun {
    /// Whether anything failed: a trial, or the serve phase or memory view.
    pub fn failed(&self) -> bool {
        self.summary.trials.failed > 0 || self.summary.serve_failed()
    }

    /// Whether the interrupt token stopped the run.
    pub fn interrupted(&self) -> bool {
        self.interrupted_by.is_some()
    }

    /// The run's exit code ([`answers::bench::exit_code`]).
    pub fn exit_code(&self) -> u8 {
        answers::bench::exit_code(&answers::bench::BenchEnd {
            files_missing: !self.missing.is_empty(),
            interrupted_by: self.interrupted_by.map(|s| s.number()),
            failed: self.failed(),
        })
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
mod tests;
