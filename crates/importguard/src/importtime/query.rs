//! Queries on a parsed log: find by module or package, the chain from a
//! root, totals per top-level package, the top N.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use super::tree::{ImportLog, NONE, NodeId, NodeKind, Slot};

/// Which time a ranking uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Self time.
    SelfTime,
    /// Cumulative time.
    Cumulative,
}

/// Times of one top-level package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackageTotal {
    /// The top-level name (`email` for `email.mime.text`).
    pub package: String,
    /// Number of timed modules of the package.
    pub modules: u32,
    /// Sum of the self times of its modules.
    pub self_us: i64,
    /// Sum of the cumulative times of its topmost modules (those whose
    /// parent is not in the package), so nothing is counted twice.
    pub cumulative_us: i64,
}

/// Whether `name` is the module `package` or one of its submodules
/// (`torch` matches `torch` and `torch.nn`, not `torchvision`).
pub fn in_package(name: &str, package: &str) -> bool {
    name.strip_prefix(package)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Whether `package` is one of the parent packages of `name` (`a` and
/// `a.b` of `a.b.c`; not `a.b.c` itself).
pub fn is_parent_package(package: &str, name: &str) -> bool {
    name.len() > package.len() && in_package(name, package)
}

/// One link of an import chain ([`ImportLog::import_chain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainLink {
    /// The module's line.
    pub node: NodeId,
    /// When the module was imported as a parent package of the dotted name
    /// its importer asked for (`import a.b.c` imports `a` and `a.b` first),
    /// the line of that request.
    pub parent_of: Option<NodeId>,
}

/// The top-level package of a module name.
pub fn top_level(name: &str) -> &str {
    name.split_once('.').map_or(name, |(top, _)| top)
}

impl ImportLog {
    /// The arena range of one session's nodes (all nodes with `None`; empty
    /// for a session that does not exist).
    pub fn node_range(&self, session: Option<usize>) -> std::ops::Range<u32> {
        match session.and_then(|i| self.sessions.get(i)) {
            Some(s) => s.first_node..s.end_node,
            None if session.is_some() => 0..0,
            None => 0..self.nodes.len() as u32,
        }
    }

    /// Nodes (timed or cached) whose name is exactly `module`, in line order.
    pub fn find_module<'a>(&'a self, module: &'a str) -> impl Iterator<Item = NodeId> + 'a {
        (0..self.nodes.len() as u32)
            .map(NodeId)
            .filter(move |&id| self.name(id) == module)
    }

    /// Nodes in `package` (the package itself or a submodule), in line order.
    pub fn find_package<'a>(&'a self, package: &'a str) -> impl Iterator<Item = NodeId> + 'a {
        (0..self.nodes.len() as u32)
            .map(NodeId)
            .filter(move |&id| in_package(self.name(id), package))
    }

    /// The topmost nodes of `package`: matches with no matching ancestor,
    /// in line order. Linear in the log's size at any nesting depth.
    pub fn find_package_roots(&self, package: &str) -> Vec<NodeId> {
        let n = self.nodes.len();
        let matches: Vec<bool> = (0..n as u32)
            .map(|i| in_package(self.name(NodeId(i)), package))
            .collect();
        // A parent comes after its children in the arena, so walking down
        // from the end sees every ancestor before its descendants.
        let mut under_match = vec![false; n];
        for i in (0..n).rev() {
            if let Some(p) = self.parent(NodeId(i as u32)) {
                under_match[i] = matches[p.index()] || under_match[p.index()];
            }
        }
        (0..n)
            .filter(|&i| matches[i] && !under_match[i])
            .map(|i| NodeId(i as u32))
            .collect()
    }

    /// Who imported whom, from the node's root down to the node (both
    /// included): the tree's ancestors less the lines that are requests, not
    /// modules that ran there. importtime files the parent packages a dotted
    /// name needs under that name's own line, before its body runs (`import
    /// a.b.c` gives `a.b.c` > `a.b` > `a`), and a module that one of them
    /// imports on the way (`a.b`'s `__init__` doing `from . import c`) has
    /// its own line below (`a.b.c` > `a.b` > `a.b.c`). So a line whose next
    /// one on the way down is one of its parent packages, or whose name comes
    /// again further down, is the request: it is left out, and the parent
    /// package it stood for is linked to the request's importer, with the
    /// name asked for ([`ChainLink::parent_of`]). A module appears at most
    /// once.
    pub fn import_chain(&self, id: NodeId) -> Vec<ChainLink> {
        let path = self.chain(id);
        let mut out = Vec::with_capacity(path.len());
        let mut request = None;
        for (i, &node) in path.iter().enumerate() {
            let name = self.name(node);
            let below = &path[i + 1..];
            let parent_next = below
                .first()
                .is_some_and(|&n| is_parent_package(self.name(n), name));
            if parent_next {
                request = request.or(Some(node));
                continue;
            }
            if below.iter().any(|&n| self.name(n) == name) {
                continue;
            }
            out.push(ChainLink {
                node,
                parent_of: request.take(),
            });
        }
        out
    }

    /// The tree's ancestors of the node, from its root down to the node
    /// (both included): how importtime nested the lines, which is not always
    /// who imported whom ([`ImportLog::import_chain`] is).
    pub fn chain(&self, id: NodeId) -> Vec<NodeId> {
        let mut chain = vec![id];
        let mut p = self.parent(id);
        while let Some(q) = p {
            chain.push(q);
            p = self.parent(q);
        }
        chain.reverse();
        chain
    }

    /// The import chain ([`ImportLog::import_chain`]) as names joined with
    /// ` > `.
    pub fn chain_names(&self, id: NodeId) -> String {
        let chain = self.import_chain(id);
        let names: Vec<&str> = chain.iter().map(|c| self.name(c.node)).collect();
        names.join(" > ")
    }

    /// Totals per top-level package over one session (or all with `None`),
    /// largest cumulative first, then by name. Cached nodes do not count.
    pub fn package_totals(&self, session: Option<usize>) -> Vec<PackageTotal> {
        self.package_totals_among(self.node_range(session).map(NodeId))
    }

    /// Totals per top-level package over the given nodes (see
    /// [`ImportLog::package_totals`]); a node's cumulative time counts when
    /// its parent is not in the same package.
    pub fn package_totals_among(&self, ids: impl IntoIterator<Item = NodeId>) -> Vec<PackageTotal> {
        let mut totals = Totals::new(self);
        // `for_each`, not `for`: a chained iterator folds each part in its
        // own inlined loop, where `next` is a call per node.
        ids.into_iter().for_each(|id| totals.add(self, id));
        totals.finish()
    }

    /// What a top table shows, in one pass over the arena: the `n` timed
    /// nodes among `ids` with the largest self time, those with the largest
    /// cumulative time (as [`ImportLog::top_among`] gives them), and the
    /// totals per package (as [`ImportLog::package_totals_among`]).
    pub fn top_and_totals_among(
        &self,
        n: usize,
        ids: impl IntoIterator<Item = NodeId>,
    ) -> (Vec<NodeId>, Vec<NodeId>, Vec<PackageTotal>) {
        let (mut by_self, mut by_cum) = (TopN::new(n), TopN::new(n));
        let mut totals = Totals::new(self);
        ids.into_iter().for_each(|NodeId(i)| {
            let slot = self.nodes[i as usize];
            if slot.kind() == NodeKind::Entry {
                let self_us = slot.self_us(i, &self.wide);
                let cumulative_us = slot.cumulative_us(i, &self.wide);
                by_self.add(self_us, i);
                by_cum.add(cumulative_us, i);
                totals.count(self, i, slot, (self_us, cumulative_us));
            }
        });
        (by_self.finish(), by_cum.finish(), totals.finish())
    }

    /// The `n` timed nodes with the largest `metric` in one session (or all
    /// with `None`), largest first; ties keep line order.
    pub fn top(&self, n: usize, metric: Metric, session: Option<usize>) -> Vec<NodeId> {
        self.top_among(n, metric, self.node_range(session).map(NodeId))
    }

    /// The `n` timed nodes among `ids` with the largest `metric`, largest
    /// first; ties keep line order.
    pub fn top_among(
        &self,
        n: usize,
        metric: Metric,
        ids: impl IntoIterator<Item = NodeId>,
    ) -> Vec<NodeId> {
        let mut top = TopN::new(n);
        // `for_each`: see `package_totals_among`.
        ids.into_iter().for_each(|NodeId(i)| {
            let node = self.node(NodeId(i));
            if node.kind == NodeKind::Entry {
                top.add(
                    match metric {
                        Metric::SelfTime => node.self_us,
                        Metric::Cumulative => node.cumulative_us,
                    },
                    i,
                );
            }
        });
        top.finish()
    }
}

/// The totals per package, filled one node at a time.
struct Totals(Vec<PackageTotal>);

impl Totals {
    fn new(log: &ImportLog) -> Totals {
        Totals(
            log.packages
                .iter()
                .map(|name| PackageTotal {
                    package: name.clone(),
                    modules: 0,
                    self_us: 0,
                    cumulative_us: 0,
                })
                .collect(),
        )
    }

    /// Count one node (a cached one counts nothing).
    #[inline]
    fn add(&mut self, log: &ImportLog, NodeId(id): NodeId) {
        let slot = log.nodes[id as usize];
        if slot.kind() == NodeKind::Entry {
            let times = (
                slot.self_us(id, &log.wide),
                slot.cumulative_us(id, &log.wide),
            );
            self.count(log, id, slot, times);
        }
    }

    /// Count timed node `id`, whose slot and (self, cumulative) times are
    /// given.
    #[inline]
    fn count(
        &mut self,
        log: &ImportLog,
        id: u32,
        slot: Slot,
        (self_us, cumulative_us): (i64, i64),
    ) {
        let p = slot.package(id, &log.wide);
        let parent = slot.parent;
        let parent_same =
            parent != NONE && log.nodes[parent as usize].package(parent, &log.wide) == p;
        let t = &mut self.0[p as usize];
        t.modules += 1;
        t.self_us = t.self_us.saturating_add(self_us);
        if !parent_same {
            t.cumulative_us = t.cumulative_us.saturating_add(cumulative_us);
        }
    }

    /// The packages with a module, largest cumulative first, then by name.
    fn finish(mut self) -> Vec<PackageTotal> {
        self.0.retain(|t| t.modules > 0);
        self.0.sort_by(|a, b| {
            b.cumulative_us
                .cmp(&a.cumulative_us)
                .then_with(|| a.package.cmp(&b.package))
        });
        self.0
    }
}

/// The `n` largest values seen, with their nodes; ties keep line order.
struct TopN {
    n: usize,
    /// A min-heap of the best n so far: (value, Reverse(index)) so that
    /// among equal values the later line is dropped first.
    heap: BinaryHeap<Reverse<(i64, Reverse<u32>)>>,
}

impl TopN {
    fn new(n: usize) -> TopN {
        TopN {
            n,
            heap: BinaryHeap::with_capacity(n + 1),
        }
    }

    #[inline]
    fn add(&mut self, value: i64, node: u32) {
        let item = Reverse((value, Reverse(node)));
        if self.heap.len() < self.n {
            self.heap.push(item);
        } else if self.heap.peek().is_some_and(|min| item < *min) {
            self.heap.pop();
            self.heap.push(item);
        }
    }

    /// The nodes, largest first.
    fn finish(self) -> Vec<NodeId> {
        let mut best: Vec<(i64, Reverse<u32>)> =
            self.heap.into_iter().map(|Reverse(x)| x).collect();
        best.sort_by(|a, b| b.cmp(a));
        best.into_iter().map(|(_, Reverse(i))| NodeId(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    const LOG: &str = "import time: self [us] | cumulative | imported package
import time:        10 |         10 |     torch._C
import time:        20 |         30 |   torch.nn
import time:         5 |         35 | torch
import time:         7 |          7 |   torchvision.io
import time:         3 |         10 | torchvision
import time:        40 |         40 | json
";

    fn names(log: &ImportLog, ids: &[NodeId]) -> Vec<String> {
        ids.iter().map(|&id| log.name(id).to_owned()).collect()
    }

    /// CPython's lines for `from svc.types import W` (svc/types.py imports
    /// svc.models.heavy, whose package re-exports it) and `import
    /// pkga.sub.leaf` (pkga.sub imports torch): the requests are left out.
    #[test]
    fn the_import_chain_leaves_out_requests_for_parent_packages() {
        let log = parse(
            b"import time: self [us] | cumulative | imported package
import time:       280 |        280 |   svc
import time:       153 |        153 |         torch
import time:      1248 |       1401 |       svc.models.heavy
import time:      5630 |       7030 |     svc.models
import time:        38 |       7068 |   svc.models.heavy
import time:       323 |       7670 | svc.types
import time:       266 |        266 |     pkga
import time:       124 |        124 |     torch
import time:       296 |        685 |   pkga.sub
import time:       127 |        812 | pkga.sub.leaf
",
        );
        let of = |i: usize| {
            let chain = log.import_chain(log.find_module("torch").nth(i).unwrap());
            chain
                .iter()
                .map(|c| {
                    let name = log.name(c.node).to_owned();
                    match c.parent_of {
                        Some(r) => format!("{name} (for {})", log.name(r)),
                        None => name,
                    }
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            of(0),
            [
                "svc.types",
                "svc.models (for svc.models.heavy)",
                "svc.models.heavy",
                "torch"
            ]
        );
        assert_eq!(of(1), ["pkga.sub (for pkga.sub.leaf)", "torch"]);
        // The tree's own nesting is kept by `chain`.
        assert_eq!(log.chain(log.find_module("torch").next().unwrap()).len(), 5);
        assert!(is_parent_package("a", "a.b") && !is_parent_package("a.b", "a.b"));
        assert!(!is_parent_package("a", "ab.c"));
    }

    #[test]
    fn package_prefix_is_dotted() {
        let log = parse(LOG.as_bytes());
        let found: Vec<NodeId> = log.find_package("torch").collect();
        assert_eq!(names(&log, &found), ["torch._C", "torch.nn", "torch"]);
        assert_eq!(names(&log, &log.find_package_roots("torch")), ["torch"]);
        let exact: Vec<NodeId> = log.find_module("torchvision").collect();
        assert_eq!(names(&log, &exact), ["torchvision"]);
        assert!(in_package("torch.nn", "torch"));
        assert!(!in_package("torchvision", "torch"));
    }

    #[test]
    fn chain_runs_from_root() {
        let log = parse(LOG.as_bytes());
        let c = log.find_module("torch._C").next().unwrap();
        assert_eq!(log.chain_names(c), "torch > torch.nn > torch._C");
        let json = serde_json::to_value(log.view(c)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "torch._C", "self_us": 10, "cumulative_us": 10, "line": 2, "depth": 2, "kind": "entry", "session": 0})
        );
    }

    #[test]
    fn totals_do_not_double_count() {
        let log = parse(LOG.as_bytes());
        let t = log.package_totals(None);
        assert_eq!(
            t[0],
            PackageTotal {
                package: "json".into(),
                modules: 1,
                self_us: 40,
                cumulative_us: 40
            }
        );
        assert_eq!(
            t[1],
            PackageTotal {
                package: "torch".into(),
                modules: 3,
                self_us: 35,
                cumulative_us: 35
            }
        );
        assert_eq!(
            t[2],
            PackageTotal {
                package: "torchvision".into(),
                modules: 2,
                self_us: 10,
                cumulative_us: 10
            }
        );
    }

    #[test]
    fn top_by_metric() {
        let log = parse(LOG.as_bytes());
        assert_eq!(
            names(&log, &log.top(2, Metric::SelfTime, None)),
            ["json", "torch.nn"]
        );
        assert_eq!(
            names(&log, &log.top(3, Metric::Cumulative, Some(0))),
            ["json", "torch", "torch.nn"]
        );
        assert!(log.top(3, Metric::Cumulative, Some(5)).is_empty());
    }
}
