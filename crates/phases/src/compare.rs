//! A against B: a ratio B/A with a confidence interval, and one of four
//! verdicts. A ratio above 1 means B took longer.
//!
//! # Methods
//!
//! - **Paired, rank-based** ([`paired_rank`], [`Method::HodgesLehmann`],
//!   the default of an interleaved run): A and B ran interleaved in one
//!   session (A B, then B A, ...); round `i` gives one log ratio
//!   `d[i] = ln(b[i] / a[i])`. The estimate is the Hodges-Lehmann centre of
//!   the `d[i]` and the interval its Wilcoxon signed-rank interval
//!   ([`crate::stats::hodges_lehmann`]), both taken
//!   back to ratios with `exp`. Why this one: drift of the machine (another
//!   job starting, the CPU clock changing) scales both trials of a round
//!   alike and cancels in their ratio; a trial hit by a burst of load is one
//!   rank among many, not a pull on a mean; the interval is
//!   distribution-free (it needs only that `d` be symmetric about its
//!   centre, which alternating who goes first gives an A/A run exactly) and
//!   exact for up to 50 rounds; and it needs no resampling, so a run can
//!   look at it after every round at no cost.
//! - **Paired, bootstrap** ([`paired`], [`Method::MedianLogRatio`]): the
//!   median of the same per-round log ratios, with a seeded percentile
//!   bootstrap of rounds; kept for callers that want the bootstrap's
//!   reproducible-by-seed interval.
//! - **Unpaired** ([`unpaired`], [`Method::RatioOfMedians`]): two separate
//!   runs share no rounds; the ratio of medians `median(B) / median(A)`,
//!   each side resampled on its own. Drift between the runs is in it.
//!
//! # Verdicts
//!
//! Against a noise band `[1 - t, 1 + t]` (default `t` 2%, changes within it
//! are not claimed), the interval gives:
//! - [`Verdict::Slower`] / [`Verdict::Faster`]: the whole interval lies
//!   above / below the band;
//! - [`Verdict::Equivalent`]: the whole interval lies inside the band; a
//!   change larger than the noise threshold is ruled out;
//! - [`Verdict::Inconclusive`]: anything else; the interval reaches outside
//!   the band on at least one side without leaving it. The run could not
//!   tell: it says the smallest change it could have detected
//!   ([`Unsettled::detectable`]) and about how much longer it would have to
//!   run ([`Unsettled::more`]). It never says "no difference".
//!
//! Summaries written before the four verdicts said `no_significant_difference`
//! for the last two; that name reads back as [`Verdict::Inconclusive`], the
//! honest reading of what those runs established.
//!
//! # Wall time or CPU time
//!
//! Each comparison is of one measure: the wall time of a phase, or the
//! worker's CPU time (user + system from `wait4`) over its whole life
//! ([`Measure`](crate::Measure)). A verdict rests on the measure
//! it is of, and the reports name it. **By default the verdict a run
//! answers with rests on wall time of `ready`**, and CPU time is compared
//! beside it, for these reasons:
//! - wall time of `ready` is the question: how long a parent waits for its
//!   worker. CPU time is a different quantity. It misses every wait (disk,
//!   network, locks, sleeps, a child process not waited for) and counts the
//!   work of every thread at once, so a change in one can be no change in
//!   the other;
//! - `wait4` gives CPU time once per process, for its whole life: it cannot
//!   be split into phases, so a change in shutdown work reads as a change in
//!   start-up;
//! - CPU time is much less disturbed by other load (a worker waiting for a
//!   CPU accrues none), so it is the better witness where wall time is
//!   noisy: its own comparison and verdict, printed beside, say whether the
//!   worker does more work, and a stopping rule may be asked to decide on
//!   it ([`Measure::Cpu`](crate::Measure::Cpu)) when that is the
//!   question;
//! - pairing and the rank-based interval already take the drift and the
//!   outliers out of wall time that make it noisy, which is what makes a
//!   wall-time verdict reachable within a budget (see
//!   [`sequential`](crate::sequential)).

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::stats::{self, Interval, Resampling, StatsError, median_in_place};

/// The default noise threshold: changes within 2% are not claimed.
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.02;

