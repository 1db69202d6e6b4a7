//! Where start-up time went: the heaviest disjoint subtrees, the totals by
//! top-level package, the project's own slowest modules.

use serde::Serialize;

use crate::importtime::{ImportLog, Metric, NodeId};

use super::chain::import_chain_names;

/// One of the slowest imports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SlowImport {
    /// The module.
    pub module: String,
    /// Its cumulative time, microseconds.
    pub cumulative_us: i64,
    /// Its self time, microseconds.
    pub self_us: i64,
    /// From its top-level import down to it.
    pub chain: Vec<String>,
}

/// The `n` heaviest disjoint subtrees of the log's first session (the
/// worker's own interpreter): by cumulative time, skipping any import that
/// lies inside one already listed, so one deep chain does not fill the list.
pub fn slowest(log: &ImportLog, n: usize) -> Vec<SlowImport> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let mut picked: Vec<NodeId> = Vec::new();
    for id in log.top(log.entry_count(), Metric::Cumulative, session) {
        if picked.len() == n {
            break;
        }
        let mut up = log.parent(id);
        let mut inside = false;
        while let Some(p) = up {
            if picked.contains(&p) {
                inside = true;
                break;
            }
            up = log.parent(p);
        }
        if !inside {
            picked.push(id);
        }
    }
    picked.into_iter().map(|id| slow_import(log, id)).collect()
}

/// Start-up time by top-level package over the log's first session (the
/// worker's own interpreter): each package's self time summed over its
/// timed modules, with their count; the `n` largest first (ties by name).
/// This is where the time went: `torch` with its hundreds of modules, not
/// the worker's `main` that imported it.
pub fn by_package(log: &ImportLog, n: usize) -> Vec<crate::importtime::PackageTotal> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let mut totals = log.package_totals(session);
    totals.sort_by(|a, b| {
        b.self_us
            .cmp(&a.self_us)
            .then_with(|| a.package.cmp(&b.package))
    });
    totals.truncate(n);
    totals
}

/// The `n` modules of the project's own code (their top-level name in
/// `first_party`) with the largest self time in the log's first session,
/// largest first.
pub fn first_party_modules(log: &ImportLog, first_party: &[String], n: usize) -> Vec<SlowImport> {
    let session = (!log.sessions().is_empty()).then_some(0);
    let ids = log
        .node_range(session)
        .map(NodeId)
        .filter(|&id| in_project(log.name(id), first_party));
    log.top_among(n, Metric::SelfTime, ids)
        .into_iter()
        .map(|id| slow_import(log, id))
        .collect()
}

/// One module of the importtime tree as a row of a "slowest" list.
fn slow_import(log: &ImportLog, id: NodeId) -> SlowImport {
    SlowImport {
        module: log.name(id).to_owned(),
        cumulative_us: log.node(id).cumulative_us,
        self_us: log.node(id).self_us,
        chain: import_chain_names(log, id).0,
    }
}

/// One import statement of the project's own code that start-up pays for:
/// a module imported while a first-party module's body ran, priced by the
/// cumulative time of its subtree over several processes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostlyImport {
    /// The first-party module whose body imports it.
    pub importer: String,
    /// The module imported.
    pub module: String,
    /// Its subtree's cumulative time, median over the processes that
    /// imported it, ms.
    pub median_ms: f64,
    /// The least of those, ms.
    pub min_ms: f64,
    /// The most of those, ms.
    pub max_ms: f64,
    /// In how many processes it was imported (not found already loaded).
    pub processes: usize,
    /// Of how many.
    pub of: usize,
}

/// The least cost an import must have at ready to be priced when the
/// caller gives none: 5% of the ready time or 20 ms, whichever is larger.
pub fn default_min_ms(ready_ms: f64) -> f64 {
    (0.05 * ready_ms).max(20.0)
}

