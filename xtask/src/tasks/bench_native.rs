//! `cargo xtask bench-native`: what one native sample of a Python worker
//! costs, `coldstart record --native` beside `py-spy record --native`,
//! measured the same way on the same process.
//!
//! The process is a Python loop that has imported the named modules (by
//! default numpy, whose BLAS is a large shared library; pass `--import
//! torch,transformers` with a Python that has them for the ML worker) and
//! calls into them (torch's matmul where torch is imported, else numpy's), so every stack has native frames under Python ones.
//! Each round runs, in alternating order, nothing (the process alone), then
//! each tool for `--duration` seconds at `--rate` Hz, a rate neither keeps
//! on such a process: the samples each achieves say what a sample costs.
//! A native sample stops the process while it is unwound, so the process's
//! own CPU share drops while it is read: its share alone minus its share
//! under the tool, times the recording's wall time, is the time it stood
//! stopped, and that over the samples is the cost of one sample to the
//! process. Both are printed per round, then medians and the spread, and
//! the ratio of the two tools' costs per round.
//!
//! The CPU share is the process's `utime + stime` (`/proc/PID/stat`) over
//! the wall time; on a loaded machine a runnable process waits for a CPU
//! as well, so quote figures with the load the run prints.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::project_root;
use super::venv::tool_python;

/// The py-spy the figures are compared with, from PyPI.
const PY_SPY: &str = "py-spy==0.4.3";
/// The default sampled process's native library, pinned as the test venv
/// pins it.
const NUMPY: &str = "numpy==2.4.6";

/// The sampled process: imports, then a loop through Python into them.
const LOOP: &str = r#"
import importlib, sys
mods = [importlib.import_module(m) for m in sys.argv[1].split(",") if m]
torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
if torch is not None:
    torch.set_num_threads(1)
    a = torch.ones((32, 32))
    native_work = lambda: a @ a
elif np is not None:
    a = np.ones((32, 32))
    native_work = lambda: np.dot(a, a)
else:
    native_work = lambda: sorted(range(3000), key=lambda x: -x)
def python_work():
    t = 0
    for i in range(3000):
        t += i * i
    return t
print("ready", flush=True)
while True:
    python_work()
    native_work()
"#;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The Python that runs the sampled loop (default: the benchmark's own
    /// venv, made from `python3` with py-spy and numpy, cached in the
    /// temporary folder).
    #[arg(long)]
    pub python: Option<String>,
    /// Modules the sampled process imports first, comma-separated.
    #[arg(long, default_value = "numpy")]
    pub import: String,
    /// Seconds each tool records in each round.
    #[arg(long, default_value_t = 5)]
    pub duration: u64,
    /// The rate asked of both tools, Hz.
    #[arg(long, default_value_t = 100)]
    pub rate: u32,
    /// Rounds (each: alone, coldstart, py-spy, in alternating order).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// A coldstart built with `--features native` (default: built here,
    /// `cargo build --release -p coldstart --features native`).
    #[arg(long, value_name = "PATH")]
    pub coldstart: Option<PathBuf>,
}

