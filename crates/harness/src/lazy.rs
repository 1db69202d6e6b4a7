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

use std::collections::BTreeMap;
use std::path::PathBuf;

use answers::lazy::{LazyAlternative, LazyCut, LazyReport, LazyRow, LazyVerdict, SCHEMA};
use importguard::verdict::{CostlyImport, Violation, costly_imports, default_min_ms, root_imports};
use phases::Phase;
use suggest::{Cut, Suggester, Suggestion};

use crate::check::suggest::{interpreter, launched_python};
use crate::check::verify::{LateEnd, in_copy, on_copy};
use crate::check::{CheckOptions, check_target, check_target_in};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lifecycle::{Lifecycle, Plain};
use crate::target::Target;
use crate::trials::{self, BenchOptions, Quiet};
use importguard::recorder::bootstrap::Bootstrap;

/// The prefix of a lazy trial's temporary folder (its bench files).
const OUT_PREFIX: &str = "coldstart-lazy-";

/// The body of the RSS bootstrap, run after the recorder's shared prelude.
const RSS_BOOTSTRAP: &str = include_str!("lazy_rss.py");

/// How many cuts of one statement are verified, best first (its scopes,
/// narrowest first, and PEP 810 `lazy` on 3.15).
const ATTEMPTS: usize = 3;

/// Why a verified cut has no saving: the bench compares only trials that
/// ran whole on both sides.
const UNMEASURED: &str = "verified on its patched copy, but its saving was not measured: the timed trials did not complete on both sides (the bench times only trials that end whole; a worker that ends late fails each at its end, as the warnings say)";

/// How many costly imports beneath a row without a safe cut of its own
/// are tried for a cut further down the chain.
const BELOW: usize = 2;

/// How `lazy` runs.
#[derive(Debug, Clone)]
pub struct LazyOptions {
    /// Instrumented processes to price over.
    pub processes: usize,
    /// The least cost listed, ms (default: [`default_min_ms`] of ready).
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

/// `t` judging only `module` (and what it imports) as forbidden.
fn judging(t: &Target, modules: &[String]) -> Target {
    let mut j = t.clone();
    j.forbidden = modules.to_vec();
    j.allowed = Vec::new();
    j
}

/// The recorder's evidence of where each of `priced` is imported: a check
/// of `t` with those modules as the policy; each one's violation.
fn locate(t: &Target, priced: &[CostlyImport]) -> Result<Vec<Option<Violation>>> {
    let modules: Vec<String> = priced.iter().map(|c| c.module.clone()).collect();
    let mut j = judging(t, &modules);
    j.processes = 1;
    let r = check_target(&j, CheckOptions::default())?;
    Ok(priced
        .iter()
        .map(|c| {
            r.violations
                .iter()
                .find(|v| v.first.module == c.module)
                .map(|v| v.first.clone())
        })
        .collect())
}

/// The RSS each of `modules` adds when its body runs at start-up, MiB: one
/// untimed start-up of `t` (ready, health, shutdown) with the RSS bootstrap
/// injected the recorder's way, reading VmRSS before and after those
/// modules only. A module it did not see is left out.
fn rss_mib(t: &Target, modules: &[String]) -> Result<BTreeMap<String, f64>> {
    let boot =
        Bootstrap::prepare("coldstart-lazy-", RSS_BOOTSTRAP).map_err(|cause| Error::Recorder {
            context: "could not write the RSS bootstrap",
            cause,
        })?;
    let record = boot.dir().join("rss.jsonl");
    let mut cmd = t.spawn_command();
    cmd.env("PYTHONPATH", boot.pythonpath(t.pythonpath().as_deref()))
        .env("COLDSTART_LAZY_RSS", &record)
        .env("COLDSTART_LAZY_MODULES", modules.join(","));
    let lived = Lifecycle::of(t).drive(&cmd, &mut Plain);
    // Only its start-up is read: an end that failed after ready (a late
    // exit) leaves the readings whole.
    if lived.ready.is_none()
        && let Err(f) = lived.end
    {
        return Err(Error::Invalid(format!(
            "the worker failed while its imports' memory was read: {f}"
        )));
    }
    let text = std::fs::read_to_string(&record).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["type"] != "rss" {
            continue;
        }
        if let (Some(m), Some(before), Some(after)) = (
            v["module"].as_str(),
            v["before"].as_f64(),
            v["after"].as_f64(),
        ) {
            out.insert(m.to_owned(), (after - before) / (1024.0 * 1024.0));
        }
    }
    Ok(out)
}

