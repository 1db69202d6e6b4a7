//! `cargo xtask bench-parser`: throughput and peak memory of the whole
//! `cargo xtask importtime BIG.log --format top|json` process on a large
//! log of generated sessions shaped like real torch and transformers logs
//! ([`shapes`]) and the project's fixture logs, side by side with tuna's
//! `read_import_profile` on the same log less the lines tuna cannot read
//! (cached `=2` lines; throughput is in MB of each one's own file).

mod shapes;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};

use super::project_root;

const TUNA: &str = "tuna==0.5.15";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Size of the generated log in MB (at least 50 for a meaningful figure).
    #[arg(long, default_value_t = 112)]
    pub size_mb: u64,
    /// Seed of the log generator (the same seed writes the same log).
    #[arg(long, default_value_t = 16)]
    pub seed: u64,
    /// Measured runs per contender (one more unmeasured warm-up run each;
    /// 0 with `--keep` writes the logs only).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Python used to create the venv that holds tuna.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// Write the logs into this directory and keep them (default: a
    /// temporary directory).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Skip tuna.
    #[arg(long)]
    pub no_tuna: bool,
    /// Another xtask binary (a build from before a change) timed on the
    /// same log with `--format top`, interleaved with the others.
    #[arg(long, value_name = "XTASK")]
    pub baseline: Option<PathBuf>,
}

