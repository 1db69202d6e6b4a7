//! The text tree and the top table.

use std::io::{self, BufWriter, Write};

use importguard::importtime::{ImportLog, Metric, NodeId, NodeKind};

use super::{View, ms, share};

enum Item {
    Node(NodeId),
    /// Children hidden by the time filter: (count, their cumulative sum).
    Hidden(usize, i64),
}

/// Tree-drawing prefix for an item at `level` given the "is last" flags of
/// its ancestors' levels.
fn prefix(out: &mut String, flags: &[bool], level: usize) {
    out.clear();
    for &last in flags.iter().take(level).skip(1) {
        out.push_str(if last { "   " } else { "│  " });
    }
    if level > 0 {
        out.push_str(if flags[level] { "└─ " } else { "├─ " });
    }
}

fn session_line(
    log: &ImportLog,
    w: &mut BufWriter<&mut dyn Write>,
    session: usize,
) -> io::Result<()> {
    let s = &log.sessions()[session];
    let header = match s.header_line {
        Some(l) => format!("header at line {l}"),
        None => "no header".to_owned(),
    };
    let total: i64 = s
        .roots
        .iter()
        .filter(|&&r| log.node(r).kind == NodeKind::Entry)
        .map(|&r| log.node(r).cumulative_us)
        .fold(0, i64::saturating_add);
    let cached = if s.cached > 0 {
        format!(", {} cached", s.cached)
    } else {
        String::new()
    };
    writeln!(
        w,
        "session {} ({header}, lines {}-{}): {} imports{cached}, {} ms at top level",
        s.index,
        s.first_line,
        s.last_line,
        s.entries,
        ms(total)
    )
}

/// The tree with cumulative and self times and each node's share of the
/// view's total; children hidden by `min_us` are summarised in one line,
/// children cut by the depth limit are counted after the name.
pub fn tree_text(log: &ImportLog, view: &View, w: &mut dyn Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    write_tree(log, view, &mut w)?;
    w.flush()
}

fn write_tree(log: &ImportLog, view: &View, w: &mut BufWriter<&mut dyn Write>) -> io::Result<()> {
    let total = view.total_us(log);
    let columns = |w: &mut dyn Write| {
        writeln!(
            w,
            "{:>10} {:>10} {:>7}  module",
            "cum ms", "self ms", "share"
        )
    };
    if view.focused {
        columns(w)?;
    }
    let mut stack: Vec<(Item, usize, bool)> = Vec::new();
    let mut flags: Vec<bool> = Vec::new();
    let mut pre = String::new();
    let mut current_session = usize::MAX;
    for &root in &view.roots {
        if !view.keeps(log, root) {
            continue;
        }
        let session = log.session_of(root);
        if session != current_session && !view.focused {
            current_session = session;
            session_line(log, w, session)?;
            columns(w)?;
        }
        if view.focused {
            writeln!(w, "via {}", log.chain_names(root))?;
        }
        stack.push((Item::Node(root), 0, true));
        while let Some((item, level, last)) = stack.pop() {
            flags.truncate(level);
            flags.push(last);
            prefix(&mut pre, &flags, level);
            match item {
                Item::Hidden(count, cum) => {
                    writeln!(
                        w,
                        "{:>10} {:>10} {:>7}  {pre}… {count} more below the time threshold",
                        ms(cum),
                        "",
                        ""
                    )?;
                }
                Item::Node(id) => {
                    let n = log.node(id);
                    let name = log.name(id);
                    let has_children = log.children(id).next().is_some();
                    let mut cut = 0usize;
                    if view.descends(level) {
                        let mark = stack.len();
                        let (mut hidden, mut hidden_cum) = (0usize, 0i64);
                        for c in log.children(id) {
                            if view.keeps(log, c) {
                                stack.push((Item::Node(c), level + 1, false));
                            } else {
                                hidden += 1;
                                hidden_cum = hidden_cum.saturating_add(log.node(c).cumulative_us);
                            }
                        }
                        if hidden > 0 {
                            stack.push((Item::Hidden(hidden, hidden_cum), level + 1, false));
                        }
                        if stack.len() > mark {
                            stack[mark..].reverse();
                            stack[mark].2 = true;
                        }
                    } else if has_children {
                        cut = log.children(id).count();
                    }
                    let suffix = if cut > 0 {
                        format!("  [+{cut} below]")
                    } else {
                        String::new()
                    };
                    match n.kind {
                        NodeKind::Entry => writeln!(
                            w,
                            "{:>10} {:>10} {:>7}  {pre}{name}{suffix}",
                            ms(n.cumulative_us),
                            ms(n.self_us),
                            share(n.cumulative_us, total)
                        )?,
                        NodeKind::Cached => writeln!(
                            w,
                            "{:>10} {:>10} {:>7}  {pre}{name} (cached){suffix}",
                            "", "", ""
                        )?,
                        NodeKind::CachedAmbiguous => writeln!(
                            w,
                            "{:>10} {:>10} {:>7}  {pre}{name} (cached, depth ambiguous){suffix}",
                            "", "", ""
                        )?,
                    }
                }
            }
        }
    }
    writeln!(w, "total {} ms", ms(total))
}

