//! A bench run on one timeline ([`::trace::Trace`]): coldstart's own track
//! with each trial and, one worker at a time, what it waited for (the
//! ready line, each health round trip, the shutdown acknowledgement, the
//! reap); each worker's process with its phases (start-up to the ready
//! line it stamped, ready until shutdown was asked, shutting down until
//! reaped) and its exit; and the protocol's messages as flows: the ready
//! line from the worker's start-up to coldstart's wait, each request and
//! the shutdown from coldstart's slice to the worker's.
//!
//! After the trials, each serve phase's worker the same way, and each of
//! its requests (at most [`MAX_REQUESTS_DRAWN`] a worker, the first ones:
//! the serve phase's slice says how many were left out) as a slice on
//! coldstart's side from its write to the read of its reply, with a flow
//! into the worker's track and one back from its reply. Requests in
//! flight together (`--in-flight`, an open loop) overlap, so each goes on
//! the first lane free at its write: the main tracks first, then tracks
//! of their own (`serve requests (2)`, ..., on coldstart's side and the
//! worker's). A pool's requests (`--pool`) are not drawn.
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
use phases::serve::{RequestOutcome, RequestRecord};
use timeline::{TrialRecord, Variant, WorkerRecord};

use crate::serve::ServeWorker;

/// The most serve-phase requests drawn for one worker (the first ones):
/// an open loop of thousands would bury the trace.
pub const MAX_REQUESTS_DRAWN: usize = 200;

/// One µs in ns: the unit of Chrome's JSON, the finest a mark is drawn
/// apart from the slice that ends where it is.
const US: u64 = 1_000;

/// The first id of tracks that are lanes, not kernel threads (above any
/// thread id: Linux's `pid_max` is at most 2^22).
pub(crate) const LANE_TIDS: u32 = 1 << 30;

/// The trace of `records` and of the serve phases' `serve_workers` with
/// their `requests`, coldstart being process `own_pid`; `label` names
/// each variant's target.
pub fn trace_of(
    records: &[TrialRecord],
    serve_workers: &[ServeWorker],
    requests: &[RequestRecord],
    own_pid: u32,
    label: &dyn Fn(Variant) -> String,
) -> Trace {
    let mut b = Builder::new(own_pid, "coldstart bench");
    for r in records {
        b.trial(r, label);
    }
    for w in serve_workers {
        let mine: Vec<&RequestRecord> = requests
            .iter()
            .filter(|r| r.variant == w.variant && r.sent_at_ns.is_some())
            .collect();
        b.serve_phase(w, &mine, &label(w.variant));
    }
    b.finish()
}

/// A trace in the making: coldstart's threads (its main one first, then
/// lanes), the workers' processes, the flows.
pub(crate) struct Builder {
    own: Process,
    workers: BTreeMap<u32, Process>,
    flows: Vec<Flow>,
}

/// A slice named `name` of `category` from `start_ns` to `end_ns` (never
/// before its start).
pub(crate) fn slice(name: &str, category: &str, start_ns: u64, end_ns: u64) -> Slice {
    Slice {
        name: name.to_owned(),
        category: category.to_owned(),
        start_ns,
        end_ns: end_ns.max(start_ns),
    }
}

fn push(thread: &mut Thread, pid: u32, s: Slice) -> SliceAt {
    thread.slices.push(s);
    SliceAt {
        pid,
        tid: thread.tid,
        index: thread.slices.len() - 1,
    }
}

impl Builder {
    /// coldstart (`own_pid`) alone, its main thread named `name`.
    pub(crate) fn new(own_pid: u32, name: &str) -> Builder {
        Builder {
            own: Process {
                pid: own_pid,
                name: name.to_owned(),
                threads: vec![Thread {
                    tid: own_pid,
                    name: name.to_owned(),
                    ..Thread::default()
                }],
                ..Process::default()
            },
            workers: BTreeMap::new(),
            flows: Vec::new(),
        }
    }

    /// coldstart's main thread's id.
    pub(crate) fn own_tid(&self) -> u32 {
        self.own.pid
    }

    /// The whole trace: coldstart first, then the workers by pid.
    pub(crate) fn finish(self) -> Trace {
        let mut processes = vec![self.own];
        processes.extend(self.workers.into_values());
        Trace {
            processes,
            flows: self.flows,
        }
    }

