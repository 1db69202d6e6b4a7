//! The summary of a bench run (`summary.json`): environment, configuration,
//! trial and failure counts, per-phase statistics (and the A/B ratio when
//! two commands ran interleaved), and warnings.
//!
//! Statistics are taken over the **measured, correct** trials only:
//! warm-ups are recorded but left out, failed trials are counted (and
//! their rate reported) but their timings are not mixed with correct ones.
//! Durations in this file are milliseconds (`unit`), converted from the
//! records' nanoseconds.
//!
//! With two variants, every phase gets its ratio B/A ([`PhaseSummary::ratio`],
//! wall time), the worker's CPU time gets one beside them, and [`AbAnalysis`]
//! (`ab`) says how they were computed, which of them the run's answer rests
//! on and, for a run that stopped by itself, why it stopped. [`Placement`]
//! (`placement`) records where the processes ran. Both blocks are absent in
//! summaries written before they existed, which still read back.

use serde::{Deserialize, Serialize};

use crate::compare::{self, Comparison, Method};
use crate::measure::{Measure, compare_measure};
use crate::measure::{Phase, ms};
use crate::memory::MemoryView;
use crate::phase::{PhaseSummary, SeriesSummary, series};
use crate::pool::PoolStats;
use crate::run::{Configuration, Counts, Environment};
use crate::sequential::{StopRule, Stopped};
use crate::serve::ServeStats;
use crate::stats::{self, Resampling, StatsError};
use crate::warn::{self, Warning};
use timeline::Placement;
use timeline::{TrialKind, TrialRecord, Variant};

/// The `schema` of `summary.json`.
pub const SCHEMA: &str = "coldstart.bench-summary/2";

/// `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The schema tag, [`SCHEMA`].
    pub schema: String,
    /// The tool, machine, load and benchmarked commands of the run.
    pub environment: Environment,
    /// How the run was asked for (trial counts, timeouts, bootstrap).
    pub configuration: Configuration,
    /// How many trials ran and failed, by the stage they failed in.
    pub trials: Counts,
    /// Keyed by phase name, in the order of a worker's life.
    #[serde(with = "phase_map")]
    pub phases: Vec<PhaseSummary>,
    /// CPU time, peak RSS and RSS at ready per variant (correct measured
    /// trials; summed over a trial's workers for CPU, the largest for RSS).
    pub resources: Vec<Resources>,
    /// How much the harness added to the trials' own lifecycles.
    pub overhead: Overhead,
    /// Pyperf-style warnings about noisy or thin runs.
    pub warnings: Vec<Warning>,
    /// With two variants: how they were compared, what the answer rests on,
    /// CPU time beside wall time, and why the run stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ab: Option<AbAnalysis>,
    /// Where the processes ran (CPU pinning), when the harness recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The serve phase of each side that had one (after the timed trials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve: Vec<ServeStats>,
    /// The memory view of each side that had one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemoryView>,
    /// A serve phase or memory view that could not be run, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_failures: Vec<String>,
    /// Startup-probe and request-timeout settings derived from the
    /// measured ready times and latencies ([`crate::probe`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<crate::probe::Probes>,
    /// The pool run of each side that had one (`--pool`, instead of the
    /// one-worker serve phase).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pool: Vec<PoolStats>,
}

/// How the two variants of an interleaved run were compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbAnalysis {
    /// How every ratio and interval was computed.
    pub method: Method,
    /// The level of every comparison's interval: 0.95 for a run looked at
    /// once, the stopping rule's (wider) level for one that looked after
    /// every round.
    pub level: f64,
    /// The measures whose verdicts are the run's answer (by default wall
    /// time of `ready`; a stopping rule's measures).
    pub basis: Vec<Measure>,
    /// The workers' CPU time B/A, beside wall time; absent when `wait4`
    /// gave no usage.
    pub cpu: Option<Comparison>,
    /// For a run that stopped by itself: the rule and why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialRun>,
}

/// A run that ran rounds until its question was answered or a budget ran
/// out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialRun {
    /// The rule it followed.
    pub rule: StopRule,
    /// Why and when it stopped.
    pub stopped: Stopped,
}