/// The top `n` modules by self time and by cumulative time, and the top
/// `n` top-level packages, over the view's subtrees; rows below `min_us`
/// are left out.
pub fn top_table(log: &ImportLog, view: &View, n: usize, w: &mut dyn Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 16, w);
    write_top(log, view, n, &mut w)?;
    w.flush()
}

fn write_top(
    log: &ImportLog,
    view: &View,
    n: usize,
    w: &mut BufWriter<&mut dyn Write>,
) -> io::Result<()> {
    let total = view.total_us(log);
    let (entries, cached) = view.counts(log);
    let sessions = if view.session.is_some() {
        1
    } else {
        log.sessions().len()
    };
    write!(w, "{entries} imports")?;
    if cached > 0 {
        write!(w, ", {cached} cached lines")?;
    }
    writeln!(
        w,
        " in {sessions} session(s); {} ms at top level",
        ms(total)
    )?;
    // Whole sessions are one range of the arena: walked as a plain range,
    // the pass's body inlines into one loop (through the chained iterator
    // of `all_nodes` it stays a call per node).
    let (by_self, by_cum, packages) = match view.focused {
        false => log.top_and_totals_among(n, log.node_range(view.session).map(NodeId)),
        true => log.top_and_totals_among(n, view.all_nodes(log)),
    };
    for (metric, title, top) in [
        (Metric::SelfTime, "self", by_self),
        (Metric::Cumulative, "cumulative", by_cum),
    ] {
        writeln!(w)?;
        writeln!(w, "top {n} by {title} time")?;
        writeln!(
            w,
            "{:>10} {:>10} {:>7}  module",
            "self ms", "cum ms", "share"
        )?;
        for id in top {
            let node = log.node(id);
            let value = match metric {
                Metric::SelfTime => node.self_us,
                Metric::Cumulative => node.cumulative_us,
            };
            if value < view.min_us {
                continue;
            }
            writeln!(
                w,
                "{:>10} {:>10} {:>7}  {}",
                ms(node.self_us),
                ms(node.cumulative_us),
                share(value, total),
                log.name(id)
            )?;
        }
    }
    writeln!(w)?;
    writeln!(w, "top {n} top-level packages by cumulative time")?;
    writeln!(
        w,
        "{:>10} {:>10} {:>7} {:>8}  package",
        "cum ms", "self ms", "share", "modules"
    )?;
    for t in packages.into_iter().take(n) {
        if t.cumulative_us < view.min_us {
            continue;
        }
        writeln!(
            w,
            "{:>10} {:>10} {:>7} {:>8}  {}",
            ms(t.cumulative_us),
            ms(t.self_us),
            share(t.cumulative_us, total),
            t.modules,
            t.package
        )?;
    }
    Ok(())
}
