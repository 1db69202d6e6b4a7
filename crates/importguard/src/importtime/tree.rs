//! The log model: lines, sessions and the node arena.

use std::sync::Arc;

use serde::Serialize;

use super::LogWarning;

/// Bytes a log can be parsed from without copying (a file mapped in
/// memory, a shared buffer).
pub type SharedBytes = Arc<dyn LogBytes>;

/// What [`SharedBytes`] hold: the bytes, and a way to give back the memory
/// of the part the parser has read.
pub trait LogBytes: Send + Sync {
    /// The whole input.
    fn bytes(&self) -> &[u8];

    /// The parser has read `range` and keeps only positions into it. A
    /// source that can read those bytes again when asked (a file mapped in
    /// memory drops its pages; they come back from the file on the next
    /// read) may free their memory; the default keeps them. Each byte is
    /// given back once; a large log is read on several threads, whose
    /// ranges may come in any order and at the same time.
    fn read_past(&self, range: std::ops::Range<usize>) {
        let _ = range;
    }
}

impl LogBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// The decoded input: owned, or shared bytes found to be UTF-8 already.
#[derive(Clone)]
pub(crate) enum Text {
    Owned(String),
    Shared(SharedBytes),
}

impl Text {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Text::Owned(s) => s.as_bytes(),
            Text::Shared(b) => b.bytes(),
        }
    }

    /// A range of the text as `str`. Shared bytes were validated when the
    /// log was parsed; they are checked again per slice (names are short)
    /// rather than trusted, and a slice that is not UTF-8 reads as empty.
    pub(crate) fn slice(&self, start: usize, len: usize) -> &str {
        match self {
            Text::Owned(s) => &s[start..start + len],
            Text::Shared(b) => b
                .bytes()
                .get(start..start + len)
                .and_then(|r| std::str::from_utf8(r).ok())
                .unwrap_or(""),
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Text::Owned(s) => write!(f, "Owned({} bytes)", s.len()),
            Text::Shared(b) => write!(f, "Shared({} bytes)", b.bytes().len()),
        }
    }
}

/// Index of a node in [`ImportLog::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index into the arena.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

pub(crate) const NONE: u32 = u32::MAX;

/// A packed name that did not fit: its place is in the log's list of long
/// names.
const LONG_NAME: u64 = u64::MAX;

/// A name's place in the text in one word (start in the high 40 bits,
/// length in the low 24), or `None` when it does not fit (a name of 16 MiB,
/// or past the first TiB of the text).
pub(crate) fn pack_name(start: usize, len: usize) -> Option<u64> {
    let (start, len) = (start as u64, len as u64);
    (start < 1 << 40 && len < (1 << 24) - 1).then_some(start << 24 | len)
}

/// The text range of node `id`'s packed name; `long` lists the names that
/// did not fit, by node.
pub(crate) fn name_range(id: u32, name: u64, long: &[(u32, u64, u64)]) -> std::ops::Range<usize> {
    let (start, len) = match name {
        LONG_NAME => long
            .binary_search_by_key(&id, |l| l.0)
            .map_or((0, 0), |i| (long[i].1, long[i].2)),
        _ => (name >> 24, name & 0xFF_FFFF),
    };
    start as usize..(start + len) as usize
}

/// Pack a name, or list it in `long` for node `id` when it does not fit.
pub(crate) fn place_name(
    id: u32,
    start: usize,
    len: usize,
    long: &mut Vec<(u32, u64, u64)>,
) -> u64 {
    pack_name(start, len).unwrap_or_else(|| {
        long.push((id, start as u64, len as u64));
        LONG_NAME
    })
}

/// What one input line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum LineClass {
    /// `import time: self [us] | cumulative | imported package`.
    Header,
    /// A timed import.
    Entry,
    /// `import time: cached    | cached     | name` (`-X importtime=2`).
    Cached,
    /// Anything else: program output, blank lines, malformed lines.
    Text,
}

/// Whether a node is a timed import or a cached lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum NodeKind {
    /// A timed import line.
    Entry,
    /// A cached line whose depth the padding determined.
    Cached,
    /// A cached line whose depth is a guess (see [`super::LogWarningKind::AmbiguousCachedDepth`]).
    CachedAmbiguous,
}

