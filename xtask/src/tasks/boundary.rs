//! `cargo xtask import-boundary`: prove that workers never import forbidden
//! modules (torch, transformers, stanza by default) in their start-up,
//! health and shutdown, and say exactly who did when they do.
//!
//! Each target runs N fresh processes (default 3) concurrently, each through
//! ready, health and shutdown, with `PYTHONPROFILEIMPORTTIME=1` (stderr
//! copied to a file and parsed as an importtime tree) and the import
//! recorder (`importguard::recorder`) first on `PYTHONPATH`. The worker
//! inherits the caller's environment, then the target's `env`, then the
//! recorder's variables. `--module PKG` checks `import PKG` alone (a tiny
//! protocol loop after the import); `--log FILE` judges a recorded
//! importtime log and runs nothing.
//!
//! Exit codes: 0 every target holds; 1 a violation; 2 a worker could not be
//! checked (crash, timeout, protocol error) or the tool could not do its job.
//! A worker that could not be checked wins over a violation: the check is
//! incomplete, and the report still lists what was seen.
//!
//! # `--json` schema (`"schema": "coldstart.import-boundary/1"`)
//!
//! ```text
//! { "schema": "coldstart.import-boundary/1",
//!   "exit_code": 0 | 1 | 2,
//!   "targets": [ {
//!     "name": str, "origin": "coldstart.toml" | "built-in default" | "command line" | "--module" | "--log",
//!     "command": [str] (empty for --log), "log": str | null,
//!     "forbidden": [str], "allowed": [{"module": str, "reason": str}], "block": bool,
//!     "status": "pass" | "fail" | "error",
//!     "ready_ms_median": number | null,
//!     "violations": [ {                       // merged over processes, first seen first
//!        "module": str, "pattern": str, "status": "loaded" | "attempted" | "blocked",
//!        "detail": str (optional), "chain": [str], "chain_source": "importtime" | "recorder",
//!        "chain_lines": [{"file", "line", "func"} | null],  // per chain element: who imported it
//!        "origin": {"file", "line", "func"} | null, "importer": {"file", "line", "func"} | null,
//!        "phase": {"phase": "startup" | "after_ready" | "shutdown"}
//!               | {"phase": "request", "op": str, "index": int} | null,
//!        "t_ns": int | null, "cumulative_us": int | null, "beneath": [str],
//!        "recorded": bool, "in_importtime": bool,
//!        "processes": int, "of": int, "median_cumulative_us": int | null } ],
//!     "slowest": [ {"module": str, "cumulative_us": int, "self_us": int, "chain": [str]} ],
//!     "processes": [ {
//!        "index": int, "pid": int | null, "ready_ms": number | null,
//!        "exit": str | null, "error": str | null, "stderr_tail": str | null,
//!        "recorder": "ran" | "did_not_run" | "not_used", "chained_sitecustomize": str | null,
//!        "child_interpreters": int,           // children that ran the recorder (not judged)
//!        "importtime_entries": int,
//!        "verdict": { "violations": [...as above, without processes/of/median...],
//!                     "allowed": [{"module", "pattern", "allowed_by", "reason"}],
//!                     "lazy": [str], "probed": [str], "recorder": str, "importtime": bool,
//!                     "notes": [str] } } ],
//!     "tree": str (only with --tree) } ] }
//! ```
//! Fields are only ever added to this schema; a change in meaning bumps the
//! number.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use importguard::importtime::{self, ImportLog};
use importguard::recorder::{Recorder, Recording, is_module_pattern};
use importguard::verdict::{
    self, Allowance, Evidence, MergedViolation, Policy, ProcessVerdict, RecorderState, RequestMark,
    SlowImport, Timeline,
};
use serde::Serialize;
use spawn::worker_proto::Request;

use crate::config::{self, Target};

/// JSON schema name and version.
pub const SCHEMA: &str = "coldstart.import-boundary/1";

/// The recorders' private folders in use, for the Ctrl-C handler.
static LIVE_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Keeps a recorder folder listed in [`LIVE_DIRS`] while it exists.
struct Listed(PathBuf);

