//! The check's answer as data.
//!
//! What it owns: one [`TargetReport`] per target (one [`ProcessReport`] per
//! worker), its [`Status`], the whole report as `--format json` prints it
//! ([`JsonReport`], its schema below), the rule that turns reports into an
//! exit code ([`exit_code`]), and what the check costs ([`CheckCost`], the
//! recorder's budget and the CPU floor).
//!
//! # JSON schema (`"schema": "coldstart.check/1"`)
//!
//! ```text
//! { "schema": "coldstart.check/1",
//!   "exit_code": 0 | 1 | 2,
//!   "targets": [ {
//!     "name": str, "origin": "coldstart.toml" | "pyproject.toml" | "built-in default" | "command line" | "--module" | "--log",
//!     "command": [str] (empty for --log), "log": str | null,
//!     "forbidden": [str], "allowed": [{"module": str, "reason": str}], "block": bool,
//!     "status": "pass" | "fail" | "error",
//!     "ready_ms_median": number | null,
//!     "violations": [ {                       // merged over processes, first seen first
//!        "module": str, "pattern": str, "status": "loaded" | "attempted" | "blocked",
//!        "detail": str (optional), "chain": [str], "chain_source": "importtime" | "recorder",
//!        "chain_lines": [{"file", "line", "func"} | null],  // per chain element: who imported it
//!        "chain_parent_of": [str | null],     // per chain element: the name asked for, when it was imported as that name's parent package
//!        "origin": {"file", "line", "func"} | null, "importer": {"file", "line", "func"} | null,
//!        "phase": {"phase": "startup" | "after_ready" | "shutdown"}
//!               | {"phase": "request", "op": str, "index": int} | null,
//!        "t_ns": int | null, "cumulative_us": int | null, "beneath": [str],
//!        "recorded": bool, "in_importtime": bool,
//!        "processes": int, "of": int, "median_cumulative_us": int | null } ],
//!     "packages": [ {"package": str, "modules": int, "self_us": int, "cumulative_us": int} ],  // start-up by top-level package, largest self time first
//!     "first_party": [ {"module": str, "cumulative_us": int, "self_us": int, "chain": [str]} ],  // the project's own slowest modules (self time)
//!     "slowest": [ {"module": str, "cumulative_us": int, "self_us": int, "chain": [str]} ],
//!     "processes": [ {
//!        "index": int, "pid": int | null, "ready_ms": number | null,
//!        "exit": str | null, "error": str | null, "stderr_tail": str | null,
//!        "recorder": "ran" | "did_not_run" | "not_used", "chained_sitecustomize": str | null,
//!        "child_interpreters": int,           // children that ran the recorder (judged like the worker)
//!        "importtime_entries": int,
//!        "verdict": { "violations": [...as above, without processes/of/median...],
//!                     "allowed": [{"module", "pattern", "allowed_by", "reason"}],
//!                     "lazy": [str], "probed": [str], "recorder": str, "importtime": bool,
//!                     "notes": [str],
//!                     "answered": {                // only when a launcher stood between (uv run, a shell, make)
//!                        "pid": int,               // the ready line's pid: the recorded Python process that answered
//!                        "command": [str],
//!                        "through": [{"pid": int, "name": str, "recorded": bool}] } } } ],  // the one coldstart started first
//!     "tree": str (only with --tree) } ] }
//! ```
//! Fields are only ever added to this schema; a change in meaning bumps the
//! number.

use std::path::PathBuf;

use importguard::importtime::{ImportLog, PackageTotal};
use importguard::verdict::{Allowance, MergedViolation, ProcessVerdict, RecorderState, SlowImport};
use serde::Serialize;

/// JSON schema name and version.
pub const SCHEMA: &str = "coldstart.check/1";

/// A target's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every process was checked and none imported a forbidden module.
    Pass,
    /// A forbidden module was imported, attempted or blocked.
    Fail,
    /// A worker could not be checked: the check is incomplete.
    Error,
}

/// The whole report, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// What the process exits with.
    pub exit_code: u8,
    /// One entry per target.
    pub targets: &'a [TargetReport],
}

