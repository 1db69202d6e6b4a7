//! The serve phase: what happened to each request sent after ready, and the
//! statistics a skeptic asks for about serving under a given load.
//!
//! Definitions (so every figure can be recomputed from `requests.jsonl`):
//! - Each request has a **scheduled** send time. In a closed loop (one
//!   request in flight) it is the moment the harness decided to send it; in
//!   an open loop at rate `R` it is `start + i / R`, fixed before the run.
//! - **latency** is `received_at - scheduled_at`, never `received_at -
//!   sent_at`: when the harness or the worker falls behind, the wait in the
//!   queue is part of the latency (no coordinated omission). `sent_at -
//!   scheduled_at` is kept as the harness's own **send lag**.
//! - **outcome**: `ok` (the reply had the request's op and passed the
//!   correctness checks), `error_reply` (`{"op": "error", ...}`), `timeout`
//!   (no reply within the request timeout), `lost` (the worker ended before
//!   answering), `wrong_reply` (a reply that failed a check: another
//!   request's id, a payload not echoed, an unhealthy health reply).
//!   A pool's dispatcher adds `rejected` (turned away before any worker
//!   saw it: its queue full, or a wait past the limit; see [`crate::pool`]).
//!   **Rejections** are error replies, timeouts, lost and rejected requests; their
//!   **rate** is rejections over requests sent. Wrong replies are counted
//!   apart: the worker answered, wrongly.
//! - **window**: from the first scheduled send to the last reply; for an
//!   open loop at least the offered duration. **Completed throughput** is
//!   `ok / window`.
//! - Latency statistics are over `ok` requests only (an error reply is often
//!   fast and would flatter the figures). Median, p90 and p99 are type-7
//!   percentiles (see [`crate::stats`]) with seeded percentile-bootstrap
//!   intervals; the max is reported without one (the bootstrap cannot
//!   bound an extreme from above). Requests in one run are not
//!   independent (a queue couples neighbours): read the intervals as the
//!   spread of this run, not of every run.
//! - **max in flight**: the most requests written and not yet answered at
//!   any instant (an answer at the same nanosecond as a write is counted
//!   first).
//! - **trend**: the median latency of the first and the last third of the
//!   `ok` requests in index order. A last third far above the first means
//!   the queue grew all run: the offered rate is above the worker's capacity.

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::ms;
use crate::stats::{self, Interval, Resampling, StatsError, percentile_sorted};
use timeline::Variant;

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// How requests were offered.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum OfferedLoad {
    /// `requests` requests, `in_flight` at a time (one by default): each
    /// is sent when a reply frees its place.
    Closed {
        /// How many requests are sent.
        requests: usize,
        /// How many are kept written and unanswered at once (1 unless
        /// asked, and then absent from the JSON).
        #[serde(default = "one", skip_serializing_if = "is_one")]
        in_flight: usize,
    },
    /// `requests` requests scheduled at `rate_per_s`, whatever the replies
    /// do (`requests = floor(rate * duration)`, at least 1).
    Open {
        /// The offered rate, requests per second.
        rate_per_s: f64,
        /// How long requests are offered for, seconds.
        duration_s: f64,
        /// How many requests are scheduled: `floor(rate_per_s * duration_s)`, at least 1.
        requests: usize,
    },
}

impl OfferedLoad {
    /// An open loop at `rate_per_s` for `duration_s`.
    pub fn open(rate_per_s: f64, duration_s: f64) -> OfferedLoad {
        let requests = ((rate_per_s * duration_s).floor() as usize).max(1);
        OfferedLoad::Open {
            rate_per_s,
            duration_s,
            requests,
        }
    }

    /// How many requests the load offers.
    pub fn requests(&self) -> usize {
        match *self {
            OfferedLoad::Closed { requests, .. } | OfferedLoad::Open { requests, .. } => requests,
        }
    }

    /// The scheduled offset of request `index` from the start, ns (open
    /// loop); `None` for a closed loop, where it depends on the replies.
    pub fn offset_ns(&self, index: usize) -> Option<u64> {
        match *self {
            OfferedLoad::Closed { .. } => None,
            OfferedLoad::Open { rate_per_s, .. } => {
                Some((index as f64 * 1e9 / rate_per_s).round() as u64)
            }
        }
    }

