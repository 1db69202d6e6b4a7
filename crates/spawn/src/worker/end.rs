//! The end of a worker: its shutdown (the request, the wait, the
//! escalation the policy allows), a kill, and the reap and record of it all.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use worker_proto::{Message, Reply, Request, encode};

use super::failure::{describe, lost_waiter};
use super::records::{Confinement, Finished, ShutdownPolicy};
use super::{JOIN_BOUND, Worker};
use crate::Escalation;
use crate::error::{Error, ErrorKind, Stage};
use crate::{group, monotonic_ns};

impl Worker {
    /// Ends the worker politely, escalating as needed: writes the shutdown
    /// op, waits for its ack (`ack_timeout`), closes stdin, waits for the
    /// exit (`exit_timeout`), then SIGTERM to the group, `grace`, SIGKILL to
    /// the group; reaps. Each step is stamped.
    ///
    /// `Ok` only for the exact handshake: ack in time, exit in time, exit
    /// code 0. Anything else is an `Err` whose `finished` holds the record
    /// of the end (the worker is always ended and reaped).
    pub fn shutdown(mut self, policy: &ShutdownPolicy) -> Result<Finished, Error> {
        let ack = format!(
            r#"the shutdown ack {{"op": "shutdown"}} on {}"#,
            self.wire().from
        );
        let ack = ack.as_str();
        if self.ended {
            return Err(self.not_running(Stage::Shutdown, ack.to_owned()));
        }
        let mut problem: Option<(ErrorKind, Stage, String)> = None;

        // 1. The shutdown op.
        let line = encode(&Request::shutdown());
        if let Some(link) = self.link.as_mut() {
            let at = monotonic_ns();
            match link.write_line(&line, self.write_timeout) {
                Ok(()) => self.timeline.end.shutdown_sent_ns = Some(at),
                Err(e) => {
                    let kind = match e.kind() {
                        io::ErrorKind::BrokenPipe => self.closed_kind(None),
                        io::ErrorKind::TimedOut => ErrorKind::Timeout {
                            after: self.write_timeout,
                        },
                        _ => ErrorKind::Io(e),
                    };
                    problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                }
            }
        }

        // 2. Its ack (replies still owed to earlier requests are skipped).
        if problem.is_none() {
            let deadline = Instant::now() + policy.ack_timeout;
            loop {
                match self.next_message(deadline, policy.ack_timeout, &Stage::Shutdown) {
                    Ok((Message::Reply(Reply::Shutdown(_)), at, _)) => {
                        self.timeline.end.ack_read_ns = Some(at);
                        break;
                    }
                    Ok((Message::Reply(r), at, _)) if self.answers(&r).is_some() => {
                        let pos = self.answers(&r).expect("checked in the guard");
                        self.answered(pos, at);
                    }
                    Ok((m, ..)) => {
                        let kind = ErrorKind::UnexpectedReply { got: describe(&m) };
                        problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                        break;
                    }
                    Err(kind) => {
                        if matches!(kind, ErrorKind::Timeout { .. }) {
                            self.run_hook();
                        }
                        problem = Some((kind, Stage::Shutdown, ack.to_owned()));
                        break;
                    }
                }
            }
        }

        // 3. EOF on the way in (stdin closed, or the connection shut
        // down): the protocol's other way to ask for an exit.
        self.idle_stdin = None;
        if self.link.take().is_some() {
            self.timeline.end.stdin_closed_ns = Some(monotonic_ns());
        }

        // 4. The exit, escalating if it does not come. A worker built to
        // outlive its reply (a daemon) is sent its stop signal first, and
        // its exit awaited from there.
        let mut exited = false;
        let mut expected = "the worker to exit after its shutdown ack".to_owned();
        if let Some(stop) = policy
            .stop_for(self.served_over())
            .filter(|_| problem.is_none())
        {
            exited = self.wait_exit_until(Instant::now() + stop.after.min(policy.exit_timeout));
            if !exited && let Some(at) = self.signal(stop.signal) {
                self.timeline.end.stop_sent_ns = Some(at);
                expected = format!(
                    "the worker to exit after its stop signal ({})",
                    timeline::signal_name(stop.signal)
                );
            }
        }
        if !exited && !self.wait_exit_until(Instant::now() + policy.exit_timeout) {
            if problem.is_none() {
                let kind = ErrorKind::Timeout {
                    after: policy.exit_timeout,
                };
                problem = Some((kind, Stage::Exit, expected));
            }
            self.escalate(policy.grace);
        }
        self.close_out();
        let finished = self.record();
        if problem.is_none() && !finished.status.success() {
            let expected = "exit code 0 after the shutdown ack".to_owned();
            problem = Some((ErrorKind::FailedExit, Stage::Exit, expected));
        }
        match problem {
            None => Ok(finished),
            Some((kind, stage, expected)) => Err(self.error(kind, stage, expected, finished)),
        }
    }