impl Listed {
    fn new(dir: &Path) -> Listed {
        if let Ok(mut dirs) = LIVE_DIRS.lock() {
            dirs.push(dir.to_path_buf());
        }
        Listed(dir.to_path_buf())
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        if let Ok(mut dirs) = LIVE_DIRS.lock() {
            dirs.retain(|d| d != &self.0);
        }
    }
}

/// How many slowest imports the report lists.
const SLOWEST: usize = 5;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Check only this target of coldstart.toml (`refworker` without a file).
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
    /// Forbidden package prefixes, comma separated (replaces the target's;
    /// default torch,transformers,stanza).
    #[arg(long, value_name = "A,B", value_delimiter = ',')]
    forbid: Vec<String>,
    /// Check `import PKG` alone, in a fresh interpreter (`--python`).
    #[arg(long, value_name = "PKG", conflicts_with_all = ["log", "target"])]
    module: Option<String>,
    /// The interpreter for `--module`.
    #[arg(
        long,
        value_name = "EXE",
        default_value = "python3",
        requires = "module"
    )]
    python: String,
    /// Judge a recorded importtime log (stderr of `python -X importtime`);
    /// runs nothing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "block"])]
    log: Option<PathBuf>,
    /// Make forbidden imports fail with an ImportError that names the policy.
    #[arg(long)]
    block: bool,
    /// Seconds to wait for the ready line (overrides the target's).
    #[arg(long, value_name = "SECS")]
    ready_timeout: Option<f64>,
    /// Seconds to wait for each reply (overrides the target's).
    #[arg(long, value_name = "SECS")]
    request_timeout: Option<f64>,
    /// Fresh processes per target, run concurrently (overrides the target's; default 3).
    #[arg(long, value_name = "N")]
    processes: Option<usize>,
    /// Print the machine-readable report (schema in the task's docs).
    #[arg(long)]
    json: bool,
    /// Also print the whole importtime tree of the first process.
    #[arg(long)]
    tree: bool,
    /// Instead of reporting, benchmark the check: N interleaved rounds of
    /// the whole check of the first target against one plain lifecycle of
    /// its worker (spawn, ready, health, shutdown; no importtime, no
    /// recorder) and one instrumented lifecycle; prints medians and ratios.
    #[arg(long, value_name = "N", conflicts_with_all = ["log", "json", "tree"])]
    bench: Option<usize>,
    /// The worker command to check, with the default policy.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    // Ctrl-C: no worker may outlive the tool.
    let _ = ctrlc::set_handler(|| {
        spawn::kill_all();
        // exit() runs no destructors: remove the recorders' folders here.
        if let Ok(dirs) = LIVE_DIRS.lock() {
            for d in dirs.iter() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
        std::process::exit(130);
    });
    let root = super::project_root();
    let cwd = std::env::current_dir().context("the current directory is not readable")?;

    let reports = if let Some(log) = &args.log {
        if !args.command.is_empty() || args.module.is_some() {
            bail!("--log judges a recorded log alone: give no command and no --module");
        }
        vec![judge_log(&args, &cwd.join(log))?]
    } else {
        let targets = targets(&args, &root)?;
        if let Some(rounds) = args.bench {
            return bench(&args, &targets[0], rounds);
        }
        let mut reports = Vec::new();
        for t in &targets {
            reports.push(check_target(&args, t)?);
        }
        reports
    };

    let code = exit_code(&reports);
    if args.json {
        let out = JsonOut {
            schema: SCHEMA,
            exit_code: code,
            targets: &reports,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let mut text = String::new();
        for r in &reports {
            render(r, &cwd, &mut text);
        }
        print!("{text}");
    }
    Ok(ExitCode::from(code))
}

fn exit_code(reports: &[TargetReport]) -> u8 {
    if reports.iter().any(|r| r.status == Status::Error) {
        2
    } else if reports.iter().any(|r| r.status == Status::Fail) {
        1
    } else {
        0
    }
}

fn secs(v: Option<f64>, flag: &str) -> Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => bail!("{flag} must be a positive number of seconds, got {s}"),
    }
}