    /// `closed, 200 requests` or `open, 50/s for 10 s (500 requests)`.
    pub fn describe(&self) -> String {
        match *self {
            OfferedLoad::Closed {
                requests,
                in_flight: 1,
            } => format!("closed loop, {requests} requests, one in flight"),
            OfferedLoad::Closed {
                requests,
                in_flight,
            } => format!("closed loop, {requests} requests, {in_flight} in flight"),
            OfferedLoad::Open {
                rate_per_s,
                duration_s,
                requests,
            } => format!("open loop, {rate_per_s}/s for {duration_s} s ({requests} requests)"),
        }
    }
}

/// What became of one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestOutcome {
    /// The reply had the request's op and passed the correctness checks.
    Ok,
    /// The worker answered `{"op": "error", "error": ...}`.
    ErrorReply {
        /// The `error` text of the worker's error reply.
        error: String,
    },
    /// No reply within the request timeout; the worker was ended.
    Timeout {
        /// How long the harness waited before giving up, ms.
        after_ms: f64,
    },
    /// The worker ended (or was ended) before answering.
    Lost {
        /// Why no reply came (the error that ended the worker, or `not sent`).
        reason: String,
    },
    /// A reply that failed a correctness check.
    WrongReply {
        /// Which check the reply failed.
        problem: String,
    },
    /// Turned away before any worker saw it: a pool's dispatcher found
    /// its queue full, or the request waited past the longest wait allowed
    /// (see [`crate::pool`]). Never sent.
    Rejected {
        /// Which limit turned it away.
        reason: String,
    },
}

impl RequestOutcome {
    /// `ok`, `error_reply`, `timeout`, `lost`, `wrong_reply`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RequestOutcome::Ok => "ok",
            RequestOutcome::ErrorReply { .. } => "error_reply",
            RequestOutcome::Timeout { .. } => "timeout",
            RequestOutcome::Lost { .. } => "lost",
            RequestOutcome::WrongReply { .. } => "wrong_reply",
            RequestOutcome::Rejected { .. } => "rejected",
        }
    }

    /// An error reply, a timeout, a lost request or one a dispatcher
    /// turned away.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            RequestOutcome::ErrorReply { .. }
                | RequestOutcome::Timeout { .. }
                | RequestOutcome::Lost { .. }
                | RequestOutcome::Rejected { .. }
        )
    }
}

/// One request of the serve phase: one line of `requests.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The variant (A or B) whose worker served the request.
    pub variant: Variant,
    /// Position in the run, from 0; also the request's `id`.
    pub index: usize,
    /// When it was due (monotonic ns).
    pub scheduled_at_ns: u64,
    /// Just before its line was written; `None` if it never was.
    pub sent_at_ns: Option<u64>,
    /// Right after its reply was read; `None` without a reply.
    pub received_at_ns: Option<u64>,
    /// `received_at - scheduled_at`, ns; `None` without a reply.
    pub latency_ns: Option<u64>,
    /// What became of the request: ok, or how it failed.
    pub outcome: RequestOutcome,
}

impl RequestRecord {
    /// A request due at `scheduled_at_ns`, not sent yet.
    pub fn scheduled(variant: Variant, index: usize, scheduled_at_ns: u64) -> RequestRecord {
        RequestRecord {
            variant,
            index,
            scheduled_at_ns,
            sent_at_ns: None,
            received_at_ns: None,
            latency_ns: None,
            outcome: RequestOutcome::Lost {
                reason: "not sent".to_owned(),
            },
        }
    }

    /// Records the reply read at `received_at_ns` and its outcome.
    pub fn answered(&mut self, received_at_ns: u64, outcome: RequestOutcome) {
        self.received_at_ns = Some(received_at_ns);
        self.latency_ns = Some(received_at_ns.saturating_sub(self.scheduled_at_ns));
        self.outcome = outcome;
    }
}