/// Every module a first-party module (its top-level name in
/// `first_party`) imports in the first session of each of `logs` (one per
/// process), with the cumulative time of its subtree as its cost: the
/// median over the processes that imported it, with its range; those
/// whose median is at least `min_ms`, costliest first (ties by importer,
/// then module). An import nested in another costly one is listed too:
/// each is a statement that could be deferred on its own.
pub fn costly_imports(
    logs: &[&ImportLog],
    first_party: &[String],
    min_ms: f64,
) -> Vec<CostlyImport> {
    price(logs, min_ms, |log, id| {
        let importer = log.name(log.parent(id)?);
        in_project(importer, first_party).then(|| importer.to_owned())
    })
}

/// The importer [`root_imports`] names: the main module (a script, or a
/// package's `__main__.py`), which runs without an import of its own.
pub const MAIN: &str = "__main__";

/// Imports made while no module was being imported (the roots of the
/// importtime tree), the project's own modules among them, priced as
/// [`costly_imports`] prices them, each with [`MAIN`] as its importer.
///
/// These are candidates, not findings: the main module's imports (and
/// those of functions it calls at start-up) are roots, whether of the
/// project's modules (`python -m app.worker` importing `app.models`) or
/// of others, but so are the interpreter's own (`encodings`, `site` and
/// what `.pth` files import) and runpy's import of the main module's own
/// package. Only the recorder's evidence, a first-party line that made the
/// import, tells the project's apart.
pub fn root_imports(logs: &[&ImportLog], min_ms: f64) -> Vec<CostlyImport> {
    price(logs, min_ms, |log, id| {
        log.parent(id).is_none().then(|| MAIN.to_owned())
    })
}

/// Whether `module`'s top-level package is one of `first_party`.
fn in_project(module: &str, first_party: &[String]) -> bool {
    let top = crate::importtime::top_level(module);
    first_party.iter().any(|p| p == top)
}

/// Every timed (not cached) import of the first session of each log that
/// `importer_of` names an importer for, priced by its subtree's cumulative
/// time over the processes: the median, with its range; those at least
/// `min_ms`, costliest first (ties by importer, then module).
fn price(
    logs: &[&ImportLog],
    min_ms: f64,
    importer_of: impl Fn(&ImportLog, NodeId) -> Option<String>,
) -> Vec<CostlyImport> {
    let mut seen: std::collections::BTreeMap<(String, String), Vec<f64>> = Default::default();
    for log in logs {
        let session = (!log.sessions().is_empty()).then_some(0);
        let mut in_this: std::collections::BTreeSet<(String, String)> = Default::default();
        for id in log.node_range(session).map(NodeId) {
            let node = log.node(id);
            if node.is_cached() {
                continue;
            }
            let Some(importer) = importer_of(log, id) else {
                continue;
            };
            let key = (importer, log.name(id).to_owned());
            if in_this.insert(key.clone()) {
                seen.entry(key)
                    .or_default()
                    .push(node.cumulative_us as f64 / 1000.0);
            }
        }
    }
    let mut out: Vec<CostlyImport> = seen
        .into_iter()
        .filter_map(|((importer, module), ms)| {
            let median = phases::stats::median(&ms)?;
            (median >= min_ms).then(|| CostlyImport {
                importer,
                module,
                median_ms: median,
                min_ms: ms.iter().copied().fold(f64::INFINITY, f64::min),
                max_ms: ms.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                processes: ms.len(),
                of: logs.len(),
            })
        })
        .collect();
    out.sort_by(CostlyImport::costliest_first);
    out
}

