//! `cargo xtask probe-check`: bench's own trial and an independent Python probe
//! (`probe.py`: subprocess, readline, `time.monotonic`, as a person would
//! measure it by hand), alternating on the same worker, compared by their
//! median ready times. A harness that adds its own delays, or misses the
//! ready line's arrival, shows here as a ratio away from 1.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use phases::Phase;
use phases::compare::Comparison;
use phases::stats::{self, Resampling, Stats};
use timeline::{TrialKind, Variant};

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::side::{REMOVED_ENV, Side};
use crate::target::Target;
use crate::trials::run_trial;

/// The probe, written to a temporary folder and run with `-I -B`.
const PROBE: &str = include_str!("probe.py");

/// How long one probe round (a worker's start and shutdown, by the probe)
/// may take before the probe counts as hung.
const PROBE_ANSWER: Duration = Duration::from_secs(120);

/// How far apart the two medians may be and still agree.
pub const AGREEMENT: f64 = 0.05;

/// The outcome of a probe check.
#[derive(Debug, Clone)]
pub struct ProbeCheck {
    /// The worker's command as typed.
    pub worker: String,
    /// The interpreter that ran the probe.
    pub python: String,
    /// bench's ready times, ms, over rounds where both were correct.
    pub bench: Stats,
    /// The probe's ready times, ms, over the same rounds.
    pub probe: Stats,
    /// Per-round difference bench - probe, ms.
    pub difference: Stats,
    /// bench / probe, paired by round.
    pub ratio: Comparison,
    /// Measured rounds left out because a trial of theirs failed.
    pub left_out: Vec<usize>,
}

/// What a probe check's ratio interval shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// The whole interval lies within [`AGREEMENT`] of 1.
    Agrees,
    /// The whole interval lies outside it: bench and the probe differ.
    Differs,
    /// The interval reaches both inside and outside: too few rounds, or
    /// too noisy a machine, to tell.
    CannotTell,
}

/// The rule of [`ProbeCheck::agreement`] on a ratio's interval `[lo, hi]`.
fn agreement_of(lo: f64, hi: f64) -> Agreement {
    if lo >= 1.0 - AGREEMENT && hi <= 1.0 + AGREEMENT {
        Agreement::Agrees
    } else if hi < 1.0 - AGREEMENT || lo > 1.0 + AGREEMENT {
        Agreement::Differs
    } else {
        Agreement::CannotTell
    }
}

impl ProbeCheck {
    /// What the ratio's interval shows against [`AGREEMENT`]: never a
    /// verdict from an interval that reaches both sides of the band.
    pub fn agreement(&self) -> Agreement {
        agreement_of(self.ratio.ci.lo, self.ratio.ci.hi)
    }

    /// The check as text.
    pub fn render(&self) -> String {
        let fmt = report::bench::fmt_ms;
        let mut out = String::new();
        for i in &self.left_out {
            let _ = writeln!(out, "round {i}: a trial failed; the round is left out");
        }
        let _ = writeln!(out, "worker: {}", self.worker);
        for (who, s) in [("bench", &self.bench), ("probe", &self.probe)] {
            let _ = writeln!(
                out,
                "{who} median ready {} [{}, {}] over {} rounds",
                fmt(s.median),
                fmt(s.median_ci.lo),
                fmt(s.median_ci.hi),
                s.n
            );
        }
        let _ = writeln!(
            out,
            "(probe: Python subprocess + readline + time.monotonic in {}, alternating with bench on the same worker)",
            self.python
        );
        let d = &self.difference;
        let _ = writeln!(
            out,
            "per-round difference bench - probe: median {} [{}, {}]",
            fmt(d.median),
            fmt(d.median_ci.lo),
            fmt(d.median_ci.hi)
        );
        let _ = writeln!(
            out,
            "ratio of medians bench / probe (paired by round) = {}: {}",
            report::bench::fmt_ratio(&self.ratio),
            match self.agreement() {
                Agreement::Agrees => "its interval lies within 5% of 1: they agree",
                Agreement::Differs => "its interval lies outside 5% of 1: they differ",
                Agreement::CannotTell => {
                    "its interval reaches both within and beyond 5% of 1: no verdict (run more --trials, on a quieter machine)"
                }
            }
        );
        out
    }
}