/// One tool's recording in one round.
#[derive(Debug, Clone, Copy)]
struct Reading {
    samples: u64,
    wall_s: f64,
    /// The process's CPU time over the wall time while it was read.
    share: f64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.rounds == 0 || args.duration == 0 || args.rate == 0 {
        bail!("--rounds, --duration and --rate must be at least 1");
    }
    let coldstart = match &args.coldstart {
        Some(path) => path.clone(),
        None => build_coldstart()?,
    };
    let tools = tool_python(
        "python3",
        "bench-native",
        &[PY_SPY, NUMPY],
        "import numpy, os, sys; sys.exit(not os.path.exists(os.path.join(os.path.dirname(sys.executable), 'py-spy')))",
    )?;
    let py_spy = tools.with_file_name("py-spy");
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| tools.display().to_string());
    let mut target = Target::start(&python, &args.import)?;
    println!(
        "bench-native: {} importing [{}], pid {}; each tool at --rate {} for {} s, {} rounds; load {}",
        python,
        args.import,
        target.pid(),
        args.rate,
        args.duration,
        args.rounds,
        load()
    );
    let (mut ours, mut theirs, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let base = target.share_over(args.duration as f64)?;
        let ours_cmd = record_cmd(&coldstart, &args, target.pid());
        let theirs_cmd = py_spy_cmd(&py_spy, &args, target.pid());
        let (o, t) = if round % 2 == 0 {
            let o = target.read_with(ours_cmd, coldstart_samples)?;
            (o, target.read_with(theirs_cmd, py_spy_samples)?)
        } else {
            let t = target.read_with(theirs_cmd, py_spy_samples)?;
            (target.read_with(ours_cmd, coldstart_samples)?, t)
        };
        println!(
            "round {}: alone {:.3} CPU share; coldstart {}; py-spy {}",
            round + 1,
            base,
            describe(&o, base),
            describe(&t, base)
        );
        alone.push(base);
        ours.push(o);
        theirs.push(t);
    }
    let cost = |r: &[Reading]| -> Vec<f64> {
        r.iter()
            .zip(&alone)
            .map(|(x, base)| per_sample_ms(x, *base))
            .collect()
    };
    let (ours_ms, theirs_ms) = (cost(&ours), cost(&theirs));
    let hz =
        |r: &[Reading]| -> Vec<f64> { r.iter().map(|x| x.samples as f64 / x.wall_s).collect() };
    println!(
        "samples per second achieved: coldstart {}, py-spy {}",
        spread(&hz(&ours)),
        spread(&hz(&theirs))
    );
    println!(
        "stopped time per sample (ms): coldstart {}, py-spy {}",
        spread(&ours_ms),
        spread(&theirs_ms)
    );
    let ratios: Vec<f64> = ours_ms
        .iter()
        .zip(&theirs_ms)
        .filter(|(_, t)| **t > 0.0)
        .map(|(o, t)| o / t)
        .collect();
    if ratios.is_empty() {
        println!(
            "coldstart / py-spy, per sample: not resolved (py-spy cost the process no CPU share measurable here)"
        );
    } else {
        println!(
            "coldstart / py-spy, per sample, per round: {} in {} of {} rounds",
            spread(&ratios),
            ratios.len(),
            args.rounds
        );
    }
    for (name, readings) in [("coldstart", &ours), ("py-spy", &theirs)] {
        if readings
            .iter()
            .all(|r| r.samples as f64 / r.wall_s >= 0.9 * f64::from(args.rate))
        {
            println!(
                "{name} kept --rate {} in every round: its cost a sample is below what this rate resolves (raise --rate)",
                args.rate
            );
        }
    }
    println!("load after {}", load());
    Ok(ExitCode::SUCCESS)
}

/// `coldstart record PID --native` at the asked rate, collapsed stacks to
/// a file that is not kept.
fn record_cmd(coldstart: &Path, args: &Args, pid: u32) -> Command {
    let mut cmd = Command::new(coldstart);
    cmd.args(["record", &pid.to_string(), "--native"])
        .args(["--rate", &args.rate.to_string()])
        .args(["--duration", &args.duration.to_string()])
        .args(["--format", "collapsed", "-o", "/dev/null"]);
    cmd
}

/// `py-spy record --pid PID --native` at the asked rate.
fn py_spy_cmd(py_spy: &Path, args: &Args, pid: u32) -> Command {
    let mut cmd = Command::new(py_spy);
    cmd.args(["record", "--pid", &pid.to_string(), "--native"])
        .args(["--rate", &args.rate.to_string()])
        .args(["--duration", &args.duration.to_string()])
        .args(["--format", "raw", "-o", "/dev/null"]);
    cmd
}

