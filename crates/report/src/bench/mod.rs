//! Renderers for `coldstart bench` and `coldstart compare`: the
//! terminal table, `summary.json` ([`json`]), `summary.md`, a
//! hyperfine-compatible `hyperfine.json`, and `phases.svg` (a hand-written strip plot of every trial); [`serve`]
//! adds the serve phase and memory view sections and panels, [`pool`] the
//! pool run's section.
//!
//! Inputs are `phases`' types: a [`RunSummary`](phases::summary::RunSummary) and
//! the trial records it was built from. Nothing here measures or computes
//! statistics; it only lays out what `phases` computed.

mod canvas;
pub mod hyperfine;
pub mod markdown;
pub mod pool;
pub mod serve;
pub mod svg;
pub mod terminal;

pub use answers::words::{
    fmt_level, fmt_mib, fmt_ms, fmt_pct, fmt_ratio, fmt_verdict, verdict_sentence,
};

/// `summary.json`: the run's summary as JSON, pretty, ending in a line
/// break.
pub fn json(s: &phases::summary::RunSummary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("a summary is plain data");
    text.push('\n');
    text
}

/// The lines that say what an A/B run's answer rests on and why it
/// stopped (empty without two variants).
pub fn answer_lines(s: &phases::summary::RunSummary) -> Vec<String> {
    use phases::sequential::StopReason;
    let Some(ab) = &s.ab else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (measure, c) in ab.answer(&s.phases) {
        out.push(match c {
            Some(c) => verdict_sentence(measure, c),
            None => format!(
                "{}: no comparison: no round had both trials correct with this measure",
                measure.describe()
            ),
        });
    }
    let basis: Vec<String> = ab.basis.iter().map(|m| m.describe()).collect();
    let beside = if ab.basis.contains(&phases::Measure::Cpu) {
        "the other phases are compared beside it"
    } else {
        "CPU time (user + system from wait4, the worker's whole life) is compared beside it"
    };
    out.push(format!(
        "the answer rests on {}; {beside}",
        basis.join(" and "),
    ));
    match &ab.sequential {
        Some(run) => {
            let st = &run.stopped;
            let undecided: Vec<String> = ab
                .answer(&s.phases)
                .into_iter()
                .filter(|(_, c)| !c.is_some_and(|c| c.verdict.is_settled()))
                .map(|(m, _)| m.name().to_owned())
                .collect();
            let still = if undecided.is_empty() {
                String::new()
            } else {
                format!(", {} still inconclusive", undecided.join(" and "))
            };
            out.push(match st.reason {
                StopReason::Decided => format!(
                    "stopped: decided after {} rounds ({:.1} s)",
                    st.rounds, st.elapsed_s
                ),
                StopReason::RoundBudget => format!(
                    "stopped: the round budget ({} rounds) ran out after {:.1} s{still}",
                    run.rule.max_rounds, st.elapsed_s
                ),
                StopReason::TimeBudget => format!(
                    "stopped: the time budget ({} s) ran out after {} rounds{still}",
                    run.rule.max_seconds, st.rounds
                ),
                StopReason::Interrupted => format!(
                    "stopped: interrupted after {} rounds ({:.1} s){still}",
                    st.rounds, st.elapsed_s
                ),
                StopReason::GaveUp => format!(
                    "stopped: gave up after {} rounds ({:.1} s): {} never completed a trial",
                    st.rounds,
                    st.elapsed_s,
                    s.trials.gave_up.map_or("a side", |v| v.as_str())
                ),
            });
        }
        None => {
            if let Some(n) = s.configuration.trials {
                out.push(format!("rounds: a fixed {n}, looked at once"));
            }
        }
    }
    out
}

