//! Descriptive statistics over one series of samples, with a seeded
//! bootstrap confidence interval for the median.
//!
//! Definitions (so a reader can recompute every figure by hand):
//! - **median**: the middle value of the sorted sample; for an even count,
//!   the mean of the two middle values.
//! - **percentile** `q` (used for p90 and the bootstrap interval bounds):
//!   linear interpolation between closest ranks, Hyndman and Fan type 7
//!   (numpy's and R's default): with the sample sorted ascending
//!   `x[0..n]`, `h = (n - 1) q`, the value is
//!   `x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])`.
//! - **sd**: the sample standard deviation (divisor `n - 1`); absent when
//!   `n = 1`. **cv** is `sd / mean`.
//! - **MAD**: the raw median absolute deviation, `median(|x - median|)`,
//!   not scaled by 1.4826.
//! - **outliers**: labelled, never removed. A sample is an outlier when its
//!   modified z-score `0.6745 |x - median| / MAD` exceeds 3.5 (Iglewicz and
//!   Hoaglin). When the MAD is 0 (more than half of the samples are equal)
//!   the score is undefined and Tukey's fences are used instead: outside
//!   `[Q1 - 1.5 IQR, Q3 + 1.5 IQR]`.
//! - **median CI**: percentile bootstrap. `resamples` samples of size `n`
//!   are drawn with replacement using ChaCha8 seeded with `seed`; the median
//!   of each is taken; the interval is the `(1 - level) / 2` and
//!   `(1 + level) / 2` percentiles (type 7) of those medians. The same
//!   sample, in any order, and the same seed give the same interval.
//! - **Hodges-Lehmann estimate** ([`hodges_lehmann`]) of the centre of a
//!   sample `d[0..n]`: the median of its `n (n + 1) / 2` Walsh averages
//!   `(d[i] + d[j]) / 2`, `i <= j`. Its **signed-rank interval** at level
//!   `1 - alpha` is `[W(k), W(M + 1 - k)]` over the sorted Walsh averages
//!   `W(1..=M)`, where `k` is the largest count with
//!   `P(T <= k - 1) <= alpha / 2` for the Wilcoxon signed-rank statistic `T`
//!   of `n` values symmetric about the centre (Hollander and Wolfe). `T`'s
//!   distribution is exact (all `2^n` sign patterns, by recursion) for
//!   `n <= 100`, and the normal approximation with continuity correction
//!   above (slightly conservative: `T`'s tails are lighter than the normal's,
//!   so `k` comes out at most a few order statistics low): `k = floor(M / 2 - z sqrt(n (n + 1)
//!   (2n + 1) / 24) + 1 / 2)`, `z` the `1 - alpha / 2` normal quantile. The
//!   interval is distribution-free for any continuous distribution
//!   symmetric about its centre, needs no resampling and no seed, and an
//!   outlier moves it no more than any other single value. When `n` is too
//!   small for the level (`2^-n > alpha / 2`: `n < 6` at 95%, `n < 8` at
//!   99%) the widest interval, `[min, max]`, falls short of it; its
//!   [`SignedRank::coverage`] says by how much.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// What can go wrong when summarising samples.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StatsError {
    /// No samples at all.
    #[error("no samples to summarise: every trial failed or none was run")]
    Empty,
    /// A NaN or infinite sample.
    #[error("sample {index} is not a finite number ({value}); the records are corrupt")]
    NotFinite {
        /// Position of the sample in the series.
        index: usize,
        /// The offending value (NaN or infinite).
        value: f64,
    },
    /// A ratio was asked for with a baseline median of zero or less.
    #[error("the baseline median is {median}, so a ratio of medians is undefined")]
    NonPositiveBaseline {
        /// The baseline's median.
        median: f64,
    },
    /// Paired series must have the same length.
    #[error("paired series differ in length ({a} and {b}); pair trials by round before comparing")]
    UnpairedLengths {
        /// Length of the A series.
        a: usize,
        /// Length of the B series.
        b: usize,
    },
    /// The bootstrap configuration cannot give an interval.
    #[error("invalid bootstrap settings: {0}")]
    BadConfig(&'static str),
    /// A ratio of each pair was asked for and a value is zero or negative.
    #[error(
        "sample {index} is {value}, so its log ratio is undefined; compare only positive durations"
    )]
    NonPositive {
        /// Position of the sample in the series.
        index: usize,
        /// The value, zero or negative.
        value: f64,
    },
    /// A confidence level outside (0, 1).
    #[error("the confidence level {0} is not strictly between 0 and 1: give 0.95 or 0.99")]
    BadLevel(f64),
}

