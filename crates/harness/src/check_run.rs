//! `coldstart check` as one call: each target checked in turn, with
//! `--suggest` the verified cuts of its violations (and with `--fix` the
//! cuts written and the target checked again), stopped between targets by
//! an interrupt, then the snapshot gate of the targets that keep their
//! start-up tree under review. The caller renders what [`run`] returns and
//! exits with [`CheckRun::exit_code`].

use std::path::PathBuf;

use ::suggest::Suggestion;
use answers::check::{Status, TargetReport};

use crate::check::trace::CheckedWorker;
use crate::check::{CheckOptions, check_target_workers, suggest};
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::snapshot::{self, Mode, Reviewed};
use crate::target::Target;

/// What a check does beyond judging each target.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// How each target's check runs.
    pub check: CheckOptions,
    /// For each violation, the smallest verified cut (`--suggest`).
    pub suggest: bool,
    /// Write the verified cuts, then check the target again (`--fix`).
    pub fix: bool,
}

/// One target's check.
#[derive(Debug)]
pub struct Checked {
    /// Its report (with `fix` and a cut written: the report of the check
    /// run after writing it). With `suggest`, its `suggestions` hold the
    /// suggestions as JSON.
    pub report: TargetReport,
    /// The folder its paths are shown from.
    pub root: PathBuf,
    /// With `suggest`: one per violation of the first check, in its order.
    pub suggestions: Vec<Suggestion>,
    /// With `fix`: the files written.
    pub written: Vec<PathBuf>,
    /// Each process of the check its report gives (with `fix`, the check
    /// after writing): its life and its recorder's records, for the
    /// check's trace ([`crate::check::trace::trace_of`]).
    pub workers: Vec<CheckedWorker>,
}

/// A whole check.
#[derive(Debug, Default)]
pub struct CheckRun {
    /// The targets checked, in order.
    pub checked: Vec<Checked>,
    /// The snapshot gate: the targets whose start-up tree was compared with
    /// the stored one (only when every check held).
    pub snapshots: Vec<Reviewed>,
    /// Set when an interrupt cut the check short: the targets left
    /// unfinished, the first one cut in its middle (its workers killed).
    /// No verdict then.
    pub interrupted: Option<Vec<Target>>,
}

impl CheckRun {
    /// The reports, in order.
    pub fn reports(&self) -> Vec<TargetReport> {
        self.checked.iter().map(|c| c.report.clone()).collect()
    }

    /// The check on one timeline, coldstart being process `own_pid`
    /// ([`crate::check::trace`]).
    pub fn trace(&self, own_pid: u32) -> ::trace::Trace {
        crate::check::trace::trace_of(
            self.checked
                .iter()
                .map(|c| (&c.report, c.workers.as_slice())),
            own_pid,
        )
    }

    /// The check's exit code: the reports' ([`answers::check::exit_code`]),
    /// and 1 when every check held but a gated snapshot drifted or is
    /// missing.
    pub fn exit_code(&self) -> u8 {
        let code = answers::check::exit_code(self.checked.iter().map(|c| &c.report));
        if code == 0 && self.snapshots.iter().any(|r| r.failed(Mode::Gate)) {
            1
        } else {
            code
        }
    }
}

/// The check of each of `targets` as `opts` says; then, when every check
/// held, the snapshot gate of `gated` (in the project at `root`).
/// `interrupt` is looked at after each step: once set, the run returns
/// what it finished with the rest in [`CheckRun::interrupted`].
pub fn run(
    targets: &[Target],
    opts: RunOptions,
    gated: &[Target],
    root: &std::path::Path,
    interrupt: &Interrupt,
) -> Result<CheckRun> {
    let mut out = CheckRun::default();
    for (i, t) in targets.iter().enumerate() {
        let (mut report, mut workers) = check_target_workers(t, opts.check, None)?;
        if interrupt.is_set() {
            out.interrupted = Some(targets[i..].to_vec());
            return Ok(out);
        }
        let (mut suggestions, mut written) = (Vec::new(), Vec::new());
        if opts.suggest && report.status == Status::Fail {
            let found = suggest::suggest(t, &report, opts.fix)?;
            for sug in &found.suggestions {
                report
                    .suggestions
                    .push(serde_json::to_value(sug).map_err(|e| {
                        crate::Error::Invalid(format!("a suggestion as JSON: {e}"))
                    })?);
            }
            (suggestions, written) = (found.suggestions, found.written);
            if opts.fix && !written.is_empty() {
                // The fixed project, checked again: its verdict is the answer.
                (report, workers) = check_target_workers(t, opts.check, None)?;
            }
        }
        let checked = Checked {
            report,
            root: t.root.clone(),
            suggestions,
            written,
            workers,
        };
        if interrupt.is_set() {
            out.interrupted = Some(targets[i..].to_vec());
            return Ok(out);
        }
        out.checked.push(checked);
    }
    if out.exit_code() == 0 {
        out.snapshots = snapshot::review(root, gated, Mode::Gate)?;
    }
    Ok(out)
}
