//! The trace model: processes, their threads, slices, instants, counters
//! and the flows between slices, every time in ns on one clock
//! (CLOCK_MONOTONIC, `timeline::monotonic_ns`'s).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Error;

/// A whole trace: the processes seen and the flows between their slices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Every process, in the order they are drawn.
    pub processes: Vec<Process>,
    /// Arrows from one slice to another (a message sent, a wait's cause).
    pub flows: Vec<Flow>,
}

/// One process and what happened in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Process {
    /// The kernel's process id.
    pub pid: u32,
    /// What it is called on its track (its command line, shortened).
    pub name: String,
    /// Its threads.
    pub threads: Vec<Thread>,
    /// Moments of the process as a whole (first seen, exited).
    pub instants: Vec<Instant>,
    /// Values over time (CPU, RSS).
    pub counters: Vec<Counter>,
}

/// One thread and its slices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thread {
    /// The kernel's thread id (the pid for the main thread).
    pub tid: u32,
    /// Its name.
    pub name: String,
    /// Its slices; two slices of one thread either nest or do not overlap,
    /// and of two with one start and end the earlier encloses the later.
    pub slices: Vec<Slice>,
    /// Moments on this thread.
    pub instants: Vec<Instant>,
    /// The thread of the same process this track belongs beside (a track
    /// of the spans that ran on that thread, whose sampled slices they
    /// would cross): Perfetto draws it nested under that thread's track;
    /// Chrome's format has no nested tracks, so there it is a thread of
    /// its own, as when this is `None`.
    pub beside: Option<u32>,
}

/// An interval on a thread: a stack frame seen over consecutive samples, a
/// wait, a span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slice {
    /// What it is.
    pub name: String,
    /// Its kind (`python`, `native`, `wait`, ...): Chrome's `cat`, a
    /// Perfetto category.
    pub category: String,
    /// When it began (ns).
    pub start_ns: u64,
    /// When it ended (ns), not before `start_ns`.
    pub end_ns: u64,
}

/// A moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Instant {
    /// What happened.
    pub name: String,
    /// When (ns).
    pub t_ns: u64,
}

/// A value over time on a process's track.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// What it counts (`CPU %`, `RSS`).
    pub name: String,
    /// In what.
    pub unit: Unit,
    /// Its values, in time order.
    pub points: Vec<Point>,
}

/// The unit of a [`Counter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (Perfetto's `UNIT_SIZE_BYTES`).
    Bytes,
    /// Percent of one CPU.
    Percent,
}

/// One value of a [`Counter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// When (ns).
    pub t_ns: u64,
    /// The value.
    pub value: f64,
}

/// An arrow from one slice to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Unique within the trace.
    pub id: u64,
    /// The slice it leaves.
    pub from: SliceAt,
    /// The slice it reaches.
    pub to: SliceAt,
}

/// Where a slice is: its process, thread and index in [`Thread::slices`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceAt {
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The slice's index.
    pub index: usize,
}

impl Trace {
    /// The slice at `at`, if there is one.
    pub fn slice(&self, at: SliceAt) -> Option<&Slice> {
        self.processes
            .iter()
            .find(|p| p.pid == at.pid)?
            .threads
            .iter()
            .find(|t| t.tid == at.tid)?
            .slices
            .get(at.index)
    }

    /// The rules both writers rely on: pids unique, tids unique within a
    /// process, each slice not ending before it begins, a thread's slices
    /// nested or apart, each flow's id unique and both its ends existing.
    pub fn check(&self) -> Result<(), Error> {
        let mut pids = BTreeSet::new();
        for p in &self.processes {
            if !pids.insert(p.pid) {
                return Err(Error::DuplicateProcess { pid: p.pid });
            }
            let mut tids = BTreeSet::new();
            for t in &p.threads {
                if !tids.insert(t.tid) {
                    return Err(Error::DuplicateThread {
                        pid: p.pid,
                        tid: t.tid,
                    });
                }
                check_nesting(p.pid, t)?;
            }
        }
        let mut ids = BTreeSet::new();
        for f in &self.flows {
            if !ids.insert(f.id) {
                return Err(Error::DuplicateFlow { id: f.id });
            }
            for end in [f.from, f.to] {
                if self.slice(end).is_none() {
                    return Err(Error::FlowEnd {
                        id: f.id,
                        pid: end.pid,
                        tid: end.tid,
                        index: end.index,
                    });
                }
            }
        }
        Ok(())
    }