/// Latency figures over the `ok` requests, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// How many `ok` requests the figures are over.
    pub n: usize,
    /// Median latency, ms.
    pub median: f64,
    /// Resampling confidence interval of the median, ms.
    pub median_ci: Interval,
    /// 90th percentile latency (type 7), ms.
    pub p90: f64,
    /// Resampling confidence interval of the p90, ms.
    pub p90_ci: Interval,
    /// 99th percentile latency (type 7), ms.
    pub p99: f64,
    /// Resampling confidence interval of the p99, ms.
    pub p99_ci: Interval,
    /// Slowest `ok` latency, ms (no interval: the bootstrap cannot bound a maximum).
    pub max: f64,
    /// Mean latency, ms.
    pub mean: f64,
}

/// Median latency of the first and the last third of the `ok` requests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Median latency of the first third of the `ok` requests in index order, ms.
    pub first_third_median_ms: f64,
    /// Median latency of the last third of the `ok` requests in index order, ms.
    pub last_third_median_ms: f64,
}

impl Trend {
    /// `last / first`; `None` when the first third's median is 0.
    pub fn growth(&self) -> Option<f64> {
        (self.first_third_median_ms > 0.0)
            .then(|| self.last_third_median_ms / self.first_third_median_ms)
    }
}

/// The harness's lateness in writing requests (`sent - scheduled`), ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SendLag {
    /// Median send lag over the sent requests, ms.
    pub median_ms: f64,
    /// Largest send lag, ms.
    pub max_ms: f64,
}

/// The serve phase of one worker: `summary.json`'s `serve` entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeStats {
    /// The variant (A or B) whose worker served.
    pub variant: Variant,
    /// How requests were offered: closed or open loop and how many.
    pub load: OfferedLoad,
    /// The request as sent (without its per-request `id`).
    pub request: serde_json::Value,
    /// Requests scheduled (the load's request count).
    pub scheduled: usize,
    /// Requests actually written to the worker.
    pub sent: usize,
    /// Requests answered correctly (`ok`).
    pub ok: usize,
    /// Requests answered with an error reply.
    pub error_replies: usize,
    /// Requests that got no reply within the request timeout.
    pub timeouts: usize,
    /// Sent requests lost because the worker ended before answering (a request never sent is not counted).
    pub lost: usize,
    /// Requests answered wrongly (failed a correctness check).
    pub wrong_replies: usize,
    /// Error replies, timeouts and lost requests.
    pub rejections: usize,
    /// `rejections / sent` (0 when nothing was sent).
    pub rejection_rate: f64,
    /// From the first scheduled send to the last reply (for an open loop at least the offered duration), seconds.
    pub window_s: f64,
    /// `ok / window_s`, requests per second.
    pub throughput_per_s: f64,
    /// The offered rate of an open loop.
    pub offered_per_s: Option<f64>,
    /// Latency statistics over the `ok` requests; `None` without any.
    pub latency_ms: Option<LatencyStats>,
    /// Median latency of the first and last thirds of the `ok` requests; `None` under 3 of them.
    pub trend: Option<Trend>,
    /// The harness's own lateness in writing requests; `None` when nothing was sent.
    pub send_lag: Option<SendLag>,
    /// The most requests written and not yet answered at any instant.
    pub max_in_flight: usize,
    /// Why the phase ended early (the worker's error), if it did.
    pub ended_early: Option<String>,
}

/// The most requests in flight at once (written, not yet answered). A
/// request never answered stays in flight to the end.
pub fn max_in_flight(records: &[RequestRecord]) -> usize {
    // (time, +1 send / -1 answer); answers sort before sends at equal times.
    let mut events: Vec<(u64, i8)> = Vec::with_capacity(records.len() * 2);
    for r in records {
        if let Some(sent) = r.sent_at_ns {
            events.push((sent, 1));
            if let Some(received) = r.received_at_ns {
                events.push((received.max(sent), -1));
            }
        }
    }
    events.sort_unstable();
    let (mut now, mut max) = (0i64, 0i64);
    for (_, step) in events {
        now += i64::from(step);
        max = max.max(now);
    }
    max as usize
}

