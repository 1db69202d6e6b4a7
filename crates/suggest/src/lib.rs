//! suggest: from a forbidden-import chain to the smallest safe patch that
//! keeps the forbidden module out of a worker's start-up.
//!
//! The check ([`importguard::verdict`]) says which chain pulled a forbidden
//! module in and which line each link stands on. This crate reads each
//! first-party link (a file under the project root, not in `site-packages`,
//! `dist-packages`, a virtual environment or the interpreter's own library)
//! with the target interpreter's own `ast`, through a small embedded script
//! run with `-I -B`, so the grammar is always the user's. Each link gets the
//! cuts that apply to it:
//!
//! - the names it binds are read only inside functions: the import moves
//!   into the narrowest blocks of those functions that read them, right
//!   before the first statement there that reads them (the `if op ==
//!   "report":` branch of a `handle(req)` every request runs through,
//!   [`CutKind::MoveIntoBlocks`]), and to the top of each of those
//!   functions ([`CutKind::MoveIntoFunctions`]), narrowest first;
//! - only in annotations: it goes under `if TYPE_CHECKING:`, with
//!   `from __future__ import annotations` where annotations are evaluated at
//!   run time ([`CutKind::TypeChecking`]);
//! - a package `__init__.py` re-exports them, or other first-party modules
//!   import them from here: a PEP 562 module `__getattr__` imports them on
//!   first access, and `__dir__` keeps listing them ([`CutKind::ModuleGetattr`]);
//! - on Python 3.15 and newer, at module level and outside `try`:
//!   `lazy import` / `lazy from` (PEP 810, [`CutKind::LazyImport`]);
//! - nothing reads them: the import goes ([`CutKind::DropImport`]).
//!
//! A name read at module level (a base class, a decorator, a default
//! argument, a module-level call, directly or through a function that
//! module-level code calls) makes the link not cuttable, and the
//! [`Suggestion`] says why ([`Uncuttable`]). Among the cuts, the one with the
//! fewest changed lines wins, ties going to the link closest to the worker's
//! own code (the top of the chain), then to the narrowest scope and to an
//! edit every Python takes before `lazy` ([`CutKind`]'s order); the others
//! are listed. Each cut carries
//! a unified diff (`a/` and `b/` prefixes, paths relative to the project
//! root) that `git apply` and `patch -p1` take, touching first-party files
//! only.
//!
//! [`Suggester::verify`] applies cuts, best first, to a temporary copy of
//! the first-party tree and lets the caller re-run the check there; a cut
//! after which the violation remains, or the worker fails its handshake, is
//! not offered, and the suggestion says so ([`Rejection`]).
//! [`Suggester::apply`] writes a cut to the project (`--fix`).
//!
//! Owns: classification of links and the patches. Does not own: running
//! workers or the check (the caller does, through the verification
//! callback), rendering for people beyond [`Suggestion`]'s `Display`, or
//! the command line.
#![warn(missing_docs)]

mod edit;
mod error;
mod query;
mod verify;

use std::fmt;
use std::path::{Path, PathBuf};

use importguard::verdict::Violation;
use serde::{Deserialize, Serialize};

pub use error::{CheckError, SuggestError};
pub use verify::{PatchedCopy, VerifyOutcome};

