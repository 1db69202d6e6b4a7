//! `coldstart bench`: a worker's start-up and shutdown over repeated fresh
//! trials (the harness's trial loop), with a progress bar on a terminal,
//! the summary table, and the run's files. `--vs` compares a second worker
//! interleaved. (The bench measured against an independent probe is the
//! workspace's `cargo xtask probe-check`, not a user's flag.)

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use harness::serve::{PoolOptions, ServeOptions};
use harness::trials::{self, Bench, BenchOptions};
use harness::{OnPress, Target};
use timeline::Variant;

use settings::Project;

/// A rendering of the run that `--output FORMAT=PATH` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The table printed on stdout.
    Text,
    /// `summary.md`: for a job summary or a pull-request comment.
    Markdown,
    /// `summary.json`: the run's summary.
    Json,
    /// `hyperfine.json`: hyperfine's export format.
    Hyperfine,
    /// The run on one timeline, Perfetto's protobuf trace: coldstart's
    /// waits, each worker's phases, the protocol's messages as flows.
    Perfetto,
    /// The same as Chrome's Trace Event JSON (chrome://tracing, speedscope).
    ChromeJson,
}

/// The bench's flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which worker: `--target NAME` or `-- CMD...`.
    #[command(flatten)]
    target: crate::args::TargetArgs,
    /// `--record`: the trials also stored as the current commit's run.
    #[command(flatten)]
    record: crate::args::RecordFlagArgs,
    /// A second worker to compare with, interleaved A B / B A: a target name,
    /// or a command line in quotes ('python3 -m myworker').
    #[arg(long, value_name = "TARGET|'CMD'")]
    vs: Option<String>,
    /// Warm-up trials per variant: run and recorded, left out of the statistics.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Measured trials per variant [default: 10; with --vs, rounds until the
    /// comparison is decided (see --max-rounds, --max-seconds)].
    #[arg(long, conflicts_with = "precision")]
    trials: Option<usize>,
    /// With --vs: the most interleaved rounds before the run stops undecided.
    #[arg(long, value_name = "N")]
    max_rounds: Option<usize>,
    /// With --vs: the most seconds of rounds before the run stops undecided.
    #[arg(long, value_name = "SECS")]
    max_seconds: Option<f64>,
    /// Run until the 95% CI half-width of the median ready time is within
    /// this share of the median (0.02 or 2%), between --min-trials and
    /// --max-trials.
    #[arg(long, value_parser = crate::args::parse_share)]
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
    /// Output folder [default: `bench-out/<UTC timestamp>/` under the project root].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write the run's report in FORMAT to PATH (repeatable), e.g.
    /// `--output markdown=summary.md`: the run's folder holds it too, this
    /// puts it where a CI job wants it.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = crate::outputs::parse::<Format>)]
    output: Vec<crate::outputs::Output<Format>>,
    /// KEY=VALUE set for workers given on the command line (after `--` or
    /// as `--vs 'CMD'`); repeatable. Configured targets use their `env`.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// --noise-threshold, --resamples, --seed.
    #[command(flatten)]
    stats: crate::args::StatsArgs,
    /// Each worker in a cgroup of its own with this CPU quota, in CPUs
    /// (0.5: half of one), as `docker run --cpus` or a pod's CPU limit
    /// sets it; both sides, over the targets' own `cpus`.
    #[arg(long, value_name = "N", value_parser = parse_cpus)]
    cpus: Option<f64>,
    /// Each worker in a cgroup of its own with this memory limit, swap
    /// off (512M, 1G; binary units), as `docker run --memory` sets it; a
    /// worker over it is reported OOM-killed. Both sides, over the
    /// targets' own `memory`. (The memory view is --memory-view.)
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    memory: Option<u64>,
    /// After the trials: a serve phase (--requests, --rate, --duration,
    /// --request) and a memory view (--memory-view), each on a fresh worker.
    #[command(flatten)]
    serve: ServeArgs,
}