/// Resampling intervals of several percentiles of one sample at once, from
/// the same resamples (type-7 percentiles of each resample).
pub fn percentile_cis(
    samples: &[f64],
    qs: &[f64],
    boot: &Resampling,
) -> Result<Vec<Interval>, StatsError> {
    // Checks the sample and the settings the same way the median CI does.
    stats::median_ci(
        samples,
        &Resampling {
            resamples: 1,
            ..*boot
        },
    )?;
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mut rng = boot.rng();
    let mut counts = vec![0u32; n];
    let mut draws: Vec<Vec<f64>> = vec![Vec::with_capacity(boot.resamples); qs.len()];
    // Ranks needed per percentile: floor(h) and floor(h) + 1.
    let ranks: Vec<(usize, usize, f64)> = qs
        .iter()
        .map(|&q| {
            let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            (lo, (lo + 1).min(n - 1), h - lo as f64)
        })
        .collect();
    for _ in 0..boot.resamples {
        counts.iter_mut().for_each(|c| *c = 0);
        for _ in 0..n {
            counts[rng.random_range(0..n)] += 1;
        }
        // The resample sorted is `sorted[i]` repeated `counts[i]` times.
        let value_at = |rank: usize| {
            let mut seen = 0usize;
            for (i, &c) in counts.iter().enumerate() {
                seen += c as usize;
                if seen > rank {
                    return sorted[i];
                }
            }
            sorted[n - 1]
        };
        for (k, &(lo, hi, frac)) in ranks.iter().enumerate() {
            let (a, b) = (value_at(lo), value_at(hi));
            draws[k].push(a + frac * (b - a));
        }
    }
    Ok(draws.into_iter().map(|d| boot.interval(d)).collect())
}

/// Latency statistics of a sample in ms; `None` when empty.
pub fn latency_stats(
    samples_ms: &[f64],
    boot: &Resampling,
) -> Result<Option<LatencyStats>, StatsError> {
    if samples_ms.is_empty() {
        return Ok(None);
    }
    let mut sorted = samples_ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let cis = percentile_cis(&sorted, &[0.5, 0.9, 0.99], boot)?;
    Ok(Some(LatencyStats {
        n: sorted.len(),
        median: percentile_sorted(&sorted, 0.5),
        median_ci: cis[0],
        p90: percentile_sorted(&sorted, 0.9),
        p90_ci: cis[1],
        p99: percentile_sorted(&sorted, 0.99),
        p99_ci: cis[2],
        max: sorted[sorted.len() - 1],
        mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
    }))
}

/// The trend of latencies given in index order; `None` under 3 samples.
pub fn trend(latencies_ms: &[f64]) -> Option<Trend> {
    let third = latencies_ms.len() / 3;
    if third == 0 {
        return None;
    }
    let first = stats::median(&latencies_ms[..third])?;
    let last = stats::median(&latencies_ms[latencies_ms.len() - third..])?;
    Some(Trend {
        first_third_median_ms: first,
        last_third_median_ms: last,
    })
}

