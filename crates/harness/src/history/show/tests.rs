//! The series read back from stored runs: points, changes confirmed or
//! not by the re-measurement asked of exactly their two commits, drifts,
//! other environments kept apart, import changes with their lines.

use answers::bisect::CommitRef;
use answers::history::Confirmed;
use history::{RunOutcome, StoredRun};
use phases::changepoint::ChangeRule;
use phases::compare::{Comparison, Method, Verdict};
use phases::stats::Interval;

use crate::history::testruns::{env, module, run, sha};

use super::{Remeasure, Series, import_changes, target_history};

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

/// Six flat commits, ten of +3% each, six flat, re-measured by
/// `remeasure`: from commit 10 on each figure is `jump` times more, and
/// torch is in the tree when `torch`. The runs and what was read.
fn ramp(
    jump: f64,
    torch: bool,
    remeasure: &mut dyn Remeasure,
) -> (Vec<StoredRun>, answers::history::TargetHistory) {
    let level = |i: usize| {
        100.0 * 1.03f64.powi(i.clamp(5, 15) as i32 - 5) * if i >= 10 { jump } else { 1.0 }
    };
    let runs: Vec<StoredRun> = (0..22)
        .map(|i| run(i, level(i), torch && i >= 10, env("A")))
        .collect();
    let (order, fp) = (order(22), env("A").fingerprint());
    let h = target_history(
        &series(&runs, &order, &fp),
        &ChangeRule::default(),
        Some(remeasure),
    )
    .unwrap();
    (runs, h)
}

#[test]
fn a_slow_drift_is_a_drift_with_its_total_and_no_change() {
    // Six flat, ten commits of +3% each, six flat; torch arrives at the
    // ramp's commit 10 (its time spread over the ramp, as noise spreads a
    // step: the drift names the commit where a package arrived).
    let mut fixed = Fixed {
        verdict: Verdict::Slower,
        asked: Vec::new(),
    };
    let (runs, h) = ramp(1.0, true, &mut fixed);
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

/// Answers each re-measurement with `rule(earlier, later)` over the two
/// commits' indices (their made-up hashes are the index in hex), and
/// keeps what it was asked.
struct ByPair {
    rule: fn(usize, usize) -> Verdict,
    asked: Vec<(usize, usize)>,
}

impl Remeasure for ByPair {
    fn compare(
        &mut self,
        earlier: &CommitRef,
        later: &CommitRef,
    ) -> crate::Result<std::result::Result<Comparison, String>> {
        let index = |c: &CommitRef| usize::from_str_radix(&c.commit, 16).unwrap();
        let pair = (index(earlier), index(later));
        self.asked.push(pair);
        let mut fixed = Fixed {
            verdict: (self.rule)(pair.0, pair.1),
            asked: Vec::new(),
        };
        fixed.compare(earlier, later)
    }

    fn interrupted(&self) -> bool {
        false
    }
}

#[test]
fn a_step_inside_a_drift_that_re_measuring_rejects_leaves_one_drift_over_the_window() {
    // Six flat, ten commits of +3% each, six flat; commit 10's figure
    // jumps 40% more (the series alone reads it as a step with a drift on
    // either side). Re-measured, commits 9 and 10 are the same: one drift
    // across 10, its ends re-measured, and 10 a candidate.
    // Two neighbouring commits re-measure the same; any wider pair slower.
    let mut neighbours_equal = ByPair {
        rule: |a, b| {
            if b == a + 1 {
                Verdict::Equivalent
            } else {
                Verdict::Slower
            }
        },
        asked: Vec::new(),
    };
    let (_, h) = ramp(1.4, false, &mut neighbours_equal);
    assert!(h.changes.is_empty(), "{h:#?}");
    let candidates: Vec<&str> = h.candidates.iter().map(|c| c.at.commit.as_str()).collect();
    assert_eq!(candidates, [sha(10)], "{h:#?}");
    assert_eq!(h.drifts.len(), 1, "{h:#?}");
    assert!(h.drift_candidates.is_empty(), "{h:#?}");
    let d = &h.drifts[0];
    let (from, to) = (
        usize::from_str_radix(&d.from.commit, 16).unwrap(),
        usize::from_str_radix(&d.to.commit, 16).unwrap(),
    );
    assert!(
        from < 10 && 10 <= to,
        "the drift spans the rejected step: {d:?}"
    );
    assert_eq!(d.commits, to - from);
}

#[test]
fn a_drift_re_measuring_does_not_confirm_is_a_candidate_not_a_drift() {
    let mut fixed = Fixed {
        verdict: Verdict::Equivalent,
        asked: Vec::new(),
    };
    let (_, h) = ramp(1.0, false, &mut fixed);
    assert!(h.drifts.is_empty(), "{h:#?}");
    assert_eq!(h.drift_candidates.len(), 1, "{h:#?}");
    assert_eq!(
        h.drift_candidates[0].confirmation.status,
        Confirmed::NotConfirmed
    );
}

#[test]
fn a_step_the_series_puts_one_commit_late_is_confirmed_at_its_commit() {
    // The step is at 8; commit 8's median has barely moved (a noisy
    // commit), so the series puts the change at 9. Re-measuring 8
    // against 9 finds nothing; 7 against 8 finds the step.
    let runs: Vec<StoredRun> = (0..18)
        .map(|i| {
            let ms = match i {
                0..=7 => 100.0,
                8 => 108.0,
                _ => 140.0,
            };
            run(i, ms, i >= 8, env("A"))
        })
        .collect();
    let (order, fp) = (order(18), env("A").fingerprint());
    // Only 7 against 8 re-measures slower.
    let mut only = ByPair {
        rule: |a, b| {
            if (a, b) == (7, 8) {
                Verdict::Slower
            } else {
                Verdict::Equivalent
            }
        },
        asked: Vec::new(),
    };
    let h = target_history(
        &series(&runs, &order, &fp),
        &ChangeRule::default(),
        Some(&mut only),
    )
    .unwrap();
    let at: Vec<&str> = h.changes.iter().map(|c| c.at.commit.as_str()).collect();
    assert_eq!(at, [sha(8)], "{h:#?}");
    assert_eq!(h.changes[0].parent, sha(7));
    assert!(h.candidates.is_empty(), "{h:#?}");
    assert_eq!(only.asked, [(8, 9), (7, 8)], "the series put it at 9");
}
