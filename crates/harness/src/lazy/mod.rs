//! `coldstart lazy`: every import the project's own code makes at start-up
//! that costs at least a threshold, priced over several instrumented
//! processes ([`importguard::verdict::costly_imports`] for the imports of
//! first-party modules' bodies; [`importguard::verdict::root_imports`] for
//! the main module's, kept where the evidence names a first-party line),
//! located by the
//! recorder's evidence (a check of the same worker with those modules as
//! the policy, whose chains give the importing file and line), cut the way
//! `suggest` knows (only cuts of that very statement), each cut verified
//! on a patched copy ([`crate::check::verify::on_copy`]: the check there
//! with that module as the policy, so the evidence step sees whether start-up
//! still imports it, then the target's model path), and the saving
//! measured: the original (A) against the patched copy (B) with the
//! bench's interleaved rounds and sequential stopping rule on ready. The
//! memory each costly import adds is read in one more untimed start-up
//! (`lazy_rss.py`, a body on the recorder's prelude: VmRSS before and
//! after those modules' bodies only). Before any cut is tried, a copy of
//! the project with no cut applied must start and run its own code: a
//! copy that cannot is the run's error (exit 2), never a table of cuts
//! called unsafe.

mod cut;
mod price;
mod rows;
mod saving;

use std::path::PathBuf;

use answers::lazy::{LazyReport, SCHEMA};
use suggest::{Cut, Suggester};

use crate::check::suggest::interpreter;
use crate::check::verify::in_copy;
use crate::check::{CheckOptions, check_target_in};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::target::Target;
use price::{judging, located, price, rss_mib, start_up_error};
use rows::{Found, Rows};

/// How `lazy` runs.
#[derive(Debug, Clone)]
pub struct LazyOptions {
    /// Instrumented processes to price over.
    pub processes: usize,
    /// The least cost listed, ms (default: [`default_min_ms`](importguard::verdict::default_min_ms) of ready).
    pub min_ms: Option<f64>,
    /// Write the safe cuts to the project.
    pub fix: bool,
    /// The most interleaved rounds of each saving's measurement.
    pub max_rounds: usize,
    /// The most seconds of each saving's measurement.
    pub max_seconds: f64,
    /// The project root, for the tool's git revision in the environment.
    pub root: PathBuf,
}

impl LazyOptions {
    /// Refuses options that cannot price anything.
    pub fn validate(&self) -> Result<()> {
        if self.processes == 0 {
            return Err(Error::Invalid("--processes must be at least 1".into()));
        }
        if let Some(ms) = self.min_ms
            && !(ms.is_finite() && ms >= 0.0)
        {
            return Err(Error::Invalid(format!(
                "--min-ms must be a number of milliseconds, 0 or more, got {ms}"
            )));
        }
        Ok(())
    }
}

/// What `coldstart lazy` found: the report, and with `--fix`, when cuts
/// were written, the target priced again with them in place.
#[derive(Debug, Clone)]
pub struct LazyRun {
    /// The report that priced (and with `--fix` wrote) the cuts.
    pub before: LazyReport,
    /// The second pricing after the fix, at the same `min_ms`.
    pub after: Option<LazyReport>,
}

/// `coldstart lazy` as one call: [`lazy`], then, when `--fix` wrote cuts
/// and no interrupt came, the same target priced again without fixing.
pub fn run(t: &Target, opts: &LazyOptions, interrupt: &Interrupt) -> Result<LazyRun> {
    opts.validate()?;
    let before = lazy(t, opts, interrupt)?;
    let after = if opts.fix && !before.written.is_empty() && !interrupt.is_set() {
        let again = LazyOptions {
            fix: false,
            min_ms: Some(before.min_ms),
            ..opts.clone()
        };
        Some(lazy(t, &again, interrupt)?)
    } else {
        None
    };
    Ok(LazyRun { before, after })
}

