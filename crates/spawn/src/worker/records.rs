//! The records a worker hands out: stamped messages, exchanges, noise
//! lines, the shutdown policy it follows, and the record of its end.

use std::time::Duration;

use timeline::Timeline;
use worker_proto::Reply;

use crate::error::Stage;
use crate::reap::Rusage;
use crate::{Escalation, ExitStatus};

/// A value and the monotonic stamp taken right after the `read` that
/// delivered its line, before parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<T> {
    /// The parsed message (the ready line, or a reply).
    pub value: T,
    /// CLOCK_MONOTONIC ns right after the `read` that delivered its line.
    pub read_at_ns: u64,
}

/// One request and its reply, with both stamps.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The op of the request that was sent.
    pub request_op: String,
    /// The worker's reply to it.
    pub reply: Reply,
    /// Taken just before the request line was written.
    pub sent_at_ns: u64,
    /// Taken right after the reply line was read.
    pub received_at_ns: u64,
}

/// A stdout line that is not a protocol line (does not start with `{`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoiseLine {
    /// The line, cut to 4 KiB at most.
    pub text: String,
    /// CLOCK_MONOTONIC ns right after the `read` that delivered the line.
    pub read_at_ns: u64,
    /// The stage in which the harness read it.
    pub stage: Stage,
}

/// How long each polite step of [`Worker::shutdown`](crate::Worker::shutdown) may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownPolicy {
    /// From writing the shutdown op to reading its ack.
    pub ack_timeout: Duration,
    /// From the ack (and stdin closed) to the process's exit.
    pub exit_timeout: Duration,
    /// From SIGTERM to the group to SIGKILL to the group.
    pub grace: Duration,
    /// How a worker built to outlive its shutdown reply is ended (a
    /// daemon that goes back to `accept`), whatever its transport: when
    /// it has not exited this long after the ack, this signal goes to its
    /// group, and the exit is awaited (`exit_timeout`) and timed from it.
    /// `None`: `tcp_stop` for a worker that served over tcp, else the ack
    /// alone.
    pub stop: Option<Stop>,
    /// The stop of a worker that served over tcp when `stop` is `None`:
    /// one that served over the connection its ready line named, whether
    /// it was started for tcp or its stderr ready line said so (the
    /// transport it used, never only the one it was started for).
    pub tcp_stop: Option<Stop>,
}

impl ShutdownPolicy {
    /// The stop that ends a worker which served over `transport`: `stop`,
    /// else `tcp_stop` over tcp.
    pub fn stop_for(&self, transport: crate::Transport) -> Option<Stop> {
        self.stop
            .or(self.tcp_stop.filter(|_| transport == crate::Transport::Tcp))
    }
}

/// The signal that ends a worker after its shutdown reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    /// The signal number (`libc::SIGINT`, ...).
    pub signal: i32,
    /// How long after the ack the worker may exit by itself first.
    pub after: Duration,
}

impl Stop {
    /// The signals a stop may name, by name (`SIGINT` or `INT`).
    pub fn signal_named(name: &str) -> Option<i32> {
        let n = name.trim().to_ascii_uppercase();
        let n = n.strip_prefix("SIG").unwrap_or(&n);
        Some(match n {
            "INT" => libc::SIGINT,
            "TERM" => libc::SIGTERM,
            "HUP" => libc::SIGHUP,
            "QUIT" => libc::SIGQUIT,
            "USR1" => libc::SIGUSR1,
            "USR2" => libc::SIGUSR2,
            _ => return None,
        })
    }
}

impl Default for ShutdownPolicy {
    /// 5 s for the ack, 5 s to exit, 2 s of grace after SIGTERM, no stop
    /// signal (over tcp neither).
    fn default() -> Self {
        ShutdownPolicy {
            ack_timeout: Duration::from_secs(5),
            exit_timeout: Duration::from_secs(5),
            grace: Duration::from_secs(2),
            stop: None,
            tcp_stop: None,
        }
    }
}

/// A worker's end: how it exited, what it cost, and what it left.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The worker's pid.
    pub pid: u32,
    /// How the process ended: exit code, signal, or unknown.
    pub status: ExitStatus,
    /// From `wait4` on this child; `None` only with [`ExitStatus::Unknown`].
    pub rusage: Option<Rusage>,
    /// The worker's whole timeline: spawned, ready, each request and its
    /// reply, each step of the end (shutdown sent, ack, stdin closed,
    /// signals, exit).
    pub timeline: Timeline,
    /// Whether SIGTERM or SIGKILL to the group was needed to end it.
    pub escalation: Escalation,
    /// Every noise line seen on stdout during the worker's life.
    pub noise: Vec<NoiseLine>,
    /// The last bytes of stderr (lossy UTF-8, at most the tail bound).
    pub stderr_tail: String,
    /// How many bytes the worker wrote to stderr in all.
    pub stderr_bytes: u64,
    /// Why the stderr file copy is incomplete, if it is.
    pub stderr_file_error: Option<String>,
    /// Whether every process of the group was gone when the end was
    /// recorded (false only if a member resisted SIGKILL for seconds).
    pub group_gone: bool,
    /// For a worker that served over tcp: right after the connection to
    /// the address its ready line names was made (`None` on stdio).
    pub connected_ns: Option<u64>,
    /// The cgroup it ran in under its [`crate::Command::limits`], read
    /// after its exit; `None` without limits.
    pub confinement: Option<Confinement>,
}

/// The cgroup a limited worker ran in, read after its exit: what tells a
/// kill by the kernel's OOM killer from any other SIGKILL.
#[derive(Debug, Clone, PartialEq)]
pub struct Confinement {
    /// The limits it ran under.
    pub limits: timeline::Limits,
    /// The interface they were set through.
    pub version: crate::cgroup::Version,
    /// How many processes of the cgroup the OOM killer killed.
    pub oom_kills: u64,
    /// How long the worker took to join the cgroup before its `exec`,
    /// left out of its timeline (it starts after the join).
    pub join_ns: Option<u64>,
    /// The most memory the cgroup held at once, when the kernel says.
    pub memory_peak_bytes: Option<u64>,
}

impl Confinement {
    /// Whether the kernel's OOM killer killed a process of the worker's
    /// cgroup at its memory limit.
    pub fn oom_killed(&self) -> bool {
        self.oom_kills > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Transport;

    #[test]
    fn the_tcp_stop_is_for_a_worker_that_served_over_tcp_and_a_stop_for_any() {
        let int = Stop {
            signal: libc::SIGINT,
            after: Duration::from_secs(2),
        };
        let hup = Stop {
            signal: libc::SIGHUP,
            after: Duration::from_secs(1),
        };
        let tcp_only = ShutdownPolicy {
            tcp_stop: Some(int),
            ..ShutdownPolicy::default()
        };
        assert_eq!(tcp_only.stop_for(Transport::Tcp), Some(int));
        assert_eq!(tcp_only.stop_for(Transport::Stdio), None);
        let any = ShutdownPolicy {
            stop: Some(hup),
            ..tcp_only
        };
        assert_eq!(any.stop_for(Transport::Tcp), Some(hup));
        assert_eq!(any.stop_for(Transport::Stdio), Some(hup));
        assert_eq!(ShutdownPolicy::default().stop_for(Transport::Tcp), None);
    }
}
