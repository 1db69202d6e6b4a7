//! The summary of a bench run (`summary.json`): environment, configuration,
//! trial and failure counts, per-phase statistics (and the A/B ratio when
//! two commands ran interleaved), and warnings.
//!
//! Statistics are taken over the **measured, correct** trials only:
//! warm-ups are recorded but left out, failed trials are counted (and
//! their rate reported) but their timings are not mixed with correct ones.
//! Durations in this file are milliseconds (`unit`), converted from the
//! records' nanoseconds.

use serde::{Deserialize, Serialize};

use crate::compare;
use crate::memory::MemoryView;
use crate::record::{TrialKind, TrialRecord, Variant};
use crate::serve::ServeStats;
use crate::stats::{self, Bootstrap, StatsError};
use crate::warn::{self, Warning};

pub use crate::phase::{Phase, PhaseSummary, SeriesSummary, ms, pairs, series};
pub use crate::run::{
    Configuration, Counts, Environment, Load, Pressure, PythonInfo, TargetInfo, Tool,
};

/// The `schema` of `summary.json`.
pub const SCHEMA: &str = "coldstart-bench-summary/1";

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub schema: String,
    pub environment: Environment,
    pub configuration: Configuration,
    pub trials: Counts,
    /// Keyed by phase name, in the order of a worker's life.
    #[serde(with = "phase_map")]
    pub phases: Vec<PhaseSummary>,
    /// CPU time, peak RSS and RSS at ready per variant (correct measured
    /// trials; summed over a trial's workers for CPU, the largest for RSS).
    pub resources: Vec<Resources>,
    /// How much the harness added to the trials' own lifecycles.
    pub overhead: Overhead,
    pub warnings: Vec<Warning>,
    /// The serve phase of each side that had one (after the timed trials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve: Vec<ServeStats>,
    /// The memory view of each side that had one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryView>,
    /// A serve phase or memory view that could not be run, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_failures: Vec<String>,
}

/// Medians of the workers' resource use for one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub variant: Variant,
    pub trials: usize,
    /// Median user CPU per trial, ms (`wait4`).
    pub user_ms: Option<f64>,
    /// Median system CPU per trial, ms (`wait4`).
    pub sys_ms: Option<f64>,
    /// Median peak RSS, bytes (`wait4`'s `ru_maxrss`).
    pub max_rss_bytes: Option<f64>,
    /// Median RSS right after the ready line, bytes (`/proc/PID/status`).
    pub rss_at_ready_bytes: Option<f64>,
}

impl Resources {
    pub fn of(records: &[TrialRecord], variant: Variant) -> Resources {
        let ok: Vec<&TrialRecord> = records
            .iter()
            .filter(|r| {
                r.kind == TrialKind::Measured && r.variant == variant && r.outcome.is_correct()
            })
            .collect();
        let med = |f: &dyn Fn(&TrialRecord) -> Option<f64>| {
            stats::median(&ok.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
        };
        Resources {
            variant,
            trials: ok.len(),
            user_ms: med(&|r| r.cpu_ns().map(|c| ms(c.0 as f64))),
            sys_ms: med(&|r| r.cpu_ns().map(|c| ms(c.1 as f64))),
            max_rss_bytes: med(&|r| r.max_rss_bytes().map(|b| b as f64)),
            rss_at_ready_bytes: med(&|r| {
                r.workers
                    .iter()
                    .filter_map(|w| w.rss_at_ready_bytes)
                    .max()
                    .map(|b| b as f64)
            }),
        }
    }
}

/// The harness's cost: the trial loop's wall time against the sum of the
/// trials' own lifecycles (first spawn to last exit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    /// Wall time from the first trial's start to the last trial's end, s.
    pub loop_wall_s: f64,
    /// Sum of every trial's `total` (warm-ups and failures included), s.
    pub lifecycles_s: f64,
    /// `loop_wall_s / lifecycles_s`.
    pub ratio: Option<f64>,
}