impl<'a> JsonReport<'a> {
    /// The report of these targets.
    pub fn new(targets: &'a [TargetReport]) -> JsonReport<'a> {
        JsonReport {
            schema: SCHEMA,
            exit_code: exit_code(targets),
            targets,
        }
    }
}

/// One target's result.
#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    /// The target's name.
    pub name: String,
    /// Where it came from (the config file's name, `command line`, ...).
    pub origin: String,
    /// Its argv (empty for a recorded log).
    pub command: Vec<String>,
    /// The recorded log judged, for `--log`.
    pub log: Option<PathBuf>,
    /// Forbidden package prefixes.
    pub forbidden: Vec<String>,
    /// Allowed modules with their reasons.
    pub allowed: Vec<Allowance>,
    /// Whether forbidden imports were made to fail.
    pub block: bool,
    /// Pass, fail or error.
    pub status: Status,
    /// Median spawn-to-ready time over the processes, ms.
    pub ready_ms_median: Option<f64>,
    /// Violations merged over the processes, first seen first.
    pub violations: Vec<MergedViolation>,
    /// Start-up time by top-level package (self time summed over each
    /// package's modules, with their count) of the first process with a
    /// log, largest first.
    pub packages: Vec<PackageTotal>,
    /// Under the recorder: its own bootstrap's start-up cost (the
    /// `sitecustomize` package of the same log), the instrument's, not the
    /// worker's; the readable report shows it apart from `packages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instrument: Option<PackageTotal>,
    /// The project's own modules with the largest self time, largest first.
    pub first_party: Vec<SlowImport>,
    /// The slowest imports (cumulative) of the first process with a log;
    /// shown in the text report with the tree (`--tree`).
    pub slowest: Vec<SlowImport>,
    /// One entry per process.
    pub processes: Vec<ProcessReport>,
    /// The container limits each worker ran under (a target's `cpus` and
    /// `memory`); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<timeline::Limits>,
    /// The whole importtime tree of the first process, with `--tree`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// With `--suggest`: one suggestion per violation, in their order
    /// (`module`, `cut` with `file`, `line`, `kind`, `summary`, `diff`,
    /// `verification`, `candidates`, `not_cuttable`, `rejections` each with
    /// its `reason`: `violation_remains`, `handshake_failed` or
    /// `model_path_failed` with `step` and `output`; and `model_path`, what
    /// of the target's `verify` requests and `verify_command` a verified
    /// cut was held to, when it names any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<serde_json::Value>,
}

/// One process's result.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    /// 1-based.
    pub index: usize,
    /// Its pid, once spawned.
    pub pid: Option<u32>,
    /// Spawn to ready-line read, ms.
    pub ready_ms: Option<f64>,
    /// How it ended, in words.
    pub exit: Option<String>,
    /// Why it could not be checked.
    pub error: Option<String>,
    /// Set when the failure came only at its end (the shutdown ack or the
    /// exit), after ready and every health round trip: its start-up
    /// evidence is whole (what `lazy` prices from), its end is not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed_at_end: bool,
    /// The worker's own last stderr lines, when it failed.
    pub stderr_tail: Option<String>,
    /// Whether the recorder ran.
    pub recorder: RecorderState,
    /// The environment's own sitecustomize that the recorder chained to.
    pub chained_sitecustomize: Option<String>,
    /// Child interpreters (fork, subprocess, multiprocessing, exec) that ran
    /// the recorder too; their imports are judged like the worker's, each in
    /// its own process.
    pub child_interpreters: usize,
    /// Entries in its importtime log.
    pub importtime_entries: usize,
    /// The judgement of its evidence.
    pub verdict: ProcessVerdict,
    /// Its importtime log, for the tree and the slowest imports.
    #[serde(skip)]
    pub log: Option<ImportLog>,
}

impl ProcessReport {
    /// Its failure came only at its end and its start-up evidence is whole
    /// (`failed_at_end`, with its importtime log): what `lazy` prices
    /// anyway, and a cut's verification does not hold against the cut when
    /// the original ends so too.
    pub fn ended_late(&self) -> bool {
        self.failed_at_end && self.log.is_some()
    }
}

/// The check's exit code: 2 when a worker could not be checked (it wins
/// over a violation: the check is incomplete), 1 on a violation, else 0.
pub fn exit_code<'a>(reports: impl IntoIterator<Item = &'a TargetReport>) -> u8 {
    let mut code = 0;
    for r in reports {
        match r.status {
            Status::Error => return 2,
            Status::Fail => code = 1,
            Status::Pass => {}
        }
    }
    code
}