/// The targets to check, with the command line's overrides applied.
fn targets(args: &Args, root: &Path) -> Result<Vec<Target>> {
    let mut targets = match &args.module {
        Some(pkg) => {
            if !is_module_pattern(pkg) {
                bail!(
                    "--module `{pkg}` is not a module name (dotted identifiers, e.g. `mypkg.sub`)"
                );
            }
            if !args.command.is_empty() {
                bail!("give either --module or a command after `--`, not both");
            }
            let code = format!("import {pkg}\n{MODULE_LOOP}");
            let mut t = Target::ad_hoc(
                root,
                vec![args.python.clone(), "-c".into(), code],
                &format!("import {pkg}"),
            );
            t.origin = "--module";
            vec![t]
        }
        None => config::resolve(root, args.target.as_deref(), &args.command)?,
    };
    let ready = secs(args.ready_timeout, "--ready-timeout")?;
    let request = secs(args.request_timeout, "--request-timeout")?;
    if args.processes == Some(0) {
        bail!("--processes must be at least 1");
    }
    for t in &mut targets {
        if !args.forbid.is_empty() {
            t.forbidden = args.forbid.iter().map(|s| s.trim().to_owned()).collect();
        }
        if let Some(d) = ready {
            t.ready_timeout = d;
        }
        if let Some(d) = request {
            t.request_timeout = d;
        }
        if let Some(n) = args.processes {
            t.processes = n;
        }
        // --module runs in the caller's directory, like `python -c` would.
        if t.origin == "--module" {
            t.cwd = std::env::current_dir().context("the current directory is not readable")?;
        }
    }
    Ok(targets)
}

/// After `import PKG`: the protocol without importing anything more (a
/// ready line, health, shutdown), so `--module` goes through the same
/// lifecycle as a worker.
const MODULE_LOOP: &str = r#"import sys as _s
_s.stdout.write('{"ready": true}\n'); _s.stdout.flush()
for _l in _s.stdin:
    if '"shutdown"' in _l:
        _s.stdout.write('{"op": "shutdown"}\n'); _s.stdout.flush(); break
    _s.stdout.write('{"op": "health", "response": {"status": "ok"}}\n'); _s.stdout.flush()
"#;

fn policy_of(forbidden: &[String], allowed: &[config::Allowed]) -> Result<Policy> {
    Policy::new(
        forbidden.to_vec(),
        allowed
            .iter()
            .map(|a| Allowance {
                module: a.module.clone(),
                reason: a.reason.clone(),
            })
            .collect(),
    )
    .context("the import policy is not usable; fix --forbid or the target's forbidden/allowed")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pass,
    Fail,
    Error,
}

#[derive(Debug, Serialize)]
struct JsonOut<'a> {
    schema: &'static str,
    exit_code: u8,
    targets: &'a [TargetReport],
}

/// One target's result.
#[derive(Debug, Serialize)]
struct TargetReport {
    name: String,
    origin: &'static str,
    command: Vec<String>,
    log: Option<PathBuf>,
    forbidden: Vec<String>,
    allowed: Vec<config::Allowed>,
    block: bool,
    status: Status,
    ready_ms_median: Option<f64>,
    violations: Vec<MergedViolation>,
    slowest: Vec<SlowImport>,
    processes: Vec<ProcessReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tree: Option<String>,
}

/// One process's result.
#[derive(Debug, Serialize)]
struct ProcessReport {
    index: usize,
    pid: Option<u32>,
    ready_ms: Option<f64>,
    exit: Option<String>,
    error: Option<String>,
    stderr_tail: Option<String>,
    recorder: RecorderState,
    chained_sitecustomize: Option<String>,
    /// Child interpreters (fork, subprocess) that ran the recorder too;
    /// their records are kept apart and not judged.
    child_interpreters: usize,
    importtime_entries: usize,
    verdict: ProcessVerdict,
    #[serde(skip)]
    log: Option<ImportLog>,
}

