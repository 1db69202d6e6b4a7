//! One timed trial: `concurrency` fresh workers, each through the one
//! [`Lifecycle`](crate::lifecycle::Lifecycle), as its record.

use timeline::{Escalation, Outcome, TrialKind, TrialRecord, Usage, WorkerRecord};

use crate::env;
use crate::interrupt::Interrupt;
use crate::lifecycle::Plain;
use crate::serve;
use crate::side::Side;

/// One worker's life through the one [`Lifecycle`], as its record.
fn run_worker(p: &Side, interrupt: &Interrupt) -> WorkerRecord {
    let lived = p.lifecycle.drive(&p.cmd, &mut Plain);
    let fin = lived.finished();
    let outcome = match &lived.end {
        Ok(_) => Outcome::Correct,
        Err(f) => {
            let (stage, message) = (f.stage.clone(), serve::clip_to(&f.to_string(), 4000));
            // A worker killed by a second Ctrl-C did not fail by itself.
            if interrupt.presses() > 1 {
                Outcome::Interrupted { stage, message }
            } else {
                Outcome::Failed { stage, message }
            }
        }
    };
    let mut marks = lived.timeline.marks();
    marks.connected_ns = fin.and_then(|f| f.connected_ns);
    WorkerRecord {
        pid: lived.pid,
        marks,
        usage: fin.and_then(|f| f.rusage).map(|u| Usage {
            user_ns: u.user.as_nanos() as u64,
            sys_ns: u.sys.as_nanos() as u64,
            max_rss_bytes: u.max_rss_bytes,
        }),
        rss_at_ready_bytes: lived.rss_at_ready_bytes,
        cgroup_peak_bytes: fin
            .and_then(|f| f.confinement.as_ref())
            .filter(|c| c.limits.memory_bytes.is_some())
            .and_then(|c| c.memory_peak_bytes),
        exit: fin.map(|f| f.status),
        escalation: fin.map_or(Escalation::None, |f| f.escalation),
        noise_lines: fin.map_or(0, |f| f.noise.len()),
        outcome,
    }
}

/// One trial: `concurrency` workers at once.
pub(crate) fn run_trial(
    p: &Side,
    trial: usize,
    round: usize,
    kind: TrialKind,
    interrupt: &Interrupt,
) -> TrialRecord {
    let started_unix_ms = env::unix_ms();
    let started_ns = spawn::monotonic_ns();
    let workers = if p.concurrency == 1 {
        vec![run_worker(p, interrupt)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..p.concurrency)
                .map(|_| s.spawn(|| run_worker(p, interrupt)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a worker thread panicked"))
                .collect()
        })
    };
    TrialRecord::new(
        trial,
        round,
        kind,
        p.variant,
        started_unix_ms,
        started_ns,
        workers,
    )
}
