//! Probe and timeout settings from a measured distribution: a Kubernetes
//! `startupProbe` that would not kill a healthy worker, from the ready
//! times of the trials, and a request timeout from the serve phase's
//! latencies.
//!
//! The rule (docs/bench.md states it too):
//! - Bound the 99th percentile from above: the one-sided 95% upper
//!   confidence bound of the p99, distribution-free, is the order
//!   statistic `X(k)` with the smallest `k` such that
//!   `P(Binomial(n, 0.99) <= k - 1) >= 0.95` ([`upper_rank`]). It exists
//!   only from [`samples_needed`] samples on (299 for the p99 at 95%);
//!   with fewer, the slowest sample stands in, which the true p99 may
//!   exceed, and a warning says how many trials the bound needs.
//! - Allow [`MARGIN`] times that bound: `budget = 1.5 x bound`.
//! - A startup probe of period `P = max(1, ceil(budget / 30))` seconds and
//!   failure threshold `F = max(1, ceil(budget / P))`, so `F x P >=
//!   budget` with `F` at most about 30 (Kubernetes allows
//!   `initialDelaySeconds + F x P` before it kills the container).
//! - A request timeout of `budget` from the serve phase's latencies (from
//!   each request's scheduled send, so queueing is in it).
//!
//! The bound is as good as the conditions it was measured under: under
//! the limits the pod will have (`bench --cpus --memory`), and on a
//! machine as loaded as the node. The settings say which trials they
//! rest on.

use serde::{Deserialize, Serialize};
use timeline::{TrialKind, TrialRecord, Variant};

use crate::serve::{RequestOutcome, RequestRecord};
use crate::stats::percentile_sorted;
use crate::warn::{Warning, WarningKind};

/// The percentile bounded: the 99th.
pub const QUANTILE: f64 = 0.99;
/// The one-sided confidence of the bound.
pub const LEVEL: f64 = 0.95;
/// How far above the bound the settings allow.
pub const MARGIN: f64 = 1.5;
/// The largest failure threshold the period is chosen to keep.
const MAX_THRESHOLD: f64 = 30.0;

/// The 1-based rank `k` of the order statistic that bounds the
/// `q`-quantile from above with confidence `level` among `n` samples, or
/// `None` when `n` is below [`samples_needed`].
pub fn upper_rank(n: usize, q: f64, level: f64) -> Option<usize> {
    let alpha = 1.0 - level;
    if n == 0 || q.powi(n as i32) > alpha {
        return None;
    }
    // T(k) = P(Binomial(n, q) >= k), summed from the top: pmf(n) = q^n,
    // pmf(j - 1) = pmf(j) x j / (n - j + 1) x (1 - q) / q. The bound is
    // the smallest k with T(k) <= alpha.
    let mut pmf = q.powi(n as i32);
    let mut tail = pmf;
    let mut k = n;
    while k > 1 {
        let j = k as f64;
        let next = pmf * j / (n as f64 - j + 1.0) * (1.0 - q) / q;
        if tail + next > alpha {
            break;
        }
        pmf = next;
        tail += next;
        k -= 1;
    }
    Some(k)
}

/// The fewest samples from which the `q`-quantile has a distribution-free
/// upper bound at `level`: the smallest `n` with `q^n <= 1 - level`.
pub fn samples_needed(q: f64, level: f64) -> usize {
    ((1.0 - level).ln() / q.ln()).ceil() as usize
}

/// What an upper bound of a percentile rests on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Basis {
    /// The order statistic of this 1-based rank: a distribution-free bound.
    OrderStatistic {
        /// Its rank among the sorted samples.
        rank: usize,
    },
    /// Too few samples for a bound: the slowest sample stands in.
    Slowest {
        /// How many samples a bound needs.
        needed: usize,
    },
}

/// An upper bound of a percentile of one sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The percentile bounded (0.99).
    pub quantile: f64,
    /// The bound's one-sided confidence (0.95).
    pub level: f64,
    /// How many samples it rests on.
    pub n: usize,
    /// The percentile itself (type 7), ms.
    pub estimate_ms: f64,
    /// The upper bound, ms.
    pub upper_ms: f64,
    /// What the bound rests on.
    pub basis: Basis,
}