impl ServeStats {
    /// The statistics of one worker's serve phase from its records (in
    /// index order).
    pub fn of(
        variant: Variant,
        load: OfferedLoad,
        request: serde_json::Value,
        records: &[RequestRecord],
        ended_early: Option<String>,
        boot: &Resampling,
    ) -> Result<ServeStats, StatsError> {
        let mut ordered: Vec<&RequestRecord> = records.iter().collect();
        ordered.sort_by_key(|r| r.index);
        let count =
            |f: fn(&RequestOutcome) -> bool| ordered.iter().filter(|r| f(&r.outcome)).count();
        let sent = ordered.iter().filter(|r| r.sent_at_ns.is_some()).count();
        let ok = count(|o| matches!(o, RequestOutcome::Ok));
        let error_replies = count(|o| matches!(o, RequestOutcome::ErrorReply { .. }));
        let timeouts = count(|o| matches!(o, RequestOutcome::Timeout { .. }));
        // A request never sent is not a rejection of the worker's: it is
        // counted as scheduled only.
        let lost = ordered
            .iter()
            .filter(|r| r.sent_at_ns.is_some() && matches!(r.outcome, RequestOutcome::Lost { .. }))
            .count();
        let wrong_replies = count(|o| matches!(o, RequestOutcome::WrongReply { .. }));
        let rejections = error_replies + timeouts + lost;
        let latencies: Vec<f64> = ordered
            .iter()
            .filter(|r| r.outcome == RequestOutcome::Ok)
            .filter_map(|r| r.latency_ns)
            .map(|ns| ms(ns as f64))
            .collect();
        let start = ordered.iter().map(|r| r.scheduled_at_ns).min();
        let last = ordered
            .iter()
            .filter_map(|r| r.received_at_ns.or(r.sent_at_ns))
            .max();
        let mut window_ns = match (start, last) {
            (Some(s), Some(l)) => l.saturating_sub(s),
            _ => 0,
        };
        if let OfferedLoad::Open { duration_s, .. } = load {
            window_ns = window_ns.max((duration_s * 1e9) as u64);
        }
        let window_s = window_ns as f64 / 1e9;
        let lags: Vec<f64> = ordered
            .iter()
            .filter_map(|r| {
                r.sent_at_ns
                    .map(|s| ms(s.saturating_sub(r.scheduled_at_ns) as f64))
            })
            .collect();
        Ok(ServeStats {
            variant,
            load,
            request,
            scheduled: ordered.len(),
            sent,
            ok,
            error_replies,
            timeouts,
            lost,
            wrong_replies,
            rejections,
            rejection_rate: if sent == 0 {
                0.0
            } else {
                rejections as f64 / sent as f64
            },
            window_s,
            throughput_per_s: if window_s > 0.0 {
                ok as f64 / window_s
            } else {
                0.0
            },
            offered_per_s: match load {
                OfferedLoad::Open { rate_per_s, .. } => Some(rate_per_s),
                OfferedLoad::Closed { .. } => None,
            },
            latency_ms: latency_stats(&latencies, boot)?,
            trend: trend(&latencies),
            send_lag: stats::median(&lags).map(|median_ms| SendLag {
                median_ms,
                max_ms: lags.iter().copied().fold(f64::MIN, f64::max),
            }),
            max_in_flight: max_in_flight(records),
            ended_early,
        })
    }

