//! The serve phase itself: requests at a closed or an open loop on one
//! worker after its ready line, each reply judged, and the fresh worker's
//! whole lifecycle around them.

use std::collections::VecDeque;
use std::time::Duration;

use phases::jsonl;
use phases::serve::{OfferedLoad, RequestOutcome, RequestRecord, ServeStats};
use phases::stats::Resampling;
use spawn::worker_proto::Request;
use timeline::{Variant, WorkerRecord};

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::lifecycle::{Halt, Hooks, Lifecycle, Started};

use super::outcome::{clip_to, outcome_of, short_error};
use super::plan::Plan;

/// The records of a serve phase, and the error that ended the worker
/// early (the worker is then gone: do not shut it down).
#[derive(Debug)]
pub struct Served {
    /// One per request scheduled (and, once stopped, written).
    pub records: Vec<RequestRecord>,
    /// The error that ended the worker early.
    pub error: Option<spawn::Error>,
    /// `stop` said yes before every request was written.
    pub stopped: bool,
}

/// What became of requests still owed when the worker ended with `e`: the
/// oldest gets the error's own outcome, the rest are lost.
fn fail_pending(records: &mut [RequestRecord], pending: &mut VecDeque<usize>, e: &spawn::Error) {
    let reason = short_error(e);
    if let Some(oldest) = pending.pop_front() {
        records[oldest].outcome = outcome_of(e);
    }
    for i in pending.drain(..) {
        records[i].outcome = RequestOutcome::Lost {
            reason: format!("the worker ended before answering: {reason}"),
        };
    }
}

/// Runs the serve phase on a worker after its ready line.
/// `stop` is asked before each write: once it says yes (Ctrl-C), no more
/// requests are written, the replies owed are still read, and the requests
/// not written yet are left out of the run.
pub fn serve(
    w: &mut spawn::Worker,
    variant: Variant,
    plan: &Plan,
    stop: &dyn Fn() -> bool,
) -> Served {
    let n = plan.load.requests();
    let requests: Vec<Request> = (0..n).map(|i| plan.request(i)).collect();
    let mut records: Vec<RequestRecord> = Vec::with_capacity(n);
    let mut pending: VecDeque<usize> = VecDeque::new();
    let start = spawn::monotonic_ns();
    if let OfferedLoad::Open { .. } = plan.load {
        for i in 0..n {
            let offset = plan.load.offset_ns(i).unwrap_or(0);
            records.push(RequestRecord::scheduled(variant, i, start + offset));
        }
    }
    let mut next = 0;
    let mut stopped = false;
    loop {
        if !stopped && stop() {
            stopped = true;
            if let OfferedLoad::Open { .. } = plan.load {
                records.truncate(next);
            }
        }
        match plan.load {
            OfferedLoad::Closed { .. } if stopped => {}
            OfferedLoad::Closed { in_flight, .. } => {
                if next == n && pending.is_empty() {
                    break;
                }
                // Keep `in_flight` requests written and unanswered.
                while records.len() < n && pending.len() + (records.len() - next) < in_flight {
                    records.push(RequestRecord::scheduled(
                        variant,
                        records.len(),
                        spawn::monotonic_ns(),
                    ));
                }
            }
            OfferedLoad::Open { .. } => {
                let now = spawn::monotonic_ns();
                if next < records.len() && pending.is_empty() && records[next].scheduled_at_ns > now
                {
                    // Nothing owed: wait until the next request is due.
                    wait_until(records[next].scheduled_at_ns, now);
                }
            }
        }
        // Write every request that is due.
        let now = spawn::monotonic_ns();
        while next < records.len() && records[next].scheduled_at_ns <= now {
            match w.send(&requests[next]) {
                Ok(at) => {
                    records[next].sent_at_ns = Some(at);
                    pending.push_back(next);
                    next += 1;
                }
                Err(e) => {
                    records[next].outcome = RequestOutcome::Lost {
                        reason: format!("could not be written: {}", short_error(&e)),
                    };
                    fail_pending(&mut records, &mut pending, &e);
                    return Served {
                        records,
                        error: Some(e),
                        stopped,
                    };
                }
            }
        }
        if pending.is_empty() {
            if next == n || stopped {
                break;
            }
            continue;
        }
        match w.recv(plan.timeout) {
            Ok(reply) => {
                // The request whose id the reply carries (a worker that
                // answers concurrently may answer out of order), else the
                // oldest: as `spawn` matched it.
                let by_id = reply
                    .value
                    .to_object()
                    .get("id")
                    .and_then(|id| pending.iter().position(|&i| id.as_u64() == Some(i as u64)));
                let at = by_id.unwrap_or(0);
                let index = pending.remove(at).expect("a pending request");
                let outcome = plan.judge(index, &reply.value);
                records[index].answered(reply.read_at_ns, outcome);
            }
            Err(e) => {
                fail_pending(&mut records, &mut pending, &e);
                return Served {
                    records,
                    error: Some(e),
                    stopped,
                };
            }
        }
    }
    Served {
        records,
        error: None,
        stopped,
    }
}

