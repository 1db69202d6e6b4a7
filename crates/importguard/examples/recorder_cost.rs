//! What the import recorder (finder and audit hook) costs a worker's start:
//! the reference worker's spawn-to-ready time without and with the
//! recorder's environment, interleaved (AB, BA, ...), after warm-up; prints
//! medians, spread and the paired ratio with its 95% bootstrap interval, for
//! the wall time to ready and, less sensitive to a loaded machine, for the
//! worker's own CPU time up to ready (`/proc/PID/schedstat`, read while it
//! waits for its first request) and over its whole life (`wait4`).
//!
//! `cargo run --release -p importguard --example recorder_cost -- [ROUNDS] [PYTHON]`
//! from the workspace root (defaults: 40 rounds, `python3`).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use importguard::recorder::{Recorder, RecorderPolicy};
use phases::clock::monotonic_ns;
use phases::compare::paired;
use phases::stats::{Bootstrap, percentile_sorted};

const WARMUP: usize = 3;

/// One lifecycle: spawn, ready line, shutdown, exit. Returns spawn-to-ready,
/// the worker's CPU time to ready and over its life, in milliseconds.
// The child is reaped by wait4 (for its own rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn lifecycle(python: &str, worker: &Path, recorder: bool) -> (f64, f64, f64) {
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "refworker",
        "--test-echo",
        "--profile",
        "gpu",
        "--force-cpu",
    ])
    .env("PYTHONPATH", worker)
    .env_remove("PYTHONPROFILEIMPORTTIME")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    // Both variants pay for writing a private folder: only the environment
    // differs.
    let setup = Recorder::prepare(
        &RecorderPolicy {
            forbid: vec!["torch".into(), "transformers".into(), "stanza".into()],
            ..RecorderPolicy::default()
        },
        Some(worker.as_os_str()),
    )
    .expect("the recorder's folder");
    if recorder {
        cmd.envs(setup.env().iter().map(|(k, v)| (k, v)));
    }
    let t0 = monotonic_ns();
    let mut child = cmd.spawn().expect("spawn the reference worker");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).expect("the ready line");
    let ready = monotonic_ns() - t0;
    assert!(line.contains("\"ready\""), "not a ready line: {line:?}");
    // The worker now waits for a request: its CPU time so far is its start.
    let schedstat = std::fs::read_to_string(format!("/proc/{}/schedstat", child.id()))
        .expect("/proc/PID/schedstat");
    let cpu_ready: f64 = schedstat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<f64>().ok())
        .expect("schedstat's first field")
        / 1e6;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"op\": \"shutdown\"}\n").unwrap();
    drop(stdin);
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 on our own child's pid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert!(rc == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    if recorder {
        let rec = setup.read().expect("records");
        assert!(rec.ran() && rec.start.as_ref().unwrap().audit == Some(true));
    }
    (ready as f64 / 1e6, cpu_ready, cpu)
}

fn spread(samples: &[f64]) -> (f64, f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    (
        percentile_sorted(&s, 0.5),
        percentile_sorted(&s, 0.25),
        percentile_sorted(&s, 0.75),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(40, |a| a.parse().expect("ROUNDS"));
    let python = args.next().unwrap_or_else(|| "python3".into());
    let worker = std::env::current_dir().unwrap().join("worker");
    assert!(
        worker.join("refworker").exists(),
        "run from the workspace root (no worker/refworker here)"
    );
    let (mut plain, mut recorded) = (Vec::new(), Vec::new());
    let (mut plain_cpu, mut recorded_cpu) = (Vec::new(), Vec::new());
    let (mut plain_ready_cpu, mut recorded_ready_cpu) = (Vec::new(), Vec::new());
    for round in 0..WARMUP + rounds {
        // Alternate the order so neither variant always runs second.
        let (a, b) = if round % 2 == 0 {
            let a = lifecycle(&python, &worker, false);
            (a, lifecycle(&python, &worker, true))
        } else {
            let b = lifecycle(&python, &worker, true);
            (lifecycle(&python, &worker, false), b)
        };
        if round >= WARMUP {
            plain.push(a.0);
            recorded.push(b.0);
            plain_ready_cpu.push(a.1);
            recorded_ready_cpu.push(b.1);
            plain_cpu.push(a.2);
            recorded_cpu.push(b.2);
        }
    }
    println!("reference worker, {rounds} interleaved rounds after {WARMUP} warm-up ({python})");
    for (what, a, b) in [
        ("spawn to ready (wall)", &plain, &recorded),
        ("worker CPU to ready", &plain_ready_cpu, &recorded_ready_cpu),
        ("worker CPU, whole life", &plain_cpu, &recorded_cpu),
    ] {
        let (ma, qa1, qa3) = spread(a);
        let (mb, qb1, qb3) = spread(b);
        let c = paired(a, b, &Bootstrap::default(), 0.02).expect("comparison");
        println!("{what}:");
        println!("  plain:              median {ma:7.2} ms  (IQR {qa1:.2} .. {qa3:.2})");
        println!("  recorder + audit:   median {mb:7.2} ms  (IQR {qb1:.2} .. {qb3:.2})");
        println!(
            "  ratio recorder/plain: {:.3}  (95% CI {:.3} .. {:.3}), {}; cost {:+.1}% (budget +5%)",
            c.ratio,
            c.ci.lo,
            c.ci.hi,
            c.verdict,
            (c.ratio - 1.0) * 100.0
        );
    }
}
