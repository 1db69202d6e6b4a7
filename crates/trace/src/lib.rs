//! The trace of a process tree on one clock and its two writers.
//!
//! This crate owns the trace model ([`Trace`]: processes with their
//! threads, slices, instants and counters, and the flows between slices,
//! every time in ns on CLOCK_MONOTONIC, `timeline::monotonic_ns`'s clock),
//! the one rule set both writers rely on ([`Trace::check`]), the turning of
//! a thread's sampled stacks into nested slices ([`flame`]) and the writers:
//! the Perfetto protobuf trace ([`perfetto`], `prost` messages declared
//! with Perfetto's field numbers) and Chrome's Trace Event JSON
//! ([`chrome`]). It samples nothing and starts nothing: `harness::trace`
//! fills a [`Trace`] from what it sampled.

pub mod chrome;
mod error;
pub mod flame;
mod model;
pub mod perfetto;

pub use error::Error;
pub use model::{Counter, Flow, Instant, Point, Process, Slice, SliceAt, Thread, Trace, Unit};

/// A small trace with every kind of item, for the writers' tests.
#[cfg(test)]
pub(crate) fn example() -> Trace {
    let slice = |name: &str, category: &str, start_ns: u64, end_ns: u64| Slice {
        name: name.into(),
        category: category.into(),
        start_ns,
        end_ns,
    };
    let parent = Process {
        pid: 100,
        name: "ml-service --serve".into(),
        threads: vec![
            Thread {
                tid: 100,
                name: "ml-service".into(),
                slices: vec![
                    slice("main", "native", 1_000, 9_000),
                    slice("waiting on worker 200", "wait", 2_000, 5_000),
                    slice("read", "native", 2_000, 5_000),
                ],
                instants: vec![Instant {
                    name: "spawned worker 200".into(),
                    t_ns: 1_500,
                }],
                beside: None,
            },
            Thread {
                tid: 101,
                name: "tokio-rt-worker".into(),
                slices: vec![slice("poll", "native", 3_000, 3_000)],
                instants: Vec::new(),
                beside: None,
            },
            // The spans that ran on thread 101, beside its track.
            Thread {
                tid: 1 << 30,
                name: "spans on tokio-rt-worker".into(),
                slices: vec![slice("request POST /infer", "span", 2_500, 6_000)],
                instants: Vec::new(),
                beside: Some(101),
            },
        ],
        instants: Vec::new(),
        counters: vec![Counter {
            name: "RSS".into(),
            unit: Unit::Bytes,
            points: vec![
                Point {
                    t_ns: 1_000,
                    value: 1e6,
                },
                Point {
                    t_ns: 9_000,
                    value: 2e6,
                },
            ],
        }],
    };
    let worker = Process {
        pid: 200,
        name: "python -m mlworker".into(),
        threads: vec![Thread {
            tid: 200,
            name: "MainThread".into(),
            slices: vec![
                slice("<module> (mlworker/__main__.py:1)", "python", 1_600, 8_000),
                slice("load (mlworker/model.py:10)", "python", 1_600, 4_000),
                slice("serve (mlworker/__main__.py:20)", "python", 4_000, 8_000),
            ],
            instants: Vec::new(),
            beside: None,
        }],
        instants: vec![Instant {
            name: "exited".into(),
            t_ns: 8_500,
        }],
        counters: vec![Counter {
            name: "CPU".into(),
            unit: Unit::Percent,
            points: vec![Point {
                t_ns: 2_000,
                value: 97.5,
            }],
        }],
    };
    Trace {
        processes: vec![parent, worker],
        flows: vec![Flow {
            id: 1,
            from: SliceAt {
                pid: 100,
                tid: 100,
                index: 1,
            },
            to: SliceAt {
                pid: 200,
                tid: 200,
                index: 1,
            },
        }],
    }
}
