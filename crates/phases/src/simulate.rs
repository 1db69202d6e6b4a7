//! Synthetic interleaved A/B runs, to check what the comparison and the
//! stopping rule claim: pure, seeded, fast (no process is started).
//!
//! A [`Scenario`] is a noise model, a true effect (B takes `1 + effect`
//! times as long as A) and a [`StopRule`]. [`run`] plays one whole run the
//! way the trial loop does (warm-up rounds, then measured rounds in the
//! order A B, B A, ..., [`decided`] after every round on the records so
//! far, a simulated clock for the time budget) and [`tally`] counts the
//! verdicts of many. The model of one trial's `ready` time is
//!
//! `base * (1 + effect for B) * exp(drift + cv * z + first) * burst`
//!
//! - `drift`: the machine's speed, shared by both trials of a round; a
//!   stationary AR(1) process over rounds with standard deviation
//!   `drift_sd` and correlation `drift_corr` from one round to the next;
//! - `cv * z`: the trial's own variation (`z` standard normal), about its
//!   coefficient of variation;
//! - `first`: `order_effect` for the round's first trial (a cache or
//!   scheduler effect of going first), cancelled by alternating the order;
//! - `burst`: with probability `outlier_rate`, the trial is hit by other
//!   load and takes `U(1.3, outlier_max)` times as long.
//!
//! A trial's CPU time is
//! `0.8 * base * (1 + effect for B) * exp(cpu_drift * drift + cpu_cv * z')`:
//! other load touches it far less than wall time (`cpu_drift`, the share
//! of the machine's drift it sees through contended caches and clocks, is
//! 0 in the quieter models); the clock advances by each trial's time plus
//! `overhead_ms` (spawn, shutdown, exit).
//!
//! [`Noise::loaded`] is the reference worker measured with another
//! CPU-bound process running on the 2 cores, where `diff` must decide on
//! CPU time ([`StopRule::cpu_basis`]): wall time there is too noisy to
//! settle within a minute.

use std::ops::Range;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::compare::{Comparison, Verdict};
use crate::sequential::{StopReason, StopRule, decided};
use crate::stats::percentile_sorted;
use timeline::{ExitStatus, Marks, Outcome, TrialKind, TrialRecord, Usage, Variant, WorkerRecord};

/// How noisy the simulated machine is (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// A's typical ready time, ms.
    pub base_ms: f64,
    /// Per-trial variation (log-scale standard deviation, about the CV).
    pub cv: f64,
    /// Standard deviation of the shared drift (log scale).
    pub drift_sd: f64,
    /// Round-to-round correlation of the drift, in [0, 1).
    pub drift_corr: f64,
    /// Share of trials hit by a burst of other load.
    pub outlier_rate: f64,
    /// A hit trial takes up to this many times as long.
    pub outlier_max: f64,
    /// Extra time (log scale) of a round's first trial.
    pub order_effect: f64,
    /// Per-trial variation of CPU time (log scale).
    pub cpu_cv: f64,
    /// The share of the drift (log scale) that CPU time sees too.
    pub cpu_drift: f64,
    /// Time per trial outside `ready` (spawn, shutdown, exit), ms.
    pub overhead_ms: f64,
}

impl Noise {
    /// The reference worker on a shared 2-core machine: ready in 90 ms,
    /// 15% per-trial variation, drift of 10% wandering over a few rounds,
    /// 2% of trials hit by a burst (up to 2x), 2% for going first, 25 ms
    /// per trial outside `ready`.
    pub fn realistic() -> Noise {
        Noise {
            base_ms: 90.0,
            cv: 0.15,
            drift_sd: 0.10,
            drift_corr: 0.9,
            outlier_rate: 0.02,
            outlier_max: 2.0,
            order_effect: 0.02,
            cpu_cv: 0.04,
            cpu_drift: 0.0,
            overhead_ms: 25.0,
        }
    }

    /// The reference worker with another CPU-bound process and other
    /// builds on the 2 cores (load 8 to 12), as measured by `diff` runs
    /// there: ready in
    /// 250 ms with 30% per-trial variation and 25% drift, 8% of trials
    /// hit by bursts up to 3x; CPU time with 7% per-trial variation (the
    /// per-round log ratios of CPU time had a standard deviation of 0.099
    /// at load 8) and a fifth of the drift; 100 ms per trial outside
    /// `ready`.
    pub fn loaded() -> Noise {
        Noise {
            base_ms: 250.0,
            cv: 0.30,
            drift_sd: 0.25,
            drift_corr: 0.9,
            outlier_rate: 0.08,
            outlier_max: 3.0,
            order_effect: 0.05,
            cpu_cv: 0.07,
            cpu_drift: 0.2,
            overhead_ms: 100.0,
        }
    }