impl AbAnalysis {
    /// The comparisons the answer rests on, with their measures, from the
    /// run's phases (and CPU time).
    pub fn answer<'a>(
        &'a self,
        phases: &'a [PhaseSummary],
    ) -> Vec<(Measure, Option<&'a Comparison>)> {
        self.basis
            .iter()
            .map(|&m| {
                let c = match m {
                    Measure::Wall(p) => phases
                        .iter()
                        .find(|s| s.phase() == p)
                        .and_then(|s| s.ratio.as_ref()),
                    Measure::Cpu => self.cpu.as_ref(),
                };
                (m, c)
            })
            .collect()
    }
}

/// Medians of the workers' resource use for one variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// The variant (A or B) these figures are of.
    pub variant: Variant,
    /// How many correct measured trials the medians are over.
    pub trials: usize,
    /// Median user CPU per trial, ms (`wait4`).
    pub user_ms: Option<f64>,
    /// Median system CPU per trial, ms (`wait4`).
    pub sys_ms: Option<f64>,
    /// Median peak RSS, bytes (`wait4`'s `ru_maxrss`).
    pub max_rss_bytes: Option<f64>,
    /// Median RSS right after the ready line, bytes (`/proc/PID/status`).
    pub rss_at_ready_bytes: Option<f64>,
    /// Under a memory limit: the median of the most memory a trial's
    /// workers' cgroups were charged (the largest of its workers), what the
    /// limit is held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_peak_bytes: Option<f64>,
}

impl Resources {
    /// Medians of the resource use of `variant`'s correct measured trials.
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
            rss_at_ready_bytes: med(&|r| largest(r, |w| w.rss_at_ready_bytes)),
            cgroup_peak_bytes: med(&|r| largest(r, |w| w.cgroup_peak_bytes)),
        }
    }
}