/// One line on where the processes ran, when the harness recorded it.
pub fn placement_line(p: &timeline::Placement) -> String {
    let list = |v: &[usize]| {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = if p.workers.is_empty() {
        format!("workers not pinned (CPUs {} available)", list(&p.available))
    } else {
        format!("workers pinned to CPU {}", list(&p.workers))
    };
    if let Some(h) = &p.harness {
        out.push_str(&format!(", harness on CPU {}", list(h)));
    }
    if let Some(note) = &p.note {
        out.push_str(&format!(" ({note})"));
    }
    out
}

/// Which start-up each side measured, one line per side: the one a plain
/// parent sees (no limits), or the one a container with these limits sees.
pub fn measured_lines(s: &phases::summary::RunSummary) -> Vec<String> {
    s.environment
        .targets
        .iter()
        .map(|t| match &t.limits {
            None => format!(
                "{}: start-up as a plain parent sees it (no CPU or memory limit)",
                t.variant
            ),
            Some(l) => format!(
                "{}: start-up as a container sees it: each worker in its own cgroup ({}) with {}",
                t.variant, l.cgroup, l.limits
            ),
        })
        .collect()
}

/// The probe and timeout settings the run's distributions give, one line
/// each, with what they rest on.
pub fn probe_lines(s: &phases::summary::RunSummary) -> Vec<String> {
    use phases::probe::Bound;
    let Some(p) = &s.probes else {
        return Vec::new();
    };
    let basis = |b: &Bound, of: &str, unit: &str| {
        if b.is_bound() {
            format!(
                "the {:.0}% upper bound of {of}'s p{:.0} over {} {unit} (p{:.0} {})",
                b.level * 100.0,
                b.quantile * 100.0,
                b.n,
                b.quantile * 100.0,
                answers::words::fmt_ms(b.estimate_ms)
            )
        } else {
            format!(
                "the slowest of {} {unit}, too few to bound the p{:.0}",
                b.n,
                b.quantile * 100.0
            )
        }
    };
    let mut out: Vec<String> = p
        .startup
        .iter()
        .map(|sp| {
            format!(
                "startup probe ({}): periodSeconds {}, failureThreshold {} (allows {} s): {} x {}, {}",
                sp.variant,
                sp.period_seconds,
                sp.failure_threshold,
                sp.allows_s(),
                sp.margin,
                answers::words::fmt_ms(sp.ready.upper_ms),
                basis(&sp.ready, "ready", "trials"),
            )
        })
        .collect();
    out.extend(p.request_timeout.iter().map(|t| {
        format!(
            "request timeout ({}): {}: {} x {}, {}",
            t.variant,
            answers::words::fmt_ms(t.timeout_ms),
            t.margin,
            answers::words::fmt_ms(t.latency.upper_ms),
            basis(&t.latency, "the latency", "requests"),
        )
    }));
    out
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A small A/B run shared by the renderers' tests.
    use phases::run::*;
    use phases::stats::Resampling;
    use phases::summary::RunSummary;
    use timeline::*;

    /// Each trial's worker: the ready stamp 45 us before the read, a
    /// 120 us health round trip, a 200 us acknowledgement, a 3 ms exit.
    const SHAPE: timeline::testing::Shape = timeline::testing::Shape {
        first_pid: 4000,
        gaps: [45_000, 1_000, 120_000, 79_000, 200_000, 3_000_000],
        usage: Usage {
            user_ns: 30_000_000,
            sys_ns: 8_000_000,
            max_rss_bytes: 12 << 20,
        },
        rss_at_ready_bytes: 11 << 20,
        started_unix_ms: 1_700_000_000_000,
    };

    pub fn trial(
        i: usize,
        round: usize,
        kind: TrialKind,
        v: Variant,
        ready_ms: f64,
    ) -> TrialRecord {
        timeline::testing::trial(i, round, kind, v, ready_ms, &SHAPE)
    }

    pub fn records(with_b: bool) -> Vec<TrialRecord> {
        let mut v = vec![trial(0, 0, TrialKind::Warmup, Variant::A, 300.0)];
        let a = [60.0, 62.0, 59.0, 61.0, 90.0, 60.5];
        let mut i = 1;
        for (round, ms) in a.into_iter().enumerate() {
            v.push(trial(i, round, TrialKind::Measured, Variant::A, ms));
            i += 1;
            if with_b {
                v.push(trial(i, round, TrialKind::Measured, Variant::B, ms * 0.5));
                i += 1;
            }
        }
        let mut bad = trial(i, 6, TrialKind::Measured, Variant::A, 61.0);
        bad.outcome = Outcome::Failed {
            stage: timeline::Stage::Request {
                op: "health".into(),
                index: 1,
            },
            message: "the worker sent `{\"op\": \"error\"}`\nmore".into(),
        };
        v.push(bad);
        v
    }

    pub fn summary(records: &[TrialRecord]) -> RunSummary {
        let (env, config) = parts(records);
        RunSummary::build(records, env, config, false, 1.0).unwrap()
    }

    /// The environment and configuration of the fixture run.
    pub fn parts(records: &[TrialRecord]) -> (Environment, Configuration) {
        let target = |variant, name: &str| TargetInfo {
            variant,
            name: name.into(),
            origin: "command line".into(),
            command: vec!["python3".into(), "-m".into(), name.into()],
            display: format!("python3 -m {name}"),
            env: [("PYTHONPATH".to_owned(), "worker".to_owned())].into(),
            env_removed: vec!["PYTHONPROFILEIMPORTTIME".into()],
            cwd: "/repo".into(),
            python: Some(PythonInfo {
                requested: "python3".into(),
                resolved: Some("/shims/python3".into()),
                executable: Some("/usr/bin/python3.12".into()),
                version: Some("3.12.3".into()),
                implementation: Some("cpython".into()),
                free_threaded: Some(false),
                shim: true,
                note: Some("a script (#!), not an interpreter".into()),
            }),
            limits: None,
        };
        let has_b = records.iter().any(|r| r.variant == Variant::B);
        let mut targets = vec![target(Variant::A, "slowworker")];
        if has_b {
            targets.push(target(Variant::B, "fastworker"));
        }
        let env = Environment {
            tool: Tool {
                name: "coldstart".into(),
                version: "0.1.0".into(),
                git_revision: Some("0123456789abcdef".into()),
                git_dirty: Some(false),
            },
            started_at: "2026-01-02T03:04:05Z".into(),
            started_unix_ms: 1_700_000_000_000,
            duration_s: 12.5,
            cpu_model: Some("Test CPU".into()),
            cpu_count: 2,
            kernel: Some("6.1.0".into()),
            at_start: MachineLoad {
                loadavg: Some([0.5, 0.4, 0.3]),
                pressure: Some(Pressure {
                    some_avg10: 1.0,
                    some_avg60: 1.0,
                    some_total_us: 0,
                }),
            },
            at_end: MachineLoad {
                loadavg: Some([0.7, 0.5, 0.3]),
                pressure: Some(Pressure {
                    some_avg10: 2.0,
                    some_avg60: 1.0,
                    some_total_us: 100_000,
                }),
            },
            targets,
        };
        let config = Configuration {
            warmup: 1,
            trials: Some(6),
            precision: None,
            min_trials: 5,
            max_trials: 100,
            health: 1,
            concurrency: 1,
            interleaved: has_b,
            bootstrap: Resampling {
                resamples: 1000,
                ..Resampling::default()
            },
            noise_threshold: 0.02,
            ready_timeout_s: 60.0,
            request_timeout_s: 10.0,
            shutdown_timeout_s: 10.0,
            grace_s: 2.0,
        };
        (env, config)
    }

    /// Twelve rounds in which B is 25% slower in even rounds and 10%
    /// faster in odd ones: never settled.
    pub fn wobbly_records() -> Vec<TrialRecord> {
        let mut v = Vec::new();
        for round in 0..12usize {
            let a = 60.0 + (round * 7 % 5) as f64;
            let b = if round.is_multiple_of(2) {
                a * 1.25
            } else {
                a / 1.1
            };
            v.push(trial(2 * round, round, TrialKind::Measured, Variant::A, a));
            v.push(trial(
                2 * round + 1,
                round,
                TrialKind::Measured,
                Variant::B,
                b,
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phases::sequential::{StopReason, StopRule, Stopped};

    fn sequential(reason: StopReason) -> phases::summary::RunSummary {
        let recs = fixture::wobbly_records();
        let (env, config) = fixture::parts(&recs);
        let rule = StopRule::default();
        let stopped = Stopped {
            reason,
            rounds: 12,
            elapsed_s: 60.2,
        };
        phases::summary::RunSummary::build_sequential(
            &recs, env, config, false, 60.0, &rule, stopped,
        )
        .unwrap()
    }

    #[test]
    fn an_inconclusive_answer_says_what_it_could_detect_and_what_would_settle_it() {
        let s = sequential(StopReason::TimeBudget);
        let ready = s
            .phase(phases::Phase::Ready)
            .unwrap()
            .ratio
            .clone()
            .unwrap();
        assert_eq!(ready.verdict, phases::compare::Verdict::Inconclusive);
        assert_eq!(ready.ci.level, 0.995);
        let lines = answer_lines(&s);
        let first = &lines[0];
        let d = fmt_pct(ready.detectable().unwrap());
        let more = ready.unsettled.unwrap().more.unwrap();
        assert!(
            first.starts_with("ready (wall time): inconclusive: B/A ")
                && first.contains("at 99.5% reaches outside 1 +- 2.0% without leaving it")
                && first.contains(&format!("could have detected a change of {d} or more"))
                && first.contains(&format!("about {more} more rounds would settle it")),
            "{first}"
        );
        assert_eq!(
            lines.last().unwrap(),
            "stopped: the time budget (60 s) ran out after 12 rounds, ready still inconclusive"
        );
        // The table cell says it too, and the header names the level.
        let text = terminal::render(&s);
        assert!(
            text.contains(&format!("inconclusive, could detect {d}")),
            "{text}"
        );
        assert!(text.contains("ratio B/A [99.5% CI]"), "{text}");
        let md = markdown::render(&s);
        assert!(md.contains(&format!("- {first}")), "{md}");
    }

    #[test]
    fn every_stop_reason_reads_as_a_sentence() {
        for (reason, want) in [
            (
                StopReason::Decided,
                "stopped: decided after 12 rounds (60.2 s)",
            ),
            (
                StopReason::RoundBudget,
                "stopped: the round budget (400 rounds) ran out after 60.2 s, ready still inconclusive",
            ),
            (
                StopReason::Interrupted,
                "stopped: interrupted after 12 rounds (60.2 s), ready still inconclusive",
            ),
        ] {
            let lines = answer_lines(&sequential(reason));
            assert_eq!(lines.last().unwrap(), want);
        }
    }

    #[test]
    fn too_few_rounds_and_equivalence_read_plainly() {
        let recs = fixture::wobbly_records();
        let few = phases::compare::paired_rank(&[1.0; 5], &[2.0; 5], 0.99, 0.02).unwrap();
        assert_eq!(fmt_verdict(&few), "inconclusive, needs 8 rounds");
        let line = verdict_sentence(phases::Measure::READY, &few);
        assert!(
            line.ends_with("5 rounds are too few for a 99% interval; at least 8 are needed"),
            "{line}"
        );
        let same = phases::compare::paired_rank(&[3.0; 8], &[3.0; 8], 0.99, 0.02).unwrap();
        let line = verdict_sentence(phases::Measure::Cpu, &same);
        assert_eq!(
            line,
            "cpu (user + system time): equivalent: B/A 1.000 [1.000, 1.000] at 99%, wholly inside 1 +- 2.0%: no change beyond 2.0%"
        );
        // A comparison read back from a summary written before four
        // verdicts: inconclusive, and what it could detect is known.
        let old: phases::compare::Comparison = serde_json::from_str(
            r#"{"ratio":1.02,"ci":{"lo":0.79,"hi":1.661,"level":0.95},
            "verdict":"no_significant_difference","threshold":0.02,"paired":true,
            "n_a":10,"n_b":10}"#,
        )
        .unwrap();
        assert_eq!(fmt_verdict(&old), "inconclusive, could detect 47.9%");
        assert!(recs.len() == 24);
    }

    #[test]
    fn placement_reads_as_a_line() {
        let p = timeline::Placement {
            available: vec![0, 1],
            workers: vec![1],
            harness: Some(vec![0]),
            note: None,
        };
        assert_eq!(
            placement_line(&p),
            "workers pinned to CPU 1, harness on CPU 0"
        );
        let one = timeline::Placement {
            available: vec![0],
            workers: vec![],
            harness: None,
            note: Some("one CPU: nothing to separate".into()),
        };
        assert_eq!(
            placement_line(&one),
            "workers not pinned (CPUs 0 available) (one CPU: nothing to separate)"
        );
        let mut s = fixture::summary(&fixture::records(true));
        s.placement = Some(p);
        assert!(
            terminal::render(&s).contains("placement: workers pinned to CPU 1, harness on CPU 0")
        );
        assert!(
            markdown::render(&s).contains("- placement: workers pinned to CPU 1, harness on CPU 0")
        );
    }

    #[test]
    fn limits_and_probe_settings_show_in_every_report() {
        let records = fixture::records(true);
        let mut s = fixture::summary(&records);
        s.environment.targets[1].limits = Some(phases::run::RunLimits {
            limits: timeline::Limits {
                cpus: Some(0.5),
                memory_bytes: Some(1 << 30),
            },
            cgroup: "cgroup v2".into(),
        });
        let ready: Vec<f64> = (0..300).map(|i| 200.0 + i as f64).collect();
        s.probes = Some(phases::probe::Probes {
            startup: vec![
                phases::probe::StartupProbe::of(
                    timeline::Variant::A,
                    phases::probe::Bound::of(&ready).unwrap(),
                ),
                phases::probe::StartupProbe::of(
                    timeline::Variant::B,
                    phases::probe::Bound::of(&[900.0, 2500.0]).unwrap(),
                ),
            ],
            request_timeout: Vec::new(),
        });
        let (text, md) = (terminal::render(&s), markdown::render(&s));
        for line in [
            "measured: A: start-up as a plain parent sees it (no CPU or memory limit)",
            "measured: B: start-up as a container sees it: each worker in its own cgroup (cgroup v2) with cpus 0.5, memory 1 GiB",
            "startup probe (A): periodSeconds 1, failureThreshold 1 (allows 1 s): 1.5 x 499.0 ms, the 95% upper bound of ready's p99 over 300 trials (p99 496.0 ms)",
            "startup probe (B): periodSeconds 1, failureThreshold 4 (allows 4 s): 1.5 x 2.500 s, the slowest of 2 trials, too few to bound the p99",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
            assert!(md.contains(line), "{line}\n{md}");
        }
        assert!(
            md.contains("# B: start-up under cpus 0.5, memory 1 GiB\nstartupProbe:\n  periodSeconds: 1\n  failureThreshold: 4\n"),
            "{md}"
        );
    }
}
