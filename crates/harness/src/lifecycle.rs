//! The one drive loop of a worker, from spawn to reaped exit: spawn with
//! the stack dump armed, wait for the ready line, the health round trips,
//! shutdown with the target's policy ([`Lifecycle::drive`]). Every task of
//! the harness goes through it, and each health reply is judged there by
//! the protocol's one rule ([`spawn::worker_proto::Reply::healthy`]): a
//! reply other than `{"op": "health", "response": {"status": "ok"}}`
//! refuses the worker, whatever the task. What a task does between the
//! steps (a sampler attached at spawn, memory readings at ready, a serve
//! phase before shutdown) it does in its [`Hooks`]. What it gives back ([`Lived`]) holds the worker's own
//! timeline as `spawn` recorded it, never stamps taken beside it.

use std::time::Duration;

use spawn::worker_proto::{Ready, Request};
use spawn::{Exchange, Finished, ShutdownPolicy, Stamped, Worker};
use timeline::{Escalation, Outcome, Stage, Timeline, Usage, WorkerRecord};

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

    /// The whole lifecycle: spawn, the ready line, the health round trips,
    /// shutdown, with `hooks` run between the steps. Never returns while
    /// the worker lives: every way out kills and reaps it.
    pub fn drive(&self, cmd: &spawn::Command, hooks: &mut dyn Hooks) -> Lived {
        let before = timeline::monotonic_ns();
        let spawned = match self.spawn(cmd) {
            Ok(s) => s,
            Err(e) => {
                return Lived {
                    pid: None,
                    timeline: Timeline::spawned_at(before),
                    ready: None,
                    rss_at_ready_bytes: None,
                    end: Err(Failure::worker(e)),
                };
            }
        };
        let pid = spawned.pid();
        let mut timeline = Timeline::spawned_at(spawned.spawned_at_ns());
        let (mut ready, mut rss_at_ready_bytes) = (None, None);
        let end = (|| {
            if let Err(stop) = hooks.spawned(pid) {
                return Err(stop.end(Stage::Startup, spawned.worker));
            }
            let mut w = spawned.wait_ready().map_err(Failure::worker)?;
            ready = Some(w.ready.value.clone());
            rss_at_ready_bytes = w.rss_at_ready_bytes;
            if let Err(stop) = hooks.ready(&mut w) {
                return Err(stop.end(Stage::Ready, w.worker));
            }
            for _ in 0..self.health {
                let x = w.health().map_err(Failure::worker)?;
                // The protocol's one rule for a health reply.
                if let Err(why) = x.reply.healthy() {
                    let stage = Stage::Request {
                        op: "health".to_owned(),
                        index: w.worker.timeline().requests.len(),
                    };
                    return Err(Halt::Refused(why.to_string()).end(stage, w.worker));
                }
            }
            if let Err(stop) = hooks.before_shutdown(&mut w) {
                return Err(stop.end(Stage::AfterServe, w.worker));
            }
            w.shutdown().map_err(Failure::worker)
        })();
        let finished = match &end {
            Ok(f) => Some(f),
            Err(f) => f.finished(),
        };
        if let Some(fin) = finished {
            timeline = fin.timeline.clone();
        }
        Lived {
            pid: Some(pid),
            timeline,
            ready,
            rss_at_ready_bytes,
            end,
        }
    }

    /// A plain lifecycle ([`Plain`] hooks): the exact handshake, with its
    /// spawn-to-ready time in ms, or the first error.
    pub fn run(&self, cmd: &spawn::Command) -> Result<(f64, Finished), Failure> {
        let lived = self.drive(cmd, &mut Plain);
        let ready_ms = lived.ready_ms().unwrap_or(f64::NAN);
        lived.end.map(|f| (ready_ms, f))
    }
}

/// What a task does between the steps of a [`Lifecycle::drive`]. Every
/// hook does nothing unless the task says otherwise.
pub trait Hooks {
    /// Right after the process started, before its ready line (a sampler
    /// attaches to `pid` here).
    fn spawned(&mut self, _pid: u32) -> Result<(), Halt> {
        Ok(())
    }
    /// Right after the ready line, before the health round trips (a memory
    /// reading at ready, a sampler stopped at ready).
    fn ready(&mut self, _worker: &mut Started<'_>) -> Result<(), Halt> {
        Ok(())
    }
    /// After the health round trips, before the shutdown (a serve phase,
    /// memory readings).
    fn before_shutdown(&mut self, _worker: &mut Started<'_>) -> Result<(), Halt> {
        Ok(())
    }
}

