//! What a bench run asks of the serve phase: its load, its request, a
//! pool's size and cold start; each checked before anything runs.

use phases::serve::OfferedLoad;

use crate::error::{Result, invalid};

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
