//! The import-boundary check: prove that workers never import forbidden
//! modules (torch, transformers, stanza by default) in their start-up,
//! health and shutdown, and say exactly who did when they do.
//!
//! Each target runs N fresh processes (default 3) concurrently, each
//! through the one [`Lifecycle`] (ready, health, shutdown), with
//! `PYTHONPROFILEIMPORTTIME=1` (stderr copied to a file and parsed as an
//! importtime tree) and the import recorder (`importguard::recorder`) first
//! on `PYTHONPATH`. The worker inherits the caller's environment, then the
//! target's `env`, then the recorder's variables. [`module_target`] checks
//! `import PKG` alone (a tiny protocol loop after the import);
//! [`judge_log`] judges a recorded importtime log and runs nothing.
//!
//! The result is a [`answers::check::TargetReport`]: its JSON schema and its
//! exit code's rule live in `answers::check`, its text in `report::check`;
//! [`crate::check_run`] is the whole `check` command as one call. [`cost`](mod@cost) measures
//! what the check costs beside the worker's own lifecycle (`cargo xtask check-cost`).
//!
//! The process judged is the one that answered the protocol: the ready
//! line's `pid`, below a launcher that forks (`uv run`, a shell) the Python
//! process the recorder saw there (`importguard::verdict::Answered`).
//!
//! A worker that could not be checked wins over a violation: the check is
//! incomplete, and the report still lists what was seen.

pub mod cost;
pub mod suggest;
pub mod trace;
pub mod verify;

use std::ffi::OsString;
use std::path::Path;

use answers::check::{ProcessReport, Status, TargetReport};
use importguard::importtime::{self, ImportLog};
use importguard::recorder::{Recorder, RecorderPolicy, Recording, is_module_pattern};
use importguard::verdict::{self, Answering, Evidence, Policy, ProcessVerdict, RecorderState};
use report::check::tree_text;
use timeline::{Outcome, WorkerRecord};

use self::trace::CheckedWorker;
use crate::error::{Error, Result, invalid};
use crate::lifecycle::{Failure, Lifecycle, Plain};
use crate::target::{DEFAULT_FORBIDDEN, Origin, Target};

/// How many slowest imports the report lists.
const SLOWEST: usize = 5;
/// How many packages the start-up by package lists.
const PACKAGES: usize = 8;

/// How a check runs, beyond its target.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Make forbidden imports fail with an ImportError that names the policy.
    pub block: bool,
    /// Keep the whole importtime tree of the first process in the report.
    pub tree: bool,
}

/// A target that checks `import PKG` alone, with `python`, in `cwd`.
pub fn module_target(pkg: &str, python: &str, cwd: &Path) -> Result<Target> {
    if !is_module_pattern(pkg) {
        invalid!("--module `{pkg}` is not a module name (dotted identifiers, e.g. `mypkg.sub`)");
    }
    let code = format!("import {pkg}\n{MODULE_LOOP}");
    let mut t = Target::ad_hoc(
        cwd,
        vec![python.to_owned(), "-c".into(), code],
        &format!("import {pkg}"),
    );
    t.origin = Origin::Module;
    Ok(t)
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

/// The policy of a target: its forbidden prefixes and allowances.
pub fn policy_of(t: &Target) -> Result<Policy> {
    Policy::new(t.forbidden.clone(), t.allowed.clone()).map_err(Error::Policy)
}

/// Judges a recorded importtime log (stderr of `python -X importtime`);
/// runs nothing. `forbid` replaces the default forbidden prefixes when not
/// empty.
pub fn judge_log(path: &Path, forbid: &[String], tree: bool) -> Result<TargetReport> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read the importtime log", path, e))?;
    let log = importtime::parse_owned(bytes);
    if log.entry_count() == 0 {
        invalid!(
            "{} holds no importtime entries; record one with `PYTHONPROFILEIMPORTTIME=1 python ... 2> FILE`",
            path.display()
        );
    }
    let forbidden: Vec<String> = if forbid.is_empty() {
        DEFAULT_FORBIDDEN.iter().map(|s| s.to_string()).collect()
    } else {
        forbid.to_vec()
    };
    let policy = Policy::new(forbidden.clone(), Vec::new()).map_err(Error::Policy)?;
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
    Ok(TargetReport {
        name: path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        origin: Origin::Log.to_string(),
        command: Vec::new(),
        limits: None,
        log: Some(path.to_path_buf()),
        forbidden,
        allowed: Vec::new(),
        block: false,
        status,
        ready_ms_median: None,
        violations,
        packages: verdict::by_package(&log, PACKAGES),
        instrument: None,
        first_party: Vec::new(),
        slowest: verdict::slowest(&log, SLOWEST),
        processes: vec![ProcessReport {
            index: 1,
            pid: None,
            ready_ms: None,
            exit: None,
            error: None,
            failed_at_end: false,
            stderr_tail: None,
            recorder: RecorderState::NotUsed,
            chained_sitecustomize: None,
            child_interpreters: 0,
            importtime_entries: log.entry_count(),
            verdict: v,
            log: None,
        }],
        tree: tree.then(|| tree_text(&log)),
        suggestions: Vec::new(),
    })
}

