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

use std::collections::VecDeque;
use std::time::Duration;

use phases::jsonl;
use phases::serve::{OfferedLoad, RequestOutcome, RequestRecord, ServeStats};
use phases::stats::Resampling;
use serde_json::{Map, Value};
use spawn::worker_proto::{Reply, Request};
use timeline::{Variant, WorkerRecord};

use crate::error::{Error, Result, invalid};
use crate::interrupt::Interrupt;
use crate::lifecycle::{Halt, Hooks, Lifecycle, Started};
use crate::target::{Origin, Target};

/// What runs after the timed trials: a serve phase (`requests`, or `rate`
/// with `duration`) and a memory view, each on a fresh worker.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Requests to send: alone a closed loop, one in flight; with `rate`,
    /// that many at that rate (instead of `duration`).
    pub requests: Option<usize>,
    /// An open loop offering this many requests per second.
    pub rate: Option<f64>,
    /// How long the open loop offers requests, seconds (default 10).
    pub duration: Option<f64>,
    /// The request, a JSON object with an `op` (default: the target's,
    /// else the reference worker's `infer`, else `{"op": "health"}`).
    pub request: Option<String>,
    /// A closed loop's requests in flight at once on the one worker
    /// (default 1), for workers that answer concurrently.
    pub in_flight: Option<usize>,
    /// Run the memory view.
    pub memory: bool,
    /// Serve the open loop through a pool of workers instead of one
    /// (`--pool N`), with one cold start when asked: a kill and its
    /// replacement, or a worker added ([`crate::pool`] runs it).
    pub pool: Option<PoolOptions>,
}

impl ServeOptions {
    /// The load asked for; `None` without --requests or --rate.
    pub fn load(&self) -> Result<Option<OfferedLoad>> {
        match (self.in_flight, self.rate, self.requests) {
            (Some(0), ..) => invalid!("--in-flight must be at least 1"),
            (Some(_), Some(_), _) => invalid!(
                "--in-flight is for a closed loop (--requests N alone); an open loop (--rate) already keeps every due request in flight"
            ),
            (Some(_), None, None) => invalid!("--in-flight needs a serve phase: add --requests N"),
            _ => {}
        }
        match (self.rate, self.requests) {
            (None, None) => Ok(None),
            (None, Some(0)) | (Some(_), Some(0)) => invalid!("--requests must be at least 1"),
            (None, Some(n)) => Ok(Some(OfferedLoad::Closed {
                requests: n,
                in_flight: self.in_flight.unwrap_or(1),
            })),
            (Some(r), n) => {
                if !(r.is_finite() && r > 0.0) {
                    invalid!("--rate must be a positive number of requests per second, got {r}");
                }
                let duration = match (n, self.duration) {
                    (Some(n), _) => n as f64 / r,
                    (None, Some(d)) if d.is_finite() && d > 0.0 => d,
                    (None, Some(d)) => {
                        invalid!("--duration must be a positive number of seconds, got {d}")
                    }
                    (None, None) => 10.0,
                };
                let mut load = OfferedLoad::open(r, duration);
                if let (Some(n), OfferedLoad::Open { requests, .. }) = (n, &mut load) {
                    *requests = n;
                }
                Ok(Some(load))
            }
        }
    }

    /// Whether anything beyond the start-up trials was asked for.
    pub fn wanted(&self) -> bool {
        self.memory || self.requests.is_some() || self.rate.is_some()
    }
}

/// How a pool serves the open loop (`--pool`, run by [`crate::pool`]):
/// its size, its one cold start (the kill, or the depth that adds a
/// worker), the queue's limits.
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
    /// Add one worker when the queue holds more than this many requests
    /// (`--scale-at-depth`), as an autoscaler would.
    pub scale_at_depth: Option<usize>,
}

impl PoolOptions {
    /// Refuses a pool that cannot run under `load` (the serve options'
    /// load): every error says what to change.
    pub fn check(&self, load: Option<OfferedLoad>) -> Result<()> {
        if self.workers == 0 {
            invalid!("--pool must be at least 1 worker");
        }
        let duration = match load {
            Some(OfferedLoad::Open { duration_s, .. }) => duration_s,
            Some(OfferedLoad::Closed { .. }) => invalid!(
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
        match (self.replace_at, self.scale_at_depth, self.queue_cap) {
            (Some(_), Some(_), _) => invalid!(
                "--replace-at and --scale-at-depth are two cold starts: one run measures one; pick one"
            ),
            (_, Some(0), _) => invalid!(
                "--scale-at-depth must be at least 1 (the queue is empty whenever a worker is free)"
            ),
            (_, Some(d), Some(cap)) if d >= cap => invalid!(
                "--scale-at-depth {d} is not below --queue-cap {cap}: the queue never holds more than {cap}, so no worker would be added"
            ),
            _ => {}
        }
        if self.queue_cap == Some(0) {
            invalid!("--queue-cap must be at least 1 (a cap of 0 rejects every request)");
        }
        Ok(())
    }

    /// `2 workers, one killed at 1.5 s and replaced`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} worker{}",
            self.workers,
            if self.workers == 1 { "" } else { "s" }
        );
        if let Some(at) = self.replace_at {
            s.push_str(&format!(", one killed at {at} s and replaced"));
        }
        if let Some(d) = self.scale_at_depth {
            s.push_str(&format!(", one added when more than {d} requests queue"));
        }
        s
    }
}

