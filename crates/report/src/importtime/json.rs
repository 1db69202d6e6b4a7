//! The JSON tree, written directly (no intermediate value), iteratively.

use std::io::{self, BufWriter, Write};

use importguard::importtime::{ImportLog, NodeId, NodeKind};

use super::View;

/// Write a JSON string, with a fast path for names that need no escaping.
pub(crate) fn string<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        w.write_all(b"\"")?;
        w.write_all(s.as_bytes())?;
        w.write_all(b"\"")
    } else {
        serde_json::to_writer(&mut *w, s).map_err(io::Error::other)
    }
}

enum Step {
    Open(NodeId, usize, bool),
    Close,
}

/// The view as JSON ([`answers::importtime`]): `{"schema", "encoding", "lines", "sessions": [{"index",
/// "header_line", "roots": [node]}], "warnings": [...]}` where a node is
/// `{"name", "self_us", "cumulative_us", "line", "children": [node]}` plus
/// `"cached": "known" | "ambiguous"` for cached lines.
pub fn json_tree(log: &ImportLog, view: &View, w: &mut dyn Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    write_tree(log, view, &mut w)?;
    w.flush()
}

/// How many nodes the tree is written past between two hints to the log
/// that their names are done with ([`ImportLog::read_past`]).
const RELEASE_EVERY: u32 = 1 << 16;

fn write_tree<W: Write>(log: &ImportLog, view: &View, w: &mut W) -> io::Result<()> {
    let encoding = serde_json::to_string(&log.encoding()).map_err(io::Error::other)?;
    write!(
        w,
        "{{\"schema\":\"{}\",\"encoding\":{encoding},\"lines\":{},\"sessions\":[",
        answers::importtime::SCHEMA,
        log.line_count()
    )?;
    let mut stack: Vec<Step> = Vec::new();
    let mut current = usize::MAX;
    let mut first_root = true;
    // Every node before `released` in the arena has been written (a
    // subtree's nodes lie before it, post-order), so a mapped log's pages
    // holding their names can go: written in tree order, the names would
    // otherwise bring the whole file back in.
    let mut released = 0u32;
    for &root in &view.roots {
        if !view.keeps(log, root) {
            continue;
        }
        let session = log.session_of(root);
        if session != current {
            if current != usize::MAX {
                w.write_all(b"]},")?;
            }
            current = session;
            let s = &log.sessions()[session];
            let header = s.header_line.map_or("null".to_owned(), |l| l.to_string());
            write!(
                w,
                "{{\"index\":{session},\"header_line\":{header},\"roots\":["
            )?;
            first_root = true;
        }
        stack.push(Step::Open(root, 0, first_root));
        first_root = false;
        while let Some(step) = stack.pop() {
            match step {
                Step::Close => w.write_all(b"]}")?,
                Step::Open(id, level, first) => {
                    if !first {
                        w.write_all(b",")?;
                    }
                    let n = log.node(id);
                    w.write_all(b"{\"name\":")?;
                    string(w, log.name(id))?;
                    write!(
                        w,
                        ",\"self_us\":{},\"cumulative_us\":{},\"line\":{}",
                        n.self_us, n.cumulative_us, n.line
                    )?;
                    match n.kind {
                        NodeKind::Entry => {}
                        NodeKind::Cached => w.write_all(b",\"cached\":\"known\"")?,
                        NodeKind::CachedAmbiguous => w.write_all(b",\"cached\":\"ambiguous\"")?,
                    }
                    w.write_all(b",\"children\":[")?;
                    stack.push(Step::Close);
                    // A leaf: every node before it in its root's subtree
                    // was written before it.
                    if id.0 >= released.saturating_add(RELEASE_EVERY)
                        && log.children(id).next().is_none()
                    {
                        log.read_past(NodeId(released)..id);
                        released = id.0;
                    }
                    if view.descends(level) {
                        let mark = stack.len();
                        for c in log.children(id).filter(|&c| view.keeps(log, c)) {
                            stack.push(Step::Open(c, level + 1, false));
                        }
                        if stack.len() > mark {
                            stack[mark..].reverse();
                            if let Some(Step::Open(_, _, first)) = stack.last_mut() {
                                *first = true;
                            }
                        }
                    }
                }
            }
        }
    }
    if current != usize::MAX {
        w.write_all(b"]}")?;
    }
    w.write_all(b"],\"warnings\":[")?;
    for (i, warning) in log.warnings().iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        let value = serde_json::json!({
            "line": warning.line,
            "message": warning.to_string(),
            "detail": warning.kind,
        });
        serde_json::to_writer(&mut *w, &value).map_err(io::Error::other)?;
    }
    w.write_all(b"]}\n")
}
