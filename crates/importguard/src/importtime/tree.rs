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
    /// read) may free their memory; the default keeps them.
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

/// One import in the tree. Names and relations are read through
/// [`ImportLog`] (`name`, `children`, `parent`).
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
    pub(crate) next_sibling: u32,
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
    pub(crate) nodes: Vec<Node>,
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
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
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
        let n = &self.nodes[id.index()];
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
        self.next = self.log.nodes[id as usize].next_sibling;
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
            c = self.log.nodes[c as usize].next_sibling;
        }
        self.stack[mark..].reverse();
        Some(NodeId(id))
    }
}