/// Checks one target: its processes run concurrently, each judged, the
/// verdicts merged.
pub fn check_target(t: &Target, opts: CheckOptions) -> Result<TargetReport> {
    check_target_in(t, opts, None)
}

/// [`check_target`], and with `tree` every process must have run the
/// project's own code from that tree ([`crate::provenance`]): a process
/// that imported one of the project's modules from elsewhere could not be
/// checked (its error names the module, the file and the route).
pub(crate) fn check_target_in(
    t: &Target,
    opts: CheckOptions,
    tree: Option<&Path>,
) -> Result<TargetReport> {
    check_target_workers(t, opts, tree).map(|(report, _)| report)
}

/// [`check_target_in`], with what each process left for a trace: its
/// life and its recorder's records ([`trace::CheckedWorker`]).
pub(crate) fn check_target_workers(
    t: &Target,
    opts: CheckOptions,
    tree: Option<&Path>,
) -> Result<(TargetReport, Vec<CheckedWorker>)> {
    let policy = policy_of(t)?;
    if t.command.is_empty() {
        invalid!("target `{}` has no command", t.name);
    }
    let lifecycle = Lifecycle::of(t);
    let (processes, workers): (Vec<ProcessReport>, Vec<CheckedWorker>) = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=t.processes)
            .map(|i| {
                let (policy, lifecycle) = (&policy, &lifecycle);
                s.spawn(move || checked_process(t, lifecycle, policy, opts.block, i, tree))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Result<Vec<_>>>()
    })?
    .into_iter()
    .unzip();

    let verdicts: Vec<ProcessVerdict> = processes.iter().map(|p| p.verdict.clone()).collect();
    let violations = verdict::merge(&verdicts);
    let status = if processes.iter().any(|p| p.error.is_some()) {
        Status::Error
    } else if violations.is_empty() {
        Status::Pass
    } else {
        Status::Fail
    };
    let ready: Vec<f64> = processes.iter().filter_map(|p| p.ready_ms).collect();
    let first_log = processes.iter().find_map(|p| p.log.as_ref());
    let report = TargetReport {
        name: t.name.clone(),
        origin: t.origin.to_string(),
        command: t.command.clone(),
        limits: t.limits.is_set().then_some(t.limits),
        log: None,
        forbidden: t.forbidden.clone(),
        allowed: t.allowed.clone(),
        block: opts.block,
        status,
        ready_ms_median: phases::stats::median(&ready),
        violations,
        // One more: under the recorder, `sitecustomize` is its bootstrap,
        // which the report shows apart from the worker's packages.
        packages: first_log
            .map(|l| verdict::by_package(l, PACKAGES + 1))
            .unwrap_or_default(),
        instrument: first_log
            .filter(|_| {
                processes
                    .iter()
                    .any(|p| p.recorder == importguard::verdict::RecorderState::Ran)
            })
            .and_then(|l| {
                verdict::by_package(l, usize::MAX)
                    .into_iter()
                    .find(|p| p.package == "sitecustomize")
            }),
        first_party: first_log
            .map(|l| verdict::first_party_modules(l, &t.first_party(), SLOWEST))
            .unwrap_or_default(),
        slowest: first_log
            .map(|l| verdict::slowest(l, SLOWEST))
            .unwrap_or_default(),
        tree: opts.tree.then(|| first_log.map(tree_text)).flatten(),
        processes,
        suggestions: Vec::new(),
    };
    Ok((report, workers))
}

