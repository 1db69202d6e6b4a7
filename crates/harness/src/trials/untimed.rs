//! After the timed trials, never part of them: each side's serve phase
//! and memory view, each on fresh workers.

use std::path::Path;

use phases::jsonl;
use phases::memory::MemoryView;
use phases::pool::PoolStats;
use phases::serve::{RequestRecord, ServeStats};
use phases::stats::Resampling;

use super::progress::{Event, Progress};
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::serve::{self, ServeOptions, ServeWorker};
use crate::side::Side;

/// The serve phases and memory views of a bench run.
#[derive(Debug, Clone, Default)]
pub(super) struct Untimed {
    /// One per side that served.
    pub serve: Vec<ServeStats>,
    /// One per side with a memory view.
    pub memory: Vec<MemoryView>,
    /// A serve phase or memory view that could not be run, and why.
    pub failures: Vec<String>,
    /// Every request of every serve phase (also in `requests.jsonl`).
    pub requests: Vec<RequestRecord>,
    /// One per side that served through a pool (`--pool`).
    pub pool: Vec<PoolStats>,
    /// The worker of each serve phase (not a pool's).
    pub serve_workers: Vec<ServeWorker>,
}

/// After the timed trials: for each side, a serve phase on a fresh worker
/// (or, with a pool, a pool run on fresh workers) when asked for, then a
/// memory view on another. Request records go to `dir/requests.jsonl`
/// (a pool's to `dir/pool-requests.jsonl`).
pub(super) fn run_untimed(
    sides: &[Side],
    opts: &ServeOptions,
    dir: &Path,
    boot: &Resampling,
    stop: &Interrupt,
    progress: &mut dyn Progress,
) -> Result<Untimed> {
    let mut extras = Untimed::default();
    let load = opts.load()?;
    let mut pool_log = match (load, &opts.pool) {
        (Some(_), Some(_)) => Some(
            jsonl::Writer::create(&dir.join("pool-requests.jsonl")).map_err(crate::error::jsonl)?,
        ),
        _ => None,
    };
    let mut log = match load {
        Some(_) if opts.pool.is_some() => None,
        Some(_) => {
            Some(jsonl::Writer::create(&dir.join("requests.jsonl")).map_err(crate::error::jsonl)?)
        }
        None => None,
    };
    for side in sides {
        if stop.is_set() {
            break;
        }
        let plan = match load {
            Some(load) => Some(serve::Plan::new(
                load,
                opts.request.as_deref(),
                &side.target,
            )?),
            None => None,
        };
        if let (Some(plan), Some(pool), Some(log)) = (&plan, &opts.pool, pool_log.as_mut()) {
            progress.announce(&Event::Pool {
                variant: side.variant,
                pool: pool.describe(),
                load: plan.load.describe(),
            });
            match crate::pool::run_pool(side, pool, plan, log, boot, stop) {
                Ok(run) => extras.pool.push(run.stats),
                Err(e) => extras
                    .failures
                    .push(format!("pool run ({}): {e}", side.variant)),
            }
        } else if let (Some(plan), Some(log)) = (&plan, log.as_mut()) {
            progress.announce(&Event::Serve {
                variant: side.variant,
                load: plan.load.describe(),
                request: plan.describe(),
            });
            match serve::run_serve(
                &side.lifecycle,
                &side.cmd,
                side.variant,
                plan,
                log,
                boot,
                stop,
            ) {
                Ok(phase) => {
                    extras.serve.push(phase.stats);
                    extras.requests.extend(phase.records);
                    extras.serve_workers.push(phase.worker);
                }
                Err(e) => extras
                    .failures
                    .push(format!("serve phase ({}): {e}", side.variant)),
            }
        }
        if opts.memory {
            progress.announce(&Event::Memory {
                variant: side.variant,
            });
            match crate::memory::run_memory(side, plan.as_ref(), stop) {
                Ok(m) => extras.memory.push(m),
                Err(e) => extras
                    .failures
                    .push(format!("memory view ({}): {e}", side.variant)),
            }
        }
    }
    Ok(extras)
}