/// Hooks that do nothing: the plain lifecycle.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Hooks for Plain {}

/// Why a hook ends a lifecycle early: the worker ended under it, or the
/// hook refused to go on (`spawn::Stop` is the signal that ends a worker).
#[derive(Debug)]
pub enum Halt {
    /// The worker ended while the hook used it (its error; it is gone).
    Ended(spawn::Error),
    /// The task will not go on: the worker is killed and reaped, and the
    /// lifecycle fails with this message.
    Refused(String),
}

impl Halt {
    /// The failure this stop makes of the lifecycle, in `stage` (the
    /// worker's own stage when it ended): a refusal kills the worker.
    fn end(self, stage: Stage, worker: Worker) -> Failure {
        match self {
            Halt::Ended(e) => Failure::worker(e),
            Halt::Refused(message) => Failure {
                stage,
                cause: Cause::Refused {
                    message,
                    finished: Box::new(worker.kill()),
                },
            },
        }
    }
}

/// A lifecycle that did not end in the exact handshake.
#[derive(Debug)]
pub struct Failure {
    /// The stage it failed in: the worker's error's own; for a health
    /// reply the protocol's rule refused, that health request; for a task
    /// that refused, the stage of the hook that refused ([`Hooks::spawned`]
    /// start-up, [`Hooks::ready`] ready, [`Hooks::before_shutdown`] after
    /// serve).
    pub stage: Stage,
    /// What happened.
    pub cause: Cause,
}

/// What ended a lifecycle early.
#[derive(Debug)]
pub enum Cause {
    /// The worker failed (its error holds the record of its end).
    Worker(spawn::Error),
    /// The task refused to go on (a hook's refusal, or a health reply the
    /// protocol's rule refuses); the worker was killed.
    Refused {
        /// Why, for a person.
        message: String,
        /// The record of the worker's end.
        finished: Box<Finished>,
    },
}

impl Failure {
    /// The worker's own failure, in the stage its error names.
    fn worker(e: spawn::Error) -> Failure {
        Failure {
            stage: e.stage.clone(),
            cause: Cause::Worker(e),
        }
    }

    /// Whether the task refused (a hook's [`Halt::Refused`], or a health
    /// reply that is not `ok`), not the worker failing by itself.
    pub fn refused(&self) -> bool {
        matches!(self.cause, Cause::Refused { .. })
    }

    /// The record of the worker's end, when it was started.
    pub fn finished(&self) -> Option<&Finished> {
        match &self.cause {
            Cause::Worker(e) => e.finished.as_deref(),
            Cause::Refused { finished, .. } => Some(finished),
        }
    }

    /// The worker's error, when the worker failed (not the task).
    pub fn worker_error(&self) -> Option<&spawn::Error> {
        match &self.cause {
            Cause::Worker(e) => Some(e),
            Cause::Refused { .. } => None,
        }
    }

    /// The worker's error, when the worker failed (not the task).
    pub fn into_worker_error(self) -> Result<spawn::Error, String> {
        match self.cause {
            Cause::Worker(e) => Ok(e),
            Cause::Refused { message, .. } => Err(message),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            Cause::Worker(e) => e.fmt(f),
            Cause::Refused { message, .. } => f.write_str(message),
        }
    }
}

/// What one [`Lifecycle::drive`] gave.
#[derive(Debug)]
pub struct Lived {
    /// The worker's pid, when it was started.
    pub pid: Option<u32>,
    /// The worker's whole timeline as `spawn` recorded it (only the stamp
    /// taken before spawning when it could not be started).
    pub timeline: Timeline,
    /// The ready line, when it came.
    pub ready: Option<Ready>,
    /// RSS read from `/proc` right after the ready line, where available.
    pub rss_at_ready_bytes: Option<u64>,
    /// The exact handshake's record of the end, or the failure.
    pub end: Result<Finished, Failure>,
}

impl Lived {
    /// Spawn to ready-line read, in milliseconds.
    pub fn ready_ms(&self) -> Option<f64> {
        let ready = self.timeline.ready?;
        Some(ready.read_ns.saturating_sub(self.timeline.spawned_ns) as f64 / 1e6)
    }

    /// The record of the worker's end, when it was started.
    pub fn finished(&self) -> Option<&Finished> {
        match &self.end {
            Ok(f) => Some(f),
            Err(f) => f.finished(),
        }
    }

