//! A cut: how it keeps a module out of start-up ([`CutKind`]), where it
//! applies (a function, a block, a line), its patch, and why a link has
//! none ([`Uncuttable`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a cut keeps the module out of start-up. Ties between cuts of the
/// same size on the same link go (`rank`): the
/// narrowest scope first (a block, then the whole function: only the block
/// leaves the module out of a request whose branch does not read it), and
/// the edits every Python takes before `lazy` (a SyntaxError before 3.15,
/// which a project that still supports older interpreters cannot take).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CutKind {
    /// `lazy import` / `lazy from ... import` (PEP 810, Python 3.15+).
    LazyImport,
    /// The import moves into the narrowest blocks of the functions that
    /// read its names, before the first statement of each that reads them
    /// ([`FunctionSite::blocks`]).
    MoveIntoBlocks,
    /// The import moves to the top of the functions that read its names.
    MoveIntoFunctions,
    /// The import goes under `if TYPE_CHECKING:` (names read only in
    /// annotations).
    TypeChecking,
    /// Nothing reads the names: the import goes.
    DropImport,
    /// A PEP 562 module `__getattr__` imports the names on first access (a
    /// package's re-export, or names other modules import from here).
    ModuleGetattr,
}

impl CutKind {
    /// The tie-break among cuts of the same size on the same link.
    pub(crate) fn rank(self) -> u8 {
        match self {
            CutKind::MoveIntoBlocks => 0,
            CutKind::MoveIntoFunctions => 1,
            CutKind::TypeChecking => 2,
            CutKind::DropImport => 3,
            CutKind::LazyImport => 4,
            CutKind::ModuleGetattr => 5,
        }
    }
}

impl fmt::Display for CutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutKind::LazyImport => "lazy import",
            CutKind::MoveIntoBlocks => "move into blocks",
            CutKind::MoveIntoFunctions => "move into functions",
            CutKind::TypeChecking => "TYPE_CHECKING import",
            CutKind::DropImport => "drop import",
            CutKind::ModuleGetattr => "module __getattr__",
        })
    }
}

/// A function an import moves into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSite {
    /// Its qualified name (`load`, `Service.load`).
    pub name: String,
    /// The line of its `def`.
    pub line: u32,
    /// The lines in it that read the names.
    #[serde(rename = "lines")]
    pub uses: Vec<u32>,
    /// With [`CutKind::MoveIntoBlocks`]: where in it the import goes (empty:
    /// at the top of its body).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockSite>,
}

/// A block of a function an import moves into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockSite {
    /// The line (of the original file) the import goes in before: the
    /// block's first statement that reads the names.
    pub line: u32,
    /// The block, in words (``the `if op == "report":` block (line 40)``);
    /// `None` for the function's own body (after an early return).
    pub block: Option<String>,
}

/// A line of a first-party file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLine {
    /// Relative to the project root, `/`-separated.
    pub file: String,
    /// 1-based.
    pub line: u32,
}

/// The file contents a cut goes from and to.
#[derive(Clone)]
pub(crate) struct Patch {
    pub(crate) original: Vec<u8>,
    pub(crate) patched: Vec<u8>,
}

impl fmt::Debug for Patch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Patch")
            .field("original_bytes", &self.original.len())
            .field("patched_bytes", &self.patched.len())
            .finish()
    }
}

/// One way to break the chain: an edit of one first-party line and what it
/// implies elsewhere in the same file.
#[derive(Debug, Clone, Serialize)]
pub struct Cut {
    /// The link it cuts: an index into the chain.
    pub link: usize,
    /// The module that line imports (the chain's module at `link`).
    pub module: String,
    /// The file, relative to the project root, `/`-separated.
    pub file: String,
    /// The import statement's first line.
    pub line: u32,
    /// How.
    pub kind: CutKind,
    /// The import statement, on one line.
    pub statement: String,
    /// The names it binds.
    pub names: Vec<String>,
    /// Where the import moves (functions that read the names).
    pub functions: Vec<FunctionSite>,
    /// Whether an `if TYPE_CHECKING:` import keeps the annotations' names.
    pub type_checking: bool,
    /// Whether `from __future__ import annotations` is added.
    pub future_annotations: bool,
    /// Whether a module `__getattr__` is added.
    pub getattr: bool,
    /// Other first-party modules that import the names from this file.
    pub users: Vec<SourceLine>,
    /// What else to know (a missing `__all__`, a route that did not apply).
    pub notes: Vec<String>,
    /// One sentence for people.
    pub summary: String,
    /// Added and removed lines that are not blank.
    pub lines_changed: usize,
    /// The unified diff, relative to the project root.
    pub diff: String,
    #[serde(skip)]
    pub(crate) patch: Patch,
}

impl Cut {
    /// The file's content after the cut.
    pub fn patched(&self) -> &[u8] {
        &self.patch.patched
    }

    /// The file's content the cut was computed from.
    pub fn original(&self) -> &[u8] {
        &self.patch.original
    }

    /// Its size for ranking: the lines it changes, where a move into the
    /// blocks of a function counts that function once (the same import in
    /// two branches is no bigger a change than one at the function's top,
    /// so the narrower scope is still tried first).
    pub(crate) fn size(&self) -> usize {
        let extra: usize = self
            .functions
            .iter()
            .map(|f| f.blocks.len().saturating_sub(1))
            .sum();
        self.lines_changed.saturating_sub(extra)
    }

    pub(crate) fn sort_key(&self) -> (usize, usize, u8) {
        (self.size(), self.link, self.kind.rank())
    }
}

/// A first-party link that cannot be cut, or a link that is not first-party.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Uncuttable {
    /// An index into the chain.
    pub link: usize,
    /// The module the line imports.
    pub module: String,
    /// The importing file, relative to the project root, when first-party.
    pub file: Option<String>,
    /// Its line.
    pub line: Option<u32>,
    /// The import statement, when one was found.
    pub statement: Option<String>,
    /// Why it cannot be cut.
    pub reason: String,
}
