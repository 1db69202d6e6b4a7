//! The bench run's orchestration on the stand-in worker (`crate::standin`):
//! what `Bench::new` refuses before anything runs, and what a run leaves.

use std::path::Path;

use phases::sequential::StopRule;
use phases::stats::Resampling;
use timeline::{Stage, TrialKind, Variant};

use super::*;
use crate::standin;

fn options(out: &Path, trials: usize) -> BenchOptions {
    BenchOptions {
        warmup: 1,
        trials: Some(trials),
        precision: None,
        min_trials: 5,
        max_trials: 100,
        health: None,
        concurrency: 1,
        noise_threshold: 0.02,
        bootstrap: Resampling {
            resamples: 200,
            ..Resampling::default()
        },
        sequential: Some(StopRule::default()),
        serve: ServeOptions::default(),
        out: out.to_path_buf(),
        root: out.to_path_buf(),
    }
}

#[test]
fn bad_options_and_importtime_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let a = || standin::target(dir.path(), "ok", "a");
    let zero = BenchOptions {
        concurrency: 0,
        ..options(&out, 2)
    };
    let err = Bench::new(a(), None, zero).unwrap_err().to_string();
    assert!(err.contains("--concurrency"), "{err}");
    let mut b = a();
    b.command.insert(1, "-X".into());
    b.command.insert(2, "importtime".into());
    let err = Bench::new(a(), Some(b), options(&out, 2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("importtime"), "{err}");
    assert!(err.starts_with("side B (a): "), "names the side: {err}");
    assert!(!out.exists(), "no folder is made for a refused run");
}

#[test]
fn a_stopping_rule_applies_only_to_two_sides_without_a_fixed_count() {
    let dir = tempfile::tempdir().unwrap();
    let t = || standin::target(dir.path(), "ok", "t");
    let fixed = Bench::new(t(), Some(t()), options(dir.path(), 3)).unwrap();
    assert!(fixed.opts.sequential.is_none(), "a fixed count wins");
    let open = BenchOptions {
        trials: None,
        ..options(dir.path(), 3)
    };
    let alone = Bench::new(t(), None, open.clone()).unwrap();
    assert!(
        alone.opts.sequential.is_none(),
        "one side has nothing to decide"
    );
    let vs = Bench::new(t(), Some(t()), open).unwrap();
    assert!(vs.opts.sequential.is_some());
}

#[test]
fn a_run_interleaves_its_sides_writes_its_files_and_exits_by_its_failures() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let a = standin::target(dir.path(), "ok", "a");
    let b = standin::target(dir.path(), "exit:3", "b");
    let run = run(a, Some(b), &options(&out, 2), &Interrupt::new(), &mut Quiet).unwrap();
    // One warm-up and two measured rounds, A B then B A.
    let order: Vec<(TrialKind, Variant)> =
        run.records.iter().map(|r| (r.kind, r.variant)).collect();
    assert_eq!(
        order,
        [
            (TrialKind::Warmup, Variant::A),
            (TrialKind::Warmup, Variant::B),
            (TrialKind::Measured, Variant::B),
            (TrialKind::Measured, Variant::A),
            (TrialKind::Measured, Variant::A),
            (TrialKind::Measured, Variant::B),
        ]
    );
    // B exits 3 after its ack every time: failed at its exit, counted so.
    for r in &run.records {
        match r.variant {
            Variant::A => assert!(r.outcome.is_correct(), "{:?}", r.outcome),
            Variant::B => assert_eq!(r.outcome.failure().map(|(s, _)| s), Some(&Stage::Exit)),
        }
    }
    assert_eq!(run.summary.trials.failed_by_stage["exit"], 3);
    let (_, stage, _) = run.first_failure().unwrap();
    assert_eq!(*stage, Stage::Exit);
    assert_eq!(run.exit_code(), 1);
    for file in [
        "trials.jsonl",
        "summary.json",
        "summary.md",
        "hyperfine.json",
        "phases.svg",
    ] {
        assert!(out.join(file).is_file(), "{file}");
    }
    // What it wrote reads back as the run it was.
    let saved = load_run(&out).unwrap();
    assert_eq!(saved.records, run.records);
    assert_eq!(saved.summary.trials.failed, 3);
    // Its parent holds runs: the error names the latest, by name.
    std::fs::create_dir(dir.path().join("20260101-000000")).unwrap();
    std::fs::write(dir.path().join("20260101-000000/summary.json"), "{}").unwrap();
    let err = load_run(dir.path()).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{} holds runs, not one run: give one of its 2 folders, the latest being {}",
            dir.path().display(),
            out.display()
        )
    );
    let empty = tempfile::tempdir().unwrap();
    let err = load_run(empty.path()).unwrap_err().to_string();
    assert!(
        err.ends_with("give a folder written by `coldstart bench`"),
        "{err}"
    );
}
