//! What a comparison is of: a phase of a worker's life ([`Phase`], its
//! wall time) or the worker's CPU time ([`Measure`]), one value per trial,
//! and the A/B pairs of a measure by round.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compare::{self, Comparison};
use crate::stats::{self, StatsError};
use timeline::{TrialKind, TrialRecord, Variant};

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
    /// a worker that serves over tcp: the read of its ready line (on
    /// stderr) -> the read of the first health reply on the connection.
    ConnectFirstReply,
}

impl Phase {
    /// Every phase, in the order of a worker's life (the wire's latencies
    /// last).
    pub const ALL: [Phase; 7] = [
        Phase::Ready,
        Phase::Health,
        Phase::ShutdownAck,
        Phase::Exit,
        Phase::Total,
        Phase::PipeLatency,
        Phase::ConnectFirstReply,
    ];

    /// The phases a run lists: every one, but `connect-first-reply` only
    /// when a worker of the run served over tcp.
    pub fn listed(records: &[TrialRecord]) -> Vec<Phase> {
        let tcp = records
            .iter()
            .any(|r| r.phases.connect_first_reply_ns.is_some());
        Phase::ALL
            .into_iter()
            .filter(|&p| p != Phase::ConnectFirstReply || tcp)
            .collect()
    }

    /// `ready`, `health`, `shutdown-ack`, `exit`, `total`, `pipe-latency`,
    /// `connect-first-reply`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Ready => "ready",
            Phase::Health => "health",
            Phase::ShutdownAck => "shutdown-ack",
            Phase::Exit => "exit",
            Phase::Total => "total",
            Phase::PipeLatency => "pipe-latency",
            Phase::ConnectFirstReply => "connect-first-reply",
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
            Phase::ConnectFirstReply => one(p.connect_first_reply_ns),
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

/// What a comparison is of: the wall time of a phase, or the worker's CPU
/// time (user + system from `wait4`, summed over a trial's workers, over
/// their whole life). Written as the phase's name, or `cpu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// Wall time of a phase.
    Wall(Phase),
    /// User + system CPU time of the trial's workers.
    Cpu,
}

impl Measure {
    /// Wall time of `ready`: what a run answers about by default.
    pub const READY: Measure = Measure::Wall(Phase::Ready);

    /// `ready`, `total`, ... for wall time; `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Wall(p) => p.name(),
            Measure::Cpu => "cpu",
        }
    }

    /// Parses a name as printed by [`Measure::name`].
    pub fn from_name(name: &str) -> Option<Measure> {
        match name {
            "cpu" => Some(Measure::Cpu),
            _ => Phase::from_name(name).map(Measure::Wall),
        }
    }

    /// What a person reads: `ready (wall time)`, `cpu (user + system time)`.
    pub fn describe(self) -> String {
        match self {
            Measure::Wall(p) => format!("{p} (wall time)"),
            Measure::Cpu => "cpu (user + system time)".to_owned(),
        }
    }

    /// One value per trial, in ms: the phase's per-trial value
    /// ([`Phase::per_trial_ns`]), or the workers' user + system CPU.
    pub fn per_trial_ms(self, r: &TrialRecord) -> Option<f64> {
        match self {
            Measure::Wall(p) => p.per_trial_ns(r).map(ms),
            Measure::Cpu => r.cpu_ns().map(|(u, s)| ms((u + s) as f64)),
        }
    }
}

impl std::fmt::Display for Measure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Measure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Measure {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Measure::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format_args!(
                "unknown measure `{name}`: write a phase name or `cpu`"
            ))
        })
    }
}

/// ns -> ms.
pub fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// A/B pairs of any measure by round, in ms: rounds where both trials are
/// measured and correct and have the measure, in round order.
pub fn measure_pairs(records: &[TrialRecord], measure: Measure) -> (Vec<f64>, Vec<f64>) {
    let mut by_round: BTreeMap<usize, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| r.kind == TrialKind::Measured && r.outcome.is_correct())
    {
        if let Some(v) = measure.per_trial_ms(r) {
            let slot = by_round.entry(r.round).or_default();
            match r.variant {
                Variant::A => slot.0 = Some(v),
                Variant::B => slot.1 = Some(v),
            }
        }
    }
    by_round
        .into_values()
        .filter_map(|(a, b)| Some((a?, b?)))
        .unzip()
}

/// The paired rank-based comparison ([`compare::paired_rank`]) of one
/// measure, or `None` when no round has both values or a value is not
/// positive (a phase the trials did not reach, a clock that was not shared).
pub fn compare_measure(
    records: &[TrialRecord],
    measure: Measure,
    level: f64,
    threshold: f64,
) -> Result<Option<Comparison>, StatsError> {
    let (a, b) = measure_pairs(records, measure);
    match compare::paired_rank(&a, &b, level, threshold) {
        Ok(c) => Ok(Some(c)),
        Err(StatsError::Empty | StatsError::NonPositive { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
