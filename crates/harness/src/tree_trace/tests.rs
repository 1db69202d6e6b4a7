use ::trace::flame::{Frame, TimedStack};
use ::trace::{Flow, Process, Slice, SliceAt, Thread, Trace};

use crate::otlp::ReceivedSpan;

use super::spans::*;
use super::waits::*;
use super::*;

const MS: u64 = 1_000_000;

#[test]
fn looks_a_watch_period_apart_are_one_wait_and_a_longer_gap_two() {
    let p = WATCH_PERIOD.as_nanos() as u64;
    let looks = [
        (0, 7, 9),
        (p, 7, 9),
        (2 * p, 7, 9),
        (10 * p, 7, 9),
        (p, 8, 9),
    ];
    let runs = wait_runs(&looks);
    let spans: Vec<(u32, u64, u64)> = runs
        .iter()
        .map(|r| (r.tid, r.first_ns, r.last_ns))
        .collect();
    assert_eq!(spans, vec![(7, 0, 2 * p), (7, 10 * p, 10 * p), (8, p, p)]);
}

fn stack(start_ns: u64, end_ns: u64, name: &str) -> TimedStack {
    TimedStack {
        start_ns,
        end_ns,
        frames: vec![Frame {
            name: name.into(),
            category: "native".into(),
        }],
    }
}

#[test]
fn a_wait_is_the_outermost_frame_of_the_samples_it_covers_or_a_slice_of_its_own() {
    let run = WaitRun {
        tid: 1,
        worker: 9,
        first_ns: 10 * MS,
        last_ns: 30 * MS,
    };
    let mut sampled = vec![stack(0, 10 * MS, "a"), stack(10 * MS, 20 * MS, "read")];
    add_wait(&mut sampled, &run);
    assert_eq!(sampled.len(), 2);
    assert_eq!(sampled[1].frames[0].name, "waiting on worker 9");
    assert_eq!(sampled[0].frames[0].name, "waiting on worker 9");
    let mut idle = Vec::new();
    add_wait(&mut idle, &run);
    assert_eq!(
        idle,
        vec![TimedStack {
            start_ns: 10 * MS,
            end_ns: 30 * MS,
            frames: vec![Frame {
                name: "waiting on worker 9".into(),
                category: WAIT_CATEGORY.into(),
            }],
        }]
    );
}

#[test]
fn a_wait_flows_to_what_its_worker_did_then_and_not_when_it_did_nothing_or_was_an_instant() {
    let slice = |name: &str, category: &str, start_ns, end_ns| Slice {
        name: name.into(),
        category: category.into(),
        start_ns,
        end_ns,
    };
    let thread = |tid, slices| Thread {
        tid,
        name: String::new(),
        slices,
        instants: Vec::new(),
        beside: None,
    };
    let process = |pid, threads| Process {
        pid,
        threads,
        ..Process::default()
    };
    let trace = vec![
        process(
            1,
            vec![thread(
                1,
                vec![
                    slice("waiting on worker 9", WAIT_CATEGORY, 10, 30),
                    slice("waiting on worker 8", WAIT_CATEGORY, 40, 50),
                    // One look: an instant no reader binds a flow to.
                    slice("waiting on worker 9", WAIT_CATEGORY, 60, 60),
                ],
            )],
        ),
        process(
            9,
            vec![thread(
                9,
                vec![
                    slice("main", "python", 0, 100),
                    slice("load", "python", 0, 20),
                ],
            )],
        ),
        process(8, vec![thread(8, Vec::new())]),
    ];
    let flows = wait_flows(1, &trace);
    assert_eq!(
        flows,
        vec![Flow {
            id: 1,
            from: SliceAt {
                pid: 1,
                tid: 1,
                index: 0,
            },
            to: SliceAt {
                pid: 9,
                tid: 9,
                index: 0,
            },
        }]
    );
}

#[test]
fn spans_nest_only_under_their_parent_and_are_named_by_thread_and_detail() {
    let span = |name: &str, range, ids, thread| ReceivedSpan {
        pid: Some(5),
        thread,
        ..received(name, ids, range)
    };
    let mut trace = Trace {
        processes: vec![Process {
            pid: 1,
            ..Process::default()
        }],
        flows: Vec::new(),
    };
    let named = ReceivedSpan {
        thread_name: Some("temporal-worker".into()),
        detail: vec!["GET".into(), "/health".into()],
        ..span("request", (30, 31), ("e", ""), Some(13))
    };
    let tracks = add_spans(
        &mut trace,
        1,
        &[
            span("a", (0, 10), ("a", ""), None),
            span("b", (2, 5), ("b", "a"), None),
            // Inside `a` in time, but the root of another trace.
            span("poll", (6, 9), ("p", ""), None),
            span("c", (8, 20), ("c", ""), None),
            span("d", (0, 1), ("d", ""), Some(7)),
            named,
        ],
    );
    // Process 5 is not on the trace: the root holds them.
    let lanes: Vec<(&str, Vec<&str>)> = trace.processes[0]
        .threads
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.slices.iter().map(|s| s.name.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        lanes,
        vec![
            ("spans on temporal-worker", vec!["request GET /health"]),
            ("spans on thread.id 7", vec!["d"]),
            ("spans: svc (1)", vec!["a", "b"]),
            ("spans: svc (2)", vec!["poll"]),
            ("spans: svc (3)", vec!["c"]),
        ]
    );
    assert_eq!(tracks.len(), 5);
    // No thread of the root is named temporal-worker: no thread found.
    assert!(tracks.iter().all(|t| t.thread.is_none()), "{tracks:?}");
    assert_eq!(trace.check(), Ok(()));
}