    /// A heavily loaded machine: 30% per-trial variation, 25% drift, 8% of
    /// trials hit by bursts up to 3x, 5% for going first.
    pub fn heavy() -> Noise {
        Noise {
            cv: 0.30,
            drift_sd: 0.25,
            drift_corr: 0.9,
            outlier_rate: 0.08,
            outlier_max: 3.0,
            order_effect: 0.05,
            cpu_cv: 0.08,
            ..Noise::realistic()
        }
    }
}

/// One simulated experiment: noise, the true effect, the rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// The machine.
    pub noise: Noise,
    /// B takes `1 + effect` times as long as A (0: an A/A run).
    pub effect: f64,
    /// The stopping rule the run follows.
    pub rule: StopRule,
    /// Warm-up rounds before the measured ones.
    pub warmup: usize,
}

impl Scenario {
    /// A scenario with one warm-up round.
    pub fn new(noise: Noise, effect: f64, rule: StopRule) -> Scenario {
        Scenario {
            noise,
            effect,
            rule,
            warmup: 1,
        }
    }
}

/// How one simulated run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The first compared measure's comparison at the end (absent when no
    /// round had both values).
    pub comparison: Option<Comparison>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Measured rounds run.
    pub rounds: usize,
    /// Simulated seconds of the trial loop.
    pub seconds: f64,
}

impl Run {
    /// The first measure's verdict (inconclusive without a comparison).
    pub fn verdict(&self) -> Verdict {
        self.comparison
            .as_ref()
            .map_or(Verdict::Inconclusive, |c| c.verdict)
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    // Box-Muller; 1 - u keeps the logarithm finite.
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Plays one run of `s` from `seed` through [`decided`].
pub fn run(s: &Scenario, seed: u64) -> Run {
    let n = &s.noise;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut drift = n.drift_sd * normal(&mut rng);
    let innovation = n.drift_sd * (1.0 - n.drift_corr * n.drift_corr).sqrt();
    let mut clock_ns: u64 = 1_000_000_000;
    let start = clock_ns;
    let mut records: Vec<TrialRecord> = Vec::new();
    let mut round = 0usize;
    let mut measured = 0usize;
    loop {
        let kind = if round < s.warmup {
            TrialKind::Warmup
        } else {
            TrialKind::Measured
        };
        drift = n.drift_corr * drift + innovation * normal(&mut rng);
        let order = if round.is_multiple_of(2) {
            [Variant::A, Variant::B]
        } else {
            [Variant::B, Variant::A]
        };
        for (pos, variant) in order.into_iter().enumerate() {
            let scale = match variant {
                Variant::A => 1.0,
                Variant::B => 1.0 + s.effect,
            };
            let first = if pos == 0 { n.order_effect } else { 0.0 };
            let burst = if rng.random::<f64>() < n.outlier_rate {
                rng.random_range(1.3..n.outlier_max.max(1.3 + 1e-9))
            } else {
                1.0
            };
            let ready_ms =
                n.base_ms * scale * (drift + n.cv * normal(&mut rng) + first).exp() * burst;
            let cpu_ms =
                0.8 * n.base_ms * scale * (n.cpu_drift * drift + n.cpu_cv * normal(&mut rng)).exp();
            let ready_ns = (ready_ms * 1e6) as u64;
            let exited = clock_ns + ready_ns + (n.overhead_ms * 1e6) as u64;
            let worker = WorkerRecord {
                pid: None,
                cgroup_peak_bytes: None,
                marks: Marks {
                    spawned_ns: clock_ns,
                    ready_read_ns: Some(clock_ns + ready_ns),
                    exited_ns: Some(exited),
                    ..Marks::default()
                },
                usage: Some(Usage {
                    user_ns: (cpu_ms * 0.75e6) as u64,
                    sys_ns: (cpu_ms * 0.25e6) as u64,
                    max_rss_bytes: 0,
                }),
                rss_at_ready_bytes: None,
                exit: Some(ExitStatus::Code(0)),
                escalation: timeline::Escalation::None,
                noise_lines: 0,
                outcome: Outcome::Correct,
            };
            let index = records.len();
            let r = if kind == TrialKind::Warmup {
                round
            } else {
                measured
            };
            records.push(TrialRecord::new(
                index,
                r,
                kind,
                variant,
                0,
                clock_ns,
                vec![worker],
            ));
            clock_ns = exited;
        }
        round += 1;
        if kind == TrialKind::Warmup {
            continue;
        }
        measured += 1;
        let elapsed = Duration::from_nanos(clock_ns - start);
        let d = decided(&records, &s.rule, elapsed);
        if let Some(stop) = d.stop {
            return Run {
                comparison: d.states.into_iter().next().and_then(|m| m.comparison),
                stop,
                rounds: d.rounds,
                seconds: elapsed.as_secs_f64(),
            };
        }
    }
}

/// The verdicts of many runs of one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// Runs played.
    pub runs: usize,
    /// Runs that ended `faster`.
    pub faster: usize,
    /// Runs that ended `slower`.
    pub slower: usize,
    /// Runs that ended `equivalent`.
    pub equivalent: usize,
    /// Runs that ended `inconclusive`.
    pub inconclusive: usize,
    /// Runs stopped because every measure was settled.
    pub decided: usize,
    /// Runs stopped by the round budget.
    pub round_budget: usize,
    /// Runs stopped by the time budget.
    pub time_budget: usize,
    /// Median measured rounds.
    pub median_rounds: f64,
    /// Median simulated seconds.
    pub median_seconds: f64,
    /// The longest run, simulated seconds.
    pub max_seconds: f64,
    /// Median of what the inconclusive runs could have detected (0.12 is
    /// 12%); `None` without inconclusive runs.
    pub median_detectable: Option<f64>,
}

impl Tally {
    /// Runs that claimed a change (`faster` or `slower`).
    pub fn changes(&self) -> usize {
        self.faster + self.slower
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs: {} slower, {} faster, {} equivalent, {} inconclusive; stopped: {} decided, {} round budget, {} time budget; rounds median {:.0}, seconds median {:.1} max {:.1}",
            self.runs,
            self.slower,
            self.faster,
            self.equivalent,
            self.inconclusive,
            self.decided,
            self.round_budget,
            self.time_budget,
            self.median_rounds,
            self.median_seconds,
            self.max_seconds,
        )?;
        if let Some(d) = self.median_detectable {
            write!(f, ", inconclusive could detect {:.1}% (median)", d * 100.0)?;
        }
        Ok(())
    }
}

