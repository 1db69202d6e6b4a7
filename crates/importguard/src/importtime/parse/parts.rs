//! A large log read on several threads: cut at session headers, each part
//! rebuilt by its own [`Builder`], the parts joined into one arena exactly
//! as one scan of the whole log builds it.
//!
//! A header closes the session before it and opens the next with nothing
//! carried over (no pending node, the import level back to 0), so a part
//! that begins at a header reads what a single scan reads from there; only
//! its numbers are its own. Joining moves them: node ids by the nodes
//! before the part, line numbers by the lines before it, session indexes
//! by the sessions before it, and package indexes into the first part's
//! numbering (new packages numbered in the order the part met them, as the
//! single scan does). Names stay where they are: every builder reads the
//! one text and keeps positions into it.

use std::ops::Range;

use super::builder::Builder;
use crate::importtime::tree::{NONE, NodeKind, Slot};

/// A part is at least this long: below it, a thread costs more than it
/// saves, and the tests' and workers' logs (kilobytes) are read on one.
pub(super) const MIN_PART: usize = 8 << 20;

/// A header line as CPython prints it, with the line end before it.
const HEADER: &[u8] = b"\nimport time: self [us]";

/// Cuts `text` into at most `threads` parts of at least `min_part` bytes,
/// each after the first beginning at a header line; one part (all of it)
/// when the log is too small or has no header to cut at.
pub(super) fn cut(text: &[u8], threads: usize, min_part: usize) -> Vec<Range<usize>> {
    let n = threads.min(text.len() / min_part.max(1)).max(1);
    let finder = memchr::memmem::Finder::new(HEADER);
    let mut starts = vec![0];
    for k in 1..n {
        let from = (k * text.len() / n).max(starts[starts.len() - 1] + min_part);
        // A header right at `from` has its line end at `from - 1`.
        let Some(at) = text.get(from - 1..).and_then(|rest| finder.find(rest)) else {
            break;
        };
        starts.push(from + at);
    }
    let mut ends: Vec<usize> = starts[1..].to_vec();
    ends.push(text.len());
    starts.into_iter().zip(ends).map(|(s, e)| s..e).collect()
}

/// Reads each part on its own thread (the first on this one) and joins
/// them. `make` sets up the builder of one part. A part whose thread the
/// system will not start is read on this thread after the first.
pub(super) fn read<'a>(
    parts: &[Range<usize>],
    make: impl Fn(Range<usize>) -> Builder<'a> + Sync,
) -> Builder<'a> {
    let run = |part: Range<usize>| {
        let mut b = make(part);
        b.run();
        b
    };
    let (first, rest) = parts.split_first().expect("at least one part");
    if rest.is_empty() {
        return run(first.clone());
    }
    let built: Vec<Builder<'a>> = std::thread::scope(|scope| {
        let threads: Vec<_> = rest
            .iter()
            .map(|part| {
                std::thread::Builder::new()
                    .name("importtime-part".into())
                    .spawn_scoped(scope, || run(part.clone()))
                    .map_err(|_| part)
            })
            .collect();
        let mut built = vec![run(first.clone())];
        for thread in threads {
            built.push(match thread {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(part) => run(part.clone()),
            });
        }
        built
    });
    join(built)
}

/// The parts' builders as the one builder of the whole log.
fn join(built: Vec<Builder<'_>>) -> Builder<'_> {
    let mut parts = built.into_iter();
    let mut whole = parts.next().expect("at least one part");
    for part in parts {
        append(&mut whole, part);
    }
    whole
}

/// Moves `part`, the part of the log right after what `whole` has read,
/// into `whole`.
fn append(whole: &mut Builder<'_>, mut part: Builder<'_>) {
    let nodes = whole.nodes.len() as u32;
    // One class a line: the lines `whole` has read (when a line was not
    // UTF-8 the scan stopped short, but then the log is decoded again).
    let lines = whole.classes.len() as u32;
    let sessions = whole.sessions.len();
    let packages: Vec<u32> = part
        .packages
        .names
        .iter()
        .map(|name| whole.packages.index_of(name.as_bytes()))
        .collect();
    let moved = |id: u32| if id == NONE { NONE } else { id + nodes };
    whole.nodes.reserve(part.nodes.len());
    for (i, slot) in part.nodes.iter().enumerate() {
        let mut node = slot.unpack(i as u32, &part.wide);
        node.parent = moved(node.parent);
        node.first_child = moved(node.first_child);
        node.line += lines;
        if node.kind == NodeKind::Entry {
            node.package = packages[node.package as usize];
        }
        let id = whole.nodes.len() as u32;
        whole.nodes.push(Slot::pack(id, &node, &mut whole.wide));
    }
    whole.long_names.extend(
        part.long_names
            .iter()
            .map(|&(id, start, len)| (id + nodes, start, len)),
    );
    whole.classes.append(&mut part.classes);
    whole.texts.extend(part.texts.into_iter().map(|mut t| {
        t.line += lines;
        t
    }));
    for mut s in part.sessions {
        s.index += sessions;
        s.header_line = s.header_line.map(|l| l + lines);
        s.first_line += lines;
        s.last_line += lines;
        s.first_node += nodes;
        s.end_node += nodes;
        for r in &mut s.roots {
            r.0 += nodes;
        }
        whole.sessions.push(s);
    }
    whole
        .warnings
        .extend(part.warnings.into_iter().map(|mut w| {
            w.line = w.line.map(|l| l + lines);
            w
        }));
    whole.ambiguous += part.ambiguous;
    whole.not_utf8 |= part.not_utf8;
}
