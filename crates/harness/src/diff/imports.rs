//! The start-up import trees of both sides, from instrumented processes
//! (importtime and the recorder, never timed): the modules imported at
//! ready, each package's cumulative time, the forbidden modules, and the
//! line that brings in each new package.

use std::collections::{BTreeMap, BTreeSet};

use answers::diff::{ForbiddenChange, ImportDiff, ModuleLine, PackageCount, PackageTime};
use importguard::firstparty;
use importguard::importtime::top_level;
use importguard::importtime::{NodeId, NodeKind, stdlib};
use importguard::recorder::CallSite;
use importguard::verdict::{self, MergedViolation, Policy};

use crate::check::{Instrumented, instrumented_process, policy_of};
use crate::error::Result;
use crate::lifecycle::Lifecycle;
use crate::target::Target;

/// What one side's instrumented processes saw.
#[derive(Debug, Default)]
pub(crate) struct SideImports {
    /// Per process: the modules imported by the ready line.
    pub at_ready: Vec<BTreeSet<String>>,
    /// Per process: each top-level package's cumulative time at start-up, ms.
    pub package_ms: Vec<BTreeMap<String, f64>>,
    /// The check's violations, merged over the processes.
    pub violations: Vec<MergedViolation>,
}

/// The modules a process had imported when its ready line was read: the
/// importtime tree's timed entries, less those the recorder saw imported
/// first after ready.
fn at_ready(p: &Instrumented) -> (BTreeSet<String>, Vec<NodeId>) {
    let Some(log) = &p.report.log else {
        return Default::default();
    };
    let late: BTreeSet<&str> = match p.ready_at_ns {
        Some(ready) => {
            let mut first: BTreeMap<&str, u64> = BTreeMap::new();
            for i in p.recording.imports.iter().filter(|i| i.found == Some(true)) {
                let e = first.entry(i.name.as_str()).or_insert(i.t_ns);
                *e = (*e).min(i.t_ns);
            }
            first
                .into_iter()
                .filter(|&(_, t)| t > ready)
                .map(|(n, _)| n)
                .collect()
        }
        None => BTreeSet::new(),
    };
    let mut names = BTreeSet::new();
    let mut ids = Vec::new();
    for (i, n) in log.nodes().iter().enumerate() {
        if n.kind != NodeKind::Entry {
            continue;
        }
        let id = NodeId(i as u32);
        let name = log.name(id);
        if late.contains(name) {
            continue;
        }
        names.insert(name.to_owned());
        ids.push(id);
    }
    (names, ids)
}

/// Folds one side's processes; the first error of a process is returned
/// as the side's failure.
pub(crate) fn side(processes: &[Instrumented]) -> std::result::Result<SideImports, String> {
    if let Some(e) = processes.iter().find_map(|p| p.report.error.clone()) {
        return Err(e);
    }
    let mut s = SideImports::default();
    for p in processes {
        let (names, ids) = at_ready(p);
        let totals = p
            .report
            .log
            .as_ref()
            .map(|l| l.package_totals_among(ids))
            .unwrap_or_default();
        s.package_ms.push(
            totals
                .into_iter()
                .map(|t| (t.package, t.cumulative_us as f64 / 1e3))
                .collect(),
        );
        s.at_ready.push(names);
    }
    let verdicts: Vec<_> = processes.iter().map(|p| p.report.verdict.clone()).collect();
    s.violations = verdict::merge(&verdicts);
    Ok(s)
}

/// Runs `rounds` instrumented processes of each side, A then B then B then
/// A ..., one at a time (so both sides see the same machine).
pub(crate) fn run_both(
    a: &Target,
    b: &Target,
    rounds: usize,
) -> Result<(Vec<Instrumented>, Vec<Instrumented>)> {
    let (pa, pb) = (policy_of(a)?, policy_of(b)?);
    let (la, lb) = (Lifecycle::of(a), Lifecycle::of(b));
    let (mut xa, mut xb) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let run_a = |xa: &mut Vec<Instrumented>| -> Result<()> {
            xa.push(instrumented_process(a, &la, &pa, false, i + 1)?);
            Ok(())
        };
        let run_b = |xb: &mut Vec<Instrumented>| -> Result<()> {
            xb.push(instrumented_process(b, &lb, &pb, false, i + 1)?);
            Ok(())
        };
        if i % 2 == 0 {
            run_a(&mut xa)?;
            run_b(&mut xb)?;
        } else {
            run_b(&mut xb)?;
            run_a(&mut xa)?;
        }
        // A side that cannot start will not start the next time either.
        if xa.iter().chain(&xb).any(|p| p.report.error.is_some()) {
            break;
        }
    }
    Ok((xa, xb))
}