/// The input encoding the parser detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Encoding {
    /// UTF-8 (or ASCII), with or without a BOM.
    Utf8,
    /// UTF-16 little endian (a BOM, or detected from the zero bytes).
    Utf16Le,
    /// UTF-16 big endian with a BOM.
    Utf16Be,
}

/// One import in the tree, as [`ImportLog::node`] reads it from the arena.
/// Names and relations are read through [`ImportLog`] (`name`,
/// `children`, `parent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Self time in microseconds (0 for cached nodes); may be negative.
    pub self_us: i64,
    /// Cumulative time in microseconds (0 for cached nodes); may be negative.
    pub cumulative_us: i64,
    /// Where the name lies in the text ([`pack_name`]).
    pub(crate) name: u64,
    /// 1-based line number of the node's line.
    pub line: u32,
    pub(crate) parent: u32,
    pub(crate) first_child: u32,
    /// A timed node's top-level package, as an index into
    /// `ImportLog::packages` (`NONE` for cached nodes).
    pub(crate) package: u32,
    /// Depth as printed (indentation / 2); for an ambiguous cached node, the
    /// depth it was placed at.
    pub depth: u16,
    /// Entry or cached.
    pub kind: NodeKind,
}

impl Node {
    /// Whether this node comes from a cached line.
    pub fn is_cached(&self) -> bool {
        !matches!(self.kind, NodeKind::Entry)
    }
}

/// A slot's self time when the times are in [`Wide::times`].
const WIDE_TIME: i32 = i32::MIN;

/// A slot's package when it is in [`Wide::packages`] (or, for a cached
/// node, when it has none).
const WIDE_PACKAGE: u32 = (1 << 14) - 1;

/// One node as the arena holds it, in 32 bytes where a [`Node`] takes 48:
/// the times in 32 bits each, depth, kind and package in one word, and no
/// link to the next sibling (a subtree is a contiguous range of the arena
/// ending at its root, so the next sibling is found from the node after a
/// subtree). A value that does not fit is kept whole in the log's
/// [`Wide`] tables: nothing is lost. The arena is most of a parse's
/// memory, and the kernel zeroes every page of it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Self time, or [`WIDE_TIME`] when both times are in [`Wide::times`].
    self_us: i32,
    cumulative_us: i32,
    /// Where the name lies in the text ([`pack_name`]).
    pub(crate) name: u64,
    pub(crate) line: u32,
    pub(crate) parent: u32,
    pub(crate) first_child: u32,
    /// The depth in the low 16 bits, the kind in the next 2, the package
    /// in the high 14 ([`WIDE_PACKAGE`] when it does not fit).
    meta: u32,
}

/// The values too wide for their [`Slot`], by node, in node order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wide {
    /// (node, self time, cumulative time).
    pub(crate) times: Vec<(u32, i64, i64)>,
    /// (node, package) of the timed nodes whose package index does not fit.
    pub(crate) packages: Vec<(u32, u32)>,
}

impl Wide {
    fn times_of(&self, id: u32) -> (i64, i64) {
        self.times
            .binary_search_by_key(&id, |t| t.0)
            .map_or((0, 0), |i| (self.times[i].1, self.times[i].2))
    }

    fn package_of(&self, id: u32) -> u32 {
        self.packages
            .binary_search_by_key(&id, |p| p.0)
            .map_or(NONE, |i| self.packages[i].1)
    }
}

impl Slot {
    /// Node `id` packed; what does not fit goes to `wide`, whose entries
    /// must be for nodes before `id`.
    #[inline]
    pub(crate) fn pack(id: u32, node: &Node, wide: &mut Wide) -> Slot {
        let times = (
            i32::try_from(node.self_us).ok().filter(|&t| t != WIDE_TIME),
            i32::try_from(node.cumulative_us).ok(),
        );
        let (self_us, cumulative_us) = match times {
            (Some(s), Some(c)) => (s, c),
            _ => {
                wide.times.push((id, node.self_us, node.cumulative_us));
                (WIDE_TIME, 0)
            }
        };
        let package = match node.kind {
            NodeKind::Entry if node.package < WIDE_PACKAGE => node.package,
            NodeKind::Entry => {
                wide.packages.push((id, node.package));
                WIDE_PACKAGE
            }
            _ => WIDE_PACKAGE,
        };
        let mut slot = Slot {
            self_us,
            cumulative_us,
            name: node.name,
            line: node.line,
            parent: node.parent,
            first_child: node.first_child,
            meta: package << 18,
        };
        slot.set_depth(node.depth);
        slot.set_kind(node.kind);
        slot
    }