/// How the bootstrap resampling is run (resamples, seed, level). The
/// defaults give reproducible 95% intervals. Named `Resampling`, not
/// `Bootstrap`: that is the recorder's injected `sitecustomize`
/// (`importguard::recorder::bootstrap::Bootstrap`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resampling {
    /// Resamples drawn (default 10,000).
    pub resamples: usize,
    /// ChaCha8 seed (default 0x5eed).
    pub seed: u64,
    /// Confidence level in (0, 1) (default 0.95).
    pub level: f64,
}

impl Default for Resampling {
    fn default() -> Self {
        Resampling {
            resamples: 10_000,
            seed: 0x5eed,
            level: 0.95,
        }
    }
}

impl Resampling {
    fn validate(&self) -> Result<(), StatsError> {
        if self.resamples == 0 {
            return Err(StatsError::BadConfig("resamples must be at least 1"));
        }
        if !(self.level > 0.0 && self.level < 1.0) {
            return Err(StatsError::BadConfig(
                "level must lie strictly between 0 and 1",
            ));
        }
        Ok(())
    }

    /// The percentile interval of already computed bootstrap statistics.
    pub(crate) fn interval(&self, mut stats: Vec<f64>) -> Interval {
        stats.sort_by(f64::total_cmp);
        let tail = (1.0 - self.level) / 2.0;
        Interval {
            lo: percentile_sorted(&stats, tail),
            hi: percentile_sorted(&stats, 1.0 - tail),
            level: self.level,
        }
    }

    pub(crate) fn rng(&self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed)
    }
}

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound, in the samples' unit.
    pub lo: f64,
    /// Upper bound, in the samples' unit.
    pub hi: f64,
    /// The confidence level, e.g. 0.95.
    pub level: f64,
}

impl Interval {
    /// Half the width: the "+-" a person reads.
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// Whether `x` lies in the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// Why a sample is labelled an outlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutlierRule {
    /// Modified z-score above 3.5.
    ModifiedZ,
    /// Outside Tukey's 1.5 IQR fences (used when the MAD is 0).
    TukeyFence,
}

/// A sample labelled as an outlier. It stays in every statistic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outlier {
    /// Position in the series as given.
    pub index: usize,
    /// The sample's value.
    pub value: f64,
    /// Which rule labelled it.
    pub rule: OutlierRule,
    /// The modified z-score (absent under the Tukey rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// The summary of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// How many samples the series has.
    pub n: usize,
    /// The sample median.
    pub median: f64,
    /// Resampling percentile interval of the median.
    pub median_ci: Interval,
    /// The arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation; `None` when `n = 1`.
    pub sd: Option<f64>,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// 90th percentile (type 7).
    pub p90: f64,
    /// Raw median absolute deviation.
    pub mad: f64,
    /// `sd / mean`; `None` when `n = 1` or the mean is 0.
    pub cv: Option<f64>,
    /// Labelled outliers, in series order.
    pub outliers: Vec<Outlier>,
}

fn check_finite(samples: &[f64]) -> Result<(), StatsError> {
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    match samples.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(StatsError::NotFinite {
            index,
            value: samples[index],
        }),
        None => Ok(()),
    }
}

