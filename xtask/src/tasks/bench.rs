//! `cargo xtask bench`: a worker's start-up and shutdown, timed phase by
//! phase over repeated fresh trials, the way a skeptic would accept.
//!
//! Each trial starts `--concurrency` fresh workers (usually one) and takes
//! each through ready, `--health` round trips, shutdown and exit, stamping
//! every step on CLOCK_MONOTONIC (`spawn` does the stamping). Warm-ups run
//! first, are recorded and marked, and stay out of the statistics. With
//! `--vs`, A and B alternate within each round (A B, then B A, ...), so
//! drift of the machine hits both alike and the rounds can be compared as
//! pairs. Every trial's record is appended to `trials.jsonl` and flushed as
//! soon as it ends; failures are kept and counted. No importtime and no
//! profiler run during timed trials: `PYTHONPROFILEIMPORTTIME` is removed
//! from the workers' environment and `-X importtime` is refused.
//!
//! Ctrl-C stops after the current trial (a second Ctrl-C kills the running
//! workers at once); the finished trials are summarised as usual.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead as _, BufReader, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use phases::record::{
    Check, ExitStatus, Marks, Outcome, RoundTrip, TrialKind, TrialRecord, Usage, Variant,
    WorkerRecord,
};
use phases::summary::{self, Configuration, Environment, Phase, RunSummary, TargetInfo};
use phases::{Bootstrap, stats, warn};
use spawn::worker_proto::{Reply, Request};

use super::env_info;
use crate::config::{self, Target};

/// The probe for `--probe-check`.
const PROBE: &str = include_str!("probe.py");

/// Environment variables removed from every worker: no importtime during
/// timed trials.
const REMOVED_ENV: &[&str] = &["PYTHONPROFILEIMPORTTIME"];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A target from coldstart.toml (default: its only target, or the
    /// built-in reference worker when there is no file).
    #[arg(long)]
    target: Option<String>,
    /// A second worker to compare with, interleaved A B / B A: a target name,
    /// or a command line in quotes ('python3 -m myworker').
    #[arg(long, value_name = "TARGET|'CMD'")]
    vs: Option<String>,
    /// Warm-up trials per variant: run and recorded, left out of the statistics.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Measured trials per variant [default: 10].
    #[arg(long, conflicts_with = "precision")]
    trials: Option<usize>,
    /// Run until the 95% CI half-width of the median ready time is within
    /// this share of the median (0.02 or 2%), between --min-trials and
    /// --max-trials.
    #[arg(long, value_parser = parse_share)]
    precision: Option<f64>,
    /// Fewest measured trials per variant with --precision.
    #[arg(long, default_value_t = 5)]
    min_trials: usize,
    /// Most measured trials per variant with --precision.
    #[arg(long, default_value_t = 100)]
    max_trials: usize,
    /// Health round trips per worker per trial [default: the target's `health`, 1].
    #[arg(long)]
    health: Option<usize>,
    /// Workers started at once per trial; `ready` is then the time until all are ready.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Output folder [default: bench-out/<UTC timestamp>/ under the workspace root].
    #[arg(long)]
    out: Option<PathBuf>,
    /// KEY=VALUE set for workers given on the command line (after `--` or
    /// as `--vs 'CMD'`); repeatable. Configured targets use their `env`.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// Changes within this share are not claimed (0.02 or 2%).
    #[arg(long, default_value = "0.02", value_parser = parse_share)]
    noise_threshold: f64,
    /// Bootstrap resamples for every confidence interval.
    #[arg(long, default_value_t = 10_000)]
    resamples: usize,
    /// Bootstrap seed (ChaCha8): the same records and seed give the same intervals.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// Instead of a benchmark, check the harness against an independent
    /// Python probe (subprocess, readline, time.monotonic), alternating on
    /// the same worker; prints both medians and their ratio.
    #[arg(long, conflicts_with_all = ["vs", "precision"])]
    probe_check: bool,
    /// The worker command, instead of a target.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
    /// After the trials: a serve phase (--requests, --rate, --duration,
    /// --request) and a memory view (--memory), each on a fresh worker.
    #[command(flatten)]
    serve: crate::serve::ServeArgs,
}

fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (s, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v / scale < 1.0 => Ok(v / scale),
        _ => Err(format!(
            "`{s}` is not a share between 0 and 1: write 0.02 or 2%"
        )),
    }
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// Splits a command line the way a POSIX shell would for plain words,
/// single and double quotes and backslashes (no expansions).
fn split_command(s: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => bail!("unclosed ' in `{s}`"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => bail!("unclosed \" in `{s}`"),
                        },
                        Some(c) => cur.push(c),
                        None => bail!("unclosed \" in `{s}`"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    cur.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// One side of the benchmark, ready to spawn.
struct Prepared {
    variant: Variant,
    target: Target,
    cmd: spawn::Command,
    info: TargetInfo,
    health: usize,
    concurrency: usize,
    policy: spawn::ShutdownPolicy,
}

fn refuse_importtime(t: &Target) -> Result<()> {
    let args = &t.command;
    let flagged = args
        .windows(2)
        .any(|w| w[0] == "-X" && w[1].starts_with("importtime"))
        || args.iter().any(|a| a.starts_with("-Ximporttime"));
    if flagged || t.env.contains_key("PYTHONPROFILEIMPORTTIME") {
        bail!(
            "target `{}` turns on importtime; bench times workers without it (it slows every import): remove -X importtime / PYTHONPROFILEIMPORTTIME, and use `cargo xtask importtime` to read import costs",
            t.name
        );
    }
    Ok(())
}

impl Prepared {
    fn new(variant: Variant, target: Target, args: &Args) -> Result<Prepared> {
        refuse_importtime(&target)?;
        let mut cmd = spawn::Command::new(&target.command[0]);
        cmd.args(&target.command[1..])
            .current_dir(&target.cwd)
            .stderr_tail_bytes(16 * 1024);
        for (k, v) in &target.env {
            cmd.env(k, v);
        }
        for k in REMOVED_ENV {
            cmd.env_remove(k);
        }
        let python = env_info::looks_like_python(&target.command[0])
            .then(|| env_info::python_info(&target.command[0], &target.env, &target.cwd));
        let info = TargetInfo {
            variant,
            name: target.name.clone(),
            origin: target.origin.to_owned(),
            command: target.command.clone(),
            display: target.display_command(),
            env: target.env.clone(),
            env_removed: REMOVED_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: target.cwd.display().to_string(),
            python,
        };
        Ok(Prepared {
            variant,
            health: args.health.unwrap_or(target.health),
            concurrency: args.concurrency,
            policy: spawn::ShutdownPolicy {
                ack_timeout: target.shutdown_timeout,
                exit_timeout: target.shutdown_timeout,
                grace: target.grace,
            },
            cmd,
            info,
            target,
        })
    }
}

/// Ctrl-C presses so far: 1 stops after the current trial, 2 kills now.
static INTERRUPTS: AtomicUsize = AtomicUsize::new(0);

fn interrupted() -> bool {
    INTERRUPTS.load(Ordering::SeqCst) > 0
}

fn install_ctrlc() -> Result<()> {
    ctrlc::set_handler(|| {
        let n = INTERRUPTS.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            eprintln!(
                "\ninterrupted: stopping after the current trial (Ctrl-C again to kill it now)"
            );
        } else {
            spawn::kill_all();
        }
    })
    .context("could not install the Ctrl-C handler")
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn exit_status(s: spawn::ExitStatus) -> Option<ExitStatus> {
    match s {
        spawn::ExitStatus::Code(c) => Some(ExitStatus::Code(c)),
        spawn::ExitStatus::Signal(s) => Some(ExitStatus::Signal(s)),
        _ => None,
    }
}

fn record_end(rec: &mut WorkerRecord, fin: &spawn::Finished) {
    rec.usage = fin.rusage.map(|u| Usage {
        user_ns: u.user.as_nanos() as u64,
        sys_ns: u.sys.as_nanos() as u64,
        max_rss_bytes: u.max_rss_bytes,
    });
    rec.exit = exit_status(fin.status);
    rec.escalation = match fin.escalation {
        spawn::Escalation::None => "none",
        spawn::Escalation::Term => "term",
        spawn::Escalation::Kill => "kill",
    }
    .to_owned();
    rec.noise_lines = fin.noise.len();
    rec.marks.shutdown_sent_ns = fin.shutdown.sent_at_ns;
    rec.marks.ack_read_ns = fin.shutdown.ack_at_ns;
    rec.marks.exited_ns = Some(fin.shutdown.exited_at_ns);
}

fn failed(rec: &mut WorkerRecord, check: Check, message: String) {
    // A worker killed by a second Ctrl-C did not fail by itself.
    let check = if INTERRUPTS.load(Ordering::SeqCst) > 1 {
        Check::Interrupted
    } else {
        check
    };
    rec.outcome = Outcome::Failed {
        check,
        message: clip(&message, 4000),
    };
}

fn record_error(rec: &mut WorkerRecord, e: spawn::Error, check: Check) {
    if let Some(fin) = e.finished.as_deref() {
        record_end(rec, fin);
    }
    if e.pid != 0 {
        rec.pid = Some(e.pid);
    }
    failed(rec, check, e.to_string());
}

/// One worker's life: spawn, ready, health round trips, shutdown, exit.
fn run_worker(p: &Prepared) -> WorkerRecord {
    let mut rec = WorkerRecord {
        pid: None,
        marks: Marks {
            spawned_ns: spawn::monotonic_ns(),
            ..Marks::default()
        },
        usage: None,
        rss_at_ready_bytes: None,
        exit: None,
        escalation: "none".to_owned(),
        noise_lines: 0,
        outcome: Outcome::Correct,
    };
    let mut w = match spawn::Worker::spawn(&p.cmd) {
        Ok(w) => w,
        Err(e) => {
            record_error(&mut rec, e, Check::Spawn);
            return rec;
        }
    };
    // Only a trial that already failed (a timeout) is ever dumped.
    crate::pyspy::arm_timeout_dump(&mut w, &p.target, &crate::tasks::project_root());
    rec.pid = Some(w.pid());
    rec.marks.spawned_ns = w.spawned_at_ns();
    match w.wait_ready(p.target.ready_timeout) {
        Ok(ready) => {
            rec.marks.ready_read_ns = Some(ready.read_at_ns);
            rec.marks.ready_t_ns = ready.value.t_ns;
            rec.rss_at_ready_bytes = w.rss_at_ready_bytes();
        }
        Err(e) => {
            record_error(&mut rec, e, Check::Ready);
            return rec;
        }
    }
    for _ in 0..p.health {
        match w.request(&Request::health(), p.target.request_timeout) {
            Ok(x) => {
                rec.marks.health.push(RoundTrip {
                    sent_ns: x.sent_at_ns,
                    received_ns: x.received_at_ns,
                });
                let problem = match &x.reply {
                    Reply::Health(h) if h.response.status.is_ok() => None,
                    Reply::Health(h) => Some(format!(
                        "health answered status `{}`, not `ok`, after the ready line",
                        h.response.status.as_str()
                    )),
                    other => Some(format!(
                        "health was answered with `{}`",
                        serde_json::to_string(other).unwrap_or_default()
                    )),
                };
                if let Some(msg) = problem {
                    let fin = w.kill();
                    record_end(&mut rec, &fin);
                    failed(&mut rec, Check::Health, msg);
                    return rec;
                }
            }
            Err(e) => {
                record_error(&mut rec, e, Check::Health);
                return rec;
            }
        }
    }
    match w.shutdown(&p.policy) {
        Ok(fin) => record_end(&mut rec, &fin),
        Err(e) => {
            let check = match (&e.kind, &e.phase) {
                (spawn::ErrorKind::FailedExit, _) => Check::ExitStatus,
                (_, spawn::Phase::Exit) => Check::Exit,
                _ => Check::ShutdownAck,
            };
            record_error(&mut rec, e, check);
        }
    }
    rec
}

/// One trial: `concurrency` workers at once.
fn run_trial(p: &Prepared, trial: usize, round: usize, kind: TrialKind) -> TrialRecord {
    let started_unix_ms = env_info::unix_ms();
    let started_ns = spawn::monotonic_ns();
    let workers = if p.concurrency == 1 {
        vec![run_worker(p)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..p.concurrency)
                .map(|_| s.spawn(|| run_worker(p)))
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

/// Picks the one target to bench from `--target`, `-- CMD` or the config.
fn pick(
    root: &Path,
    target: Option<&str>,
    command: &[String],
    extra_env: &[(String, String)],
) -> Result<Target> {
    let mut targets = config::resolve(root, target, command)?;
    if targets.len() > 1 {
        let names: Vec<_> = targets.iter().map(|t| t.name.as_str()).collect();
        bail!(
            "{} has {} targets ({}); pick one with --target NAME",
            config::CONFIG_FILE,
            targets.len(),
            names.join(", ")
        );
    }
    let mut t = targets.remove(0);
    if t.origin == "command line" {
        t.env.extend(extra_env.iter().cloned());
    }
    Ok(t)
}

/// `--vs`: a configured target's name (or `refworker`), else a command line.
fn pick_vs(root: &Path, vs: &str, extra_env: &[(String, String)]) -> Result<Target> {
    let configured = config::load(root)?;
    let is_name = match &configured {
        Some(ts) => ts.iter().any(|t| t.name == vs),
        None => vs == "refworker",
    };
    if is_name {
        return pick(root, Some(vs), &[], extra_env);
    }
    let argv = split_command(vs)?;
    if argv.is_empty() {
        bail!("--vs is empty: give a target name or a command line");
    }
    let mut t = pick(root, None, &argv, extra_env)?;
    t.name = "vs-command".to_owned();
    Ok(t)
}

fn out_dir(root: &Path, out: Option<&Path>, started_ms: u64) -> Result<PathBuf> {
    let dir = match out {
        Some(d) => d.to_path_buf(),
        None => {
            let base = root
                .join("bench-out")
                .join(env_info::folder_stamp(started_ms));
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
        bail!(
            "{} already holds a run (trials.jsonl); pick another --out or remove it",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir)
}

/// `trials.jsonl`: one line per trial, written and flushed as it ends.
struct TrialLog {
    file: File,
    path: PathBuf,
}

impl TrialLog {
    fn create(dir: &Path) -> Result<TrialLog> {
        let path = dir.join("trials.jsonl");
        let file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("could not create {}", path.display()))?;
        Ok(TrialLog { file, path })
    }

    fn append(&mut self, r: &TrialRecord) -> Result<()> {
        let mut line = serde_json::to_vec(r).context("a trial record did not serialise")?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .with_context(|| format!("could not append to {}", self.path.display()))
    }
}

/// The live line: median ready time and its CI half-width per variant.
fn live_message(records: &[TrialRecord], variants: &[Variant]) -> String {
    let boot = Bootstrap {
        resamples: 2_000,
        ..Bootstrap::default()
    };
    let parts: Vec<String> = variants
        .iter()
        .filter_map(|&v| {
            let (vals, _) = summary::series(records, Phase::Ready, v);
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
    boot: &Bootstrap,
) -> bool {
    variants.iter().all(|&v| {
        let (vals, _) = summary::series(records, Phase::Ready, v);
        stats::summarize(&vals, boot).is_ok_and(|s| warn::relative_half_width(&s) <= want)
    })
}

fn progress_bar(len: u64) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} trials  {msg}")
            .expect("a valid template"),
    );
    bar
}

pub fn run(args: Args) -> Result<ExitCode> {
    let root = super::project_root();
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if args.precision.is_some() && args.min_trials > args.max_trials {
        bail!(
            "--min-trials ({}) is above --max-trials ({})",
            args.min_trials,
            args.max_trials
        );
    }
    let a_target = pick(&root, args.target.as_deref(), &args.command, &args.env)?;
    if args.probe_check {
        return probe_check(a_target, &args);
    }
    crate::serve::check(&args.serve, &a_target)?;
    let mut sides = vec![Prepared::new(Variant::A, a_target, &args)?];
    if let Some(vs) = &args.vs {
        sides.push(Prepared::new(
            Variant::B,
            pick_vs(&root, vs, &args.env)?,
            &args,
        )?);
    }
    let variants: Vec<Variant> = sides.iter().map(|s| s.variant).collect();
    let boot = Bootstrap {
        resamples: args.resamples,
        seed: args.seed,
        level: 0.95,
    };
    let trials = match args.precision {
        Some(_) => None,
        None => Some(args.trials.unwrap_or(10)),
    };
    if trials == Some(0) {
        bail!("--trials must be at least 1");
    }
    let config = Configuration {
        warmup: args.warmup,
        trials,
        precision: args.precision,
        min_trials: if trials.is_some() {
            trials.unwrap_or(0)
        } else {
            args.min_trials
        },
        max_trials: trials.unwrap_or(args.max_trials),
        health: sides[0].health,
        concurrency: args.concurrency,
        interleaved: sides.len() > 1,
        bootstrap: boot,
        noise_threshold: args.noise_threshold,
        ready_timeout_s: sides[0].target.ready_timeout.as_secs_f64(),
        request_timeout_s: sides[0].target.request_timeout.as_secs_f64(),
        shutdown_timeout_s: sides[0].target.shutdown_timeout.as_secs_f64(),
        grace_s: sides[0].target.grace.as_secs_f64(),
    };

    let started_unix_ms = env_info::unix_ms();
    let at_start = env_info::load();
    let dir = out_dir(&root, args.out.as_deref(), started_unix_ms)?;
    let mut log = TrialLog::create(&dir)?;
    install_ctrlc()?;

    let per_variant_max = config.max_trials;
    let bar = progress_bar(((args.warmup + per_variant_max) * sides.len()) as u64);
    bar.set_message("warming up");
    let mut records: Vec<TrialRecord> = Vec::new();
    let loop_start = Instant::now();
    let mut order_flip = false;
    'rounds: for (kind, count) in [
        (TrialKind::Warmup, args.warmup),
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
            let order: Vec<&Prepared> = if order_flip {
                sides.iter().rev().collect()
            } else {
                sides.iter().collect()
            };
            order_flip = !order_flip;
            for side in order {
                if interrupted() {
                    break 'rounds;
                }
                let rec = run_trial(side, records.len(), round, kind);
                log.append(&rec)?;
                records.push(rec);
                bar.inc(1);
                if kind == TrialKind::Measured {
                    bar.set_message(live_message(&records, &variants));
                }
            }
        }
    }
    let loop_wall_s = loop_start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    spawn::kill_all();
    let was_interrupted = interrupted();
    // The serve phase and memory view: fresh workers after the timed
    // trials, never part of them.
    let extras = if args.serve.wanted() && !was_interrupted {
        let serve_sides: Vec<crate::serve::Side<'_>> = sides
            .iter()
            .map(|s| crate::serve::Side {
                variant: s.variant,
                target: &s.target,
                cmd: &s.cmd,
            })
            .collect();
        let extras =
            crate::serve::run_extras(&serve_sides, &args.serve, &dir, &boot, &interrupted)?;
        spawn::kill_all();
        extras
    } else {
        crate::serve::Extras::default()
    };

    let environment = Environment {
        tool: env_info::tool(&root),
        started_at: env_info::rfc3339(started_unix_ms),
        started_unix_ms,
        duration_s: (env_info::unix_ms().saturating_sub(started_unix_ms)) as f64 / 1e3,
        cpu_model: env_info::cpu_model(),
        cpu_count: env_info::cpu_count(),
        kernel: env_info::kernel(),
        at_start,
        at_end: env_info::load(),
        targets: sides.iter().map(|s| s.info.clone()).collect(),
    };
    let summary = RunSummary::build(&records, environment, config, was_interrupted, loop_wall_s)
        .context("could not summarise the trials")?;
    write_outputs(&dir, &summary, &records, &extras)?;
    print!("{}", report::bench::terminal::render(&summary));
    let serve_text = extras.markdown();
    if !serve_text.is_empty() {
        print!("\n{serve_text}");
    }
    if let Some((r, check, message)) = records.iter().find_map(|r| match &r.outcome {
        Outcome::Failed { check, message } if *check != Check::Interrupted => {
            Some((r, check, message))
        }
        _ => None,
    }) {
        eprintln!(
            "\nfirst failure, trial {} ({}, check `{}`):\n{message}",
            r.trial,
            r.variant,
            check.as_str()
        );
    }
    println!("\nwritten to {}", dir.display());
    Ok(if was_interrupted {
        ExitCode::from(130)
    } else if summary.trials.failed > 0 || extras.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_outputs(
    dir: &Path,
    summary: &RunSummary,
    records: &[TrialRecord],
    extras: &crate::serve::Extras,
) -> Result<()> {
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("could not write {}", path.display()))
    };
    write("summary.json", extras.summary_json(summary)?)?;
    write(
        "summary.md",
        report::bench::markdown::render(summary) + &extras.markdown(),
    )?;
    write(
        "hyperfine.json",
        report::bench::hyperfine::render(summary, records),
    )?;
    write(
        "phases.svg",
        extras.svg(&report::bench::svg::render(summary, records)),
    )?;
    Ok(())
}

/// Reads a run's `trials.jsonl`. A final line without its newline (a run
/// killed mid-write) is reported, not parsed.
pub fn read_trials(path: &Path) -> Result<Vec<TrialRecord>> {
    let file = File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    let mut out = Vec::new();
    let mut reader = BufReader::new(file);
    let mut line = String::new();
    let mut n = 0;
    loop {
        line.clear();
        let got = reader
            .read_line(&mut line)
            .with_context(|| format!("could not read {}", path.display()))?;
        if got == 0 {
            break;
        }
        n += 1;
        if !line.ends_with('\n') {
            eprintln!(
                "warning: {} line {n} is cut short (the run was killed while writing it); it is skipped",
                path.display()
            );
            break;
        }
        let rec = serde_json::from_str(&line)
            .with_context(|| format!("{} line {n} is not a trial record", path.display()))?;
        out.push(rec);
    }
    Ok(out)
}

/// `--probe-check`: bench's own trial and an independent Python probe,
/// alternating on the same worker, compared by their median ready times.
fn probe_check(target: Target, args: &Args) -> Result<ExitCode> {
    let side = Prepared::new(Variant::A, target, args)?;
    let rounds = args.trials.unwrap_or(20);
    let python = side
        .info
        .python
        .as_ref()
        .and_then(|p| p.executable.clone())
        .unwrap_or_else(|| "python3".to_owned());
    let dir = tempfile::tempdir().context("could not create a temp dir for the probe")?;
    let script = dir.path().join("probe.py");
    std::fs::write(&script, PROBE).context("could not write the probe")?;
    let mut child = std::process::Command::new(&python)
        .args(["-I", "-B"])
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start the probe with {python}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let mut env: BTreeMap<String, String> = side.target.env.clone();
    env.retain(|k, _| !REMOVED_ENV.contains(&k.as_str()));
    let cfg = serde_json::json!({
        "command": side.target.command,
        "env": env,
        "env_remove": REMOVED_ENV,
        "cwd": side.target.cwd,
    });
    writeln!(stdin, "{cfg}").context("could not configure the probe")?;
    // Per measured round: (bench's ready ms, the probe's ready ms).
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    let mut records = Vec::new();
    install_ctrlc()?;
    for i in 0..(args.warmup + rounds) {
        if interrupted() {
            break;
        }
        let kind = if i < args.warmup {
            TrialKind::Warmup
        } else {
            TrialKind::Measured
        };
        let mut one_probe = || -> Result<Option<f64>> {
            writeln!(stdin, "go").context("the probe stopped")?;
            let mut line = String::new();
            stdout.read_line(&mut line).context("the probe stopped")?;
            let v: serde_json::Value = serde_json::from_str(&line)
                .with_context(|| format!("the probe answered `{}`", line.trim_end()))?;
            Ok((v["ok"] == true).then(|| v["ready_s"].as_f64().unwrap_or(f64::NAN) * 1e3))
        };
        let one_bench = || run_trial(&side, records.len(), i, kind);
        // Alternate who goes first, as in an interleaved run.
        let (rec, probe) = if i % 2 == 0 {
            let r = one_bench();
            (r, one_probe()?)
        } else {
            let p = one_probe()?;
            (one_bench(), p)
        };
        let bench = rec
            .outcome
            .is_correct()
            .then(|| Phase::Ready.per_trial_ns(&rec).map(summary::ms))
            .flatten();
        match (kind, bench, probe) {
            (TrialKind::Measured, Some(b), Some(p)) => pairs.push((b, p)),
            (TrialKind::Measured, _, _) => {
                eprintln!("round {i}: a trial failed; the round is left out")
            }
            _ => {}
        }
        records.push(rec);
    }
    drop(stdin);
    let _ = child.wait();
    let boot = Bootstrap::default();
    let (bench_ms, probe_ms): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let b =
        stats::summarize(&bench_ms, &boot).context("no round where both trials were correct")?;
    let p =
        stats::summarize(&probe_ms, &boot).context("no round where both trials were correct")?;
    let cmp = phases::compare::paired(&probe_ms, &bench_ms, &boot, 0.05)
        .context("could not compare bench and probe")?;
    let diffs: Vec<f64> = pairs.iter().map(|(b, p)| b - p).collect();
    let diff = stats::summarize(&diffs, &boot).context("no paired rounds")?;
    let fmt = report::bench::fmt_ms;
    println!("worker: {}", side.info.display);
    let line = |who: &str, s: &phases::Stats| {
        println!(
            "{who} median ready {} [{}, {}] over {} rounds",
            fmt(s.median),
            fmt(s.median_ci.lo),
            fmt(s.median_ci.hi),
            s.n
        )
    };
    line("bench", &b);
    line("probe", &p);
    println!(
        "(probe: Python subprocess + readline + time.monotonic in {python}, alternating with bench on the same worker)"
    );
    println!(
        "per-round difference bench - probe: median {} [{}, {}]",
        fmt(diff.median),
        fmt(diff.median_ci.lo),
        fmt(diff.median_ci.hi)
    );
    let within = (cmp.ratio - 1.0).abs() <= 0.05;
    println!(
        "ratio of medians bench / probe (paired by round) = {} ({} 5% of each other)",
        report::bench::fmt_ratio(&cmp),
        if within { "within" } else { "not within" }
    );
    Ok(if within {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_parse_as_fractions_or_percentages() {
        assert_eq!(parse_share("0.02"), Ok(0.02));
        assert_eq!(parse_share("2%"), Ok(0.02));
        assert!(parse_share("0").is_err());
        assert!(parse_share("150%").is_err());
        assert!(parse_share("fast").is_err());
    }

    #[test]
    fn command_lines_split_like_a_shell() {
        let s = |x: &str| split_command(x).unwrap();
        assert_eq!(s("python3 -m w"), ["python3", "-m", "w"]);
        assert_eq!(
            s(r#"py -c 'import a; b' "x y" z\ w"#),
            ["py", "-c", "import a; b", "x y", "z w"]
        );
        assert_eq!(s("a ''"), ["a", ""]);
        assert!(split_command("a 'b").is_err());
    }

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
        assert!(err.contains("cargo xtask importtime"), "{err}");
    }
}