/// One measured process run.
struct Run {
    seconds: f64,
    /// User plus system CPU time of the child (wait4), for a loaded machine.
    cpu_seconds: f64,
    max_rss_bytes: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.runs == 0 && args.keep.is_none() {
        bail!("--runs must be at least 1 (or 0 with --keep, to write the logs only)");
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let dir = args.keep.as_deref().unwrap_or(dir.path());
    let big = dir.join("BIG.log");
    let twin = dir.join("BIG-tuna.log");
    let w = build_log(&big, &twin, args.size_mb * 1_000_000, args.seed)?;
    let (size, mb) = (w.bytes, w.bytes as f64 / 1e6);
    println!(
        "bench-parser: {mb:.1} MB log (seed {}): {} generated sessions with {} imports and {} cached lines, \
         fixture logs {:.1} MB; tuna's copy without the lines it cannot read {:.1} MB; {} runs each after a warm-up, interleaved",
        args.seed,
        w.sessions,
        w.entries,
        w.cached,
        w.fixture_bytes as f64 / 1e6,
        w.tuna_bytes as f64 / 1e6,
        args.runs
    );
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {cpus} cpus, load {}", load());
    if args.runs == 0 {
        return Ok(ExitCode::SUCCESS);
    }

    let (mut contenders, tuna) = contenders(&args, &big, &twin)?;

    // Interleaved (A B C A B C ...), so load changes hit every contender
    // alike; round 0 is a warm-up and is not counted. A process that
    // churned through memory (tuna's Python, 550 MB; a parse before the
    // change) leaves the machine in a state the next one can pay for: the
    // first parse after tuna took up to 1.5 times the CPU time of the one
    // after it. So each parse is run once, not counted, right before its
    // timed run, and meets the machine as the previous one left it, not as
    // another contender did. Tuna, which takes seconds, is not.
    let mut runs: Vec<Vec<Run>> = contenders.iter().map(|_| Vec::new()).collect();
    let mut tuna_inner: Vec<f64> = Vec::new();
    for round in 0..=args.runs {
        for (i, (_, cmd)) in contenders.iter_mut().enumerate() {
            let is_tuna = tuna && i == 2;
            if !is_tuna {
                once(cmd, false)?;
            }
            let (run, stdout) = once(cmd, is_tuna)?;
            if round > 0 {
                if is_tuna {
                    let inner = String::from_utf8_lossy(&stdout).trim().parse::<f64>();
                    tuna_inner.push(
                        inner
                            .with_context(|| format!("tuna's timing script printed {stdout:?}"))?,
                    );
                }
                runs[i].push(run);
            }
        }
    }
    let medians: Vec<f64> = contenders
        .iter()
        .zip(&runs)
        .enumerate()
        .map(|(i, ((label, _), runs))| match i {
            2 if tuna => report(label, w.tuna_bytes as f64 / 1e6, w.tuna_bytes, runs),
            _ => report(label, mb, size, runs),
        })
        .collect();
    let tuna_fn = tuna.then(|| tuna_ratios(&w, mb, &runs, &tuna_inner, &medians));
    if args.baseline.is_some() {
        let last = medians.len() - 1;
        println!(
            "the baseline's --format top: {:.2}x slower than this build's (ratio of medians){}",
            medians[0] / medians[last],
            tuna_fn.map_or(String::new(), |f| format!(
                ", {:.1}x tuna's function",
                medians[last] / f
            ))
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What is timed: coldstart's parser in two formats, and tuna's reader
/// when its Python is found (`true` then).
fn contenders(
    args: &Args,
    big: &Path,
    twin: &Path,
) -> anyhow::Result<(Vec<(String, Command)>, bool)> {
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    let mut contenders: Vec<(String, Command)> = Vec::new();
    for format in ["top", "json"] {
        let mut cmd = Command::new(&exe);
        cmd.args(["importtime"]).arg(big).args(["--format", format]);
        contenders.push((
            format!("xtask importtime --format {format} (whole process)"),
            cmd,
        ));
    }
    let python = match args.no_tuna {
        true => Err(anyhow::anyhow!("skipped (--no-tuna)")),
        false => tuna_python(&args.python),
    };
    let tuna = python.is_ok();
    match python {
        Err(err) => println!("tuna: not measured: {err:#}"),
        Ok(py) => {
            let script = "import sys, time\nfrom tuna._import_profile import read_import_profile\n\
                          t = time.perf_counter()\nread_import_profile(sys.argv[1])\n\
                          print(time.perf_counter() - t)\n";
            let mut cmd = Command::new(&py);
            cmd.args(["-c", script]).arg(twin);
            let label = "tuna read_import_profile (whole python process)";
            contenders.push((label.to_owned(), cmd));
        }
    }
    if let Some(baseline) = &args.baseline {
        let mut cmd = Command::new(baseline);
        cmd.args(["importtime"]).arg(big).args(["--format", "top"]);
        let label = format!("baseline {} importtime --format top", baseline.display());
        contenders.push((label, cmd));
    }

    Ok((contenders, tuna))
}

/// tuna's function alone (timed inside Python) and the ratios of
/// coldstart's medians to it, overall and round by round; returns the
/// function's median throughput.
fn tuna_ratios(
    w: &shapes::Written,
    mb: f64,
    runs: &[Vec<Run>],
    tuna_inner: &[f64],
    medians: &[f64],
) -> f64 {
    let fn_runs: Vec<Run> = tuna_inner
        .iter()
        .zip(&runs[2])
        .map(|(&s, r)| Run {
            seconds: s,
            cpu_seconds: s,
            max_rss_bytes: r.max_rss_bytes,
        })
        .collect();
    let tuna_fn = report(
        "tuna read_import_profile (the function alone, timed inside python)",
        w.tuna_bytes as f64 / 1e6,
        w.tuna_bytes,
        &fn_runs,
    );
    println!(
        "ratio of medians: --format top is {:.1}x tuna's function ({:.1}x its process); --format json is {:.1}x tuna's function",
        medians[0] / tuna_fn,
        medians[0] / medians[2],
        medians[1] / tuna_fn
    );
    // The same ratio within each round (the two ran back to back).
    let mut paired: Vec<f64> = (runs[0].iter().zip(&fn_runs))
        .map(|(ours, t)| (mb / ours.seconds) / (w.tuna_bytes as f64 / 1e6 / t.seconds))
        .collect();
    paired.sort_by(f64::total_cmp);
    println!(
        "per round: --format top is {:.1}x tuna's function (median; min {:.1}x, max {:.1}x)",
        median_of(&paired),
        paired[0],
        paired[paired.len() - 1]
    );
    tuna_fn
}

/// Write the generated log to `path` and tuna's copy to `twin`, with
/// every fixture log of `tests/fixtures/importtime` interleaved.
fn build_log(path: &Path, twin: &Path, target: u64, seed: u64) -> anyhow::Result<shapes::Written> {
    let dir = project_root().join("tests/fixtures/importtime");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .and_then(|d| d.map(|e| e.map(|e| e.path())).collect())
        .with_context(|| format!("listing {}", dir.display()))?;
    names.retain(|p| p.extension().is_some_and(|e| e == "log"));
    names.sort();
    let mut chunk = Vec::new();
    for p in &names {
        chunk.extend(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?);
    }
    let create = |p: &Path| std::fs::File::create(p).map(std::io::BufWriter::new);
    let written = (|| {
        let (mut out, mut tuna) = (create(path)?, create(twin)?);
        let w = shapes::write(&mut out, &mut tuna, target, seed, &chunk)?;
        out.flush()?;
        tuna.flush()?;
        Ok::<_, std::io::Error>(w)
    })();
    written.with_context(|| format!("writing {} and {}", path.display(), twin.display()))
}

/// Run `cmd` once: wall time from spawn to reaping, CPU time and peak RSS
/// from `wait4` on that very child; returns its stdout too when `keep`
/// (else empty). A rendering's output is never read back: a spawned
/// child's peak RSS starts at this process's own peak (the kernel carries
/// it over the exec), so a large read here would be every later child's
/// floor.
fn once(cmd: &mut Command, keep: bool) -> anyhow::Result<(Run, Vec<u8>)> {
    let stdout = tempfile::NamedTempFile::new().context("creating a temporary file")?;
    let started = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(
            stdout.reopen().context("opening the temporary file")?,
        ))
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let (status, cpu_seconds, max_rss_bytes) = wait4(child.id())?;
    let seconds = started.elapsed().as_secs_f64();
    if status != 0 {
        bail!("{cmd:?} failed (wait status {status})");
    }
    let out = match keep {
        true => std::fs::read(stdout.path()).context("reading the run's output")?,
        false => Vec::new(),
    };
    Ok((
        Run {
            seconds,
            cpu_seconds,
            max_rss_bytes,
        },
        out,
    ))
}

/// Reap `pid` with `wait4`: (wait status, user + system CPU seconds, peak
/// RSS in bytes).
fn wait4(pid: u32) -> anyhow::Result<(i32, f64, u64)> {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own unreaped child; the pointers are valid.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if r == pid as libc::pid_t {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("wait4 on the measured child");
        }
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    // ru_maxrss is in kilobytes on Linux.
    Ok((status, cpu, usage.ru_maxrss as u64 * 1024))
}

/// Print one contender's figures; returns its median throughput in MB/s.
fn report(label: &str, mb: f64, size: u64, runs: &[Run]) -> f64 {
    let mut rates: Vec<f64> = runs.iter().map(|r| mb / r.seconds).collect();
    rates.sort_by(f64::total_cmp);
    let median = median_of(&rates);
    let mut cpu_rates: Vec<f64> = runs.iter().map(|r| mb / r.cpu_seconds.max(1e-9)).collect();
    cpu_rates.sort_by(f64::total_cmp);
    let rss = runs.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0);
    println!(
        "{label}:\n  wall: median {median:.1} MB/s (min {:.1}, max {:.1}, {} runs); per CPU second: median {:.1} MB/s; peak RSS {:.1} MB = {:.2}x the file",
        rates[0],
        rates[rates.len() - 1],
        rates.len(),
        median_of(&cpu_rates),
        rss as f64 / 1e6,
        rss as f64 / size as f64
    );
    median
}

/// A Python with tuna importable (a cached venv, [`super::venv::tool_python`]).
fn tuna_python(python: &str) -> anyhow::Result<PathBuf> {
    super::venv::tool_python(
        python,
        "bench-parser-tuna",
        &[TUNA],
        "import tuna._import_profile",
    )
}

/// The median of a non-empty slice (the statistics crate's one median).
fn median_of(v: &[f64]) -> f64 {
    phases::stats::median(v).unwrap_or(f64::NAN)
}

/// The machine's load averages (1, 5, 15 minutes), for a benchmark's header.
pub(super) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose output is large leaves no floor under the next run's
    /// peak RSS: a child spawned after a 64 MB output was read back here
    /// reported at least 64 MB however small it was.
    #[test]
    fn a_large_output_is_no_floor_under_the_next_runs_peak() {
        let mut big = Command::new("head");
        big.args(["-c", "64000000", "/dev/zero"]);
        let (_, out) = once(&mut big, false).unwrap();
        assert!(out.is_empty());
        let (small, _) = once(&mut Command::new("true"), false).unwrap();
        assert!(
            small.max_rss_bytes < 32_000_000,
            "{} bytes",
            small.max_rss_bytes
        );
    }
}