    /// `s` on coldstart's thread `tid` (its main one, or a lane made by
    /// [`Builder::own_lane`]).
    pub(crate) fn own_slice(&mut self, tid: u32, s: Slice) -> SliceAt {
        let pid = self.own.pid;
        let thread = thread_of(&mut self.own, tid, "");
        push(thread, pid, s)
    }

    /// coldstart's track `tid` named `name` (a lane, not a kernel thread).
    pub(crate) fn own_lane(&mut self, tid: u32, name: &str) {
        thread_of(&mut self.own, tid, name);
    }

    /// An arrow from `from` to `to`.
    pub(crate) fn flow(&mut self, from: SliceAt, to: SliceAt) {
        let id = self.flows.len() as u64 + 1;
        self.flows.push(Flow { id, from, to });
    }

    /// Thread `tid` of process `pid` (made, named `name`, when new; the
    /// process named `worker PID` when new).
    pub(crate) fn thread(&mut self, pid: u32, tid: u32, name: &str) -> &mut Thread {
        let process = self.workers.entry(pid).or_insert_with(|| Process {
            pid,
            name: format!("worker {pid}"),
            ..Process::default()
        });
        thread_of(process, tid, name)
    }

    /// Process `pid` named `name` (made when new): a process below a
    /// worker, not the worker itself.
    pub(crate) fn name_process(&mut self, pid: u32, name: &str) {
        let process = self.workers.entry(pid).or_insert_with(|| Process {
            pid,
            ..Process::default()
        });
        process.name = name.to_owned();
    }

    fn trial(&mut self, r: &TrialRecord, label: &dyn Fn(Variant) -> String) {
        let Some((start, end)) = span_of(&r.workers) else {
            return;
        };
        let kind = match r.kind {
            timeline::TrialKind::Warmup => "warm-up",
            timeline::TrialKind::Measured => "trial",
        };
        let name = format!("{kind} {} of {}", r.trial, label(r.variant));
        let own = self.own_tid();
        self.own_slice(own, slice(&name, "trial", start, end));
        let alone = r.workers.len() == 1;
        for w in &r.workers {
            self.worker(w, alone.then_some(own), end);
        }
    }

    /// A serve phase's worker, as a trial alone, and its `requests` (the
    /// ones written, in order).
    fn serve_phase(&mut self, w: &ServeWorker, requests: &[&RequestRecord], label: &str) {
        let Some((start, end)) = span_of(std::slice::from_ref(&w.record)) else {
            return;
        };
        let left_out = requests.len().saturating_sub(MAX_REQUESTS_DRAWN);
        let mut name = format!("serve phase of {label}: {} requests", requests.len());
        if left_out > 0 {
            name.push_str(&format!(
                ", the first {MAX_REQUESTS_DRAWN} drawn ({left_out} left out)"
            ));
        }
        let own = self.own_tid();
        let phase = slice(&name, "serve", start, end);
        self.own_slice(own, phase.clone());
        self.worker(&w.record, Some(own), end);
        if let Some(pid) = w.record.pid {
            let m = &w.record.marks;
            let ready = m.ready_t_ns.or(m.ready_read_ns).unwrap_or(start);
            let stop = m.shutdown_sent_ns.or(m.stop_sent_ns).unwrap_or(end);
            let lanes = Lanes {
                pid,
                own: phase,
                theirs: slice("ready", "phase", ready, stop),
            };
            self.requests(&lanes, &requests[..requests.len() - left_out]);
        }
    }