    /// The node this slot holds (`id` is its index, to find what is in
    /// `wide`).
    #[inline]
    pub(crate) fn unpack(self, id: u32, wide: &Wide) -> Node {
        let kind = self.kind();
        Node {
            self_us: self.self_us(id, wide),
            cumulative_us: self.cumulative_us(id, wide),
            name: self.name,
            line: self.line,
            parent: self.parent,
            first_child: self.first_child,
            package: self.package(id, wide),
            depth: self.depth(),
            kind,
        }
    }

    #[inline]
    pub(crate) fn self_us(self, id: u32, wide: &Wide) -> i64 {
        match self.self_us {
            WIDE_TIME => wide.times_of(id).0,
            t => i64::from(t),
        }
    }

    #[inline]
    pub(crate) fn cumulative_us(self, id: u32, wide: &Wide) -> i64 {
        match self.self_us {
            WIDE_TIME => wide.times_of(id).1,
            _ => i64::from(self.cumulative_us),
        }
    }

    /// A timed node's package, `NONE` for a cached one.
    #[inline]
    pub(crate) fn package(self, id: u32, wide: &Wide) -> u32 {
        match (self.kind(), self.meta >> 18) {
            (NodeKind::Entry, WIDE_PACKAGE) => wide.package_of(id),
            (NodeKind::Entry, p) => p,
            _ => NONE,
        }
    }

    #[inline]
    pub(crate) fn depth(self) -> u16 {
        self.meta as u16
    }

    #[inline]
    pub(crate) fn set_depth(&mut self, depth: u16) {
        self.meta = self.meta & !0xFFFF | u32::from(depth);
    }

    #[inline]
    pub(crate) fn kind(self) -> NodeKind {
        match (self.meta >> 16) & 3 {
            0 => NodeKind::Entry,
            1 => NodeKind::Cached,
            _ => NodeKind::CachedAmbiguous,
        }
    }

    #[inline]
    pub(crate) fn set_kind(&mut self, kind: NodeKind) {
        let k = match kind {
            NodeKind::Entry => 0,
            NodeKind::Cached => 1,
            NodeKind::CachedAmbiguous => 2,
        };
        self.meta = self.meta & !(3 << 16) | k << 16;
    }
}

/// A node with its name, for serialization (`ImportLog::view`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeView<'a> {
    /// Module name.
    pub name: &'a str,
    /// Self time in microseconds.
    pub self_us: i64,
    /// Cumulative time in microseconds.
    pub cumulative_us: i64,
    /// 1-based line number.
    pub line: u32,
    /// Printed (or placed) depth.
    pub depth: u16,
    /// Entry or cached.
    pub kind: NodeKind,
    /// Session index.
    pub session: usize,
}

/// A text line (anything but a header or an entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextLine {
    /// 1-based line number.
    pub line: u32,
    pub(crate) start: u64,
    pub(crate) len: u32,
}

/// One interpreter's part of the log: from a header to the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Session {
    /// 0-based index.
    pub index: usize,
    /// The header's line, or `None` when entries came before any header.
    pub header_line: Option<u32>,
    /// First and last line of the session (header included).
    pub first_line: u32,
    /// Last line of the session.
    pub last_line: u32,
    /// Top-level nodes in import order.
    pub roots: Vec<NodeId>,
    /// The session's nodes are `nodes[first_node..end_node]` of the arena.
    pub first_node: u32,
    /// End (exclusive) of the session's node range.
    pub end_node: u32,
    /// Number of timed entries.
    pub entries: u32,
    /// Number of cached lines.
    pub cached: u32,
}