/// The importtime log of one fresh instrumented lifecycle of `t` (ready,
/// health, shutdown), for a snapshot of its start-up tree. A worker that
/// could not be checked is an error.
pub fn startup_log(t: &Target) -> Result<ImportLog> {
    let policy = policy_of(t)?;
    let lifecycle = Lifecycle::of(t);
    let p = check_process(t, &lifecycle, &policy, false, 1, None)?;
    if let Some(e) = p.error {
        invalid!("the worker could not be run: {e}");
    }
    p.log.ok_or_else(|| {
        Error::Invalid(
            "the worker's stderr held no importtime log; does it run Python with -E or -I?"
                .to_owned(),
        )
    })
}

/// The `PYTHONPATH` a target's worker would have (its own, else ours), for
/// the recorder's folder to go in front of.
pub(crate) fn inherited_pythonpath(t: &Target) -> Option<OsString> {
    t.pythonpath()
}

/// One fresh worker through ready, health and shutdown, then its verdict.
pub(crate) fn check_process(
    t: &Target,
    lifecycle: &Lifecycle,
    policy: &Policy,
    block: bool,
    index: usize,
    tree: Option<&Path>,
) -> Result<ProcessReport> {
    checked_process(t, lifecycle, policy, block, index, tree).map(|(report, _)| report)
}

/// [`check_process`], with what the process left for a trace.
fn checked_process(
    t: &Target,
    lifecycle: &Lifecycle,
    policy: &Policy,
    block: bool,
    index: usize,
    tree: Option<&Path>,
) -> Result<(ProcessReport, CheckedWorker)> {
    let p = instrumented_process(t, lifecycle, policy, block, index)?;
    let mut report = p.report;
    if let Some(tree) = tree
        && report.error.is_none()
    {
        let own: std::collections::BTreeSet<String> = t.first_party().into_iter().collect();
        let pythonpath = t.pythonpath();
        if let Some(f) = crate::provenance::of(&p.recording, &own, tree, pythonpath.as_deref())
            .foreign
            .into_iter()
            .next()
        {
            report.error = Some(f.to_string());
        }
    }
    let worker = CheckedWorker {
        index,
        record: p.life,
        recording: p.recording,
    };
    Ok((report, worker))
}

/// One instrumented process: its report (verdict and importtime log), the
/// recorder's records and when its ready line was read.
#[derive(Debug)]
pub(crate) struct Instrumented {
    /// The process as the check reports it.
    pub report: ProcessReport,
    /// What the recorder wrote.
    pub recording: Recording,
    /// When the ready line was read (monotonic ns), if it was.
    pub ready_at_ns: Option<u64>,
    /// Its life as a trial's worker record (pid, marks, exit).
    pub life: WorkerRecord,
}

/// One checked worker's import recorder, prepared in a private folder,
/// and the target's command run under it and `-X importtime`, its stderr
/// (the importtime log among the worker's own lines) written to
/// `stderr.log` there.
fn instrumented_command(
    t: &Target,
    policy: &Policy,
    block: bool,
) -> Result<(
    importguard::recorder::RecorderSetup,
    spawn::Command,
    std::path::PathBuf,
)> {
    let pythonpath = inherited_pythonpath(t);
    let recorder_policy = RecorderPolicy {
        root: Some(t.root.clone()),
        own: t.first_party(),
        ..policy.recorder_policy(block)
    };
    let dir = crate::scratch::private_dir(crate::scratch::RECORDER, "a checked worker's records")?;
    let setup =
        Recorder::prepare_in(dir, &recorder_policy, pythonpath.as_deref()).map_err(|cause| {
            Error::Recorder {
                context: "could not prepare the import recorder",
                cause,
            }
        })?;
    let stderr_path = setup.dir().join("stderr.log");

    let mut cmd = t.spawn_command();
    cmd.instrument(
        "coldstart's import recorder",
        setup.env().iter().map(|(k, v)| (k, v)),
    )
    .instrument("-X importtime", [("PYTHONPROFILEIMPORTTIME", "1")]);
    cmd.stderr_file(&stderr_path);

    Ok((setup, cmd, stderr_path))
}

