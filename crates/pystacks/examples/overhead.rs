//! What sampling costs a CPU-bound Python loop: the loop's time with no
//! sampler, at 100 Hz and at 1 kHz, with and without pausing the process
//! for each read. Rounds interleave the settings so drift on a noisy
//! machine spreads over all of them; it prints medians, spreads and the
//! ratio to the unsampled loop of the same rounds, of its wall time and of
//! its own CPU time (which leaves out time the loop waited for a CPU or
//! sat paused).
//!
//! `cargo run --release -p pystacks --example overhead -- [ROUNDS] [ITERATIONS]`
//! (defaults: 7 rounds, 20,000,000 loop iterations, about 1 s each).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use pystacks::{Sampler, SamplerOptions};

const SCRIPT: &str = r#"
import sys, time
def cpu_bound_loop(n):
    t = 0
    for i in range(n):
        t += i * i
    return t
print("ready", flush=True)
sys.stdin.readline()
t0, c0 = time.perf_counter_ns(), time.process_time_ns()
cpu_bound_loop(int(sys.argv[1]))
print(time.perf_counter_ns() - t0, time.process_time_ns() - c0, flush=True)
"#;

#[derive(Clone, Copy)]
struct Setting {
    name: &'static str,
    rate_hz: Option<u32>,
    pause: bool,
}

const SETTINGS: [Setting; 5] = [
    Setting {
        name: "no sampler",
        rate_hz: None,
        pause: false,
    },
    Setting {
        name: "100 Hz",
        rate_hz: Some(100),
        pause: false,
    },
    Setting {
        name: "1 kHz",
        rate_hz: Some(1000),
        pause: false,
    },
    Setting {
        name: "100 Hz, paused reads",
        rate_hz: Some(100),
        pause: true,
    },
    Setting {
        name: "1 kHz, paused reads",
        rate_hz: Some(1000),
        pause: true,
    },
];

#[derive(Default, Clone)]
struct Run {
    loop_ns: u64,
    loop_cpu_ns: u64,
    samples: u64,
    errors: u64,
    late: u64,
    ticks: u64,
    read_ns: u64,
    cpu_ns: u64,
    attach_ns: u64,
    wall_ns: u64,
}

fn one(py: &str, script: &std::path::Path, iterations: u64, s: Setting) -> Run {
    // Python runs under `sh`, not as a child of this process, so that a
    // paused read really pauses it (children of the reader never are).
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" "$1" "$2"; exit $?"#)
        .arg(py)
        .arg(script)
        .arg(iterations.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python starts");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    assert_eq!(line.trim(), "ready");
    let sampler = s.rate_hz.map(|rate| {
        let options = SamplerOptions {
            pause: s.pause,
            ..SamplerOptions::at_rate(rate)
        };
        Sampler::start(child.id(), options).expect("sampler starts")
    });
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "go").expect("go");
    drop(stdin);
    line.clear();
    out.read_line(&mut line).expect("elapsed line");
    let mut figures = line
        .split_whitespace()
        .map(|f| f.parse::<u64>().expect("ns"));
    let loop_ns = figures.next().expect("elapsed ns");
    let loop_cpu_ns = figures.next().expect("cpu ns");
    let profile = sampler.map(Sampler::stop);
    child.wait().expect("wait");
    let mut run = Run {
        loop_ns,
        loop_cpu_ns,
        ..Run::default()
    };
    if let Some(p) = profile {
        run.samples = p.sample_count();
        run.errors = p.errors;
        run.late = p.late_ticks;
        run.ticks = p.ticks;
        run.read_ns = p.cost.read_ns;
        run.cpu_ns = p.cost.cpu_ns;
        run.attach_ns = p.cost.attach_ns;
        run.wall_ns = p.cost.wall_ns();
    }
    run
}

/// The median (the statistics crate's one median).
fn median(v: Vec<f64>) -> f64 {
    phases::stats::median(&v).unwrap_or(f64::NAN)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("ROUNDS"));
    let iterations: u64 = args
        .next()
        .map_or(20_000_000, |a| a.parse().expect("ITERATIONS"));
    let py = test_interpreters::default_python()
        .to_str()
        .expect("a UTF-8 path")
        .to_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("cpu_bound_loop.py");
    std::fs::write(&script, SCRIPT).expect("script");

    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); SETTINGS.len()];
    for round in 0..rounds {
        // Rotate the order each round.
        for k in 0..SETTINGS.len() {
            let i = (k + round) % SETTINGS.len();
            runs[i].push(one(&py, &script, iterations, SETTINGS[i]));
        }
        eprint!("\rround {}/{rounds}", round + 1);
    }
    eprintln!();

    println!(
        "CPU-bound Python loop ({iterations} iterations, {py}), {rounds} rounds interleaved, medians [min..max]"
    );
    println!(
        "{:<22} {:>22} {:>9} {:>11} {:>9} {:>8} {:>7} {:>12} {:>12} {:>10} {:>10}",
        "setting",
        "loop ms",
        "vs none",
        "cpu vs none",
        "samples",
        "errors",
        "late",
        "read us/tick",
        "cpu us/tick",
        "attach ms",
        "reading %"
    );
    let base: Vec<f64> = runs[0].iter().map(|r| r.loop_ns as f64).collect();
    let base_cpu: Vec<f64> = runs[0].iter().map(|r| r.loop_cpu_ns as f64).collect();
    for (s, rs) in SETTINGS.iter().zip(&runs) {
        let ms: Vec<f64> = rs.iter().map(|r| r.loop_ns as f64 / 1e6).collect();
        // Ratio within each round, then the median of the ratios.
        let ratio = median(
            rs.iter()
                .zip(&base)
                .map(|(r, b)| r.loop_ns as f64 / b)
                .collect(),
        );
        let cpu_ratio = median(
            rs.iter()
                .zip(&base_cpu)
                .map(|(r, b)| r.loop_cpu_ns as f64 / b)
                .collect(),
        );
        let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ms.iter().copied().fold(0.0, f64::max);
        let med = |f: &dyn Fn(&Run) -> f64| median(rs.iter().map(f).collect());
        let per = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64 / 1e3
            }
        };
        println!(
            "{:<22} {:>8.1} [{:>5.0}..{:>5.0}] {:>8.3}x {:>10.3}x {:>9.0} {:>8.0} {:>7.0} {:>12.1} {:>12.1} {:>10.1} {:>9.2}%",
            s.name,
            median(ms.clone()),
            min,
            max,
            ratio,
            cpu_ratio,
            med(&|r| r.samples as f64),
            med(&|r| r.errors as f64),
            med(&|r| r.late as f64),
            med(&|r| per(r.read_ns, r.ticks)),
            // The sampling thread's CPU per round, attaching left out.
            med(&|r| per(r.cpu_ns.saturating_sub(r.attach_ns), r.ticks)),
            med(&|r| r.attach_ns as f64 / 1e6),
            med(&|r| {
                if r.wall_ns == 0 {
                    0.0
                } else {
                    r.read_ns as f64 * 100.0 / r.wall_ns as f64
                }
            }),
        );
    }
}