impl Bound {
    /// The bound of the [`QUANTILE`] at [`LEVEL`] of `samples_ms`; `None`
    /// when there are none.
    pub fn of(samples_ms: &[f64]) -> Option<Bound> {
        let mut sorted: Vec<f64> = samples_ms
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let (upper_ms, basis) = match upper_rank(n, QUANTILE, LEVEL) {
            Some(rank) => (sorted[rank - 1], Basis::OrderStatistic { rank }),
            None => (
                sorted[n - 1],
                Basis::Slowest {
                    needed: samples_needed(QUANTILE, LEVEL),
                },
            ),
        };
        Some(Bound {
            quantile: QUANTILE,
            level: LEVEL,
            n,
            estimate_ms: percentile_sorted(&sorted, QUANTILE),
            upper_ms,
            basis,
        })
    }

    /// Whether the bound is one (enough samples), not the slowest sample.
    pub fn is_bound(&self) -> bool {
        matches!(self.basis, Basis::OrderStatistic { .. })
    }
}

/// A startup probe that would not kill a healthy worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartupProbe {
    /// The side it is for.
    pub variant: Variant,
    /// The bound of the ready time it rests on.
    pub ready: Bound,
    /// The margin over the bound ([`MARGIN`]).
    pub margin: f64,
    /// `margin x bound`, seconds: the start-up the probe must allow.
    pub budget_s: f64,
    /// `periodSeconds`.
    pub period_seconds: u32,
    /// `failureThreshold`.
    pub failure_threshold: u32,
}

impl StartupProbe {
    /// The probe for a side whose ready times bound as `ready`.
    pub fn of(variant: Variant, ready: Bound) -> StartupProbe {
        let budget_s = MARGIN * ready.upper_ms / 1000.0;
        let period = (budget_s / MAX_THRESHOLD).ceil().max(1.0);
        let threshold = (budget_s / period).ceil().max(1.0);
        StartupProbe {
            variant,
            ready,
            margin: MARGIN,
            budget_s,
            period_seconds: period as u32,
            failure_threshold: threshold as u32,
        }
    }

    /// The start-up the probe allows, seconds (`F x P`).
    pub fn allows_s(&self) -> u32 {
        self.period_seconds * self.failure_threshold
    }
}

/// A request timeout that would not cut off a healthy reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestTimeout {
    /// The side it is for.
    pub variant: Variant,
    /// The bound of the serve phase's latency it rests on.
    pub latency: Bound,
    /// The margin over the bound ([`MARGIN`]).
    pub margin: f64,
    /// `margin x bound`, ms.
    pub timeout_ms: f64,
}

/// The settings derived from one run, per side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Probes {
    /// A startup probe per side with correct measured trials.
    pub startup: Vec<StartupProbe>,
    /// A request timeout per side with a serve phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_timeout: Vec<RequestTimeout>,
}

impl Probes {
    /// The settings from a run's trials and its serve phase's requests.
    pub fn of(records: &[TrialRecord], requests: &[RequestRecord]) -> Probes {
        let mut out = Probes::default();
        for v in [Variant::A, Variant::B] {
            let ready: Vec<f64> = records
                .iter()
                .filter(|r| {
                    r.variant == v && r.kind == TrialKind::Measured && r.outcome.is_correct()
                })
                .filter_map(|r| r.phases.ready_ns)
                .map(|ns| ns as f64 / 1e6)
                .collect();
            if let Some(b) = Bound::of(&ready) {
                out.startup.push(StartupProbe::of(v, b));
            }
            let latency: Vec<f64> = requests
                .iter()
                .filter(|r| r.variant == v && r.outcome == RequestOutcome::Ok)
                .filter_map(|r| r.latency_ns)
                .map(|ns| ns as f64 / 1e6)
                .collect();
            if let Some(b) = Bound::of(&latency) {
                out.request_timeout.push(RequestTimeout {
                    variant: v,
                    timeout_ms: MARGIN * b.upper_ms,
                    latency: b,
                    margin: MARGIN,
                });
            }
        }
        out
    }

