//! A pool's cold-start cost: an open loop served by a pool of workers
//! through a dispatcher, during which one worker is killed and replaced
//! (or one is added when the queue passes a depth), and what the requests
//! that arrived while the new worker started paid for it.
//!
//! Definitions (so every figure can be recomputed from
//! `pool-requests.jsonl`):
//! - Each request has a **scheduled** arrival, `start + i / R`, fixed
//!   before the run. The dispatcher queues it on arrival and hands it to a
//!   free worker (the one idle longest) when one is free: **dispatched**.
//!   **queue wait** is `dispatched - scheduled` (the dispatcher's own
//!   lateness included), **service** `received - dispatched`, and
//!   **latency** `received - scheduled`, as in [`crate::serve`]: the wait
//!   for a free worker is part of it (no coordinated omission).
//! - A request the dispatcher turns away (its queue already held the cap,
//!   or it waited past the longest wait allowed) is `rejected`, counted,
//!   never dropped; a request in flight on the worker that is killed is
//!   `lost`. Both are **rejections**, with error replies and timeouts.
//! - The **cold start** is triggered by the kill (stamped just before the
//!   SIGKILL; the replacement is started at once) or by the queue passing
//!   the depth asked for (stamped when it did; a worker is added at once).
//! - The **windows**, by scheduled arrival: `before` the trigger; the
//!   `cold_start` window from the trigger to the new worker's ready line;
//!   `after` it. Without a cold start every request is `before`; a new
//!   worker not ready by the end leaves no `after`.
//! - Per window: latency and queue wait as type-7 median, p90, p99 with
//!   seeded percentile-bootstrap intervals ([`crate::serve::latency_stats`],
//!   the one percentile), over `ok` requests; a window of fewer than 100
//!   says that its p99 is within its slowest one or two requests.
//! - **What one cold start costs** ([`ColdStartCost`]): the cold-start
//!   window's p99 over the `before` window's, and the whole run's p99 over
//!   the `before` window's (what the run's p99 would have been without it);
//!   and the new worker's own spawn-to-ready time.

use serde::{Deserialize, Serialize};
use timeline::Variant;

use crate::ms;
use crate::serve::{LatencyStats, OfferedLoad, RequestOutcome, RequestRecord, latency_stats};
use crate::stats::{self, Resampling, StatsError};

/// Where a request's scheduled arrival falls against the cold start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// Before the cold start's trigger (every request, without one).
    Before,
    /// From the trigger (the kill, the queue passing the depth) to the new
    /// worker's ready line.
    ColdStart,
    /// After the new worker's ready line.
    After,
}

impl Window {
    /// `before`, `cold_start`, `after`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Window::Before => "before",
            Window::ColdStart => "cold_start",
            Window::After => "after",
        }
    }

    /// The window of an arrival at `at_ns`, given the cold start's trigger
    /// and the new worker's ready line (monotonic ns).
    pub fn of(at_ns: u64, triggered_at_ns: Option<u64>, ready_at_ns: Option<u64>) -> Window {
        match (triggered_at_ns, ready_at_ns) {
            (None, _) => Window::Before,
            (Some(k), _) if at_ns < k => Window::Before,
            (Some(_), Some(r)) if at_ns >= r => Window::After,
            (Some(_), _) => Window::ColdStart,
        }
    }
}

/// One request of a pool run: one line of `pool-requests.jsonl`, the
/// serve phase's record with the pool's own fields beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRequest {
    /// The request as the serve phase records it (`sent_at_ns` is the
    /// worker's write, after the dispatch).
    #[serde(flatten)]
    pub request: RequestRecord,
    /// The pool slot of the worker it went to (the first workers are
    /// `0..N`, the new one `N`); `None` when it never went to one.
    pub worker: Option<usize>,
    /// When the dispatcher handed it to a free worker (monotonic ns).
    pub dispatched_at_ns: Option<u64>,
    /// Where its arrival falls against the cold start.
    pub window: Window,
}