impl Overhead {
    pub fn of(records: &[TrialRecord], loop_wall_s: f64) -> Overhead {
        let lifecycles_s = records
            .iter()
            .filter_map(|r| r.phases.total_ns)
            .map(|ns| ns as f64 / 1e9)
            .sum::<f64>();
        Overhead {
            loop_wall_s,
            lifecycles_s,
            ratio: (lifecycles_s > 0.0).then(|| loop_wall_s / lifecycles_s),
        }
    }
}

/// The variants present in the records, A first (always A, even with no records).
pub fn variants(records: &[TrialRecord]) -> Vec<Variant> {
    if records.iter().any(|r| r.variant == Variant::B) {
        vec![Variant::A, Variant::B]
    } else {
        vec![Variant::A]
    }
}

/// Per-phase statistics (and paired ratios when both variants ran).
pub fn phase_summaries(
    records: &[TrialRecord],
    boot: &Bootstrap,
    threshold: f64,
) -> Result<Vec<PhaseSummary>, StatsError> {
    let has_b = records.iter().any(|r| r.variant == Variant::B);
    Phase::ALL
        .into_iter()
        .map(|phase| {
            let side = |v| {
                let (values, trials) = series(records, phase, v);
                SeriesSummary::of(&values, &trials, boot)
            };
            let a = side(Variant::A)?;
            let b = if has_b { side(Variant::B)? } else { None };
            let ratio = if has_b {
                let (pa, pb) = pairs(records, phase);
                match compare::paired(&pa, &pb, boot, threshold) {
                    Ok(c) => Some(c),
                    Err(StatsError::Empty | StatsError::NonPositiveBaseline { .. }) => None,
                    Err(e) => return Err(e),
                }
            } else {
                None
            };
            Ok(PhaseSummary {
                phase: Some(phase),
                unit: "ms".to_owned(),
                a,
                b,
                ratio,
            })
        })
        .collect()
}

impl RunSummary {
    /// Whether anything went wrong after the trials beyond rejections: a
    /// view that could not run, a wrong reply, a serve phase that ended
    /// early.
    pub fn serve_failed(&self) -> bool {
        !self.serve_failures.is_empty()
            || self
                .serve
                .iter()
                .any(|s| s.wrong_replies > 0 || s.ended_early.is_some())
    }

    /// Builds the summary of finished trials, with its warnings.
    /// `loop_wall_s` is the trial loop's wall time (see [`Overhead`]).
    pub fn build(
        records: &[TrialRecord],
        environment: Environment,
        configuration: Configuration,
        interrupted: bool,
        loop_wall_s: f64,
    ) -> Result<RunSummary, StatsError> {
        let phases = phase_summaries(
            records,
            &configuration.bootstrap,
            configuration.noise_threshold,
        )?;
        let trials = Counts::of(records, interrupted);
        let warnings = warn::run_warnings(&phases, &trials, &environment, &configuration);
        Ok(RunSummary {
            schema: SCHEMA.to_owned(),
            environment,
            configuration,
            trials,
            phases,
            resources: variants(records)
                .into_iter()
                .map(|v| Resources::of(records, v))
                .collect(),
            overhead: Overhead::of(records, loop_wall_s),
            warnings,
            serve: Vec::new(),
            memory: Vec::new(),
            serve_failures: Vec::new(),
        })
    }

    pub fn phase(&self, phase: Phase) -> Option<&PhaseSummary> {
        self.phases.iter().find(|p| p.phase() == phase)
    }
}

/// `phases` as a JSON object keyed by phase name, in life order.
mod phase_map {
    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    use super::{Phase, PhaseSummary};