use query::{LinkAnswer, LinkRequest, Request};

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
    fn rank(self) -> u8 {
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
struct Patch {
    original: Vec<u8>,
    patched: Vec<u8>,
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
    patch: Patch,
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
    fn size(&self) -> usize {
        let extra: usize = self
            .functions
            .iter()
            .map(|f| f.blocks.len().saturating_sub(1))
            .sum();
        self.lines_changed.saturating_sub(extra)
    }

    fn sort_key(&self) -> (usize, usize, u8) {
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

/// Why a verified cut was not offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RejectReason {
    /// The check on the patched copy still sees the forbidden module.
    ViolationRemains {
        /// The chain it saw.
        chain: Vec<String>,
    },
    /// A worker on the patched copy did not complete its handshake.
    HandshakeFailed {
        /// What happened, as the caller said.
        detail: String,
    },
    /// The handshake held, but the target's model path failed on the
    /// patched copy.
    ModelPathFailed {
        /// The step that failed, as the caller said.
        step: String,
        /// Its output: the failing reply, or the command's output.
        output: String,
    },
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::ViolationRemains { chain } => {
                write!(f, "the violation remains: {}", chain.join(" -> "))
            }
            RejectReason::HandshakeFailed { detail } => {
                write!(f, "the worker failed its handshake: {detail}")
            }
            RejectReason::ModelPathFailed { step, output } => {
                write!(f, "the model path failed at {step}: {output}")
            }
        }
    }
}

/// A cut that verification rejected.
#[derive(Debug, Clone, Serialize)]
pub struct Rejection {
    /// The cut's file.
    pub file: String,
    /// Its line.
    pub line: u32,
    /// Its kind.
    pub kind: CutKind,
    /// Its summary.
    pub summary: String,
    /// Why it was rejected.
    #[serde(flatten)]
    pub reason: RejectReason,
}

/// Whether the offered cut was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verification {
    /// Not verified (yet): `cut` is the best candidate as computed.
    NotRun,
    /// The check on a patched copy passed: `cut` is safe to offer.
    Verified,
    /// Every cut tried was rejected: none is offered (`cut` is `None`).
    Rejected,
    /// No link can be cut: nothing to offer.
    NoCandidate,
}

/// What to change for one violation.
#[derive(Debug, Clone, Serialize)]
pub struct Suggestion {
    /// The forbidden module.
    pub module: String,
    /// The forbidden prefix it matched (from the violation).
    pub pattern: String,
    /// The chain, from the top-level import down to the module.
    pub chain: Vec<String>,
    /// The version of the interpreter that read the files.
    pub python: String,
    /// The cut offered: the smallest, closest to the worker's own code, and
    /// verified when `verification` says so.
    pub cut: Option<Cut>,
    /// Whether `cut` was verified.
    pub verification: Verification,
    /// The other cuts, best first.
    pub candidates: Vec<Cut>,
    /// Links that cannot be cut, and why.
    pub not_cuttable: Vec<Uncuttable>,
    /// Cuts that verification rejected, and why.
    pub rejections: Vec<Rejection>,
    /// What of the target's model path the verification also held the
    /// cut to (its requests after ready, its own command), in words, when
    /// the caller checked one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_path: Option<String>,
}

