//! harness: coldstart's orchestration as a library, with typed inputs and
//! outputs, so another project's own xtask can run the same check and bench
//! as the `coldstart` command.
//!
//! What it owns:
//! - [`target`]: a worker to run, fully resolved ([`Target`], [`Origin`]).
//! - [`lifecycle`]: the one place that runs a worker from spawn to reaped
//!   exit: spawn with the stack dump armed, the ready line, health round
//!   trips, shutdown with the target's policy. Every task goes through it.
//! - [`check`]: the import-boundary check: N fresh instrumented processes
//!   run concurrently and judged by `importguard`, giving a
//!   `answers::check::TargetReport`; the one verification of a patched
//!   copy ([`check::verify`]: the check there, then the target's model
//!   path, its `verify` requests and `verify_command`); and what the check costs
//!   ([`check::cost`], `cargo xtask check-cost`).
//! - [`check_run`]: the whole `check` command as one call (each target,
//!   suggest, fix and the second check, the snapshot gate, the exit code
//!   that result implies).
//! - [`lazy`]: `coldstart lazy`: the costly start-up imports of the
//!   project's own code priced (ms and MiB), cut, each cut verified with
//!   [`check::verify`] and its saving measured by the bench's interleaved
//!   loop.
//! - [`diff`]: the working tree against a base revision checked out into
//!   a temporary git worktree: the bench's interleaved loop with the base
//!   as side A (CPU time as the basis) and the import trees of both sides.
//! - [`provenance`]: which code a tree's worker ran: every import of the
//!   project's own modules, from the recorder's records, checked to come
//!   from that tree (an editable install, an absolute `PYTHONPATH` entry
//!   or an installed copy named when one does not).
//! - [`trials`]: the bench's trial loop (warm-up, interleaving, precision,
//!   concurrency), its files (`trials.jsonl`, `summary.json`, ...), and
//!   [`probe_check`], the bench measured against an independent probe
//!   (`cargo xtask probe-check`).
//! - [`side`]: one side of a bench run, ready to spawn, as the trials, the
//!   serve phase and the memory view take it.
//! - [`serve`] and [`memory`]: the serve phase after ready and the memory
//!   view, each on a fresh untimed worker; [`pool`]: the open loop through
//!   a dispatcher over a pool of workers, one killed and replaced (a pool's
//!   cold-start cost).
//! - [`profile`]: a worker's start-up under `py-spy record`.
//! - [`pyspy`]: py-spy located and run for stack dumps.
//! - [`live`]: processes coldstart did not start (a running worker, the
//!   service above the workers): their stacks once, a sampler left running
//!   for a live view, a recording written as `profile` writes its files.
//! - [`env`](mod@env): the environment record and the embedded interpreter query.
//! - [`tree_trace`]: `coldstart trace`: a parent and its Python workers
//!   sampled on one clock, the parent's proven waits on a worker, built
//!   into the `trace` crate's model for its writers; [`otlp`]: the
//!   parent's own spans received over OTLP/HTTP for it.
//! - [`importlog`]: an importtime log read from a file, stdin or a live
//!   command.
//! - [`interrupt`]: the explicit interrupt token (Ctrl-C).
//!
//! What it deliberately does not own: the command line, config files and
//! the exit codes of the other commands (the `coldstart` crate); the
//! check's data model (`answers::check`); parsing importtime and judging
//! imports (`importguard`); statistics (`phases`); rendering (`report`);
//! one process's mechanics (`spawn`). Nothing here prints: progress is
//! announced to the caller's [`trials::Progress`], which the command line
//! renders.

#![warn(missing_docs)]

pub mod bisect;
pub mod check;
pub mod check_run;
pub mod diff;
pub mod env;
pub mod error;
pub mod history;
pub mod importlog;
pub mod interrupt;
pub mod lazy;
pub mod lifecycle;
pub mod live;
pub mod memory;
pub mod otlp;
pub mod pool;
pub mod probe_check;
pub mod profile;
pub mod provenance;
pub mod pyspy;
mod scratch;
pub mod serve;
pub mod side;
pub mod snapshot;
#[cfg(test)]
mod standin;
pub mod target;
pub mod tree_trace;
pub mod trials;

pub use error::{Error, Result};
pub use interrupt::{Interrupt, OnPress, Press, Signal};
pub use lifecycle::{Lifecycle, Spawned, StackDump, Started};
pub use spawn::{Stop, Transport};
pub use target::TCP_STOP_AFTER;
pub use target::{DEFAULT_FORBIDDEN, Origin, Target};