    pub fn serialize<S: Serializer>(v: &[PhaseSummary], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(v.len()))?;
        for p in v {
            map.serialize_entry(p.phase().name(), p)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PhaseSummary>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<PhaseSummary>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object keyed by phase name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((name, mut p)) = m.next_entry::<String, PhaseSummary>()? {
                    let phase = Phase::from_name(&name).ok_or_else(|| {
                        serde::de::Error::custom(format_args!("unknown phase `{name}`"))
                    })?;
                    p.phase = Some(phase);
                    out.push(p);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

/// Per-phase statistics of both runs and their unpaired ratios.
pub fn compare_runs(
    a: &[TrialRecord],
    b: &[TrialRecord],
    variant: Variant,
    boot: &Bootstrap,
    threshold: f64,
) -> Result<Vec<PhaseSummary>, StatsError> {
    Phase::ALL
        .into_iter()
        .map(|phase| {
            let (va, ta) = series(a, phase, variant);
            let (vb, tb) = series(b, phase, variant);
            let ratio = match compare::unpaired(&va, &vb, boot, threshold) {
                Ok(c) => Some(c),
                Err(StatsError::Empty | StatsError::NonPositiveBaseline { .. }) => None,
                Err(e) => return Err(e),
            };
            Ok(PhaseSummary {
                phase: Some(phase),
                unit: "ms".to_owned(),
                a: SeriesSummary::of(&va, &ta, boot)?,
                b: SeriesSummary::of(&vb, &tb, boot)?,
                ratio,
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{ExitStatus, Marks, Outcome, RoundTrip, Usage, WorkerRecord};

    pub(crate) fn trial(
        trial: usize,
        round: usize,
        kind: TrialKind,
        variant: Variant,
        ready_ms: f64,
    ) -> TrialRecord {
        let spawned = 1_000_000_000 + trial as u64 * 1_000_000_000;
        let ready = spawned + (ready_ms * 1e6) as u64;
        let w = WorkerRecord {
            pid: Some(100 + trial as u32),
            marks: Marks {
                spawned_ns: spawned,
                ready_read_ns: Some(ready),
                ready_t_ns: Some(ready - 40_000),
                health: vec![RoundTrip {
                    sent_ns: ready + 1_000,
                    received_ns: ready + 101_000,
                }],
                shutdown_sent_ns: Some(ready + 200_000),
                ack_read_ns: Some(ready + 300_000),
                exited_ns: Some(ready + 2_300_000),
            },
            usage: Some(Usage {
                user_ns: 10_000_000,
                sys_ns: 5_000_000,
                max_rss_bytes: 9 << 20,
            }),
            rss_at_ready_bytes: Some(8 << 20),
            exit: Some(ExitStatus::Code(0)),
            escalation: crate::record::Escalation::None,
            noise_lines: 0,
            outcome: Outcome::Correct,
        };
        TrialRecord::new(trial, round, kind, variant, 0, spawned, vec![w])
    }

    pub(crate) fn environment() -> Environment {
        Environment {
            tool: Tool {
                name: "coldstart".into(),
                version: "0.1.0".into(),
                git_revision: None,
                git_dirty: None,
            },
            started_at: "2026-01-01T00:00:00Z".into(),
            started_unix_ms: 0,
            duration_s: 10.0,
            cpu_model: None,
            cpu_count: 2,
            kernel: None,
            at_start: Load {
                loadavg: None,
                pressure: None,
            },
            at_end: Load {
                loadavg: None,
                pressure: None,
            },
            targets: vec![],
        }
    }

    pub(crate) fn configuration() -> Configuration {
        Configuration {
            warmup: 1,
            trials: Some(5),
            precision: None,
            min_trials: 5,
            max_trials: 5,
            health: 1,
            concurrency: 1,
            interleaved: true,
            bootstrap: Bootstrap {
                resamples: 1000,
                ..Bootstrap::default()
            },
            noise_threshold: 0.02,
            ready_timeout_s: 60.0,
            request_timeout_s: 10.0,
            shutdown_timeout_s: 10.0,
            grace_s: 2.0,
        }
    }

    /// A warm-up pair, then 5 rounds with B about twice as slow to ready.
    pub(crate) fn ab_records() -> Vec<TrialRecord> {
        let mut v = vec![
            trial(0, 0, TrialKind::Warmup, Variant::A, 500.0),
            trial(1, 0, TrialKind::Warmup, Variant::B, 500.0),
        ];
        for (i, a) in [50.0, 52.0, 49.0, 51.0, 50.5].into_iter().enumerate() {
            v.push(trial(2 + 2 * i, i, TrialKind::Measured, Variant::A, a));
            v.push(trial(
                3 + 2 * i,
                i,
                TrialKind::Measured,
                Variant::B,
                2.0 * a + 1.0,
            ));
        }
        v
    }

    #[test]
    fn warmups_are_kept_out_and_b_is_slower() {
        let s =
            RunSummary::build(&ab_records(), environment(), configuration(), false, 1.0).unwrap();
        let ready = s.phase(Phase::Ready).unwrap();
        let a = &ready.a.as_ref().unwrap().stats;
        assert_eq!(a.n, 5);
        assert_eq!(a.median, 50.5);
        assert_eq!(a.max, 52.0, "the 500 ms warm-up must not count");
        let r = ready.ratio.as_ref().unwrap();
        assert_eq!(r.verdict, compare::Verdict::Slower);
        assert!((r.ratio - 102.0 / 50.5).abs() < 1e-9);
        // health: 100 us in every trial -> ratio 1, not significant.
        let h = s.phase(Phase::Health).unwrap();
        assert_eq!(h.a.as_ref().unwrap().stats.median, 0.1);
        assert_eq!(
            h.ratio.as_ref().unwrap().verdict,
            compare::Verdict::NoSignificantDifference
        );
        assert_eq!(s.trials.run, 12);
        assert_eq!(s.trials.warmup, 2);
        assert_eq!(s.trials.failed, 0);
        assert_eq!(s.resources.len(), 2);
        assert_eq!(s.resources[0].user_ms, Some(10.0));
        assert_eq!(s.resources[1].max_rss_bytes, Some((9u64 << 20) as f64));
        // 12 lifecycles: 2 x 502.3 + 5 x (a + 2.3) + 5 x (2a + 1 + 2.3) ms.
        let want = (2.0 * 502.3 + 252.5 + 11.5 + 2.0 * 252.5 + 5.0 * 3.3) / 1e3;
        assert!(
            (s.overhead.lifecycles_s - want).abs() < 1e-6,
            "{:?}",
            s.overhead
        );
    }

    #[test]
    fn failed_trials_are_counted_not_measured_and_break_their_pair() {
        let mut recs = ab_records();
        recs[4].outcome = Outcome::Failed {
            check: crate::record::Check::Ready,
            message: "no ready line".into(),
        };
        let s = RunSummary::build(&recs, environment(), configuration(), false, 1.0).unwrap();
        assert_eq!(s.trials.failed, 1);
        assert_eq!(s.trials.failed_by_check["ready"], 1);
        assert!((s.trials.failure_rate - 1.0 / 12.0).abs() < 1e-12);
        let ready = s.phase(Phase::Ready).unwrap();
        assert_eq!(ready.a.as_ref().unwrap().stats.n, 4);
        assert_eq!(ready.ratio.as_ref().unwrap().n_a, 4);
        assert!(
            s.warnings
                .iter()
                .any(|w| w.kind == warn::WarningKind::Failures)
        );
    }

    #[test]
    fn summary_json_round_trips_with_phases_keyed_by_name() {
        let s =
            RunSummary::build(&ab_records(), environment(), configuration(), false, 1.0).unwrap();
        let text = serde_json::to_string_pretty(&s).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = v["phases"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "ready",
                "health",
                "shutdown-ack",
                "exit",
                "total",
                "pipe-latency"
            ]
        );
        assert_eq!(v["phases"]["ready"]["ratio"]["verdict"], "slower");
        assert_eq!(v["schema"], SCHEMA);
        let back: RunSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back.phases.len(), 6);
        assert_eq!(back.phase(Phase::Exit).unwrap().phase(), Phase::Exit);
        assert_eq!(back.trials, s.trials);
        assert_eq!(back.configuration, s.configuration);
    }
}