impl PoolRequest {
    /// A request due at `scheduled_at_ns`, not dispatched yet.
    pub fn scheduled(variant: Variant, index: usize, scheduled_at_ns: u64) -> PoolRequest {
        PoolRequest {
            request: RequestRecord::scheduled(variant, index, scheduled_at_ns),
            worker: None,
            dispatched_at_ns: None,
            window: Window::Before,
        }
    }

    /// `dispatched - scheduled`, ns, once dispatched.
    pub fn queue_wait_ns(&self) -> Option<u64> {
        self.dispatched_at_ns
            .map(|d| d.saturating_sub(self.request.scheduled_at_ns))
    }

    /// `received - dispatched`, ns, once answered.
    pub fn service_ns(&self) -> Option<u64> {
        Some(
            self.request
                .received_at_ns?
                .saturating_sub(self.dispatched_at_ns?),
        )
    }
}

/// Whether a pool worker was one of the first, a replacement or added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Started before the load, ready before its first request.
    Initial,
    /// Started right after the kill, as a supervisor would.
    Replacement,
    /// Started when the queue passed the depth asked for, as an
    /// autoscaler would.
    Added,
}

impl Role {
    /// `initial`, `replacement`, `added`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Initial => "initial",
            Role::Replacement => "replacement",
            Role::Added => "added",
        }
    }
}

/// One worker of the pool and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolWorker {
    /// Its slot (`0..N` the first workers, `N` the new one).
    pub slot: usize,
    /// One of the first workers, the replacement or the added one.
    pub role: Role,
    /// What started it (monotonic ns): the kill for a replacement, the
    /// queue passing the depth for an added worker; `None` for the first.
    pub triggered_at_ns: Option<u64>,
    /// Its pid (its process group), once started.
    pub pid: Option<u32>,
    /// When it was spawned (monotonic ns), once ready.
    pub spawned_at_ns: Option<u64>,
    /// When its ready line was read (monotonic ns).
    pub ready_at_ns: Option<u64>,
    /// Spawn to ready line, ms.
    pub ready_ms: Option<f64>,
    /// When the pool killed it (SIGKILL to its group; monotonic ns).
    pub killed_at_ns: Option<u64>,
    /// Requests it answered.
    pub answered: usize,
    /// How it ended: `shut down`, or the error of its end.
    pub end: String,
    /// It ended otherwise than asked (not shut down, not the pool's kill).
    pub failed: bool,
}

/// One window's requests and figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Which window.
    pub window: Window,
    /// Its start from the load's start, seconds.
    pub from_s: f64,
    /// Its end from the load's start, seconds; `None`: the end of the run.
    pub to_s: Option<f64>,
    /// Requests that arrived in it.
    pub arrived: usize,
    /// Of them, answered correctly.
    pub ok: usize,
    /// Turned away by the dispatcher (queue full, waited too long).
    pub rejected: usize,
    /// Lost on a worker that ended (the killed one) before answering.
    pub lost: usize,
    /// No reply within the request timeout.
    pub timeouts: usize,
    /// Error replies.
    pub error_replies: usize,
    /// Replies that failed a correctness check.
    pub wrong_replies: usize,
    /// Rejected, lost, timeouts and error replies.
    pub rejections: usize,
    /// Latency over its `ok` requests, ms.
    pub latency_ms: Option<LatencyStats>,
    /// Queue wait over its `ok` requests, ms.
    pub queue_wait_ms: Option<LatencyStats>,
    /// Median service time over its `ok` requests, ms.
    pub service_median_ms: Option<f64>,
    /// Why its figures are thin (few requests), when they are.
    pub thin: Option<String>,
}