/// The ready time of `t`'s patched copy (B) against `t` (A), interleaved
/// until the sequential rule decides or its budget runs out.
fn saving(
    t: &Target,
    s: &Suggester,
    cut: &Cut,
    opts: &LazyOptions,
    interrupt: &Interrupt,
) -> Result<Option<phases::compare::Comparison>> {
    let copy = s
        .patched_copy(cut)
        .map_err(|e| Error::Invalid(format!("could not patch a copy: {e}")))?;
    let b = in_copy(t, copy.root());
    for o in spawn::owned::sweep(OUT_PREFIX) {
        let _ = spawn::owned::remove(&o);
    }
    let out = spawn::owned::tempdir(OUT_PREFIX, "a lazy trial's bench files")
        .map_err(|e| Error::io("create", &std::env::temp_dir(), e))?;
    let rule = phases::sequential::StopRule {
        max_rounds: opts.max_rounds,
        max_seconds: opts.max_seconds,
        ..Default::default()
    };
    let bench = BenchOptions::sequential(
        rule,
        1,
        phases::stats::Resampling::default(),
        out.path().to_path_buf(),
        opts.root.clone(),
    );
    let mut a = t.clone();
    a.processes = 1;
    let run = trials::run(a, Some(b), &bench, interrupt, &mut Quiet)?;
    // A trial that failed only at its end (the ack, the exit) still timed
    // its ready line, which is what is compared.
    if let Some((r, stage, message)) = run.first_failure().filter(|(_, s, _)| !s.at_end()) {
        return Err(Error::Invalid(format!(
            "the measurement's trial {} failed at {stage}: {message}",
            r.trial,
        )));
    }
    Ok(run
        .summary
        .phase(Phase::Ready)
        .and_then(|p| p.ratio.clone()))
}

/// Why a cut was rejected, in `lazy`'s words: a remaining violation is the
/// module still imported at start-up.
fn rejected(reason: &suggest::RejectReason) -> String {
    match reason {
        suggest::RejectReason::ViolationRemains { chain } => format!(
            "start-up still imports it on the patched copy (the recorder's evidence): {}",
            chain.join(" -> ")
        ),
        other => other.to_string(),
    }
}

fn lazy_cut(cut: &Cut) -> LazyCut {
    LazyCut {
        kind: cut.kind.to_string(),
        summary: cut.summary.clone(),
        diff: cut.diff.clone(),
        at: format!("{}:{}", cut.file, cut.line),
    }
}

/// What trying one violation's cuts gave.
enum Attempt {
    /// No cut of the links asked for applies.
    NoCut,
    /// Every cut tried was rejected on its patched copy.
    Unsafe {
        /// The best cut tried.
        first: Cut,
        /// Each rejection, in `lazy`'s words.
        why: String,
    },
    /// A cut passed the verification; its saving measured.
    Verified {
        /// The cut.
        cut: Cut,
        /// Its patched copy's ready time against the original's.
        saving: Option<phases::compare::Comparison>,
        /// The other cuts tried, each with its own verification.
        others: Vec<LazyAlternative>,
    },
}

/// How a row's search tries its cuts.
#[derive(Clone, Copy)]
struct Search<'a> {
    /// The module whose start-up import the cuts must remove.
    module: &'a str,
    /// Whether a worker ending late on the copy fails a cut.
    late: LateEnd,
    /// Verify every cut tried, not only up to the first that passes (the
    /// row's own statement: its other cuts are listed with their own
    /// verification).
    each: bool,
}

impl Attempt {
    /// Verified and measured faster.
    fn is_safe(&self) -> bool {
        matches!(self, Attempt::Verified { saving: Some(c), .. } if c.verdict == phases::compare::Verdict::Faster)
    }
}