/// The median of a non-empty slice (reordered in place).
pub(crate) fn median_in_place(v: &mut [f64]) -> f64 {
    debug_assert!(!v.is_empty());
    let n = v.len();
    let mid = n / 2;
    let (_, upper, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        upper
    } else {
        let lower = v[..mid]
            .iter()
            .copied()
            .max_by(f64::total_cmp)
            .expect("mid >= 1 for even n >= 2");
        (lower + upper) / 2.0
    }
}

/// The median; `None` when empty.
pub fn median(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    Some(median_in_place(&mut samples.to_vec()))
}

/// Percentile `q` in [0, 1] of a sorted slice, type 7 (see the module doc).
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of an empty sample");
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Resampling percentile interval of the median of `samples`.
pub fn median_ci(samples: &[f64], boot: &Resampling) -> Result<Interval, StatsError> {
    check_finite(samples)?;
    boot.validate()?;
    // Sorting first makes the draw independent of the order given.
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mut rng = boot.rng();
    let mut scratch = vec![0.0; n];
    let medians = (0..boot.resamples)
        .map(|_| {
            for slot in scratch.iter_mut() {
                *slot = sorted[rng.random_range(0..n)];
            }
            median_in_place(&mut scratch)
        })
        .collect();
    Ok(boot.interval(medians))
}

/// The standard normal quantile: the `x` with `P(Z <= x) = p`, for `p` in
/// (0, 1) (Wichura's algorithm AS 241, about 16 significant digits).
/// Returns minus or plus infinity at 0 and 1, and NaN outside [0, 1].
// The coefficients are AS 241's as published, a digit or two beyond f64.
#[allow(clippy::excessive_precision)]
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let poly = |c: &[f64], x: f64| c.iter().rev().fold(0.0, |acc, &k| acc * x + k);
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * poly(
            &[
                3.387_132_872_796_366_6,
                133.141_667_891_784_38,
                1_971.590_950_306_551_4,
                13_731.693_765_509_461,
                45_921.953_931_549_87,
                67_265.770_927_008_7,
                33_430.575_583_588_13,
                2_509.080_928_730_122_7,
            ],
            r,
        ) / poly(
            &[
                1.0,
                42.313_330_701_600_91,
                687.187_007_492_057_9,
                5_394.196_021_424_751,
                21_213.794_301_586_597,
                39_307.895_800_092_71,
                28_729.085_735_721_943,
                5_226.495_278_852_546,
            ],
            r,
        );
    }
    let tail = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        poly(
            &[
                1.423_437_110_749_683_6,
                4.630_337_846_156_545,
                5.769_497_221_460_691,
                3.647_848_324_763_204_5,
                1.270_458_252_452_368_4,
                0.241_780_725_177_450_6,
                0.022_723_844_989_269_184,
                7.745_450_142_783_414e-4,
            ],
            r,
        ) / poly(
            &[
                1.0,
                2.053_191_626_637_759,
                1.676_384_830_183_803_8,
                0.689_767_334_985_1,
                0.148_103_976_427_480_08,
                0.015_198_666_563_616_457,
                5.475_938_084_995_345e-4,
                1.050_750_071_644_416_8e-9,
            ],
            r,
        )
    } else {
        let r = r - 5.0;
        poly(
            &[
                6.657_904_643_501_103,
                5.463_784_911_164_114,
                1.784_826_539_917_291_3,
                0.296_560_571_828_504_9,
                0.026_532_189_526_576_124,
                0.001_242_660_947_388_078_4,
                2.711_555_568_743_487_6e-5,
                2.010_334_399_292_288_1e-7,
            ],
            r,
        ) / poly(
            &[
                1.0,
                0.599_832_206_555_887_9,
                0.136_929_880_922_735_8,
                0.014_875_361_290_850_615,
                7.868_691_311_456_133e-4,
                1.846_318_317_510_054_8e-5,
                1.421_511_758_316_446e-7,
                2.044_263_103_389_939_8e-15,
            ],
            r,
        )
    };
    if q < 0.0 { -x } else { x }
}

/// Up to this many values the signed-rank statistic's distribution is
/// computed exactly; above, its normal approximation is used.
pub const SIGNED_RANK_EXACT_MAX: usize = 100;