    /// This life as a trial record's worker, with the `outcome` the
    /// caller judged: its pid, its marks (a tcp worker's connection
    /// stamp with them), `wait4`'s usage, its memory and its exit.
    pub fn record(&self, outcome: Outcome) -> WorkerRecord {
        let fin = self.finished();
        let mut marks = self.timeline.marks();
        marks.connected_ns = fin.and_then(|f| f.connected_ns);
        WorkerRecord {
            pid: self.pid,
            marks,
            usage: fin.and_then(|f| f.rusage).map(|u| Usage {
                user_ns: u.user.as_nanos() as u64,
                sys_ns: u.sys.as_nanos() as u64,
                max_rss_bytes: u.max_rss_bytes,
            }),
            rss_at_ready_bytes: self.rss_at_ready_bytes,
            cgroup_peak_bytes: fin
                .and_then(|f| f.confinement.as_ref())
                .filter(|c| c.limits.memory_bytes.is_some())
                .and_then(|c| c.memory_peak_bytes),
            exit: fin.map(|f| f.status),
            escalation: fin.map_or(Escalation::None, |f| f.escalation),
            noise_lines: fin.map_or(0, |f| f.noise.len()),
            outcome,
        }
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

    /// SIGKILL to the group, then reap.
    pub fn kill(self) -> Finished {
        self.worker.kill()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standin;

    /// A task's hook that refuses at one step.
    struct RefuseAt(&'static str);

    impl Hooks for RefuseAt {
        fn spawned(&mut self, _: u32) -> Result<(), Halt> {
            self.refuse("spawned")
        }
        fn ready(&mut self, _: &mut Started<'_>) -> Result<(), Halt> {
            self.refuse("ready")
        }
        fn before_shutdown(&mut self, _: &mut Started<'_>) -> Result<(), Halt> {
            self.refuse("before_shutdown")
        }
    }

    impl RefuseAt {
        fn refuse(&self, step: &str) -> Result<(), Halt> {
            if self.0 == step {
                Err(Halt::Refused(format!("refused at {step}")))
            } else {
                Ok(())
            }
        }
    }

    fn drive(mode: &str, hooks: &mut dyn Hooks) -> Lived {
        let dir = tempfile::tempdir().unwrap();
        let t = standin::target(dir.path(), mode, "standin");
        Lifecycle::of(&t).drive(&t.spawn_command(), hooks)
    }

    #[test]
    fn a_refusing_hook_fails_in_the_stage_of_its_step_and_the_worker_is_reaped() {
        for (step, stage) in [
            ("spawned", Stage::Startup),
            ("ready", Stage::Ready),
            ("before_shutdown", Stage::AfterServe),
        ] {
            let lived = drive("ok", &mut RefuseAt(step));
            let f = lived.end.expect_err(step);
            assert_eq!(f.stage, stage, "{step}");
            assert!(f.refused(), "{step}");
            assert_eq!(f.to_string(), format!("refused at {step}"));
            assert!(f.finished().is_some(), "{step}: the worker was reaped");
        }
    }

    /// One rule for every task: a health reply without `response.status`
    /// refuses the worker in its health stage, naming the shape that was
    /// due, with no hook of the task's.
    #[test]
    fn a_health_reply_without_status_ok_refuses_the_worker_for_every_task() {
        let lived = drive("bare-health", &mut Plain);
        let f = lived
            .end
            .expect_err("a health reply without response.status");
        let health = Stage::Request {
            op: "health".into(),
            index: 1,
        };
        assert_eq!(f.stage, health);
        assert!(f.refused());
        assert_eq!(
            f.to_string(),
            r#"health was answered with `{"op":"health","ok":true}`; a worker that can serve answers {"op": "health", "response": {"status": "ok", ...}}"#
        );
        assert!(f.finished().is_some(), "the worker was reaped");
    }

    #[test]
    fn a_worker_failure_carries_the_stage_its_error_names() {
        let lived = drive("crash", &mut RefuseAt("none"));
        let f = lived.end.expect_err("a crash before ready");
        assert_eq!(f.stage, Stage::Startup);
        assert!(!f.refused());
        assert!(f.worker_error().is_some());

        let lived = drive("exit:3", &mut RefuseAt("none"));
        let f = lived.end.expect_err("an exit code of 3");
        assert_eq!(f.stage, Stage::Exit);
        assert!(lived.ready.is_some(), "it was ready first");

        let lived = drive("ok", &mut RefuseAt("none"));
        assert!(
            lived.end.is_ok(),
            "{:?}",
            lived.end.err().map(|f| f.to_string())
        );
    }
}