/// The first of the project's modules that one side's processes imported
/// from outside `tree` ([`crate::provenance`]), if any.
pub(crate) fn foreign(
    processes: &[Instrumented],
    sides: &[&Target],
    side: &Target,
    tree: &std::path::Path,
) -> Option<crate::provenance::Foreign> {
    let own = own_names(sides);
    let pythonpath = side.pythonpath();
    processes.iter().find_map(|p| {
        crate::provenance::of(&p.recording, &own, tree, pythonpath.as_deref())
            .foreign
            .into_iter()
            .next()
    })
}

/// The top-level names that are the project's own code on either side
/// (the one rule, `importguard::firstparty`, over each side's source
/// folders), less the forbidden packages: a stand-in or vendored copy of
/// one is never the project's code.
pub(crate) fn own_names(sides: &[&Target]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for t in sides {
        let pythonpath = t.pythonpath();
        let dirs = firstparty::source_dirs(&t.cwd, pythonpath.as_deref(), &t.root);
        out.extend(
            firstparty::top_level_names(dirs, &t.root)
                .into_iter()
                .filter(|n| !t.forbidden.iter().any(|f| top_level(f) == n.as_str())),
        );
    }
    out
}

fn median_usize(v: &[usize]) -> Option<usize> {
    let f: Vec<f64> = v.iter().map(|&n| n as f64).collect();
    phases::stats::median(&f).map(|m| m.round() as usize)
}

fn forbidden(v: &MergedViolation) -> ForbiddenChange {
    ForbiddenChange {
        module: v.first.module.clone(),
        chain: v.first.chain.clone(),
        origin: v.first.origin.clone().or_else(|| v.first.importer.clone()),
        cumulative_us: v.median_cumulative_us,
    }
}

/// How many instrumented processes [`importing_lines`] may run.
const LINE_PASSES: usize = 4;

/// The first-party line and chain that bring each of `names` (new
/// packages and first-party modules) into `b`'s start-up, by name: one
/// more instrumented process of B whose recorder walks the stack for those
/// names (it blocks nothing). A name imported beneath another one asked
/// for is no chain of its own (the recorder reports the outer one: a
/// third-party package under the project's module that imports it), so
/// the names still without a line are asked again without those found,
/// up to [`LINE_PASSES`] processes in all.
pub(crate) fn importing_lines(
    b: &Target,
    packages: &[String],
) -> BTreeMap<String, MergedViolation> {
    let mut out = BTreeMap::new();
    let mut left: Vec<String> = packages.to_vec();
    for _ in 0..LINE_PASSES {
        if left.is_empty() {
            break;
        }
        for (module, v) in one_pass_of_lines(b, &left) {
            out.entry(module).or_insert(v);
        }
        let before = left.len();
        left.retain(|n| !out.contains_key(n));
        if left.len() == before {
            break;
        }
    }
    out
}

/// One instrumented process of [`importing_lines`]: each chain's first
/// module asked for, with its evidence.
fn one_pass_of_lines(b: &Target, packages: &[String]) -> BTreeMap<String, MergedViolation> {
    if packages.is_empty() {
        return BTreeMap::new();
    }
    let Ok(policy) = Policy::new(packages.to_vec(), Vec::new()) else {
        return BTreeMap::new();
    };
    let Ok(p) = instrumented_process(b, &Lifecycle::of(b), &policy, false, 0) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for v in verdict::merge(std::slice::from_ref(&p.report.verdict)) {
        out.entry(v.first.module.clone()).or_insert(v);
    }
    out
}

/// The comparison of both sides' import trees.
pub(crate) fn diff(a: &SideImports, b: &SideImports, ta: &Target, tb: &Target) -> ImportDiff {
    let union =
        |s: &SideImports| -> BTreeSet<String> { s.at_ready.iter().flatten().cloned().collect() };
    let (ua, ub) = (union(a), union(b));
    let names = own_names(&[ta, tb]);
    let own = |m: &str| names.contains(top_level(m));
    let third = |m: &str| !own(m) && !stdlib::is_stdlib(m);
    let added: Vec<&String> = ub.difference(&ua).collect();
    let removed: Vec<&String> = ua.difference(&ub).collect();

    // Every package either side imported at start-up.
    let packages: BTreeSet<&String> = a
        .package_ms
        .iter()
        .chain(&b.package_ms)
        .flat_map(|m| m.keys())
        .collect();
    let new_packages: Vec<String> = packages
        .iter()
        .filter(|p| !present(a, p) && !stdlib::is_stdlib(p))
        .map(|p| p.to_string())
        .collect();
    let new_own: Vec<String> = added
        .iter()
        .filter(|m| own(m) && !new_packages.iter().any(|p| p == **m))
        .map(|m| m.to_string())
        .collect();
    let wanted: Vec<String> = new_packages.iter().chain(&new_own).cloned().collect();
    let lines = importing_lines(tb, &wanted);
    let [forbidden_new, forbidden_gone] = forbidden_changes(a, b);
    ImportDiff {
        processes: a.at_ready.len().min(b.at_ready.len()),
        modules_a: median_usize(&a.at_ready.iter().map(BTreeSet::len).collect::<Vec<_>>()),
        modules_b: median_usize(&b.at_ready.iter().map(BTreeSet::len).collect::<Vec<_>>()),
        added_first_party: added
            .iter()
            .filter(|m| own(m))
            .map(|m| ModuleLine {
                module: m.to_string(),
                imported_at: line_of(&lines, m),
            })
            .collect(),
        removed_first_party: removed
            .iter()
            .filter(|m| own(m))
            .map(|m| m.to_string())
            .collect(),
        added_packages: by_package(added.iter().copied().filter(|m| third(m)).collect()),
        removed_packages: by_package(removed.iter().copied().filter(|m| third(m)).collect()),
        packages: package_times(a, b, packages, &own, &lines),
        forbidden_new,
        forbidden_gone,
        forbidden_kept: forbidden_modules(&a.violations)
            .intersection(&forbidden_modules(&b.violations))
            .cloned()
            .collect(),
    }
}

