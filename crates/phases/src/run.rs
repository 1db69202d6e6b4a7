//! What a run is beside its figures: the tool, the machine and its load,
//! the benchmarked commands and their interpreters (the environment); where
//! the processes ran (the placement); how the run was asked for (the
//! configuration); and what ran and failed (the counts). Both the summary
//! and the warnings build on this module.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::Resampling;
use timeline::{TrialKind, TrialRecord, Variant};

/// The tool that produced the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The tool's name, `coldstart`.
    pub name: String,
    /// The tool's version (its crate version).
    pub version: String,
    /// `git rev-parse HEAD` of the workspace, when it is a git checkout.
    pub git_revision: Option<String>,
    /// Whether the work tree had uncommitted changes.
    pub git_dirty: Option<bool>,
}

/// `/proc/pressure/cpu` at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    /// Share of the last 10 s some task waited for a CPU, in percent.
    pub some_avg10: f64,
    /// Share of the last 60 s some task waited for a CPU, in percent.
    pub some_avg60: f64,
    /// Cumulative stall time, microseconds.
    pub some_total_us: u64,
}

/// The machine at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    /// 1, 5 and 15 minute load averages.
    pub loadavg: Option<[f64; 3]>,
    /// CPU pressure from `/proc/pressure/cpu`; absent where the kernel does not expose it.
    pub pressure: Option<Pressure>,
}

/// What the interpreter behind a target's `command[0]` really is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PythonInfo {
    /// `command[0]` as given.
    pub requested: String,
    /// `command[0]` resolved on PATH.
    pub resolved: Option<String>,
    /// `sys.executable` as the interpreter reports it.
    pub executable: Option<String>,
    /// The interpreter's version from `sys.version_info`, e.g. `3.12.4`.
    pub version: Option<String>,
    /// `cpython`, `pypy`, ...
    pub implementation: Option<String>,
    /// Built without the GIL (`Py_GIL_DISABLED`).
    pub free_threaded: Option<bool>,
    /// `command[0]` is not the interpreter itself (a pyenv-style shim that
    /// starts a second process on every spawn).
    pub shim: bool,
    /// Why it counts as a shim, or why the interpreter could not be asked.
    pub note: Option<String>,
}

/// One benchmarked command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// Which variant (A or B) this command is.
    pub variant: Variant,
    /// The target's name.
    pub name: String,
    /// `coldstart.toml`, `built-in default` or `command line`.
    pub origin: String,
    /// The command line, program first (`command[0]`) then its arguments.
    pub command: Vec<String>,
    /// The command as a person would type it.
    pub display: String,
    /// Set on top of the inherited environment.
    pub env: BTreeMap<String, String>,
    /// Removed from the inherited environment (e.g. PYTHONPROFILEIMPORTTIME).
    pub env_removed: Vec<String>,
    /// The working directory the command ran in.
    pub cwd: String,
    /// Absent when `command[0]` does not look like a Python interpreter.
    pub python: Option<PythonInfo>,
    /// The CPU quota and memory limit each worker ran under, in a cgroup
    /// of its own; absent: none, the bare machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
}

/// The limits a side's workers ran under, and the interface that set them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLimits {
    /// The CPU quota and memory limit.
    #[serde(flatten)]
    pub limits: timeline::Limits,
    /// `cgroup v2` or `cgroup v1`.
    pub cgroup: String,
}

/// Where and when the run happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The tool that produced the run.
    pub tool: Tool,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// Wall clock at the run's start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Wall time of the whole run, seconds.
    pub duration_s: f64,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// CPUs the harness may run on (`available_parallelism`).
    pub cpu_count: usize,
    /// The kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// Load and CPU pressure when the run started.
    pub at_start: MachineLoad,
    /// Load and CPU pressure when the run ended.
    pub at_end: MachineLoad,
    /// Every benchmarked command, A first.
    pub targets: Vec<TargetInfo>,
}

impl Environment {
    /// Share of the run's wall time in which some task waited for a CPU,
    /// from the `/proc/pressure/cpu` totals at start and end.
    pub fn cpu_stall_fraction(&self) -> Option<f64> {
        let (a, b) = (self.at_start.pressure?, self.at_end.pressure?);
        (self.duration_s > 0.0)
            .then(|| b.some_total_us.saturating_sub(a.some_total_us) as f64 / 1e6 / self.duration_s)
    }

    /// The benchmarked command of variant `v`, if the run had it.
    pub fn target(&self, v: Variant) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.variant == v)
    }
}

/// How the run was asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// Warm-up trials per variant, run before the measured ones.
    pub warmup: usize,
    /// Fixed measured trials per variant (absent with `--precision`).
    pub trials: Option<usize>,
    /// Stop when the median ready time's CI half-width is within this
    /// fraction of the median.
    pub precision: Option<f64>,
    /// Fewest measured trials per variant before a precision target or stopping rule may end the run.
    pub min_trials: usize,
    /// Most measured trials per variant the run would take.
    pub max_trials: usize,
    /// Health round trips per worker per trial.
    pub health: usize,
    /// Workers started at once per trial.
    pub concurrency: usize,
    /// A and B interleaved (`--vs`).
    pub interleaved: bool,
    /// The bootstrap settings behind every confidence interval.
    pub bootstrap: Resampling,
    /// Relative change within which A and B count as equivalent (0.02 is 2 %).
    pub noise_threshold: f64,
    /// How long a worker had to send its ready line, seconds.
    pub ready_timeout_s: f64,
    /// How long a worker had for each reply, seconds.
    pub request_timeout_s: f64,
    /// How long a worker had for the shutdown acknowledgement, and again to exit, seconds.
    pub shutdown_timeout_s: f64,
    /// Grace between SIGTERM and SIGKILL to the worker's group, seconds.
    pub grace_s: f64,
}

