//! The one place that runs a worker from spawn to reaped exit: spawn with
//! the stack dump armed, wait for the ready line, health round trips,
//! shutdown with the target's policy. Every task of the harness goes
//! through it; what a task does between ready and shutdown (a serve phase,
//! memory readings) it does on [`Started::worker`].

use std::time::Duration;

use spawn::worker_proto::{Ready, Request};
use spawn::{Exchange, Finished, ShutdownPolicy, Stamped, Worker};

use crate::pyspy::{self, PySpy};
use crate::target::Target;

/// How one worker is driven: timeouts, health round trips, shutdown
/// policy, and what a timeout shows.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    /// How long to wait for the ready line.
    pub ready_timeout: Duration,
    /// How long to wait for each reply.
    pub request_timeout: Duration,
    /// Health round trips after ready.
    pub health: usize,
    /// Acknowledgement and exit timeouts, grace before SIGKILL.
    pub shutdown: ShutdownPolicy,
    /// What a ready or request timeout puts into the error.
    pub stacks: StackDump,
}

/// What a timeout puts into the error before the worker is killed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum StackDump {
    /// The Python stack of every thread of the worker and its Python
    /// children, read by py-spy linked as a library (`pystacks`): nothing
    /// to install. When the kernel refuses, the error says why and how to
    /// allow it.
    Library,
    /// The same from a `py-spy` binary the target names (`py_spy`).
    PySpy(PySpy),
    /// Nothing (a timeout that is expected, such as a benchmark's own).
    Off,
}

impl Lifecycle {
    /// The target's timeouts, health count and shutdown policy, with
    /// py-spy located for stack dumps on timeouts.
    pub fn of(target: &Target) -> Lifecycle {
        Lifecycle {
            ready_timeout: target.ready_timeout,
            request_timeout: target.request_timeout,
            health: target.health,
            shutdown: target.shutdown_policy(),
            stacks: pyspy::locate(target).map_or(StackDump::Library, StackDump::PySpy),
        }
    }

    /// Starts `cmd` in its own process group, with the stack dump armed.
    pub fn spawn(&self, cmd: &spawn::Command) -> Result<Spawned<'_>, spawn::Error> {
        let mut worker = Worker::spawn(cmd)?;
        match &self.stacks {
            StackDump::PySpy(spy) => {
                let spy = spy.clone();
                worker.on_timeout(move |pid| Some(pyspy::timeout_stacks(Some(&spy), pid)));
            }
            StackDump::Library => {
                worker.on_timeout(|pid| Some(pyspy::timeout_stacks(None, pid)));
            }
            StackDump::Off => {}
        }
        Ok(Spawned {
            worker,
            lifecycle: self,
        })
    }

    /// A whole plain lifecycle: spawn, ready, the health round trips,
    /// shutdown. The exact handshake, with its spawn-to-ready time in ms
    /// ([`Started::ready_ms`]), or the first error.
    pub fn run(&self, cmd: &spawn::Command) -> Result<(f64, Finished), spawn::Error> {
        let mut started = self.spawn(cmd)?.wait_ready()?;
        let ready_ms = started.ready_ms();
        for _ in 0..self.health {
            started.health()?;
        }
        Ok((ready_ms, started.shutdown()?))
    }
}

/// A worker that was started and has not answered yet.
#[derive(Debug)]
pub struct Spawned<'a> {
    worker: Worker,
    lifecycle: &'a Lifecycle,
}

impl<'a> Spawned<'a> {
    /// The worker's pid (its process group id).
    pub fn pid(&self) -> u32 {
        self.worker.pid()
    }

    /// When it was spawned, monotonic ns.
    pub fn spawned_at_ns(&self) -> u64 {
        self.worker.spawned_at_ns()
    }

    /// Waits for the ready line within the lifecycle's ready timeout.
    pub fn wait_ready(mut self) -> Result<Started<'a>, spawn::Error> {
        let ready = self.worker.wait_ready(self.lifecycle.ready_timeout)?;
        let rss_at_ready_bytes = self.worker.rss_at_ready_bytes();
        Ok(Started {
            worker: self.worker,
            ready,
            rss_at_ready_bytes,
            lifecycle: self.lifecycle,
        })
    }
}

/// A worker that wrote its ready line.
#[derive(Debug)]
pub struct Started<'a> {
    /// The live worker, for requests between ready and shutdown.
    pub worker: Worker,
    /// The ready line, stamped when the harness read it.
    pub ready: Stamped<Ready>,
    /// RSS read from `/proc` right after the ready line, where available.
    pub rss_at_ready_bytes: Option<u64>,
    lifecycle: &'a Lifecycle,
}

impl Started<'_> {
    /// Spawn to ready-line read, in milliseconds.
    pub fn ready_ms(&self) -> f64 {
        self.ready
            .read_at_ns
            .saturating_sub(self.worker.spawned_at_ns()) as f64
            / 1e6
    }

    /// When the worker was ready: its own `t_ns` stamp on the ready line if
    /// it sent one, else when the harness read the line.
    pub fn ready_at_ns(&self) -> u64 {
        self.ready.value.t_ns.unwrap_or(self.ready.read_at_ns)
    }

    /// One health round trip within the request timeout.
    pub fn health(&mut self) -> Result<Exchange, spawn::Error> {
        self.worker
            .request(&Request::health(), self.lifecycle.request_timeout)
    }

    /// The polite end: shutdown op, acknowledgement, exit, with the
    /// lifecycle's policy (SIGTERM, grace, SIGKILL when it does not come).
    pub fn shutdown(self) -> Result<Finished, spawn::Error> {
        self.worker.shutdown(&self.lifecycle.shutdown)
    }

    /// The shutdown with a longer exit timeout (a wrapper such as a
    /// profiler writes its output after the worker exits).
    pub fn shutdown_with_extra_exit_time(self, extra: Duration) -> Result<Finished, spawn::Error> {
        let mut policy = self.lifecycle.shutdown;
        policy.exit_timeout += extra;
        self.worker.shutdown(&policy)
    }

    /// SIGKILL to the group, then reap.
    pub fn kill(self) -> Finished {
        self.worker.kill()
    }
}
