//! The import-boundary check's report: the data a check produces (one
//! [`TargetReport`] per target, one [`ProcessReport`] per worker), its JSON
//! schema, the exit code it implies, and its text rendering.
//!
//! The harness fills these in; this module only shapes them for people and
//! machines. Paths are shown relative to the folder given to the renderer.
//!
//! # JSON schema (`"schema": "coldstart.import-boundary/1"`)
//!
//! ```text
//! { "schema": "coldstart.import-boundary/1",
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
//!                     "notes": [str] } } ],
//!     "tree": str (only with --tree) } ] }
//! ```
//! Fields are only ever added to this schema; a change in meaning bumps the
//! number.

pub mod ci;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use importguard::importtime::{ImportLog, PackageTotal};
use importguard::verdict::{
    Allowance, MergedViolation, ProcessVerdict, RecorderState, SlowImport, Violation,
};
use serde::Serialize;

/// JSON schema name and version.
pub const SCHEMA: &str = "coldstart.import-boundary/1";

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
    /// Where it came from (`coldstart.toml`, `command line`, ...).
    pub origin: &'static str,
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
    /// The project's own modules with the largest self time, largest first.
    pub first_party: Vec<SlowImport>,
    /// The slowest imports (cumulative) of the first process with a log;
    /// shown in the text report with the tree (`--tree`).
    pub slowest: Vec<SlowImport>,
    /// One entry per process.
    pub processes: Vec<ProcessReport>,
    /// The whole importtime tree of the first process, with `--tree`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// With `--suggest`: one suggestion per violation, in their order
    /// (`module`, `cut` with `file`, `line`, `kind`, `summary`, `diff`,
    /// `verification`, `candidates`, `not_cuttable`, `rejections`).
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

/// 2 when a worker could not be checked (it wins over a violation: the
/// check is incomplete), 1 on a violation, else 0.
pub fn exit_code(reports: &[TargetReport]) -> u8 {
    if reports.iter().any(|r| r.status == Status::Error) {
        2
    } else if reports.iter().any(|r| r.status == Status::Fail) {
        1
    } else {
        0
    }
}

