//! The timed phases of a worker's life (`ready`, `health`, `shutdown-ack`,
//! `exit`, `total`, `pipe-latency`), the samples each trial gives for them,
//! and one phase's statistics in a run summary. Both the summary and the
//! warnings build on this module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compare::Comparison;
use crate::record::{TrialKind, TrialRecord, Variant};
use crate::stats::{self, Bootstrap, Stats, StatsError};

/// A phase of a worker's life, as named in every output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// spawn -> ready line read.
    Ready,
    /// one health round trip.
    Health,
    /// shutdown sent -> acknowledgement read.
    ShutdownAck,
    /// acknowledgement -> process reaped.
    Exit,
    /// spawn -> process reaped.
    Total,
    /// the worker's ready `t_ns` -> the harness's read.
    PipeLatency,
}

impl Phase {
    /// Every phase, in the order of a worker's life (pipe latency last).
    pub const ALL: [Phase; 6] = [
        Phase::Ready,
        Phase::Health,
        Phase::ShutdownAck,
        Phase::Exit,
        Phase::Total,
        Phase::PipeLatency,
    ];

    /// `ready`, `health`, `shutdown-ack`, `exit`, `total`, `pipe-latency`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Ready => "ready",
            Phase::Health => "health",
            Phase::ShutdownAck => "shutdown-ack",
            Phase::Exit => "exit",
            Phase::Total => "total",
            Phase::PipeLatency => "pipe-latency",
        }
    }

    /// Parses a name as printed by [`Phase::name`].
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether the noise warnings apply to a phase with this median (ms):
    /// phases of a millisecond or more. Shorter ones (a health round trip,
    /// an acknowledgement, the pipe latency: tens of microseconds) are
    /// dominated by scheduler wake-ups; their spread is reported, not
    /// warned about.
    pub fn warns_on_noise(self, median_ms: f64) -> bool {
        median_ms >= 1.0
    }

    /// Every sample of this phase in a trial, in ns (several for `health`).
    pub fn samples_ns(self, r: &TrialRecord) -> Vec<f64> {
        let p = &r.phases;
        let one = |v: Option<u64>| v.map(|x| x as f64).into_iter().collect();
        match self {
            Phase::Ready => one(p.ready_ns),
            Phase::Health => p.health_ns.iter().map(|&x| x as f64).collect(),
            Phase::ShutdownAck => one(p.shutdown_ack_ns),
            Phase::Exit => one(p.exit_ns),
            Phase::Total => one(p.total_ns),
            Phase::PipeLatency => p.pipe_latency_ns.map(|x| x as f64).into_iter().collect(),
        }
    }

    /// One value per trial for pairing, in ns: the median of the trial's
    /// samples (matters only for `health`, which has several).
    pub fn per_trial_ns(self, r: &TrialRecord) -> Option<f64> {
        stats::median(&self.samples_ns(r))
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// ns -> ms.
pub fn ms(ns: f64) -> f64 {
    ns / 1e6
}

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
    let mut by_round: BTreeMap<usize, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.kind == TrialKind::Measured && r.outcome.is_correct())
    {
        if let Some(v) = phase.per_trial_ns(r) {
            let slot = by_round.entry(r.round).or_default();
            match r.variant {
                Variant::A => slot.0 = Some(ms(v)),
                Variant::B => slot.1 = Some(ms(v)),
            }
        }
    }
    by_round
        .into_values()
        .filter_map(|(a, b)| Some((a?, b?)))
        .unzip()
}

/// The statistics of one variant for one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSummary {
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
        boot: &Bootstrap,
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

    pub fn variant(&self, v: Variant) -> Option<&SeriesSummary> {
        match v {
            Variant::A => self.a.as_ref(),
            Variant::B => self.b.as_ref(),
        }
    }
}