fn judge_log(args: &Args, path: &Path) -> Result<TargetReport> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("could not read the importtime log {}", path.display()))?;
    let log = importtime::parse_owned(bytes);
    if log.entry_count() == 0 {
        bail!(
            "{} holds no importtime entries; record one with `PYTHONPROFILEIMPORTTIME=1 python ... 2> FILE`",
            path.display()
        );
    }
    let forbidden: Vec<String> = if args.forbid.is_empty() {
        config::DEFAULT_FORBIDDEN
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args.forbid.clone()
    };
    let policy = policy_of(&forbidden, &[])?;
    let v = verdict::judge(
        &policy,
        &Evidence {
            importtime: Some(&log),
            recording: None,
            timeline: None,
        },
    );
    let violations = verdict::merge(std::slice::from_ref(&v));
    let status = if v.holds() {
        Status::Pass
    } else {
        Status::Fail
    };
    let tree = args.tree.then(|| tree_text(&log));
    Ok(TargetReport {
        name: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        origin: "--log",
        command: Vec::new(),
        log: Some(path.to_path_buf()),
        forbidden,
        allowed: Vec::new(),
        block: false,
        status,
        ready_ms_median: None,
        violations,
        slowest: verdict::slowest(&log, SLOWEST),
        processes: vec![ProcessReport {
            index: 1,
            pid: None,
            ready_ms: None,
            exit: None,
            error: None,
            stderr_tail: None,
            recorder: RecorderState::NotUsed,
            chained_sitecustomize: None,
            child_interpreters: 0,
            importtime_entries: log.entry_count(),
            verdict: v,
            log: None,
        }],
        tree,
    })
}

fn check_target(args: &Args, t: &Target) -> Result<TargetReport> {
    let policy = policy_of(&t.forbidden, &t.allowed)?;
    if t.command.is_empty() {
        bail!("target `{}` has no command", t.name);
    }
    let processes: Vec<ProcessReport> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=t.processes)
            .map(|i| {
                let policy = &policy;
                s.spawn(move || check_process(t, policy, args.block, i))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Result<Vec<_>>>()
    })?;

    let verdicts: Vec<ProcessVerdict> = processes.iter().map(|p| p.verdict.clone()).collect();
    let violations = verdict::merge(&verdicts);
    let status = if processes.iter().any(|p| p.error.is_some()) {
        Status::Error
    } else if violations.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    let mut ready: Vec<f64> = processes.iter().filter_map(|p| p.ready_ms).collect();
    ready.sort_by(f64::total_cmp);
    let ready_ms_median = match ready.len() {
        0 => None,
        n if n % 2 == 1 => Some(ready[n / 2]),
        n => Some((ready[n / 2 - 1] + ready[n / 2]) / 2.0),
    };
    let first_log = processes.iter().find_map(|p| p.log.as_ref());
    Ok(TargetReport {
        name: t.name.clone(),
        origin: t.origin,
        command: t.command.clone(),
        log: None,
        forbidden: t.forbidden.clone(),
        allowed: t.allowed.clone(),
        block: args.block,
        status,
        ready_ms_median,
        violations,
        slowest: first_log
            .map(|l| verdict::slowest(l, SLOWEST))
            .unwrap_or_default(),
        tree: args.tree.then(|| first_log.map(tree_text)).flatten(),
        processes,
    })
}