    /// One warning per setting that rests on too few samples for its bound.
    pub fn warnings(&self) -> Vec<Warning> {
        let few = |b: &Bound, what: &str, v: Variant, flag: &str| {
            let Basis::Slowest { needed } = b.basis else {
                return None;
            };
            Some(Warning {
                kind: WarningKind::TooFewTrials,
                phase: None,
                variant: Some(v),
                message: format!(
                    "{what} ({v}) rests on the slowest of {} {}, not on a bound of the p99 (that needs {needed} at 95%), so a healthy worker may outgrow it: run {flag} for settings that rest on the p99",
                    b.n,
                    if flag.starts_with("--trials") {
                        "trials"
                    } else {
                        "requests"
                    }
                ),
            })
        };
        let mut out: Vec<Warning> = self
            .startup
            .iter()
            .filter_map(|p| {
                few(
                    &p.ready,
                    "the startup probe",
                    p.variant,
                    &format!("--trials {}", samples_needed(QUANTILE, LEVEL)),
                )
            })
            .collect();
        out.extend(self.request_timeout.iter().filter_map(|t| {
            few(
                &t.latency,
                "the request timeout",
                t.variant,
                &format!("--requests {}", samples_needed(QUANTILE, LEVEL)),
            )
        }));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_p99_needs_299_samples_for_a_bound_at_95_percent() {
        assert_eq!(samples_needed(0.99, 0.95), 299);
        assert_eq!(upper_rank(298, 0.99, 0.95), None);
        assert_eq!(upper_rank(299, 0.99, 0.95), Some(299));
        // The median: the classic table (n = 20: the 15th at 95% one-sided).
        assert_eq!(upper_rank(20, 0.5, 0.95), Some(15));
        assert_eq!(samples_needed(0.5, 0.95), 5);
    }

    #[test]
    fn the_rank_bounds_the_quantile_as_often_as_it_claims() {
        // Uniform samples on [0, 1): the q-quantile is q itself; the k-th
        // order statistic lies above it with probability P(Bin(n, q) < k),
        // computed here the long way (a sum of binomial terms in logs).
        for (n, q) in [(400usize, 0.99), (1000, 0.99), (50, 0.9), (20, 0.5)] {
            let k = upper_rank(n, q, 0.95).unwrap();
            let ln_choose = |j: usize| -> f64 {
                (1..=j)
                    .map(|i| ((n - j + i) as f64).ln() - (i as f64).ln())
                    .sum()
            };
            let cdf = |m: usize| -> f64 {
                (0..=m)
                    .map(|j| {
                        (ln_choose(j) + j as f64 * q.ln() + (n - j) as f64 * (1.0 - q).ln()).exp()
                    })
                    .sum()
            };
            assert!(
                cdf(k - 1) >= 0.95,
                "n {n} q {q}: k {k} covers {}",
                cdf(k - 1)
            );
            assert!(
                k == 1 || cdf(k - 2) < 0.95,
                "n {n} q {q}: k {k} is not the smallest"
            );
        }
    }

    #[test]
    fn a_known_ready_distribution_gives_a_probe_that_allows_its_bound_with_margin() {
        // 400 trials, ready 100 ms .. 499 ms evenly: the bound of the p99
        // is the 399th (k for n = 400 at 95%), 498 ms; x 1.5 = 747 ms.
        let ready: Vec<f64> = (0..400).map(|i| 100.0 + i as f64).collect();
        let b = Bound::of(&ready).unwrap();
        assert_eq!(
            b.basis,
            Basis::OrderStatistic {
                rank: upper_rank(400, 0.99, 0.95).unwrap()
            }
        );
        assert!(b.upper_ms >= b.estimate_ms, "{b:?}");
        let p = StartupProbe::of(Variant::A, b.clone());
        assert!((p.budget_s - 1.5 * b.upper_ms / 1000.0).abs() < 1e-12);
        assert_eq!((p.period_seconds, p.failure_threshold), (1, 1));
        assert!(f64::from(p.allows_s()) >= p.budget_s);
        // A slow start of 50 s: the period grows to keep the threshold near 30.
        let slow = StartupProbe::of(Variant::A, Bound::of(&vec![50_000.0; 300]).unwrap());
        assert_eq!((slow.period_seconds, slow.failure_threshold), (3, 25));
        assert!(f64::from(slow.allows_s()) >= slow.budget_s);
    }

    #[test]
    fn too_few_trials_rest_on_the_slowest_and_say_how_many_are_needed() {
        let p = Probes {
            startup: vec![StartupProbe::of(
                Variant::A,
                Bound::of(&[300.0, 310.0, 900.0]).unwrap(),
            )],
            request_timeout: Vec::new(),
        };
        assert_eq!(p.startup[0].ready.upper_ms, 900.0);
        assert_eq!(p.startup[0].ready.basis, Basis::Slowest { needed: 299 });
        let w = p.warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].message.contains("rests on the slowest of 3 trials"),
            "{}",
            w[0]
        );
        assert!(w[0].message.contains("run --trials 299"), "{}", w[0]);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["startup"][0]["ready"]["basis"]["kind"], "slowest");
        assert_eq!(serde_json::from_value::<Probes>(json).unwrap(), p);
    }
}
