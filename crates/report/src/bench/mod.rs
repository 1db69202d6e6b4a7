//! Renderers for `cargo xtask bench` and `cargo xtask compare`: the
//! terminal table, `summary.md`, a hyperfine-compatible `hyperfine.json`,
//! and `phases.svg` (a hand-written strip plot of every trial); [`serve`]
//! adds the serve phase and memory view sections and panels.
//!
//! Inputs are `phases`' types: a [`RunSummary`](phases::RunSummary) and
//! the trial records it was built from. Nothing here measures or computes
//! statistics; it only lays out what `phases` computed.

pub mod hyperfine;
pub mod markdown;
pub mod serve;
pub mod svg;
pub mod terminal;

/// A duration given in milliseconds, printed with a unit that suits it:
/// `85.3 us`, `12.34 ms`, `1.234 s`.
pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() {
        return format!("{ms}");
    }
    let a = ms.abs();
    if a < 1.0 {
        format!("{:.1} us", ms * 1e3)
    } else if a < 100.0 {
        format!("{ms:.2} ms")
    } else if a < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.3} s", ms / 1e3)
    }
}

/// Bytes as MiB with one decimal.
pub fn fmt_mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// A fraction as a percentage with one decimal.
pub fn fmt_pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A ratio with its interval: `1.98 [1.90, 2.05]`.
pub fn fmt_ratio(c: &phases::Comparison) -> String {
    format!("{:.3} [{:.3}, {:.3}]", c.ratio, c.ci.lo, c.ci.hi)
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A small A/B run shared by the renderers' tests.
    use phases::record::*;
    use phases::summary::*;
    use phases::{Bootstrap, RunSummary};

    pub fn trial(
        i: usize,
        round: usize,
        kind: TrialKind,
        v: Variant,
        ready_ms: f64,
    ) -> TrialRecord {
        let spawned = 1_000_000_000 + i as u64 * 1_000_000_000;
        let ready = spawned + (ready_ms * 1e6) as u64;
        let w = WorkerRecord {
            pid: Some(4000 + i as u32),
            marks: Marks {
                spawned_ns: spawned,
                ready_read_ns: Some(ready),
                ready_t_ns: Some(ready - 45_000),
                health: vec![RoundTrip {
                    sent_ns: ready + 1_000,
                    received_ns: ready + 121_000,
                }],
                shutdown_sent_ns: Some(ready + 200_000),
                ack_read_ns: Some(ready + 400_000),
                exited_ns: Some(ready + 3_400_000),
            },
            usage: Some(Usage {
                user_ns: 30_000_000,
                sys_ns: 8_000_000,
                max_rss_bytes: 12 << 20,
            }),
            rss_at_ready_bytes: Some(11 << 20),
            exit: Some(ExitStatus::Code(0)),
            escalation: phases::Escalation::None,
            noise_lines: 0,
            outcome: Outcome::Correct,
        };
        TrialRecord::new(i, round, kind, v, 1_700_000_000_000, spawned, vec![w])
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
            check: Check::Health,
            message: "the worker sent `{\"op\": \"error\"}`\nmore".into(),
        };
        v.push(bad);
        v
    }

    pub fn summary(records: &[TrialRecord]) -> RunSummary {
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
            at_start: Load {
                loadavg: Some([0.5, 0.4, 0.3]),
                pressure: Some(Pressure {
                    some_avg10: 1.0,
                    some_avg60: 1.0,
                    some_total_us: 0,
                }),
            },
            at_end: Load {
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
            bootstrap: Bootstrap {
                resamples: 1000,
                ..Bootstrap::default()
            },
            noise_threshold: 0.02,
            ready_timeout_s: 60.0,
            request_timeout_s: 10.0,
            shutdown_timeout_s: 10.0,
            grace_s: 2.0,
        };
        RunSummary::build(records, env, config, false, 1.0).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_suit_the_size() {
        assert_eq!(fmt_ms(0.0853), "85.3 us");
        assert_eq!(fmt_ms(12.345), "12.35 ms");
        assert_eq!(fmt_ms(612.34), "612.3 ms");
        assert_eq!(fmt_ms(6150.0), "6.150 s");
        assert_eq!(fmt_mib((12u64 << 20) as f64), "12.0 MiB");
        assert_eq!(fmt_pct(0.1234), "12.3%");
    }
}
