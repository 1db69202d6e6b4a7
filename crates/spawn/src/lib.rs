//! spawn: a worker process's whole life under control, whatever the worker
//! does.
//!
//! This crate starts a worker command, talks to it over the JSON-lines
//! protocol of [`worker_proto`], stamps every line it reads on the
//! CLOCK_MONOTONIC clock ([`monotonic_ns`], the clock of Python's
//! `time.monotonic_ns()`), ends it politely or by force, collects its exit
//! status and its own resource usage, and leaves no process behind. It is
//! synchronous: std threads and channels, no async runtime (the optional
//! tokio front runs it on tokio's blocking pool). Linux first
//! (process groups, `wait4`, `/proc`).
//!
//! A [`Command`] may name the CPUs the worker runs on
//! ([`Command::cpus`]); [`affinity`] reads and sets CPU affinity and
//! records what was done for the run's environment block.
//!
//! # Lifecycle
//!
//! A [`Worker`] moves through these states:
//!
//! - **Spawned** ([`Worker::spawn`]): the command runs in its own process
//!   group (its pid is the group id), stdin, stdout and stderr piped, no
//!   shell. Three threads start at once: a stdout reader cutting lines with
//!   a stamp taken right after each `read`, before parsing; a stderr drain
//!   keeping a bounded tail (and, on request, a full copy in a file), so a
//!   worker that writes 50 MB to stderr never blocks; and a waiter blocked in
//!   the kernel until the leader exits. From Spawned:
//!   - the ready line arrives -> **Ready** ([`Worker::wait_ready`], with the
//!     RSS from `/proc/PID/status` read right then);
//!   - a timeout, stdout closed, the process exits, a partial, malformed,
//!     non-UTF-8 or over-long line, too much noise, an unexpected message
//!     -> **Ended** with an [`Error`] (the group is killed and reaped first).
//! - **Ready**: requests are written and replies read ([`Worker::request`],
//!   or [`Worker::send`] then [`Worker::recv`]), each with its own timeout;
//!   a failure of any kind -> **Ended** with an [`Error`], as above.
//! - **Shutting down** ([`Worker::shutdown`]): the shutdown op is written
//!   and its ack awaited (ack timeout); stdin is closed; the exit is awaited
//!   (exit timeout); if it does not come, SIGTERM goes to the group, then
//!   after the grace period SIGKILL to the group. Each step's stamp is kept
//!   in the worker's [`timeline::Timeline`]. -> **Ended**, with a [`Finished`] record,
//!   `Ok` only for the exact handshake (ack, exit in time, code 0).
//! - **Ended**: the leader is reaped with `wait4` on its pid (exit status
//!   and that child's rusage: user and system CPU time, peak RSS; never
//!   `RUSAGE_CHILDREN`), whatever was left of its group was killed and
//!   reaped, the group is gone, the reader threads are joined (or, if a
//!   process that left the group still holds a pipe, detached after a
//!   bounded wait, never awaited forever).
//!
//! From any state, the harness can end a worker at once: [`Worker::kill`]
//! (SIGKILL to the group), [`Worker::terminate_with`] (SIGTERM, grace,
//! SIGKILL), dropping the [`Worker`] (on an early return, an error or a
//! panic unwinding: SIGKILL to the group and reap), [`kill_all`] for
//! every live worker at once (a Ctrl-C handler), or [`kill_group`] for one
//! worker whose handle another thread holds (a pool's supervisor kill).
//! When a leader exits by
//! itself, the waiter kills what remains of its group before reaping it
//! (the zombie leader keeps the group id from being reused meanwhile).
//!
//! To reap those orphans at once (rather than leave zombies until init
//! collects them, which can take seconds), the first spawn makes the
//! harness process a child subreaper (`PR_SET_CHILD_SUBREAPER`, Linux):
//! processes orphaned inside a worker's group are re-parented to the
//! harness and reaped by the worker's waiter thread. (A process that left
//! the group and outlives its worker is re-parented to the harness too; it
//! is not the crate's to kill, and if it dies before the harness exits it
//! stays a zombie until then.)
//!
//! Should the harness itself die first, however it dies (SIGKILL from a
//! CI job's hard timeout or the OOM killer included), every live worker's
//! group is killed with it: the first spawn also forks a small guard process
//! that is told of each group as it is registered and withdrawn, and kills
//! the groups still live when the harness's end closes its pipe (see the
//! `guard` module).
//!
//! Waiting for a line also ends when the leader has exited and stdout then
//! stays quiet for half a second without reaching EOF (a process that left
//! the group holds it open): that is [`ErrorKind::ExitedEarly`], not a
//! timeout.
//!
//! A process that is not a worker (an embedded Python script asked a
//! question, a `py-spy dump`) runs through [`run_helper`] or [`Script`]:
//! the same process group, registry and guard, a timeout, no protocol.
//!
//! A timeout runs the [`Worker::on_timeout`] hook first (given the pid, it
//! returns diagnostic text such as a stack dump), then ends the worker.
//!
//! # Transports
//!
//! A worker speaks the protocol over its stdin and stdout, or over one TCP
//! connection to the loopback address its ready line on stderr names
//! ([`Transport`], [`Command::transport`]): the same stamps, caps,
//! timeouts and errors either way.
//!
//! # Async
//!
//! With the `tokio` feature, `AsyncWorker` drives a worker from a tokio
//! service on the blocking pool, with the same guarantees; dropping it
//! (also mid-call, also at runtime shutdown) kills the whole group at once.
//!
//! # What this crate does not do
//!
//! - No protocol types of its own: messages and framing are
//!   [`worker_proto`]'s; this crate only moves them.
//! - No statistics, no trial records, no rendering: it stamps and measures
//!   one worker's life; `timeline` holds the records, `phases` and `report` make sense of the figures.
//! - No CLI and no configuration file: callers build a [`Command`].
//! - No placement policy of its own: [`affinity`] can start a worker on a
//!   CPU set and move the harness's thread, and [`affinity::place`] offers
//!   a split, but the caller decides whether to pin.
//! - No chasing of processes that leave the worker's process group
//!   (`setsid`, `setpgid`): they are outside its reach; only the pipes they
//!   may hold are handled (bounded waits). (A worker under
//!   [`Command::limits`] is the exception: whatever is left in its own
//!   cgroup is killed when the cgroup is removed, see [`cgroup`].)

