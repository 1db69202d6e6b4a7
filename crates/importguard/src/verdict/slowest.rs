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
    let ids = log.node_range(session).map(NodeId).filter(|&id| {
        let top = crate::importtime::top_level(log.name(id));
        first_party.iter().any(|p| p == top)
    });
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