/// What to send, and how to judge the replies.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Closed or open loop, and how many requests.
    pub load: OfferedLoad,
    /// The request's op.
    pub op: String,
    /// The request's fields besides `op` (no `id`).
    pub fields: Map<String, Value>,
    /// How long to wait for each reply.
    pub timeout: Duration,
    /// The reply must carry `response.echo` equal to the fields (the
    /// reference worker's `infer`); a reply that carries one is always
    /// checked.
    pub expect_echo: bool,
}

impl Plan {
    /// The request from --request, else the target's, else a default.
    pub fn new(load: OfferedLoad, request: Option<&str>, target: &Target) -> Result<Plan> {
        let reference = target.origin == Origin::BuiltinDefault;
        let mut object = match (request, &target.request) {
            (Some(text), _) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(m)) => m,
                Ok(_) => invalid!("--request must be a JSON object with an `op`, got `{text}`"),
                Err(e) => invalid!(
                    "--request is not JSON ({e}): give an object such as '{{\"op\": \"infer\", \"text\": \"hello\"}}'"
                ),
            },
            (None, Some(m)) => m.clone(),
            (None, None) if reference => {
                let mut m = Map::new();
                m.insert("op".into(), "infer".into());
                m.insert(
                    "text".into(),
                    "The quick brown fox jumps over the lazy dog.".into(),
                );
                m
            }
            (None, None) => {
                let mut m = Map::new();
                m.insert("op".into(), "health".into());
                m
            }
        };
        let op = match object.remove("op") {
            Some(Value::String(op)) if !op.is_empty() => op,
            _ => invalid!(
                "the serve request needs a string `op` (from --request or the target's `request` in its config)"
            ),
        };
        if op == "shutdown" {
            invalid!(
                "the serve request cannot be `shutdown`: it would end the worker; pick the op to measure"
            );
        }
        object.remove("id");
        Ok(Plan {
            load,
            expect_echo: reference && op == "infer",
            op,
            fields: object,
            timeout: target.request_timeout,
        })
    }

    /// The request as configured, `{"op": ..., ...}`, for the summary.
    pub fn describe(&self) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), Value::String(self.op.clone()));
        m.extend(self.fields.clone());
        Value::Object(m)
    }

    /// Request `index`: the fields with that `id`.
    pub(crate) fn request(&self, index: usize) -> Request {
        let mut extra = self.fields.clone();
        extra.insert("id".into(), Value::from(index));
        Request::new(self.op.clone(), extra)
    }

    /// Judges a reply to request `index`.
    pub fn judge(&self, index: usize, reply: &Reply) -> RequestOutcome {
        let obj = reply.to_object();
        if let Some(id) = obj.get("id")
            && id.as_u64() != Some(index as u64)
        {
            return RequestOutcome::WrongReply {
                problem: format!(
                    "the reply carries id {id} where {index} was due: a reply out of order or for another request"
                ),
            };
        }
        match reply {
            Reply::Error(e) => {
                return RequestOutcome::ErrorReply {
                    error: e.error.clone(),
                };
            }
            // A health request's reply is judged by the protocol's one rule.
            _ if self.op == "health" => {
                if let Err(why) = reply.healthy() {
                    return RequestOutcome::WrongReply {
                        problem: why.to_string(),
                    };
                }
            }
            _ => {}
        }
        let echo = obj.get("response").and_then(|r| r.get("echo"));
        match echo {
            Some(Value::Object(e)) if *e == self.fields => RequestOutcome::Ok,
            Some(other) => RequestOutcome::WrongReply {
                problem: format!(
                    "response.echo is {} where the request's fields {} were due",
                    clip(&other.to_string()),
                    clip(&Value::Object(self.fields.clone()).to_string())
                ),
            },
            None if self.expect_echo => RequestOutcome::WrongReply {
                problem: "the reply has no response.echo of the request's fields".to_owned(),
            },
            None => RequestOutcome::Ok,
        }
    }
}

