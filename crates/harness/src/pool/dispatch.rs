//! The dispatcher: arrivals at their scheduled times into one FIFO queue,
//! each handed to a free worker (the one idle longest), the kill and the
//! replacement at `--replace-at`, the worker added at `--scale-at-depth`,
//! the queue's limits, and the notes of the member threads. It runs on the caller's thread; it never holds a worker
//! handle, only each member's job channel and pid.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::Scope;
use std::time::Duration;

use phases::pool::{PoolRequest, PoolWorker, Role};
use phases::serve::RequestOutcome;

use super::member::{self, Job, Note};
use crate::interrupt::Interrupt;
use crate::serve::{PoolOptions, SPIN_NS};

/// One member as the dispatcher sees it.
#[derive(Debug)]
struct Slot {
    /// Its job channel; `None` once it is to get no more (killed, ended,
    /// or the run is over).
    jobs: Option<Sender<usize>>,
    /// Its lifecycle has returned.
    ended: bool,
    /// What the summary says of it.
    info: PoolWorker,
}

/// The dispatcher's state, and what a pool run leaves.
#[derive(Debug)]
pub(super) struct Dispatch<'a> {
    opts: &'a PoolOptions,
    job: &'a Job,
    notes: Sender<Note>,
    /// Every request scheduled (cut at the interrupt).
    pub records: Vec<PoolRequest>,
    slots: Vec<Slot>,
    queue: VecDeque<usize>,
    free: VecDeque<usize>,
    /// The next request to arrive.
    next: usize,
    /// Requests handed to a worker and not done with.
    outstanding: usize,
    /// When one worker is to be killed (monotonic ns), until it is.
    kill_at: Option<u64>,
    /// Why the run ended early, if it did.
    pub ended_early: Option<String>,
}