    /// Kills (SIGKILL) the whole group now and reaps the worker.
    pub fn kill(mut self) -> Finished {
        self.force_kill();
        self.close_out();
        self.record()
    }

    /// SIGTERM to the group, up to `policy.grace` for the exit, then SIGKILL
    /// to the group; reaps the worker. No shutdown op is sent.
    pub fn terminate_with(mut self, policy: &ShutdownPolicy) -> Finished {
        self.escalate(policy.grace);
        self.close_out();
        self.record()
    }

    // ---- internals ------------------------------------------------------

    /// Whether the exit is known, without waiting.
    pub(super) fn try_exit(&mut self) -> bool {
        if self.exit.is_none() {
            match self.exit_rx.try_recv() {
                Ok(info) => self.exit = Some(info),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.exit = Some(lost_waiter()),
            }
        }
        self.exit.is_some()
    }

    /// Waits for the exit until `deadline`; returns whether it is known.
    pub(super) fn wait_exit_until(&mut self, deadline: Instant) -> bool {
        if self.try_exit() {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match self.exit_rx.recv_timeout(left) {
            Ok(info) => self.exit = Some(info),
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => self.exit = Some(lost_waiter()),
        }
        true
    }

    /// Sends `sig` to the group unless the leader has exited (the waiter
    /// then kills the rest of the group itself); returns the stamp taken
    /// just before sending.
    pub(super) fn signal(&mut self, sig: i32) -> Option<u64> {
        if self.try_exit() || self.leader_exited.load(Ordering::SeqCst) {
            return None;
        }
        let at = monotonic_ns();
        group::signal(self.pid as i32, sig);
        Some(at)
    }

    /// SIGTERM, `grace`, SIGKILL, each only if still needed.
    pub(super) fn escalate(&mut self, grace: Duration) {
        if let Some(at) = self.signal(libc::SIGTERM) {
            self.timeline.end.term_sent_ns = Some(at);
            self.escalation = Escalation::Term;
            if self.wait_exit_until(Instant::now() + grace) {
                return;
            }
        }
        self.force_kill();
    }

    /// SIGKILL to the group unless already exited, then wait for the reap.
    pub(super) fn force_kill(&mut self) {
        if let Some(at) = self.signal(libc::SIGKILL) {
            self.timeline.end.kill_sent_ns = Some(at);
            self.escalation = Escalation::Kill;
        }
        if self.exit.is_none() {
            // A SIGKILLed child always exits; the waiter reports it once
            // the group is reaped.
            match self.exit_rx.recv() {
                Ok(info) => self.exit = Some(info),
                Err(_) => self.exit = Some(lost_waiter()),
            }
        }
    }

    /// After the exit: close the pipes and collect the reader threads,
    /// waiting a bounded time for them.
    pub(super) fn close_out(&mut self) {
        if self.ended {
            return;
        }
        debug_assert!(self.exit.is_some());
        self.link = None;
        self.idle_stdin = None;
        self.events_tx = None;
        self.frames = None;
        let deadline = Instant::now() + JOIN_BOUND;
        if let Some(t) = self.stdout_thread.take() {
            t.join_by(deadline);
        }
        if let Some(t) = self.stderr_thread.take() {
            t.join_by(deadline);
        }
        if let Some(t) = self.socket_thread.take() {
            t.join_by(deadline);
        }
        if let Some(mut cg) = self.cgroup.take() {
            self.confinement = Some(Confinement {
                limits: *cg.limits(),
                version: cg.version(),
                oom_kills: cg.oom_kills(),
                join_ns: cg.join_ns(),
                memory_peak_bytes: cg.memory_peak_bytes(),
            });
            cg.remove();
        }
        self.ended = true;
    }

    pub(super) fn record(&mut self) -> Finished {
        let exit = self.exit.unwrap_or_else(lost_waiter);
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        self.timeline.end.exited_ns = Some(exit.exited_at_ns);
        Finished {
            pid: self.pid,
            status: exit.status,
            rusage: exit.rusage,
            timeline: self.timeline.clone(),
            escalation: self.escalation,
            noise: self.noise.clone(),
            stderr_tail: tail.text(),
            stderr_bytes: tail.total(),
            stderr_file_error: tail.file_error(),
            group_gone: exit.group_gone,
            connected_ns: self.connected_ns,
            confinement: self.confinement.clone(),
        }
    }
}
