//! A pool's cold-start cost (`bench --pool N`): the open loop served by a
//! pool of N fresh workers through a dispatcher, the shape of a real
//! service (each request to a free worker), during which one worker is
//! killed with SIGKILL at `--replace-at` and a replacement started at once,
//! as a supervisor would. The requests that arrived before the kill,
//! during the replacement (kill to its ready line) and after are reported
//! apart ([`phases::pool`]), with the rejections and the replacement's own
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
use phases::serve::Load;
use phases::stats::Resampling;

use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::lifecycle::Lifecycle;
use crate::serve::Plan;
use crate::side::Side;

mod dispatch;
mod member;

use dispatch::Dispatch;
use member::Job;

/// How the pool runs: its size, the kill, the queue's limits.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolOptions {
    /// Workers in the pool (`--pool N`).
    pub workers: usize,
    /// Kill one worker this many seconds after the load starts and start
    /// a replacement (`--replace-at`).
    pub replace_at: Option<f64>,
    /// A request that waits longer than this for a free worker is
    /// rejected, ms (`--max-wait`).
    pub max_wait_ms: Option<f64>,
    /// An arrival that finds this many requests queued is rejected
    /// (`--queue-cap`).
    pub queue_cap: Option<usize>,
}

impl PoolOptions {
    /// Refuses a pool that cannot run under `load` (the serve options'
    /// load): every error says what to change.
    pub fn check(&self, load: Option<Load>) -> Result<()> {
        if self.workers == 0 {
            invalid!("--pool must be at least 1 worker");
        }
        let duration = match load {
            Some(Load::Open { duration_s, .. }) => duration_s,
            Some(Load::Closed { .. }) => invalid!(
                "--pool serves an open loop: add --rate R (with --duration S or --requests N); a closed loop waits on the replies it would measure"
            ),
            None => invalid!("--pool needs a load: add --rate R and --duration S"),
        };
        if let Some(at) = self.replace_at
            && !(at.is_finite() && at > 0.0 && at < duration)
        {
            invalid!(
                "--replace-at {at} s is not inside the load's {duration} s: pick a time after 0 and before {duration}"
            );
        }
        if let Some(w) = self.max_wait_ms
            && !(w.is_finite() && w > 0.0)
        {
            invalid!("--max-wait must be a positive number of milliseconds, got {w}");
        }
        if self.queue_cap == Some(0) {
            invalid!("--queue-cap must be at least 1 (a cap of 0 rejects every request)");
        }
        Ok(())
    }

    /// `2 workers, kill one at 1.5 s`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} worker{}",
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        );
        if let Some(at) = self.replace_at {
            s.push_str(&format!(", one killed at {at} s and replaced"));
        }
        s
    }
}

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
            d.start(scope, Role::Initial);
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
        return Err(Error::PoolStart(why));
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