/// One fresh worker through ready, health and shutdown, then its verdict.
fn check_process(t: &Target, policy: &Policy, block: bool, index: usize) -> Result<ProcessReport> {
    let pythonpath: Option<OsString> = t
        .env
        .get("PYTHONPATH")
        .map(OsString::from)
        .or_else(|| std::env::var_os("PYTHONPATH"));
    let setup = Recorder::prepare(&policy.recorder_policy(block), pythonpath.as_deref())
        .context("could not prepare the import recorder")?;
    let _listed = Listed::new(setup.dir());
    let stderr_path = setup.dir().join("stderr.log");

    let mut cmd = t.spawn_command();
    for (k, v) in setup.env() {
        cmd.env(k, v);
    }
    cmd.env("PYTHONPROFILEIMPORTTIME", "1");
    cmd.stderr_file(&stderr_path);

    let mut timeline = Timeline::default();
    let mut pid = None;
    let mut ready_ms = None;
    let outcome: std::result::Result<spawn::Finished, spawn::Error> = (|| {
        let mut w = spawn::Worker::spawn(&cmd)?;
        crate::pyspy::arm_timeout_dump(&mut w, t, &crate::tasks::project_root());
        pid = Some(w.pid());
        timeline.spawned_at_ns = Some(w.spawned_at_ns());
        let ready = w.wait_ready(t.ready_timeout)?;
        ready_ms = Some(ready.read_at_ns.saturating_sub(w.spawned_at_ns()) as f64 / 1e6);
        timeline.ready_at_ns = Some(ready.value.t_ns.unwrap_or(ready.read_at_ns));
        for _ in 0..t.health {
            // Marked before sending (and kept if the request fails), so an
            // import the request triggers is never earlier than its mark.
            timeline.requests.push(RequestMark {
                op: "health".to_owned(),
                sent_at_ns: spawn::monotonic_ns(),
            });
            w.request(&Request::health(), t.request_timeout)?;
        }
        timeline.shutdown_sent_at_ns = Some(spawn::monotonic_ns());
        w.shutdown(&t.shutdown_policy())
    })();

    let (exit, error, stderr_tail) = match outcome {
        Ok(f) => (Some(f.status.to_string()), None, None),
        Err(mut e) => {
            // The worker's own lines, from the whole stderr file: the
            // in-memory tail may hold nothing but importtime lines.
            let own =
                stderr_tail(&stderr_path).unwrap_or_else(|| without_importtime(&e.stderr_tail));
            e.stderr_tail = own.clone();
            (
                e.status.as_ref().map(ToString::to_string),
                Some(without_importtime(&e.to_string())),
                Some(own),
            )
        }
    };

    let recording: Recording = setup.read().context("could not read the import records")?;
    let log = match std::fs::read(&stderr_path) {
        Ok(bytes) => Some(importtime::parse_owned(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(e).with_context(|| format!("could not read {}", stderr_path.display()));
        }
    };
    let verdict = verdict::judge(
        policy,
        &Evidence {
            importtime: log.as_ref(),
            recording: Some(&recording),
            timeline: Some(&timeline),
        },
    );
    let entries = log.as_ref().map_or(0, ImportLog::entry_count);
    // A worker that ran but left no evidence at all was not checked.
    let error = error.or_else(|| {
        (!recording.ran() && entries == 0).then(|| {
            "no import evidence: the import recorder did not run and stderr holds no importtime lines; \
             the worker probably runs Python with -E or -I (which ignore PYTHONPATH and \
             PYTHONPROFILEIMPORTTIME) or is not Python: add `-X importtime` to its command, or drop -E/-I"
                .to_owned()
        })
    });
    Ok(ProcessReport {
        index,
        pid,
        ready_ms,
        exit,
        error,
        stderr_tail,
        recorder: verdict.recorder,
        chained_sitecustomize: recording.chain.as_ref().and_then(|c| c.file.clone()),
        child_interpreters: recording.child_files.len(),
        importtime_entries: entries,
        verdict,
        log,
    })
}

/// Text without the importtime lines that `PYTHONPROFILEIMPORTTIME` mixed
/// into the worker's stderr (also when quoted as `| import time: ...`).
fn without_importtime(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let bare = line.trim_start().trim_start_matches('|').trim_start();
        if !bare.starts_with("import time:") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The worker's own last stderr lines (importtime lines left out).
fn stderr_tail(path: &Path) -> Option<String> {
    const LINES: usize = 20;
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let own: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("import time:"))
        .collect();
    let from = own.len().saturating_sub(LINES);
    Some(own[from..].join("\n"))
}

fn tree_text(log: &ImportLog) -> String {
    let mut out = Vec::new();
    let view = report::importtime::View::new(log, None, None);
    // Writing to a Vec cannot fail.
    let _ = report::importtime::tree_text(log, &view, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn ms(us: i64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

/// A path relative to the current directory when it is below it.
fn show_path(file: &str, cwd: &Path) -> String {
    Path::new(file)
        .strip_prefix(cwd)
        .map_or_else(|_| file.to_owned(), |p| p.display().to_string())
}

fn render(r: &TargetReport, cwd: &Path, out: &mut String) {
    use std::fmt::Write;
    let verdict = match r.status {
        Status::Pass => "PASS",
        Status::Fail => "FAIL",
        Status::Error => "ERROR",
    };
    let ready = r
        .ready_ms_median
        .map_or_else(String::new, |m| format!(", ready in {m:.1} ms (median)"));
    let what = if r.origin == "--log" {
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
        for (m, f) in x.chain.iter().zip(&x.chain_lines) {
            if let Some(f) = f
                .as_ref()
                .filter(|f| !f.file.starts_with('<') || f.file == "<string>")
            {
                let _ = writeln!(
                    out,
                    "      {m:width$}  imported at {}:{}",
                    show_path(&f.file, cwd),
                    f.line
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
                "note: child interpreters (fork, subprocess) ran too; only the worker's own imports are judged by the recorder, importtime lines of children on the same stderr count".to_owned(),
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
    if !r.slowest.is_empty() {
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

/// `--bench N`: what the check costs next to the worker's own lifecycle.
fn bench(args: &Args, t: &Target, rounds: usize) -> Result<ExitCode> {
    if rounds == 0 {
        bail!("--bench needs at least 1 round");
    }
    let plain = |instrumented: bool| -> Result<f64> {
        let policy = policy_of(&t.forbidden, &t.allowed)?;
        let start = std::time::Instant::now();
        if instrumented {
            let p = check_process(t, &policy, false, 1)?;
            if let Some(e) = p.error {
                bail!("the worker could not be checked: {e}");
            }
        } else {
            let cmd = t.spawn_command();
            let run = || -> std::result::Result<(), spawn::Error> {
                let mut w = spawn::Worker::spawn(&cmd)?;
                w.wait_ready(t.ready_timeout)?;
                for _ in 0..t.health {
                    w.request(&Request::health(), t.request_timeout)?;
                }
                w.shutdown(&t.shutdown_policy())?;
                Ok(())
            };
            run().map_err(|e| anyhow::anyhow!("the worker's lifecycle failed: {e}"))?;
        }
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    let mut check_ms = Vec::new();
    let mut plain_ms = Vec::new();
    let mut instr_ms = Vec::new();
    // One warm-up of each (page cache, bytecode), kept out of the figures.
    plain(false)?;
    check_target(args, t)?;
    for round in 0..rounds {
        // The two lifecycles swap places every round, so neither always
        // follows the check.
        let first_plain = round % 2 == 0;
        if first_plain {
            plain_ms.push(plain(false)?);
        } else {
            instr_ms.push(plain(true)?);
        }
        let start = std::time::Instant::now();
        let r = check_target(args, t)?;
        check_ms.push(start.elapsed().as_secs_f64() * 1e3);
        if r.status == Status::Error {
            bail!("the check could not be completed; run it without --bench to see why");
        }
        if first_plain {
            instr_ms.push(plain(true)?);
        } else {
            plain_ms.push(plain(false)?);
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let (c, p, i) = (med(&mut check_ms), med(&mut plain_ms), med(&mut instr_ms));
    println!(
        "import-boundary benchmark: target {} ({}), {} rounds interleaved after 1 warm-up, {} processes per check, {} health round trip(s)",
        t.name,
        t.display_command(),
        rounds,
        t.processes,
        t.health
    );
    println!(
        "  whole check ({} concurrent instrumented workers, verdicts): median {c:7.1} ms  (min {:.1}, max {:.1})",
        t.processes,
        check_ms[0],
        check_ms[check_ms.len() - 1]
    );
    println!(
        "  one plain lifecycle (spawn, ready, health, shutdown):        median {p:7.1} ms  (min {:.1}, max {:.1})",
        plain_ms[0],
        plain_ms[plain_ms.len() - 1]
    );
    println!(
        "  one instrumented lifecycle (importtime, recorder, verdict):  median {i:7.1} ms  (min {:.1}, max {:.1})",
        instr_ms[0],
        instr_ms[instr_ms.len() - 1]
    );
    println!(
        "  ratio check / plain lifecycle: {:.2}x; instrumented / plain: {:.2}x",
        c / p,
        i / p
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importtime_lines_leave_the_worker_stderr_alone() {
        let err = "worker failed\n  stderr:\n    | import time:   12 |   12 | json\n    | Traceback (most recent call last):\nimport time: self [us] | cumulative | imported package\nValueError: x\n";
        assert_eq!(
            without_importtime(err),
            "worker failed\n  stderr:\n    | Traceback (most recent call last):\nValueError: x\n"
        );
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
            slowest: vec![],
            processes: vec![],
            tree: None,
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
            slowest: vec![],
            processes: vec![],
            tree: None,
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
