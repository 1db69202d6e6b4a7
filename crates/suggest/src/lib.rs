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

mod cut;
mod edit;
mod error;
mod query;
mod suggester;
mod suggestion;
mod verify;

pub use cut::{BlockSite, Cut, CutKind, FunctionSite, SourceLine, Uncuttable};
pub use error::{CheckError, SuggestError};
pub use suggester::Suggester;
pub use suggestion::{RejectReason, Rejection, Suggestion, Verification};
pub use verify::{PatchedCopy, VerifyOutcome};

#[cfg(test)]
mod tests;
