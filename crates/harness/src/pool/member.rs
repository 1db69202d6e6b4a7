//! One worker of the pool on a thread of its own: the one lifecycle
//! ([`Lifecycle::drive`]) with hooks that tell the dispatcher when the
//! worker is spawned and ready, and, between ready and shutdown, serve the
//! requests the dispatcher hands it one at a time, each reply judged and
//! reported back. The worker handle never leaves this thread.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, Sender};

use phases::serve::RequestOutcome;

use crate::lifecycle::{Halt, Hooks, Lifecycle, Started};
use crate::serve::{self, Plan};

/// What a member tells the dispatcher.
#[derive(Debug)]
pub(super) enum Note {
    /// The worker started: its pid (its process group).
    Spawned { slot: usize, pid: u32 },
    /// Its ready line was read.
    Ready {
        slot: usize,
        spawned_at_ns: u64,
        ready_at_ns: u64,
    },
    /// Request `index` is done with: answered, or lost with the worker.
    Done {
        slot: usize,
        index: usize,
        sent_at_ns: Option<u64>,
        received_at_ns: Option<u64>,
        outcome: RequestOutcome,
        /// The worker ended with it: hand it nothing more.
        ended: bool,
    },
    /// The lifecycle returned: the worker is reaped. `Err` is its failure.
    Ended {
        slot: usize,
        end: Result<(), String>,
    },
}

/// What one member thread needs, owned: the lifecycle (no health round
/// trips: requests come from the dispatcher), the command and the plan.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub lifecycle: Lifecycle,
    pub cmd: spawn::Command,
    pub plan: Plan,
}

/// Runs member `slot` to its end: spawn, ready, the requests from `jobs`
/// until that channel closes, shutdown. Always tells [`Note::Ended`], a
/// panic included (then re-raised).
pub(super) fn run(slot: usize, job: &Job, jobs: Receiver<usize>, notes: Sender<Note>) {
    let mut hooks = Member {
        slot,
        plan: &job.plan,
        jobs,
        notes: notes.clone(),
    };
    let lived = std::panic::catch_unwind(AssertUnwindSafe(|| {
        job.lifecycle.drive(&job.cmd, &mut hooks)
    }));
    let end = match &lived {
        Ok(l) => l
            .end
            .as_ref()
            .map(|_| ())
            .map_err(|f| match f.worker_error() {
                Some(e) => format!("{} (at {})", serve::short_error(e), f.stage),
                None => f.to_string(),
            }),
        Err(_) => Err("the thread driving this worker panicked".to_owned()),
    };
    let _ = notes.send(Note::Ended { slot, end });
    if let Err(panic) = lived {
        std::panic::resume_unwind(panic);
    }
}

struct Member<'a> {
    slot: usize,
    plan: &'a Plan,
    jobs: Receiver<usize>,
    notes: Sender<Note>,
}

impl Member<'_> {
    fn done(
        &self,
        index: usize,
        sent: Option<u64>,
        received: Option<u64>,
        outcome: RequestOutcome,
        ended: bool,
    ) {
        let _ = self.notes.send(Note::Done {
            slot: self.slot,
            index,
            sent_at_ns: sent,
            received_at_ns: received,
            outcome,
            ended,
        });
    }
}

impl Hooks for Member<'_> {
    fn spawned(&mut self, pid: u32) -> Result<(), Halt> {
        let _ = self.notes.send(Note::Spawned {
            slot: self.slot,
            pid,
        });
        Ok(())
    }

    fn ready(&mut self, w: &mut Started<'_>) -> Result<(), Halt> {
        let _ = self.notes.send(Note::Ready {
            slot: self.slot,
            spawned_at_ns: w.worker.spawned_at_ns(),
            ready_at_ns: w.ready.read_at_ns,
        });
        Ok(())
    }

    /// One request at a time, as the dispatcher hands them; returns when
    /// the dispatcher closes the channel, or with the worker's end.
    fn before_shutdown(&mut self, w: &mut Started<'_>) -> Result<(), Halt> {
        while let Ok(index) = self.jobs.recv() {
            let sent = match w.worker.send(&self.plan.request(index)) {
                Ok(at) => at,
                Err(e) => {
                    let reason = format!("could not be written: {}", serve::short_error(&e));
                    self.done(index, None, None, RequestOutcome::Lost { reason }, true);
                    return Err(Halt::Ended(e));
                }
            };
            match w.worker.recv(self.plan.timeout) {
                Ok(reply) => {
                    let outcome = self.plan.judge(index, &reply.value);
                    self.done(index, Some(sent), Some(reply.read_at_ns), outcome, false);
                }
                Err(e) => {
                    self.done(index, Some(sent), None, serve::outcome_of(&e), true);
                    return Err(Halt::Ended(e));
                }
            }
        }
        Ok(())
    }
}