impl CostlyImport {
    /// The order every list of costly imports is in: costliest median
    /// first, ties by importer, then module.
    pub fn costliest_first(a: &CostlyImport, b: &CostlyImport) -> std::cmp::Ordering {
        b.median_ms
            .total_cmp(&a.median_ms)
            .then_with(|| a.importer.cmp(&b.importer))
            .then_with(|| a.module.cmp(&b.module))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An importtime log of a worker `app` whose body imports three
    /// modules of these costs (us), then the cached `json`.
    fn log(plugin_us: i64, handler_us: i64, tiny_us: i64) -> ImportLog {
        let total = plugin_us + handler_us + tiny_us + 1000;
        crate::importtime::parse_owned(
            format!(
                "import time: self [us] | cumulative | imported package\n\
                 import time:       300 |        300 | json\n\
                 import time: {plugin_us:>9} | {plugin_us:>10} |   app.plugins\n\
                 import time: {:>9} | {handler_us:>10} |     heavyfmt.core\n\
                 import time: {:>9} | {handler_us:>10} |   heavyfmt\n\
                 import time: {tiny_us:>9} | {tiny_us:>10} |   tinydep\n\
                 import time:    cached |     cached |   json\n\
                 import time:      1000 | {total:>10} | app\n",
                handler_us / 2,
                handler_us - handler_us / 2,
            )
            .into_bytes(),
        )
    }

    /// The roots of the tree outside the project (what the main module, or
    /// the interpreter's start-up, imported) are the candidates, with the
    /// main module as their importer, the project's own package too (the
    /// recorder's evidence tells runpy's import of it from the main
    /// module's); the cheap roots are not.
    #[test]
    fn every_costly_root_is_a_main_module_candidate() {
        let one = |heavy_us: i64| {
            crate::importtime::parse_owned(
                format!(
                    "import time: self [us] | cumulative | imported package\n\
                     import time:      3000 |       3000 | encodings\n\
                     import time: {heavy_us:>9} | {heavy_us:>10} | heavylib\n\
                     import time:     40000 |      40000 |   app.plugins\n\
                     import time:      1000 |      41000 | app\n\
                     import time:    cached |     cached | heavylib\n"
                )
                .into_bytes(),
            )
        };
        let logs = [one(70_000), one(90_000), one(80_000)];
        let refs: Vec<&ImportLog> = logs.iter().collect();
        let roots = root_imports(&refs, 20.0);
        assert_eq!(roots.len(), 2, "{roots:?}");
        assert_eq!(roots[1].module, "app", "{roots:?}");
        assert_eq!(
            (roots[0].importer.as_str(), roots[0].module.as_str()),
            (MAIN, "heavylib")
        );
        assert_eq!(
            (roots[0].median_ms, roots[0].min_ms, roots[0].max_ms),
            (80.0, 70.0, 90.0)
        );
        assert_eq!((roots[0].processes, roots[0].of), (3, 3));
        // The body imports are still the first-party importers' own.
        let body = costly_imports(&refs, &["app".to_owned()], 20.0);
        assert_eq!(body.len(), 1);
        assert_eq!(
            (body[0].importer.as_str(), body[0].module.as_str()),
            ("app", "app.plugins")
        );
    }

    #[test]
    fn first_party_imports_are_priced_over_processes_above_the_threshold() {
        let logs = [
            log(90_000, 140_000, 5_000),
            log(110_000, 150_000, 6_000),
            log(100_000, 160_000, 4_000),
        ];
        let refs: Vec<&ImportLog> = logs.iter().collect();
        let priced = costly_imports(&refs, &["app".to_owned()], 20.0);
        let rows: Vec<(&str, &str, f64, f64, f64)> = priced
            .iter()
            .map(|c| {
                (
                    c.importer.as_str(),
                    c.module.as_str(),
                    c.median_ms,
                    c.min_ms,
                    c.max_ms,
                )
            })
            .collect();
        // heavyfmt.core is imported by heavyfmt (not first party), json by
        // no one of ours (a root), tinydep is below the threshold, and the
        // cached json costs nothing.
        assert_eq!(
            rows,
            [
                ("app", "heavyfmt", 150.0, 140.0, 160.0),
                ("app", "app.plugins", 100.0, 90.0, 110.0),
            ]
        );
        assert!(priced.iter().all(|c| c.processes == 3 && c.of == 3));
        assert_eq!(costly_imports(&refs, &["app".to_owned()], 4.5).len(), 3);
        assert!(costly_imports(&refs, &["other".to_owned()], 0.0).is_empty());
    }

    #[test]
    fn the_default_threshold_is_five_percent_of_ready_or_20_ms() {
        assert_eq!(default_min_ms(100.0), 20.0);
        assert_eq!(default_min_ms(1000.0), 50.0);
    }
}