/// What one cold start cost, against the `before` window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ColdStartCost {
    /// The new worker: a replacement (after the kill) or an added one.
    pub role: Role,
    /// The trigger (the kill, the queue passing the depth), from the load's start, seconds.
    pub triggered_at_s: f64,
    /// The new worker's spawn to ready line, ms; `None` when it never became ready.
    pub ready_ms: Option<f64>,
    /// The trigger to the new worker's ready line, ms.
    pub window_ms: Option<f64>,
    /// The `before` window's p99 latency, ms.
    pub p99_before_ms: Option<f64>,
    /// The cold-start window's p99 latency, ms.
    pub p99_cold_start_ms: Option<f64>,
    /// `p99_cold_start - p99_before`, ms.
    pub extra_p99_ms: Option<f64>,
    /// The whole run's p99 latency, ms.
    pub p99_run_ms: Option<f64>,
    /// `p99_run - p99_before`, ms: what the one cold start added to the
    /// run's p99.
    pub run_extra_p99_ms: Option<f64>,
}

/// How a pool run was asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolSetup {
    /// The variant (A or B) whose workers served.
    pub variant: Variant,
    /// Workers in the pool before the cold start.
    pub workers: usize,
    /// The open loop offered to the pool.
    pub load: OfferedLoad,
    /// The request as sent (without its `id`).
    pub request: serde_json::Value,
    /// When one worker is killed and replaced, seconds from the load's start.
    pub replace_at_s: Option<f64>,
    /// The longest a request may wait for a free worker before it is rejected, ms.
    pub max_wait_ms: Option<f64>,
    /// The most requests the queue holds; an arrival beyond is rejected.
    pub queue_cap: Option<usize>,
    /// Add one worker when the queue holds more than this many requests.
    pub scale_at_depth: Option<usize>,
}

/// A pool run: `summary.json`'s `pool` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolStats {
    /// How it was asked for.
    #[serde(flatten)]
    pub setup: PoolSetup,
    /// Requests scheduled (and arrived: an interrupt cuts the schedule).
    pub scheduled: usize,
    /// Answered correctly.
    pub ok: usize,
    /// Rejections of every kind over the run.
    pub rejections: usize,
    /// `rejections / scheduled` (0 when nothing was scheduled).
    pub rejection_rate: f64,
    /// Replies that failed a correctness check.
    pub wrong_replies: usize,
    /// Latency over every `ok` request of the run, ms.
    pub latency_ms: Option<LatencyStats>,
    /// The windows, in order (only `before` without a kill).
    pub windows: Vec<WindowStats>,
    /// What the cold start cost; `None` without one.
    pub cold_start: Option<ColdStartCost>,
    /// Every worker of the pool, the new one last.
    pub members: Vec<PoolWorker>,
    /// Why the run ended early, if it did.
    pub ended_early: Option<String>,
}

/// The worker the cold start started (a replacement or an added one).
pub fn new_worker(members: &[PoolWorker]) -> Option<&PoolWorker> {
    members.iter().find(|m| m.role != Role::Initial)
}

/// The cold start's trigger and the new worker's ready line among `members`.
pub fn cold_start_marks(members: &[PoolWorker]) -> (Option<u64>, Option<u64>) {
    new_worker(members).map_or((None, None), |m| (m.triggered_at_ns, m.ready_at_ns))
}

/// Sets each record's window from the cold start's trigger and ready line.
pub fn assign_windows(records: &mut [PoolRequest], members: &[PoolWorker]) {
    let (killed, ready) = cold_start_marks(members);
    for r in records {
        r.window = Window::of(r.request.scheduled_at_ns, killed, ready);
    }
}

/// Why a window's figures are thin, for `n` correct replies.
fn thin(n: usize) -> Option<String> {
    match n {
        0 => Some("no correct reply in this window".to_owned()),
        1..=9 => Some(format!(
            "{n} correct replies: too few for percentiles or intervals to mean much; read each one"
        )),
        10..=99 => Some(format!(
            "{n} correct replies: the p99 is within the slowest one or two of them"
        )),
        _ => None,
    }
}

fn secs(from_ns: u64, at_ns: u64) -> f64 {
    at_ns.saturating_sub(from_ns) as f64 / 1e9
}