/// The suggester's search on one violation `v`, kept to the cuts `keep`
/// takes: each verified on a patched copy judging `search.module` (ready,
/// health, the recorder's evidence that the module is gone from start-up,
/// the target's model path), best first (a statement's narrowest scope
/// first: a cut unsafe at one scope is tried at the next before the row
/// says unsafe), and the first that passes measured; with `search.each`
/// the rest are verified too, each on its own copy. The suggestion is
/// returned too, for what it says of links that cannot be cut.
fn attempt(
    t: &Target,
    s: &Suggester,
    v: &Violation,
    search: Search<'_>,
    keep: &dyn Fn(&Cut) -> bool,
    opts: &LazyOptions,
    interrupt: &Interrupt,
) -> Result<(Attempt, Suggestion)> {
    let sug = s
        .suggest(v)
        .map_err(|e| Error::Invalid(format!("could not suggest a cut for {}: {e}", v.module)))?;
    let cuts: Vec<Cut> = sug
        .cuts()
        .filter(|c| keep(c))
        .take(ATTEMPTS)
        .cloned()
        .collect();
    let Some(first) = cuts.first().cloned() else {
        return Ok((Attempt::NoCut, sug));
    };
    let judged = judging(t, &[search.module.to_owned()]);
    let mut passed = None;
    let mut others = Vec::new();
    let mut why = Vec::new();
    for cut in cuts {
        if passed.is_some() && !search.each {
            break;
        }
        let reason = s
            .verify_cut(&sug, &cut, |copy| {
                on_copy(&judged, copy, search.late).map_err(|e| Box::new(e) as suggest::CheckError)
            })
            .map_err(|e| Error::Invalid(format!("could not verify a cut: {e}")))?;
        let said = reason.as_ref().map(rejected);
        if let Some(w) = &said {
            why.push(format!("{}:{} ({}): {w}", cut.file, cut.line, cut.kind));
        }
        if reason.is_none() && passed.is_none() {
            passed = Some(cut);
        } else {
            others.push(LazyAlternative {
                cut: lazy_cut(&cut),
                verified: reason.is_none(),
                why: said,
            });
        }
    }
    let out = match passed {
        Some(cut) => Attempt::Verified {
            saving: saving(t, s, &cut, opts, interrupt)?,
            cut,
            others,
        },
        None => Attempt::Unsafe {
            first,
            why: why.join("; "),
        },
    };
    Ok((out, sug))
}

/// When a row's own statement has no safe cut (it cannot be cut, every
/// cut is unsafe, or none gains): the links below it, through the costly
/// imports the evidence counts beneath it (in the order given: the
/// caller puts those carrying most of the row's cost first, deepest first;
/// at most [`BELOW`]), each located on its own, its chain's cuts below the row's
/// module tried as [`attempt`] does. The first safe one, with the module
/// it defers.
fn below(
    rows: &Rows<'_>,
    module: &str,
    beneath: &[CostlyImport],
    own: Option<(&str, u32)>,
    tried: &mut Vec<String>,
) -> Result<Option<(Cut, Option<phases::compare::Comparison>, String)>> {
    let (t, s) = (rows.t, rows.s);
    for inner in beneath.iter().take(BELOW) {
        if rows.interrupt.is_set() {
            break;
        }
        let Some(v) = locate(t, std::slice::from_ref(inner))?.pop().flatten() else {
            continue;
        };
        let at = v.chain.iter().position(|m| m == module);
        let keep = |c: &Cut| {
            at.is_none_or(|i| c.link > i) && own.is_none_or(|(f, l)| !(c.file == f && c.line == l))
        };
        let search = Search {
            module: &inner.module,
            late: rows.late,
            each: false,
        };
        let (result, _) = attempt(t, s, &v, search, &keep, rows.opts, rows.interrupt)?;
        let safe = result.is_safe();
        match result {
            Attempt::Verified { cut, saving, .. } if safe => {
                return Ok(Some((cut, saving, inner.module.clone())));
            }
            Attempt::Verified { cut, .. } => tried.push(format!(
                "{}:{} gains nothing measurable",
                cut.file, cut.line
            )),
            Attempt::Unsafe { why, .. } => tried.push(why),
            Attempt::NoCut => tried.push(format!(
                "no link below `{module}` to `{}` can be cut",
                inner.module
            )),
        }
    }
    Ok(None)
}