#![warn(missing_docs)]

pub mod affinity;
#[cfg(feature = "tokio")]
mod async_worker;
pub mod cgroup;
mod command;
mod error;
mod group;
mod guard;
mod helper;
pub mod owned;
mod readers;
mod reap;
mod transport;
mod worker;

#[cfg(feature = "tokio")]
pub use async_worker::AsyncWorker;
pub use command::{
    Command, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_NOISE_LINES, DEFAULT_STDERR_TAIL_BYTES,
    DEFAULT_WRITE_TIMEOUT,
};
pub use error::{Error, ErrorDetail, ErrorKind, Stage};
pub use group::{kill_all, kill_group, live_groups};
pub use helper::{
    Conversation, DEFAULT_SCRIPT_TIMEOUT, HelperError, HelperOutput, Script, run_helper,
};
pub use reap::Rusage;
pub use timeline::monotonic_ns;
pub use timeline::{Escalation, ExitStatus};
pub use transport::Transport;
pub use worker::{
    Confinement, Exchange, Finished, NoiseLine, ShutdownPolicy, Stamped, Stop, TimeoutHook, Worker,
};
pub use worker_proto;

/// Tests that start processes run one at a time: `kill_all` would end the
/// workers of tests running beside it in this process (`cargo test` runs
/// a crate's tests as threads of one process).
#[cfg(test)]
pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}