    /// Each request on the first lane free at its write: a slice on
    /// coldstart's side with its write and its reply's read, the worker's
    /// round trip on its side, a flow each way.
    fn requests(&mut self, lanes_of: &Lanes, requests: &[&RequestRecord]) {
        let (own, pid) = (self.own_tid(), lanes_of.pid);
        let mut lanes: Vec<u64> = Vec::new();
        for r in requests {
            let Some(sent) = r.sent_at_ns else { continue };
            let back = r.received_at_ns.filter(|b| *b >= sent);
            let end = back.unwrap_or(sent);
            let lane = match lanes.iter().position(|free| *free <= sent) {
                Some(i) => i,
                None => {
                    lanes.push(0);
                    lanes.len() - 1
                }
            };
            let (own_tid, tid) = match lane {
                0 => (own, pid),
                i => {
                    let tid = LANE_TIDS + i as u32;
                    if lanes[i] == 0 {
                        // A new lane: the phases its slices lie in (and
                        // its flows, at their moments, inside them).
                        self.own_lane(tid, &format!("serve requests ({})", i + 1));
                        self.own_slice(tid, lanes_of.own.clone());
                        let lane =
                            self.thread(pid, tid, &format!("requests in flight ({})", i + 1));
                        lane.slices.push(lanes_of.theirs.clone());
                    }
                    (tid, tid)
                }
            };
            lanes[lane] = end.max(1);
            let outcome = match &r.outcome {
                RequestOutcome::Ok => String::new(),
                RequestOutcome::ErrorReply { .. } => " (error reply)".to_owned(),
                RequestOutcome::Timeout { .. } => " (timed out)".to_owned(),
                RequestOutcome::Lost { .. } => " (no reply)".to_owned(),
                RequestOutcome::WrongReply { .. } => " (wrong reply)".to_owned(),
                RequestOutcome::Rejected { .. } => " (rejected)".to_owned(),
            };
            let name = format!("request {}{outcome}", r.index);
            let lane_name = format!("requests in flight ({})", lane + 1);
            let within = format!("{name}, answered within coldstart's round trip");
            let thread = self.thread(pid, tid, &lane_name);
            let theirs = push(thread, pid, slice(&within, "request", sent, end));
            let reply = back.map(|b| push(thread, pid, slice("reply", "message", b, b)));
            self.own_slice(own_tid, slice(&name, "request", sent, end));
            let written = self.own_slice(own_tid, slice("request sent", "message", sent, sent));
            self.flow(written, theirs);
            if let (Some(from), Some(b)) = (reply, back) {
                let read = self.own_slice(own_tid, slice("reply read", "message", b, b));
                self.flow(from, read);
            }
        }
    }