    /// Each flow's id by the slice it leaves and by the slice it reaches.
    pub(crate) fn flows_by_slice(&self) -> FlowsBySlice {
        let mut out = FlowsBySlice::default();
        for f in &self.flows {
            let key = |s: SliceAt| (s.pid, s.tid, s.index);
            out.leaving.entry(key(f.from)).or_default().push(f.id);
            out.reaching.entry(key(f.to)).or_default().push(f.id);
        }
        out
    }
}

/// Flow ids keyed by `(pid, tid, slice index)`.
#[derive(Debug, Default)]
pub(crate) struct FlowsBySlice {
    pub(crate) leaving: BTreeMap<(u32, u32, usize), Vec<u64>>,
    pub(crate) reaching: BTreeMap<(u32, u32, usize), Vec<u64>>,
}

impl Thread {
    /// The indices of its slices in drawing order: by start, the longer
    /// (the enclosing) first at one start; at one start and end, in their
    /// order in `slices`, which is the rule for slices of one span: the
    /// earlier one encloses the later (as [`crate::flame::slices`] writes
    /// a stack's frames that begin and end together).
    pub fn slice_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.slices.len()).collect();
        order.sort_by_key(|&i| {
            let s = &self.slices[i];
            (s.start_ns, std::cmp::Reverse(s.end_ns))
        });
        order
    }
}

fn check_nesting(pid: u32, thread: &Thread) -> Result<(), Error> {
    let mut open: Vec<&Slice> = Vec::new();
    for i in thread.slice_order() {
        let s = &thread.slices[i];
        if s.end_ns < s.start_ns {
            return Err(Error::Backwards {
                pid,
                tid: thread.tid,
                name: s.name.clone(),
            });
        }
        while open.last().is_some_and(|o| o.end_ns <= s.start_ns) {
            open.pop();
        }
        if let Some(outer) = open.last()
            && s.end_ns > outer.end_ns
        {
            return Err(Error::Overlap {
                pid,
                tid: thread.tid,
                outer: outer.name.clone(),
                inner: s.name.clone(),
            });
        }
        open.push(s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, start_ns: u64, end_ns: u64) -> Slice {
        Slice {
            name: name.into(),
            category: "python".into(),
            start_ns,
            end_ns,
        }
    }

    fn one_thread(slices: Vec<Slice>) -> Trace {
        Trace {
            processes: vec![Process {
                pid: 1,
                name: "p".into(),
                threads: vec![Thread {
                    tid: 1,
                    name: "main".into(),
                    slices,
                    instants: Vec::new(),
                    beside: None,
                }],
                ..Process::default()
            }],
            flows: Vec::new(),
        }
    }

    #[test]
    fn nested_and_apart_slices_pass_and_a_partial_overlap_does_not() {
        let ok = one_thread(vec![
            slice("a", 0, 10),
            slice("b", 2, 10),
            slice("c", 10, 12),
        ]);
        assert_eq!(ok.check(), Ok(()));
        let bad = one_thread(vec![slice("a", 0, 10), slice("b", 5, 15)]);
        assert!(matches!(bad.check(), Err(Error::Overlap { .. })));
        let backwards = one_thread(vec![slice("a", 10, 0)]);
        assert!(matches!(backwards.check(), Err(Error::Backwards { .. })));
    }

    #[test]
    fn a_flow_to_a_missing_slice_is_refused() {
        let mut t = one_thread(vec![slice("a", 0, 10)]);
        let at = |index| SliceAt {
            pid: 1,
            tid: 1,
            index,
        };
        t.flows.push(Flow {
            id: 7,
            from: at(0),
            to: at(0),
        });
        assert_eq!(t.check(), Ok(()));
        t.flows.push(Flow {
            id: 8,
            from: at(0),
            to: at(3),
        });
        assert!(matches!(t.check(), Err(Error::FlowEnd { id: 8, .. })));
    }
}