/// Plays `s` once per seed and counts the verdicts.
pub fn tally(s: &Scenario, seeds: Range<u64>) -> Tally {
    let runs: Vec<Run> = seeds.map(|seed| run(s, seed)).collect();
    let count = |f: &dyn Fn(&Run) -> bool| runs.iter().filter(|r| f(r)).count();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            None
        } else {
            Some(percentile_sorted(&v, 0.5))
        }
    };
    Tally {
        runs: runs.len(),
        faster: count(&|r| r.verdict() == Verdict::Faster),
        slower: count(&|r| r.verdict() == Verdict::Slower),
        equivalent: count(&|r| r.verdict() == Verdict::Equivalent),
        inconclusive: count(&|r| r.verdict() == Verdict::Inconclusive),
        decided: count(&|r| r.stop == StopReason::Decided),
        round_budget: count(&|r| r.stop == StopReason::RoundBudget),
        time_budget: count(&|r| r.stop == StopReason::TimeBudget),
        median_rounds: median(runs.iter().map(|r| r.rounds as f64).collect()).unwrap_or(0.0),
        median_seconds: median(runs.iter().map(|r| r.seconds).collect()).unwrap_or(0.0),
        max_seconds: runs.iter().map(|r| r.seconds).fold(0.0, f64::max),
        median_detectable: median(
            runs.iter()
                .filter(|r| r.verdict() == Verdict::Inconclusive)
                .filter_map(|r| r.comparison.as_ref()?.unsettled?.detectable)
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_reproducible_from_its_seed() {
        let s = Scenario::new(Noise::realistic(), 0.1, StopRule::default());
        assert_eq!(run(&s, 7), run(&s, 7));
        assert_ne!(run(&s, 7), run(&s, 8));
    }

    #[test]
    fn the_noise_model_has_the_variation_it_says() {
        // Without drift, bursts or order effect, `cv` is the per-trial
        // variation: the sample CV of A's ready times is close to it.
        let noise = Noise {
            drift_sd: 0.0,
            outlier_rate: 0.0,
            order_effect: 0.0,
            ..Noise::realistic()
        };
        let rule = StopRule {
            max_rounds: 2000,
            max_seconds: 1e9,
            min_rounds: 2000,
            ..StopRule::default()
        };
        let s = Scenario::new(noise, 0.0, rule);
        let r = run(&s, 1);
        assert_eq!(r.rounds, 2000);
        assert_eq!(r.stop, StopReason::RoundBudget);
        // The paired log ratios have sd sqrt(2) cv: their interval at 99%
        // over 2000 rounds is about +-2.58 * 0.95 * 0.212 / sqrt(2000).
        let c = r.comparison.unwrap();
        let h = (c.ci.hi.ln() - c.ci.lo.ln()) / 2.0;
        assert!((0.010..0.015).contains(&h), "{h}");
    }
}
