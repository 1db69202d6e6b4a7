//! The serve phase and the memory view of `coldstart bench`: after
//! ready, requests at a closed or an open loop, each reply checked; and a
//! separate, untimed run with tracemalloc that reads Python-traced memory
//! beside RSS.
//!
//! The open loop runs on one thread over the [`spawn::Worker`] API
//! (`send`, then `recv` of the oldest reply, in order: the protocol is
//! FIFO). A worker handle is not shared between threads and a `recv`
//! timeout ends the worker, so the loop never waits on a reply with a short
//! timeout: it writes every request that is due, then waits for the oldest
//! reply; requests that fall due meanwhile are written as soon as that
//! reply is read. Their latency still runs from their scheduled time (the
//! queue wait is counted, no coordinated omission), and each record keeps
//! the harness's own send lag (`sent - scheduled`) so the reader can see
//! how late the harness was.
//!
//! The rooms: `options` (what is asked, checked), `plan` (the request and
//! the judging of its replies), `run` (the loops and the worker's
//! lifecycle), `outcome` (what a failed worker leaves its requests, the
//! clipped error words).

use crate::error::{Result, invalid};
use crate::target::Target;

mod options;
mod outcome;
mod plan;
mod run;
#[cfg(test)]
mod tests;

pub use options::{PoolOptions, ServeOptions};
pub(crate) use outcome::{clip, clip_to, outcome_of, short_error};
pub use plan::Plan;
pub(crate) use run::SPIN_NS;
pub use run::{ServePhase, ServeWorker, Served, run_serve, serve};

/// Checks the serve options against a target before any trial runs, so a
/// typo fails at once rather than after the timed trials.
pub fn validate(opts: &ServeOptions, target: &Target) -> Result<()> {
    if let Some(pool) = &opts.pool {
        pool.check(opts.load()?)?;
    }
    if let Some(load) = opts.load()? {
        Plan::new(load, opts.request.as_deref(), target)?;
    } else if opts.request.is_some() {
        invalid!("--request needs a serve phase: add --requests N or --rate R");
    }
    Ok(())
}
