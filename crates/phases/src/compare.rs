//! A against B: the ratio of medians `median(B) / median(A)` with a
//! bootstrap confidence interval, and a verdict.
//!
//! - **Paired** ([`paired`]): A and B ran interleaved in one session
//!   (A B A B ...); `a[i]` and `b[i]` are the two trials of round `i`. A
//!   resample draws rounds with replacement and keeps each round's two
//!   values together, so drift of the machine during the run, which hits
//!   both trials of a round alike, cancels instead of widening the interval.
//! - **Unpaired** ([`unpaired`]): two separate runs; each side is resampled
//!   on its own.
//!
//! The verdict follows criterion.rs: a change is real only when the whole
//! interval lies outside the noise band `[1 - t, 1 + t]` (default `t` 2%).
//! An interval that reaches into the band, or holds 1, is
//! [`Verdict::NoSignificantDifference`]. A ratio above 1 means B took longer.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::stats::{Bootstrap, Interval, StatsError, median_in_place};

/// The default noise threshold: changes within 2% are not claimed.
pub const DEFAULT_NOISE_THRESHOLD: f64 = 0.02;

/// Whether B is faster or slower than A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies below `1 - threshold`.
    Faster,
    /// The whole interval lies above `1 + threshold`.
    Slower,
    /// The interval reaches into the noise band.
    NoSignificantDifference,
}

impl Verdict {
    /// The words a person reads: `faster`, `slower`, `no significant difference`.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoSignificantDifference => "no significant difference",
        }
    }

    /// Classifies an interval of the ratio B/A against a noise threshold.
    pub fn of(ci: &Interval, threshold: f64) -> Verdict {
        if ci.lo > 1.0 + threshold {
            Verdict::Slower
        } else if ci.hi < 1.0 - threshold {
            Verdict::Faster
        } else {
            Verdict::NoSignificantDifference
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// The ratio of medians B/A with its interval and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `median(B) / median(A)`.
    pub ratio: f64,
    pub ci: Interval,
    pub verdict: Verdict,
    /// The noise threshold the verdict used (0.02 is 2%).
    pub threshold: f64,
    /// Whether rounds were resampled as pairs.
    pub paired: bool,
    pub n_a: usize,
    pub n_b: usize,
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

fn ratio_of_medians(a: &mut [f64], b: &mut [f64]) -> Result<f64, StatsError> {
    let ma = median_in_place(a);
    if ma <= 0.0 {
        return Err(StatsError::NonPositiveBaseline { median: ma });
    }
    Ok(median_in_place(b) / ma)
}

fn finish(
    ratio: f64,
    mut ratios: Vec<f64>,
    boot: &Bootstrap,
    threshold: f64,
    paired: bool,
    (n_a, n_b): (usize, usize),
) -> Comparison {
    // A resample whose A median is 0 gives an infinite ratio; it stays in
    // (at the top of the order) rather than silently shrinking the interval.
    for r in &mut ratios {
        if r.is_nan() {
            *r = f64::INFINITY;
        }
    }
    let ci = boot.interval(ratios);
    Comparison {
        ratio,
        ci,
        verdict: Verdict::of(&ci, threshold),
        threshold,
        paired,
        n_a,
        n_b,
    }
}

/// Paired comparison of interleaved series (`a[i]`, `b[i]` from round `i`).
pub fn paired(
    a: &[f64],
    b: &[f64],
    boot: &Bootstrap,
    threshold: f64,
) -> Result<Comparison, StatsError> {
    validated(a)?;
    validated(b)?;
    if a.len() != b.len() {
        return Err(StatsError::UnpairedLengths {
            a: a.len(),
            b: b.len(),
        });
    }
    let ratio = ratio_of_medians(&mut a.to_vec(), &mut b.to_vec())?;
    // Sort rounds by (a, b) so the result does not depend on round order.
    let mut rounds: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
    rounds.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)));
    let n = rounds.len();
    let mut rng = boot.rng();
    let (mut ra, mut rb) = (vec![0.0; n], vec![0.0; n]);
    let ratios = (0..boot.resamples)
        .map(|_| {
            for i in 0..n {
                let (x, y) = rounds[rng.random_range(0..n)];
                ra[i] = x;
                rb[i] = y;
            }
            median_in_place(&mut rb) / median_in_place(&mut ra)
        })
        .collect();
    Ok(finish(ratio, ratios, boot, threshold, true, (n, n)))
}