/// What the check costs beside the worker's own lifecycle (`--bench N`),
/// every figure in ms, in the order measured.
#[derive(Debug, Clone, Serialize)]
pub struct CheckCost {
    /// The target's name.
    pub target: String,
    /// Its command as typed.
    pub command: String,
    /// Interleaved rounds.
    pub rounds: usize,
    /// Processes per check.
    pub processes: usize,
    /// Health round trips per worker.
    pub health: usize,
    /// The whole check, per round.
    pub check_ms: Vec<f64>,
    /// One plain lifecycle (no importtime, no recorder), per round.
    pub plain_ms: Vec<f64>,
    /// That lifecycle's own CPU time (user + sys, `wait4`), per round.
    pub plain_cpu_ms: Vec<f64>,
    /// CPUs available to the harness.
    pub cores: usize,
    /// One instrumented lifecycle (importtime, recorder, verdict), per round.
    pub instrumented_ms: Vec<f64>,
    /// The plain lifecycle's spawn-to-ready time, per round.
    pub plain_ready_ms: Vec<f64>,
    /// Spawn-to-ready of a lifecycle with the import recorder and its audit
    /// hook alone (no importtime), run next to the plain one, per round.
    pub recorded_ready_ms: Vec<f64>,
    /// Spawn-to-ready with the null recorder (the recorder's two channels,
    /// an audit hook and a finder placed first, with no work behind them),
    /// run next to the plain one, per round: the floor under
    /// `recorded_ready_ms`.
    pub null_ready_ms: Vec<f64>,
    /// Set when the target's `command[0]` is a shim (a second process on
    /// every start, in both series): why, and the interpreter to run instead.
    pub shim: Option<String>,
}

/// What the import recorder and its audit hook may cost a worker's start:
/// at most 5% of a plain lifecycle's ready time.
pub const RECORDER_BUDGET: f64 = 0.05;

/// The recorder's cost on the worker's start: the paired ratio of the
/// recorder-only ready times to the plain ones (Hodges-Lehmann over the
/// rounds, 95% signed-rank interval, 2% noise band), `None` with fewer than
/// two rounds.
pub fn recorder_cost(c: &CheckCost) -> Option<phases::compare::Comparison> {
    paired_ready(&c.plain_ready_ms, &c.recorded_ready_ms)
}

/// The floor under [`recorder_cost`]: the null recorder's ready times over
/// the plain ones, the same statistic; `None` without them.
pub fn recorder_floor(c: &CheckCost) -> Option<phases::compare::Comparison> {
    paired_ready(&c.plain_ready_ms, &c.null_ready_ms)
}

/// The recorder's own work: its ready times over the null recorder's, in
/// the same rounds, the same statistic; `None` without them.
pub fn recorder_above_floor(c: &CheckCost) -> Option<phases::compare::Comparison> {
    paired_ready(&c.null_ready_ms, &c.recorded_ready_ms)
}

/// `b` over `a`, paired by round (Hodges-Lehmann, 95% signed-rank
/// interval, 2% noise band); `None` with fewer than two rounds or series
/// of different lengths.
fn paired_ready(a: &[f64], b: &[f64]) -> Option<phases::compare::Comparison> {
    if a.len() < 2 || a.len() != b.len() {
        return None;
    }
    phases::compare::paired_rank(a, b, 0.95, phases::compare::DEFAULT_NOISE_THRESHOLD).ok()
}

/// Where a recorder cost stands against [`RECORDER_BUDGET`]: `within` when
/// its whole interval is at or below the budget, `over` when all of it is
/// above, else `not settled against` (more rounds would tell).
pub fn budget_verdict(c: &phases::compare::Comparison) -> &'static str {
    let limit = 1.0 + RECORDER_BUDGET;
    if c.ci.hi <= limit {
        "within"
    } else if c.ci.lo > limit {
        "over"
    } else {
        "not settled against"
    }
}

/// The fastest N concurrent lifecycles can finish: not before one does,
/// nor before the cores ran N times one worker's CPU time.
pub fn cost_floor(plain_wall_ms: f64, plain_cpu_ms: f64, processes: usize, cores: usize) -> f64 {
    plain_wall_ms.max(processes as f64 * plain_cpu_ms / cores.max(1) as f64)
}