/// The priced start-up: the ready time, the threshold, the costly imports
/// (the project's bodies' first, then the main module's roots), and what
/// made the pricing less than whole.
struct Pricing {
    ready_ms: f64,
    min_ms: f64,
    processes: usize,
    warnings: Vec<String>,
    priced: Vec<CostlyImport>,
    /// How many of `priced` are the project's bodies' imports (the rest
    /// are roots of the tree, kept only where the evidence names a line).
    bodies: usize,
    /// The Python below a launcher (`uv run`, a shell) that answered, as
    /// its evidence names it: what reads the worker's files then.
    launched: Option<String>,
    /// Whether the original's workers end late (then a late end on a
    /// patched copy is not the cut's).
    late: LateEnd,
}

/// Runs `opts.processes` instrumented processes of `t` and prices every
/// start-up import costing at least the threshold.
fn price(t: &Target, opts: &LazyOptions) -> Result<Pricing> {
    let mut priced_t = t.clone();
    priced_t.processes = opts.processes.max(1);
    let checked = check_target(&priced_t, CheckOptions::default())?;
    // Pricing needs start-up only: a worker whose end failed (a late
    // exit, a lost ack) after a whole start-up is priced, and said to be.
    if let Some(e) = start_up_error(&checked) {
        return Err(Error::Invalid(format!(
            "the worker could not be run to price its imports: {e}"
        )));
    }
    let late: Vec<&str> = checked
        .processes
        .iter()
        .filter(|p| p.failed_at_end)
        .filter_map(|p| p.error.as_deref())
        .collect();
    let mut warnings = Vec::new();
    if let Some(first) = late.first() {
        warnings.push(format!(
            "{} of {} workers failed at their end, after a whole start-up (priced anyway; `check` judges the exit): {first}",
            late.len(),
            checked.processes.len()
        ));
    }
    let logs: Vec<&importguard::importtime::ImportLog> = checked
        .processes
        .iter()
        .filter_map(|p| p.log.as_ref())
        .collect();
    if logs.is_empty() {
        return Err(Error::Invalid(
            "the worker's stderr held no importtime log; does it run Python with -E or -I?"
                .to_owned(),
        ));
    }
    let ready_ms = checked.ready_ms_median.unwrap_or(0.0);
    let min_ms = opts.min_ms.unwrap_or_else(|| default_min_ms(ready_ms));
    let mut priced = costly_imports(&logs, &t.first_party(), min_ms);
    // The main module's imports (a script's, a package's `__main__.py`, and
    // those of functions it calls at start-up) are roots of the tree, as
    // the interpreter's own start-up imports are: candidates, kept below
    // only where the evidence names the first-party line that made them.
    let bodies = priced.len();
    // A root whose body's own imports are priced already (the package's
    // app module that `__main__.py` imports) is priced through them: its
    // own row would only count them beneath it.
    let candidates: Vec<CostlyImport> = root_imports(&logs, min_ms)
        .into_iter()
        .filter(|r| {
            !priced
                .iter()
                .any(|p| p.module == r.module || p.importer == r.module)
        })
        .collect();
    priced.extend(candidates);
    Ok(Pricing {
        ready_ms,
        min_ms,
        processes: logs.len(),
        warnings,
        priced,
        bodies,
        launched: launched_python(&checked).map(str::to_owned),
        late: LateEnd::of(&checked.processes),
    })
}

/// Each priced import with the recorder's violation that locates it (the
/// line that made it), costliest first; a root of the tree the evidence
/// names no first-party line for is dropped.
fn located(
    t: &Target,
    priced: Vec<CostlyImport>,
    bodies: usize,
) -> Result<(Vec<CostlyImport>, Vec<Option<Violation>>)> {
    let located = locate(t, &priced)?;
    let mut pairs: Vec<(CostlyImport, Option<Violation>)> = priced
        .into_iter()
        .zip(located)
        .enumerate()
        .filter(|(i, (_, v))| *i < bodies || v.as_ref().is_some_and(|v| v.origin.is_some()))
        .map(|(_, pair)| pair)
        .collect();
    pairs.sort_by(|(a, _), (b, _)| CostlyImport::costliest_first(a, b));
    Ok(pairs.into_iter().unzip())
}

