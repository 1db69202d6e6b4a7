//! Stored runs made up for tests: a commit measured at a given time, in a
//! given environment, with or without torch in its import tree (shared by
//! `history show`'s and `bisect`'s tests).

use history::{Commit, Environment, ModuleTime, Run, RunOutcome, StoredRun};
use importguard::recorder::CallSite;
use timeline::{
    Escalation, Marks, Outcome, PhaseDurations, TrialKind, TrialRecord, Usage, Variant,
    WorkerRecord,
};

pub(crate) fn env(cpu: &str) -> Environment {
    Environment {
        interpreter: "CPython 3.11.7 GIL /usr/bin/python3".to_owned(),
        packages_hash: "p".to_owned(),
        cpu_model: cpu.to_owned(),
        limits: "none".to_owned(),
    }
}

pub(crate) fn sha(i: usize) -> String {
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

pub(crate) fn module(name: &str, first_party: bool, line: Option<u32>) -> ModuleTime {
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
pub(crate) fn run(i: usize, ms: f64, torch: bool, environment: Environment) -> StoredRun {
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
