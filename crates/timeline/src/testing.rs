//! Records for tests, here and in the crates above (feature
//! `test-support`): built beside the types, so a test of `phases`,
//! `harness` or `report` does not spell a [`WorkerRecord`] out again and a
//! new field is added in one place.

use crate::{
    Escalation, ExitStatus, Marks, Outcome, RoundTrip, TrialKind, TrialRecord, Usage, Variant,
    WorkerRecord,
};

/// A worker that went through every stage and exited 0: spawned at
/// `spawned_ns`, its ready line read at `ready_ns`. `gaps` places the other
/// marks, in ns: how long before the read the worker stamped its ready
/// line, then from the read to the health request sent, to its reply, to
/// shutdown sent, to the acknowledgement read, to the exit. No usage and
/// no RSS readings: a test that needs them sets them.
pub fn worker(pid: u32, spawned_ns: u64, ready_ns: u64, gaps: [u64; 6]) -> WorkerRecord {
    let [stamped, sent, replied, shutdown, ack, exited] = gaps;
    let sent = ready_ns + sent;
    let received = sent + replied;
    let shutdown = received + shutdown;
    let ack = shutdown + ack;
    WorkerRecord {
        pid: Some(pid),
        marks: Marks {
            spawned_ns,
            ready_t_ns: Some(ready_ns - stamped),
            ready_read_ns: Some(ready_ns),
            health: vec![RoundTrip {
                sent_ns: sent,
                received_ns: received,
            }],
            shutdown_sent_ns: Some(shutdown),
            ack_read_ns: Some(ack),
            exited_ns: Some(ack + exited),
            ..Marks::default()
        },
        usage: None,
        rss_at_ready_bytes: None,
        cgroup_peak_bytes: None,
        exit: Some(ExitStatus::Code(0)),
        escalation: Escalation::None,
        noise_lines: 0,
        outcome: Outcome::Correct,
    }
}

/// What the one worker of each of a test's [`trial`]s looks like, beside
/// its ready time.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Trial `i`'s worker has the pid `first_pid + i`.
    pub first_pid: u32,
    /// The marks around and after the ready line (see [`worker`]).
    pub gaps: [u64; 6],
    /// `wait4`'s usage of each worker.
    pub usage: Usage,
    /// Each worker's RSS right after its ready line.
    pub rss_at_ready_bytes: u64,
    /// Each trial's wall-clock start (Unix ms).
    pub started_unix_ms: u64,
}

/// Trial `i` of `round`: one correct worker of `shape`, spawned `i + 1`
/// seconds into the clock, its ready line read `ready_ms` later.
pub fn trial(
    i: usize,
    round: usize,
    kind: TrialKind,
    variant: Variant,
    ready_ms: f64,
    shape: &Shape,
) -> TrialRecord {
    let spawned = 1_000_000_000 + i as u64 * 1_000_000_000;
    let ready = spawned + (ready_ms * 1e6) as u64;
    let w = WorkerRecord {
        usage: Some(shape.usage),
        rss_at_ready_bytes: Some(shape.rss_at_ready_bytes),
        ..worker(shape.first_pid + i as u32, spawned, ready, shape.gaps)
    };
    let started = shape.started_unix_ms;
    TrialRecord::new(i, round, kind, variant, started, spawned, vec![w])
}