impl Suggestion {
    /// Every cut still on offer, best first (`cut`, then `candidates`).
    pub fn cuts(&self) -> impl Iterator<Item = &Cut> {
        self.cut.iter().chain(&self.candidates)
    }
}

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.verification {
            Verification::Verified => "verified on a patched copy",
            Verification::NotRun => "not verified",
            Verification::Rejected => "every cut tried was rejected",
            Verification::NoCandidate => "no link can be cut",
        };
        writeln!(
            f,
            "suggestion for {} ({}; read by Python {}):",
            self.module, state, self.python
        )?;
        match &self.cut {
            Some(c) => {
                writeln!(f, "  cut {}:{} ({}): {}", c.file, c.line, c.kind, c.summary)?;
                match self.verification {
                    Verification::Verified => {
                        writeln!(
                            f,
                            "  verified: with it applied, the check on a patched copy saw no `{}` at start-up",
                            self.module
                        )?;
                        if let Some(mp) = &self.model_path {
                            writeln!(f, "  and the model path held on that copy: {mp}")?;
                        }
                    }
                    _ => writeln!(
                        f,
                        "  NOT verified: whether `{}` stays out of start-up with it is unknown until the check is re-run with it applied",
                        self.module
                    )?,
                }
                for n in &c.notes {
                    writeln!(f, "  note: {n}")?;
                }
                for l in c.diff.lines() {
                    writeln!(f, "    {l}")?;
                }
            }
            None => writeln!(f, "  no cut is offered")?,
        }
        if !self.candidates.is_empty() {
            // Nobody saw what these do to the forbidden module: say so.
            writeln!(
                f,
                "  other candidates, NOT verified (whether {} stays out of start-up after one is unknown: \
                 verifying it needs the check re-run with it applied, e.g. `git apply` its diff and run `coldstart check`):",
                self.module
            )?;
            for c in &self.candidates {
                writeln!(
                    f,
                    "    {}:{} ({}, {} lines): {}",
                    c.file, c.line, c.kind, c.lines_changed, c.summary
                )?;
            }
        }
        if !self.not_cuttable.is_empty() {
            writeln!(f, "  not cuttable:")?;
            for u in &self.not_cuttable {
                match (&u.file, u.line) {
                    (Some(file), Some(line)) => write!(f, "    {file}:{line}")?,
                    _ => write!(f, "    (link {})", u.link)?,
                }
                writeln!(f, " (imports {}): {}", u.module, u.reason)?;
            }
        }
        if !self.rejections.is_empty() {
            writeln!(f, "  rejected after verification:")?;
            for r in &self.rejections {
                let reason = r.reason.to_string().replace('\n', "\n      ");
                writeln!(f, "    {}:{} ({}): {reason}", r.file, r.line, r.kind)?;
            }
        }
        Ok(())
    }
}

/// Suggests, verifies and applies cuts for one project and interpreter.
#[derive(Debug, Clone)]
pub struct Suggester {
    root: PathBuf,
    python: PathBuf,
    cwd: Option<PathBuf>,
    assume_version: Option<[u32; 3]>,
}

impl Suggester {
    /// `root`: the project root (first-party code is the files under it);
    /// `python`: the target's interpreter, which reads the files.
    pub fn new(root: impl AsRef<Path>, python: impl Into<PathBuf>) -> Result<Self, SuggestError> {
        let root = root.as_ref();
        let root = root
            .canonicalize()
            .map_err(|e| SuggestError::io("open the project root", root, e))?;
        Ok(Suggester {
            root,
            python: python.into(),
            cwd: None,
            assume_version: None,
        })
    }

    /// The worker's working directory: relative file names in the
    /// violation's lines are relative to it (default: the project root).
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Classify as if the interpreter were `version`: for tests of a newer
    /// grammar's rewrite where no such interpreter exists. The edits are
    /// still compiled by the real interpreter, so a rewrite in a grammar it
    /// does not know is dropped.
    #[doc(hidden)]
    pub fn assume_version(mut self, version: [u32; 3]) -> Self {
        self.assume_version = Some(version);
        self
    }

    /// The project root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The interpreter the cuts are verified with.
    pub fn interpreter(&self) -> &Path {
        &self.python
    }

    /// Every cut of the violation's chain, ranked, not yet verified.
    pub fn suggest(&self, violation: &Violation) -> Result<Suggestion, SuggestError> {
        let links = links_of(violation);
        let answer = query::classify(
            &self.python,
            &Request {
                root: &self.root,
                cwd: self.cwd.as_deref(),
                links: &links,
                assume_version: self.assume_version,
            },
        )?;
        let mut cuts = Vec::new();
        let mut not_cuttable = Vec::new();
        for link in &answer.links {
            let module = violation.chain.get(link.index).cloned().unwrap_or_default();
            // `from torch.nn import Module` is two links on one line (the
            // package, then the submodule): one statement, listed once.
            let seen = |file: &Option<String>, line: Option<u32>| {
                file.is_some()
                    && (cuts
                        .iter()
                        .any(|c: &Cut| Some(&c.file) == file.as_ref() && Some(c.line) == line)
                        || not_cuttable
                            .iter()
                            .any(|u: &Uncuttable| &u.file == file && u.line == line))
            };
            if seen(&link.file, link.line) {
                continue;
            }
            if link.cuts.is_empty() {
                not_cuttable.push(Uncuttable {
                    link: link.index,
                    module,
                    file: link.file.clone(),
                    line: link.line,
                    statement: link.statement.clone(),
                    reason: link
                        .reason
                        .clone()
                        .unwrap_or_else(|| "no cut applies".to_owned()),
                });
                continue;
            }
            for c in &link.cuts {
                cuts.push(self.build_cut(violation, link, c)?);
            }
        }
        cuts.sort_by_key(Cut::sort_key);
        let mut cuts = cuts.into_iter();
        let cut = cuts.next();
        Ok(Suggestion {
            module: violation.module.clone(),
            pattern: violation.pattern.clone(),
            chain: violation.chain.clone(),
            python: answer.python.version,
            verification: if cut.is_some() {
                Verification::NotRun
            } else {
                Verification::NoCandidate
            },
            cut,
            candidates: cuts.collect(),
            not_cuttable,
            rejections: Vec::new(),
            model_path: None,
        })
    }

