//! The series read back from stored runs: points, changes confirmed or
//! not by the re-measurement asked of exactly their two commits, drifts,
//! other environments kept apart, import changes with their lines.

use answers::bisect::CommitRef;
use answers::history::Confirmed;
use history::{Commit, Environment, ModuleTime, Run, RunOutcome, StoredRun};
use importguard::recorder::CallSite;
use phases::changepoint::ChangeRule;
use phases::compare::{Comparison, Method, Verdict};
use phases::stats::Interval;
use timeline::{
    Escalation, Marks, Outcome, PhaseDurations, TrialKind, TrialRecord, Usage, Variant,
    WorkerRecord,
};

use super::{Remeasure, Series, import_changes, target_history};

fn env(cpu: &str) -> Environment {
    Environment {
        interpreter: "CPython 3.11.7 GIL /usr/bin/python3".to_owned(),
        packages_hash: "p".to_owned(),
        cpu_model: cpu.to_owned(),
        limits: "none".to_owned(),
    }
}

fn sha(i: usize) -> String {
    format!("{i:040x}")
}

/// A trial whose ready came after `ms`.
fn trial(i: usize, ms: f64) -> TrialRecord {
    TrialRecord {
        trial: i,
        round: i,
        kind: TrialKind::Measured,
        variant: Variant::A,
        started_unix_ms: 0,
        started_ns: 0,
        phases: PhaseDurations {
            ready_ns: Some((ms * 1e6) as u64),
            ..PhaseDurations::default()
        },
        outcome: Outcome::Correct,
        workers: vec![WorkerRecord {
            pid: Some(100 + i as u32),
            marks: Marks::default(),
            // As much CPU as wall time, less a fixed 10 ms.
            usage: Some(Usage {
                user_ns: ((ms - 10.0) * 1e6) as u64,
                sys_ns: 0,
                max_rss_bytes: 40 << 20,
            }),
            rss_at_ready_bytes: None,
            cgroup_peak_bytes: None,
            exit: None,
            escalation: Escalation::None,
            noise_lines: 0,
            outcome: Outcome::Correct,
        }],
    }
}

fn module(name: &str, first_party: bool, line: Option<u32>) -> ModuleTime {
    ModuleTime {
        module: name.to_owned(),
        cumulative_us: 1000,
        self_us: 100,
        first_party,
        imported_at: line.map(|line| CallSite {
            file: "src/app/worker.py".to_owned(),
            line,
            func: "<module>".to_owned(),
        }),
    }
}

/// Commit `i` measured at about `ms` (five trials, ±1%), `torch` in its
/// tree when `torch`.
fn run(i: usize, ms: f64, torch: bool, environment: Environment) -> StoredRun {
    let mut modules = vec![module("app", true, None), module("json", false, None)];
    if torch {
        modules.push(module("torch", false, Some(7)));
        modules.push(module("torch.nn", false, None));
    }
    StoredRun {
        id: i as i64,
        run: Run {
            commit: Commit {
                sha: sha(i),
                parent: None,
                branch: None,
                time_unix_s: i as i64,
            },
            target: "worker".to_owned(),
            tool_version: "0".to_owned(),
            environment,
            recorded_unix_ms: 0,
            outcome: RunOutcome::Measured,
            trials: (0..5)
                .map(|k| trial(k, ms * (1.0 + (k as f64 - 2.0) / 200.0)))
                .collect(),
            modules,
        },
    }
}

fn order(n: usize) -> Vec<CommitRef> {
    (0..n)
        .map(|i| CommitRef {
            commit: sha(i),
            subject: format!("commit {i}"),
        })
        .collect()
}

/// Answers every re-measurement with `verdict`, and keeps what it was asked.
struct Fixed {
    verdict: Verdict,
    asked: Vec<(String, String)>,
}

impl Remeasure for Fixed {
    fn compare(
        &mut self,
        earlier: &CommitRef,
        later: &CommitRef,
    ) -> crate::Result<std::result::Result<Comparison, String>> {
        self.asked
            .push((earlier.commit.clone(), later.commit.clone()));
        let ci = Interval {
            lo: 1.3,
            hi: 1.5,
            level: 0.95,
        };
        Ok(Ok(Comparison {
            ratio: 1.4,
            ci,
            verdict: self.verdict,
            threshold: 0.05,
            paired: true,
            n_a: 12,
            n_b: 12,
            method: Method::default(),
            unsettled: None,
        }))
    }

    fn interrupted(&self) -> bool {
        false
    }
}

/// Eight commits at 100 ms, then eight at 140 ms with torch arriving at
/// the ninth; one run of another environment; commit 3 failed.
fn stepped() -> Vec<StoredRun> {
    let mut runs: Vec<StoredRun> = (0..16)
        .map(|i| run(i, if i < 8 { 100.0 } else { 140.0 }, i >= 8, env("A")))
        .collect();
    runs[3].run.outcome = RunOutcome::Failed {
        message: "its worker could not be run".to_owned(),
    };
    runs.push(run(5, 300.0, false, env("B")));
    runs
}

fn series<'a>(runs: &'a [StoredRun], order: &'a [CommitRef], fp: &'a str) -> Series<'a> {
    Series {
        target: "worker",
        environment: fp,
        interpreter: "CPython",
        runs,
        order,
    }
}