/// The figures of the requests `of` one window.
fn window_stats(
    window: Window,
    span: (f64, Option<f64>),
    of: &[&PoolRequest],
    boot: &Resampling,
) -> Result<WindowStats, StatsError> {
    let count =
        |f: fn(&RequestOutcome) -> bool| of.iter().filter(|r| f(&r.request.outcome)).count();
    let ok: Vec<&&PoolRequest> = of
        .iter()
        .filter(|r| r.request.outcome == RequestOutcome::Ok)
        .collect();
    let latency: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.request.latency_ns)
        .map(|ns| ms(ns as f64))
        .collect();
    let wait: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.queue_wait_ns())
        .map(|ns| ms(ns as f64))
        .collect();
    let service: Vec<f64> = ok
        .iter()
        .filter_map(|r| r.service_ns())
        .map(|ns| ms(ns as f64))
        .collect();
    Ok(WindowStats {
        window,
        from_s: span.0,
        to_s: span.1,
        arrived: of.len(),
        ok: ok.len(),
        rejected: count(|o| matches!(o, RequestOutcome::Rejected { .. })),
        lost: count(|o| matches!(o, RequestOutcome::Lost { .. })),
        timeouts: count(|o| matches!(o, RequestOutcome::Timeout { .. })),
        error_replies: count(|o| matches!(o, RequestOutcome::ErrorReply { .. })),
        wrong_replies: count(|o| matches!(o, RequestOutcome::WrongReply { .. })),
        rejections: count(RequestOutcome::is_rejection),
        latency_ms: latency_stats(&latency, boot)?,
        queue_wait_ms: latency_stats(&wait, boot)?,
        service_median_ms: stats::median(&service),
        thin: thin(ok.len()),
    })
}

impl PoolStats {
    /// The statistics of a pool run from its records (windows assigned,
    /// [`assign_windows`]) and its members; `start_ns` is the load's start.
    pub fn of(
        setup: PoolSetup,
        start_ns: u64,
        records: &[PoolRequest],
        members: Vec<PoolWorker>,
        ended_early: Option<String>,
        boot: &Resampling,
    ) -> Result<PoolStats, StatsError> {
        let (killed, ready) = cold_start_marks(&members);
        let all: Vec<&PoolRequest> = records.iter().collect();
        let run = window_stats(Window::Before, (0.0, None), &all, boot)?;
        let mut windows = Vec::new();
        for w in [Window::Before, Window::ColdStart, Window::After] {
            let of: Vec<&PoolRequest> = records.iter().filter(|r| r.window == w).collect();
            let span = match w {
                Window::Before => (0.0, killed.map(|k| secs(start_ns, k))),
                Window::ColdStart => (
                    killed.map_or(0.0, |k| secs(start_ns, k)),
                    ready.map(|r| secs(start_ns, r)),
                ),
                Window::After => (ready.map_or(0.0, |r| secs(start_ns, r)), None),
            };
            let exists = match w {
                Window::Before => true,
                Window::ColdStart => killed.is_some(),
                Window::After => killed.is_some() && ready.is_some(),
            };
            if exists {
                windows.push(window_stats(w, span, &of, boot)?);
            }
        }
        let p99 = |w: Window| {
            windows
                .iter()
                .find(|s| s.window == w)
                .and_then(|s| s.latency_ms.as_ref())
                .map(|l| l.p99)
        };
        let minus = |a: Option<f64>, b: Option<f64>| Some(a? - b?);
        let cold_start = new_worker(&members).zip(killed).map(|(new, k)| {
            let (before, during) = (p99(Window::Before), p99(Window::ColdStart));
            let p99_run = run.latency_ms.as_ref().map(|l| l.p99);
            ColdStartCost {
                role: new.role,
                triggered_at_s: secs(start_ns, k),
                ready_ms: new.ready_ms,
                window_ms: ready.map(|r| ms(r.saturating_sub(k) as f64)),
                p99_before_ms: before,
                p99_cold_start_ms: during,
                extra_p99_ms: minus(during, before),
                p99_run_ms: p99_run,
                run_extra_p99_ms: minus(p99_run, before),
            }
        });
        let scheduled = records.len();
        Ok(PoolStats {
            setup,
            scheduled,
            ok: run.ok,
            rejections: run.rejections,
            rejection_rate: if scheduled == 0 {
                0.0
            } else {
                run.rejections as f64 / scheduled as f64
            },
            wrong_replies: run.wrong_replies,
            latency_ms: run.latency_ms,
            windows,
            cold_start,
            members,
            ended_early,
        })
    }

