//! Spans received over OTLP placed on tracks of their own beside the
//! thread they name, in lanes that never overlap, and their flows to the
//! worker that thread was proven waiting on.

use std::collections::BTreeMap;

use ::trace::{Flow, Process, Slice, SliceAt, Thread, Trace};

use crate::otlp::ReceivedSpan;

use super::waits::{outermost_within, waited_worker};
use super::{SPAN_CATEGORY, WAIT_CATEGORY};

/// The first id of the tracks that hold spans (above any kernel thread
/// id: Linux's `pid_max` is at most 2^22).
pub(super) const SPAN_TRACK_TIDS: u32 = 1 << 30;

/// A lane of a span track: its slices, and the spans still open on it
/// (their end and span id).
pub(super) type Lane<'a> = (Vec<Slice>, Vec<(u64, &'a str)>);

/// A track of spans added to a process: its track's id, and the kernel
/// thread its spans ran on, where their `thread.name` names exactly one of
/// the process's threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SpanTrack {
    pub(super) pid: u32,
    pub(super) track: u32,
    pub(super) thread: Option<u32>,
}

/// The one thread of `process` named `name` (or its first 15 bytes, all
/// the kernel keeps of a thread's name); none when no thread or several
/// have it, so a span is never put on a thread by a guess.
pub(super) fn thread_named(process: &Process, name: &str) -> Option<u32> {
    let kernel = name.get(..15).unwrap_or(name);
    let mut found = process
        .threads
        .iter()
        .filter(|t| t.tid < SPAN_TRACK_TIDS && (t.name == name || t.name == kernel));
    let first = found.next()?;
    found.next().is_none().then_some(first.tid)
}

/// The spans received, each on a track of its process (the resource's
/// `process.pid` when the trace has that process, else the root): one
/// named after its thread (`spans on NAME` from `thread.name`, else
/// `spans on thread.id N`, the SDK's number, which need not be a kernel
/// tid) for spans that say one, else one per service (`spans: SERVICE`).
/// A span nests under the innermost span open on a lane only when that
/// span is its parent (by span id); a span that overlaps others without
/// being their child (a root of another trace, a sibling) goes to a
/// further lane, so no lane shows a nesting the spans do not have. Each
/// slice is named by the span's name and its descriptive attributes'
/// values (`request GET /health`). Returns the tracks added, each with
/// the kernel thread its `thread.name` finds ([`thread_named`]).
pub(super) fn add_spans(trace: &mut Trace, root: u32, spans: &[ReceivedSpan]) -> Vec<SpanTrack> {
    let mut groups: BTreeMap<(u32, String), Vec<&ReceivedSpan>> = BTreeMap::new();
    for s in spans {
        let pid = s
            .pid
            .filter(|p| trace.processes.iter().any(|q| q.pid == *p))
            .unwrap_or(root);
        let label = match (&s.thread_name, s.thread) {
            (Some(name), _) => format!("spans on {name}"),
            (None, Some(t)) => format!("spans on thread.id {t}"),
            (None, None) if s.service.is_empty() => "spans".to_owned(),
            (None, None) => format!("spans: {}", s.service),
        };
        groups.entry((pid, label)).or_default().push(s);
    }
    let mut next_tid = SPAN_TRACK_TIDS;
    let mut added = Vec::new();
    for ((pid, label), group) in groups {
        let thread_name = group[0].thread_name.clone();
        let lanes = span_lanes(group);
        let Some(process) = trace.processes.iter_mut().find(|p| p.pid == pid) else {
            continue;
        };
        let thread = thread_name.and_then(|n| thread_named(process, &n));
        let count = lanes.len();
        for (i, (slices, _)) in lanes.into_iter().enumerate() {
            process.threads.push(Thread {
                tid: next_tid,
                name: if count == 1 {
                    label.clone()
                } else {
                    format!("{label} ({})", i + 1)
                },
                slices,
                instants: Vec::new(),
                beside: thread,
            });
            added.push(SpanTrack {
                pid,
                track: next_tid,
                thread,
            });
            next_tid += 1;
        }
    }
    added
}

/// One track's spans laid out in lanes (see [`add_spans`]).
pub(super) fn span_lanes(mut group: Vec<&ReceivedSpan>) -> Vec<Lane<'_>> {
    group.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    // Each lane: its slices and the spans still open on it (end, id).
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    for s in group {
        let fits =
            |open: &Vec<(u64, &str)>| match open.iter().rev().find(|(end, _)| *end > s.start_ns) {
                None => true,
                Some((end, id)) => s.end_ns <= *end && !s.parent.is_empty() && s.parent == *id,
            };
        let lane = match lanes.iter().position(|(_, open)| fits(open)) {
            Some(i) => i,
            None => {
                lanes.push((Vec::new(), Vec::new()));
                lanes.len() - 1
            }
        };
        let (slices, open) = &mut lanes[lane];
        open.retain(|(end, _)| *end > s.start_ns);
        open.push((s.end_ns, s.id.as_str()));
        let mut name = s.name.clone();
        for d in &s.detail {
            name.push(' ');
            name.push_str(d);
        }
        slices.push(Slice {
            name,
            category: SPAN_CATEGORY.into(),
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        });
    }
    lanes
}

/// A flow from each span to the worker its thread was proven waiting on
/// while the span was open: to what the worker was doing then (its
/// outermost slice within both). Of nested spans that cover one wait, the
/// innermost has the flow. A span whose thread is not known (no
/// `thread.name`, or one that names no single thread) has none: the
/// kernel proves a thread's wait, not a span's. Returns the flows added.
pub(super) fn span_flows(trace: &mut Trace, tracks: &[SpanTrack]) -> usize {
    let mut flows = Vec::new();
    for t in tracks {
        let Some(thread) = t.thread else { continue };
        let Some(process) = trace.processes.iter().find(|p| p.pid == t.pid) else {
            continue;
        };
        let waits: Vec<(u64, u64, u32)> = process
            .threads
            .iter()
            .filter(|th| th.tid == thread)
            .flat_map(|th| &th.slices)
            .filter(|s| s.category == WAIT_CATEGORY)
            .filter_map(|s| Some((s.start_ns, s.end_ns, waited_worker(s)?)))
            .collect();
        let Some(track) = process.threads.iter().find(|th| th.tid == t.track) else {
            continue;
        };
        let overlap = |s: &Slice, w: &(u64, u64, u32)| s.start_ns <= w.1 && s.end_ns >= w.0;
        for (i, s) in track.slices.iter().enumerate() {
            if s.start_ns == s.end_ns {
                continue;
            }
            for w in waits.iter().filter(|w| overlap(s, w)) {
                let inner = track.slices.iter().enumerate().any(|(j, x)| {
                    j != i
                        && x.start_ns >= s.start_ns
                        && x.end_ns <= s.end_ns
                        && (x.start_ns, x.end_ns) != (s.start_ns, s.end_ns)
                        && overlap(x, w)
                });
                let (lo, hi) = (s.start_ns.max(w.0), s.end_ns.min(w.1));
                let target = trace
                    .processes
                    .iter()
                    .find(|p| p.pid == w.2)
                    .and_then(|p| outermost_within(p, lo, hi));
                if let (false, Some(to)) = (inner, target) {
                    let from = SliceAt {
                        pid: t.pid,
                        tid: t.track,
                        index: i,
                    };
                    flows.push((from, to));
                }
            }
        }
    }
    let added = flows.len();
    for (from, to) in flows {
        let id = trace.flows.len() as u64 + 1;
        trace.flows.push(Flow { id, from, to });
    }
    added
}