/// Modules counted by their top-level package, most modules first.
fn by_package(names: Vec<&String>) -> Vec<PackageCount> {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for n in names {
        *by.entry(top_level(n)).or_default() += 1;
    }
    let mut v: Vec<PackageCount> = by
        .into_iter()
        .map(|(p, n)| PackageCount {
            package: p.to_owned(),
            modules: n,
        })
        .collect();
    v.sort_by(|x, y| y.modules.cmp(&x.modules).then(x.package.cmp(&y.package)));
    v
}

/// Whether any process of a side imported package `p` at start-up.
fn present(s: &SideImports, p: &str) -> bool {
    s.package_ms.iter().any(|m| m.contains_key(p))
}

/// The line that brought module `m` into B's start-up, when it was
/// looked for and found.
pub(crate) fn line_of(lines: &BTreeMap<String, MergedViolation>, m: &str) -> Option<CallSite> {
    lines
        .get(m)
        .and_then(|v| v.first.origin.clone().or_else(|| v.first.importer.clone()))
}

/// Each package's start-up time on both sides and its paired change,
/// the largest change first (stdlib packages left out); `own` tells the
/// project's modules, `lines` where B imports the new ones.
fn package_times(
    a: &SideImports,
    b: &SideImports,
    packages: BTreeSet<&String>,
    own: &dyn Fn(&str) -> bool,
    lines: &BTreeMap<String, MergedViolation>,
) -> Vec<PackageTime> {
    let median_of = |s: &SideImports, p: &str| {
        present(s, p).then(|| {
            let v: Vec<f64> = s
                .package_ms
                .iter()
                .map(|m| m.get(p).copied().unwrap_or(0.0))
                .collect();
            phases::stats::median(&v).unwrap_or(0.0)
        })
    };
    let mut times: Vec<PackageTime> = packages
        .into_iter()
        .filter(|p| !stdlib::is_stdlib(p))
        .map(|p| {
            let n = a.package_ms.len().min(b.package_ms.len());
            let d: Vec<f64> = (0..n)
                .map(|i| {
                    b.package_ms[i].get(p).copied().unwrap_or(0.0)
                        - a.package_ms[i].get(p).copied().unwrap_or(0.0)
                })
                .collect();
            let line = lines.get(p.as_str());
            PackageTime {
                package: p.clone(),
                first_party: own(p),
                a_ms: median_of(a, p),
                b_ms: median_of(b, p),
                change: (n > 0)
                    .then(|| phases::stats::hodges_lehmann(&d, 0.95).ok())
                    .flatten(),
                imported_at: line_of(lines, p),
                chain: line.map(|v| v.first.chain.clone()).unwrap_or_default(),
            }
        })
        .collect();
    times.sort_by(|x, y| {
        let c = |p: &PackageTime| p.change.map_or(0.0, |s| s.estimate.abs());
        c(y).total_cmp(&c(x)).then(x.package.cmp(&y.package))
    });
    times
}

/// The forbidden modules of a side's violations.
fn forbidden_modules(v: &[MergedViolation]) -> BTreeSet<String> {
    v.iter().map(|x| x.first.module.clone()).collect()
}

/// The forbidden modules B imports and A did not, and those A imported
/// and B no longer does.
fn forbidden_changes(a: &SideImports, b: &SideImports) -> [Vec<ForbiddenChange>; 2] {
    let only = |x: &SideImports, y: &SideImports| {
        let theirs = forbidden_modules(&y.violations);
        x.violations
            .iter()
            .filter(|v| !theirs.contains(&v.first.module))
            .map(forbidden)
            .collect()
    };
    [only(b, a), only(a, b)]
}