/// The interval level of a comparison looked at once (a fixed trial count,
/// two saved runs). A run that looks after every round uses the wider
/// level of its stopping rule ([`crate::sequential::StopRule::level`]).
pub const DEFAULT_LEVEL: f64 = 0.95;

/// What an interval of the ratio B/A says, against the noise band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies below `1 - threshold`.
    Faster,
    /// The whole interval lies above `1 + threshold`.
    Slower,
    /// The whole interval lies inside `[1 - threshold, 1 + threshold]`.
    Equivalent,
    /// The interval reaches outside the band on at least one side without
    /// leaving it (or the sample is too small for an interval at the level
    /// asked). Reads the old `no_significant_difference` too.
    #[serde(alias = "no_significant_difference")]
    Inconclusive,
}

impl Verdict {
    /// The words a person reads: `faster`, `slower`, `equivalent`,
    /// `inconclusive`.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Equivalent => "equivalent",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// Classifies an interval of the ratio B/A against a noise threshold.
    pub fn of(ci: &Interval, threshold: f64) -> Verdict {
        if ci.lo > 1.0 + threshold {
            Verdict::Slower
        } else if ci.hi < 1.0 - threshold {
            Verdict::Faster
        } else if ci.lo >= 1.0 - threshold && ci.hi <= 1.0 + threshold {
            Verdict::Equivalent
        } else {
            Verdict::Inconclusive
        }
    }

    /// `faster` or `slower`: a change is claimed.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Faster | Verdict::Slower)
    }

    /// Anything but `inconclusive`: the question is answered.
    pub fn is_settled(self) -> bool {
        self != Verdict::Inconclusive
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// The one-sided question a bisect step asks of an interval of the ratio
/// B/A: is B slower than A by more than the threshold? Unlike
/// [`Verdict`], a B that is faster or within the band is the same answer,
/// `not slower`, so a step settles as soon as the interval's upper end is
/// inside `1 + threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Slowdown {
    /// The whole interval lies above `1 + threshold`.
    Slower,
    /// The whole interval lies at or below `1 + threshold`.
    NotSlower,
    /// The interval straddles `1 + threshold` (or there is none).
    Inconclusive,
}

impl Slowdown {
    /// Classifies an interval of the ratio B/A against a threshold.
    pub fn of(ci: &Interval, threshold: f64) -> Slowdown {
        if ci.lo > 1.0 + threshold {
            Slowdown::Slower
        } else if ci.hi <= 1.0 + threshold {
            Slowdown::NotSlower
        } else {
            Slowdown::Inconclusive
        }
    }

    /// The words a person reads: `slower`, `not slower`, `inconclusive`.
    pub fn words(self) -> &'static str {
        match self {
            Slowdown::Slower => "slower",
            Slowdown::NotSlower => "not slower",
            Slowdown::Inconclusive => "inconclusive",
        }
    }

    /// Anything but `inconclusive`: the question is answered.
    pub fn is_settled(self) -> bool {
        self != Slowdown::Inconclusive
    }
}

impl std::fmt::Display for Slowdown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// How a comparison's ratio and interval were computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `median(B) / median(A)`, bootstrap percentile interval (unpaired
    /// runs, and every comparison in summaries written before `method`
    /// was recorded).
    #[default]
    RatioOfMedians,
    /// `exp(median(ln(b[i] / a[i])))` over rounds, bootstrap of rounds.
    MedianLogRatio,
    /// `exp` of the Hodges-Lehmann centre of `ln(b[i] / a[i])`, Wilcoxon
    /// signed-rank interval.
    HodgesLehmann,
}

impl Method {
    /// A short description for reports.
    pub fn words(self) -> &'static str {
        match self {
            Method::RatioOfMedians => "ratio of medians, bootstrap interval",
            Method::MedianLogRatio => "median of per-round ratios, bootstrap interval",
            Method::HodgesLehmann => {
                "Hodges-Lehmann estimate of per-round ratios, signed-rank interval"
            }
        }
    }
}