impl<'a> Dispatch<'a> {
    pub(super) fn new(opts: &'a PoolOptions, job: &'a Job, notes: Sender<Note>) -> Dispatch<'a> {
        Dispatch {
            opts,
            job,
            notes,
            records: Vec::new(),
            slots: Vec::new(),
            queue: VecDeque::new(),
            free: VecDeque::new(),
            next: 0,
            outstanding: 0,
            kill_at: None,
            ended_early: None,
        }
    }

    /// Every member, in slot order.
    pub(super) fn members(self) -> Vec<PoolWorker> {
        self.slots.into_iter().map(|s| s.info).collect()
    }

    /// Starts a member in its own thread of `scope`; `triggered_at_ns` is
    /// what started it (the kill, the queue's depth), for a new worker.
    pub(super) fn start<'s>(
        &mut self,
        scope: &'s Scope<'s, '_>,
        role: Role,
        triggered_at_ns: Option<u64>,
    ) where
        'a: 's,
    {
        let slot = self.slots.len();
        let (tx, rx) = mpsc::channel();
        let notes = self.notes.clone();
        let job = self.job;
        scope.spawn(move || member::run(slot, job, rx, notes));
        self.slots.push(Slot {
            jobs: Some(tx),
            ended: false,
            info: PoolWorker {
                slot,
                role,
                triggered_at_ns,
                pid: None,
                spawned_at_ns: None,
                ready_at_ns: None,
                ready_ms: None,
                killed_at_ns: None,
                answered: 0,
                end: "running".to_owned(),
                failed: false,
            },
        });
    }

    /// Waits until every member started so far is ready; `Err` names the
    /// first that ended before (or the interrupt).
    pub(super) fn await_ready(
        &mut self,
        rx: &Receiver<Note>,
        stop: &Interrupt,
    ) -> Result<(), String> {
        while self.slots.iter().any(|s| s.info.ready_at_ns.is_none()) {
            if stop.is_set() {
                return Err("interrupted while the pool's workers started".to_owned());
            }
            if let Ok(note) = rx.recv_timeout(Duration::from_millis(50)) {
                self.handle(note);
            }
            if let Some(s) = self
                .slots
                .iter()
                .find(|s| s.ended && s.info.ready_at_ns.is_none())
            {
                return Err(format!(
                    "worker {} of the pool did not become ready: {}",
                    s.info.slot, s.info.end
                ));
            }
        }
        Ok(())
    }

    /// The open loop: `records` scheduled, the kill at `kill_at`, until
    /// every request is done with and no member is still starting.
    pub(super) fn serve<'s>(
        &mut self,
        scope: &'s Scope<'s, '_>,
        rx: &Receiver<Note>,
        records: Vec<PoolRequest>,
        kill_at: Option<u64>,
        stop: &Interrupt,
    ) where
        'a: 's,
    {
        self.records = records;
        self.kill_at = kill_at;
        loop {
            if stop.is_set() && self.next < self.records.len() {
                self.records.truncate(self.next);
                self.kill_at = None;
                self.ended_early = Some(format!(
                    "interrupted: {} of the requests scheduled arrived",
                    self.next
                ));
            }
            let now = spawn::monotonic_ns();
            self.expire(now);
            self.arrive_due(now);
            if self.kill_at.is_some_and(|k| k <= now) {
                self.kill_and_replace(scope);
            }
            self.dispatch();
            self.scale_if_deep(scope);
            if self.no_worker_left() {
                self.give_up();
                break;
            }
            if self.finished() {
                break;
            }
            let deadline = self.next_deadline();
            self.wait(rx, deadline);
        }
    }

    /// Closes every job channel (each member shuts its worker down) and
    /// waits until every lifecycle has returned.
    pub(super) fn close(&mut self, rx: &Receiver<Note>) {
        for s in &mut self.slots {
            s.jobs = None;
        }
        while self.slots.iter().any(|s| !s.ended) {
            match rx.recv() {
                Ok(note) => self.handle(note),
                Err(_) => break,
            }
        }
    }

    /// Every arrival due by `now`, each queued (or turned away) and the
    /// queue dispatched before the next, so a burst of late arrivals never
    /// fills the queue while a worker is free.
    fn arrive_due(&mut self, now: u64) {
        while self.next < self.records.len()
            && self.records[self.next].request.scheduled_at_ns <= now
        {
            let i = self.next;
            self.next += 1;
            match self.opts.queue_cap {
                Some(cap) if self.queue.len() >= cap => {
                    self.records[i].request.outcome = RequestOutcome::Rejected {
                        reason: format!("the queue already held {cap} requests (--queue-cap)"),
                    };
                }
                _ => self.queue.push_back(i),
            }
            self.dispatch();
        }
    }

    /// Turns away queued requests that waited past `--max-wait`.
    fn expire(&mut self, now: u64) {
        while let Some(&i) = self.queue.front() {
            if !self.waited_too_long(i, now) {
                break;
            }
            self.queue.pop_front();
            self.reject_waited(i);
        }
    }

    fn max_wait_ns(&self) -> Option<u64> {
        self.opts.max_wait_ms.map(|m| (m * 1e6).round() as u64)
    }

    /// Request `i` has waited longer than `--max-wait` at `now`.
    fn waited_too_long(&self, i: usize, now: u64) -> bool {
        self.max_wait_ns()
            .is_some_and(|max| now > self.records[i].request.scheduled_at_ns + max)
    }

    fn reject_waited(&mut self, i: usize) {
        self.records[i].request.outcome = RequestOutcome::Rejected {
            reason: format!(
                "waited over {} ms for a free worker (--max-wait)",
                self.opts.max_wait_ms.unwrap_or_default()
            ),
        };
    }

    /// Hands queued requests to free workers, oldest request first, to the
    /// worker idle longest. A request is never handed over after its
    /// `--max-wait`: checked at the dispatch's own stamp.
    fn dispatch(&mut self) {
        while !self.queue.is_empty() {
            let Some(slot) = self.free.pop_front() else {
                return;
            };
            if self.slots[slot].jobs.is_none() {
                continue;
            }
            let i = self.queue.pop_front().expect("not empty");
            let at = spawn::monotonic_ns();
            if self.waited_too_long(i, at) {
                self.reject_waited(i);
                self.free.push_front(slot);
                continue;
            }
            let tx = self.slots[slot].jobs.as_ref().expect("checked above");
            if tx.send(i).is_err() {
                // The member is gone (its note is on the way): put the
                // request back, never hand this one more.
                self.queue.push_front(i);
                self.slots[slot].jobs = None;
                continue;
            }
            let r = &mut self.records[i];
            r.dispatched_at_ns = Some(at);
            r.worker = Some(slot);
            self.outstanding += 1;
        }
    }

    /// SIGKILL to one ready worker (the lowest slot), as a supervisor or
    /// the OOM killer would, and a replacement started at once.
    fn kill_and_replace<'s>(&mut self, scope: &'s Scope<'s, '_>)
    where
        'a: 's,
    {
        self.kill_at = None;
        let victim = self.slots.iter().position(|s| {
            s.info.role == Role::Initial
                && !s.ended
                && s.jobs.is_some()
                && s.info.ready_at_ns.is_some()
        });
        let Some(v) = victim else {
            return;
        };
        let at = spawn::monotonic_ns();
        if let Some(pid) = self.slots[v].info.pid {
            spawn::kill_group(pid);
        }
        let s = &mut self.slots[v];
        s.info.killed_at_ns = Some(at);
        s.jobs = None;
        self.free.retain(|&f| f != v);
        self.start(scope, Role::Replacement, Some(at));
    }

    /// One worker added, once, when the queue first holds more than
    /// `--scale-at-depth` requests after a dispatch (so a free worker
    /// never counts as depth).
    fn scale_if_deep<'s>(&mut self, scope: &'s Scope<'s, '_>)
    where
        'a: 's,
    {
        let Some(depth) = self.opts.scale_at_depth else {
            return;
        };
        let added = self.slots.iter().any(|s| s.info.role == Role::Added);
        if !added && self.queue.len() > depth {
            self.start(scope, Role::Added, Some(spawn::monotonic_ns()));
        }
    }

    /// A worker ready or starting remains.
    fn no_worker_left(&self) -> bool {
        !self.slots.iter().any(|s| s.jobs.is_some() && !s.ended)
    }

    /// With no worker left, the queued requests and the rest of the
    /// schedule are turned away, and the run ends early.
    fn give_up(&mut self) {
        for i in self.queue.drain(..) {
            self.records[i].request.outcome = RequestOutcome::Rejected {
                reason: "no worker left in the pool".to_owned(),
            };
        }
        self.records.truncate(self.next);
        let ends: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.info.failed)
            .map(|s| format!("worker {}: {}", s.info.slot, s.info.end))
            .collect();
        self.ended_early = Some(format!(
            "no worker left in the pool after {} requests arrived ({})",
            self.next,
            ends.join("; ")
        ));
    }

    /// Every request arrived and is done with, the kill is done, and no
    /// member is still starting (its ready time is a figure of the run).
    fn finished(&self) -> bool {
        self.next == self.records.len()
            && self.queue.is_empty()
            && self.outstanding == 0
            && self.kill_at.is_none()
            && !self
                .slots
                .iter()
                .any(|s| !s.ended && s.info.ready_at_ns.is_none())
    }

    /// The next moment the dispatcher must act without a note: an arrival,
    /// the kill, the oldest queued request's wait running out.
    fn next_deadline(&self) -> Option<u64> {
        let arrival = self
            .records
            .get(self.next)
            .map(|r| r.request.scheduled_at_ns);
        let expiry = match (self.max_wait_ns(), self.queue.front()) {
            (Some(max), Some(&i)) => Some(self.records[i].request.scheduled_at_ns + max + 1),
            _ => None,
        };
        [arrival, self.kill_at, expiry].into_iter().flatten().min()
    }

    /// Waits for notes until `deadline` (sleeping until [`SPIN_NS`] before
    /// it, then yielding), handling each; without one, until a note comes.
    fn wait(&mut self, rx: &Receiver<Note>, deadline: Option<u64>) {
        let now = spawn::monotonic_ns();
        let first = match deadline {
            None => rx.recv().ok(),
            Some(d) if d > now + SPIN_NS => rx
                .recv_timeout(Duration::from_nanos(d - now - SPIN_NS))
                .ok(),
            Some(d) => loop {
                if let Ok(n) = rx.try_recv() {
                    break Some(n);
                }
                if spawn::monotonic_ns() >= d {
                    break None;
                }
                std::thread::yield_now();
            },
        };
        if let Some(note) = first {
            self.handle(note);
            while let Ok(note) = rx.try_recv() {
                self.handle(note);
            }
        }
    }

    fn handle(&mut self, note: Note) {
        match note {
            Note::Spawned { slot, pid } => self.slots[slot].info.pid = Some(pid),
            Note::Ready {
                slot,
                spawned_at_ns,
                ready_at_ns,
            } => {
                let info = &mut self.slots[slot].info;
                info.spawned_at_ns = Some(spawned_at_ns);
                info.ready_at_ns = Some(ready_at_ns);
                info.ready_ms = Some(ready_at_ns.saturating_sub(spawned_at_ns) as f64 / 1e6);
                if self.slots[slot].jobs.is_some() {
                    self.free.push_back(slot);
                }
            }
            Note::Done {
                slot,
                index,
                sent_at_ns,
                received_at_ns,
                outcome,
                ended,
            } => {
                self.outstanding -= 1;
                let r = &mut self.records[index].request;
                r.sent_at_ns = sent_at_ns;
                match received_at_ns {
                    Some(at) => r.answered(at, outcome),
                    None => r.outcome = outcome,
                }
                let s = &mut self.slots[slot];
                s.info.answered += usize::from(received_at_ns.is_some());
                if ended {
                    s.jobs = None;
                } else if s.jobs.is_some() {
                    self.free.push_back(slot);
                }
            }
            Note::Ended { slot, end } => {
                let s = &mut self.slots[slot];
                s.ended = true;
                s.jobs = None;
                let killed = s.info.killed_at_ns.is_some();
                s.info.end = match end {
                    Ok(()) => "shut down".to_owned(),
                    Err(_) if killed => "killed by the pool (SIGKILL)".to_owned(),
                    Err(e) => e,
                };
                s.info.failed = s.info.end != "shut down" && !killed;
                self.free.retain(|&f| f != slot);
            }
        }
    }
}
