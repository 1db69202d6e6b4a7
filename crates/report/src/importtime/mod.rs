//! Renderings of a parsed `-X importtime` log ([`importguard::importtime`]):
//! a text tree, a top table, a JSON tree, collapsed stacks, a flame graph
//! SVG, speedscope JSON and a deterministic snapshot text.
//!
//! Every renderer takes the log and a [`View`] (which subtrees, which
//! depth, which minimum time) and writes to any `io::Write`. Traversals
//! are iterative, so a pathological log nests as deep as it likes.

mod json;
mod snapshot;
mod stacks;
mod text;

use importguard::importtime::{ImportLog, NodeId, NodeKind};

pub use json::json_tree;
pub use snapshot::{SnapshotOptions, SnapshotTimes, snapshot};
pub use stacks::{collapsed, flamegraph_svg, speedscope};
pub use text::{top_table, tree_text};

/// What part of a log to render.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The subtrees to render, in order.
    pub roots: Vec<NodeId>,
    /// The session selected, or `None` for all.
    pub session: Option<usize>,
    /// Whether `roots` is a focus (subtrees of a package) rather than whole sessions.
    pub focused: bool,
    /// Hide nodes whose cumulative time is below this (microseconds, 0 keeps all).
    pub min_us: i64,
    /// Levels shown below each root (0 shows the roots only), `None` for all.
    pub max_depth: Option<usize>,
}

impl View {
    /// The roots of one session (or all with `None`), or with `focus`, the
    /// topmost nodes of that package within them.
    pub fn new(log: &ImportLog, session: Option<usize>, focus: Option<&str>) -> View {
        let range = log.node_range(session);
        let roots = match focus {
            Some(pkg) => log
                .find_package_roots(pkg)
                .into_iter()
                .filter(|id| range.contains(&id.0))
                .collect(),
            None => match session {
                Some(i) => log
                    .sessions()
                    .get(i)
                    .map(|s| s.roots.clone())
                    .unwrap_or_default(),
                None => log.all_roots(),
            },
        };
        View {
            roots,
            session,
            focused: focus.is_some(),
            min_us: 0,
            max_depth: None,
        }
    }

    /// Set the minimum cumulative time in milliseconds.
    pub fn with_min_ms(mut self, min_ms: f64) -> View {
        self.min_us = (min_ms * 1000.0).round() as i64;
        self
    }

    /// Set the depth limit.
    pub fn with_max_depth(mut self, depth: Option<usize>) -> View {
        self.max_depth = depth;
        self
    }

    /// Whether a node passes the time filter.
    pub(crate) fn keeps(&self, log: &ImportLog, id: NodeId) -> bool {
        self.min_us <= 0 || log.node(id).cumulative_us >= self.min_us
    }

    /// Whether children of a node at `level` are shown.
    pub(crate) fn descends(&self, level: usize) -> bool {
        self.max_depth.is_none_or(|d| level < d)
    }

    /// Every node in the view's subtrees (ignoring depth and time filters),
    /// in arena or depth-first order.
    pub(crate) fn all_nodes<'a>(&'a self, log: &'a ImportLog) -> impl Iterator<Item = NodeId> + 'a {
        // One of the two parts is empty; no boxed iterator, so a whole
        // session's range is walked by an inlined loop.
        let (range, roots) = match self.focused {
            true => (0..0, &self.roots[..]),
            false => (log.node_range(self.session), &[][..]),
        };
        range
            .map(NodeId)
            .chain(roots.iter().flat_map(move |&r| log.descendants(r)))
    }

    /// Timed and cached nodes in the view's subtrees (ignoring depth and
    /// time filters): counted by the parser for whole sessions.
    pub(crate) fn counts(&self, log: &ImportLog) -> (usize, usize) {
        if self.focused {
            let entries = self
                .all_nodes(log)
                .filter(|&id| log.node(id).kind == NodeKind::Entry)
                .count();
            return (entries, self.all_nodes(log).count() - entries);
        }
        let sessions = match self.session {
            Some(i) => log.sessions().get(i..=i).unwrap_or_default(),
            None => log.sessions(),
        };
        sessions.iter().fold((0, 0), |(e, c), s| {
            (e + s.entries as usize, c + s.cached as usize)
        })
    }

    /// Sum of the roots' cumulative times: the 100% of shares.
    pub fn total_us(&self, log: &ImportLog) -> i64 {
        self.roots
            .iter()
            .filter(|&&r| log.node(r).kind == NodeKind::Entry)
            .map(|&r| log.node(r).cumulative_us)
            .fold(0i64, i64::saturating_add)
    }
}

/// Microseconds as milliseconds with three decimals.
pub(crate) fn ms(us: i64) -> String {
    let sign = if us < 0 { "-" } else { "" };
    let a = us.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A share of the total as a percentage, or `-` when there is no total.
pub(crate) fn share(us: i64, total: i64) -> String {
    if total <= 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", us as f64 * 100.0 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_formats_signs_and_fractions() {
        assert_eq!(ms(0), "0.000");
        assert_eq!(ms(1234), "1.234");
        assert_eq!(ms(-57927), "-57.927");
        assert_eq!(share(5, 10), "50.0%");
        assert_eq!(share(5, 0), "-");
    }
}