/// What every row's search shares: the target, its files, the options,
/// and the evidence of all the priced imports.
struct Rows<'a> {
    t: &'a Target,
    s: &'a Suggester,
    opts: &'a LazyOptions,
    interrupt: &'a Interrupt,
    /// The located imports' violations (what each counts beneath it).
    roots: Vec<Violation>,
    priced: &'a [CostlyImport],
    located: &'a [Option<Violation>],
    own_names: Vec<String>,
    /// The MiB each module adds, read in one untimed start-up.
    rss: BTreeMap<String, f64>,
    /// Whether the original's workers end late.
    late: LateEnd,
}

/// What the rows found so far: the safe cuts, and the modules a cut further
/// down some row's chain defers, with that cut's `file:line`.
#[derive(Default)]
struct Found {
    safe: Vec<Cut>,
    deferred: BTreeMap<String, String>,
}

impl Rows<'_> {
    /// Where a cut further down a row's chain is looked for: the costly
    /// imports the evidence counts beneath it. The project's own modules
    /// that carry most of the row's cost come first, the deepest of them
    /// first (in a chain of nested imports each costs a little less than
    /// the one that imports it): cutting above the weight defers all of it,
    /// and a module imported by two lines of the chain is not the one to
    /// judge by. The rest follow, costliest first.
    fn beneath(&self, row: &CostlyImport) -> Vec<CostlyImport> {
        let inner: Vec<&String> = self
            .roots
            .iter()
            .filter(|o| o.module == row.module)
            .flat_map(|o| o.beneath.iter())
            .collect();
        let mut under: Vec<CostlyImport> = self
            .priced
            .iter()
            .zip(self.located)
            .filter(|(c, l)| l.is_none() && inner.contains(&&c.module))
            .map(|(c, _)| c.clone())
            .collect();
        let carries = |c: &CostlyImport| {
            self.own_names
                .iter()
                .any(|n| n == importguard::importtime::top_level(&c.module))
                && c.median_ms >= 0.5 * row.median_ms
        };
        under.sort_by(|a, b| {
            carries(b).cmp(&carries(a)).then_with(|| {
                if carries(a) {
                    a.median_ms.total_cmp(&b.median_ms)
                } else {
                    CostlyImport::costliest_first(a, b)
                }
            })
        });
        under
    }

    /// One priced import's row: its own statement's cuts tried, then, when
    /// none is safe, the links below it.
    fn row(
        &self,
        cost: CostlyImport,
        violation: Option<Violation>,
        found: &mut Found,
    ) -> Result<LazyRow> {
        let mut row = LazyRow {
            rss_mib: self.rss.get(&cost.module).copied(),
            cost,
            file: None,
            line: None,
            statement: None,
            cut: None,
            verdict: LazyVerdict::NoCut,
            why: None,
            saving: None,
            alternatives: Vec::new(),
        };
        if self.interrupt.is_set() {
            // Priced, but its cut is not tried: said, not dropped.
            row.why = Some("interrupted before its cut was tried".to_owned());
            return Ok(row);
        }
        let Some(v) = violation else {
            row.why = Some(self.unlocated(&row.cost.module, found));
            return Ok(row);
        };
        let module = row.cost.module.clone();
        let own_at = self.own_cut(&mut row, &v, &module, found)?;
        if row.verdict != LazyVerdict::Safe {
            self.below_cut(&mut row, &module, own_at, found)?;
        }
        Ok(row)
    }

    /// Why a priced import the recorder did not locate has no cut of its own.
    fn unlocated(&self, module: &str, found: &Found) -> String {
        match self
            .roots
            .iter()
            .find(|o| o.beneath.iter().any(|b| b == module))
        {
            Some(outer) => match found.deferred.get(module) {
                Some(at) => format!(
                    "imported while `{}` is imported: the cut at {at} on that row defers it",
                    outer.module
                ),
                None => format!(
                    "imported while `{}` is imported: a cut of that import (its own row) defers it too, and its row tried the links down to this one",
                    outer.module
                ),
            },
            None => "the recorder did not see it imported at start-up (imported by a child interpreter, or its name differs)".to_owned(),
        }
    }

    /// The cuts of the row's own statement (the link that imports the
    /// module) tried: the row filled in; where that statement is.
    fn own_cut(
        &self,
        row: &mut LazyRow,
        v: &Violation,
        module: &str,
        found: &mut Found,
    ) -> Result<Option<(String, u32)>> {
        let search = Search {
            module,
            late: self.late,
            each: true,
        };
        let (own, sug) = attempt(
            self.t,
            self.s,
            v,
            search,
            &|c| c.module == module,
            self.opts,
            self.interrupt,
        )?;
        if let Some(u) = sug.not_cuttable.iter().find(|u| u.module == module) {
            row.file = u.file.clone();
            row.line = u.line;
            row.statement = u.statement.clone();
            row.why = Some(u.reason.clone());
        }
        let own_at = match &own {
            Attempt::Unsafe { first: c, .. } | Attempt::Verified { cut: c, .. } => {
                row.file = Some(c.file.clone());
                row.line = Some(c.line);
                row.statement = Some(c.statement.clone());
                row.why = None;
                Some((c.file.clone(), c.line))
            }
            Attempt::NoCut => None,
        };
        let own_safe = own.is_safe();
        match own {
            Attempt::NoCut => {
                if row.why.is_none() {
                    row.why = Some("no cut of this statement applies".to_owned());
                }
            }
            Attempt::Unsafe { first, why } => {
                row.verdict = LazyVerdict::Unsafe;
                row.cut = Some(lazy_cut(&first));
                row.why = Some(why);
            }
            Attempt::Verified {
                cut,
                saving,
                others,
            } => {
                if saving.is_none() {
                    // Verified, but "no win" must not read as measured.
                    row.why = Some(UNMEASURED.to_owned());
                }
                row.cut = Some(lazy_cut(&cut));
                row.saving = saving;
                row.alternatives = others;
                row.verdict = if own_safe {
                    found.safe.push(cut);
                    LazyVerdict::Safe
                } else {
                    LazyVerdict::NoWin
                };
            }
        }
        Ok(own_at)
    }

    /// One level down, then the next: the package re-export, the importing
    /// line inside the module. A safe cut there replaces the row's own.
    fn below_cut(
        &self,
        row: &mut LazyRow,
        module: &str,
        own_at: Option<(String, u32)>,
        found: &mut Found,
    ) -> Result<()> {
        let mut tried = Vec::new();
        let own_ref = own_at.as_ref().map(|(f, l)| (f.as_str(), *l));
        if let Some((cut, saving, inner)) =
            below(self, module, &self.beneath(&row.cost), own_ref, &mut tried)?
        {
            let at = format!("{}:{}", cut.file, cut.line);
            let before = row.why.take().unwrap_or_else(|| match row.verdict {
                LazyVerdict::NoWin => "gains nothing measurable".to_owned(),
                _ => "no cut applies".to_owned(),
            });
            row.why = Some(format!(
                "this statement's own cut: {before}; cut further down its chain instead, at {at}, which defers `{inner}` and what it imports"
            ));
            found.deferred.insert(inner, at);
            row.cut = Some(lazy_cut(&cut));
            row.saving = saving;
            // The statement's other cuts no longer stand beside the row's.
            row.alternatives.clear();
            row.verdict = LazyVerdict::Safe;
            found.safe.push(cut);
        } else if !tried.is_empty() {
            let why = row.why.take().unwrap_or_default();
            row.why = Some(format!("{why}; below it: {}", tried.join("; ")));
        }
        Ok(())
    }
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

/// The first error of a checked worker that failed before its start-up
/// was whole; a failure only at its end (a late exit, a lost ack) after a
/// whole start-up leaves what `lazy` reads intact.
fn start_up_error(r: &answers::check::TargetReport) -> Option<String> {
    r.processes
        .iter()
        .find(|p| p.error.is_some() && !p.ended_late())
        .and_then(|p| p.error.clone())
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
