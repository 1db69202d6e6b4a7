//! Stack-shaped renderings: collapsed stacks, the flame graph SVG (through
//! inferno) and speedscope JSON.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};

use importguard::importtime::{ImportLog, NodeId, NodeKind};

use super::View;

/// Walk the view's stacks: `f(session, path, weight)` for every node whose
/// weight is positive. The weight is the node's self time, plus the
/// cumulative time of children hidden by the time filter, or its whole
/// cumulative time where the depth limit cuts the tree, so the total is
/// kept. Cached nodes weigh nothing.
fn walk(log: &ImportLog, view: &View, mut f: impl FnMut(usize, &[NodeId], i64)) {
    let mut stack: Vec<(NodeId, usize)> = Vec::new();
    let mut path: Vec<NodeId> = Vec::new();
    for &root in &view.roots {
        if !view.keeps(log, root) {
            continue;
        }
        let session = log.session_of(root);
        stack.push((root, 0));
        while let Some((id, level)) = stack.pop() {
            path.truncate(level);
            path.push(id);
            let n = log.node(id);
            if n.kind != NodeKind::Entry {
                continue;
            }
            let mut weight = n.self_us.max(0);
            if view.descends(level) {
                let mark = stack.len();
                for c in log.children(id) {
                    if view.keeps(log, c) {
                        stack.push((c, level + 1));
                    } else if log.node(c).kind == NodeKind::Entry {
                        weight = weight.saturating_add(log.node(c).cumulative_us.max(0));
                    }
                }
                stack[mark..].reverse();
            } else if log.children(id).next().is_some() {
                weight = n.cumulative_us.max(n.self_us).max(0);
            }
            if weight > 0 {
                f(session, &path, weight);
            }
        }
    }
}

fn multi_session(log: &ImportLog, view: &View) -> bool {
    let mut it = view.roots.iter().map(|&r| log.session_of(r));
    let first = it.next();
    it.any(|s| Some(s) != first)
}

/// Frame names may not hold the separators of the collapsed format.
fn frame(name: &str, out: &mut String) {
    for c in name.chars() {
        out.push(match c {
            ';' => ':',
            c if c.is_whitespace() => '_',
            c => c,
        });
    }
}

fn collapsed_lines(log: &ImportLog, view: &View) -> Vec<String> {
    let tag = multi_session(log, view);
    let mut lines = Vec::new();
    walk(log, view, |session, path, weight| {
        let mut line = String::new();
        if tag {
            line.push_str(&format!("session {session};"));
        }
        for (i, &id) in path.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            frame(log.name(id), &mut line);
        }
        line.push_str(&format!(" {weight}"));
        lines.push(line);
    });
    lines
}

/// Collapsed stacks, one `a;b;c self_us` line per node with a positive
/// weight (see the module docs), in import order; lines are prefixed with
/// `session N;` when the view spans several sessions.
pub fn collapsed(log: &ImportLog, view: &View, w: &mut dyn Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    for line in collapsed_lines(log, view) {
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")?;
    }
    w.flush()
}

/// A flame chart SVG (inferno; clickable to zoom, searchable): each
/// module's width is its time in microseconds (self time plus its
/// children's), in import order from left to right.
pub fn flamegraph_svg(
    log: &ImportLog,
    view: &View,
    title: &str,
    w: &mut dyn Write,
) -> io::Result<()> {
    // A flame chart: stacks stay in import order (depth first, a parent
    // before its children), so adjacent stacks share their common frames
    // and the x axis reads as the order in which modules were imported.
    let lines = collapsed_lines(log, view);
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_owned();
    opt.count_name = "us".to_owned();
    opt.name_type = "Module:".to_owned();
    opt.hash = true;
    opt.flame_chart = true;
    if lines.is_empty() {
        // inferno refuses empty input; say so in the picture instead.
        let empty = ["(no import time in this view) 1"];
        return inferno::flamegraph::from_lines(&mut opt, empty.iter().copied(), w);
    }
    let mut w = BufWriter::with_capacity(1 << 16, w);
    // inferno's flame chart reverses its input (it expects newest first).
    inferno::flamegraph::from_lines(&mut opt, lines.iter().rev().map(String::as_str), &mut w)?;
    w.flush()
}

/// speedscope JSON (`https://www.speedscope.app/file-format-schema.json`):
/// one `sampled` profile per session, one sample per stack in import order
/// weighted by its microseconds, so speedscope's time-order view shows the
/// imports in the order they ran.
pub fn speedscope(log: &ImportLog, view: &View, name: &str, w: &mut dyn Write) -> io::Result<()> {
    let mut frames: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    // (session, samples, weights)
    let mut profiles: Vec<(usize, Vec<Vec<usize>>, Vec<i64>)> = Vec::new();
    walk(log, view, |session, path, weight| {
        if profiles.last().is_none_or(|p| p.0 != session) {
            profiles.push((session, Vec::new(), Vec::new()));
        }
        let sample: Vec<usize> = path
            .iter()
            .map(|&id| {
                let n = log.name(id);
                *index.entry(n).or_insert_with(|| {
                    frames.push(n);
                    frames.len() - 1
                })
            })
            .collect();
        let p = profiles.last_mut().expect("pushed above");
        p.1.push(sample);
        p.2.push(weight);
    });
    let doc = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": concat!("coldstart ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frames.iter().map(|n| serde_json::json!({ "name": n })).collect::<Vec<_>>() },
        "profiles": profiles.iter().map(|(session, samples, weights)| {
            let end: i64 = weights.iter().sum();
            serde_json::json!({
                "type": "sampled",
                "name": format!("{name} (session {session})"),
                "unit": "microseconds",
                "startValue": 0,
                "endValue": end,
                "samples": samples,
                "weights": weights,
            })
        }).collect::<Vec<_>>(),
    });
    let mut w = BufWriter::with_capacity(1 << 16, w);
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::other)?;
    writeln!(w)?;
    w.flush()
}