    fn build_cut(
        &self,
        violation: &Violation,
        link: &LinkAnswer,
        c: &query::CutAnswer,
    ) -> Result<Cut, SuggestError> {
        let (Some(file), Some(line)) = (link.file.clone(), link.line) else {
            return Err(SuggestError::BadEdit {
                path: self.root.clone(),
                detail: "a cut without a file".to_owned(),
            });
        };
        let path = self.root.join(&file);
        let original = std::fs::read(&path).map_err(|e| SuggestError::io("read", &path, e))?;
        let count = edit::split_lines(&original).len();
        if link.line_count != Some(count) {
            return Err(SuggestError::BadEdit {
                path,
                detail: format!(
                    "the classifier read {:?} lines, the file has {count}",
                    link.line_count
                ),
            });
        }
        let edits: Vec<edit::LineEdit> = c
            .edits
            .iter()
            .map(|e| edit::LineEdit {
                start: e.start.saturating_sub(1),
                end: e.end.saturating_sub(1),
                lines: e.lines.clone(),
            })
            .collect();
        let (patched, applied) =
            edit::apply(&original, &edits).map_err(|detail| SuggestError::BadEdit {
                path: path.clone(),
                detail,
            })?;
        let diff = edit::unified_diff(&file, &original, &applied);
        let statement = link.statement.clone().unwrap_or_default();
        let module = violation.chain.get(link.index).cloned().unwrap_or_default();
        let mut notes = c.notes.clone();
        notes.extend(
            link.blocked
                .iter()
                .map(|b| format!("not offered here: {b}")),
        );
        if link.searched {
            notes.push(
                "the recorder did not say which line imported it; the line was found by reading the importer"
                    .to_owned(),
            );
        }
        let mut cut = Cut {
            link: link.index,
            module,
            file,
            line,
            kind: c.kind,
            statement,
            names: c.names.clone(),
            functions: c.functions.clone(),
            type_checking: c.type_checking,
            future_annotations: c.future_annotations,
            getattr: c.getattr,
            users: c.users.clone(),
            notes,
            summary: String::new(),
            lines_changed: edit::lines_changed(&diff),
            diff,
            patch: Patch { original, patched },
        };
        cut.summary = summary(&cut);
        Ok(cut)
    }
}

/// The chain's links as the classifier reads them.
fn links_of(v: &Violation) -> Vec<LinkRequest> {
    v.chain
        .iter()
        .enumerate()
        .map(|(i, module)| {
            let frame = v
                .chain_lines
                .get(i)
                .cloned()
                .flatten()
                .or_else(|| if i == 0 { v.origin.clone() } else { None });
            LinkRequest {
                index: i,
                module: module.clone(),
                file: frame.as_ref().map(|f| f.file.clone()),
                line: frame.as_ref().map(|f| f.line),
                func: frame.map(|f| f.func),
                importer: i.checked_sub(1).map(|p| v.chain[p].clone()),
            }
        })
        .collect()
}