/// [`check_process`], keeping the records and the ready mark.
pub(crate) fn instrumented_process(
    t: &Target,
    lifecycle: &Lifecycle,
    policy: &Policy,
    block: bool,
    index: usize,
) -> Result<Instrumented> {
    let (setup, cmd, stderr_path) = instrumented_command(t, policy, block)?;
    let lived = lifecycle.drive(&cmd, &mut Plain);
    let life = lived.record(match &lived.end {
        Ok(_) => Outcome::Correct,
        Err(f) => Outcome::Failed {
            stage: f.stage.clone(),
            message: f.to_string(),
        },
    });
    let pid = lived.pid;
    let ready_ms = lived.ready_ms();
    // The process that answers the protocol: the ready line's own pid when
    // it gives one (a launcher may exec or fork), else spawn's.
    let ready_pid = lived.ready.as_ref().and_then(|r| r.pid);
    let timeline = lived.timeline;

    let mut failed_at_end = false;
    // The program could not be started: no interpreter ran, so no limit of
    // the evidence (a recorder kept out, an importtime log left empty) is
    // worth a note; the spawn error says what happened.
    let mut never_ran = false;
    let (exit, error, stderr_tail) = match lived.end.map_err(Failure::into_worker_error) {
        Ok(f) => (Some(f.status.to_string()), None, None),
        Err(Err(refused)) => (None, Some(refused), None),
        Err(Ok(mut e)) => {
            failed_at_end = matches!(e.stage, spawn::Stage::Shutdown | spawn::Stage::Exit);
            never_ran = e.stage == spawn::Stage::Spawn;
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

    let recording: Recording = setup.read().map_err(|cause| Error::Recorder {
        context: "could not read the import records",
        cause,
    })?;
    let log = match std::fs::read(&stderr_path) {
        Ok(bytes) => Some(importtime::parse_owned(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io("read", &stderr_path, e)),
    };
    let mut verdict = verdict::judge_answered(
        policy,
        &Evidence {
            importtime: log.as_ref(),
            recording: Some(&recording),
            timeline: Some(&timeline),
        },
        &Answering {
            ready_pid,
            spawned: pid,
            command: t.command.clone(),
        },
    );
    if never_ran {
        verdict.notes.clear();
    }
    let entries = log.as_ref().map_or(0, ImportLog::entry_count);
    // A check that cannot see never passes: the process that answered the
    // protocol left no evidence (a cleared environment, -I/-E, an exec, a
    // launcher below which no recorded image wrote the ready line).
    let error = error.or_else(|| verdict.missing.as_ref().map(ToString::to_string));
    let report = ProcessReport {
        index,
        pid,
        ready_ms,
        exit,
        failed_at_end: failed_at_end && error.is_some(),
        error,
        stderr_tail,
        recorder: verdict.recorder,
        chained_sitecustomize: recording.chain.as_ref().and_then(|c| c.file.clone()),
        child_interpreters: recording.children.len(),
        importtime_entries: entries,
        verdict,
        log,
    };
    Ok(Instrumented {
        report,
        recording,
        ready_at_ns: timeline.ready_at_ns(),
        life,
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
    fn a_module_name_is_checked_before_anything_runs() {
        assert!(module_target("json", "python3", Path::new("/")).is_ok());
        let err = module_target("os; import x", "python3", Path::new("/")).unwrap_err();
        assert!(err.to_string().contains("not a module name"), "{err}");
    }
}