/// The whole importtime tree of a log, as text.
pub fn tree_text(log: &ImportLog) -> String {
    let mut out = Vec::new();
    let view = crate::importtime::View::new(log, None, None);
    // Writing to a Vec cannot fail.
    let _ = crate::importtime::tree_text(log, &view, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn ms(us: i64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// A path relative to the current directory when it is below it.
/// ` (as the parent package of NAME)` when the chain's `i`-th module was
/// imported as a parent package of the name its importer asked for.
pub(crate) fn as_parent(v: &Violation, i: usize) -> String {
    v.chain_parent_of
        .get(i)
        .and_then(Option::as_ref)
        .map_or_else(String::new, |r| format!(" (as the parent package of {r})"))
}

fn show_path(file: &str, cwd: &Path) -> String {
    ci::relative(file, cwd)
}

/// The readable report of one target, paths shown relative to `cwd`.
pub fn render(r: &TargetReport, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let verdict = match r.status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
    };
    let ready = r
        .ready_ms_median
        .map_or_else(String::new, |m| format!(", ready in {m:.1} ms (median)"));
    let what = if r.log.is_some() {
        "recorded log".to_owned()
    } else {
        format!(
            "{} process{}",
            r.processes.len(),
            if r.processes.len() == 1 { "" } else { "es" }
        )
    };
    let nviol = if r.violations.is_empty() {
        String::new()
    } else {
        format!(
            ", {} violation{}",
            r.violations.len(),
            if r.violations.len() == 1 { "" } else { "s" }
        )
    };
    let _ = writeln!(
        out,
        "{verdict}  {} ({}): {what}{ready}{nviol}",
        r.name, r.origin
    );
    let _ = writeln!(out, "      forbidden: {}", r.forbidden.join(", "));

    for p in &r.processes {
        if let Some(err) = &p.error {
            let pid = p.pid.map_or_else(String::new, |p| format!(" (pid {p})"));
            let _ = writeln!(out, "\n  process {}{pid} could not be checked:", p.index);
            for line in err.lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    for v in &r.violations {
        let x = &v.first;
        let detail = x
            .detail
            .as_ref()
            .map_or_else(String::new, |d| format!(" ({d})"));
        let _ = writeln!(
            out,
            "\n  {} {}{detail}, in {}/{} process{}",
            x.module,
            x.status,
            v.processes,
            v.of,
            if v.of == 1 { "" } else { "es" }
        );
        let _ = writeln!(out, "    chain: {}", x.chain.join(" -> "));
        // The line behind each link, where the recorder saw it (not the
        // interpreter's own frozen code, such as runpy for `-m`).
        let width = x.chain.iter().map(String::len).max().unwrap_or(0);
        for (i, (m, f)) in x.chain.iter().zip(&x.chain_lines).enumerate() {
            if let Some(f) = f
                .as_ref()
                .filter(|f| !f.file.starts_with('<') || f.file == "<string>")
            {
                let _ = writeln!(
                    out,
                    "      {m:width$}  imported at {}:{}{}",
                    show_path(&f.file, cwd),
                    f.line,
                    as_parent(x, i)
                );
            }
        }
        match &x.origin {
            Some(o) => {
                let _ = writeln!(
                    out,
                    "    from:  {}:{} (in {})",
                    show_path(&o.file, cwd),
                    o.line,
                    o.func
                );
            }
            None => {
                let _ = writeln!(out, "    from:  unknown (no recorder evidence)");
            }
        }
        if let Some(i) = x
            .importer
            .as_ref()
            .filter(|i| Some(*i) != x.origin.as_ref())
        {
            let _ = writeln!(out, "    asked by: {}:{}", show_path(&i.file, cwd), i.line);
        }
        let phase = x
            .phase
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), ToString::to_string);
        let _ = writeln!(out, "    phase: {phase}");
        if let Some(proc_) = x.process.as_ref().filter(|p| !p.is_worker()) {
            // The line that started it, shown like every other line here.
            let mut shown = proc_.clone();
            if let Some(at) = shown.started_at.as_mut() {
                at.file = show_path(&at.file, cwd);
            }
            let _ = writeln!(out, "    process: {shown}");
        }
        if x.channel == Some(importguard::recorder::Channel::Audit) {
            // A lazily loaded module's body runs on first use, not through
            // an import: only the hook's `exec` event sees it.
            let why = if x.lazy.is_some() {
                "its body ran on first use, through a lazy loader, not through an import"
            } else {
                "the import bypassed the finder on sys.meta_path"
            };
            let _ = writeln!(out, "    seen by: the audit hook only ({why})");
        }
        if let Some(l) = &x.lazy {
            let at = |f: &Option<importguard::recorder::Frame>| {
                f.as_ref().map_or_else(
                    || "unknown".to_owned(),
                    |f| format!("{}:{}", show_path(&f.file, cwd), f.line),
                )
            };
            let _ = writeln!(
                out,
                "    lazy:  declared at {}, made real at {}",
                at(&l.declared),
                at(&l.made_real_at)
            );
        }
        let cost = v.median_cumulative_us.or(x.cumulative_us).map_or_else(
            || "unknown (no importtime line)".to_owned(),
            |c| format!("{} cumulative", ms(c)),
        );
        let _ = writeln!(out, "    cost:  {cost}");
        if !x.beneath.is_empty() {
            let shown: Vec<&str> = x.beneath.iter().take(5).map(String::as_str).collect();
            let more = x.beneath.len().saturating_sub(shown.len());
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            let _ = writeln!(out, "    then:  {}{more}", shown.join(", "));
        }
    }

    // What every process says beyond violations, deduplicated.
    let mut extra: BTreeMap<String, ()> = BTreeMap::new();
    for p in &r.processes {
        for n in &p.verdict.notes {
            extra.insert(format!("note: {n}"), ());
        }
        for a in &p.verdict.allowed {
            extra.insert(format!("allowed: {} ({})", a.module, a.reason), ());
        }
        for l in &p.verdict.lazy {
            extra.insert(format!("lazy, never executed: {l}"), ());
        }
        for l in &p.verdict.probed {
            extra.insert(format!("probed for, not imported: {l}"), ());
        }
        if p.child_interpreters > 0 {
            extra.insert(
                format!(
                    "note: {} child interpreter(s) (fork, subprocess, multiprocessing, exec) ran the recorder too; their imports are judged like the worker's",
                    p.child_interpreters
                ),
                (),
            );
        }
        if let Some(c) = &p.chained_sitecustomize {
            extra.insert(
                format!(
                    "ran the environment's sitecustomize after the recorder: {}",
                    show_path(c, cwd)
                ),
                (),
            );
        }
    }
    if !extra.is_empty() {
        let _ = writeln!(out);
        for e in extra.keys() {
            let _ = writeln!(out, "  {e}");
        }
    }
    if !r.packages.is_empty() {
        let _ = writeln!(
            out,
            "\n  start-up by package (self time summed over its modules):"
        );
        for p in &r.packages {
            let _ = writeln!(
                out,
                "    {:>10}  {} ({} module{})",
                ms(p.self_us),
                p.package,
                p.modules,
                if p.modules == 1 { "" } else { "s" }
            );
        }
    }
    if !r.first_party.is_empty() {
        let _ = writeln!(out, "\n  slowest first-party modules (self time):");
        for s in &r.first_party {
            let _ = writeln!(out, "    {:>10}  {}", ms(s.self_us), s.module);
        }
    }
    if r.tree.is_some() && !r.slowest.is_empty() {
        let _ = writeln!(out, "\n  slowest imports (cumulative):");
        for s in &r.slowest {
            let _ = writeln!(
                out,
                "    {:>10}  {}",
                ms(s.cumulative_us),
                s.chain.join(" -> ")
            );
        }
    }
    if let Some(tree) = &r.tree {
        let _ = writeln!(out, "\n  import tree:");
        for line in tree.lines() {
            let _ = writeln!(out, "    {line}");
        }
    }
    let _ = writeln!(out);
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
    if c.plain_ready_ms.len() < 2 || c.plain_ready_ms.len() != c.recorded_ready_ms.len() {
        return None;
    }
    phases::compare::paired_rank(
        &c.plain_ready_ms,
        &c.recorded_ready_ms,
        0.95,
        phases::DEFAULT_NOISE_THRESHOLD,
    )
    .ok()
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

/// The cost of the check as text: medians, ranges and ratios.
pub fn render_cost(c: &CheckCost, out: &mut String) {
    use std::fmt::Write;
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (phases::stats::median(v).unwrap_or(f64::NAN), lo, hi)
    };
    let (cm, clo, chi) = range(&c.check_ms);
    let (pm, plo, phi) = range(&c.plain_ms);
    let (im, ilo, ihi) = range(&c.instrumented_ms);
    let _ = writeln!(
        out,
        "import-boundary benchmark: target {} ({}), {} rounds interleaved after 1 warm-up, {} processes per check, {} health round trip(s)",
        c.target, c.command, c.rounds, c.processes, c.health
    );
    let _ = writeln!(
        out,
        "  whole check ({} concurrent instrumented workers, verdicts): median {cm:7.1} ms  (min {clo:.1}, max {chi:.1})",
        c.processes
    );
    let _ = writeln!(
        out,
        "  one plain lifecycle (spawn, ready, health, shutdown):        median {pm:7.1} ms  (min {plo:.1}, max {phi:.1})"
    );
    let _ = writeln!(
        out,
        "  one instrumented lifecycle (importtime, recorder, verdict):  median {im:7.1} ms  (min {ilo:.1}, max {ihi:.1})"
    );
    let _ = writeln!(
        out,
        "  ratio check / plain lifecycle: {:.2}x; instrumented / plain: {:.2}x",
        cm / pm,
        im / pm
    );
    if let Some(r) = recorder_cost(c) {
        let ready = |v: &[f64]| phases::stats::median(v).unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "  the recorder and its audit hook alone (no importtime): ready median {:.2} ms against plain {:.2} ms; ratio {:.3} (95% CI {:.3} .. {:.3}), cost {:+.1}%: {} the {:.0}% budget",
            ready(&c.recorded_ready_ms),
            ready(&c.plain_ready_ms),
            r.ratio,
            r.ci.lo,
            r.ci.hi,
            (r.ratio - 1.0) * 100.0,
            budget_verdict(&r),
            RECORDER_BUDGET * 100.0
        );
        if let Some(shim) = &c.shim {
            let _ = writeln!(
                out,
                "  note: {shim}; both series pay for it, which makes every ratio here smaller than the worker's own"
            );
        }
    }
    let cpu = phases::stats::median(&c.plain_cpu_ms).unwrap_or(f64::NAN);
    let floor = cost_floor(pm, cpu, c.processes, c.cores);
    let _ = writeln!(
        out,
        "  CPU floor: max(one lifecycle {pm:.1} ms, {} x {cpu:.1} ms CPU / {} cores) = {floor:.1} ms; check / floor: {:.2}x",
        c.processes,
        c.cores,
        cm / floor
    );
}

/// The fastest N concurrent lifecycles can finish: not before one does,
/// nor before the cores ran N times one worker's CPU time.
pub fn cost_floor(plain_wall_ms: f64, plain_cpu_ms: f64, processes: usize, cores: usize) -> f64 {
    plain_wall_ms.max(processes as f64 * plain_cpu_ms / cores.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use importguard::verdict;

    #[test]
    fn the_recorders_cost_is_judged_against_its_budget_by_its_whole_interval() {
        let cost = |plain: &[f64], recorded: &[f64]| CheckCost {
            target: "t".into(),
            command: "python3 w.py".into(),
            rounds: plain.len(),
            processes: 3,
            health: 1,
            check_ms: vec![100.0; plain.len()],
            plain_ms: vec![50.0; plain.len()],
            plain_cpu_ms: vec![40.0; plain.len()],
            cores: 2,
            instrumented_ms: vec![60.0; plain.len()],
            plain_ready_ms: plain.to_vec(),
            recorded_ready_ms: recorded.to_vec(),
            shim: None,
        };
        let plain: Vec<f64> = (0..20).map(|i| 30.0 + f64::from(i % 5) * 0.1).collect();
        let near = |k: f64| -> Vec<f64> {
            plain
                .iter()
                .enumerate()
                .map(|(i, p)| p * (k + if i % 2 == 0 { 0.002 } else { -0.002 }))
                .collect()
        };
        let within = recorder_cost(&cost(&plain, &near(1.03))).unwrap();
        assert!((within.ratio - 1.03).abs() < 0.003, "{within:?}");
        assert_eq!(budget_verdict(&within), "within");
        let over = recorder_cost(&cost(&plain, &near(1.08))).unwrap();
        assert_eq!(budget_verdict(&over), "over");
        let wide: Vec<f64> = plain
            .iter()
            .enumerate()
            .map(|(i, p)| p * if i % 2 == 0 { 1.10 } else { 1.0 })
            .collect();
        assert_eq!(
            budget_verdict(&recorder_cost(&cost(&plain, &wide)).unwrap()),
            "not settled against"
        );
        assert!(recorder_cost(&cost(&plain[..1], &plain[..1])).is_none());
        let mut text = String::new();
        render_cost(&cost(&plain, &near(1.03)), &mut text);
        assert!(text.contains("cost +3.0%: within the 5% budget"), "{text}");
    }

    #[test]
    fn the_floor_is_one_lifecycle_or_the_cpu_work_spread_over_the_cores() {
        assert_eq!(cost_floor(100.0, 80.0, 3, 2), 120.0);
        assert_eq!(cost_floor(100.0, 40.0, 3, 2), 100.0);
        assert_eq!(cost_floor(100.0, 80.0, 3, 0), 240.0);
    }

    #[test]
    fn a_worker_that_could_not_be_checked_wins_over_a_violation() {
        let report = |status| TargetReport {
            name: "w".into(),
            origin: "command line",
            command: vec![],
            log: None,
            forbidden: vec![],
            allowed: vec![],
            block: false,
            status,
            ready_ms_median: None,
            violations: vec![],
            packages: vec![],
            first_party: vec![],
            slowest: vec![],
            processes: vec![],
            tree: None,
            suggestions: Vec::new(),
        };
        assert_eq!(exit_code(&[report(Status::Pass)]), 0);
        assert_eq!(exit_code(&[report(Status::Pass), report(Status::Fail)]), 1);
        assert_eq!(exit_code(&[report(Status::Fail), report(Status::Error)]), 2);
    }

    #[test]
    fn the_readable_report_prints_the_chain_with_arrows_and_paths_from_here() {
        let v = verdict::Violation {
            module: "torch".into(),
            pattern: "torch".into(),
            status: verdict::Status::Loaded,
            detail: None,
            chain: vec!["app".into(), "app.model".into(), "torch".into()],
            chain_parent_of: vec![None; 3],
            chain_source: verdict::ChainSource::Importtime,
            chain_lines: vec![
                None,
                Some(importguard::recorder::Frame {
                    file: "/src/app/__init__.py".into(),
                    line: 1,
                    func: "<module>".into(),
                }),
                Some(importguard::recorder::Frame {
                    file: "/src/app/model.py".into(),
                    line: 3,
                    func: "<module>".into(),
                }),
            ],
            origin: Some(importguard::recorder::Frame {
                file: "/src/app/model.py".into(),
                line: 3,
                func: "<module>".into(),
            }),
            importer: None,
            phase: Some(verdict::Phase::Request {
                op: "health".into(),
                index: 1,
            }),
            t_ns: Some(5),
            cumulative_us: Some(1500),
            beneath: vec!["torch._C".into()],
            recorded: true,
            in_importtime: true,
            process: None,
            channel: None,
            lazy: None,
        };
        let mut r = TargetReport {
            name: "app".into(),
            origin: "command line",
            command: vec!["python3".into()],
            log: None,
            forbidden: vec!["torch".into()],
            allowed: vec![],
            block: false,
            status: Status::Fail,
            ready_ms_median: Some(12.34),
            violations: verdict::merge(&[]),
            packages: vec![],
            first_party: vec![],
            slowest: vec![],
            processes: vec![],
            tree: None,
            suggestions: Vec::new(),
        };
        r.violations.push(MergedViolation {
            first: v,
            processes: 2,
            of: 3,
            median_cumulative_us: Some(1500),
        });
        let mut out = String::new();
        render(&r, Path::new("/src"), &mut out);
        assert_eq!(
            out,
            "FAIL  app (command line): 0 processes, ready in 12.3 ms (median), 1 violation\n      \
             forbidden: torch\n\n  torch loaded, in 2/3 processes\n    chain: app -> app.model -> torch\n      \
             app.model  imported at app/__init__.py:1\n      torch      imported at app/model.py:3\n    \
             from:  app/model.py:3 (in <module>)\n    phase: health request #1\n    cost:  1.5 ms cumulative\n    \
             then:  torch._C\n\n"
        );
    }
}