/// Why an inconclusive comparison could not tell, and what would settle it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Unsettled {
    /// The smallest change (0.12 is 12%) this interval's width could have
    /// called `slower`: an estimate that far from 1 would have put the
    /// whole interval outside the band. Absent when there is no interval at
    /// the level asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable: Option<f64>,
    /// About how many more rounds (paired) or trials per side (unpaired)
    /// would settle it, if the estimate held and the interval shrank as
    /// `1 / sqrt(n)`. Absent when the estimate sits on an edge of the band
    /// (no number of rounds is a fair guess).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<u64>,
    /// When the sample is too small for an interval at the level asked: the
    /// fewest rounds that give one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed: Option<usize>,
    /// With `needed`: the level asked (the interval's own level is the
    /// lower one it reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<f64>,
}

/// A ratio B/A with its interval and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The estimate of B/A (see [`Method`]).
    pub ratio: f64,
    /// Its confidence interval.
    pub ci: Interval,
    /// What the interval says against the noise band.
    pub verdict: Verdict,
    /// The noise threshold the verdict used (0.02 is 2%).
    pub threshold: f64,
    /// Whether rounds were compared as pairs.
    pub paired: bool,
    /// Samples of A (rounds when paired).
    pub n_a: usize,
    /// Samples of B (rounds when paired).
    pub n_b: usize,
    /// How the ratio and interval were computed.
    #[serde(default)]
    pub method: Method,
    /// Set when the verdict is inconclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsettled: Option<Unsettled>,
}

impl Comparison {
    /// The smallest change this comparison's interval could have called
    /// `slower` (0.12 is 12%), or `None` without a positive interval.
    pub fn detectable(&self) -> Option<f64> {
        detectable(&self.ci, self.threshold)
    }
}

/// See [`Unsettled::detectable`]: with `h` the interval's half-width on
/// the log scale, `(1 + t) e^h - 1`.
fn detectable(ci: &Interval, threshold: f64) -> Option<f64> {
    let h = log_half_width(ci)?;
    Some((1.0 + threshold) * h.exp() - 1.0)
}

fn log_half_width(ci: &Interval) -> Option<f64> {
    (ci.lo > 0.0 && ci.hi.is_finite() && ci.hi >= ci.lo).then(|| (ci.hi.ln() - ci.lo.ln()) / 2.0)
}

/// See [`Unsettled::more`]: the interval (half-width `h` on the log scale,
/// over `n`) must shrink to the distance `e` from the estimate to the
/// nearest band edge, so it needs about `n (h / e)^2` in all.
fn more_to_settle(ratio: f64, ci: &Interval, threshold: f64, n: usize) -> Option<u64> {
    let h = log_half_width(ci)?;
    if !(ratio > 0.0 && ratio.is_finite()) || n == 0 {
        return None;
    }
    let m = ratio.ln();
    let e = (m - (1.0 + threshold).ln())
        .abs()
        .min((m - (1.0 - threshold).ln()).abs());
    if e < 1e-6 {
        return None;
    }
    let total = n as f64 * (h / e).powi(2);
    if !total.is_finite() || total > 1e12 {
        return None;
    }
    Some(((total.ceil() as u64).saturating_sub(n as u64)).max(1))
}

/// The fewest values for which a signed-rank interval reaches `level`.
fn fewest_for_level(level: f64) -> usize {
    (1..=64)
        .find(|&n| stats::signed_rank_k(n, level).0 > 0)
        .unwrap_or(64)
}

fn validated(s: &[f64]) -> Result<(), StatsError> {
    if s.is_empty() {
        return Err(StatsError::Empty);
    }
    if let Some(index) = s.iter().position(|x| !x.is_finite()) {
        return Err(StatsError::NotFinite {
            index,
            value: s[index],
        });
    }
    Ok(())
}

fn positive(s: &[f64]) -> Result<(), StatsError> {
    match s.iter().position(|&x| x <= 0.0) {
        Some(index) => Err(StatsError::NonPositive {
            index,
            value: s[index],
        }),
        None => Ok(()),
    }
}

/// Per-round log ratios `ln(b[i] / a[i])`, after the checks every paired
/// method shares.
fn log_ratios(a: &[f64], b: &[f64]) -> Result<Vec<f64>, StatsError> {
    validated(a)?;
    validated(b)?;
    if a.len() != b.len() {
        return Err(StatsError::UnpairedLengths {
            a: a.len(),
            b: b.len(),
        });
    }
    positive(a)?;
    positive(b)?;
    Ok(a.iter().zip(b).map(|(x, y)| (y / x).ln()).collect())
}

