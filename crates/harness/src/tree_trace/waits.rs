//! Proven waits drawn: runs of one thread's wait on one worker as slices
//! `waiting on worker PID`, and the flows from each to what that worker did.

use std::collections::BTreeMap;

use ::trace::flame::{Frame, TimedStack};
use ::trace::{Flow, Process, Slice, SliceAt};

use super::{WAIT_CATEGORY, WATCH_PERIOD};

/// A run of consecutive looks proving one thread waits on one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WaitRun {
    pub(super) tid: u32,
    pub(super) worker: u32,
    pub(super) first_ns: u64,
    pub(super) last_ns: u64,
}

/// The proven waits grouped into runs: looks of one (thread, worker) at
/// most one and a half watch periods apart are one run.
pub(super) fn wait_runs(waits: &[(u64, u32, u32)]) -> Vec<WaitRun> {
    let gap = WATCH_PERIOD.as_nanos() as u64 * 3 / 2;
    let mut by_pair: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    for &(t, tid, worker) in waits {
        by_pair.entry((tid, worker)).or_default().push(t);
    }
    let mut runs = Vec::new();
    for ((tid, worker), times) in by_pair {
        let mut run: Option<WaitRun> = None;
        for t in times {
            match &mut run {
                Some(r) if t <= r.last_ns + gap => r.last_ns = t,
                _ => {
                    runs.extend(run.take());
                    run = Some(WaitRun {
                        tid,
                        worker,
                        first_ns: t,
                        last_ns: t,
                    });
                }
            }
        }
        runs.extend(run);
    }
    runs
}

/// The name of a wait's slice.
pub(super) fn wait_name(worker: u32) -> String {
    format!("waiting on worker {worker}")
}

/// A proven wait on a thread's stacks: the samples taken within it get
/// the wait as their outermost frame; with none (the thread idle, so not
/// sampled), the wait is a stack of its own over the run.
pub(super) fn add_wait(items: &mut Vec<TimedStack>, w: &WaitRun) {
    let frame = Frame {
        name: wait_name(w.worker),
        category: WAIT_CATEGORY.into(),
    };
    let mut covered = false;
    for s in items
        .iter_mut()
        .filter(|s| s.end_ns >= w.first_ns && s.end_ns <= w.last_ns)
    {
        s.frames.insert(0, frame.clone());
        covered = true;
    }
    if !covered {
        items.push(TimedStack {
            start_ns: w.first_ns,
            end_ns: w.last_ns,
            frames: vec![frame],
        });
    }
}

/// A flow from each wait slice of the root to the outermost slice of the
/// worker it waits on that overlaps it (what the worker was doing); none
/// where the worker has no slice then.
pub(super) fn wait_flows(root: u32, processes: &[Process]) -> Vec<Flow> {
    let mut flows = Vec::new();
    let Some(parent) = processes.iter().find(|p| p.pid == root) else {
        return flows;
    };
    for t in &parent.threads {
        for (i, s) in t.slices.iter().enumerate() {
            // A wait seen in one look only, on a thread not sampled then,
            // is an instant: a reader binds a flow to the slice open at
            // its time, and a zero-length slice is open at none.
            if s.category != WAIT_CATEGORY || s.start_ns == s.end_ns {
                continue;
            }
            let Some(worker) = waited_worker(s).and_then(|w| processes.iter().find(|p| p.pid == w))
            else {
                continue;
            };
            if let Some(to) = outermost_within(worker, s.start_ns, s.end_ns) {
                flows.push(Flow {
                    id: flows.len() as u64 + 1,
                    from: SliceAt {
                        pid: root,
                        tid: t.tid,
                        index: i,
                    },
                    to,
                });
            }
        }
    }
    flows
}

/// The worker a wait slice names.
pub(super) fn waited_worker(s: &Slice) -> Option<u32> {
    s.name.strip_prefix("waiting on worker ")?.parse().ok()
}

/// The earliest-starting (and, of those, longest) slice of `worker` that
/// overlaps `lo..=hi` and lasts (a flow cannot reach a zero-length one).
pub(super) fn outermost_within(worker: &Process, lo: u64, hi: u64) -> Option<SliceAt> {
    worker
        .threads
        .iter()
        .flat_map(|wt| {
            wt.slices
                .iter()
                .enumerate()
                .map(move |(j, x)| (wt.tid, j, x))
        })
        .filter(|(_, _, x)| x.start_ns <= hi && x.end_ns >= lo && x.end_ns > x.start_ns)
        .min_by_key(|(_, _, x)| (x.start_ns, std::cmp::Reverse(x.end_ns)))
        .map(|(tid, index, _)| SliceAt {
            pid: worker.pid,
            tid,
            index,
        })
}