/// A parsed `-X importtime` log: every line classified, sessions, trees
/// and warnings.
#[derive(Debug, Clone)]
pub struct ImportLog {
    pub(crate) text: Text,
    pub(crate) encoding: Encoding,
    pub(crate) classes: Vec<LineClass>,
    pub(crate) nodes: Vec<Slot>,
    /// What did not fit in the nodes' slots.
    pub(crate) wide: Wide,
    pub(crate) texts: Vec<TextLine>,
    pub(crate) sessions: Vec<Session>,
    pub(crate) warnings: Vec<LogWarning>,
    /// The top-level packages of the timed nodes, indexed by `Node::package`.
    pub(crate) packages: Vec<String>,
    /// (node, start, length) of the names too long to pack, by node.
    pub(crate) long_names: Vec<(u32, u64, u64)>,
}

impl ImportLog {
    /// The decoded input (UTF-8).
    pub fn text(&self) -> &str {
        let bytes = self.text.bytes();
        self.text.slice(0, bytes.len())
    }

    /// The detected input encoding.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The class of every input line; `line_classes()[n - 1]` is line `n`.
    pub fn line_classes(&self) -> &[LineClass] {
        &self.classes
    }

    /// Number of input lines (a last line without a newline counts).
    pub fn line_count(&self) -> usize {
        self.classes.len()
    }

    /// The node arena, in line order.
    pub fn nodes(&self) -> Nodes<'_> {
        Nodes { log: self }
    }

    /// One node.
    #[inline]
    pub fn node(&self, id: NodeId) -> Node {
        self.nodes[id.index()].unpack(id.0, &self.wide)
    }

    /// The node after `id` among its parent's children, or `NONE`. A
    /// subtree is the range of the arena that ends at its root, and the
    /// children's subtrees tile the parent's in order: the next sibling's
    /// subtree begins right after `id`, and it is the ancestor of that node
    /// whose parent is `id`'s. Walking up to it visits the next sibling's
    /// first children only, so a walk over all the children of all nodes
    /// visits each node once.
    #[inline]
    pub(crate) fn next_sibling(&self, id: u32) -> u32 {
        let parent = self.nodes[id as usize].parent;
        let mut next = id + 1;
        if parent == NONE || next == parent {
            return NONE;
        }
        loop {
            match self.nodes.get(next as usize).map(|n| n.parent) {
                Some(p) if p == parent => return next,
                Some(p) if p != NONE && p > next => next = p,
                _ => return NONE,
            }
        }
    }

    /// A node's module name.
    pub fn name(&self, id: NodeId) -> &str {
        let r = name_range(id.0, self.nodes[id.index()].name, &self.long_names);
        self.text.slice(r.start, r.len())
    }

    /// A hint that the caller is done with the names of `nodes` (a
    /// rendering that has printed them): a source that can read its bytes
    /// again (a file mapped in memory) may free the memory of that part of
    /// the text. A later read of those names still works; it brings their
    /// bytes back in.
    pub fn read_past(&self, nodes: std::ops::Range<NodeId>) {
        let Text::Shared(bytes) = &self.text else {
            return;
        };
        let start_of = |id: NodeId| match self.nodes.get(id.index()) {
            Some(n) => name_range(id.0, n.name, &self.long_names).start,
            None => bytes.bytes().len(),
        };
        let (start, end) = (start_of(nodes.start), start_of(nodes.end));
        if start < end {
            bytes.read_past(start..end);
        }
    }

    /// A node with its name and session, ready to serialize.
    pub fn view(&self, id: NodeId) -> NodeView<'_> {
        let n = self.node(id);
        NodeView {
            name: self.name(id),
            self_us: n.self_us,
            cumulative_us: n.cumulative_us,
            line: n.line,
            depth: n.depth,
            kind: n.kind,
            session: self.session_of(id),
        }
    }

    /// A node's parent, or `None` for a root.
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        let p = self.nodes[id.index()].parent;
        (p != NONE).then_some(NodeId(p))
    }

    /// A node's children in import order.
    pub fn children(&self, id: NodeId) -> Children<'_> {
        Children {
            log: self,
            next: self.nodes[id.index()].first_child,
        }
    }

    /// A node's session index.
    pub fn session_of(&self, id: NodeId) -> usize {
        self.sessions.partition_point(|s| s.end_node <= id.0)
    }

    /// A node and all its descendants, depth first in import order (the
    /// node itself first); iterative, so any depth is safe.
    pub fn descendants(&self, id: NodeId) -> Descendants<'_> {
        Descendants {
            log: self,
            stack: vec![id.0],
        }
    }

    /// The text lines (program output, blank and malformed lines).
    pub fn text_lines(&self) -> &[TextLine] {
        &self.texts
    }

    /// The content of a text line (without its line end).
    pub fn text_of(&self, line: &TextLine) -> &str {
        self.text.slice(line.start as usize, line.len as usize)
    }

    /// The sessions, one per header (plus one for entries before any header).
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// Every root of every session, in order.
    pub fn all_roots(&self) -> Vec<NodeId> {
        self.sessions
            .iter()
            .flat_map(|s| s.roots.iter().copied())
            .collect()
    }

    /// The warnings, in line order (input-wide ones first).
    pub fn warnings(&self) -> &[LogWarning] {
        &self.warnings
    }

    /// Number of header lines.
    pub fn header_count(&self) -> usize {
        self.sessions
            .iter()
            .filter(|s| s.header_line.is_some())
            .count()
    }

    /// Number of timed entry lines.
    pub fn entry_count(&self) -> usize {
        self.sessions.iter().map(|s| s.entries as usize).sum()
    }

    /// Number of cached lines.
    pub fn cached_count(&self) -> usize {
        self.sessions.iter().map(|s| s.cached as usize).sum()
    }

    /// Whether the input holds anything of importtime at all: a header, an
    /// entry or a cached line.
    pub fn is_importtime(&self) -> bool {
        !self.nodes.is_empty() || self.header_count() > 0
    }
}