/// Runs `warmup + rounds` alternating rounds of bench's trial and the probe
/// on `target`.
pub fn probe_check(
    target: Target,
    warmup: usize,
    rounds: usize,
    interrupt: &Interrupt,
) -> Result<ProbeCheck> {
    let side = Side::new(Variant::A, target, None, 1)?;
    let python = side
        .info
        .python
        .as_ref()
        .and_then(|p| p.executable.clone())
        .unwrap_or_else(|| "python3".to_owned());
    let probe_error = |cause| Error::Helper {
        what: "the probe (probe.py)",
        cause: Box::new(cause),
    };
    let mut probe = spawn::Script::new("probe.py", PROBE)
        .timeout(PROBE_ANSWER)
        .spawn(Path::new(&python))
        .map_err(probe_error)?;
    let mut env: BTreeMap<String, String> = side.target.env.clone();
    env.retain(|k, _| !REMOVED_ENV.contains(&k.as_str()));
    let cfg = serde_json::json!({
        "command": side.target.command,
        "env": env,
        "env_remove": REMOVED_ENV,
        "cwd": side.target.cwd,
    });
    probe.send(&cfg.to_string()).map_err(probe_error)?;
    // Per measured round: (bench's ready ms, the probe's ready ms).
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    let mut left_out = Vec::new();
    let mut trial = 0;
    for i in 0..(warmup + rounds) {
        if interrupt.is_set() {
            break;
        }
        let kind = if i < warmup {
            TrialKind::Warmup
        } else {
            TrialKind::Measured
        };
        let mut one_probe = || -> Result<Option<f64>> {
            probe.send("go").map_err(probe_error)?;
            let line = probe.recv().map_err(probe_error)?;
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|cause| Error::Json {
                    context: format!("the probe answered `{}`", line.trim_end()),
                    cause,
                })?;
            Ok((v["ok"] == true).then(|| v["ready_s"].as_f64().unwrap_or(f64::NAN) * 1e3))
        };
        let mut one_bench = || {
            trial += 1;
            run_trial(&side, trial - 1, i, kind, interrupt)
        };
        // Alternate who goes first, as in an interleaved run.
        let (rec, probe) = if i % 2 == 0 {
            let r = one_bench();
            (r, one_probe()?)
        } else {
            let p = one_probe()?;
            (one_bench(), p)
        };
        let bench = rec
            .outcome
            .is_correct()
            .then(|| Phase::Ready.per_trial_ns(&rec).map(phases::ms))
            .flatten();
        match (kind, bench, probe) {
            (TrialKind::Measured, Some(b), Some(p)) => pairs.push((b, p)),
            (TrialKind::Measured, _, _) => left_out.push(i),
            _ => {}
        }
    }
    let _ = probe.finish();
    let boot = Resampling::default();
    let (bench_ms, probe_ms): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let stats_err = |context| move |cause| Error::Stats { context, cause };
    let none = "no round where both trials were correct";
    let diffs: Vec<f64> = pairs.iter().map(|(b, p)| b - p).collect();
    Ok(ProbeCheck {
        worker: side.info.display.clone(),
        bench: stats::summarize(&bench_ms, &boot).map_err(stats_err(none))?,
        probe: stats::summarize(&probe_ms, &boot).map_err(stats_err(none))?,
        ratio: phases::compare::paired(&probe_ms, &bench_ms, &boot, AGREEMENT)
            .map_err(stats_err("could not compare bench and probe"))?,
        difference: stats::summarize(&diffs, &boot).map_err(stats_err("no paired rounds"))?,
        python,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_needs_the_whole_interval_on_one_side_of_the_band() {
        assert_eq!(agreement_of(0.976, 1.024), Agreement::Agrees);
        assert_eq!(agreement_of(0.80, 0.90), Agreement::Differs);
        assert_eq!(agreement_of(1.06, 1.20), Agreement::Differs);
        // A ratio of 1.026 whose interval is 0.81 to 1.22 says nothing.
        assert_eq!(agreement_of(0.809, 1.218), Agreement::CannotTell);
        assert_eq!(agreement_of(1.01, 1.08), Agreement::CannotTell);
    }
}
