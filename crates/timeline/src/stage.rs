//! Where in its life a worker was: the one protocol [`Stage`] that every
//! error, violation, memory reading and failed trial names.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Timeline;

/// The protocol stage a worker had reached: the interval between two
/// protocol events in which something happened (an import, a failure, a
/// memory reading, a noise line). Not a timed interval of the benchmark:
/// that is `phases::Phase`.
///
/// Serialized in snake case, unit stages as a bare string (`"startup"`),
/// a request as `{"request": {"op": "health", "index": 1}}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Being started: the process is not running yet.
    Spawn,
    /// Running; its ready line not read yet.
    Startup,
    /// Its ready line read; no request sent yet.
    Ready,
    /// Request number `index` sent (its reply awaited or read), the next one
    /// not yet.
    Request {
        /// The request's op.
        op: String,
        /// 1-based, over every request sent to this worker.
        index: usize,
    },
    /// Every request of the run answered; the shutdown op not sent yet
    /// (where a benchmark's serve phase ends).
    AfterServe,
    /// The shutdown op sent; its acknowledgement not read yet.
    Shutdown,
    /// The acknowledgement read (or the worker ended); its exit awaited.
    Exit,
}

impl Stage {
    /// The stage's name, as serialized: `spawn`, `startup`, `ready`,
    /// `request`, `after_serve`, `shutdown`, `exit`.
    pub fn name(&self) -> &'static str {
        match self {
            Stage::Spawn => "spawn",
            Stage::Startup => "startup",
            Stage::Ready => "ready",
            Stage::Request { .. } => "request",
            Stage::AfterServe => "after_serve",
            Stage::Shutdown => "shutdown",
            Stage::Exit => "exit",
        }
    }

    /// A short label, for a table or a count: `spawn`, `start-up`, `ready`,
    /// `OP request` (without its number), `after serve`, `shutdown`, `exit`.
    pub fn brief(&self) -> String {
        match self {
            Stage::Startup => "start-up".to_owned(),
            Stage::Request { op, .. } => format!("{op} request"),
            Stage::AfterServe => "after serve".to_owned(),
            other => other.name().to_owned(),
        }
    }

    /// Whether it is the end of the worker's life (the shutdown or the exit).
    pub fn at_end(&self) -> bool {
        matches!(self, Stage::Shutdown | Stage::Exit)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stage::Spawn => f.write_str("spawn"),
            Stage::Startup => f.write_str("start-up"),
            Stage::Ready => f.write_str("after ready, before any request"),
            Stage::Request { op, index } => write!(f, "{op} request #{index}"),
            Stage::AfterServe => f.write_str("after the last reply, before shutdown"),
            Stage::Shutdown => f.write_str("shutdown"),
            Stage::Exit => f.write_str("exit"),
        }
    }
}

impl Timeline {
    /// The stage an event at `t_ns` (on this clock) belongs to: start-up
    /// before the ready line was read, then the last request sent at or
    /// before it, shutdown from the shutdown op on. An event after the last
    /// reply is the last request's (the request may have set it off).
    pub fn stage_at(&self, t_ns: u64) -> Stage {
        if self.end.shutdown_sent_ns.is_some_and(|s| t_ns >= s) {
            return Stage::Shutdown;
        }
        match self.ready_at_ns() {
            Some(ready) if t_ns >= ready => {}
            _ => return Stage::Startup,
        }
        match self.requests.iter().rposition(|r| t_ns >= r.sent_ns) {
            Some(i) => Stage::Request {
                op: self.requests[i].op.clone(),
                index: i + 1,
            },
            None => Stage::Ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_stages_are_bare_strings_and_a_request_carries_its_op_and_index() {
        assert_eq!(serde_json::to_value(Stage::Startup).unwrap(), "startup");
        assert_eq!(
            serde_json::to_value(Stage::Request {
                op: "health".into(),
                index: 1
            })
            .unwrap(),
            serde_json::json!({"request": {"op": "health", "index": 1}})
        );
        for s in [
            Stage::Spawn,
            Stage::Startup,
            Stage::Ready,
            Stage::AfterServe,
            Stage::Shutdown,
            Stage::Exit,
        ] {
            assert_eq!(serde_json::to_value(&s).unwrap(), s.name());
            let back: Stage = serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
            assert_eq!(back, s);
        }
    }
}
