//! The deterministic snapshot text: the same import structure gives the
//! same text on any machine and Python version.

use std::io::{self, BufWriter, Write};

use importguard::importtime::stdlib::is_stdlib;
use importguard::importtime::top_level;
use importguard::importtime::{ImportLog, NodeId, NodeKind};

use super::View;

/// Names CPython imports while it starts, before `site` (any version 3.7+).
const STARTUP: &[&str] = &[
    "_abc",
    "_bootlocale",
    "_codecs",
    "_collections_abc",
    "_distutils_hack",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_imp",
    "_io",
    "_locale",
    "_signal",
    "_sitebuiltins",
    "_stat",
    "_thread",
    "_warnings",
    "_weakref",
    "abc",
    "builtins",
    "codecs",
    "encodings",
    "errno",
    "genericpath",
    "io",
    "marshal",
    "nt",
    "ntpath",
    "os",
    "posix",
    "posixpath",
    "site",
    "sitecustomize",
    "stat",
    "sys",
    "time",
    "usercustomize",
    "winreg",
    "zipimport",
];

/// How the snapshot shows times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SnapshotTimes {
    /// No times at all.
    #[default]
    Redacted,
    /// Cumulative time in coarse decade buckets (`<1ms`, `1-10ms`, ...).
    Bucketed,
}

/// What the snapshot collapses.
#[derive(Debug, Clone)]
pub struct SnapshotOptions {
    /// Top-level names of first-party packages: always shown in full.
    pub first_party: Vec<String>,
    /// Collapse the interpreter start-up block (up to `site`) to one line.
    pub collapse_startup: bool,
    /// Collapse standard-library subtrees to one line each.
    pub collapse_stdlib: bool,
    /// Collapse third-party subtrees to one line each.
    pub collapse_third_party: bool,
    /// Show cached lines (`-X importtime=2`), whose placement can be ambiguous.
    pub show_cached: bool,
    /// How times are shown.
    pub times: SnapshotTimes,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            first_party: Vec::new(),
            collapse_startup: true,
            collapse_stdlib: true,
            collapse_third_party: true,
            show_cached: false,
            times: SnapshotTimes::Redacted,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    FirstParty,
    Stdlib,
    ThirdParty,
}

fn bucket(us: i64) -> &'static str {
    match us {
        i64::MIN..1_000 => "<1ms",
        1_000..10_000 => "1-10ms",
        10_000..100_000 => "10-100ms",
        100_000..1_000_000 => "100ms-1s",
        _ => ">=1s",
    }
}

/// The snapshot text of the view (its depth limit applies; the time filter
/// does not, since it would make the text depend on the machine).
pub fn snapshot(
    log: &ImportLog,
    view: &View,
    opts: &SnapshotOptions,
    w: &mut dyn Write,
) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    write_snapshot(log, view, opts, &mut w)?;
    w.flush()
}

fn write_snapshot(
    log: &ImportLog,
    view: &View,
    opts: &SnapshotOptions,
    w: &mut BufWriter<&mut dyn Write>,
) -> io::Result<()> {
    let class = |id: NodeId| {
        let name = log.name(id);
        if opts.first_party.iter().any(|p| p == top_level(name)) {
            Class::FirstParty
        } else if is_stdlib(name) {
            Class::Stdlib
        } else {
            Class::ThirdParty
        }
    };
    // Whether each node's subtree holds a first-party module: children come
    // before their parent in the arena, so one forward pass propagates it.
    let mut has_fp = vec![false; log.nodes().len()];
    for i in 0..log.nodes().len() {
        let id = NodeId(i as u32);
        if class(id) == Class::FirstParty {
            has_fp[i] = true;
        }
        if has_fp[i]
            && let Some(p) = log.parent(id)
        {
            has_fp[p.index()] = true;
        }
    }
    let collapses = |id: NodeId| {
        !has_fp[id.index()]
            && match class(id) {
                Class::FirstParty => false,
                Class::Stdlib => opts.collapse_stdlib,
                Class::ThirdParty => opts.collapse_third_party,
            }
    };
    let visible = |id: NodeId| opts.show_cached || log.node(id).kind == NodeKind::Entry;

    let mut current = usize::MAX;
    let mut i = 0;
    let roots = &view.roots;
    let mut stack: Vec<(NodeId, usize)> = Vec::new();
    while i < roots.len() {
        let session = log.session_of(roots[i]);
        if session != current {
            current = session;
            writeln!(w, "session {session}")?;
            // The start-up block: the session's leading roots up to `site`,
            // or its leading start-up names when there is no `site` root.
            if opts.collapse_startup && !view.focused {
                let rest = &roots[i..];
                let in_session = rest
                    .iter()
                    .take_while(|&&r| log.session_of(r) == session)
                    .count();
                let rest = &rest[..in_session];
                let end = match rest.iter().position(|&r| log.name(r) == "site") {
                    Some(p) => p + 1,
                    None => rest
                        .iter()
                        .take_while(|&&r| STARTUP.contains(&top_level(log.name(r))))
                        .count(),
                };
                if end > 0 && !rest[..end].iter().any(|r| has_fp[r.index()]) {
                    writeln!(w, "  [interpreter start-up]")?;
                    i += end;
                    continue;
                }
            }
        }
        let root = roots[i];
        i += 1;
        if !visible(root) {
            continue;
        }
        stack.push((root, 0));
        while let Some((id, level)) = stack.pop() {
            let n = log.node(id);
            let mut line = format!("{}{}", "  ".repeat(level + 1), log.name(id));
            match n.kind {
                NodeKind::Entry => {}
                NodeKind::Cached => line.push_str(" (cached)"),
                NodeKind::CachedAmbiguous => line.push_str(" (cached, depth ambiguous)"),
            }
            // A collapsed subtree and a leaf look alike: which stdlib modules
            // a module pulls in differs between Python versions.
            let collapsed = n.kind == NodeKind::Entry && collapses(id);
            match class(id) {
                Class::FirstParty => {}
                Class::Stdlib => line.push_str(" [stdlib]"),
                Class::ThirdParty => line.push_str(" [third-party]"),
            }
            if opts.times == SnapshotTimes::Bucketed && n.kind == NodeKind::Entry {
                line.push_str("  ");
                line.push_str(bucket(n.cumulative_us));
            }
            writeln!(w, "{line}")?;
            if !collapsed && view.descends(level) {
                let mark = stack.len();
                stack.extend(
                    log.children(id)
                        .filter(|&c| visible(c))
                        .map(|c| (c, level + 1)),
                );
                stack[mark..].reverse();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_decades() {
        assert_eq!(bucket(-5), "<1ms");
        assert_eq!(bucket(999), "<1ms");
        assert_eq!(bucket(1000), "1-10ms");
        assert_eq!(bucket(250_000), "100ms-1s");
        assert_eq!(bucket(5_000_000), ">=1s");
    }
}
