//! `-X importtime` logs: a byte-level parser, the log model and its trees,
//! and queries on them.
//!
//! [`parse`] takes raw stderr bytes (UTF-8, or UTF-16 with a BOM; LF or
//! CRLF) and returns an [`ImportLog`] that keeps every input line,
//! classified as a header, an entry, a cached entry (`-X importtime=2`) or
//! other text, with its 1-based line number. Headers split the log into
//! [`Session`]s (one per interpreter); each session's post-order entries
//! and their indentation are rebuilt into a tree of [`Node`]s kept in one
//! arena, packed into 32 bytes each. Anything odd (depth jumps, negative
//! self times, orphans, a truncated last line, ...) becomes a
//! [`LogWarning`] with its line number: the parser never panics and never
//! drops a line.
//!
//! Quirks handled (one minimal test each, beside the parser and in the
//! integration tests): CPython 3.7 to 3.14 shapes; `-X importtime=2` cached
//! lines (depth from the padding where it tells, else marked ambiguous);
//! negative and oversized numbers; CRLF; UTF-16 with a BOM; a missing
//! header; repeated headers (subinterpreters, child processes); a
//! truncated last line; orphans and depth jumps (threads); program output
//! mixed in, including lines that merely begin with `import time:`.

mod parse;
pub(crate) mod query;
pub mod stdlib;
mod tree;

pub use parse::{parse, parse_owned, parse_shared};
pub use query::{ChainLink, Metric, PackageTotal, is_parent_package, top_level};
pub use tree::{
    Children, Descendants, Encoding, ImportLog, LineClass, LogBytes, Node, NodeId, NodeKind,
    NodeView, Nodes, NodesIter, Session, SharedBytes, TextLine,
};

use serde::Serialize;

/// The exact header CPython prints before an interpreter's first timed import.
pub const HEADER: &str = "import time: self [us] | cumulative | imported package";

/// Something odd in a log, tied to the line it was found on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogWarning {
    /// 1-based line number, or `None` for a warning about the whole input.
    pub line: Option<u32>,
    /// What was found.
    pub kind: LogWarningKind,
}

/// The kinds of anomaly a log can hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LogWarningKind {
    /// Entries came before any header: the log was probably cut at the top.
    MissingHeader,
    /// A node was adopted by a parent more than one level above it: the
    /// lines in between are missing or the indentation is broken (threads).
    DepthJump {
        /// The adopted node's name.
        child: String,
        /// The adopted node's printed depth.
        child_depth: u32,
        /// The adopting parent's depth.
        parent_depth: u32,
    },
    /// A node at depth > 0 whose parent line never came before the session
    /// ended; it is kept as a root.
    Orphan {
        /// The orphan's name.
        name: String,
        /// Its printed depth.
        depth: u32,
    },
    /// A negative self time (threads or clock effects).
    NegativeSelf {
        /// The self time in microseconds.
        self_us: i64,
    },
    /// A negative cumulative time.
    NegativeCumulative {
        /// The cumulative time in microseconds.
        cumulative_us: i64,
    },
    /// Cumulative time smaller than self time.
    CumulativeBelowSelf {
        /// Self time in microseconds.
        self_us: i64,
        /// Cumulative time in microseconds.
        cumulative_us: i64,
    },
    /// `cumulative - self` differs from the sum of the children's cumulative
    /// times by more than rounding allows.
    ChildrenMismatch {
        /// `cumulative - self - sum(children's cumulative)`.
        difference_us: i64,
    },
    /// An odd number of indentation spaces; the depth was rounded down.
    OddIndent {
        /// The number of spaces.
        spaces: u32,
    },
    /// A number too large for 64 bits; it was saturated.
    NumberOverflow,
    /// Indentation deeper than the tree can hold; the depth was clamped.
    DepthClamped,
    /// A line begins with `import time:` but is neither a header nor an
    /// entry; it is kept as text.
    NotAnEntry,
    /// The input does not end with a newline: the last line may be cut.
    TruncatedLastLine,
    /// The input is not valid UTF-8 (or UTF-16); bad bytes were replaced.
    InvalidEncoding,
    /// Cached lines whose depth the padding does not determine; each was
    /// placed under the next entry that can be its parent and is marked
    /// ambiguous.
    AmbiguousCachedDepth {
        /// How many cached lines in the log were ambiguous.
        count: u32,
    },
}

impl std::fmt::Display for LogWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        match &self.kind {
            LogWarningKind::MissingHeader => {
                write!(f, "entries before any header (log cut at the top?)")
            }
            LogWarningKind::DepthJump {
                child,
                child_depth,
                parent_depth,
            } => write!(
                f,
                "depth jump: {child} at depth {child_depth} adopted by a parent at depth {parent_depth}"
            ),
            LogWarningKind::Orphan { name, depth } => {
                write!(
                    f,
                    "orphan: {name} at depth {depth} has no parent line; kept as a root"
                )
            }
            LogWarningKind::NegativeSelf { self_us } => {
                write!(f, "negative self time {self_us} us")
            }
            LogWarningKind::NegativeCumulative { cumulative_us } => {
                write!(f, "negative cumulative time {cumulative_us} us")
            }
            LogWarningKind::CumulativeBelowSelf {
                self_us,
                cumulative_us,
            } => {
                write!(
                    f,
                    "cumulative {cumulative_us} us is below self {self_us} us"
                )
            }
            LogWarningKind::ChildrenMismatch { difference_us } => write!(
                f,
                "cumulative minus self differs from the children's cumulative by {difference_us} us"
            ),
            LogWarningKind::OddIndent { spaces } => {
                write!(f, "odd indentation of {spaces} spaces; depth rounded down")
            }
            LogWarningKind::NumberOverflow => write!(f, "number too large; saturated"),
            LogWarningKind::DepthClamped => write!(f, "indentation too deep; depth clamped"),
            LogWarningKind::NotAnEntry => {
                write!(
                    f,
                    "begins with `import time:` but is not an entry; kept as text"
                )
            }
            LogWarningKind::TruncatedLastLine => {
                write!(
                    f,
                    "no newline at the end of the input; the last line may be cut"
                )
            }
            LogWarningKind::InvalidEncoding => {
                write!(
                    f,
                    "input is not valid UTF-8 or UTF-16; invalid bytes were replaced"
                )
            }
            LogWarningKind::AmbiguousCachedDepth { count } => write!(
                f,
                "{count} cached lines have a depth the padding does not determine; placed under the next possible parent and marked ambiguous"
            ),
        }
    }
}