pub(crate) fn clip(s: &str) -> String {
    clip_to(s, 120)
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub(crate) fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

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

/// What became of the request in flight when the worker ended with `e`.
pub(crate) fn outcome_of(e: &spawn::Error) -> RequestOutcome {
    match &e.kind {
        spawn::ErrorKind::Timeout { after } => RequestOutcome::Timeout {
            after_ms: after.as_secs_f64() * 1e3,
        },
        spawn::ErrorKind::UnexpectedReply { got } => RequestOutcome::WrongReply {
            problem: format!("answered with {got}"),
        },
        _ => RequestOutcome::Lost {
            reason: short_error(e),
        },
    }
}

pub(crate) fn short_error(e: &spawn::Error) -> String {
    clip(&e.kind.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    fn target() -> Target {
        Target::reference_worker(Path::new("/nonexistent"))
    }

    fn reply(v: Value) -> Reply {
        serde_json::from_value(v).unwrap()
    }

    fn args(requests: Option<usize>, rate: Option<f64>, duration: Option<f64>) -> ServeOptions {
        ServeOptions {
            requests,
            rate,
            duration,
            ..ServeOptions::default()
        }
    }

    #[test]
    fn in_flight_is_a_closed_loop_s_and_says_so_otherwise() {
        let k = |requests, rate, k| ServeOptions {
            in_flight: Some(k),
            ..args(requests, rate, None)
        };
        assert_eq!(
            k(Some(8), None, 3).load().unwrap(),
            Some(OfferedLoad::Closed {
                requests: 8,
                in_flight: 3
            })
        );
        assert_eq!(
            k(Some(8), None, 3).load().unwrap().unwrap().describe(),
            "closed loop, 8 requests, 3 in flight"
        );
        let e = |o: ServeOptions| o.load().unwrap_err().to_string();
        assert!(e(k(Some(8), None, 0)).contains("at least 1"));
        assert!(e(k(Some(8), Some(5.0), 2)).contains("closed loop"));
        assert!(e(k(None, None, 2)).contains("--requests N"));
    }

    #[test]
    fn loads_from_flags() {
        assert_eq!(args(None, None, None).load().unwrap(), None);
        assert_eq!(
            args(Some(5), None, None).load().unwrap(),
            Some(OfferedLoad::Closed {
                requests: 5,
                in_flight: 1
            })
        );
        assert_eq!(
            args(None, Some(20.0), Some(2.0)).load().unwrap(),
            Some(OfferedLoad::open(20.0, 2.0))
        );
        assert_eq!(
            args(Some(30), Some(10.0), None).load().unwrap(),
            Some(OfferedLoad::open(10.0, 3.0))
        );
        assert_eq!(
            args(None, Some(3.0), None).load().unwrap(),
            Some(OfferedLoad::open(3.0, 10.0))
        );
        assert!(args(Some(0), None, None).load().is_err());
        assert!(args(None, Some(0.0), None).load().is_err());
        assert!(args(None, Some(1.0), Some(-1.0)).load().is_err());
    }

    #[test]
    fn the_reference_worker_serves_infer_and_must_echo() {
        let plan = Plan::new(
            OfferedLoad::Closed {
                requests: 1,
                in_flight: 1,
            },
            None,
            &target(),
        )
        .unwrap();
        assert_eq!(plan.op, "infer");
        assert!(plan.expect_echo);
        let fields = Value::Object(plan.fields.clone());
        let good = reply(json!({"op": "infer", "response": {"echo": fields}, "id": 3}));
        assert_eq!(plan.judge(3, &good), RequestOutcome::Ok);
        let wrong_id = plan.judge(4, &good);
        assert!(
            matches!(wrong_id, RequestOutcome::WrongReply { ref problem } if problem.contains("id 3 where 4")),
            "{wrong_id:?}"
        );
        let no_echo = reply(json!({"op": "infer", "response": {}, "id": 3}));
        assert!(matches!(
            plan.judge(3, &no_echo),
            RequestOutcome::WrongReply { .. }
        ));
        let other = reply(json!({"op": "infer", "response": {"echo": {"text": "else"}}}));
        assert!(matches!(
            plan.judge(3, &other),
            RequestOutcome::WrongReply { .. }
        ));
        let err = reply(json!({"op": "error", "error": "busy", "id": 3}));
        assert_eq!(
            plan.judge(3, &err),
            RequestOutcome::ErrorReply {
                error: "busy".into()
            }
        );
    }

    #[test]
    fn a_request_from_the_command_line() {
        let plan = Plan::new(
            OfferedLoad::Closed {
                requests: 1,
                in_flight: 1,
            },
            Some(r#"{"op": "health", "id": 9, "x": 1}"#),
            &Target::ad_hoc(Path::new("/"), vec!["w".into()], "w"),
        )
        .unwrap();
        assert_eq!(plan.describe(), json!({"op": "health", "x": 1}));
        assert!(!plan.expect_echo);
        assert_eq!(
            serde_json::to_value(plan.request(7)).unwrap(),
            json!({"op": "health", "x": 1, "id": 7})
        );
        let unhealthy = reply(json!({"op": "health", "response": {"status": "loading"}, "id": 7}));
        assert!(matches!(
            plan.judge(7, &unhealthy),
            RequestOutcome::WrongReply { .. }
        ));
        for bad in ["[1]", "{}", r#"{"op": "shutdown"}"#, "nope"] {
            assert!(
                Plan::new(
                    OfferedLoad::Closed {
                        requests: 1,
                        in_flight: 1
                    },
                    Some(bad),
                    &target()
                )
                .is_err(),
                "{bad}"
            );
        }
    }
}