    /// Whether the run failed beyond rejections: a wrong reply, a worker
    /// that ended unasked, a run that ended early.
    pub fn failed(&self) -> bool {
        self.wrong_replies > 0
            || self.ended_early.is_some()
            || self.members.iter().any(|m| m.failed)
    }

    /// Warnings a reader should see next to the figures.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.cold_start
            && c.ready_ms.is_none()
        {
            out.push(format!(
                "the {} worker never became ready: the pool served the rest of the run without it",
                c.role.as_str()
            ));
        }
        if self.setup.replace_at_s.is_some() && self.cold_start.is_none() {
            out.push("no worker was killed: none was ready at --replace-at".to_owned());
        }
        if let Some(d) = self.setup.scale_at_depth
            && self.cold_start.is_none()
        {
            out.push(format!(
                "the queue never held more than {d} requests (--scale-at-depth): no worker was added"
            ));
        }
        if self.rejections > 0 {
            out.push(format!(
                "{} of {} requests rejected ({:.1}%)",
                self.rejections,
                self.scheduled,
                100.0 * self.rejection_rate
            ));
        }
        if self.wrong_replies > 0 {
            out.push(format!(
                "{} replies failed the correctness check",
                self.wrong_replies
            ));
        }
        for m in self.members.iter().filter(|m| m.failed) {
            out.push(format!("worker {} ended unasked: {}", m.slot, m.end));
        }
        if let Some(e) = &self.ended_early {
            out.push(format!("the pool run ended early: {e}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn boot() -> Resampling {
        Resampling {
            resamples: 500,
            ..Resampling::default()
        }
    }

    fn member(slot: usize, role: Role, ready_at: u64, killed_at: Option<u64>) -> PoolWorker {
        PoolWorker {
            slot,
            role,
            triggered_at_ns: (role != Role::Initial).then_some(1000 * MS),
            pid: Some(100 + slot as u32),
            spawned_at_ns: Some(ready_at.saturating_sub(300 * MS)),
            ready_at_ns: Some(ready_at),
            ready_ms: Some(300.0),
            killed_at_ns: killed_at,
            answered: 0,
            end: "shut down".into(),
            failed: false,
        }
    }

    /// Request `i` due at 10 i ms, answered `latency` ms later, dispatched
    /// `wait` ms after it was due.
    fn req(i: usize, wait: u64, latency: u64) -> PoolRequest {
        let at = i as u64 * 10 * MS;
        let mut r = PoolRequest::scheduled(Variant::A, i, at);
        r.dispatched_at_ns = Some(at + wait * MS);
        r.worker = Some(0);
        r.request.sent_at_ns = r.dispatched_at_ns;
        r.request.answered(at + latency * MS, RequestOutcome::Ok);
        r
    }

    fn setup() -> PoolSetup {
        PoolSetup {
            variant: Variant::A,
            workers: 2,
            load: OfferedLoad::open(100.0, 3.0),
            request: serde_json::json!({"op": "infer"}),
            replace_at_s: Some(1.0),
            max_wait_ms: None,
            queue_cap: None,
            scale_at_depth: None,
        }
    }

    #[test]
    fn windows_split_at_the_kill_and_the_replacement_s_ready_line() {
        assert_eq!(Window::of(5, None, None), Window::Before);
        assert_eq!(Window::of(5, Some(6), None), Window::Before);
        assert_eq!(Window::of(6, Some(6), None), Window::ColdStart);
        assert_eq!(Window::of(9, Some(6), Some(10)), Window::ColdStart);
        assert_eq!(Window::of(10, Some(6), Some(10)), Window::After);
    }

    #[test]
    fn the_cold_start_s_cost_by_hand() {
        // 300 requests at 10 ms; the kill at 1 s, the replacement ready at
        // 2 s: 5 ms before and after, 50 ms + wait during.
        let members = vec![
            member(0, Role::Initial, 0, Some(1000 * MS)),
            member(1, Role::Initial, 0, None),
            member(2, Role::Replacement, 2000 * MS, None),
        ];
        let mut rs: Vec<PoolRequest> = (0..300)
            .map(|i| match i {
                100..200 => req(i, 45, 50),
                _ => req(i, 0, 5),
            })
            .collect();
        let mut turned = PoolRequest::scheduled(Variant::A, 300, 1500 * MS);
        turned.request.outcome = RequestOutcome::Rejected {
            reason: "queue full".into(),
        };
        rs.push(turned);
        assign_windows(&mut rs, &members);
        let s = PoolStats::of(setup(), 0, &rs, members, None, &boot()).unwrap();
        let w: Vec<_> = s
            .windows
            .iter()
            .map(|w| (w.window, w.arrived, w.ok))
            .collect();
        assert_eq!(
            w,
            [
                (Window::Before, 100, 100),
                (Window::ColdStart, 101, 100),
                (Window::After, 100, 100)
            ]
        );
        let during = &s.windows[1];
        assert_eq!((during.rejected, during.rejections), (1, 1));
        assert_eq!(during.latency_ms.as_ref().unwrap().median, 50.0);
        assert_eq!(during.queue_wait_ms.as_ref().unwrap().median, 45.0);
        assert_eq!(during.service_median_ms, Some(5.0));
        assert_eq!((during.from_s, during.to_s), (1.0, Some(2.0)));
        let c = s.cold_start.unwrap();
        assert_eq!(c.role, Role::Replacement);
        assert_eq!(c.triggered_at_s, 1.0);
        assert_eq!(c.window_ms, Some(1000.0));
        assert_eq!(c.ready_ms, Some(300.0));
        assert_eq!(c.extra_p99_ms, Some(45.0));
        assert_eq!(c.run_extra_p99_ms, Some(45.0));
        assert_eq!((s.scheduled, s.ok, s.rejections), (301, 300, 1));
        assert!(!s.failed());
        assert_eq!(s.windows[0].thin, None);
    }

    #[test]
    fn without_a_kill_there_is_one_window_and_no_cost() {
        let members = vec![member(0, Role::Initial, 0, None)];
        let mut rs: Vec<PoolRequest> = (0..5).map(|i| req(i, 0, 2)).collect();
        assign_windows(&mut rs, &members);
        let s = PoolStats::of(
            PoolSetup {
                replace_at_s: None,
                ..setup()
            },
            0,
            &rs,
            members,
            None,
            &boot(),
        )
        .unwrap();
        assert_eq!(s.windows.len(), 1);
        assert!(s.cold_start.is_none());
        assert!(s.windows[0].thin.as_ref().unwrap().contains("too few"));
    }

    #[test]
    fn records_round_trip_flat() {
        let mut r = req(3, 1, 4);
        r.window = Window::ColdStart;
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""scheduled_at_ns":30000000"#), "{line}");
        assert!(line.contains(r#""window":"cold_start""#), "{line}");
        assert_eq!(serde_json::from_str::<PoolRequest>(&line).unwrap(), r);
        let rejected = RequestOutcome::Rejected { reason: "x".into() };
        assert!(rejected.is_rejection());
        assert_eq!(rejected.as_str(), "rejected");
    }
}
