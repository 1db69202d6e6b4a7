//! pyperf-style warnings: reasons not to trust a run's figures as they are.
//!
//! - **high variation**: coefficient of variation over 10%;
//! - **far from median**: the minimum or maximum more than 50% away from
//!   the median;
//!   (both only for phases of a millisecond or more, see
//!   [`Phase::warns_on_noise`])
//! - **pressure**: some task waited for a CPU during more than 10% of the
//!   run (`/proc/pressure/cpu`), or the 1-minute load average at the end
//!   exceeded the CPU count;
//! - **failures**: any trial failed;
//! - **too few trials**: fewer than [`MIN_TRIALS_FOR_CI`] measured trials,
//!   or a `--precision` that was not reached within `--max-trials`;
//! - **shim**: `command[0]` is not the interpreter itself, so every trial
//!   also pays for a second process;
//! - **interrupted**: Ctrl-C ended the run early.

use serde::{Deserialize, Serialize};

use crate::Phase;
use crate::phase::PhaseSummary;
use crate::run::{Configuration, Counts, Environment};
use timeline::Variant;

/// Coefficient of variation above which a series is called noisy.
pub const MAX_CV: f64 = 0.10;
/// Relative distance of min or max from the median above which to warn.
pub const MAX_SPREAD: f64 = 0.50;
/// Share of the run with CPU stalls above which to warn.
pub const MAX_CPU_STALL: f64 = 0.10;
/// Below this many measured trials a bootstrap interval means little.
pub const MIN_TRIALS_FOR_CI: usize = 5;

/// What a warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// A phase's coefficient of variation is above [`MAX_CV`].
    HighVariation,
    /// A phase's minimum or maximum is more than [`MAX_SPREAD`] away from its median.
    FarFromMedian,
    /// CPU pressure above [`MAX_CPU_STALL`] of the run, or a 1-minute load average above the CPU count at the end.
    Pressure,
    /// At least one trial failed.
    Failures,
    /// Fewer than [`MIN_TRIALS_FOR_CI`] measured trials, or a `--precision` not reached within `--max-trials`.
    TooFewTrials,
    /// `command[0]` is a shim, not the interpreter, so every trial also pays for a second process.
    Shim,
    /// Ctrl-C ended the run early.
    Interrupted,
}

/// One warning, with the sentence a person reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    /// What the warning is about.
    pub kind: WarningKind,
    /// The phase it concerns, when it concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The variant (A or B) it concerns, when it concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    /// The sentence a person reads.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// Noise warnings for one phase and variant.
pub fn noise_warnings(phase: &PhaseSummary, variant: Variant) -> Vec<Warning> {
    let p = phase.phase();
    let Some(s) = phase.variant(variant).map(|s| &s.stats) else {
        return Vec::new();
    };
    if !p.warns_on_noise(s.median) || s.n < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let w = |kind, message| Warning {
        kind,
        phase: Some(p),
        variant: Some(variant),
        message,
    };
    if let Some(cv) = s.cv.filter(|&cv| cv > MAX_CV) {
        out.push(w(
            WarningKind::HighVariation,
            format!(
                "{p} ({variant}): the coefficient of variation is {} (over {}); the machine is noisy, compare ratios from interleaved runs rather than absolute times",
                pct(cv),
                pct(MAX_CV)
            ),
        ));
    }
    if s.median > 0.0 {
        for (which, v) in [("minimum", s.min), ("maximum", s.max)] {
            let d = (v - s.median).abs() / s.median;
            if d > MAX_SPREAD {
                out.push(w(
                    WarningKind::FarFromMedian,
                    format!(
                        "{p} ({variant}): the {which} {v:.3} ms is {} from the median {:.3} ms (over {}); look for outliers or interference",
                        pct(d),
                        s.median,
                        pct(MAX_SPREAD)
                    ),
                ));
            }
        }
    }
    out
}