/// The serve phase's and the memory view's flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Serve phase: send N requests after ready. Alone: a closed loop, one
    /// in flight. With --rate: N requests at that rate (instead of
    /// --duration).
    #[arg(long, value_name = "N")]
    requests: Option<usize>,
    /// Serve phase: an open loop offering R requests per second, whatever
    /// the replies do (latency counts from each scheduled send).
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Serve phase, closed loop: keep K requests in flight on the one
    /// worker (default 1), for workers that answer concurrently; replies
    /// are matched to requests by their `id`, else in order.
    #[arg(long, value_name = "K", requires = "requests", conflicts_with = "rate")]
    in_flight: Option<usize>,
    /// Serve phase: how long the open loop offers requests, seconds
    /// (default 10).
    #[arg(
        long,
        value_name = "SECONDS",
        requires = "rate",
        conflicts_with = "requests"
    )]
    duration: Option<f64>,
    /// The request to serve, a JSON object with an `op` (default: the
    /// target's `request` in the config; for the reference worker an
    /// `infer` of a short text; else `{"op": "health"}`). Each request gets
    /// an `id`.
    #[arg(long, value_name = "JSON")]
    request: Option<String>,
    /// Memory view: one more worker, untimed, with tracemalloc from
    /// interpreter start: traced memory beside RSS at ready, after the
    /// serve phase and at exit, and the top allocation sites at ready.
    #[arg(long)]
    memory_view: bool,
    /// Serve phase through a pool: N fresh workers behind a dispatcher
    /// that hands each request of the open loop (--rate) to a free worker;
    /// latency counts from each scheduled arrival, queue wait included.
    #[arg(long, value_name = "N", requires = "rate")]
    pool: Option<usize>,
    /// With --pool: SIGKILL one worker this many seconds into the load and
    /// start a replacement at once; the requests that arrive until it is
    /// ready are reported against those before.
    #[arg(long, value_name = "SECONDS", requires = "pool")]
    replace_at: Option<f64>,
    /// With --pool: reject a request that waited this many ms for a free
    /// worker (counted as rejected, never dropped).
    #[arg(long, value_name = "MS", requires = "pool")]
    max_wait: Option<f64>,
    /// With --pool: reject an arrival that finds N requests queued.
    #[arg(long, value_name = "N", requires = "pool")]
    queue_cap: Option<usize>,
    /// With --pool: add one worker when more than D requests are queued,
    /// as an autoscaler would; the requests that arrive until it is ready
    /// are reported against those before.
    #[arg(
        long,
        value_name = "D",
        requires = "pool",
        conflicts_with = "replace_at"
    )]
    scale_at_depth: Option<usize>,
}

fn parse_cpus(s: &str) -> Result<f64, String> {
    timeline::Limits::parse_cpus(s).map_err(|e| e.to_string())
}

fn parse_memory(s: &str) -> Result<u64, String> {
    timeline::Limits::parse_memory(s).map_err(|e| e.to_string())
}