    /// A worker's track, and, with `waits_on` (a track of coldstart's),
    /// coldstart's waits on it there with the messages between them.
    /// Returns its pid when it was started.
    pub(crate) fn worker(
        &mut self,
        w: &WorkerRecord,
        waits_on: Option<u32>,
        trial_end: u64,
    ) -> Option<u32> {
        let pid = w.pid?;
        let m = &w.marks;
        let exited = m.exited_ns.unwrap_or(trial_end);
        let ready_read = m.ready_read_ns;
        // The worker's own stamp of its ready line, when it sits where it can.
        let ready = m
            .ready_t_ns
            .filter(|t| *t >= m.spawned_ns && ready_read.is_none_or(|r| *t <= r))
            .or(ready_read);
        let stop = m.shutdown_sent_ns.or(m.stop_sent_ns);
        let track = self.thread(pid, pid, "main");
        track.slices.push(slice(
            "start-up",
            "phase",
            m.spawned_ns,
            ready.unwrap_or(exited),
        ));
        let ready_line = ready.map(|r| push(track, pid, slice("ready line", "message", r, r)));
        if let Some(r) = ready {
            track
                .slices
                .push(slice("ready", "phase", r, stop.unwrap_or(exited)));
        }
        let served: Vec<(SliceAt, SliceAt)> = if waits_on.is_some() {
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
                        push(track, pid, within),
                        push(track, pid, slice("health reply", "message", r, r)),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let shutting = stop.map(|s| push(track, pid, slice("shutting down", "phase", s, exited)));
        // At its read, or, when the read came in the exit's µs or after the
        // exit was marked, the µs before the exit: the worker wrote it
        // before it exited, and a flow binds only to a slice it lies inside
        // at Chrome's µs, not to one ending where it is.
        let acked = match (m.ack_read_ns, stop) {
            (Some(a), Some(s)) if s <= a && s <= exited => {
                let at = a.min(exited.saturating_sub(US)).max(s);
                Some(push(
                    track,
                    pid,
                    slice("shutdown acknowledged", "message", at, at),
                ))
            }
            _ => None,
        };
        track.instants.push(Instant {
            name: match &w.exit {
                Some(e) => format!("exited: {e}"),
                None => "not reaped".to_owned(),
            },
            t_ns: exited,
        });
        let Some(own) = waits_on else {
            return Some(pid);
        };
        // coldstart's side: each wait, and a message at the moment it is
        // written or read, so that each arrow is drawn at its mark.
        if let Some(r) = ready_read {
            self.own_slice(
                own,
                slice("waiting for the ready line", "wait", m.spawned_ns, r),
            );
            let read = self.own_slice(own, slice("ready line read", "message", r, r));
            if let Some(line) = ready_line {
                self.flow(line, read);
            }
        }
        for (h, (within, reply)) in m.health.iter().zip(served) {
            self.own_slice(own, slice("health", "request", h.sent_ns, h.received_ns));
            let sent = self.own_slice(
                own,
                slice("health request", "message", h.sent_ns, h.sent_ns),
            );
            self.flow(sent, within);
            let r = h.received_ns;
            let read = self.own_slice(own, slice("health reply read", "message", r, r));
            self.flow(reply, read);
        }
        if let Some(s) = m.shutdown_sent_ns {
            let ack = m.ack_read_ns.unwrap_or(exited);
            self.own_slice(own, slice("shutdown", "request", s, ack));
            let sent = self.own_slice(own, slice("shutdown sent", "message", s, s));
            if let Some(to) = shutting {
                self.flow(sent, to);
            }
            if let (Some(from), Some(a)) = (acked, m.ack_read_ns) {
                let read = self.own_slice(own, slice("acknowledgement read", "message", a, a));
                self.flow(from, read);
            }
        }
        let from = m.ack_read_ns.or(m.stop_sent_ns);
        if let Some(f) = from.filter(|f| *f <= exited) {
            self.own_slice(own, slice("waiting for the exit", "wait", f, exited));
        }
        Some(pid)
    }
}

/// The slices a serve worker's extra lanes begin with: coldstart's serve
/// phase and the worker's ready phase, each the whole of what the lane's
/// slices lie in.
struct Lanes {
    pid: u32,
    own: Slice,
    theirs: Slice,
}

/// From the first spawn to the last exit of `workers` (to the first spawn
/// when none was reaped), or to a µs past a shutdown acknowledgement read
/// in the exit's last µs or after the exit was marked (the line waits in
/// the pipe while the reap is noted), so that coldstart's wait for it and
/// the read itself lie inside, also at Chrome's µs: coldstart is still
/// busy with the trial when its read returns. `None` without a worker.
pub(crate) fn span_of(workers: &[WorkerRecord]) -> Option<(u64, u64)> {
    let start = workers.iter().map(|w| w.marks.spawned_ns).min()?;
    let end = workers
        .iter()
        .filter_map(|w| {
            let m = &w.marks;
            m.exited_ns
                .map(|e| e.max(m.ack_read_ns.map_or(e, |a| a.saturating_add(US))))
        })
        .max()
        .unwrap_or(start);
    Some((start, end))
}

/// Thread `tid` of `process`, made (named `name`) when it has none.
fn thread_of<'a>(process: &'a mut Process, tid: u32, name: &str) -> &'a mut Thread {
    let at = match process.threads.iter().position(|t| t.tid == tid) {
        Some(i) => i,
        None => {
            process.threads.push(Thread {
                tid,
                name: name.to_owned(),
                ..Thread::default()
            });
            process.threads.len() - 1
        }
    };
    &mut process.threads[at]
}

#[cfg(test)]
mod tests {
    use super::*;
    use timeline::TrialKind;

    /// A worker spawned at `t0` (ns), ready 100 µs later, its marks 10 µs
    /// apart: µs apart, as real ones are, so that Chrome's JSON (whole µs)
    /// tells them apart.
    fn worker(pid: u32, t0: u64) -> WorkerRecord {
        timeline::testing::worker(pid, t0, t0 + 100_000, [10_000; 6])
    }

    fn trial(i: usize, workers: Vec<WorkerRecord>) -> TrialRecord {
        TrialRecord::new(i, i, TrialKind::Measured, Variant::A, 0, 0, workers)
    }