/// Every warning of a finished run.
pub fn run_warnings(
    phases: &[PhaseSummary],
    counts: &Counts,
    env: &Environment,
    config: &Configuration,
) -> Vec<Warning> {
    let mut out = Vec::new();
    let plain = |kind, message| Warning {
        kind,
        phase: None,
        variant: None,
        message,
    };
    if counts.interrupted {
        out.push(plain(
            WarningKind::Interrupted,
            format!(
                "the run was interrupted after {} trials; these figures cover only the trials that finished",
                counts.run
            ),
        ));
    }
    if counts.failed > 0 {
        let by: Vec<String> = counts
            .failed_by_stage
            .iter()
            .map(|(k, v)| format!("{v} at {k}"))
            .collect();
        let gave_up = counts.gave_up.map_or(String::new(), |v| {
            format!(
                "; the run stopped there: no trial of {v} completed, and a worker that never does is not started again (after {} failures): fix the first failure, shown below",
                crate::run::GIVE_UP_AFTER
            )
        });
        out.push(plain(
            WarningKind::Failures,
            format!(
                "{} of {} trials failed ({}; {}); failed trials are kept in trials.jsonl and left out of the timings{gave_up}",
                counts.failed,
                counts.run,
                pct(counts.failure_rate),
                by.join(", ")
            ),
        ));
    }
    for t in &env.targets {
        if let Some(py) = t.python.as_ref().filter(|p| p.shim) {
            out.push(Warning {
                kind: WarningKind::Shim,
                phase: None,
                variant: Some(t.variant),
                message: format!(
                    "{} ({}): `{}` is a shim ({}); every trial also pays for starting it: run {} directly to measure the worker alone",
                    t.name,
                    t.variant,
                    py.requested,
                    py.note
                        .as_deref()
                        .unwrap_or("it is not the interpreter it runs"),
                    py.executable.as_deref().unwrap_or("the real interpreter"),
                ),
            });
        }
    }
    if let Some(stall) = env.cpu_stall_fraction().filter(|&s| s > MAX_CPU_STALL) {
        out.push(plain(
            WarningKind::Pressure,
            format!(
                "some task waited for a CPU during {} of the run (/proc/pressure/cpu); other work competed with the trials",
                pct(stall)
            ),
        ));
    }
    if let Some(l) = env.at_end.loadavg.filter(|l| l[0] > env.cpu_count as f64) {
        out.push(plain(
            WarningKind::Pressure,
            format!(
                "the 1-minute load average was {:.2} at the end of the run, over the {} CPUs; other work competed with the trials",
                l[0], env.cpu_count
            ),
        ));
    }
    for ph in phases {
        for v in [Variant::A, Variant::B] {
            out.extend(noise_warnings(ph, v));
        }
    }
    if let Some(ready) = phases.iter().find(|p| p.phase() == Phase::Ready) {
        for v in [Variant::A, Variant::B] {
            let Some(s) = ready.variant(v).map(|s| &s.stats) else {
                continue;
            };
            let w = |message| Warning {
                kind: WarningKind::TooFewTrials,
                phase: Some(Phase::Ready),
                variant: Some(v),
                message,
            };
            if s.n < MIN_TRIALS_FOR_CI {
                out.push(w(format!(
                    "only {} correct measured trials ({v}); a confidence interval from fewer than {MIN_TRIALS_FOR_CI} means little, run more with --trials",
                    s.n
                )));
            }
            if let Some(p) = config.precision {
                let got = relative_half_width(s);
                if got > p {
                    out.push(w(format!(
                        "the median ready time's CI half-width is {} of the median ({v}), short of the {} asked after {} trials; raise --max-trials or lower --precision",
                        pct(got),
                        pct(p),
                        s.n
                    )));
                }
            }
        }
    }
    out
}

/// The median's CI half-width as a fraction of the median (infinite when
/// the median is 0).
pub fn relative_half_width(s: &crate::stats::Stats) -> f64 {
    if s.median > 0.0 {
        s.median_ci.half_width() / s.median
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::RunSummary;
    use crate::summary::tests::{configuration, environment, trial};
    use timeline::TrialKind;

    fn kinds(w: &[Warning]) -> Vec<WarningKind> {
        w.iter().map(|w| w.kind).collect()
    }

    #[test]
    fn quiet_run_has_no_warnings() {
        let recs: Vec<_> = (0..8)
            .map(|i| trial(i, i, TrialKind::Measured, Variant::A, 50.0 + (i % 3) as f64))
            .collect();
        let s = RunSummary::build(&recs, environment(), configuration(), false, 1.0).unwrap();
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }

    #[test]
    fn noisy_run_warns_on_cv_and_spread() {
        let recs: Vec<_> = [50.0, 51.0, 49.0, 52.0, 50.0, 120.0]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| trial(i, i, TrialKind::Measured, Variant::A, ms))
            .collect();
        let s = RunSummary::build(&recs, environment(), configuration(), false, 1.0).unwrap();
        let k = kinds(&s.warnings);
        assert!(k.contains(&WarningKind::HighVariation), "{k:?}");
        assert!(k.contains(&WarningKind::FarFromMedian), "{k:?}");
        let ready_cv = s
            .warnings
            .iter()
            .find(|w| w.kind == WarningKind::HighVariation && w.phase == Some(Phase::Ready))
            .unwrap();
        assert!(
            ready_cv
                .message
                .starts_with("ready (A): the coefficient of variation is")
        );
    }

    #[test]
    fn pressure_few_trials_precision_and_interruption() {
        let recs: Vec<_> = [50.0, 60.0, 40.0]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| trial(i, i, TrialKind::Measured, Variant::A, ms))
            .collect();
        let mut env = environment();
        env.at_start.pressure = Some(crate::run::Pressure {
            some_avg10: 0.0,
            some_avg60: 0.0,
            some_total_us: 0,
        });
        // 3 s of stalls in a 10 s run: 30%.
        env.at_end.pressure = Some(crate::run::Pressure {
            some_avg10: 30.0,
            some_avg60: 5.0,
            some_total_us: 3_000_000,
        });
        env.at_end.loadavg = Some([3.5, 1.0, 0.5]);
        let mut config = configuration();
        config.precision = Some(0.01);
        let s = RunSummary::build(&recs, env, config, true, 1.0).unwrap();
        let k = kinds(&s.warnings);
        assert_eq!(
            k.iter().filter(|&&k| k == WarningKind::Pressure).count(),
            2,
            "{k:?}"
        );
        assert_eq!(
            k.iter()
                .filter(|&&k| k == WarningKind::TooFewTrials)
                .count(),
            2,
            "{k:?}"
        );
        assert_eq!(k[0], WarningKind::Interrupted);
        assert!(s.warnings[1].message.contains("30.0%"), "{:?}", s.warnings);
    }
}
