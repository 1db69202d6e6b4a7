//! The start-up history store: every measured run of a target at a commit
//! in an environment, kept with its raw trials (`timeline::TrialRecord`,
//! as JSON beside the columns a query needs: ready, exit, CPU, peak RSS,
//! status) and its start-up import tree (each module's cumulative and
//! self time, the first-party line that imported it).
//!
//! It owns the schema and its ordered migrations ([`schema`]; a store of
//! a newer schema is refused, never rewritten), one [`Store`] API over an
//! embedded SQLite file (WAL, a busy timeout) and a shared PostgreSQL
//! database ([`Location`]; a `postgres://` URL's password is shown as
//! `***` in every `Display`, `Debug` and error, and never stored), and the
//! run's natural key ([`RunKey`]: commit, target, environment
//! fingerprint), under which each run is written once, in one transaction.
//!
//! It does not measure anything, start a worker, run git or read the
//! config: `harness::history` measures a commit and hands it a [`Run`];
//! `settings` reads `history = "..."` into a [`Location`].

mod error;
mod location;
mod run;
pub mod schema;
mod sql;
mod store;

#[cfg(any(test, feature = "test-server"))]
pub mod testpg;
#[cfg(test)]
mod tests;

pub use error::{Error, Result};
pub use location::{Location, PgUrl};
pub use run::{Commit, Environment, ModuleTime, Run, RunKey, RunOutcome, StoredRun, content_hash};
pub use store::{RunFilter, Store, Written};

/// The default history file, relative to the project root.
pub const DEFAULT_PATH: &str = ".coldstart/history.db";