/// `--cpus` and `--memory` over a target's own limits, key by key.
fn with_limits(mut t: Target, args: &Args) -> Target {
    t.limits.cpus = args.cpus.or(t.limits.cpus);
    t.limits.memory_bytes = args.memory.or(t.limits.memory_bytes);
    t
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

/// A command line's `--env` additions.
fn with_env(mut t: Target, extra: &[(String, String)]) -> Target {
    if t.origin == harness::Origin::CommandLine {
        t.env.extend(extra.iter().cloned());
    }
    t
}

/// `--vs`: a configured target's name (or the built-in default's), else a
/// command line split like a POSIX shell would.
fn pick_vs(project: &Project, vs: &str, extra: &[(String, String)]) -> Result<Target> {
    let is_name = match (&project.config, &project.default) {
        (Some(c), _) => c.targets.iter().any(|t| t.name == vs),
        (None, Some(d)) => d.name == vs,
        (None, None) => false,
    };
    if is_name {
        return Ok(with_env(project.one_target(Some(vs), &[])?, extra));
    }
    let Some(argv) = shlex::split(vs) else {
        bail!("--vs `{vs}` has an unclosed quote or a trailing backslash");
    };
    if argv.is_empty() {
        bail!("--vs is empty: give a target name or a command line");
    }
    let mut t = with_env(project.one_target(None, &argv)?, extra);
    t.name = "vs-command".to_owned();
    Ok(t)
}

/// Runs the bench.
pub fn run(args: Args, project: &Project) -> Result<ExitCode> {
    let a = with_env(args.target.one_target(project)?, &args.env);
    let a = with_limits(a, &args);
    if args.record.record && args.vs.is_some() {
        bail!("--record stores one worker's trials as the current commit's: drop --vs");
    }
    let b = match &args.vs {
        Some(vs) => Some(with_limits(pick_vs(project, vs, &args.env)?, &args)),
        None => None,
    };
    let b_name = b.as_ref().map(|t| t.name.clone());
    let started_ms = harness::env::unix_ms();
    // Every flag is checked before the output folder is made.
    let recorded = a.clone();
    let bench = Bench::new(a, b, options(&args, project))?;
    let bench = bench.write_to(trials::out_dir(
        &project.root,
        args.out.as_deref(),
        started_ms,
    )?);
    let interrupt = crate::signals::interrupt(OnPress::FinishThenKill)?;
    let run = bench.run(
        &interrupt,
        &mut crate::progress::Bar(indicatif::ProgressBar::hidden()),
    )?;
    let names = [recorded.name.clone(), b_name.unwrap_or_default()];
    let label = move |v: Variant| names[usize::from(v == Variant::B)].clone();
    let render = |format: Format| render(format, &run, &label);
    print!("{}", String::from_utf8_lossy(&render(Format::Text)?));
    crate::outputs::write_all(&args.output, render)?;
    print_end(&run, &interrupt);
    if args.record.record {
        record(&args.record, project, &recorded, &run)?;
    }
    Ok(ExitCode::from(run.exit_code()))
}

/// The bench's options from its flags (the output folder is set apart,
/// once every flag is checked).
fn options(args: &Args, project: &Project) -> BenchOptions {
    BenchOptions {
        warmup: args.warmup,
        trials: args.trials,
        precision: args.precision,
        min_trials: args.min_trials,
        max_trials: args.max_trials,
        health: args.health,
        concurrency: args.concurrency,
        noise_threshold: args.stats.noise_threshold,
        // With --vs and no fixed count: rounds until the question is answered.
        sequential: Some(phases::sequential::StopRule::with_budgets(
            args.stats.noise_threshold,
            args.max_rounds,
            args.max_seconds,
        )),
        bootstrap: args.stats.resampling(),
        serve: ServeOptions {
            requests: args.serve.requests,
            rate: args.serve.rate,
            duration: args.serve.duration,
            request: args.serve.request.clone(),
            in_flight: args.serve.in_flight,
            memory: args.serve.memory_view,
            pool: args.serve.pool.map(|workers| PoolOptions {
                workers,
                replace_at: args.serve.replace_at,
                max_wait_ms: args.serve.max_wait,
                queue_cap: args.serve.queue_cap,
                scale_at_depth: args.serve.scale_at_depth,
            }),
        },
        out: PathBuf::new(),
        root: project.root.clone(),
    }
}

/// The run's report in `format`, `label` naming each variant's target.
fn render(
    format: Format,
    run: &trials::BenchRun,
    label: &dyn Fn(Variant) -> String,
) -> Result<Vec<u8>> {
    let trace = || {
        trials::trace::trace_of(
            &run.records,
            &run.serve_workers,
            &run.requests,
            std::process::id(),
            label,
        )
    };
    Ok(match format {
        Format::Text => {
            let mut text = report::bench::terminal::render(&run.summary);
            let serve_text = report::bench::markdown::serve_sections(&run.summary);
            if !serve_text.is_empty() {
                text.push('\n');
                text.push_str(&serve_text);
            }
            text.into_bytes()
        }
        Format::Markdown => report::bench::markdown::render(&run.summary).into_bytes(),
        Format::Json => report::bench::json(&run.summary).into_bytes(),
        Format::Hyperfine => {
            report::bench::hyperfine::render(&run.summary, &run.records).into_bytes()
        }
        Format::Perfetto => trace::perfetto::to_protobuf(&trace())?,
        Format::ChromeJson => trace::chrome::to_json(&trace())?.into_bytes(),
    })
}

/// After the report: the first failure, where the files went, any that
/// could not be written, and an interrupt's note.
fn print_end(run: &trials::BenchRun, interrupt: &harness::Interrupt) {
    if let Some((r, stage, message)) = run.first_failure() {
        eprintln!(
            "\nfirst failure, trial {} ({}, at {stage}):\n{message}",
            r.trial, r.variant,
        );
    }
    println!("\nwritten to {}", run.dir.display());
    for m in &run.missing {
        eprintln!(
            "error: could not write {}: {}",
            run.dir.join(m.name).display(),
            m.error
        );
    }
    if !run.missing.is_empty() {
        let names: Vec<&str> = run.missing.iter().map(|m| m.name).collect();
        eprintln!(
            "missing from {}: {} (the results above and the other files are whole; free some space and run again)",
            run.dir.display(),
            names.join(", ")
        );
    }
    if run.interrupted() {
        eprintln!(
            "interrupted by {}: the bench stopped after {} trial(s); the results above and in {} are of the trials it finished",
            crate::signals::signal_name(interrupt),
            run.summary.trials.run,
            run.dir.display()
        );
    }
}

/// `--record`: the run's trials stored as the current commit's.
fn record(
    args: &crate::args::RecordFlagArgs,
    project: &Project,
    target: &Target,
    run: &trials::BenchRun,
) -> Result<()> {
    if run.interrupted() {
        eprintln!("--record: not recorded, the bench was interrupted");
        return Ok(());
    }
    let top = harness::diff::git::toplevel(&project.root)?;
    let stored = harness::history::current_run(&top, target, run.records.clone())?;
    crate::history::store_runs(&args.store, project, &[stored])
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_lines_split_like_a_shell() {
        let s = |x: &str| shlex::split(x).unwrap();
        assert_eq!(s("python3 -m w"), ["python3", "-m", "w"]);
        assert_eq!(
            s(r#"py -c 'import a; b' "x y" z\ w"#),
            ["py", "-c", "import a; b", "x y", "z w"]
        );
        assert_eq!(s("a ''"), ["a", ""]);
        assert!(shlex::split("a 'b").is_none());
    }
}
