//! Verdicts: a worker's import evidence judged against a [`Policy`].
//!
//! The evidence of one process is its `-X importtime` log (the tree: who
//! imported whom, and what it cost), its recorder [`Recording`](crate::recorder::Recording) (every
//! attempt, found or not, blocked, who asked, when) and the worker's
//! [`Timeline`](timeline::Timeline) (ready, requests, shutdown; `spawn` records it) on the same
//! monotonic clock, placed by [`Timeline::stage_at`](timeline::Timeline::stage_at).
//! [`judge`] returns a [`ProcessVerdict`]: one [`Violation`] per forbidden
//! module that entered the process on its own (a forbidden module imported
//! by another forbidden module is counted beneath it, not repeated), with
//! the chain from the top-level import down to it, the first-party line
//! that started it, the protocol stage (shown as its phase), the cost of its subtree, and
//! whether it was loaded, only attempted, or blocked. [`merge`] folds the
//! verdicts of a target's fresh processes into one list.
//!
//! Every image the recorder saw is judged alike: the worker, the image it
//! exec'd into, its subprocesses, forked children and `multiprocessing`
//! workers; each violation says in which process it happened
//! ([`Violation::process`]), which recorder channel saw it
//! ([`Violation::channel`]) and, for a module loaded lazily, the line that
//! declared it and the line that made it real ([`Violation::lazy`]).
//!
//! Either source may be missing: `--log` judges an importtime log alone;
//! a worker run with `-S`, `-I` or `-E` never ran the recorder, and the
//! verdict says so ([`RecorderState::DidNotRun`]) and uses importtime alone.
//! When the process that answered the protocol left neither
//! ([`judge_answered`] with the harness's [`Answering`]), the verdict holds
//! a [`MissingEvidence`] that the caller must turn into an error, never a
//! pass. Behind a launcher that forks (`uv run`, a shell that stays the
//! parent, `make`), the process that answered is the recorded image the
//! ready line's `pid` names, proved to descend from the process the
//! harness started ([`Answered`], the processes between in
//! [`Answered::through`]). Nothing here starts a process or renders for
//! people.

mod answered;
mod chain;
mod judge;
mod merge;
mod missing;
mod model;
mod policy;
mod slowest;
#[cfg(test)]
mod tests;

pub use answered::{Answered, Launcher};
pub use judge::{judge, judge_answered};
pub use merge::{MergedViolation, merge};
pub use missing::{Answering, EvidenceKind, MissingEvidence, MissingReason};
pub use model::{
    AllowedHit, ChainSource, Evidence, ImportStatus, LazyUse, ProcessVerdict, RecorderState,
    Violation,
};
pub use policy::{Allowance, Classification, Policy, PolicyError};
pub use slowest::{
    CostlyImport, MAIN, SlowImport, by_package, costly_imports, default_min_ms,
    first_party_modules, root_imports, slowest,
};
