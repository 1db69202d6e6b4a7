//! The one timeline of a worker's life: every step `spawn` took with a
//! worker, stamped on the one clock by `spawn` itself. The trial records
//! ([`crate::Marks`]) and the stages of the import verdict's violations
//! ([`Timeline::stage_at`], shown as an import's phase) read it;
//! nobody copies stamps by hand.

use serde::{Deserialize, Serialize};

use crate::record::{Marks, RoundTrip};

/// A worker's life as `spawn` saw it, all CLOCK_MONOTONIC ns. A step that
/// did not happen is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// Just before the process was started.
    pub spawned_ns: u64,
    /// The ready line, when it came.
    pub ready: Option<ReadyMark>,
    /// Every request, in the order written (the shutdown op is in [`Timeline::end`]).
    pub requests: Vec<RequestMark>,
    /// The steps of the worker's end.
    pub end: EndMarks,
}

/// The ready line's arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyMark {
    /// Right after the `read` that delivered the line, before parsing.
    pub read_ns: u64,
    /// The worker's own `t_ns` stamp on the line, if it sent one.
    pub t_ns: Option<u64>,
}

impl ReadyMark {
    /// When the worker was ready: its own stamp if it sent one, else when
    /// the line was read.
    pub fn at_ns(&self) -> u64 {
        self.t_ns.unwrap_or(self.read_ns)
    }
}

/// One request: marked just before its line was written (kept when the
/// write or the reply fails, so anything the request set off is never
/// earlier than its mark), with the read of its reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestMark {
    /// The request's op.
    pub op: String,
    /// Just before the request line was written.
    pub sent_ns: u64,
    /// Right after the reply line was read; absent when none came.
    pub received_ns: Option<u64>,
}

/// The steps of a worker's end; a step that did not happen is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EndMarks {
    /// Just before the shutdown op was written (set once it was written).
    pub shutdown_sent_ns: Option<u64>,
    /// Right after the shutdown acknowledgement was read.
    pub ack_read_ns: Option<u64>,
    /// When the worker's stdin was closed (EOF, the protocol's other way to
    /// ask for an exit).
    pub stdin_closed_ns: Option<u64>,
    /// Just before the target's stop signal (a daemon's SIGINT) was sent
    /// to the group, when the worker had not exited after its ack.
    pub stop_sent_ns: Option<u64>,
    /// Just before SIGTERM was sent to the group.
    pub term_sent_ns: Option<u64>,
    /// Just before SIGKILL was sent to the group.
    pub kill_sent_ns: Option<u64>,
    /// When the kernel reported the worker's exit; absent while it runs.
    pub exited_ns: Option<u64>,
}

impl Timeline {
    /// A timeline that starts now-ish: spawned at `spawned_ns`, nothing else yet.
    pub fn spawned_at(spawned_ns: u64) -> Timeline {
        Timeline {
            spawned_ns,
            ..Timeline::default()
        }
    }

    /// When the worker was ready ([`ReadyMark::at_ns`]), if it was.
    pub fn ready_at_ns(&self) -> Option<u64> {
        self.ready.map(|r| r.at_ns())
    }

    /// The answered requests with this op, as round trips.
    pub fn round_trips<'a>(&'a self, op: &'a str) -> impl Iterator<Item = RoundTrip> + 'a {
        self.requests
            .iter()
            .filter(move |r| r.op == op)
            .filter_map(|r| {
                Some(RoundTrip {
                    sent_ns: r.sent_ns,
                    received_ns: r.received_ns?,
                })
            })
    }

    /// The trial record's marks: the ready line, the answered health round
    /// trips, shutdown sent, ack read, exit. (A tcp worker's connection
    /// stamp is the caller's to add, from `spawn`'s record of the end.)
    pub fn marks(&self) -> Marks {
        Marks {
            spawned_ns: self.spawned_ns,
            ready_read_ns: self.ready.map(|r| r.read_ns),
            ready_t_ns: self.ready.and_then(|r| r.t_ns),
            health: self.round_trips("health").collect(),
            shutdown_sent_ns: self.end.shutdown_sent_ns,
            ack_read_ns: self.end.ack_read_ns,
            stop_sent_ns: self.end.stop_sent_ns,
            exited_ns: self.end.exited_ns,
            connected_ns: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_keep_only_answered_health_round_trips() {
        let t = Timeline {
            spawned_ns: 10,
            ready: Some(ReadyMark {
                read_ns: 100,
                t_ns: Some(90),
            }),
            requests: vec![
                RequestMark {
                    op: "health".into(),
                    sent_ns: 110,
                    received_ns: Some(120),
                },
                RequestMark {
                    op: "infer".into(),
                    sent_ns: 130,
                    received_ns: Some(140),
                },
                RequestMark {
                    op: "health".into(),
                    sent_ns: 150,
                    received_ns: None,
                },
            ],
            end: EndMarks {
                shutdown_sent_ns: Some(160),
                ack_read_ns: Some(170),
                exited_ns: Some(180),
                ..EndMarks::default()
            },
        };
        let m = t.marks();
        assert_eq!(m.spawned_ns, 10);
        assert_eq!((m.ready_read_ns, m.ready_t_ns), (Some(100), Some(90)));
        assert_eq!(
            m.health,
            [RoundTrip {
                sent_ns: 110,
                received_ns: 120
            }]
        );
        assert_eq!(
            (m.shutdown_sent_ns, m.ack_read_ns, m.exited_ns),
            (Some(160), Some(170), Some(180))
        );
        assert_eq!(t.ready_at_ns(), Some(90));
    }

    #[test]
    fn ready_without_its_own_stamp_is_when_it_was_read() {
        let r = ReadyMark {
            read_ns: 7,
            t_ns: None,
        };
        assert_eq!(r.at_ns(), 7);
        assert_eq!(Timeline::spawned_at(3).ready_at_ns(), None);
    }
}
