//! The timed phases of a worker's life (`ready`, `health`, `shutdown-ack`,
//! `exit`, `total`, `pipe-latency`, and `connect-first-reply` for workers
//! that serve over tcp; defined, with the CPU-time measure, as
//! [`crate::Phase`] and [`crate::Measure`]), the samples each trial gives for them, and one
//! phase's statistics in a run summary. Both the summary and the warnings
//! build on this module.

use serde::{Deserialize, Serialize};

use crate::compare::Comparison;
use crate::measure::measure_pairs;
use crate::measure::{Measure, Phase, ms};
use crate::stats::{self, Resampling, Stats, StatsError};
use timeline::{TrialKind, TrialRecord, Variant};

/// The samples that enter the statistics: measured, correct trials of one
/// variant. Each sample comes with the index of its trial.
pub fn series(records: &[TrialRecord], phase: Phase, variant: Variant) -> (Vec<f64>, Vec<usize>) {
    let mut values = Vec::new();
    let mut trials = Vec::new();
    for r in records
        .iter()
        .filter(|r| r.kind == TrialKind::Measured && r.variant == variant && r.outcome.is_correct())
    {
        for v in phase.samples_ns(r) {
            values.push(ms(v));
            trials.push(r.trial);
        }
    }
    (values, trials)
}

/// A/B pairs by round, in ms: rounds where both trials are measured and
/// correct and have the phase.
pub fn pairs(records: &[TrialRecord], phase: Phase) -> (Vec<f64>, Vec<f64>) {
    measure_pairs(records, Measure::Wall(phase))
}

/// The statistics of one variant for one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
    /// The summarised samples' statistics (median with CI, spread, outliers), in ms.
    #[serde(flatten)]
    pub stats: Stats,
    /// The trial (`trial` in `trials.jsonl`) of each labelled outlier.
    pub outlier_trials: Vec<usize>,
}

impl SeriesSummary {
    /// Summarises a series; `None` when it is empty.
    pub fn of(
        values: &[f64],
        trials: &[usize],
        boot: &Resampling,
    ) -> Result<Option<Self>, StatsError> {
        if values.is_empty() {
            return Ok(None);
        }
        let stats = stats::summarize(values, boot)?;
        let outlier_trials = stats.outliers.iter().map(|o| trials[o.index]).collect();
        Ok(Some(SeriesSummary {
            stats,
            outlier_trials,
        }))
    }
}

/// One phase's statistics in `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    /// The phase these statistics are of; not serialised, set when built and when read back (see [`PhaseSummary::phase`]).
    #[serde(skip)]
    pub phase: Option<Phase>,
    /// Always `ms`.
    pub unit: String,
    /// Variant A (the only one without `--vs`); `null` when no correct
    /// measured trial has this phase.
    pub a: Option<SeriesSummary>,
    /// Variant B with `--vs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<SeriesSummary>,
    /// B/A paired by round, with `--vs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Comparison>,
}

impl PhaseSummary {
    /// The phase (set when built or read back).
    pub fn phase(&self) -> Phase {
        self.phase
            .expect("set on construction and on deserialisation")
    }

    /// The statistics of variant `v`, when it has any.
    pub fn variant(&self, v: Variant) -> Option<&SeriesSummary> {
        match v {
            Variant::A => self.a.as_ref(),
            Variant::B => self.b.as_ref(),
        }
    }
}