fn ratio_of_medians(a: &mut [f64], b: &mut [f64]) -> Result<f64, StatsError> {
    let ma = median_in_place(a);
    if ma <= 0.0 {
        return Err(StatsError::NonPositiveBaseline { median: ma });
    }
    Ok(median_in_place(b) / ma)
}

/// Builds the comparison: the verdict from the interval, and for an
/// inconclusive one, what the run could have detected and what would
/// settle it. `reaches_level` is false when the sample is too small for an
/// interval at the level asked (the verdict is then inconclusive).
struct Parts {
    ratio: f64,
    ci: Interval,
    threshold: f64,
    paired: bool,
    n: (usize, usize),
    method: Method,
    /// The level asked (the interval's own `level` is what it reached).
    level: f64,
    reaches_level: bool,
}

fn finish(p: Parts) -> Comparison {
    let verdict = if p.reaches_level {
        Verdict::of(&p.ci, p.threshold)
    } else {
        Verdict::Inconclusive
    };
    let n = p.n.0.min(p.n.1);
    let unsettled = (verdict == Verdict::Inconclusive).then(|| {
        if p.reaches_level {
            Unsettled {
                detectable: detectable(&p.ci, p.threshold),
                more: more_to_settle(p.ratio, &p.ci, p.threshold, n),
                needed: None,
                level: None,
            }
        } else {
            let needed = fewest_for_level(p.level);
            Unsettled {
                detectable: None,
                more: Some(needed.saturating_sub(n).max(1) as u64),
                needed: Some(needed),
                level: Some(p.level),
            }
        }
    });
    Comparison {
        ratio: p.ratio,
        ci: p.ci,
        verdict,
        threshold: p.threshold,
        paired: p.paired,
        n_a: p.n.0,
        n_b: p.n.1,
        method: p.method,
        unsettled,
    }
}

/// Paired comparison of interleaved series (`a[i]`, `b[i]` from round
/// `i`), rank-based ([`Method::HodgesLehmann`]) at `level`. Every value
/// must be positive.
pub fn paired_rank(
    a: &[f64],
    b: &[f64],
    level: f64,
    threshold: f64,
) -> Result<Comparison, StatsError> {
    let d = log_ratios(a, b)?;
    let hl = stats::hodges_lehmann(&d, level)?;
    let reaches_level = hl.reaches_level();
    Ok(finish(Parts {
        ratio: hl.estimate.exp(),
        ci: Interval {
            lo: hl.lo.exp(),
            hi: hl.hi.exp(),
            level: if reaches_level { level } else { hl.coverage },
        },
        threshold,
        paired: true,
        n: (d.len(), d.len()),
        method: Method::HodgesLehmann,
        level,
        reaches_level,
    }))
}

/// Paired comparison of interleaved series (`a[i]`, `b[i]` from round
/// `i`): the median of per-round ratios with a bootstrap of rounds
/// ([`Method::MedianLogRatio`]). Every value must be positive.
pub fn paired(
    a: &[f64],
    b: &[f64],
    boot: &Resampling,
    threshold: f64,
) -> Result<Comparison, StatsError> {
    let mut d = log_ratios(a, b)?;
    let ci = stats::median_ci(&d, boot)?;
    let ratio = median_in_place(&mut d).exp();
    Ok(finish(Parts {
        ratio,
        ci: Interval {
            lo: ci.lo.exp(),
            hi: ci.hi.exp(),
            level: ci.level,
        },
        threshold,
        paired: true,
        n: (a.len(), b.len()),
        method: Method::MedianLogRatio,
        level: boot.level,
        reaches_level: true,
    }))
}

