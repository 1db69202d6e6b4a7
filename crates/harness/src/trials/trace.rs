//! A bench run on one timeline ([`::trace::Trace`]): coldstart's own track
//! with each trial and, one worker at a time, what it waited for (the
//! ready line, each health round trip, the shutdown acknowledgement, the
//! reap); each worker's process with its phases (start-up to the ready
//! line it stamped, ready until shutdown was asked, shutting down until
//! reaped) and its exit; and the protocol's messages as flows: the ready
//! line from the worker's start-up to coldstart's wait, each request and
//! the shutdown from coldstart's slice to the worker's.
//!
//! Every time is a mark the bench took on CLOCK_MONOTONIC, the trace's
//! clock; nothing is drawn that no mark holds. A worker's handling of a
//! request lies somewhere inside coldstart's round trip, so the request is
//! a slice on coldstart's side only, with its flow into the worker's
//! "ready" phase. With several workers a trial (`--concurrency`), their
//! waits overlap on coldstart's one thread, so only the trials are drawn
//! there; each worker's own track keeps its phases.

use std::collections::BTreeMap;

use ::trace::{Flow, Instant, Process, Slice, SliceAt, Thread, Trace};
use timeline::{TrialRecord, Variant, WorkerRecord};

/// The trace of `records`, coldstart being process `own_pid`; `label`
/// names each variant's target.
pub fn trace_of(records: &[TrialRecord], own_pid: u32, label: &dyn Fn(Variant) -> String) -> Trace {
    let mut b = Builder {
        own: Thread {
            tid: own_pid,
            name: "coldstart bench".to_owned(),
            ..Thread::default()
        },
        workers: BTreeMap::new(),
        flows: Vec::new(),
        own_pid,
    };
    for r in records {
        b.trial(r, label);
    }
    let mut processes = vec![Process {
        pid: own_pid,
        name: "coldstart bench".to_owned(),
        threads: vec![b.own],
        ..Process::default()
    }];
    processes.extend(b.workers.into_values());
    Trace {
        processes,
        flows: b.flows,
    }
}

struct Builder {
    own: Thread,
    workers: BTreeMap<u32, Process>,
    flows: Vec<Flow>,
    own_pid: u32,
}

fn slice(name: &str, category: &str, start_ns: u64, end_ns: u64) -> Slice {
    Slice {
        name: name.to_owned(),
        category: category.to_owned(),
        start_ns,
        end_ns: end_ns.max(start_ns),
    }
}

impl Builder {
    fn own_slice(&mut self, s: Slice) -> SliceAt {
        self.own.slices.push(s);
        SliceAt {
            pid: self.own_pid,
            tid: self.own_pid,
            index: self.own.slices.len() - 1,
        }
    }

    fn flow(&mut self, from: SliceAt, to: SliceAt) {
        let id = self.flows.len() as u64 + 1;
        self.flows.push(Flow { id, from, to });
    }

    fn trial(&mut self, r: &TrialRecord, label: &dyn Fn(Variant) -> String) {
        let start = r.workers.iter().map(|w| w.marks.spawned_ns).min();
        let end = r
            .workers
            .iter()
            .filter_map(|w| w.marks.exited_ns)
            .max()
            .or(start);
        let (Some(start), Some(end)) = (start, end) else {
            return;
        };
        let kind = match r.kind {
            timeline::TrialKind::Warmup => "warm-up",
            timeline::TrialKind::Measured => "trial",
        };
        let name = format!("{kind} {} of {}", r.trial, label(r.variant));
        self.own_slice(slice(&name, "trial", start, end));
        let alone = r.workers.len() == 1;
        for w in &r.workers {
            self.worker(w, alone, end);
        }
    }