    #[test]
    fn an_acknowledgement_read_after_the_exit_was_marked_stays_inside_its_trial() {
        let mut w = worker(11, 1_000_000);
        w.marks.ack_read_ns = Some(1_160_000);
        let t = trace_of(&[trial(0, vec![w])], &[], &[], 7, &|_| "w".into());
        t.check().unwrap();
        assert_eq!(t.flows.len(), 5, "the acknowledgement's from the exit");
        let own = &t.processes[0].threads[0];
        assert_eq!(
            (own.slices[0].start_ns, own.slices[0].end_ns),
            (1_000_000, 1_161_000),
            "to a µs past the read"
        );
    }

    /// The acknowledgement read after the exit was marked (the line
    /// waited in the pipe while the reap was noted), or in the exit's µs:
    /// in Chrome's JSON, whose unit is the µs, both ends of its flow still
    /// lie inside a slice of their thread (the worker's shutting down,
    /// coldstart's trial), as readers bind them.
    #[test]
    fn an_acknowledgement_at_or_after_the_exit_keeps_its_flow_inside_slices_in_chrome_json() {
        // (ack read, exited): after, after in the same µs, before in the
        // same µs, well before.
        let cases = [
            (2_600_000, 2_500_000),
            (2_500_200, 2_500_000),
            (2_499_800, 2_500_000),
            (2_400_000, 2_500_000),
        ];
        for (ack, exited) in cases {
            let mut w = timeline::testing::worker(11, 1_000_000, 2_000_000, [100_000; 6]);
            w.marks.ack_read_ns = Some(ack);
            w.marks.exited_ns = Some(exited);
            let t = trace_of(&[trial(0, vec![w])], &[], &[], 7, &|_| "w".into());
            t.check().unwrap();
            assert_eq!(t.flows.len(), 5, "({ack}, {exited})");
            let json = ::trace::chrome::to_json(&t).unwrap();
            let counts = ::trace::chrome::validate(&json)
                .unwrap_or_else(|e| panic!("ack read at {ack}, exit at {exited}: {e}"));
            assert_eq!(counts.flows, 5);
        }
    }