/// Unpaired comparison of two independent series (two saved runs): the
/// ratio of medians with each side bootstrapped on its own.
pub fn unpaired(
    a: &[f64],
    b: &[f64],
    boot: &Resampling,
    threshold: f64,
) -> Result<Comparison, StatsError> {
    validated(a)?;
    validated(b)?;
    let ratio = ratio_of_medians(&mut a.to_vec(), &mut b.to_vec())?;
    let mut sa = a.to_vec();
    let mut sb = b.to_vec();
    sa.sort_by(f64::total_cmp);
    sb.sort_by(f64::total_cmp);
    let mut rng = boot.rng();
    let (mut ra, mut rb) = (vec![0.0; sa.len()], vec![0.0; sb.len()]);
    let mut ratios: Vec<f64> = (0..boot.resamples)
        .map(|_| {
            for slot in ra.iter_mut() {
                *slot = sa[rng.random_range(0..sa.len())];
            }
            for slot in rb.iter_mut() {
                *slot = sb[rng.random_range(0..sb.len())];
            }
            median_in_place(&mut rb) / median_in_place(&mut ra)
        })
        .collect();
    // A resample whose A median is 0 gives an infinite ratio; it stays in
    // (at the top of the order) rather than silently shrinking the interval.
    for r in &mut ratios {
        if r.is_nan() {
            *r = f64::INFINITY;
        }
    }
    Ok(finish(Parts {
        ratio,
        ci: boot.interval(ratios),
        threshold,
        paired: false,
        n: (a.len(), b.len()),
        method: Method::RatioOfMedians,
        level: boot.level,
        reaches_level: true,
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_one_sided_question_settles_on_the_upper_end() {
        let ci = |lo, hi| Interval {
            lo,
            hi,
            level: 0.95,
        };
        assert_eq!(Slowdown::of(&ci(1.15, 1.4), 0.1), Slowdown::Slower);
        // Faster, equivalent and faster-or-equal are one answer.
        assert_eq!(Slowdown::of(&ci(0.7, 0.8), 0.1), Slowdown::NotSlower);
        assert_eq!(Slowdown::of(&ci(0.8, 1.1), 0.1), Slowdown::NotSlower);
        assert_eq!(Verdict::of(&ci(0.8, 1.1), 0.1), Verdict::Inconclusive);
        assert_eq!(Slowdown::of(&ci(1.05, 1.2), 0.1), Slowdown::Inconclusive);
        assert!(!Slowdown::Inconclusive.is_settled());
    }

    use super::*;
    use proptest::prelude::*;

    fn boot() -> Resampling {
        Resampling {
            resamples: 2_000,
            ..Resampling::default()
        }
    }

    fn ci(lo: f64, hi: f64) -> Interval {
        Interval {
            lo,
            hi,
            level: 0.95,
        }
    }

    #[test]
    fn four_verdicts_by_band() {
        // (interval, verdict) against a 2% band [0.98, 1.02].
        for (lo, hi, want) in [
            (1.05, 1.2, Verdict::Slower),
            (0.8, 0.97, Verdict::Faster),
            (0.99, 1.01, Verdict::Equivalent),
            (0.98, 1.02, Verdict::Equivalent),
            (1.0, 1.0, Verdict::Equivalent),
            // Excludes 1 but reaches into the band: not claimed.
            (1.01, 1.2, Verdict::Inconclusive),
            (0.9, 0.99, Verdict::Inconclusive),
            // Holds the band and reaches out on both sides.
            (0.9, 1.1, Verdict::Inconclusive),
            // Inside on one side, out on the other.
            (0.99, 1.03, Verdict::Inconclusive),
        ] {
            assert_eq!(Verdict::of(&ci(lo, hi), 0.02), want, "[{lo}, {hi}]");
        }
    }

    #[test]
    fn verdict_names_and_the_old_name() {
        for (v, json, words) in [
            (Verdict::Faster, "\"faster\"", "faster"),
            (Verdict::Slower, "\"slower\"", "slower"),
            (Verdict::Equivalent, "\"equivalent\"", "equivalent"),
            (Verdict::Inconclusive, "\"inconclusive\"", "inconclusive"),
        ] {
            assert_eq!(serde_json::to_string(&v).unwrap(), json);
            assert_eq!(serde_json::from_str::<Verdict>(json).unwrap(), v);
            assert_eq!(v.to_string(), words);
        }
        assert_eq!(
            serde_json::from_str::<Verdict>("\"no_significant_difference\"").unwrap(),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn a_comparison_saved_before_four_verdicts_reads_back() {
        let old = r#"{"ratio":1.004,"ci":{"lo":0.79,"hi":1.661,"level":0.95},
            "verdict":"no_significant_difference","threshold":0.02,"paired":true,
            "n_a":10,"n_b":10}"#;
        let c: Comparison = serde_json::from_str(old).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert_eq!(c.method, Method::RatioOfMedians);
        assert_eq!(c.unsettled, None);
        // What it could have detected is still known from its interval:
        // half-width ln(1.661 / 0.79) / 2 = 0.3716 -> 1.02 e^0.3716 - 1.
        let want = 1.02 * (1.661f64 / 0.79).sqrt() - 1.0;
        assert!((c.detectable().unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn rank_ratio_of_a_constant_factor_is_exact() {
        // Every round has B = 2 A: every log ratio is ln 2.
        let a = [9.0, 10.0, 11.0, 12.0, 9.5, 10.5, 11.5, 8.0];
        let b: Vec<f64> = a.iter().map(|x| 2.0 * x).collect();
        let c = paired_rank(&a, &b, 0.95, 0.02).unwrap();
        assert!((c.ratio - 2.0).abs() < 1e-12);
        assert!((c.ci.lo - 2.0).abs() < 1e-12 && (c.ci.hi - 2.0).abs() < 1e-12);
        assert_eq!(c.verdict, Verdict::Slower);
        assert_eq!(c.method, Method::HodgesLehmann);
        assert!(c.paired && c.unsettled.is_none());
    }

    #[test]
    fn rank_interval_hand_computed() {
        // Log ratios ln(b/a) = 0.1, 0.2, -0.1 and 0.05, 0.3 (rounds where
        // b = a e^d). Walsh averages (15), sorted:
        // -0.1 -0.025 0 0.025 0.05 0.05 0.075 0.1 0.1 0.125 0.15 0.175 0.2
        // 0.25 0.3. HL = the 8th = 0.1. n = 5 at 90%: P(T <= 0) = 1/32 <=
        // 0.05, P(T <= 1) = 2/32 > 0.05, so k = 1: [-0.1, 0.3].
        let d = [0.1, 0.2, -0.1, 0.05, 0.3];
        let a = [10.0, 20.0, 30.0, 40.0, 50.0];
        let b: Vec<f64> = a.iter().zip(d).map(|(x, d)| x * f64::exp(d)).collect();
        let c = paired_rank(&a, &b, 0.90, 0.02).unwrap();
        assert!((c.ratio.ln() - 0.1).abs() < 1e-12, "{c:?}");
        assert!((c.ci.lo.ln() + 0.1).abs() < 1e-12, "{c:?}");
        assert!((c.ci.hi.ln() - 0.3).abs() < 1e-12, "{c:?}");
        assert_eq!(c.ci.level, 0.90);
        assert_eq!(c.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn too_few_rounds_for_the_level_is_inconclusive_and_says_how_many() {
        // Five rounds, all 50% slower: at 99% an interval needs 8 rounds
        // (2^-8 <= 0.005 < 2^-7).
        let a = [10.0, 11.0, 12.0, 13.0, 14.0];
        let b: Vec<f64> = a.iter().map(|x| 1.5 * x).collect();
        let c = paired_rank(&a, &b, 0.99, 0.02).unwrap();
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert!(c.ci.level < 0.99, "{c:?}");
        let u = c.unsettled.unwrap();
        assert_eq!(u.needed, Some(8));
        assert_eq!(u.level, Some(0.99));
        assert_eq!(u.more, Some(3));
        assert_eq!(u.detectable, None);
        // With eight, the same rounds are a change.
        let a8 = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0];
        let b8: Vec<f64> = a8.iter().map(|x| 1.5 * x).collect();
        assert_eq!(
            paired_rank(&a8, &b8, 0.99, 0.02).unwrap().verdict,
            Verdict::Slower
        );
    }

    #[test]
    fn inconclusive_says_what_it_could_detect_and_what_would_settle_it() {
        // Estimate 1.05, interval [0.95, 1.16]: reaches below the band and
        // above it. Log half-width h = ln(1.16 / 0.95) / 2 = 0.09987;
        // detectable 1.02 e^h - 1 = 12.7%. Nearest edge to ln 1.05 =
        // 0.04879 is ln 1.02 = 0.01980, e = 0.02899: about 30 (h / e)^2 =
        // 356 rounds in all, 326 more.
        let c = finish(Parts {
            ratio: 1.05,
            ci: Interval {
                lo: 0.95,
                hi: 1.16,
                level: 0.99,
            },
            threshold: 0.02,
            paired: true,
            n: (30, 30),
            method: Method::HodgesLehmann,
            level: 0.99,
            reaches_level: true,
        });
        assert_eq!(c.verdict, Verdict::Inconclusive);
        let u = c.unsettled.unwrap();
        let h = (1.16f64 / 0.95).ln() / 2.0;
        assert!((u.detectable.unwrap() - (1.02 * h.exp() - 1.0)).abs() < 1e-12);
        assert!((u.detectable.unwrap() - 0.127).abs() < 0.001);
        let e = 1.05f64.ln() - 1.02f64.ln();
        let want = (30.0 * (h / e).powi(2)).ceil() as u64 - 30;
        assert_eq!(u.more, Some(want));
        assert!((320..=330).contains(&want), "{want}");
        // An estimate right on the band's edge: no fair guess.
        let edge = finish(Parts {
            ratio: 1.02,
            ci: Interval {
                lo: 0.95,
                hi: 1.1,
                level: 0.99,
            },
            threshold: 0.02,
            paired: true,
            n: (30, 30),
            method: Method::HodgesLehmann,
            level: 0.99,
            reaches_level: true,
        });
        assert_eq!(edge.unsettled.unwrap().more, None);
    }

    #[test]
    fn median_log_ratio_bootstrap_hand_computed() {
        // medians of ratios: every round has B = 2 A, so every resample
        // gives exactly 2.
        let a = [9.0, 10.0, 11.0];
        let b = [18.0, 20.0, 22.0];
        let c = paired(&a, &b, &boot(), 0.02).unwrap();
        assert!((c.ratio - 2.0).abs() < 1e-12);
        assert!((c.ci.lo - 2.0).abs() < 1e-12 && (c.ci.hi - 2.0).abs() < 1e-12);
        assert_eq!(c.verdict, Verdict::Slower);
        assert_eq!(c.method, Method::MedianLogRatio);
    }

    #[test]
    fn pairing_cancels_drift() {
        // The machine slows down over the run; B is 5% slower in every round.
        let a: Vec<f64> = (0..20).map(|i| 100.0 + 10.0 * i as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let r = paired_rank(&a, &b, 0.95, 0.02).unwrap();
        let p = paired(&a, &b, &boot(), 0.02).unwrap();
        let u = unpaired(&a, &b, &boot(), 0.02).unwrap();
        assert_eq!(r.verdict, Verdict::Slower, "{r:?}");
        assert_eq!(p.verdict, Verdict::Slower, "{p:?}");
        assert_eq!(u.verdict, Verdict::Inconclusive, "{u:?}");
        assert!(p.ci.half_width() < u.ci.half_width());
        assert!(r.ci.half_width() < u.ci.half_width());
    }

    #[test]
    fn an_outlier_round_moves_the_rank_interval_little() {
        // Twenty rounds with B 10% slower give or take 2%, then one round in
        // which B was hit by a burst of load (4x).
        let a: Vec<f64> = (0..20).map(|i| 90.0 + (i * 7 % 11) as f64).collect();
        let b: Vec<f64> = a
            .iter()
            .enumerate()
            .map(|(i, x)| x * (1.10 + 0.02 * ((i % 3) as f64 - 1.0)))
            .collect();
        let clean = paired_rank(&a, &b, 0.95, 0.02).unwrap();
        let (mut a2, mut b2) = (a.clone(), b.clone());
        a2.push(95.0);
        b2.push(380.0);
        let hit = paired_rank(&a2, &b2, 0.95, 0.02).unwrap();
        assert_eq!(clean.verdict, Verdict::Slower);
        assert_eq!(hit.verdict, Verdict::Slower);
        assert!((hit.ratio / clean.ratio - 1.0).abs() < 0.01, "{hit:?}");
    }

    #[test]
    fn a_against_itself_is_equivalent() {
        let a = [10.0, 12.0, 9.0, 15.0, 11.0, 10.5, 13.0];
        for c in [
            paired_rank(&a, &a, 0.95, 0.02).unwrap(),
            paired(&a, &a, &boot(), 0.02).unwrap(),
        ] {
            assert_eq!(c.ratio, 1.0);
            assert_eq!(c.verdict, Verdict::Equivalent, "{c:?}");
        }
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(
            paired(&[1.0], &[1.0, 2.0], &boot(), 0.02),
            Err(StatsError::UnpairedLengths { a: 1, b: 2 })
        );
        assert_eq!(
            paired_rank(&[1.0, 2.0], &[1.0, 0.0], 0.95, 0.02),
            Err(StatsError::NonPositive {
                index: 1,
                value: 0.0
            })
        );
        assert_eq!(
            paired_rank(&[1.0], &[1.0], 1.0, 0.02),
            Err(StatsError::BadLevel(1.0))
        );
        assert!(matches!(
            unpaired(&[0.0, 0.0], &[1.0], &boot(), 0.02),
            Err(StatsError::NonPositiveBaseline { .. })
        ));
        assert_eq!(unpaired(&[], &[1.0], &boot(), 0.02), Err(StatsError::Empty));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn paired_is_order_independent_and_reproducible(
            rounds in prop::collection::vec((1.0f64..1e3, 1.0f64..1e3), 1..30),
        ) {
            let (a, b): (Vec<f64>, Vec<f64>) = rounds.iter().copied().unzip();
            let (ra, rb): (Vec<f64>, Vec<f64>) = rounds.iter().rev().copied().unzip();
            for (x, y) in [
                (paired(&a, &b, &boot(), 0.02).unwrap(), paired(&ra, &rb, &boot(), 0.02).unwrap()),
                (paired_rank(&a, &b, 0.95, 0.02).unwrap(), paired_rank(&ra, &rb, 0.95, 0.02).unwrap()),
            ] {
                prop_assert_eq!(&x, &y);
                prop_assert!(x.ci.lo <= x.ratio * (1.0 + 1e-12) && x.ratio <= x.ci.hi * (1.0 + 1e-12), "{:?}", x);
                prop_assert_eq!(x.unsettled.is_some(), x.verdict == Verdict::Inconclusive);
            }
        }

        #[test]
        fn swapping_a_and_b_inverts_the_rank_comparison(
            rounds in prop::collection::vec((1.0f64..1e3, 1.0f64..1e3), 8..40),
        ) {
            let (a, b): (Vec<f64>, Vec<f64>) = rounds.iter().copied().unzip();
            let x = paired_rank(&a, &b, 0.95, 0.02).unwrap();
            let y = paired_rank(&b, &a, 0.95, 0.02).unwrap();
            prop_assert!((x.ratio * y.ratio - 1.0).abs() < 1e-9);
            prop_assert!((x.ci.lo * y.ci.hi - 1.0).abs() < 1e-9);
            // The band [1 - t, 1 + t] is not symmetric under 1/x: faster
            // always flips to slower; slower flips to faster once the
            // interval clears 1 / (1 - t).
            match x.verdict {
                Verdict::Faster => prop_assert_eq!(y.verdict, Verdict::Slower),
                Verdict::Slower if x.ci.lo > 1.0 / 0.98 => prop_assert_eq!(y.verdict, Verdict::Faster),
                Verdict::Slower => prop_assert!(y.verdict != Verdict::Slower),
                _ => prop_assert!(y.verdict != Verdict::Faster),
            }
        }

        #[test]
        fn unpaired_ratio_of_scaled_copy(
            a in prop::collection::vec(1.0f64..1e3, 1..30),
            k in 0.25f64..4.0,
        ) {
            let b: Vec<f64> = a.iter().map(|x| x * k).collect();
            let c = unpaired(&a, &b, &boot(), 0.02).unwrap();
            prop_assert!((c.ratio - k).abs() < 1e-9 * k);
        }
    }
}