/// How close to a due time the open loop stops sleeping and yields in a
/// loop instead: a sleep wakes tens of microseconds late, and that
/// lateness would count in every request's latency.
pub(crate) const SPIN_NS: u64 = 200_000;

/// Returns at `due` (monotonic ns), given the time `now`: sleeps until
/// [`SPIN_NS`] before it, then yields the CPU until it is reached.
fn wait_until(due: u64, now: u64) {
    if due > now + SPIN_NS {
        std::thread::sleep(Duration::from_nanos(due - now - SPIN_NS));
    }
    while spawn::monotonic_ns() < due {
        std::thread::yield_now();
    }
}

/// The worker of a serve phase: its side and its life (pid, marks, exit),
/// what a bench run's trace draws its requests against.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeWorker {
    /// The side whose worker served.
    pub variant: Variant,
    /// Its life as a trial's worker record (no health round trips: the
    /// serve phase's requests are in its [`RequestRecord`]s).
    pub record: WorkerRecord,
}

/// What one serve phase gave: its statistics, its requests (as appended
/// to `requests.jsonl`) and its worker.
#[derive(Debug)]
pub struct ServePhase {
    /// The phase's statistics.
    pub stats: ServeStats,
    /// One per request scheduled.
    pub records: Vec<RequestRecord>,
    /// The worker that served them.
    pub worker: ServeWorker,
}

/// The serve phase of one fresh worker (not one of the timed trials): spawn,
/// ready, serve, shutdown; every record appended to `log`
/// (`requests.jsonl`).
pub fn run_serve(
    lifecycle: &Lifecycle,
    cmd: &spawn::Command,
    variant: Variant,
    plan: &Plan,
    log: &mut jsonl::Writer,
    boot: &Resampling,
    stop: &Interrupt,
) -> Result<ServePhase> {
    // A fresh worker through the one lifecycle, serving before its
    // shutdown; no health round trips of its own.
    let lifecycle = Lifecycle {
        health: 0,
        ..lifecycle.clone()
    };
    let mut hooks = Serving {
        variant,
        plan,
        stop,
        served: None,
    };
    let lived = lifecycle.drive(cmd, &mut hooks);
    let mut record = lived.record(match &lived.end {
        Ok(_) => timeline::Outcome::Correct,
        Err(f) => timeline::Outcome::Failed {
            stage: f.stage.clone(),
            message: clip_to(&f.to_string(), 4000),
        },
    });
    // This lifecycle sends no health of its own: a health round trip in
    // its marks is one of the serve phase's requests, kept in `served`.
    record.marks.health.clear();
    let worker = ServeWorker { variant, record };
    let mut ended = None;
    if let Err(f) = lived.end {
        match f.stage {
            timeline::Stage::Spawn | timeline::Stage::Startup => {
                return Err(Error::lifecycle(
                    "the worker of the serve phase did not become ready",
                    f,
                ));
            }
            ref s if s.at_end() => ended = Some(format!("after the serve phase: {f}")),
            _ => ended = Some(f.to_string()),
        }
    }
    let served = hooks.served.expect("a worker that became ready served");
    if served.stopped && ended.is_none() {
        ended = Some(format!(
            "interrupted: {} of {} requests sent",
            served.records.len(),
            plan.load.requests()
        ));
    }
    log.append(&served.records).map_err(crate::error::jsonl)?;
    let stats = ServeStats::of(
        variant,
        plan.load,
        plan.describe(),
        &served.records,
        ended,
        boot,
    )
    .map_err(|cause| Error::Stats {
        context: "could not summarise the serve phase",
        cause,
    })?;
    Ok(ServePhase {
        stats,
        records: served.records,
        worker,
    })
}

/// The serve phase's hook: the requests, between ready and shutdown.
struct Serving<'a> {
    variant: Variant,
    plan: &'a Plan,
    stop: &'a Interrupt,
    served: Option<Served>,
}

impl Hooks for Serving<'_> {
    fn before_shutdown(&mut self, w: &mut Started<'_>) -> std::result::Result<(), Halt> {
        let stop = self.stop;
        let mut served = serve(&mut w.worker, self.variant, self.plan, &|| stop.is_set());
        let error = served.error.take();
        self.served = Some(served);
        error.map_or(Ok(()), |e| Err(Halt::Ended(e)))
    }
}