/// The largest of a trial's workers' figures `f`, where any has one.
fn largest(r: &TrialRecord, f: impl Fn(&timeline::WorkerRecord) -> Option<u64>) -> Option<f64> {
    r.workers.iter().filter_map(f).max().map(|b| b as f64)
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
    /// The harness's overhead from the trial records and the trial loop's wall time in seconds.
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

/// Per-phase statistics (and paired ratios when both variants ran), the
/// ratios at [`compare::DEFAULT_LEVEL`].
pub fn phase_summaries(
    records: &[TrialRecord],
    boot: &Resampling,
    threshold: f64,
) -> Result<Vec<PhaseSummary>, StatsError> {
    phase_summaries_at(records, boot, threshold, compare::DEFAULT_LEVEL)
}

/// Per-phase statistics, and paired rank-based ratios at `level` when both
/// variants ran.
pub fn phase_summaries_at(
    records: &[TrialRecord],
    boot: &Resampling,
    threshold: f64,
    level: f64,
) -> Result<Vec<PhaseSummary>, StatsError> {
    let has_b = records.iter().any(|r| r.variant == Variant::B);
    Phase::listed(records)
        .into_iter()
        .map(|phase| {
            let side = |v| {
                let (values, trials) = series(records, phase, v);
                SeriesSummary::of(&values, &trials, boot)
            };
            let a = side(Variant::A)?;
            let b = if has_b { side(Variant::B)? } else { None };
            let ratio = if has_b {
                compare_measure(records, Measure::Wall(phase), level, threshold)?
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

/// How [`RunSummary::assemble`] compares the variants.
struct Analysis {
    level: f64,
    threshold: f64,
    basis: Vec<Measure>,
    sequential: Option<SequentialRun>,
}

impl RunSummary {
    /// Derives the startup-probe and request-timeout settings of the
    /// finished run ([`crate::probe`]) into the summary, with their
    /// warnings.
    pub fn advise_probes(
        &mut self,
        records: &[TrialRecord],
        requests: &[crate::serve::RequestRecord],
    ) {
        let probes = crate::probe::Probes::of(records, requests);
        self.warnings.extend(probes.warnings());
        self.probes = (!probes.startup.is_empty()).then_some(probes);
    }
}

impl RunSummary {
    /// Whether anything went wrong after the trials beyond rejections: a
    /// view that could not run, a wrong reply, a serve phase that ended
    /// early, a pool run that failed ([`PoolStats::failed`]).
    pub fn serve_failed(&self) -> bool {
        !self.serve_failures.is_empty()
            || self
                .serve
                .iter()
                .any(|s| s.wrong_replies > 0 || s.ended_early.is_some())
            || self.pool.iter().any(PoolStats::failed)
    }

    /// Builds the summary of finished trials run a fixed number of times,
    /// with its warnings. With two variants, the ratios are looked at once,
    /// at [`compare::DEFAULT_LEVEL`], and the answer rests on wall time of
    /// `ready`. `loop_wall_s` is the trial loop's wall time (see
    /// [`Overhead`]).
    pub fn build(
        records: &[TrialRecord],
        environment: Environment,
        configuration: Configuration,
        interrupted: bool,
        loop_wall_s: f64,
    ) -> Result<RunSummary, StatsError> {
        let threshold = configuration.noise_threshold;
        Self::assemble(
            records,
            environment,
            configuration,
            interrupted,
            loop_wall_s,
            Analysis {
                level: compare::DEFAULT_LEVEL,
                threshold,
                basis: vec![Measure::READY],
                sequential: None,
            },
        )
    }

    /// Builds the summary of a run that followed a stopping rule
    /// ([`crate::sequential`]): every ratio at the rule's level and noise
    /// threshold (the level its looks used, so the summary claims nothing
    /// the looks did not), the answer resting on the rule's measures, and
    /// why the run stopped.
    pub fn build_sequential(
        records: &[TrialRecord],
        environment: Environment,
        configuration: Configuration,
        interrupted: bool,
        loop_wall_s: f64,
        rule: &StopRule,
        stopped: Stopped,
    ) -> Result<RunSummary, StatsError> {
        Self::assemble(
            records,
            environment,
            configuration,
            interrupted,
            loop_wall_s,
            Analysis {
                level: rule.level,
                threshold: rule.threshold,
                basis: rule.measures.clone(),
                sequential: Some(SequentialRun {
                    rule: rule.clone(),
                    stopped,
                }),
            },
        )
    }

    fn assemble(
        records: &[TrialRecord],
        environment: Environment,
        configuration: Configuration,
        interrupted: bool,
        loop_wall_s: f64,
        analysis: Analysis,
    ) -> Result<RunSummary, StatsError> {
        let phases = phase_summaries_at(
            records,
            &configuration.bootstrap,
            analysis.threshold,
            analysis.level,
        )?;
        let trials = Counts::of(records, interrupted);
        let warnings = warn::run_warnings(&phases, &trials, &environment, &configuration);
        let ab = if records.iter().any(|r| r.variant == Variant::B) {
            Some(AbAnalysis {
                method: Method::HodgesLehmann,
                level: analysis.level,
                basis: analysis.basis,
                cpu: compare_measure(records, Measure::Cpu, analysis.level, analysis.threshold)?,
                sequential: analysis.sequential,
            })
        } else {
            None
        };
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
            ab,
            placement: None,
            serve: Vec::new(),
            memory: Vec::new(),
            serve_failures: Vec::new(),
            probes: None,
            pool: Vec::new(),
        })
    }

    /// The statistics of `phase`, if the run has them.
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
    boot: &Resampling,
    threshold: f64,
) -> Result<Vec<PhaseSummary>, StatsError> {
    // The longer list: connect-first-reply when either run had tcp workers.
    let (la, lb) = (Phase::listed(a), Phase::listed(b));
    if la.len() >= lb.len() { la } else { lb }
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
    use crate::run::{MachineLoad, Tool};
    use timeline::{Outcome, Usage};

    /// Each trial's worker: the ready stamp 40 us before the read, a
    /// 100 us health round trip, a 100 us acknowledgement, a 2 ms exit.
    const SHAPE: timeline::testing::Shape = timeline::testing::Shape {
        first_pid: 100,
        gaps: [40_000, 1_000, 100_000, 99_000, 100_000, 2_000_000],
        usage: Usage {
            user_ns: 10_000_000,
            sys_ns: 5_000_000,
            max_rss_bytes: 9 << 20,
        },
        rss_at_ready_bytes: 8 << 20,
        started_unix_ms: 0,
    };

    pub(crate) fn trial(
        trial: usize,
        round: usize,
        kind: TrialKind,
        variant: Variant,
        ready_ms: f64,
    ) -> TrialRecord {
        timeline::testing::trial(trial, round, kind, variant, ready_ms, &SHAPE)
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
            at_start: MachineLoad {
                loadavg: None,
                pressure: None,
            },
            at_end: MachineLoad {
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
            bootstrap: Resampling {
                resamples: 1000,
                ..Resampling::default()
            },
            noise_threshold: 0.02,
            ready_timeout_s: 60.0,
            request_timeout_s: 10.0,
            shutdown_timeout_s: 10.0,
            grace_s: 2.0,
        }
    }

    /// A warm-up pair, then 6 rounds with B about twice as slow to ready
    /// (6: the fewest rounds a 95% signed-rank interval needs).
    pub(crate) fn ab_records() -> Vec<TrialRecord> {
        let mut v = vec![
            trial(0, 0, TrialKind::Warmup, Variant::A, 500.0),
            trial(1, 0, TrialKind::Warmup, Variant::B, 500.0),
        ];
        for (i, a) in [50.0, 52.0, 49.0, 51.0, 50.5, 49.5].into_iter().enumerate() {
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
        assert_eq!(a.n, 6);
        assert_eq!(a.median, 50.25);
        assert_eq!(a.max, 52.0, "the 500 ms warm-up must not count");
        let r = ready.ratio.as_ref().unwrap();
        assert_eq!(r.verdict, compare::Verdict::Slower);
        // The Hodges-Lehmann estimate of the per-round ratios 2 + 1/a:
        // exp of the 11th of the 21 Walsh averages of their logs.
        assert!((r.ratio - 2.019_900_987_672_415_7).abs() < 1e-9, "{r:?}");
        assert_eq!(r.method, compare::Method::HodgesLehmann);
        // health: 100 us in every trial -> ratio 1, the interval [1, 1]
        // inside the band: equivalent.
        let h = s.phase(Phase::Health).unwrap();
        assert_eq!(h.a.as_ref().unwrap().stats.median, 0.1);
        assert_eq!(
            h.ratio.as_ref().unwrap().verdict,
            compare::Verdict::Equivalent
        );
        // CPU time (the same in every trial) beside wall time; the answer
        // rests on ready's wall time, looked at once at 95%.
        let ab = s.ab.as_ref().unwrap();
        assert_eq!(
            ab.cpu.as_ref().unwrap().verdict,
            compare::Verdict::Equivalent
        );
        assert_eq!(ab.basis, [Measure::READY]);
        assert_eq!(ab.level, 0.95);
        assert!(ab.sequential.is_none());
        let answer = ab.answer(&s.phases);
        assert_eq!(answer[0].1.unwrap().verdict, compare::Verdict::Slower);
        assert_eq!(s.trials.run, 14);
        assert_eq!(s.trials.warmup, 2);
        assert_eq!(s.trials.failed, 0);
        assert_eq!(s.resources.len(), 2);
        assert_eq!(s.resources[0].user_ms, Some(10.0));
        assert_eq!(s.resources[1].max_rss_bytes, Some((9u64 << 20) as f64));
        // 14 lifecycles: 2 x 502.3 + 6 x (a + 2.3) + 6 x (2a + 1 + 2.3) ms,
        // the a summing to 302.
        let want = (2.0 * 502.3 + 302.0 + 13.8 + 2.0 * 302.0 + 6.0 * 3.3) / 1e3;
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
            stage: timeline::Stage::Startup,
            message: "no ready line".into(),
        };
        let s = RunSummary::build(&recs, environment(), configuration(), false, 1.0).unwrap();
        assert_eq!(s.trials.failed, 1);
        assert_eq!(s.trials.failed_by_stage["start-up"], 1);
        assert!((s.trials.failure_rate - 1.0 / 14.0).abs() < 1e-12);
        let ready = s.phase(Phase::Ready).unwrap();
        assert_eq!(ready.a.as_ref().unwrap().stats.n, 5);
        let r = ready.ratio.as_ref().unwrap();
        assert_eq!(r.n_a, 5);
        // Five pairs are too few for a 95% signed-rank interval: no claim.
        assert_eq!(r.verdict, compare::Verdict::Inconclusive);
        assert_eq!(r.unsettled.unwrap().needed, Some(6));
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