    /// Warnings a reader should see next to the figures.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (OfferedLoad::Open { rate_per_s, .. }, Some(t)) = (self.load, self.trend)
            && t.growth().is_some_and(|g| g > 2.0)
            && t.last_third_median_ms - t.first_third_median_ms > 1.0
        {
            out.push(format!(
                    "latency grew all run (median {:.1} ms in the first third, {:.1} ms in the last): the offered {rate_per_s}/s is above what the worker serves ({:.1}/s completed)",
                    t.first_third_median_ms, t.last_third_median_ms, self.throughput_per_s
                ));
        }
        if self.rejections > 0 {
            out.push(format!(
                "{} of {} requests rejected ({:.1}%): {} error replies, {} timeouts, {} lost",
                self.rejections,
                self.sent,
                100.0 * self.rejection_rate,
                self.error_replies,
                self.timeouts,
                self.lost
            ));
        }
        if self.wrong_replies > 0 {
            out.push(format!(
                "{} replies failed the correctness check",
                self.wrong_replies
            ));
        }
        if let Some(e) = &self.ended_early {
            out.push(format!("the serve phase ended early: {e}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        index: usize,
        scheduled: u64,
        sent: u64,
        received: Option<u64>,
        outcome: RequestOutcome,
    ) -> RequestRecord {
        let mut r = RequestRecord::scheduled(Variant::A, index, scheduled);
        r.sent_at_ns = Some(sent);
        match received {
            Some(at) => r.answered(at, outcome),
            None => r.outcome = outcome,
        }
        r
    }

    fn boot() -> Resampling {
        Resampling {
            resamples: 2000,
            ..Resampling::default()
        }
    }

    #[test]
    fn latency_counts_from_the_scheduled_time() {
        // Due at 0, written 5 ms late, answered at 7 ms: 7 ms, not 2 ms.
        let r = rec(0, 0, 5_000_000, Some(7_000_000), RequestOutcome::Ok);
        assert_eq!(r.latency_ns, Some(7_000_000));
    }

    #[test]
    fn in_flight_counts_overlaps_and_answers_first_at_ties() {
        let ok = RequestOutcome::Ok;
        let rs = vec![
            rec(0, 0, 0, Some(10), ok.clone()),
            rec(1, 0, 10, Some(20), ok.clone()), // sent as 0 is answered
            rec(2, 0, 12, Some(30), ok.clone()),
            rec(3, 0, 13, None, RequestOutcome::Lost { reason: "x".into() }),
        ];
        // At 13: 1, 2 and 3 are in flight.
        assert_eq!(max_in_flight(&rs), 3);
        assert_eq!(max_in_flight(&rs[..2]), 1);
        assert_eq!(max_in_flight(&[]), 0);
    }

    #[test]
    fn rejections_and_rate_by_hand() {
        let mut rs = Vec::new();
        for i in 0..20u64 {
            let outcome = match i {
                3 => RequestOutcome::ErrorReply { error: "no".into() },
                7 => RequestOutcome::WrongReply {
                    problem: "id 6".into(),
                },
                _ => RequestOutcome::Ok,
            };
            rs.push(rec(i as usize, i * 10, i * 10, Some(i * 10 + 4), outcome));
        }
        rs.push(rec(
            20,
            200,
            200,
            None,
            RequestOutcome::Timeout { after_ms: 1.0 },
        ));
        let mut never = RequestRecord::scheduled(Variant::A, 21, 210);
        never.outcome = RequestOutcome::Lost {
            reason: "not sent".into(),
        };
        rs.push(never);
        let s = ServeStats::of(
            Variant::A,
            OfferedLoad::Closed {
                requests: 22,
                in_flight: 1,
            },
            serde_json::json!({"op": "x"}),
            &rs,
            None,
            &boot(),
        )
        .unwrap();
        assert_eq!((s.scheduled, s.sent, s.ok), (22, 21, 18));
        assert_eq!(
            (s.error_replies, s.timeouts, s.lost, s.wrong_replies),
            (1, 1, 0, 1)
        );
        assert_eq!(s.rejections, 2);
        assert!((s.rejection_rate - 2.0 / 21.0).abs() < 1e-12);
        // Every ok latency is 4 ns.
        let l = s.latency_ms.clone().unwrap();
        assert_eq!(l.n, 18);
        assert_eq!(l.median, 4e-6);
        assert_eq!(l.max, 4e-6);
        // Window: first scheduled (0) to the last event (sent at 200).
        assert!((s.window_s - 200e-9).abs() < 1e-15);
        assert_eq!(s.warnings().len(), 2);
    }

    #[test]
    fn open_loop_window_is_at_least_the_offered_duration() {
        let load = OfferedLoad::open(10.0, 1.0);
        assert_eq!(load.requests(), 10);
        assert_eq!(load.offset_ns(3), Some(300_000_000));
        let rs: Vec<_> = (0..10)
            .map(|i| {
                let at = load.offset_ns(i).unwrap();
                rec(i, at, at, Some(at + 1_000_000), RequestOutcome::Ok)
            })
            .collect();
        let s = ServeStats::of(
            Variant::A,
            load,
            serde_json::Value::Null,
            &rs,
            None,
            &boot(),
        )
        .unwrap();
        assert_eq!(s.window_s, 1.0);
        assert_eq!(s.throughput_per_s, 10.0);
        assert_eq!(s.offered_per_s, Some(10.0));
        assert_eq!(s.max_in_flight, 1);
        assert!(s.warnings().is_empty());
    }

    #[test]
    fn a_growing_queue_shows_in_the_trend_and_warns() {
        let load = OfferedLoad::open(100.0, 0.3);
        // Service of 20 ms at 10 ms intervals: request i waits 10 i ms.
        let rs: Vec<_> = (0..30u64)
            .map(|i| {
                let at = i * 10_000_000;
                rec(
                    i as usize,
                    at,
                    at,
                    Some(at + (i + 2) * 10_000_000),
                    RequestOutcome::Ok,
                )
            })
            .collect();
        let s = ServeStats::of(
            Variant::A,
            load,
            serde_json::Value::Null,
            &rs,
            None,
            &boot(),
        )
        .unwrap();
        let t = s.trend.unwrap();
        assert_eq!(t.first_third_median_ms, 65.0);
        assert_eq!(t.last_third_median_ms, 265.0);
        assert!(
            s.warnings()[0].contains("latency grew all run"),
            "{:?}",
            s.warnings()
        );
    }

    #[test]
    fn percentiles_and_their_intervals() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let l = latency_stats(&xs, &boot()).unwrap().unwrap();
        assert_eq!(l.median, 50.5);
        assert!((l.p90 - 90.1).abs() < 1e-9);
        assert!((l.p99 - 99.01).abs() < 1e-9);
        assert_eq!(l.max, 100.0);
        for (v, ci) in [
            (l.median, l.median_ci),
            (l.p90, l.p90_ci),
            (l.p99, l.p99_ci),
        ] {
            assert!(ci.contains(v), "{v} outside {ci:?}");
            assert!(ci.lo >= 1.0 && ci.hi <= 100.0);
        }
        // The median's interval agrees with the crate's own median CI.
        let own = stats::median_ci(&xs, &boot()).unwrap();
        assert!((own.lo - l.median_ci.lo).abs() <= 3.0 && (own.hi - l.median_ci.hi).abs() <= 3.0);
        // Reproducible and independent of order.
        let mut rev = xs.clone();
        rev.reverse();
        assert_eq!(latency_stats(&rev, &boot()).unwrap().unwrap(), l);
        assert_eq!(latency_stats(&[], &boot()).unwrap(), None);
        assert!(latency_stats(&[f64::NAN], &boot()).is_err());
    }

    #[test]
    fn a_single_sample_has_a_degenerate_interval() {
        let l = latency_stats(&[3.0], &boot()).unwrap().unwrap();
        assert_eq!(
            (l.median_ci.lo, l.median_ci.hi, l.p99_ci.hi),
            (3.0, 3.0, 3.0)
        );
    }

    #[test]
    fn records_round_trip_through_json() {
        let r = rec(
            4,
            1,
            2,
            Some(3),
            RequestOutcome::ErrorReply {
                error: "busy".into(),
            },
        );
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            line.contains(r#""outcome":{"kind":"error_reply","error":"busy"}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<RequestRecord>(&line).unwrap(), r);
        let load = serde_json::to_string(&OfferedLoad::open(5.0, 2.0)).unwrap();
        assert_eq!(
            load,
            r#"{"mode":"open","rate_per_s":5.0,"duration_s":2.0,"requests":10}"#
        );
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn quick() -> Resampling {
            Resampling {
                resamples: 300,
                ..Resampling::default()
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            #[test]
            fn intervals_hold_their_percentile_and_ignore_order(
                mut xs in prop::collection::vec(0.0f64..1e4, 1..80),
            ) {
                let l = latency_stats(&xs, &quick()).unwrap().unwrap();
                prop_assert!(l.median_ci.contains(l.median));
                prop_assert!(l.p90_ci.contains(l.p90));
                prop_assert!(l.p99_ci.contains(l.p99));
                prop_assert!(l.median <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max);
                xs.reverse();
                prop_assert_eq!(latency_stats(&xs, &quick()).unwrap().unwrap(), l);
            }

            #[test]
            fn in_flight_lies_between_one_and_the_requests_sent(
                spans in prop::collection::vec((0u64..1000, 0u64..1000, any::<bool>()), 1..40),
            ) {
                let rs: Vec<RequestRecord> = spans
                    .iter()
                    .enumerate()
                    .map(|(i, &(sent, took, answered))| {
                        let mut r = RequestRecord::scheduled(Variant::A, i, sent);
                        r.sent_at_ns = Some(sent);
                        if answered {
                            r.answered(sent + took, RequestOutcome::Ok);
                        }
                        r
                    })
                    .collect();
                let m = max_in_flight(&rs);
                prop_assert!(m >= 1 && m <= rs.len());
            }
        }
    }
}
