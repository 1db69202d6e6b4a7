//! Pricing: the instrumented start-ups that price each costly import,
//! the recorder's evidence that locates it, and the memory it adds.

use std::collections::BTreeMap;

use importguard::recorder::bootstrap::Bootstrap;
use importguard::verdict::{CostlyImport, Violation, costly_imports, default_min_ms, root_imports};

use super::LazyOptions;
use crate::check::suggest::launched_python;
use crate::check::verify::LateEnd;
use crate::check::{CheckOptions, check_target};
use crate::error::{Error, Result};
use crate::lifecycle::{Lifecycle, Plain};
use crate::target::Target;

/// The body of the RSS bootstrap, run after the recorder's shared prelude.
const RSS_BOOTSTRAP: &str = include_str!("lazy_rss.py");

/// `t` judging only `module` (and what it imports) as forbidden.
pub(super) fn judging(t: &Target, modules: &[String]) -> Target {
    let mut j = t.clone();
    j.forbidden = modules.to_vec();
    j.allowed = Vec::new();
    j
}

/// The recorder's evidence of where each of `priced` is imported: a check
/// of `t` with those modules as the policy; each one's violation.
pub(super) fn locate(t: &Target, priced: &[CostlyImport]) -> Result<Vec<Option<Violation>>> {
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
pub(super) fn rss_mib(t: &Target, modules: &[String]) -> Result<BTreeMap<String, f64>> {
    let boot = Bootstrap::prepare_in(
        crate::scratch::private_dir(crate::scratch::LAZY, "lazy's RSS readings")?,
        RSS_BOOTSTRAP,
    )
    .map_err(|cause| Error::Recorder {
        context: "could not write the RSS bootstrap",
        cause,
    })?;
    let record = boot.dir().join("rss.jsonl");
    let mut cmd = t.spawn_command();
    cmd.instrument(
        "coldstart's RSS reader",
        [
            ("PYTHONPATH", boot.pythonpath(t.pythonpath().as_deref())),
            ("COLDSTART_LAZY_RSS", record.clone().into_os_string()),
            ("COLDSTART_LAZY_MODULES", modules.join(",").into()),
        ],
    );
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

/// The priced start-up: the ready time, the threshold, the costly imports
/// (the project's bodies' first, then the main module's roots), and what
/// made the pricing less than whole.
pub(super) struct Pricing {
    pub(super) ready_ms: f64,
    pub(super) min_ms: f64,
    pub(super) processes: usize,
    pub(super) warnings: Vec<String>,
    pub(super) priced: Vec<CostlyImport>,
    /// How many of `priced` are the project's bodies' imports (the rest
    /// are roots of the tree, kept only where the evidence names a line).
    pub(super) bodies: usize,
    /// The Python below a launcher (`uv run`, a shell) that answered, as
    /// its evidence names it: what reads the worker's files then.
    pub(super) launched: Option<String>,
    /// Whether the original's workers end late (then a late end on a
    /// patched copy is not the cut's).
    pub(super) late: LateEnd,
}

/// Runs `opts.processes` instrumented processes of `t` and prices every
/// start-up import costing at least the threshold.
pub(super) fn price(t: &Target, opts: &LazyOptions) -> Result<Pricing> {
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
pub(super) fn located(
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

/// The first error of a checked worker that failed before its start-up
/// was whole; a failure only at its end (a late exit, a lost ack) after a
/// whole start-up leaves what `lazy` reads intact.
pub(super) fn start_up_error(r: &answers::check::TargetReport) -> Option<String> {
    r.processes
        .iter()
        .find(|p| p.error.is_some() && !p.ended_late())
        .and_then(|p| p.error.clone())
}