    #[test]
    fn each_phase_is_a_mark_and_each_message_a_flow_and_the_trace_keeps_the_rules() {
        let t = trace_of(
            &[
                trial(0, vec![worker(11, 1_000_000)]),
                trial(1, vec![worker(12, 2_000_000)]),
            ],
            &[],
            &[],
            7,
            &|_| "w".to_owned(),
        );
        t.check().unwrap();
        let json = ::trace::chrome::to_json(&t).unwrap();
        ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
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
                ("start-up", 1_000_000, 1_090_000),
                ("ready line", 1_090_000, 1_090_000),
                ("ready", 1_090_000, 1_130_000)
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
            1_100_000,
            "read when coldstart read it"
        );
    }

    /// A serve worker spawned at `t0`, its ready line stamped at `t0 +
    /// 90_000` and read at `t0 + 100_000`, asked to shut down at `t0 +
    /// 9_000_000` and reaped at `t0 + 10_000_000` (whole µs, as the Chrome
    /// file gives them).
    fn serving(pid: u32, t0: u64) -> ServeWorker {
        let mut w = worker(pid, t0);
        w.marks.health.clear();
        w.marks.ready_t_ns = Some(t0 + 90_000);
        w.marks.ready_read_ns = Some(t0 + 100_000);
        w.marks.shutdown_sent_ns = Some(t0 + 9_000_000);
        w.marks.ack_read_ns = Some(t0 + 9_100_000);
        w.marks.exited_ns = Some(t0 + 10_000_000);
        ServeWorker {
            variant: Variant::A,
            record: w,
        }
    }

    fn request(index: usize, sent: u64, back: Option<u64>) -> RequestRecord {
        let mut r = RequestRecord::scheduled(Variant::A, index, sent);
        r.sent_at_ns = Some(sent);
        if let Some(b) = back {
            r.answered(b, RequestOutcome::Ok);
        }
        r
    }

    fn names(t: &Thread) -> Vec<&str> {
        t.slices.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn each_serve_request_is_a_slice_on_coldstarts_side_with_a_flow_each_way() {
        let requests = [
            request(0, 1_200_000, Some(1_300_000)),
            request(1, 1_400_000, Some(1_500_000)),
            request(2, 1_600_000, None),
        ];
        let t = trace_of(&[], &[serving(11, 1_000_000)], &requests, 7, &|_| {
            "w".into()
        });
        t.check().unwrap();
        let json = ::trace::chrome::to_json(&t).unwrap();
        ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
        let own = names(&t.processes[0].threads[0]);
        assert_eq!(own[0], "serve phase of w: 3 requests");
        for name in ["request 0", "request 1", "request 2 (no reply)"] {
            assert!(own.contains(&name), "{own:?}");
        }
        assert_eq!(t.processes[0].threads.len(), 1, "one at a time: one lane");
        let w = names(&t.processes[1].threads[0]);
        assert!(
            w.contains(&"request 1, answered within coldstart's round trip"),
            "{w:?}"
        );
        // The ready line, the shutdown and its acknowledgement, two flows
        // for each answered request and one for the unanswered one.
        assert_eq!(t.flows.len(), 3 + 2 * 2 + 1);
        for f in &t.flows {
            let (from, to) = (t.slice(f.from).unwrap(), t.slice(f.to).unwrap());
            assert_eq!(from.start_ns, from.end_ns, "{from:?}");
            assert!(to.start_ns >= from.start_ns, "{from:?} -> {to:?}");
        }
        let sent = t
            .flows
            .iter()
            .find(|f| t.slice(f.from).unwrap().start_ns == 1_400_000 && f.from.pid == 7)
            .unwrap();
        let to = t.slice(sent.to).unwrap();
        assert_eq!(
            (sent.to.pid, to.start_ns, to.end_ns),
            (11, 1_400_000, 1_500_000)
        );
    }

    #[test]
    fn overlapping_serve_requests_go_on_lanes_and_too_many_are_left_out() {
        // Three in flight at once, then one after they all came back.
        let mut requests = vec![
            request(0, 1_200_000, Some(1_800_000)),
            request(1, 1_300_000, Some(1_700_000)),
            request(2, 1_400_000, Some(1_600_000)),
            request(3, 1_900_000, Some(2_000_000)),
        ];
        let t = trace_of(&[], &[serving(11, 1_000_000)], &requests, 7, &|_| {
            "w".into()
        });
        t.check().unwrap();
        let lanes =
            |p: &Process| -> Vec<String> { p.threads.iter().map(|t| t.name.clone()).collect() };
        assert_eq!(
            lanes(&t.processes[0]),
            [
                "coldstart bench",
                "serve requests (2)",
                "serve requests (3)"
            ]
        );
        assert_eq!(
            lanes(&t.processes[1]),
            ["main", "requests in flight (2)", "requests in flight (3)"]
        );
        assert!(names(&t.processes[0].threads[0]).contains(&"request 3"));
        // Each flow at its moment inside a slice of its lane, as readers
        // bind it.
        let json = ::trace::chrome::to_json(&t).unwrap();
        ::trace::chrome::validate(&json).unwrap_or_else(|e| panic!("{e}"));
        // Past the bound, the first ones are drawn and the rest counted.
        requests = (0..MAX_REQUESTS_DRAWN + 5)
            .map(|i| {
                let sent = 1_200_000 + 10_000 * i as u64;
                request(i, sent, Some(sent + 5_000))
            })
            .collect();
        let t = trace_of(&[], &[serving(11, 1_000_000)], &requests, 7, &|_| {
            "w".into()
        });
        t.check().unwrap();
        let own = names(&t.processes[0].threads[0]);
        assert_eq!(
            own[0],
            format!(
                "serve phase of w: {} requests, the first {MAX_REQUESTS_DRAWN} drawn (5 left out)",
                MAX_REQUESTS_DRAWN + 5
            )
        );
        let numbered = |n: &&&str| {
            n.strip_prefix("request ")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        };
        let drawn = own.iter().filter(numbered).count();
        assert_eq!(drawn, MAX_REQUESTS_DRAWN);
    }

    #[test]
    fn concurrent_workers_keep_their_tracks_and_coldstart_draws_only_the_trial() {
        let t = trace_of(
            &[trial(0, vec![worker(11, 1_000_000), worker(12, 1_005_000)])],
            &[],
            &[],
            7,
            &|_| "w".to_owned(),
        );
        t.check().unwrap();
        assert_eq!(t.processes[0].threads[0].slices.len(), 1);
        assert_eq!(t.processes.len(), 3);
        assert!(t.flows.is_empty());
    }
}