/// The control of every verification: a copy of the project with no cut
/// applied must start and run its own code. When it cannot (a path it
/// needs that the copy does not have, the original's code imported
/// through an editable install), every cut would be called unsafe for
/// it, and `lazy` stops with why instead. A failure only at the worker's
/// end is left to `check`, as pricing leaves it.
fn copy_runs(t: &Target, s: &Suggester) -> Result<()> {
    let copy = s
        .copy()
        .map_err(|e| Error::Invalid(format!("could not copy the project: {e}")))?;
    let moved = in_copy(&judging(t, &[]), copy.root());
    let r = check_target_in(&moved, CheckOptions::default(), Some(copy.root()))?;
    let Some(why) = start_up_error(&r) else {
        return Ok(());
    };
    Err(Error::Invalid(format!(
        "a copy of the project with no cut applied could not run, so no cut can be judged: {why}\n(each cut is verified on a copy of {} in a temporary folder, with the project's paths moved into it; when the worker reaches a file outside the project by a path relative to its own files, `__file__`'s `../..`, name that path absolutely, e.g. in the target's `env`, and run lazy again)",
        t.root.display()
    )))
}

/// `--fix`: writes the safe cuts. A second cut of a file already written
/// was computed from its old bytes: `apply` refuses it; the report names
/// it, and the next run offers it anew.
fn write_cuts(s: &Suggester, safe: &[Cut], report: &mut LazyReport) -> Result<()> {
    for cut in safe {
        match s.apply(cut) {
            Ok(files) => report.written.extend(files),
            Err(suggest::SuggestError::Changed { .. }) => report
                .not_written
                .push(format!("{} ({}:{})", cut.module, cut.file, cut.line)),
            Err(e) => return Err(Error::Invalid(format!("could not write the cut: {e}"))),
        }
    }
    Ok(())
}

/// Prices, cuts, verifies and measures `t`'s costly start-up imports;
/// with `fix`, writes the safe cuts.
pub fn lazy(t: &Target, opts: &LazyOptions, interrupt: &Interrupt) -> Result<LazyReport> {
    let pricing = price(t, opts)?;
    let mut report = LazyReport {
        schema: SCHEMA,
        target: t.name.clone(),
        ready_ms: pricing.ready_ms,
        min_ms: pricing.min_ms,
        processes: pricing.processes,
        rows: Vec::new(),
        written: Vec::new(),
        not_written: Vec::new(),
        interrupted: false,
        warnings: pricing.warnings,
    };
    if pricing.priced.is_empty() {
        return Ok(report);
    }
    let python = interpreter(t, pricing.launched.as_deref())?;
    let s = Suggester::new(&t.root, &python)
        .map_err(|e| Error::Invalid(format!("could not read the worker's files: {e}")))?
        .with_cwd(&t.cwd);
    let (priced, located) = located(t, pricing.priced, pricing.bodies)?;
    if priced.is_empty() {
        return Ok(report);
    }
    copy_runs(t, &s)?;
    // A priced module imported while another priced one is being imported
    // is counted beneath that one in the evidence, not on its own.
    let modules: Vec<String> = priced.iter().map(|c| c.module.clone()).collect();
    let rows = Rows {
        t,
        s: &s,
        opts,
        interrupt,
        roots: located.iter().flatten().cloned().collect(),
        priced: &priced,
        located: &located,
        own_names: t.first_party(),
        rss: rss_mib(t, &modules)?,
        late: pricing.late,
    };
    let mut found = Found::default();
    for (cost, violation) in priced.iter().cloned().zip(located.iter().cloned()) {
        report.rows.push(rows.row(cost, violation, &mut found)?);
    }
    // An interrupted run writes nothing: the user asked it to stop.
    report.interrupted = interrupt.is_set();
    if opts.fix && !report.interrupted {
        write_cuts(&s, &found.safe, &mut report)?;
    }
    Ok(report)
}