/// Unpaired comparison of two independent series (two saved runs).
pub fn unpaired(
    a: &[f64],
    b: &[f64],
    boot: &Bootstrap,
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
    let ratios = (0..boot.resamples)
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
    Ok(finish(
        ratio,
        ratios,
        boot,
        threshold,
        false,
        (a.len(), b.len()),
    ))
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

    #[test]
    fn verdict_words_and_bands() {
        let ci = |lo, hi| Interval {
            lo,
            hi,
            level: 0.95,
        };
        assert_eq!(Verdict::of(&ci(1.05, 1.2), 0.02), Verdict::Slower);
        assert_eq!(Verdict::of(&ci(0.8, 0.97), 0.02), Verdict::Faster);
        // Excludes 1 but reaches into the band: not claimed.
        assert_eq!(
            Verdict::of(&ci(1.01, 1.2), 0.02),
            Verdict::NoSignificantDifference
        );
        assert_eq!(
            Verdict::of(&ci(0.9, 1.1), 0.02),
            Verdict::NoSignificantDifference
        );
        assert_eq!(
            Verdict::NoSignificantDifference.to_string(),
            "no significant difference"
        );
        assert_eq!(
            serde_json::to_string(&Verdict::NoSignificantDifference).unwrap(),
            "\"no_significant_difference\""
        );
    }

    #[test]
    fn paired_ratio_hand_computed() {
        // medians: A 10, B 20 -> 2; every round has B = 2 A, so every
        // resample gives exactly 2.
        let a = [9.0, 10.0, 11.0];
        let b = [18.0, 20.0, 22.0];
        let c = paired(&a, &b, &boot(), 0.02).unwrap();
        assert_eq!(c.ratio, 2.0);
        assert_eq!((c.ci.lo, c.ci.hi), (2.0, 2.0));
        assert_eq!(c.verdict, Verdict::Slower);
        assert!(c.paired);
    }

    #[test]
    fn pairing_cancels_drift() {
        // The machine slows down over the run; B is 5% slower in every round.
        let a: Vec<f64> = (0..20).map(|i| 100.0 + 10.0 * i as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let p = paired(&a, &b, &boot(), 0.02).unwrap();
        let u = unpaired(&a, &b, &boot(), 0.02).unwrap();
        assert_eq!(p.verdict, Verdict::Slower, "{p:?}");
        assert_eq!(u.verdict, Verdict::NoSignificantDifference, "{u:?}");
        assert!(p.ci.half_width() < u.ci.half_width());
    }

    #[test]
    fn a_against_itself_is_not_significant() {
        let a = [10.0, 12.0, 9.0, 15.0, 11.0, 10.5, 13.0];
        for c in [
            paired(&a, &a, &boot(), 0.02).unwrap(),
            unpaired(&a, &a, &boot(), 0.02).unwrap(),
        ] {
            assert_eq!(c.ratio, 1.0);
            assert_eq!(c.verdict, Verdict::NoSignificantDifference, "{c:?}");
        }
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(
            paired(&[1.0], &[1.0, 2.0], &boot(), 0.02),
            Err(StatsError::UnpairedLengths { a: 1, b: 2 })
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
            let x = paired(&a, &b, &boot(), 0.02).unwrap();
            let y = paired(&ra, &rb, &boot(), 0.02).unwrap();
            prop_assert_eq!(&x, &y);
            prop_assert_eq!(&x, &paired(&a, &b, &boot(), 0.02).unwrap());
            prop_assert!(x.ci.lo <= x.ci.hi);
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