/// `P(T <= t)` for `t` in `0..=n(n+1)/2`, `T` the signed-rank statistic of
/// `n` values under symmetry: each rank `1..=n` enters the sum with
/// probability 1/2, independently.
fn signed_rank_cdf(n: usize) -> Vec<f64> {
    let m = n * (n + 1) / 2;
    let mut p = vec![0.0; m + 1];
    p[0] = 1.0;
    for rank in 1..=n {
        let top = rank * (rank + 1) / 2;
        for t in (0..=top).rev() {
            let with = if t >= rank { p[t - rank] } else { 0.0 };
            p[t] = (p[t] + with) / 2.0;
        }
    }
    let mut acc = 0.0;
    for x in &mut p {
        acc += *x;
        *x = acc;
    }
    p
}

/// The order statistic `k` (1-based) of the signed-rank interval of `n`
/// values at `level`, and the interval's coverage. `k = 0`: no interval
/// reaches the level (the sample is too small).
pub fn signed_rank_k(n: usize, level: f64) -> (usize, f64) {
    let tail = (1.0 - level) / 2.0;
    if n == 0 {
        return (0, 0.0);
    }
    let m = n * (n + 1) / 2;
    if n <= SIGNED_RANK_EXACT_MAX {
        let cdf = signed_rank_cdf(n);
        // The largest k with P(T <= k - 1) <= tail; the cdf only grows.
        let k = cdf
            .iter()
            .take_while(|&&c| c <= tail * (1.0 + 1e-12))
            .count();
        let coverage = if k == 0 {
            1.0 - 2.0 * cdf[0]
        } else {
            1.0 - 2.0 * cdf[k - 1]
        };
        // k = 0: the widest interval [W(1), W(M)] has the coverage of k = 1.
        return (k.min(m.div_ceil(2)), coverage.max(0.0));
    }
    let mean = m as f64 / 2.0;
    let sd = (n as f64 * (n as f64 + 1.0) * (2.0 * n as f64 + 1.0) / 24.0).sqrt();
    let z = normal_quantile(1.0 - tail);
    let k = (mean - z * sd + 0.5).floor().max(0.0) as usize;
    (k.min(m.div_ceil(2)), level)
}

/// The Hodges-Lehmann estimate of a sample's centre with its signed-rank
/// interval (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SignedRank {
    /// Values in the sample.
    pub n: usize,
    /// The median of the Walsh averages.
    pub estimate: f64,
    /// The interval at the level asked (or `[min, max]` when the sample is
    /// too small for it).
    pub lo: f64,
    /// Upper end of the interval (`lo` is the lower end).
    pub hi: f64,
    /// The level asked.
    pub level: f64,
    /// The interval's exact coverage for `n <= 100` (at least `level` when
    /// the sample is large enough), the level asked above.
    pub coverage: f64,
}

impl SignedRank {
    /// Whether the interval reaches the level asked (the sample is large
    /// enough); when not, the interval is only `[min, max]`.
    pub fn reaches_level(&self) -> bool {
        self.coverage + 1e-12 >= self.level
    }
}

/// The `k`-th smallest (0-based) of `v`, reordering it.
fn kth(v: &mut [f64], k: usize) -> f64 {
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// The Hodges-Lehmann estimate of the centre of `d` and its signed-rank
/// interval at `level` (see the module doc).
pub fn hodges_lehmann(d: &[f64], level: f64) -> Result<SignedRank, StatsError> {
    check_finite(d)?;
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::BadLevel(level));
    }
    let n = d.len();
    let mut sorted = d.to_vec();
    sorted.sort_by(f64::total_cmp);
    let m = n * (n + 1) / 2;
    let mut walsh = Vec::with_capacity(m);
    for i in 0..n {
        for j in i..n {
            walsh.push((sorted[i] + sorted[j]) / 2.0);
        }
    }
    let (k, coverage) = signed_rank_k(n, level);
    let (lo, hi) = if k == 0 {
        (sorted[0], sorted[n - 1])
    } else {
        (kth(&mut walsh, k - 1), kth(&mut walsh, m - k))
    };
    let estimate = if m % 2 == 1 {
        kth(&mut walsh, m / 2)
    } else {
        (kth(&mut walsh, m / 2 - 1) + kth(&mut walsh, m / 2)) / 2.0
    };
    Ok(SignedRank {
        n,
        estimate,
        lo,
        hi,
        level,
        coverage,
    })
}