/// A span of service `svc` in process 1, with no thread.
fn received(
    name: &str,
    (id, parent): (&str, &str),
    (start_ns, end_ns): (u64, u64),
) -> ReceivedSpan {
    ReceivedSpan {
        service: "svc".into(),
        pid: Some(1),
        thread: None,
        thread_name: None,
        name: name.into(),
        detail: Vec::new(),
        id: id.into(),
        parent: parent.into(),
        start_ns,
        end_ns,
    }
}

fn span_on(thread: &str, name: &str, ids: (&str, &str), range: (u64, u64)) -> ReceivedSpan {
    ReceivedSpan {
        thread_name: Some(thread.into()),
        ..received(name, ids, range)
    }
}
fn named_thread(tid: u32, name: &str, slices: Vec<Slice>) -> Thread {
    Thread {
        tid,
        name: name.into(),
        slices,
        instants: Vec::new(),
        beside: None,
    }
}

fn wait_on(worker: u32, start_ns: u64, end_ns: u64) -> Slice {
    Slice {
        name: wait_name(worker),
        category: WAIT_CATEGORY.into(),
        start_ns,
        end_ns,
    }
}

#[test]
fn a_span_is_put_on_the_one_thread_its_name_finds_and_the_kernel_keeps_15_bytes() {
    let process = Process {
        pid: 1,
        threads: vec![
            named_thread(2, "dispatch-blocki", Vec::new()),
            named_thread(3, "tokio-rt-worker", Vec::new()),
            named_thread(4, "tokio-rt-worker", Vec::new()),
        ],
        ..Process::default()
    };
    assert_eq!(thread_named(&process, "dispatch-blocking-1"), Some(2));
    assert_eq!(thread_named(&process, "dispatch-blocki"), Some(2));
    // Two threads have the name: no guess.
    assert_eq!(thread_named(&process, "tokio-rt-worker"), None);
    assert_eq!(thread_named(&process, "main"), None);
}

/// The request's round trip ran on thread 3, which was proven waiting
/// on worker 9 during it: the inner span flows to what worker 9 did
/// then, its enclosing span does not, and a span on a thread with no
/// proven wait (thread 2, in epoll) has no flow.
#[test]
fn a_span_flows_to_the_worker_its_thread_was_proven_waiting_on_and_only_the_innermost() {
    let python = |name: &str, start_ns, end_ns| Slice {
        name: name.into(),
        category: "python".into(),
        start_ns,
        end_ns,
    };
    let mut trace = Trace {
        processes: vec![
            Process {
                pid: 1,
                threads: vec![
                    named_thread(2, "dispatch-0", Vec::new()),
                    named_thread(3, "dispatch-3", vec![wait_on(9, 120, 180)]),
                ],
                ..Process::default()
            },
            Process {
                pid: 9,
                threads: vec![named_thread(
                    9,
                    "MainThread",
                    vec![python("main", 0, 300), python("stall", 110, 190)],
                )],
                ..Process::default()
            },
        ],
        flows: Vec::new(),
    };
    let tracks = add_spans(
        &mut trace,
        1,
        &[
            span_on("dispatch-0", "request", ("r", ""), (90, 210)),
            span_on("dispatch-3", "round trip", ("a", "r"), (100, 200)),
            span_on("dispatch-3", "await reply", ("b", "a"), (110, 195)),
        ],
    );
    let threads: Vec<Option<u32>> = tracks.iter().map(|t| t.thread).collect();
    assert_eq!(threads, vec![Some(2), Some(3)]);
    assert_eq!(span_flows(&mut trace, &tracks), 1);
    let track = tracks[1].track;
    assert_eq!(
        trace.flows,
        vec![Flow {
            id: 1,
            from: SliceAt {
                pid: 1,
                tid: track,
                index: 1,
            },
            to: SliceAt {
                pid: 9,
                tid: 9,
                index: 0,
            },
        }]
    );
    assert_eq!(trace.check(), Ok(()));
}
