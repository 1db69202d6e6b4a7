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
    NotFinite { index: usize, value: f64 },
    /// A ratio was asked for with a baseline median of zero or less.
    #[error("the baseline median is {median}, so a ratio of medians is undefined")]
    NonPositiveBaseline { median: f64 },
    /// Paired series must have the same length.
    #[error("paired series differ in length ({a} and {b}); pair trials by round before comparing")]
    UnpairedLengths { a: usize, b: usize },
    /// The bootstrap configuration cannot give an interval.
    #[error("invalid bootstrap settings: {0}")]
    BadConfig(&'static str),
}

/// How the bootstrap is run. The defaults give reproducible 95% intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Resamples drawn (default 10,000).
    pub resamples: usize,
    /// ChaCha8 seed (default 0x5eed).
    pub seed: u64,
    /// Confidence level in (0, 1) (default 0.95).
    pub level: f64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 10_000,
            seed: 0x5eed,
            level: 0.95,
        }
    }
}

impl Bootstrap {
    fn check(&self) -> Result<(), StatsError> {
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
    pub lo: f64,
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
    pub value: f64,
    pub rule: OutlierRule,
    /// The modified z-score (absent under the Tukey rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// The summary of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    /// Bootstrap percentile interval of the median.
    pub median_ci: Interval,
    pub mean: f64,
    /// Sample standard deviation; `None` when `n = 1`.
    pub sd: Option<f64>,
    pub min: f64,
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

/// Bootstrap percentile interval of the median of `samples`.
pub fn median_ci(samples: &[f64], boot: &Bootstrap) -> Result<Interval, StatsError> {
    check_finite(samples)?;
    boot.check()?;
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

/// Summarises a series. Order does not matter except for outlier indices.
pub fn summarize(samples: &[f64], boot: &Bootstrap) -> Result<Stats, StatsError> {
    check_finite(samples)?;
    boot.check()?;
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

    fn boot() -> Bootstrap {
        Bootstrap {
            resamples: 2_000,
            ..Bootstrap::default()
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
        let zero = Bootstrap {
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
        fn seeded_bootstrap_is_reproducible(v in samples(), seed in any::<u64>()) {
            let b = Bootstrap { seed, ..boot() };
            prop_assert_eq!(median_ci(&v, &b).unwrap(), median_ci(&v, &b).unwrap());
        }
    }
}