/// Summarises a series. Order does not matter except for outlier indices.
pub fn summarize(samples: &[f64], boot: &Resampling) -> Result<Stats, StatsError> {
    check_finite(samples)?;
    boot.validate()?;
    let n = samples.len();
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let med = percentile_sorted(&sorted, 0.5);
    // Summing in sorted order keeps the mean bit-identical for any input order.
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let sd = (n > 1).then(|| {
        let ss: f64 = sorted.iter().map(|x| (x - mean).powi(2)).sum();
        (ss / (n - 1) as f64).sqrt()
    });
    let mut dev: Vec<f64> = sorted.iter().map(|x| (x - med).abs()).collect();
    let mad = median_in_place(&mut dev);
    let cv = sd.and_then(|sd| (mean != 0.0).then(|| sd / mean.abs()));
    Ok(Stats {
        n,
        median: med,
        median_ci: median_ci(&sorted, boot)?,
        mean,
        sd,
        min: sorted[0],
        max: sorted[n - 1],
        p90: percentile_sorted(&sorted, 0.9),
        mad,
        cv,
        outliers: outliers(samples, &sorted, med, mad),
    })
}

/// Labels outliers (see the module doc); `sorted` is `samples` sorted.
fn outliers(samples: &[f64], sorted: &[f64], med: f64, mad: f64) -> Vec<Outlier> {
    if mad > 0.0 {
        samples
            .iter()
            .enumerate()
            .filter_map(|(index, &value)| {
                let score = 0.6745 * (value - med).abs() / mad;
                (score > 3.5).then_some(Outlier {
                    index,
                    value,
                    rule: OutlierRule::ModifiedZ,
                    score: Some(score),
                })
            })
            .collect()
    } else {
        let q1 = percentile_sorted(sorted, 0.25);
        let q3 = percentile_sorted(sorted, 0.75);
        let iqr = q3 - q1;
        let (lo, hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        samples
            .iter()
            .enumerate()
            .filter(|&(_, &v)| v < lo || v > hi)
            .map(|(index, &value)| Outlier {
                index,
                value,
                rule: OutlierRule::TukeyFence,
                score: None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn boot() -> Resampling {
        Resampling {
            resamples: 2_000,
            ..Resampling::default()
        }
    }

    #[track_caller]
    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn hand_computed_odd() {
        // 1 2 3 4 100: median 3, mean 22, deviations 2 1 0 1 97 -> MAD 1.
        let s = summarize(&[4.0, 100.0, 1.0, 3.0, 2.0], &boot()).unwrap();
        assert_eq!(s.n, 5);
        close(s.median, 3.0);
        close(s.mean, 22.0);
        // squares about 22: 441 400 361 324 6084 = 7610; /4 = 1902.5
        close(s.sd.unwrap(), 1902.5f64.sqrt());
        close(s.min, 1.0);
        close(s.max, 100.0);
        // h = 4 * 0.9 = 3.6 -> 4 + 0.6 * 96 = 61.6
        close(s.p90, 61.6);
        close(s.mad, 1.0);
        close(s.cv.unwrap(), 1902.5f64.sqrt() / 22.0);
        // 100: 0.6745 * 97 / 1 = 65.4 > 3.5; 1: 0.6745 * 2 = 1.35 no.
        assert_eq!(s.outliers.len(), 1);
        assert_eq!(s.outliers[0].index, 1);
        assert_eq!(s.outliers[0].rule, OutlierRule::ModifiedZ);
        close(s.outliers[0].score.unwrap(), 0.6745 * 97.0);
    }

    #[test]
    fn hand_computed_even() {
        let s = summarize(&[10.0, 20.0, 30.0, 40.0], &boot()).unwrap();
        close(s.median, 25.0);
        close(s.mean, 25.0);
        // h = 3 * 0.9 = 2.7 -> 30 + 0.7 * 10 = 37
        close(s.p90, 37.0);
        // deviations 15 5 5 15 -> 10
        close(s.mad, 10.0);
        // ss = 225 + 25 + 25 + 225 = 500; /3
        close(s.sd.unwrap(), (500.0f64 / 3.0).sqrt());
        assert!(s.outliers.is_empty());
    }

    #[test]
    fn single_sample_has_no_spread() {
        let s = summarize(&[7.0], &boot()).unwrap();
        assert_eq!(
            (s.median, s.min, s.max, s.p90, s.mad),
            (7.0, 7.0, 7.0, 7.0, 0.0)
        );
        assert_eq!(s.sd, None);
        assert_eq!(s.cv, None);
        assert_eq!((s.median_ci.lo, s.median_ci.hi), (7.0, 7.0));
    }

    #[test]
    fn zero_mad_falls_back_to_tukey() {
        // Q1 = Q3 = 5, IQR 0: 9 is outside the fences, the 5s are not.
        let s = summarize(&[5.0, 5.0, 5.0, 5.0, 9.0], &boot()).unwrap();
        assert_eq!(s.mad, 0.0);
        assert_eq!(s.outliers.len(), 1);
        assert_eq!(s.outliers[0].index, 4);
        assert_eq!(s.outliers[0].rule, OutlierRule::TukeyFence);
    }

    #[test]
    fn percentile_type7_matches_numpy() {
        // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = 1, 1.75, 2.5, 3.7, 4
        let v = [1.0, 2.0, 3.0, 4.0];
        for (q, want) in [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (0.9, 3.7), (1.0, 4.0)] {
            close(percentile_sorted(&v, q), want);
        }
    }

    #[test]
    fn two_point_bootstrap_is_the_obvious_one() {
        // Resample medians of {0, 10}: 0 (1/4), 5 (1/2), 10 (1/4); 95% CI is [0, 10].
        let ci = median_ci(&[0.0, 10.0], &boot()).unwrap();
        assert_eq!((ci.lo, ci.hi), (0.0, 10.0));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert_eq!(summarize(&[], &boot()), Err(StatsError::Empty));
        assert!(matches!(
            summarize(&[1.0, f64::NAN], &boot()),
            Err(StatsError::NotFinite { index: 1, .. })
        ));
        let zero = Resampling {
            resamples: 0,
            ..boot()
        };
        assert!(matches!(
            summarize(&[1.0], &zero),
            Err(StatsError::BadConfig(_))
        ));
    }

    #[test]
    fn interval_narrows_with_more_samples() {
        let small: Vec<f64> = (0..10).map(|i| 100.0 + (i * 7 % 10) as f64).collect();
        let big: Vec<f64> = (0..200).map(|i| 100.0 + (i * 7 % 10) as f64).collect();
        let a = median_ci(&small, &boot()).unwrap();
        let b = median_ci(&big, &boot()).unwrap();
        assert!(b.half_width() < a.half_width(), "{a:?} vs {b:?}");
    }

    #[test]
    fn normal_quantile_matches_python() {
        // statistics.NormalDist().inv_cdf(p) in CPython (the same AS 241).
        for (p, want) in [
            (0.975, 1.959_963_984_540_053_6),
            (0.995, 2.575_829_303_548_9),
            (0.9975, 2.807_033_768_343_811_4),
            (0.3, -0.524_400_512_708_040_7),
            (0.02, -2.053_748_910_631_822_5),
            (1e-10, -6.361_340_902_404_056),
            (0.999_999, 4.753_424_308_817_089),
        ] {
            let got = normal_quantile(p);
            assert!(
                (got - want).abs() < 1e-12 * want.abs().max(1.0),
                "{p}: {got} != {want}"
            );
        }
        assert_eq!(normal_quantile(0.5), 0.0);
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert!(normal_quantile(1.5).is_nan());
    }

    /// `P(T <= t)` by listing all 2^n sign patterns.
    fn brute_cdf(n: usize) -> Vec<f64> {
        let m = n * (n + 1) / 2;
        let mut count = vec![0u64; m + 1];
        for signs in 0u32..(1 << n) {
            let t: usize = (0..n).filter(|i| signs >> i & 1 == 1).map(|i| i + 1).sum();
            count[t] += 1;
        }
        let mut acc = 0;
        count
            .iter()
            .map(|c| {
                acc += c;
                acc as f64 / (1u64 << n) as f64
            })
            .collect()
    }

    #[test]
    fn signed_rank_distribution_is_exact() {
        for n in 1..=14 {
            let got = signed_rank_cdf(n);
            let want = brute_cdf(n);
            assert_eq!(got.len(), want.len());
            for (t, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() < 1e-15, "n {n} t {t}: {g} != {w}");
            }
        }
    }

    #[test]
    fn signed_rank_k_matches_the_tables() {
        // Two-sided 5% critical values of T (Wilcoxon's tables): n = 6 -> 0,
        // 8 -> 3, 10 -> 8, 20 -> 52, 30 -> 137; the interval's k is one more.
        for (n, t) in [(6, 0), (8, 3), (10, 8), (20, 52), (30, 137)] {
            assert_eq!(signed_rank_k(n, 0.95).0, t + 1, "n = {n}");
        }
        // Too few for the level.
        assert_eq!(signed_rank_k(5, 0.95).0, 0);
        assert_eq!(signed_rank_k(7, 0.99).0, 0);
        assert_eq!(signed_rank_k(8, 0.99).0, 1);
        // Exact coverage: n = 10, k = 9: 1 - 2 P(T <= 8) = 1 - 2 * 25/1024.
        let (_, cov) = signed_rank_k(10, 0.95);
        assert!((cov - (1.0 - 50.0 / 1024.0)).abs() < 1e-12);
        // Above the exact range, the approximation is conservative (never a
        // narrower interval than the exact one) and close to it: within
        // 0.2% of the M Walsh averages.
        for n in [101, 150, 250] {
            let cdf = signed_rank_cdf(n);
            for level in [0.95, 0.99, 0.995] {
                let exact = cdf
                    .iter()
                    .take_while(|&&c| c <= (1.0 - level) / 2.0)
                    .count();
                let approx = signed_rank_k(n, level).0;
                let m = n * (n + 1) / 2;
                assert!(
                    approx <= exact && exact - approx <= m / 500,
                    "n {n} level {level}: exact {exact}, approximation {approx}"
                );
            }
        }
    }

    #[test]
    fn hodges_lehmann_hand_computed() {
        // d = 1, 2, 4: Walsh averages 1 1.5 2 2.5 3 4 -> HL = (2 + 2.5) / 2.
        let hl = hodges_lehmann(&[4.0, 1.0, 2.0], 0.5).unwrap();
        assert_eq!(hl.estimate, 2.25);
        assert_eq!(hl.n, 3);
        // n = 3 at 50%: P(T <= 0) = 1/8 <= 0.25, P(T <= 1) = 2/8 <= 0.25,
        // P(T <= 2) = 3/8 > 0.25: k = 2 -> [W(2), W(5)] = [1.5, 3].
        assert_eq!((hl.lo, hl.hi), (1.5, 3.0));
        assert!((hl.coverage - 0.5).abs() < 1e-12);
        assert!(hl.reaches_level());
        // Too small for 95%: [min, max] and its coverage 1 - 2/8.
        let wide = hodges_lehmann(&[4.0, 1.0, 2.0], 0.95).unwrap();
        assert_eq!((wide.lo, wide.hi), (1.0, 4.0));
        assert!(!wide.reaches_level());
        assert!((wide.coverage - 0.75).abs() < 1e-12);
        assert_eq!(hodges_lehmann(&[], 0.95), Err(StatsError::Empty));
        assert_eq!(hodges_lehmann(&[1.0], 0.0), Err(StatsError::BadLevel(0.0)));
    }

    #[test]
    fn signed_rank_interval_covers_at_its_level() {
        // 2000 samples of 20 from a symmetric, heavy-tailed distribution
        // (a t-like ratio of normals, clipped) centred on 0.3: the 95%
        // interval holds 0.3 in at least 94% of them (exact coverage 95.2%).
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        let mut z = || {
            let u: f64 = 1.0 - rng.random::<f64>();
            let v: f64 = rng.random();
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let mut hits = 0;
        for _ in 0..2000 {
            let d: Vec<f64> = (0..20)
                .map(|_| 0.3 + (z() / z().abs().max(0.2)).clamp(-50.0, 50.0))
                .collect();
            let hl = hodges_lehmann(&d, 0.95).unwrap();
            hits += usize::from(hl.lo <= 0.3 && 0.3 <= hl.hi);
        }
        assert!((1880..=1960).contains(&hits), "{hits} of 2000");
    }

    fn samples() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(0.001f64..1e4, 1..40)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn median_within_min_max(v in samples()) {
            let s = summarize(&v, &boot()).unwrap();
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert!(s.min <= s.p90 && s.p90 <= s.max);
        }

        #[test]
        fn ci_holds_the_median(v in samples()) {
            let s = summarize(&v, &boot()).unwrap();
            prop_assert!(s.median_ci.contains(s.median), "{:?} vs {}", s.median_ci, s.median);
            prop_assert!(s.min <= s.median_ci.lo && s.median_ci.hi <= s.max);
        }

        #[test]
        fn independent_of_order(v in samples(), seed in any::<u64>()) {
            let mut shuffled = v.clone();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.random_range(0..=i));
            }
            let a = summarize(&v, &boot()).unwrap();
            let b = summarize(&shuffled, &boot()).unwrap();
            prop_assert_eq!(a.median, b.median);
            prop_assert_eq!(a.median_ci, b.median_ci);
            prop_assert_eq!(a.mean, b.mean);
            prop_assert_eq!(a.sd, b.sd);
            prop_assert_eq!(a.p90, b.p90);
            prop_assert_eq!(a.mad, b.mad);
            let mut ov: Vec<f64> = a.outliers.iter().map(|o| o.value).collect();
            let mut ow: Vec<f64> = b.outliers.iter().map(|o| o.value).collect();
            ov.sort_by(f64::total_cmp);
            ow.sort_by(f64::total_cmp);
            prop_assert_eq!(ov, ow);
        }

        #[test]
        fn hodges_lehmann_is_order_free_shift_equivariant_and_inside(
            v in samples(),
            shift in -100.0f64..100.0,
            level in 0.5f64..0.999,
        ) {
            let a = hodges_lehmann(&v, level).unwrap();
            let mut rev = v.clone();
            rev.reverse();
            prop_assert_eq!(a, hodges_lehmann(&rev, level).unwrap());
            let moved: Vec<f64> = v.iter().map(|x| x + shift).collect();
            let b = hodges_lehmann(&moved, level).unwrap();
            let tol = 1e-9 * (1.0 + shift.abs() + a.hi.abs());
            prop_assert!((b.estimate - a.estimate - shift).abs() < tol);
            prop_assert!((b.lo - a.lo - shift).abs() < tol && (b.hi - a.hi - shift).abs() < tol);
            let (min, max) = v.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
            prop_assert!(min <= a.lo && a.lo <= a.estimate && a.estimate <= a.hi && a.hi <= max, "{:?}", a);
        }

        #[test]
        fn seeded_bootstrap_is_reproducible(v in samples(), seed in any::<u64>()) {
            let b = Resampling { seed, ..boot() };
            prop_assert_eq!(median_ci(&v, &b).unwrap(), median_ci(&v, &b).unwrap());
        }
    }
}