#[test]
fn a_step_confirmed_by_re_measuring_its_two_commits_is_a_change_with_what_arrived() {
    let (runs, order, fp) = (stepped(), order(16), env("A").fingerprint());
    let mut fixed = Fixed {
        verdict: Verdict::Slower,
        asked: Vec::new(),
    };
    let h = target_history(
        &series(&runs, &order, &fp),
        &ChangeRule::default(),
        Some(&mut fixed),
    )
    .unwrap();
    assert_eq!(
        h.points.len(),
        16,
        "every stored commit of this environment"
    );
    assert_eq!(h.other_environments, 1);
    assert_eq!(
        h.points[3].failed.as_deref(),
        Some("its worker could not be run")
    );
    assert_eq!(
        fixed.asked,
        [(sha(7), sha(8))],
        "exactly the change's two commits"
    );
    assert_eq!(h.changes.len(), 1, "{h:#?}");
    assert!(h.candidates.is_empty() && h.drifts.is_empty(), "{h:#?}");
    let c = &h.changes[0];
    assert_eq!(
        (c.at.commit.as_str(), c.parent.as_str()),
        (sha(8).as_str(), sha(7).as_str())
    );
    // On CPU time: 90 ms to 130 ms.
    assert!(
        (c.series.change - 40.0 / 90.0).abs() < 0.02,
        "{:?}",
        c.series
    );
    assert_eq!(c.confirmation.status, Confirmed::Confirmed);
    let arrived: Vec<_> = c
        .imports
        .iter()
        .map(|i| (i.change, i.module.as_str(), i.at.as_ref().map(|a| a.line)))
        .collect();
    assert_eq!(
        arrived,
        [("added", "torch", Some(7))],
        "json is stdlib, torch.nn is torch's"
    );
    let p = h.points[0].ready_ms.unwrap();
    assert!(p.lo <= p.median && p.median <= p.hi && (p.median - 100.0).abs() < 1.0);
}

#[test]
fn a_step_re_measuring_does_not_confirm_or_that_is_not_re_measured_stays_a_candidate() {
    let (runs, order, fp) = (stepped(), order(16), env("A").fingerprint());
    for (verdict, status) in [
        (Verdict::Equivalent, Confirmed::NotConfirmed),
        (Verdict::Faster, Confirmed::NotConfirmed),
        (Verdict::Inconclusive, Confirmed::Inconclusive),
    ] {
        let mut fixed = Fixed {
            verdict,
            asked: Vec::new(),
        };
        let h = target_history(
            &series(&runs, &order, &fp),
            &ChangeRule::default(),
            Some(&mut fixed),
        )
        .unwrap();
        assert!(h.changes.is_empty(), "{verdict:?}");
        assert_eq!(h.candidates[0].confirmation.status, status);
    }
    let h = target_history(&series(&runs, &order, &fp), &ChangeRule::default(), None).unwrap();
    assert!(h.changes.is_empty());
    assert_eq!(h.candidates[0].confirmation.status, Confirmed::NotMeasured);
}

#[test]
fn a_slow_drift_is_a_drift_with_its_total_and_no_change() {
    // Six flat, ten commits of +3% each, six flat; torch arrives at the
    // ramp's commit 10 (its time spread over the ramp, as noise spreads a
    // step: the drift names the commit where a package arrived).
    let level = |i: usize| 100.0 * 1.03f64.powi(i.clamp(5, 15) as i32 - 5);
    let runs: Vec<StoredRun> = (0..22)
        .map(|i| run(i, level(i), i >= 10, env("A")))
        .collect();
    let (order, fp) = (order(22), env("A").fingerprint());
    let mut fixed = Fixed {
        verdict: Verdict::Slower,
        asked: Vec::new(),
    };
    let h = target_history(
        &series(&runs, &order, &fp),
        &ChangeRule::default(),
        Some(&mut fixed),
    )
    .unwrap();
    assert!(h.changes.is_empty() && h.candidates.is_empty(), "{h:#?}");
    assert_eq!(h.drifts.len(), 1, "{h:#?}");
    let d = &h.drifts[0];
    assert!((d.total - (1.03f64.powi(10) - 1.0)).abs() < 0.08, "{d:?}");
    assert_eq!(d.confirmation.status, Confirmed::Confirmed);
    assert_eq!(fixed.asked, [(d.from.commit.clone(), d.to.commit.clone())]);
    let at: Vec<(&str, Vec<(&str, &str)>)> = d
        .imports
        .iter()
        .map(|i| {
            let what = i.changes.iter().map(|c| (c.change, c.module.as_str()));
            (i.at.commit.as_str(), what.collect())
        })
        .collect();
    assert_eq!(
        at,
        [(runs[10].run.commit.sha.as_str(), vec![("added", "torch")])]
    );
}

#[test]
fn import_trees_are_compared_by_package_and_own_module_and_a_missing_tree_is_said() {
    let before = run(0, 100.0, true, env("A")).run;
    let mut after = run(1, 100.0, false, env("A")).run;
    after.modules.push(module("app.reports", true, Some(12)));
    let changes = import_changes(&before, &after).unwrap();
    let got: Vec<_> = changes
        .iter()
        .map(|c| (c.change, c.module.as_str()))
        .collect();
    assert_eq!(got, [("added", "app.reports"), ("removed", "torch")]);
    after.modules.clear();
    assert!(
        import_changes(&before, &after)
            .unwrap_err()
            .contains("bench --record")
    );
}