/// Iterator over a node's children.
#[derive(Debug, Clone)]
pub struct Children<'a> {
    log: &'a ImportLog,
    next: u32,
}

impl Iterator for Children<'_> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        if self.next == NONE {
            return None;
        }
        let id = self.next;
        self.next = self.log.next_sibling(id);
        Some(NodeId(id))
    }
}

/// Depth-first iterator over a subtree.
#[derive(Debug, Clone)]
pub struct Descendants<'a> {
    log: &'a ImportLog,
    stack: Vec<u32>,
}

impl Iterator for Descendants<'_> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        let id = self.stack.pop()?;
        let mark = self.stack.len();
        let mut c = self.log.nodes[id as usize].first_child;
        while c != NONE {
            self.stack.push(c);
            c = self.log.next_sibling(c);
        }
        self.stack[mark..].reverse();
        Some(NodeId(id))
    }
}

/// The node arena in line order, each node read from its slot as it is
/// asked for ([`ImportLog::nodes`]).
#[derive(Clone, Copy)]
pub struct Nodes<'a> {
    log: &'a ImportLog,
}

impl<'a> Nodes<'a> {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.log.nodes.len()
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.log.nodes.is_empty()
    }

    /// The node at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<Node> {
        let slot = self.log.nodes.get(index)?;
        Some(slot.unpack(index as u32, &self.log.wide))
    }

    /// The nodes in line order.
    pub fn iter(&self) -> NodesIter<'a> {
        NodesIter {
            log: self.log,
            range: 0..self.log.nodes.len() as u32,
        }
    }
}

impl<'a> IntoIterator for Nodes<'a> {
    type Item = Node;
    type IntoIter = NodesIter<'a>;

    fn into_iter(self) -> NodesIter<'a> {
        self.iter()
    }
}

impl PartialEq for Nodes<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for Nodes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over [`Nodes`], in line order.
#[derive(Debug, Clone)]
pub struct NodesIter<'a> {
    log: &'a ImportLog,
    range: std::ops::Range<u32>,
}

impl Iterator for NodesIter<'_> {
    type Item = Node;

    #[inline]
    fn next(&mut self) -> Option<Node> {
        let id = self.range.next()?;
        Some(self.log.node(NodeId(id)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.range.size_hint()
    }
}

impl DoubleEndedIterator for NodesIter<'_> {
    fn next_back(&mut self) -> Option<Node> {
        let id = self.range.next_back()?;
        Some(self.log.node(NodeId(id)))
    }
}

impl ExactSizeIterator for NodesIter<'_> {}