    /// A worker's track, and, when it is the trial's only one, coldstart's
    /// waits on it with the messages between them.
    fn worker(&mut self, w: &WorkerRecord, alone: bool, trial_end: u64) {
        let Some(pid) = w.pid else { return };
        let m = &w.marks;
        let exited = m.exited_ns.unwrap_or(trial_end);
        let ready_read = m.ready_read_ns;
        // The worker's own stamp of its ready line, when it sits where it can.
        let ready = m
            .ready_t_ns
            .filter(|t| *t >= m.spawned_ns && ready_read.is_none_or(|r| *t <= r))
            .or(ready_read);
        let stop = m.shutdown_sent_ns.or(m.stop_sent_ns);
        let offset = self
            .workers
            .get(&pid)
            .map_or(0, |p| p.threads[0].slices.len());
        let mut track = Track {
            pid,
            offset,
            thread: Thread::default(),
        };
        track.add(slice(
            "start-up",
            "phase",
            m.spawned_ns,
            ready.unwrap_or(exited),
        ));
        let ready_line = ready.map(|r| track.add(slice("ready line", "message", r, r)));
        if let Some(r) = ready {
            track.add(slice("ready", "phase", r, stop.unwrap_or(exited)));
        }
        let served: Vec<(SliceAt, SliceAt)> = if alone {
            m.health
                .iter()
                .map(|h| {
                    let within = slice(
                        "health, answered within coldstart's round trip",
                        "request",
                        h.sent_ns,
                        h.received_ns,
                    );
                    let r = h.received_ns;
                    (
                        track.add(within),
                        track.add(slice("health reply", "message", r, r)),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let shutting = stop.map(|s| track.add(slice("shutting down", "phase", s, exited)));
        let acked = m
            .ack_read_ns
            .filter(|a| stop.is_some_and(|s| s <= *a) && *a <= exited)
            .map(|a| track.add(slice("shutdown acknowledged", "message", a, a)));
        track.thread.instants.push(Instant {
            name: match &w.exit {
                Some(e) => format!("exited: {e}"),
                None => "not reaped".to_owned(),
            },
            t_ns: exited,
        });
        self.add_worker(track);
        if !alone {
            return;
        }
        // coldstart's side: each wait, and a message at the moment it is
        // written or read, so that each arrow is drawn at its mark.
        if let Some(r) = ready_read {
            self.own_slice(slice("waiting for the ready line", "wait", m.spawned_ns, r));
            let read = self.own_slice(slice("ready line read", "message", r, r));
            if let Some(line) = ready_line {
                self.flow(line, read);
            }
        }
        for (h, (within, reply)) in m.health.iter().zip(served) {
            self.own_slice(slice("health", "request", h.sent_ns, h.received_ns));
            let sent = self.own_slice(slice("health request", "message", h.sent_ns, h.sent_ns));
            self.flow(sent, within);
            let r = h.received_ns;
            let read = self.own_slice(slice("health reply read", "message", r, r));
            self.flow(reply, read);
        }
        if let Some(s) = m.shutdown_sent_ns {
            let ack = m.ack_read_ns.unwrap_or(exited);
            self.own_slice(slice("shutdown", "request", s, ack));
            let sent = self.own_slice(slice("shutdown sent", "message", s, s));
            if let Some(to) = shutting {
                self.flow(sent, to);
            }
            if let (Some(from), Some(a)) = (acked, m.ack_read_ns) {
                let read = self.own_slice(slice("acknowledgement read", "message", a, a));
                self.flow(from, read);
            }
        }
        let from = m.ack_read_ns.or(m.stop_sent_ns);
        if let Some(f) = from.filter(|f| *f <= exited) {
            self.own_slice(slice("waiting for the exit", "wait", f, exited));
        }
    }

    /// A worker's slices onto its process (one per pid: a pid the kernel
    /// gave again later is the same track, its lives apart in time).
    fn add_worker(&mut self, track: Track) {
        let process = self.workers.entry(track.pid).or_insert_with(|| Process {
            pid: track.pid,
            name: format!("worker {}", track.pid),
            threads: vec![Thread {
                tid: track.pid,
                name: "main".to_owned(),
                ..Thread::default()
            }],
            ..Process::default()
        });
        let thread = &mut process.threads[0];
        thread.slices.extend(track.thread.slices);
        thread.instants.extend(track.thread.instants);
    }
}

/// One life of a worker's main thread, built before it joins its
/// process, whose thread already holds `offset` slices.
struct Track {
    pid: u32,
    offset: usize,
    thread: Thread,
}

impl Track {
    fn add(&mut self, s: Slice) -> SliceAt {
        self.thread.slices.push(s);
        SliceAt {
            pid: self.pid,
            tid: self.pid,
            index: self.offset + self.thread.slices.len() - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use timeline::{Escalation, ExitStatus, Marks, Outcome, RoundTrip, TrialKind};

    fn worker(pid: u32, t0: u64) -> WorkerRecord {
        WorkerRecord {
            pid: Some(pid),
            marks: Marks {
                spawned_ns: t0,
                ready_t_ns: Some(t0 + 90),
                ready_read_ns: Some(t0 + 100),
                health: vec![RoundTrip {
                    sent_ns: t0 + 110,
                    received_ns: t0 + 120,
                }],
                shutdown_sent_ns: Some(t0 + 130),
                ack_read_ns: Some(t0 + 140),
                exited_ns: Some(t0 + 150),
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

    fn trial(i: usize, workers: Vec<WorkerRecord>) -> TrialRecord {
        TrialRecord::new(i, i, TrialKind::Measured, Variant::A, 0, 0, workers)
    }

    #[test]
    fn each_phase_is_a_mark_and_each_message_a_flow_and_the_trace_keeps_the_rules() {
        let t = trace_of(
            &[
                trial(0, vec![worker(11, 1000)]),
                trial(1, vec![worker(12, 2000)]),
            ],
            7,
            &|_| "w".to_owned(),
        );
        t.check().unwrap();
        assert_eq!(t.processes.len(), 3);
        let own: Vec<&str> = t.processes[0].threads[0]
            .slices
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            own[..9],
            [
                "trial 0 of w",
                "waiting for the ready line",
                "ready line read",
                "health",
                "health request",
                "health reply read",
                "shutdown",
                "shutdown sent",
                "acknowledgement read",
            ]
        );
        let w = &t.processes[1].threads[0];
        let phases: Vec<(&str, u64, u64)> = w
            .slices
            .iter()
            .map(|s| (s.name.as_str(), s.start_ns, s.end_ns))
            .collect();
        assert_eq!(
            phases[..3],
            [
                ("start-up", 1000, 1090),
                ("ready line", 1090, 1090),
                ("ready", 1090, 1130)
            ],
            "start-up ends at the worker's own stamp"
        );
        assert_eq!(
            t.flows.len(),
            10,
            "ready line, request, reply, shutdown, acknowledgement: two trials"
        );
        // Every arrow joins two moments the bench marked: it leaves a
        // message slice and reaches a slice that begins when it arrives.
        for f in &t.flows {
            let (from, to) = (t.slice(f.from).unwrap(), t.slice(f.to).unwrap());
            assert_eq!(from.start_ns, from.end_ns, "{from:?}");
            assert!(to.start_ns >= from.start_ns, "{from:?} -> {to:?}");
        }
        let first = t.flows[0];
        assert_eq!(
            (first.from.pid, first.to.pid),
            (11, 7),
            "the ready line goes to coldstart"
        );
        assert_eq!(
            t.slice(first.to).unwrap().start_ns,
            1100,
            "read when coldstart read it"
        );
    }

    #[test]
    fn concurrent_workers_keep_their_tracks_and_coldstart_draws_only_the_trial() {
        let t = trace_of(
            &[trial(0, vec![worker(11, 1000), worker(12, 1005)])],
            7,
            &|_| "w".to_owned(),
        );
        t.check().unwrap();
        assert_eq!(t.processes[0].threads[0].slices.len(), 1);
        assert_eq!(t.processes.len(), 3);
        assert!(t.flows.is_empty());
    }
}
