//! A pool's cold-start cost (`bench --pool N`): the open loop served by a
//! pool of N fresh workers through a dispatcher, the shape of a real
//! service (each request to a free worker), during which one worker is
//! killed with SIGKILL at `--replace-at` and a replacement started at once,
//! as a supervisor would; or one worker is added when the queue first holds
//! more than `--scale-at-depth` requests, as an autoscaler would. The
//! requests that arrived before that cold start, during it (its trigger to
//! the new worker's ready line) and after are reported apart
//! ([`phases::pool`]), with the rejections and the new worker's own
//! spawn-to-ready time.
//!
//! Files, one job each: `dispatch` (the queue, the free workers, the kill,
//! the limits, on the caller's thread) and `member` (one worker through the
//! one lifecycle on a thread of its own, fed by a channel: a worker handle
//! never crosses threads). Latency counts from each scheduled arrival, as
//! in the serve phase. Every worker is reaped before [`run_pool`] returns:
//! each member's lifecycle returns only once its worker is gone, and the
//! threads are scoped.

use std::sync::mpsc;

use phases::jsonl;
use phases::pool::{self, PoolRequest, PoolSetup, PoolStats, Role};
use phases::stats::Resampling;

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lifecycle::Lifecycle;
use crate::serve::{Plan, PoolOptions};
use crate::side::Side;

mod dispatch;
mod member;

use dispatch::Dispatch;
use member::Job;

/// What a pool run gives: its statistics and every request's record.
#[derive(Debug)]
pub struct PoolRun {
    /// `summary.json`'s `pool` entry.
    pub stats: PoolStats,
    /// Every request, as in `pool-requests.jsonl`.
    pub records: Vec<PoolRequest>,
}

/// A pool run of `variant`: the pool started and ready, the open loop of
/// `plan` through the dispatcher with the kill and the replacement, every
/// worker shut down; each request appended to `log`.
pub fn run_pool(
    side: &Side,
    opts: &PoolOptions,
    plan: &Plan,
    log: &mut jsonl::Writer,
    boot: &Resampling,
    stop: &Interrupt,
) -> Result<PoolRun> {
    opts.check(Some(plan.load))?;
    let variant = side.variant;
    let job = Job {
        lifecycle: Lifecycle {
            health: 0,
            ..side.lifecycle.clone()
        },
        cmd: side.cmd.clone(),
        plan: plan.clone(),
    };
    let (tx, rx) = mpsc::channel();
    let mut d = Dispatch::new(opts, &job, tx);
    let mut start_ns = 0;
    let started = std::thread::scope(|scope| {
        for _ in 0..opts.workers {
            d.start(scope, Role::Initial, None);
        }
        let ready = d.await_ready(&rx, stop);
        if ready.is_ok() {
            start_ns = spawn::monotonic_ns();
            let records = (0..plan.load.requests())
                .map(|i| {
                    let at = start_ns + plan.load.offset_ns(i).unwrap_or(0);
                    PoolRequest::scheduled(variant, i, at)
                })
                .collect();
            let kill_at = opts.replace_at.map(|s| start_ns + (s * 1e9).round() as u64);
            d.serve(scope, &rx, records, kill_at, stop);
        }
        d.close(&rx);
        ready
    });
    let ended_early = d.ended_early.take();
    let mut records = std::mem::take(&mut d.records);
    let members = d.members();
    if let Err(why) = started {
        return Err(Error::PoolStart(if stop.is_set() {
            format!("the pool run stopped before serving: {why}")
        } else {
            format!(
                "the pool could not start: {why}; fix the worker's start-up (run `coldstart bench` without --pool to see its error) and run again"
            )
        }));
    }
    pool::assign_windows(&mut records, &members);
    log.append(&records).map_err(crate::error::jsonl)?;
    let setup = PoolSetup {
        variant,
        workers: opts.workers,
        load: plan.load,
        request: plan.describe(),
        replace_at_s: opts.replace_at,
        max_wait_ms: opts.max_wait_ms,
        queue_cap: opts.queue_cap,
        scale_at_depth: opts.scale_at_depth,
    };
    let stats =
        PoolStats::of(setup, start_ns, &records, members, ended_early, boot).map_err(|cause| {
            Error::Stats {
                context: "could not summarise the pool run",
                cause,
            }
        })?;
    Ok(PoolRun { stats, records })
}

#[cfg(test)]
mod tests;