/// A function an import moves into, in words, with the blocks of it when
/// the import goes there.
fn function_words(f: &FunctionSite) -> String {
    let at = format!("`{}` (line {})", f.name, f.line);
    if f.blocks.is_empty() {
        return at;
    }
    let blocks: Vec<String> = f
        .blocks
        .iter()
        .map(|b| match &b.block {
            Some(words) => format!("{words} of {at}"),
            None => format!("{at} before line {}", b.line),
        })
        .collect();
    blocks.join(" and ")
}

fn quoted(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

fn summary(c: &Cut) -> String {
    let at = format!("{}:{}", c.file, c.line);
    let names = quoted(&c.names);
    let mut s = match c.kind {
        CutKind::LazyImport => format!("make `{}` ({at}) a `lazy` import (PEP 810)", c.statement),
        CutKind::DropImport => format!("drop `{}` ({at}): nothing reads {names}", c.statement),
        CutKind::TypeChecking => format!(
            "{names} {} only read in annotations: import {} under `if TYPE_CHECKING:` ({at})",
            if c.names.len() == 1 { "is" } else { "are" },
            if c.names.len() == 1 { "it" } else { "them" },
        ),
        CutKind::MoveIntoBlocks | CutKind::MoveIntoFunctions | CutKind::ModuleGetattr => {
            let mut s = String::new();
            if !c.functions.is_empty() {
                let fns: Vec<String> = c.functions.iter().map(function_words).collect();
                let fns = match fns.len() {
                    1 => fns[0].clone(),
                    n => format!("{} and {}", fns[..n - 1].join(", "), fns[n - 1]),
                };
                // A module `__getattr__` cut can move into blocks too.
                s = if c.functions.iter().any(|f| !f.blocks.is_empty()) {
                    let sites: usize = c.functions.iter().map(|f| f.blocks.len().max(1)).sum();
                    format!(
                        "move `{}` ({at}) into {fns}: the narrowest {} that read{} {names}, so a call that takes another path never imports it",
                        c.statement,
                        if sites == 1 { "block" } else { "blocks" },
                        if sites == 1 { "s" } else { "" },
                    )
                } else {
                    format!(
                        "move `{}` ({at}) into {fns}, the only {} that read{} {names}",
                        c.statement,
                        if c.functions.len() == 1 {
                            "function"
                        } else {
                            "functions"
                        },
                        if c.functions.len() == 1 { "s" } else { "" },
                    )
                };
            }
            if c.getattr {
                let what = if c.file.ends_with("__init__.py") {
                    "the re-export"
                } else {
                    "the import"
                };
                let head = if s.is_empty() {
                    format!("turn {what} `{}` ({at}) into", c.statement)
                } else {
                    s.push_str(", and add");
                    String::new()
                };
                s.push_str(&head);
                s.push_str(&format!(
                    " a PEP 562 module `__getattr__` that imports {names} on first access (`__dir__` keeps listing {})",
                    if c.names.len() == 1 { "it" } else { "them" }
                ));
                if !c.users.is_empty() {
                    let users: Vec<String> = c
                        .users
                        .iter()
                        .map(|u| format!("{}:{}", u.file, u.line))
                        .collect();
                    s.push_str(&format!("; read through it by {}", users.join(", ")));
                }
            }
            if c.type_checking {
                s.push_str("; the annotations' names come from an `if TYPE_CHECKING:` import");
            }
            s
        }
    };
    if c.future_annotations {
        s.push_str(", with `from __future__ import annotations` so annotations are not evaluated at run time");
    }
    // What the edit does to this line; whether the forbidden module then
    // stays out of start-up is for verification to say (another route may
    // import it).
    s.push_str(&format!(
        "; then this line no longer imports `{}` at start-up",
        c.module
    ));
    s
}

#[cfg(test)]
mod tests;