/// What ran and what failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Every trial run, warm-ups included.
    pub run: usize,
    /// Warm-up trials run.
    pub warmup: usize,
    /// Measured trials run.
    pub measured: usize,
    /// Failed trials, warm-ups included (a trial cut short by Ctrl-C is
    /// kept and marked `interrupted`, not counted here).
    pub failed: usize,
    /// `failed / run`.
    pub failure_rate: f64,
    /// Failed trials by the stage they failed in ([`timeline::Stage::brief`]:
    /// `start-up`, `health request`, `shutdown`, `exit`, ...);
    /// read from `failed_by_check` in summaries written before stages.
    #[serde(alias = "failed_by_check")]
    pub failed_by_stage: BTreeMap<String, usize>,
    /// The run was stopped by Ctrl-C; what finished is summarised.
    pub interrupted: bool,
    /// The side the run gave up on: its first [`GIVE_UP_AFTER`] trials all
    /// failed, none completed (see [`never_completed`]); the run stopped
    /// there instead of waiting on a broken worker trial after trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<Variant>,
}

/// How many failed trials of one side, with none of its trials completed,
/// make a run give up: a worker that has never once completed its
/// lifecycle is not started again and again (each trial can wait up to the
/// ready timeout, a minute by default). A side that completed even one
/// trial is never given up on: its later failures are counted, as any.
pub const GIVE_UP_AFTER: usize = 3;

/// The side (A before B) that has failed [`GIVE_UP_AFTER`] trials without
/// completing any; trials cut short by Ctrl-C count for neither.
pub fn never_completed(records: &[TrialRecord]) -> Option<Variant> {
    [Variant::A, Variant::B].into_iter().find(|&v| {
        let side = || records.iter().filter(move |r| r.variant == v);
        !side().any(|r| r.outcome.is_correct())
            && side().filter(|r| r.outcome.failure().is_some()).count() >= GIVE_UP_AFTER
    })
}

impl Counts {
    /// Counts the trials in `records`; `interrupted` says whether Ctrl-C stopped the run.
    pub fn of(records: &[TrialRecord], interrupted: bool) -> Counts {
        let mut failed_by_stage = BTreeMap::new();
        for (stage, _) in records.iter().filter_map(|r| r.outcome.failure()) {
            *failed_by_stage.entry(stage.brief()).or_insert(0) += 1;
        }
        let failed = failed_by_stage.values().sum();
        let run = records.len();
        Counts {
            run,
            warmup: records
                .iter()
                .filter(|r| r.kind == TrialKind::Warmup)
                .count(),
            measured: records
                .iter()
                .filter(|r| r.kind == TrialKind::Measured)
                .count(),
            failed,
            failure_rate: if run == 0 {
                0.0
            } else {
                failed as f64 / run as f64
            },
            failed_by_stage,
            interrupted,
            gave_up: never_completed(records),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::trial;
    use timeline::{Outcome, Stage};

    /// A trial of `variant` that completed (`None`) or failed in `stage`.
    fn rec(n: usize, variant: Variant, failed: Option<Stage>) -> TrialRecord {
        let mut r = trial(n, n, TrialKind::Measured, variant, 100.0);
        if let Some(stage) = failed {
            r.outcome = Outcome::Failed {
                stage,
                message: "no ready line".into(),
            };
        }
        r
    }

    const READY: Option<Stage> = Some(Stage::Startup);

    #[test]
    fn a_side_that_never_completed_is_given_up_after_its_third_failure() {
        let mut records = vec![rec(0, Variant::A, READY), rec(1, Variant::A, READY)];
        assert_eq!(never_completed(&records), None);
        records.push(rec(2, Variant::A, READY));
        assert_eq!(never_completed(&records), Some(Variant::A));
        let counts = Counts::of(&records, false);
        assert_eq!((counts.failed, counts.gave_up), (3, Some(Variant::A)));
    }

    #[test]
    fn one_completed_trial_means_later_failures_are_only_counted() {
        let mut records = vec![rec(0, Variant::A, None)];
        records.extend((1..6).map(|n| rec(n, Variant::A, READY)));
        assert_eq!(never_completed(&records), None);
        assert_eq!(Counts::of(&records, false).gave_up, None);
    }

    #[test]
    fn each_side_is_judged_alone_and_ctrl_c_is_not_a_failure() {
        // A works; B fails every time: B is given up on.
        let ab: Vec<TrialRecord> = (0..6)
            .map(|n| match n % 2 {
                0 => rec(n, Variant::A, None),
                _ => rec(n, Variant::B, READY),
            })
            .collect();
        assert_eq!(never_completed(&ab), Some(Variant::B));
        // Two failures and a trial cut short by Ctrl-C: not yet three.
        let cut = vec![rec(0, Variant::A, READY), rec(1, Variant::A, READY), {
            let mut r = rec(2, Variant::A, None);
            r.outcome = Outcome::Interrupted {
                stage: Stage::Startup,
                message: "interrupted".into(),
            };
            r
        }];
        assert_eq!(never_completed(&cut), None);
    }
}
