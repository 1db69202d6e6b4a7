//! The rows of the report: each priced import's own statement tried,
//! then the links below it when none of its own cuts is safe.

use std::collections::BTreeMap;

use answers::lazy::{LazyRow, LazyVerdict};
use importguard::verdict::{CostlyImport, Violation};
use suggest::{Cut, Suggester};

use super::LazyOptions;
use super::cut::{Attempt, Search, attempt, lazy_cut};
use super::price::locate;
use crate::check::verify::LateEnd;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::target::Target;

/// Why a verified cut has no saving: the bench compares only trials that
/// ran whole on both sides.
const UNMEASURED: &str = "verified on its patched copy, but its saving was not measured: the timed trials did not complete on both sides (the bench times only trials that end whole; a worker that ends late fails each at its end, as the warnings say)";

/// How many costly imports beneath a row without a safe cut of its own
/// are tried for a cut further down the chain.
const BELOW: usize = 2;

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

/// What every row's search shares: the target, its files, the options,
/// and the evidence of all the priced imports.
pub(super) struct Rows<'a> {
    pub(super) t: &'a Target,
    pub(super) s: &'a Suggester,
    pub(super) opts: &'a LazyOptions,
    pub(super) interrupt: &'a Interrupt,
    /// The located imports' violations (what each counts beneath it).
    pub(super) roots: Vec<Violation>,
    pub(super) priced: &'a [CostlyImport],
    pub(super) located: &'a [Option<Violation>],
    pub(super) own_names: Vec<String>,
    /// The MiB each module adds, read in one untimed start-up.
    pub(super) rss: BTreeMap<String, f64>,
    /// Whether the original's workers end late.
    pub(super) late: LateEnd,
}

/// What the rows found so far: the safe cuts, and the modules a cut further
/// down some row's chain defers, with that cut's `file:line`.
#[derive(Default)]
pub(super) struct Found {
    pub(super) safe: Vec<Cut>,
    pub(super) deferred: BTreeMap<String, String>,
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
    pub(super) fn row(
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
