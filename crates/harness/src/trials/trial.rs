//! One timed trial: `concurrency` fresh workers, each through the one
//! [`Lifecycle`](crate::lifecycle::Lifecycle), as its record.

use timeline::{Outcome, TrialKind, TrialRecord, WorkerRecord};

use crate::env;
use crate::interrupt::Interrupt;
use crate::lifecycle::Plain;
use crate::serve;
use crate::side::Side;

/// One worker's life through the one [`Lifecycle`], as its record.
fn run_worker(p: &Side, interrupt: &Interrupt) -> WorkerRecord {
    let lived = p.lifecycle.drive(&p.cmd, &mut Plain);
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
    lived.record(outcome)
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