/// The samples `coldstart record` says it took: `recorded N samples`.
fn coldstart_samples(output: &str) -> Option<u64> {
    let rest = output.split("recorded ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The samples `py-spy record` says it took: `Samples: N`.
fn py_spy_samples(output: &str) -> Option<u64> {
    let rest = output.split("Samples: ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The time the process stood stopped per sample, ms: its CPU share lost
/// to the tool, over the samples.
fn per_sample_ms(r: &Reading, alone: f64) -> f64 {
    (alone - r.share).max(0.0) * r.wall_s * 1e3 / r.samples.max(1) as f64
}

fn describe(r: &Reading, alone: f64) -> String {
    format!(
        "{} samples in {:.2} s ({:.1} Hz), CPU share {:.3}, {:.2} ms stopped a sample",
        r.samples,
        r.wall_s,
        r.samples as f64 / r.wall_s,
        r.share,
        per_sample_ms(r, alone)
    )
}

/// `median (min..max)`, the median the project's statistics compute.
fn spread(values: &[f64]) -> String {
    let median = phases::stats::median(values).unwrap_or(f64::NAN);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("median {median:.3} ({min:.3}..{max:.3})")
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Builds the release coldstart with its `native` feature in this
/// workspace's target folder.
fn build_coldstart() -> Result<PathBuf> {
    let root = project_root();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "coldstart",
            "--features",
            "native",
        ])
        .current_dir(&root)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!(
            "cargo build --release -p coldstart --features native failed; the native feature needs libunwind's headers (Debian: libunwind-dev)"
        );
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    Ok(target.join("release/coldstart"))
}

/// The sampled process, killed when dropped.
struct Target {
    child: Child,
}

impl Target {
    fn start(python: &str, import: &str) -> Result<Target> {
        let mut child = Command::new(python)
            .args(["-c", LOOP, import])
            // One thread of BLAS: the process's CPU share is then one loop's.
            .env("OPENBLAS_NUM_THREADS", "1")
            .env("OMP_NUM_THREADS", "1")
            .env("MKL_NUM_THREADS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {python}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
        let target = Target { child };
        if line.trim() != "ready" {
            bail!("the sampled process did not start (could it import [{import}]?)");
        }
        Ok(target)
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's CPU time so far, seconds.
    fn cpu_s(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .context("the sampled process ended")?;
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (Some(utime), Some(stime)) = (ticks(11), ticks(12)) else {
            bail!("cannot read /proc/{}/stat", self.pid());
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Ok((utime + stime) as f64 / hz)
    }

    /// The process's CPU share over a window of `seconds` with nothing
    /// reading it (the window is the measurement, not a wait for anything).
    fn share_over(&mut self, seconds: f64) -> Result<f64> {
        let (c0, t0) = (self.cpu_s()?, Instant::now());
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        Ok((self.cpu_s()? - c0) / t0.elapsed().as_secs_f64())
    }

    /// Runs `cmd` against the process and reads its sample count from its
    /// output with `samples`.
    fn read_with(&mut self, mut cmd: Command, samples: fn(&str) -> Option<u64>) -> Result<Reading> {
        let (c0, t0) = (self.cpu_s()?, Instant::now());
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {:?}", cmd.get_program()))?;
        let wall_s = t0.elapsed().as_secs_f64();
        let share = (self.cpu_s()? - c0) / wall_s;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let Some(samples) = samples(&text) else {
            bail!(
                "{:?} printed no sample count ({}):\n{text}",
                cmd.get_program(),
                out.status
            );
        };
        Ok(Reading {
            samples,
            wall_s,
            share,
        })
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tools_sample_count_is_read_from_what_it_prints() {
        assert_eq!(
            coldstart_samples(
                "recording process 7 ...\nrecorded 212 samples in 212 rounds over 5.0 s, 42.4 Hz used (as asked): x"
            ),
            Some(212)
        );
        assert_eq!(
            py_spy_samples("Wrote raw data to '/dev/null'. Samples: 240 Errors: 0"),
            Some(240)
        );
        assert_eq!(py_spy_samples("Error: Permission denied"), None);
    }

    #[test]
    fn the_cost_of_a_sample_is_the_share_lost_over_the_samples() {
        let r = Reading {
            samples: 100,
            wall_s: 5.0,
            share: 0.8,
        };
        // 20% of 5 s stopped, over 100 samples: 10 ms each.
        assert!((per_sample_ms(&r, 1.0) - 10.0).abs() < 1e-9);
        // A share above the process's own alone is no cost, not a negative one.
        assert_eq!(per_sample_ms(&r, 0.7), 0.0);
    }
}
